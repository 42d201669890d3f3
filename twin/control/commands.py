"""``CommandSource``: a command interface whose values tests, environments or a UI set.

    commands = CommandSource()
    commands.set_se3_pose("target", pose7)          # cmd.se3_pose.target
    commands.set_joint_positions("goal", q)         # cmd.joint_pos.goal, (n,) rad
    commands.set_float("speed", 0.3)                # cmd.float.speed

A command that was never set has no value: the controller's cycle fails (``update`` returns
``False``) rather than feeding the policy an invented default. Setters validate (shape, finite,
ranges from the model's metadata once registered) and raise ``ValueError``; each replaces the
stored value atomically, so another thread may set commands while the controller runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from twin.control.interfaces import (
    CommandInfo,
    CommandInterface,
    FloatCommandInfo,
    JointPositionCommandGroupInfo,
    JointPositionCommandInfo,
    Se2VelocityCommandInfo,
)
from twin.control.metadata import Range, Se2VelocityRanges
from twin.spatial import SE3

__all__ = ["CommandSource"]


def _finite_vector(value: object, size: int, what: str) -> np.ndarray:
    arr = np.array(value, dtype=float).reshape(-1)
    if arr.shape != (size,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be {size} finite numbers, got {value!r}")
    arr.flags.writeable = False
    return arr


class CommandSource(CommandInterface):
    """Settable commands behind ``CommandInterface``; see the module docstring."""

    def __init__(self) -> None:
        self._se2: dict[str, np.ndarray] = {}
        self._se2_ranges: dict[str, Se2VelocityRanges | None] = {}
        self._se3: dict[str, np.ndarray] = {}
        self._bool: dict[str, bool] = {}
        self._float: dict[str, float] = {}
        self._float_ranges: dict[str, Range | None] = {}
        self._joints: dict[str, dict[str, float]] = {}
        self._joint_names: dict[str, list[str]] = {}
        self._joint_cache: dict[
            JointPositionCommandGroupInfo, tuple[dict[str, float], np.ndarray]
        ] = {}

    # ------------------------------------------------------------------ setters
    def set_se2_velocity(self, name: str, velocity: object) -> None:
        """``cmd.se2_velocity.<name>``: (3,) ``[vx, vy, wz]`` m/s, m/s, rad/s, within its ranges."""
        v = _finite_vector(velocity, 3, f"SE(2) velocity command {name!r}")
        ranges = self._se2_ranges.get(name)
        if ranges is not None:
            for value, rng, axis in zip(
                v, ranges.as_tuple(), ("lin_vel_x", "lin_vel_y", "ang_vel_z")
            ):
                if not rng.contains(value):
                    raise ValueError(
                        f"SE(2) velocity command {name!r}: {axis}={value} outside [{rng.lo}, {rng.hi}]"
                    )
        self._se2[name] = v

    def set_se3_pose(self, name: str, pose: object) -> None:
        """``cmd.se3_pose.<name>``: (7,) ``[px, py, pz, qw, qx, qy, qz]``, a (4, 4) matrix or an
        ``SE3``, in the world (= base) frame; stored with a unit, canonical quaternion."""
        if isinstance(pose, SE3):
            se3 = pose
        else:
            arr = np.asarray(pose, dtype=float)
            if arr.shape == (4, 4):
                se3 = SE3.from_matrix(arr)
            else:
                se3 = SE3.from_pose7(_finite_vector(arr, 7, f"SE(3) pose command {name!r}"))
        value = se3.pose7()
        value.flags.writeable = False
        self._se3[name] = value

    def set_boolean(self, name: str, value: bool) -> None:
        """``cmd.boolean.<name>``."""
        self._bool[name] = bool(value)

    def set_float(self, name: str, value: float) -> None:
        """``cmd.float.<name>``: a finite number within its range (if the model gives one)."""
        x = float(value)
        rng = self._float_ranges.get(name)
        if not np.isfinite(x) or (rng is not None and not rng.contains(x)):
            bounds = "" if rng is None else f" within [{rng.lo}, {rng.hi}]"
            raise ValueError(
                f"float command {name!r} must be a finite number{bounds}, got {value!r}"
            )
        self._float[name] = x

    def set_joint_positions(
        self, name: str, positions: object, joint_names: tuple[str, ...] | None = None
    ) -> None:
        """``cmd.joint_pos.<name>``: a mapping joint -> rad, or an array in ``joint_names`` order
        (default: the order the model's metadata lists for this command)."""
        if isinstance(positions, Mapping):
            values = {str(k): float(v) for k, v in positions.items()}
        else:
            names = joint_names if joint_names is not None else self._joint_names.get(name)
            if names is None:
                raise ValueError(
                    f"joint position command {name!r} is not registered yet: pass joint_names, or a mapping"
                )
            arr = _finite_vector(positions, len(names), f"joint position command {name!r}")
            values = dict(zip(names, arr.tolist()))
        if not all(np.isfinite(v) for v in values.values()):
            raise ValueError(f"joint position command {name!r} must be finite, got {positions!r}")
        known = self._joint_names.get(name)
        if known is not None and set(values) - set(known):
            raise ValueError(
                f"joint position command {name!r}: unknown joints {sorted(set(values) - set(known))}; expected {known}"
            )
        self._joints[name] = {**self._joints.get(name, {}), **values}

    # ------------------------------------------------------------------ interface
    def init_se2_velocity(self, info: Se2VelocityCommandInfo) -> None:
        self._se2_ranges[info.command_name] = info.ranges

    def se2_velocity(self, info: Se2VelocityCommandInfo) -> np.ndarray | None:
        return self._se2.get(info.command_name)

    def init_se3_pose(self, info: CommandInfo) -> None:
        pass

    def se3_pose(self, info: CommandInfo) -> np.ndarray | None:
        return self._se3.get(info.command_name)

    def init_boolean_selector(self, info: CommandInfo) -> None:
        pass

    def boolean_selector(self, info: CommandInfo) -> bool | None:
        return self._bool.get(info.command_name)

    def init_float_value(self, info: FloatCommandInfo) -> None:
        self._float_ranges[info.command_name] = info.range

    def float_value(self, info: FloatCommandInfo) -> float | None:
        return self._float.get(info.command_name)

    def init_joint_position(self, info: JointPositionCommandInfo) -> None:
        names = self._joint_names.setdefault(info.command_name, [])
        if info.joint_name not in names:
            names.append(info.joint_name)

    def joint_position(self, info: JointPositionCommandInfo) -> float | None:
        return self._joints.get(info.command_name, {}).get(info.joint_name)

    def joint_positions(self, group: JointPositionCommandGroupInfo, out: np.ndarray) -> bool:
        values = self._joints.get(group.command_name)
        if values is None:
            return False
        cached = self._joint_cache.get(id(group))
        if cached is None or cached[0] is not group or cached[1] is not values:  # after a set
            arr = _in_order(values, group.joint_names)
            if arr is None:
                return False
            cached = (group, values, arr)
            self._joint_cache[id(group)] = cached
        out[:] = cached[2]
        return True

    def joint_positions_reader(
        self, group: JointPositionCommandGroupInfo, out: np.ndarray
    ) -> Callable[[], bool]:
        """``joint_positions(group, out)`` as one closure (the command's name bound once)."""
        commands, name, names = self._joints, group.command_name, group.joint_names
        last: list = [_UNSET, None]  # the values dict read last (a set replaces it), its array

        def read() -> bool:
            values = commands.get(name)
            if values is not last[0]:
                arr = None if values is None else _in_order(values, names)
                if arr is None:
                    return False
                last[:] = values, arr
            out[:] = last[1]
            return True

        return read


_UNSET = object()


def _in_order(values: dict[str, float], names: tuple[str, ...]) -> np.ndarray | None:
    """The values of joints ``names`` (rad) as a (n,) array, or ``None`` if one is missing."""
    try:
        return np.array([values[j] for j in names])
    except KeyError:
        return None
