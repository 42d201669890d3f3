"""Replay a recording in a fresh sim and report where it diverged.

``replay(path)`` opens the sim (``open_robot("sim", ...)``) with the recorded scene, seed and
robot options, then re-issues every recorded call (``reset``, payloads, external forces) and
every accepted command at the step it was made (the ``step`` field), and compares what the sim
reads with what was recorded, per signal:

- ``joints``: ``max |q_sim - q_rec|`` over the joints, rad;
- ``tcp``: TCP position from forward kinematics, ``|p_sim - p_rec|``, m;
- ``wrench``: F/T sample, ``max |w_sim - w_rec|`` over the six components, N and N m;
- ``imu``: specific force, ``max |a_sim - a_rec|``, m/s^2.

A signal diverges at the first comparison above its tolerance. A sim recording replayed in the
sim reproduces itself exactly (the sim is deterministic); a hardware recording replayed in the
sim shows the model's error. For a hardware recording the sim starts from the first recorded
joint state.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.backends import open_robot
from twin.record.reader import Message, Recording, RecordingError, read_recording
from twin.record.robot import RECORDED_CALLS, urdf_sha256
from twin.robot import COMMAND_FIELDS, JointCommand, Robot, RobotState

#: Signal -> (unit, default tolerance): the default is "reproduced", for sim-to-sim replay.
SIGNALS: dict[str, tuple[str, float]] = {
    "joints": ("rad", 1e-9),
    "tcp": ("m", 1e-9),
    "wrench": ("N, N m", 1e-9),
    "imu": ("m/s^2", 1e-9),
}

#: The most steps replay runs per message that carries a step, and beyond that in all: every
#: read and every write is recorded, so a recorded run has about one such message per step or
#: more; a step counter further ahead than ``STEPS_PER_MESSAGE * messages + SPARE_STEPS`` is
#: crafted or damaged, and is refused instead of replayed for ever.
STEPS_PER_MESSAGE = 4
SPARE_STEPS = 2000
#: The recorded sim options replay uses, with their types and bounds (``_sim_options``).
_OPTION_BOUNDS: dict[str, tuple[type | tuple[type, ...], float, float]] = {
    "seed": (int, 0, 2**63 - 1),
    "control_period_s": ((int, float), 1e-4, 1.0),
    "physics_dt": ((int, float), 1e-5, 0.1),
    "watchdog_s": ((int, float), 0.0, 3600.0),
    "joint_damping": ((int, float), 0.0, 1e6),
    "joint_friction": ((int, float), 0.0, 1e6),
}
#: Options a recording may hold that replay passes on unchecked (``scene``: the sim's scene
#: loader checks it) or drops (``gui``: replay is headless).
_OPTION_FLAGS = ("joint_limits", "sensors")
#: The sim's own defaults of the two periods (``sim.PyBulletRobot``; ``twin`` does not import it).
SIM_DEFAULTS = {"control_period_s": 0.005, "physics_dt": 0.001}
#: The most physics substeps per control period replay accepts.
MAX_SUBSTEPS = 100
#: Bound on a recorded call's numeric arguments (SI units): a plausible force, mass or angle.
MAX_CALL_ARGUMENT = 1e6


@dataclass(frozen=True)
class Divergence:
    """One signal's comparison: ``first_t_us`` (robot time) and ``first_size`` of the first
    difference above ``tolerance`` (None and 0 when there is none), and the largest difference."""

    signal: str
    unit: str
    tolerance: float
    compared: int
    first_t_us: int | None
    first_size: float
    max_size: float

    @property
    def diverged(self) -> bool:
        return self.first_t_us is not None


@dataclass
class ReplayReport:
    """Per-signal divergences and their time series (robot time us, difference)."""

    path: pathlib.Path
    divergences: dict[str, Divergence]
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(repr=False)
    #: For a file cut short: ``partial: N of M messages, cut at t = T s``; else None.
    partial_line: str | None = None

    @property
    def reproduced(self) -> bool:
        """True when no signal diverged (in the part of the file that was there)."""
        return not any(d.diverged for d in self.divergences.values())

    @property
    def partial(self) -> bool:
        """True when the file was cut short: only what it holds was replayed."""
        return self.partial_line is not None

    def table(self) -> str:
        """A plain-text table, one row per signal."""
        head = ("signal", "unit", "compared", "tolerance", "first divergence s", "size", "max")
        rows = [head]
        for d in self.divergences.values():
            first = "-" if d.first_t_us is None else f"{d.first_t_us * 1e-6:.3f}"
            size = "-" if d.first_t_us is None else f"{d.first_size:.3g}"
            rows.append(
                (
                    d.signal,
                    d.unit,
                    str(d.compared),
                    f"{d.tolerance:g}",
                    first,
                    size,
                    f"{d.max_size:.3g}",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    def plot(self, path: str | os.PathLike) -> pathlib.Path:
        """A PNG of every signal's difference against time (log scale), tolerances dashed."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(
            len(self.series), 1, figsize=(8, 2.2 * len(self.series)), squeeze=False
        )
        for ax, (name, (t_us, diff)) in zip(axes[:, 0], self.series.items()):
            d = self.divergences[name]
            ax.semilogy(t_us * 1e-6, np.maximum(diff, 1e-16), lw=1)
            ax.axhline(d.tolerance, ls="--", color="k", lw=0.8)
            if d.first_t_us is not None:
                ax.axvline(d.first_t_us * 1e-6, color="r", lw=0.8)
            ax.set_ylabel(f"{name} [{d.unit}]")
        axes[-1, 0].set_xlabel("robot time [s]")
        fig.suptitle(f"replay of {self.path.name}: difference sim - recording")
        fig.tight_layout()
        out = pathlib.Path(path)
        fig.savefig(out, dpi=100)
        plt.close(fig)
        return out


