"""Input and output components: the glue between named tensors and the interfaces.

A component is created by a matcher, bound to its tensors' buffers once (``bind``; sizes and
element types are checked there), connected to the robot once (``init``), and then reads or
writes every cycle without allocating: ``read`` fills input buffers in place, ``write`` sends
output buffers to the interfaces. ``compile`` (once, after ``init``) returns the zero-argument
call the controller's cycle makes instead: the same work with the buffers, the interface
methods and the joint indices bound once.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from functools import partial

import numpy as np

from twin.control.errors import TensorShapeError
from twin.control.interfaces import (
    BaseInfo,
    CommandInfo,
    CommandInterface,
    FrameInfo,
    HeightScanInfo,
    JointGroupInfo,
    JointPositionCommandGroupInfo,
    PinholeImageInfo,
    RobotStateInterface,
    SphericalImageInfo,
)
from twin.control.metadata import JointTargetsMetadata
from twin.control.runtime import OnnxRuntime

__all__ = [
    "BaseAngularVelocityInput",
    "BaseLinearVelocityInput",
    "BaseOrientationInput",
    "BasePositionInput",
    "BodyAngularVelocityInput",
    "BodyLinearVelocityInput",
    "BodyOrientationInput",
    "BodyPositionInput",
    "CommandBooleanInput",
    "CommandFloatInput",
    "CommandJointPositionInput",
    "CommandSe2VelocityInput",
    "CommandSe3PoseInput",
    "HeightScanInput",
    "ImuAngularVelocityInput",
    "ImuLinearVelocityInput",
    "ImuOrientationInput",
    "Input",
    "JointPositionInput",
    "JointTargetOutput",
    "JointVelocityInput",
    "MemoryOutput",
    "Output",
    "PinholeImageInput",
    "Se2VelocityOutput",
    "SphericalImageInput",
    "StepCountInput",
]


class _Component(abc.ABC):  # noqa: B024 - Input/Output add the abstract method
    def __init__(self, name: str, tensors: tuple[str, ...]) -> None:
        #: The component's name: its tensor, or its group for a group of tensors.
        self.name = name
        #: The tensors it reads or writes.
        self.tensors = tensors

    def bind(self, runtime: OnnxRuntime) -> None:  # noqa: B027 - optional override
        """Resolve buffer views once; raises ``TensorShapeError``/``TensorTypeError``."""

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:  # noqa: B027
        """Connect to the robot once; raises ``ComponentInitError`` saying what is missing."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Input(_Component):
    """Fills input buffers from the robot state or commands each cycle."""

    @abc.abstractmethod
    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        """Fill the buffers; ``False`` if a value is not available now."""

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        """The cycle's call: does what ``read`` does, with everything resolved once (after
        ``bind`` and ``init``). Default: ``read`` bound to its arguments."""
        return partial(self.read, runtime, state, command)


