"""The controller's three interfaces, after exploy's ``RobotStateInterface``, ``CommandInterface``
and ``DataCollectionInterface`` (Pythonic names; each method takes a small info record).

Conventions of every method:

* ``init_*`` is called once while ``OnnxRLController.init`` runs (not real-time). It returns
  ``None`` when the source/sink is available and raises ``ComponentInitError`` saying why not.
  The defaults here raise: an implementation provides only what its robot has.
* getters are called every cycle and return a value, or ``None`` when it is not available now
  (an ordinary failure: the update returns ``False``). Vectors are numpy arrays in SI units:
  positions (3,) m in the world frame, quaternions (4,) ``[w, x, y, z]`` world_R_body,
  velocities (3,) m/s or rad/s in the body (or IMU) frame.
* setters return ``True`` on success.

For the Python hot path the interfaces add group methods (``joint_positions``,
``set_joint_targets``, ...) whose defaults loop over the per-joint methods, and three cycle hooks
(``finish_init``, ``begin_cycle``, ``end_cycle``) so that an implementation can take one
consistent snapshot per cycle and send one command per cycle.
The group methods also have factories (``joint_positions_reader``, ``joint_targets_writer``,
...) that the components call once at ``init`` for the zero-argument calls of the compiled
cycle; their defaults bind the group method, an implementation resolves the group once there.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from twin.control.errors import ComponentInitError
from twin.control.metadata import (
    HeightScanMetadata,
    PinholeImageMetadata,
    Range,
    Se2VelocityRanges,
    SphericalImageMetadata,
)

__all__ = [
    "BaseInfo",
    "BodyInfo",
    "CommandInfo",
    "CommandInterface",
    "DataCollectionInterface",
    "FloatCommandInfo",
    "FrameInfo",
    "HeightScanInfo",
    "ImuInfo",
    "JointGroupInfo",
    "JointInfo",
    "JointPositionCommandGroupInfo",
    "JointPositionCommandInfo",
    "PinholeImageInfo",
    "RobotStateInterface",
    "Se2VelocityCommandInfo",
    "SphericalImageInfo",
]


# ---------------------------------------------------------------- info records
@dataclass(frozen=True, slots=True)
class BaseInfo:
    articulation_name: str


@dataclass(frozen=True, slots=True)
class JointInfo:
    articulation_name: str
    joint_name: str


@dataclass(frozen=True, slots=True)
class JointGroupInfo:
    """Joints of one articulation in the policy's order (a joint input or target group)."""

    articulation_name: str
    joint_names: tuple[str, ...]

    def joints(self) -> tuple[JointInfo, ...]:
        return tuple(JointInfo(self.articulation_name, j) for j in self.joint_names)


@dataclass(frozen=True, slots=True)
class BodyInfo:
    articulation_name: str
    body_name: str


@dataclass(frozen=True, slots=True)
class ImuInfo:
    imu_name: str


@dataclass(frozen=True, slots=True)
class FrameInfo:
    frame_name: str


@dataclass(frozen=True, slots=True)
class HeightScanInfo:
    sensor_name: str
    pattern: HeightScanMetadata
    layer_names: frozenset[str]


@dataclass(frozen=True, slots=True)
class SphericalImageInfo:
    sensor_name: str
    metadata: SphericalImageMetadata
    channel_names: frozenset[str]


@dataclass(frozen=True, slots=True)
class PinholeImageInfo:
    sensor_name: str
    metadata: PinholeImageMetadata
    channel_names: frozenset[str]


@dataclass(frozen=True, slots=True)
class Se2VelocityCommandInfo:
    command_name: str
    ranges: Se2VelocityRanges | None = None


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """An SE(3) pose or boolean selector command."""

    command_name: str


@dataclass(frozen=True, slots=True)
class FloatCommandInfo:
    command_name: str
    range: Range | None = None


@dataclass(frozen=True, slots=True)
class JointPositionCommandInfo:
    command_name: str
    joint_name: str


