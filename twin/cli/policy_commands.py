"""The commands of ``twin run``: which ones the policy reads, and setting them from the command
line or a steps file (``KIND.NAME=V[,V...]``). Its own module so that ``twin --help`` does not
load the controller."""

from __future__ import annotations

from twin.cli.common import UsageError, choice
from twin.control import CommandSource

#: Kinds of command a policy can read (``cmd.<kind>.<name>`` in the exploy convention).
COMMAND_KINDS = ("se3_pose", "joint_pos", "float", "boolean", "se2_velocity")
#: s: the longest one step of ``twin run`` may hold its commands (``--duration``, a steps file's
#: ``duration_s``): an hour is far beyond any reach or tracking step, and keeps a mistyped
#: ``1e300`` from running for ever (issue 31).
MAX_STEP_S = 3600.0


def step_duration(value: object, where: str) -> float:
    """A step's duration in (0, ``MAX_STEP_S``] s; ``UsageError`` naming ``where`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_STEP_S:
        raise UsageError(f"{where}: expected a duration in (0, {MAX_STEP_S:g}] s, got {value!r}")
    return float(value)


class PolicyCommands(CommandSource):
    """A ``CommandSource`` that records which commands the policy reads: ``required`` maps a
    kind (``COMMAND_KINDS``) to its command names, filled by the controller's ``init``."""

    def __init__(self) -> None:
        super().__init__()
        self.required: dict[str, list[str]] = {kind: [] for kind in COMMAND_KINDS}

    def _need(self, kind: str, name: str) -> None:
        if name not in self.required[kind]:
            self.required[kind].append(name)

    def init_se3_pose(self, info) -> None:
        self._need("se3_pose", info.command_name)
        super().init_se3_pose(info)

    def init_joint_position(self, info) -> None:
        self._need("joint_pos", info.command_name)
        super().init_joint_position(info)

    def init_float_value(self, info) -> None:
        self._need("float", info.command_name)
        super().init_float_value(info)

    def init_boolean_selector(self, info) -> None:
        self._need("boolean", info.command_name)
        super().init_boolean_selector(info)

    def init_se2_velocity(self, info) -> None:
        self._need("se2_velocity", info.command_name)
        super().init_se2_velocity(info)

    def set(self, key: str, value: object) -> None:
        """Set the command ``key`` = ``"<kind>.<name>"`` (the policy must read it)."""
        kind, _, name = key.partition(".")
        choice(kind, COMMAND_KINDS, "command kind")
        if not self.required[kind]:
            reads = [f"{k}.{n}" for k, names in self.required.items() for n in names]
            raise UsageError(
                f"command {key}: the policy reads no {kind} command; it reads: "
                + (", ".join(reads) or "no command")
            )
        choice(name, self.required[kind], f"{kind} command")
        setter = {
            "se3_pose": self.set_se3_pose,
            "joint_pos": self.set_joint_positions,
            "float": self.set_float,
            "boolean": lambda n, v: self.set_boolean(n, _boolean(v)),
            "se2_velocity": self.set_se2_velocity,
        }[kind]
        try:
            setter(name, value)
        except (ValueError, TypeError) as e:
            raise UsageError(f"command {key}: {e}") from e


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"boolean command value {value!r}: expected true or false")


def _command_value(text: str, where: str) -> object:
    """``--command`` value: comma-separated numbers (one number a scalar), or true/false."""
    parts = [p for p in text.split(",") if p.strip()]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        if len(parts) == 1:
            return parts[0].strip()  # a boolean, checked when set
        raise UsageError(f"{where}: {text!r} is not a list of numbers") from None
    return values[0] if len(values) == 1 else values


def parse_command(text: str) -> tuple[str, object]:
    """``KIND.NAME=V[,V...]`` -> (key, value)."""
    key, sep, value = text.partition("=")
    if not sep or "." not in key:
        raise UsageError(
            f"--command {text!r}: expected KIND.NAME=VALUE[,VALUE...] (kinds: "
            f"{', '.join(COMMAND_KINDS)}), e.g. float.speed=0.3"
        )
    return key.strip(), _command_value(value, f"--command {key}")