class Output(_Component):
    """Sends output buffers to the robot each cycle."""

    @abc.abstractmethod
    def write(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        """Send the buffers; ``False`` if the robot refused."""

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        """The cycle's call: does what ``write`` does, resolved once. Default: ``write`` bound."""
        return partial(self.write, runtime, state, command)


def _input_view(
    runtime: OnnxRuntime, tensor: str, size: int, dtype=np.float32, what: str = ""
) -> np.ndarray:
    return _checked(runtime.input_buffer(tensor, dtype), tensor, size, what)


def _output_view(runtime: OnnxRuntime, tensor: str, size: int, what: str = "") -> np.ndarray:
    return _checked(runtime.output_buffer(tensor, np.float32), tensor, size, what)


def _checked(view: np.ndarray, tensor: str, size: int, what: str) -> np.ndarray:
    if view.size != size:
        raise TensorShapeError(f"tensor {tensor!r} has {view.size} elements; {what} needs {size}")
    return view


# ---------------------------------------------------------------- vector inputs
class _VectorInput(Input):
    """One tensor filled from one getter of the state (or command) interface."""

    _init_method: str
    _get_method: str
    _size: int
    _what: str
    _from_command = False

    def __init__(self, tensor: str, info: object) -> None:
        super().__init__(tensor, (tensor,))
        self.info = info
        self._buf = np.zeros(self._size, dtype=np.float32)

    def bind(self, runtime: OnnxRuntime) -> None:
        self._buf = _input_view(runtime, self.name, self._size, what=self._what)

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        getattr(command if self._from_command else state, self._init_method)(self.info)

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        return self.compile(runtime, state, command)()

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        get = partial(
            getattr(command if self._from_command else state, self._get_method), self.info
        )
        buf = self._buf

        def read() -> bool:
            value = get()
            if value is None:
                return False
            buf[:] = value
            return True

        return read


def _vector_input(
    name: str, init: str, get: str, size: int, what: str, command: bool = False
) -> type:
    attrs = {
        "_init_method": init,
        "_get_method": get,
        "_size": size,
        "_what": what,
        "_from_command": command,
        "__doc__": f"{what}: ({size},) float32 from ``{'command' if command else 'state'}.{get}``.",
    }
    return type(name, (_VectorInput,), attrs)


BasePositionInput = _vector_input(
    "BasePositionInput", "init_base_pos_w", "base_pos_w", 3, "a base position (m, world)"
)
BaseOrientationInput = _vector_input(
    "BaseOrientationInput", "init_base_quat_w", "base_quat_w", 4, "a base orientation [w,x,y,z]"
)
BaseLinearVelocityInput = _vector_input(
    "BaseLinearVelocityInput",
    "init_base_lin_vel_b",
    "base_lin_vel_b",
    3,
    "a base linear velocity (m/s, base)",
)
BaseAngularVelocityInput = _vector_input(
    "BaseAngularVelocityInput",
    "init_base_ang_vel_b",
    "base_ang_vel_b",
    3,
    "a base angular velocity (rad/s, base)",
)
BodyPositionInput = _vector_input(
    "BodyPositionInput", "init_body_position_w", "body_position_w", 3, "a body position (m, world)"
)
BodyOrientationInput = _vector_input(
    "BodyOrientationInput",
    "init_body_orientation_w",
    "body_orientation_w",
    4,
    "a body orientation [w,x,y,z]",
)
BodyLinearVelocityInput = _vector_input(
    "BodyLinearVelocityInput",
    "init_body_linear_velocity_b",
    "body_linear_velocity_b",
    3,
    "a body linear velocity (m/s, body)",
)
BodyAngularVelocityInput = _vector_input(
    "BodyAngularVelocityInput",
    "init_body_angular_velocity_b",
    "body_angular_velocity_b",
    3,
    "a body angular velocity (rad/s, body)",
)
ImuLinearVelocityInput = _vector_input(
    "ImuLinearVelocityInput",
    "init_imu_linear_velocity_imu",
    "imu_linear_velocity_imu",
    3,
    "an IMU linear velocity (m/s, IMU)",
)
ImuAngularVelocityInput = _vector_input(
    "ImuAngularVelocityInput",
    "init_imu_angular_velocity_imu",
    "imu_angular_velocity_imu",
    3,
    "an IMU angular velocity (rad/s, IMU)",
)
ImuOrientationInput = _vector_input(
    "ImuOrientationInput",
    "init_imu_orientation_w",
    "imu_orientation_w",
    4,
    "an IMU orientation [w,x,y,z]",
)
CommandSe2VelocityInput = _vector_input(
    "CommandSe2VelocityInput",
    "init_se2_velocity",
    "se2_velocity",
    3,
    "an SE(2) velocity command",
    command=True,
)
CommandSe3PoseInput = _vector_input(
    "CommandSe3PoseInput",
    "init_se3_pose",
    "se3_pose",
    7,
    "an SE(3) pose command [p, q]",
    command=True,
)
CommandFloatInput = _vector_input(
    "CommandFloatInput", "init_float_value", "float_value", 1, "a float command", command=True
)


class CommandBooleanInput(Input):
    """A boolean selector: (1,) bool from ``command.boolean_selector``."""

    def __init__(self, tensor: str, info: CommandInfo) -> None:
        super().__init__(tensor, (tensor,))
        self.info = info
        self._buf = np.zeros(1, dtype=np.bool_)

    def bind(self, runtime: OnnxRuntime) -> None:
        self._buf = _input_view(runtime, self.name, 1, np.bool_, "a boolean command")

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        command.init_boolean_selector(self.info)

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        value = command.boolean_selector(self.info)
        if value is None:
            return False
        self._buf[0] = value
        return True


class _JointInput(Input):
    _kind: str

    def __init__(self, tensor: str, group: JointGroupInfo) -> None:
        super().__init__(tensor, (tensor,))
        self.group = group
        self._buf = np.zeros(len(group.joint_names), dtype=np.float32)

    def bind(self, runtime: OnnxRuntime) -> None:
        n = len(self.group.joint_names)
        self._buf = _input_view(runtime, self.name, n, what=f"joint {self._kind}s of {n} joints")


class JointPositionInput(_JointInput):
    """Joint positions (n,) rad in the metadata's joint order."""

    _kind = "position"

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        for joint in self.group.joints():
            state.init_joint_position(joint)

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        return state.joint_positions(self.group, self._buf)

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        return state.joint_positions_reader(self.group, self._buf)


class JointVelocityInput(_JointInput):
    """Joint velocities (n,) rad/s in the metadata's joint order."""

    _kind = "velocity"

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        for joint in self.group.joints():
            state.init_joint_velocity(joint)

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        return state.joint_velocities(self.group, self._buf)

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        return state.joint_velocities_reader(self.group, self._buf)


class CommandJointPositionInput(Input):
    """Commanded joint positions (n,) rad in the metadata's joint order."""

    def __init__(self, tensor: str, group: JointPositionCommandGroupInfo) -> None:
        super().__init__(tensor, (tensor,))
        self.group = group
        self._buf = np.zeros(len(group.joint_names), dtype=np.float32)

    def bind(self, runtime: OnnxRuntime) -> None:
        n = len(self.group.joint_names)
        self._buf = _input_view(
            runtime, self.name, n, what=f"a joint position command of {n} joints"
        )

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        for joint in self.group.joints():
            command.init_joint_position(joint)

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        return command.joint_positions(self.group, self._buf)

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        return command.joint_positions_reader(self.group, self._buf)


class StepCountInput(Input):
    """``ctx.step_count``: int32, incremented by one before every inference (0 after reset)."""

    def __init__(self, tensor: str) -> None:
        super().__init__(tensor, (tensor,))
        self._buf = np.zeros(1, dtype=np.int32)

    def bind(self, runtime: OnnxRuntime) -> None:
        self._buf = _input_view(runtime, self.name, 1, np.int32, "the step count")

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        self._buf[0] += 1
        return True

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        buf = self._buf

        def count() -> bool:
            buf[0] += 1
            return True

        return count


# ---------------------------------------------------------------- exteroception
class _MultiChannelInput(Input):
    """A group ``<prefix>.<sensor>.<channel>``: one float32 tensor per channel."""

    def __init__(self, group: str, info: object, channels: frozenset[str]) -> None:
        super().__init__(group, tuple(f"{group}.{c}" for c in sorted(channels)))
        self.info = info
        self.channels = tuple(sorted(channels))
        self._bufs: dict[str, np.ndarray] = {}

    def bind(self, runtime: OnnxRuntime) -> None:
        self._bufs = {
            c: runtime.input_buffer(f"{self.name}.{c}", np.float32) for c in self.channels
        }

    def _fill(self, data: dict[str, np.ndarray] | None) -> bool:
        if data is None:
            return False
        for channel, buf in self._bufs.items():
            values = data.get(channel)
            if values is None or np.size(values) != buf.size:
                return False
            buf[:] = np.ravel(values)
        return True


class HeightScanInput(_MultiChannelInput):
    """``sensor.ray_caster.<s>.(height|r|g|b)``: scan layers around the base."""

    info: HeightScanInfo

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        base = BaseInfo(self.info.pattern.articulation_name)
        state.init_height_scan(self.info)
        state.init_base_pos_w(base)
        state.init_base_quat_w(base)
        self._base = base

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        pos, quat = state.base_pos_w(self._base), state.base_quat_w(self._base)
        if pos is None or quat is None:
            return False
        return self._fill(state.height_scan(self.info, pos, quat))


class SphericalImageInput(_MultiChannelInput):
    """``sensor.spherical_image.<s>.<channel>``."""

    info: SphericalImageInfo

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        state.init_spherical_image(self.info)

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        return self._fill(state.spherical_image(self.info))


class PinholeImageInput(_MultiChannelInput):
    """``sensor.pinhole_image.<s>.<channel>``."""

    info: PinholeImageInfo

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        state.init_pinhole_image(self.info)

    def read(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        return self._fill(state.pinhole_image(self.info))


# ---------------------------------------------------------------- outputs
class JointTargetOutput(Output):
    """``output.joint_targets.<term>.(pos|vel|effort)`` with stiffness/damping from metadata.

    A member the model lacks is sent as zeros. Sent each cycle as one group:
    ``u = effort + stiffness (pos - q) + damping (vel - qd)``.
    """

    MEMBERS = ("pos", "vel", "effort")

    def __init__(
        self,
        group: str,
        articulation: str,
        metadata: JointTargetsMetadata,
        members: tuple[str, ...],
    ) -> None:
        super().__init__(group, tuple(f"{group}.{m}" for m in self.MEMBERS if m in members))
        self.group = JointGroupInfo(articulation, metadata.names)
        self.metadata = metadata
        self.members = tuple(m for m in self.MEMBERS if m in members)
        n = len(metadata.names)
        self._bufs = {m: np.zeros(n, dtype=np.float32) for m in self.MEMBERS}
        self._args = self._write_args()

    def bind(self, runtime: OnnxRuntime) -> None:
        n = len(self.metadata.names)
        for m in self.members:
            self._bufs[m] = _output_view(
                runtime, f"{self.name}.{m}", n, f"joint targets for {n} named joints"
            )
        self._args = self._write_args()

    def _write_args(self) -> tuple:
        """``set_joint_targets``'s arguments, resolved once (the buffers are written in place)."""
        b, md = self._bufs, self.metadata
        return (self.group, b["pos"], b["vel"], b["effort"], md.stiffness, md.damping)

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        for joint in self.group.joints():
            state.init_joint_output(joint)

    def write(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        return state.set_joint_targets(*self._args)

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        return state.joint_targets_writer(*self._args)


class Se2VelocityOutput(Output):
    """``output.se2_velocity.<n>``: (3,) ``[vx, vy, wz]`` to the metadata's ``target_frame``."""

    def __init__(self, tensor: str, target_frame: str) -> None:
        super().__init__(tensor, (tensor,))
        self.info = FrameInfo(target_frame)
        self._buf = np.zeros(3, dtype=np.float32)

    def bind(self, runtime: OnnxRuntime) -> None:
        self._buf = _output_view(runtime, self.name, 3, "an SE(2) velocity [vx, vy, wz]")

    def init(self, state: RobotStateInterface, command: CommandInterface) -> None:
        state.init_se2_velocity(self.info)

    def write(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        return state.set_se2_velocity(self.info, self._buf)


class MemoryOutput(Output):
    """Recurrent memory: after each inference ``memory.<name>.out`` is copied to ``.in``."""

    def __init__(self, name: str) -> None:
        super().__init__(name, (f"memory.{name}.in", f"memory.{name}.out"))
        self._src = self._dst = np.zeros(0, dtype=np.float32)

    def bind(self, runtime: OnnxRuntime) -> None:
        self._src, self._dst = runtime.check_copy(
            f"memory.{self.name}.out", f"memory.{self.name}.in"
        )

    def write(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> bool:
        np.copyto(self._dst, self._src)
        return True

    def compile(
        self, runtime: OnnxRuntime, state: RobotStateInterface, command: CommandInterface
    ) -> Callable[[], bool]:
        dst, src, copyto = self._dst, self._src, np.copyto

        def copy() -> bool:
            copyto(dst, src)
            return True

        return copy