@dataclass(frozen=True, slots=True)
class JointPositionCommandGroupInfo:
    command_name: str
    joint_names: tuple[str, ...]

    def joints(self) -> tuple[JointPositionCommandInfo, ...]:
        return tuple(JointPositionCommandInfo(self.command_name, j) for j in self.joint_names)


def _unsupported(owner: object, what: str) -> ComponentInitError:
    return ComponentInitError(f"{type(owner).__name__} does not provide {what}")


# ---------------------------------------------------------------- robot state
class RobotStateInterface:
    """Robot state sources and joint/frame sinks; see the module docstring."""

    # cycle hooks (ours) -------------------------------------------------
    def finish_init(self) -> None:
        """Called once after every component's ``init``; may raise ``ComponentInitError``."""

    def begin_cycle(self, t_us: int) -> bool:
        """Called before the inputs are read each cycle (take a snapshot here)."""
        return True

    def end_cycle(self, t_us: int) -> bool:
        """Called after every output wrote (send the joint command here)."""
        return True

    # base ---------------------------------------------------------------
    def init_base_pos_w(self, info: BaseInfo) -> None:
        raise _unsupported(self, f"a base position for articulation {info.articulation_name!r}")

    def base_pos_w(self, info: BaseInfo) -> np.ndarray | None:
        return None

    def init_base_quat_w(self, info: BaseInfo) -> None:
        raise _unsupported(self, f"a base orientation for articulation {info.articulation_name!r}")

    def base_quat_w(self, info: BaseInfo) -> np.ndarray | None:
        return None

    def init_base_lin_vel_b(self, info: BaseInfo) -> None:
        raise _unsupported(
            self, f"a base linear velocity for articulation {info.articulation_name!r}"
        )

    def base_lin_vel_b(self, info: BaseInfo) -> np.ndarray | None:
        return None

    def init_base_ang_vel_b(self, info: BaseInfo) -> None:
        raise _unsupported(
            self, f"a base angular velocity for articulation {info.articulation_name!r}"
        )

    def base_ang_vel_b(self, info: BaseInfo) -> np.ndarray | None:
        return None

    # joints -------------------------------------------------------------
    def init_joint_position(self, info: JointInfo) -> None:
        raise _unsupported(self, f"joint positions (joint {info.joint_name!r})")

    def init_joint_velocity(self, info: JointInfo) -> None:
        raise _unsupported(self, f"joint velocities (joint {info.joint_name!r})")

    def init_joint_effort(self, info: JointInfo) -> None:
        raise _unsupported(self, f"joint efforts (joint {info.joint_name!r})")

    def init_joint_output(self, info: JointInfo) -> None:
        raise _unsupported(self, f"joint targets (joint {info.joint_name!r})")

    def joint_position(self, info: JointInfo) -> float | None:
        return None

    def joint_velocity(self, info: JointInfo) -> float | None:
        return None

    def joint_effort(self, info: JointInfo) -> float | None:
        return None

    def set_joint_position(self, info: JointInfo, position: float) -> bool:
        return False

    def set_joint_velocity(self, info: JointInfo, velocity: float) -> bool:
        return False

    def set_joint_effort(self, info: JointInfo, effort: float) -> bool:
        return False

    def set_joint_p_gain(self, info: JointInfo, p_gain: float) -> bool:
        return False

    def set_joint_d_gain(self, info: JointInfo, d_gain: float) -> bool:
        return False

    # joint groups (ours: one call per group and cycle) --------------------
    def joint_positions(self, group: JointGroupInfo, out: np.ndarray) -> bool:
        """Write the group's positions (rad) into ``out`` (n,); default: per-joint getters."""
        return _gather(self.joint_position, group.joints(), out)

    def joint_velocities(self, group: JointGroupInfo, out: np.ndarray) -> bool:
        return _gather(self.joint_velocity, group.joints(), out)

    # compiled per component at init (ours): zero-argument calls for the cycle ------------
    def joint_positions_reader(self, group: JointGroupInfo, out: np.ndarray) -> Callable[[], bool]:
        """A call that does ``joint_positions(group, out)``, made once at init (an implementation
        resolves the group here instead of every cycle)."""
        return partial(self.joint_positions, group, out)

    def joint_velocities_reader(self, group: JointGroupInfo, out: np.ndarray) -> Callable[[], bool]:
        """A call that does ``joint_velocities(group, out)``, made once at init."""
        return partial(self.joint_velocities, group, out)

    def joint_targets_writer(
        self,
        group: JointGroupInfo,
        position: np.ndarray,
        velocity: np.ndarray,
        effort: np.ndarray,
        p_gain: np.ndarray,
        d_gain: np.ndarray,
    ) -> Callable[[], bool]:
        """A call that does ``set_joint_targets`` with these arrays (buffers read at every call;
        the gains are the policy's constants), made once at init."""
        return partial(self.set_joint_targets, group, position, velocity, effort, p_gain, d_gain)

    def set_joint_targets(
        self,
        group: JointGroupInfo,
        position: np.ndarray,
        velocity: np.ndarray,
        effort: np.ndarray,
        p_gain: np.ndarray,
        d_gain: np.ndarray,
    ) -> bool:
        """Targets (n,) each for ``u = effort + p_gain (position - q) + d_gain (velocity - qd)``.

        Default: per joint, position, velocity, effort, p-gain, d-gain, stopping at the first
        refusal (the reference's order).
        """
        for i, joint in enumerate(group.joints()):
            if not (
                self.set_joint_position(joint, float(position[i]))
                and self.set_joint_velocity(joint, float(velocity[i]))
                and self.set_joint_effort(joint, float(effort[i]))
                and self.set_joint_p_gain(joint, float(p_gain[i]))
                and self.set_joint_d_gain(joint, float(d_gain[i]))
            ):
                return False
        return True

    # SE(2) velocity sink ---------------------------------------------------
    def init_se2_velocity(self, info: FrameInfo) -> None:
        raise _unsupported(self, f"an SE(2) velocity sink for frame {info.frame_name!r}")

    def set_se2_velocity(self, info: FrameInfo, velocity: np.ndarray) -> bool:
        """velocity (3,) ``[vx (m/s), vy (m/s), wz (rad/s)]`` of the frame."""
        return False

    # IMU ------------------------------------------------------------------
    def init_imu_linear_velocity_imu(self, info: ImuInfo) -> None:
        raise _unsupported(self, f"an IMU linear velocity (IMU {info.imu_name!r})")

    def imu_linear_velocity_imu(self, info: ImuInfo) -> np.ndarray | None:
        return None

    def init_imu_angular_velocity_imu(self, info: ImuInfo) -> None:
        raise _unsupported(self, f"an IMU angular velocity (IMU {info.imu_name!r})")

    def imu_angular_velocity_imu(self, info: ImuInfo) -> np.ndarray | None:
        return None

    def init_imu_orientation_w(self, info: ImuInfo) -> None:
        raise _unsupported(self, f"an IMU orientation (IMU {info.imu_name!r})")

    def imu_orientation_w(self, info: ImuInfo) -> np.ndarray | None:
        return None

    # bodies -----------------------------------------------------------------
    def init_body_position_w(self, info: BodyInfo) -> None:
        raise _unsupported(self, f"body positions (body {info.body_name!r})")

    def body_position_w(self, info: BodyInfo) -> np.ndarray | None:
        return None

    def init_body_orientation_w(self, info: BodyInfo) -> None:
        raise _unsupported(self, f"body orientations (body {info.body_name!r})")

    def body_orientation_w(self, info: BodyInfo) -> np.ndarray | None:
        return None

    def init_body_linear_velocity_b(self, info: BodyInfo) -> None:
        raise _unsupported(self, f"body linear velocities (body {info.body_name!r})")

    def body_linear_velocity_b(self, info: BodyInfo) -> np.ndarray | None:
        return None

    def init_body_angular_velocity_b(self, info: BodyInfo) -> None:
        raise _unsupported(self, f"body angular velocities (body {info.body_name!r})")

    def body_angular_velocity_b(self, info: BodyInfo) -> np.ndarray | None:
        return None

    # exteroception ---------------------------------------------------------
    def init_height_scan(self, info: HeightScanInfo) -> None:
        raise _unsupported(
            self, f"a height scanner (sensor {info.sensor_name!r}): this backend has none"
        )

    def height_scan(
        self, info: HeightScanInfo, base_pos_w: np.ndarray, base_quat_w: np.ndarray
    ) -> dict[str, np.ndarray] | None:
        """Layers (flattened, column-major, float32) of the scan centred on the base."""
        return None

    def init_spherical_image(self, info: SphericalImageInfo) -> None:
        raise _unsupported(
            self, f"a spherical image sensor (sensor {info.sensor_name!r}): this backend has none"
        )

    def spherical_image(self, info: SphericalImageInfo) -> dict[str, np.ndarray] | None:
        """Channels (flattened, row-major, float32)."""
        return None

    def init_pinhole_image(self, info: PinholeImageInfo) -> None:
        raise _unsupported(
            self, f"a pinhole camera (sensor {info.sensor_name!r}): this backend has none"
        )

    def pinhole_image(self, info: PinholeImageInfo) -> dict[str, np.ndarray] | None:
        return None