def _sim_options(recording: Recording) -> dict:
    """The sim options to replay ``recording`` with, each checked against its type and bounds
    (``_OPTION_BOUNDS``): a crafted option is refused, not handed to the sim."""
    meta = recording.metadata
    where = f"{str(recording.path)!r}: metadata"
    if meta.get("backend") == "sim":
        options = meta.get("robot_options") or {}
        if not isinstance(options, dict):
            raise RecordingError(f"{where} robot_options: expected an object, found {options!r}")
    else:
        options = {k: meta[k] for k in ("scene", "seed") if meta.get(k) is not None}
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key == "gui":
            continue
        if key == "scene":
            if value is not None and not isinstance(value, str):
                raise RecordingError(f"{where} scene: expected a name or path, found {value!r}")
        elif key in _OPTION_FLAGS:
            if not isinstance(value, bool):
                raise RecordingError(f"{where} {key}: expected true or false, found {value!r}")
        elif key in _OPTION_BOUNDS:
            kinds, low, high = _OPTION_BOUNDS[key]
            if value is None and key == "watchdog_s":
                pass
            elif (
                isinstance(value, bool)
                or not isinstance(value, kinds)
                or not (low <= value <= high)
            ):
                raise RecordingError(
                    f"{where} {key}: expected a number in [{low:g}, {high:g}], found {value!r}"
                )
        else:
            known = ["scene", "gui", *_OPTION_FLAGS, *_OPTION_BOUNDS]
            raise RecordingError(f"{where}: unknown robot option {key!r}; expected some of {known}")
        out[key] = value
    period = out.get("control_period_s", SIM_DEFAULTS["control_period_s"])
    dt = out.get("physics_dt", SIM_DEFAULTS["physics_dt"])
    if period / dt > MAX_SUBSTEPS:
        raise RecordingError(
            f"{where}: control_period_s / physics_dt = {period / dt:g}; expected at most "
            f"{MAX_SUBSTEPS} physics steps per control period"
        )
    return out