# ---------------------------------------------------------------- commands
class CommandInterface:
    """Command sources (set by the user, a planner or an environment)."""

    def init_se2_velocity(self, info: Se2VelocityCommandInfo) -> None:
        raise _unsupported(self, f"SE(2) velocity command {info.command_name!r}")

    def se2_velocity(self, info: Se2VelocityCommandInfo) -> np.ndarray | None:
        """(3,) ``[vx, vy, wz]`` m/s, m/s, rad/s."""
        return None

    def init_se3_pose(self, info: CommandInfo) -> None:
        raise _unsupported(self, f"SE(3) pose command {info.command_name!r}")

    def se3_pose(self, info: CommandInfo) -> np.ndarray | None:
        """(7,) ``[px, py, pz, qw, qx, qy, qz]`` m, in the world (= base) frame."""
        return None

    def init_boolean_selector(self, info: CommandInfo) -> None:
        raise _unsupported(self, f"boolean command {info.command_name!r}")

    def boolean_selector(self, info: CommandInfo) -> bool | None:
        return None

    def init_float_value(self, info: FloatCommandInfo) -> None:
        raise _unsupported(self, f"float command {info.command_name!r}")

    def float_value(self, info: FloatCommandInfo) -> float | None:
        return None

    def init_joint_position(self, info: JointPositionCommandInfo) -> None:
        raise _unsupported(self, f"joint position command {info.command_name!r}")

    def joint_position(self, info: JointPositionCommandInfo) -> float | None:
        return None

    def joint_positions(self, group: JointPositionCommandGroupInfo, out: np.ndarray) -> bool:
        """Write the commanded positions (rad) into ``out`` (n,); default: per joint."""
        return _gather(self.joint_position, group.joints(), out)

    def joint_positions_reader(
        self, group: JointPositionCommandGroupInfo, out: np.ndarray
    ) -> Callable[[], bool]:
        """A call that does ``joint_positions(group, out)``, made once at init."""
        return partial(self.joint_positions, group, out)


# ---------------------------------------------------------------- data collection
class DataCollectionInterface(abc.ABC):
    """Registered sources are read (not copied) at every ``collect_data``."""

    def register_data_source(self, prefix: str, data: np.ndarray) -> bool:
        """Register a numpy array (a live view, read at every collection) under ``prefix``."""
        return False

    @abc.abstractmethod
    def collect_data(self, t_us: int) -> bool:
        """Record every registered source at ``t_us``; ``False`` if the record was not kept."""

    def close(self) -> None:  # noqa: B027 - optional override
        """Release resources; safe to call twice."""


def _gather(getter, infos, out: np.ndarray) -> bool:
    for i, info in enumerate(infos):
        value = getter(info)
        if value is None:
            return False
        out[i] = value
    return True