def _open_sim(recording: Recording) -> Robot:
    options = _sim_options(recording)
    try:
        return open_robot("sim", **options)
    except Exception as e:  # the sim's own checks (a missing scene, periods that do not divide)
        raise RecordingError(
            f"{str(recording.path)!r}: the sim refused the recorded options {options} "
            f"({type(e).__name__}: {e})"
        ) from e


def _check_steps(recording: Recording) -> None:
    """Steps never go back, and the last is bounded by the file's messages (module constants)."""
    previous, counted = 0, 0
    for m in recording.messages:
        step = m.data.get("step") if m.topic in _STEPPED else None
        if step is None:
            continue
        counted += 1
        if step < previous:
            raise RecordingError(
                f"{str(recording.path)!r}: {m.where}: step {step}; expected no less than the "
                f"previous message's {previous}"
            )
        previous = step
    bound = STEPS_PER_MESSAGE * counted + SPARE_STEPS
    if previous > bound:
        raise RecordingError(
            f"{str(recording.path)!r}: step counter {previous}; expected at most {bound} for "
            f"{counted} messages with steps ({STEPS_PER_MESSAGE} per message + {SPARE_STEPS})"
        )


def replay(
    path: str | os.PathLike,
    tolerances: dict[str, float] | None = None,
    robot: Robot | None = None,
) -> ReplayReport:
    """Replay ``path`` in a fresh sim (or in ``robot``, which is then not closed) and compare.

    ``tolerances``: signal -> tolerance, overriding ``SIGNALS``' defaults. Raises
    ``RecordingError`` for a file that is not a replayable twin recording.
    """
    recording = read_recording(path)
    tol = {name: t for name, (_, t) in SIGNALS.items()}
    for name, value in (tolerances or {}).items():
        if name not in SIGNALS:
            raise ValueError(f"unknown replay signal {name!r}; expected one of {list(SIGNALS)}")
        tol[name] = float(value)
    if not recording.on("/robot/state"):
        cut = (
            ""
            if recording.cut is None
            else f" (the file is cut short at byte {recording.cut.offset})"
        )
        raise RecordingError(f"{str(recording.path)!r} has no /robot/state messages to replay{cut}")
    _check_steps(recording)
    sim = robot if robot is not None else _open_sim(recording)
    try:
        digest = recording.metadata.get("urdf_sha256")
        if digest is not None and digest != urdf_sha256(sim.model.urdf_path):
            raise RecordingError(
                f"{str(recording.path)!r} was recorded with another URDF "
                f"({recording.metadata.get('urdf')}); expected the replay robot's "
                f"{sim.model.urdf_path.name}"
            )
        series = _run(recording, sim)
    finally:
        if robot is None:
            sim.close()
    divergences = {}
    for name, (t_us, diff) in series.items():
        diff = np.where(np.isnan(diff), np.inf, diff)  # a NaN recorded is not reproduced
        over = np.flatnonzero(diff > tol[name])
        first = int(over[0]) if len(over) else None
        divergences[name] = Divergence(
            name,
            SIGNALS[name][0],
            tol[name],
            len(diff),
            None if first is None else int(t_us[first]),
            0.0 if first is None else float(diff[first]),
            float(diff.max()) if len(diff) else 0.0,
        )
    partial = recording.partial_line() if recording.cut is not None else None
    return ReplayReport(recording.path, divergences, series, partial)


_STEPPED = ("/robot/state", "/robot/command", "/robot/call", "/events")


def _run(recording: Recording, sim: Robot) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    samples: dict[str, list[tuple[int, float]]] = {name: [] for name in SIGNALS}
    steps = 0
    state: RobotState | None = None
    state_step = -1
    if recording.metadata.get("backend") != "sim" and callable(getattr(sim, "reset", None)):
        first = recording.on("/robot/state")[0]
        _on_sim(recording, first, sim.reset, q=np.array(first.data["q"]))
    for m in recording.messages:
        if m.topic not in _STEPPED:
            continue  # /tf, /tcp: derived from the joints
        while steps < m.data["step"]:
            sim.step()
            steps += 1
        if m.topic == "/robot/call":
            positional, keywords = _call_arguments(recording, m)
            _on_sim(recording, m, getattr(sim, m.data["call"]), *positional, **keywords)
            state_step = -1
            continue
        if m.topic == "/robot/command":
            if m.data["accepted"]:
                if any(m.data[f] is None for f in COMMAND_FIELDS):
                    raise RecordingError(
                        f"{str(recording.path)!r}: {m.where}: an accepted command without "
                        f"numbers; expected {', '.join(COMMAND_FIELDS)} as six numbers each"
                    )
                command = [np.array(m.data[f], dtype=float) for f in COMMAND_FIELDS]
                _on_sim(recording, m, sim.write, JointCommand(*command))
            continue
        if m.topic != "/robot/state":
            continue
        if state_step != steps:
            state, state_step = sim.read(), steps
        data, t_us = m.data, m.data["t_us"]
        q_rec = np.array(data["q"], dtype=float)
        samples["joints"].append((t_us, float(np.max(np.abs(state.q - q_rec)))))
        if np.all(np.isfinite(q_rec)):
            p_sim = sim.model.fk(state.q, "tcp")[:3, 3]
            p_rec = sim.model.fk(q_rec, "tcp")[:3, 3]
            samples["tcp"].append((t_us, float(np.linalg.norm(p_sim - p_rec))))
        else:  # a joint recorded as NaN or infinite has no TCP: not reproduced
            samples["tcp"].append((t_us, np.inf))
        if data["wrench"] is not None:
            w = state.wrench
            rec = np.array(data["wrench"]["wrench"], dtype=float)
            diff = np.inf if w is None else float(np.max(np.abs(w.wrench - rec)))
            samples["wrench"].append((t_us, diff))
        if data["imu"] is not None:
            imu = state.imu
            rec = np.array(data["imu"]["specific_force"], dtype=float)
            diff = np.inf if imu is None else float(np.max(np.abs(imu.specific_force - rec)))
            samples["imu"].append((t_us, diff))
    return {
        name: (
            np.array([t for t, _ in s], dtype=np.int64),
            np.array([d for _, d in s], dtype=float),
        )
        for name, s in samples.items()
        if s
    }


def _call_arguments(recording: Recording, m: Message) -> tuple[list, dict]:
    """A recorded call's positional and keyword arguments, checked: one of ``RECORDED_CALLS``,
    every number finite and within ``MAX_CALL_ARGUMENT``."""
    where = f"{str(recording.path)!r}: {m.where}"
    name, args = m.data["call"], dict(m.data["args"])
    if name not in RECORDED_CALLS:
        raise RecordingError(f"{where}: call {name!r}; expected one of {list(RECORDED_CALLS)}")
    positional = args.pop("args", [])
    if not isinstance(positional, list):
        raise RecordingError(f"{where}: args.args: expected a list, found {positional!r}")
    for value in _numbers([positional, args]):
        if not abs(value) <= MAX_CALL_ARGUMENT:  # also NaN; exact for integers of any size
            text = repr(value) if len(repr(value)) <= 24 else repr(value)[:21] + "..."
            raise RecordingError(
                f"{where}: call {name!r}: expected finite arguments within "
                f"+-{MAX_CALL_ARGUMENT:g}, found {text}"
            )
    return positional, args


def _numbers(value: Any):
    """Every number in a decoded JSON value (booleans are not numbers)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)


def _on_sim(recording: Recording, m: Message, call, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` on the sim; the sim refusing what the recording says it did
    (a bad argument, an accepted command it refuses) is a ``RecordingError`` naming the message."""
    try:
        return call(*args, **kwargs)
    except (ValueError, TypeError, OverflowError) as e:
        raise RecordingError(
            f"{str(recording.path)!r}: {m.where}: the sim refused it "
            f"({type(e).__name__}: {e}); expected what the recorded robot accepted"
        ) from e
