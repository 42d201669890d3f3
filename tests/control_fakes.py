"""Test doubles for the ONNX controller tests (not a test module).

* ``IdealArmRobot``: a second ``twin.robot.Robot`` implementation, in memory: each joint an ideal
  rotor (no gravity, no friction) driven by the shared law ``twin.robot.joint_torque``.
* ``RecordingState`` / ``RecordingCommand``: interfaces that record every call (name, info)
  and answer from tables, like the reference's gmock mocks.
* ``MemoryCollection``: a data collection that keeps rows in memory.
* ``full_example_model``: a policy with the convention's full naming and metadata example.
"""

from __future__ import annotations

import pathlib

import numpy as np

from twin.control.errors import ComponentInitError
from twin.control.export import TensorSpec, export_mlp, joint_targets_metadata
from twin.control.interfaces import CommandInterface, DataCollectionInterface, RobotStateInterface
from twin.kinematics import ArmModel
from twin.robot import Health, ImuSample, JointCommand, Robot, RobotState, joint_torque

GRAVITY_UP = np.array([0.0, 0.0, 9.81])


class IdealArmRobot(Robot):
    """In-memory arm: ``I qdd = u`` per joint, semi-implicit Euler, ``substeps`` per period.

    inertia: (6,) kg m^2 (default: critically damped under the full example's gains). Until the first ``write`` the command has zero gains (the arm coasts).
    ``health`` can be set by a test; ``writes`` counts accepted commands.
    """

    def __init__(
        self,
        model: ArmModel | None = None,
        control_period_s: float = 0.004,
        substeps: int = 4,
        inertia: float | np.ndarray = (0.15, 0.3, 0.067, 0.005, 0.005, 0.002),
        initial_q: np.ndarray | None = None,
    ) -> None:
        self.model = model if model is not None else ArmModel.default()
        self.control_period_s = control_period_s
        self._dt = control_period_s / substeps
        self._substeps = substeps
        self._inertia = np.broadcast_to(np.asarray(inertia, float), (6,)).copy()
        self.q = np.array(self.model.home_q if initial_q is None else initial_q, float)
        self.qd = np.zeros(6)
        self.tau = np.zeros(6)
        self.t_us = 0
        self.command = JointCommand(q_des=self.q.copy())
        self.health = Health.OK
        self.writes = 0
        self.closed = 0
        self._imu = self._imu_sample()

    def _imu_sample(self) -> ImuSample:
        """Ideal IMU on the ``imu`` link (no orientation output: the adapter uses kinematics)."""
        rot = self.model.fk(self.q, "imu")[:3, :3]
        omega_world = self.model.jacobian(self.q, "imu")[3:] @ self.qd
        return ImuSample(self.t_us, rot.T @ GRAVITY_UP, rot.T @ omega_world)

    def read(self) -> RobotState:
        return RobotState(
            self.t_us,
            self.q.copy(),
            self.qd.copy(),
            self.tau.copy(),
            imu=self._imu,
            health=self.health,
        )

    def _apply(self, command: JointCommand) -> None:
        self.command = command
        self.writes += 1

    def step(self) -> None:
        for _ in range(self._substeps):
            self.tau = joint_torque(self.command, self.q, self.qd, self.model.effort_limits)
            self.qd = self.qd + self.tau / self._inertia * self._dt
            self.q = self.q + self.qd * self._dt
        self.t_us += round(self.control_period_s * 1e6)
        self._imu = self._imu_sample()

    def close(self) -> None:
        self.closed += 1


# ---------------------------------------------------------------- recording interfaces
#: Methods the recorders keep from the interface: the group methods (their defaults call the
#: recorded per-joint ones) and the factories of the compiled cycle (which bind the group methods).
_GROUP_METHODS = {
    "joint_positions",
    "joint_velocities",
    "set_joint_targets",
    "joint_positions_reader",
    "joint_velocities_reader",
    "joint_targets_writer",
}
_DEFAULT_VALUES = {
    "base_pos_w": np.zeros(3),
    "base_quat_w": np.array([1.0, 0.0, 0.0, 0.0]),
    "body_orientation_w": np.array([1.0, 0.0, 0.0, 0.0]),
    "imu_orientation_w": np.array([1.0, 0.0, 0.0, 0.0]),
    "se3_pose": np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]),
    "boolean_selector": True,
    "float_value": 0.5,
    "joint_position": 0.0,
    "joint_velocity": 0.0,
    "joint_effort": 0.0,
}


def _key(args: tuple) -> str | None:
    """The name an info record carries (joint, body, IMU, command, frame or sensor)."""
    if not args:
        return None
    info = args[0]
    for attr in (
        "joint_name",
        "body_name",
        "imu_name",
        "command_name",
        "frame_name",
        "sensor_name",
    ):
        if hasattr(info, attr):
            return getattr(info, attr)
    return None


class _Recorder:
    """``calls``: every (method, args). ``values[method]``: a value, a {key: value} dict or a
    callable(info). ``refuse``: method names or (method, key) pairs that fail."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []
        self.values: dict[str, object] = {}
        self.refuse: set = set()

    def called(self, method: str) -> list[tuple]:
        return [args for name, args in self.calls if name == method]

    def keys(self, method: str) -> list[str | None]:
        return [_key(args) for args in self.called(method)]

    def _answer(self, method: str, args: tuple) -> object:
        self.calls.append((method, args))
        refused = method in self.refuse or (method, _key(args)) in self.refuse
        if method.startswith("init_") or method == "finish_init":
            if refused:
                raise ComponentInitError(f"refused {method}({_key(args)})")
            return None
        if method.startswith("set_") or method in ("begin_cycle", "end_cycle"):
            return not refused
        if refused:
            return None
        value = self.values.get(method, _DEFAULT_VALUES.get(method, np.zeros(3)))
        if callable(value):
            return value(args[0])
        if isinstance(value, dict):
            return value.get(_key(args))
        return value


def _recording(base: type) -> type:
    def make(name: str):
        def method(self, *args):
            return self._answer(name, args)

        method.__name__ = name
        return method

    names = [
        n
        for n, f in vars(base).items()
        if callable(f) and not n.startswith("_") and n not in _GROUP_METHODS
    ]
    return type(f"Recording{base.__name__}", (_Recorder, base), {n: make(n) for n in names})


RecordingState = _recording(RobotStateInterface)
RecordingCommand = _recording(CommandInterface)


class MemoryCollection(DataCollectionInterface):
    """Keeps registered views and a copy of every collected row."""

    def __init__(self) -> None:
        self.sources: dict[str, np.ndarray] = {}
        self.rows: list[tuple[int, dict[str, np.ndarray]]] = []

    def register_data_source(self, prefix: str, data: np.ndarray) -> bool:
        self.sources[prefix] = data
        return True

    def collect_data(self, t_us: int) -> bool:
        self.rows.append((t_us, {k: np.array(v, copy=True) for k, v in self.sources.items()}))
        return True


# ---------------------------------------------------------------- models
ART = "arm"
STIFFNESS = (240.0, 480.0, 240.0, 50.0, 50.0, 20.0)  # N m/rad
DAMPING = (12.0, 24.0, 8.0, 1.0, 1.0, 0.4)  # N m s/rad
#: Integral gain of the fixed-gain policy (per cycle): the memory accumulates ``KI (q_cmd - q)``.
KI = 0.02


def full_example_inputs(joints: tuple[str, ...]) -> list[TensorSpec]:
    """Every input kind the arm backend serves, named as in the convention's example table."""
    n = len(joints)
    specs = [TensorSpec(f"obj.{ART}.joints.pos", n), TensorSpec(f"obj.{ART}.joints.vel", n)]
    for body in ("base_link", "tcp"):  # base (via base_names) and one body
        specs += [
            TensorSpec(f"obj.{ART}.{body}.pos_b_rt_w_in_w", 3),
            TensorSpec(f"obj.{ART}.{body}.w_Q_b", 4),
            TensorSpec(f"obj.{ART}.{body}.lin_vel_b_rt_w_in_b", 3),
            TensorSpec(f"obj.{ART}.{body}.ang_vel_b_rt_w_in_b", 3),
        ]
    specs += [
        TensorSpec("sensor.imu.imu.w_Q_b", 4),
        TensorSpec("sensor.imu.imu.ang_vel_b_rt_w_in_b", 3),
        TensorSpec("sensor.imu.imu.lin_vel_b_rt_w_in_b", 3),
        TensorSpec("cmd.se2_velocity.base_vel", 3),
        TensorSpec("cmd.se3_pose.target", 7),
        TensorSpec("cmd.boolean.enable", 1, "bool"),
        TensorSpec("cmd.float.speed", 1),
        TensorSpec("cmd.joint_pos.goal", n),
        TensorSpec("ctx.step_count", 1, "int32"),
        TensorSpec("memory.integral.in", n),
    ]
    return specs


def full_example_metadata(joints: tuple[str, ...]) -> dict:
    return {
        f"obj.{ART}.joints": {"joint_names": list(joints)},
        f"output.joint_targets.{ART}": joint_targets_metadata(joints, STIFFNESS, DAMPING),
        "cmd.se2_velocity.base_vel": {
            "ranges": {"lin_vel_x": [-1.0, 1.0], "lin_vel_y": [-0.5, 0.5], "ang_vel_z": [-2.0, 2.0]}
        },
        "cmd.float.speed": {"range": [0.0, 1.0]},
        "cmd.joint_pos.goal": {"joint_names": list(joints)},
    }


def full_example_model(
    path: pathlib.Path, joints: tuple[str, ...], update_rate_hz: float = 250.0, ki: float = KI
) -> pathlib.Path:
    """The fixed-gain policy on the full example: ``pos = q_cmd + m``, ``m' = m + ki (q_cmd - q)``.

    Outputs: joint targets pos/vel/effort (vel and effort zero), ``memory.integral.out`` = m',
    and the informational ``actions``. The memory integrates the position error, which removes
    the steady-state error gravity leaves under pure PD.
    """
    specs = full_example_inputs(joints)
    offsets, total = {}, 0
    for s in specs:
        offsets[s.name] = total
        total += s.size
    n = len(joints)
    outputs = [TensorSpec(f"output.joint_targets.{ART}.{m}", n) for m in ("pos", "vel", "effort")]
    outputs.append(TensorSpec("memory.integral.out", n))
    w = np.zeros((total, 4 * n))
    eye = np.eye(n)
    q, cmd, mem = (
        offsets[k] for k in (f"obj.{ART}.joints.pos", "cmd.joint_pos.goal", "memory.integral.in")
    )
    pos, mem_out = slice(0, n), slice(3 * n, 4 * n)
    for col in (pos, mem_out):
        w[q : q + n, col] = -ki * eye
        w[cmd : cmd + n, col] = ki * eye
        w[mem : mem + n, col] = eye
    w[cmd : cmd + n, pos] += eye
    return export_mlp(
        path,
        inputs=specs,
        outputs=outputs,
        layers=[(w, np.zeros(4 * n))],
        activation=None,
        update_rate_hz=update_rate_hz,
        metadata=full_example_metadata(joints),
        base_names={ART: "base_link"},
        actions_output=True,
    )


# Mirror of exploy's own test_export.onnx, named by the convention (docs/formats/onnx-policy.md).
REF_JOINTS = ("j1", "j2", "j3")
REF_INPUTS = [
    TensorSpec("obj.robot1.joints.pos", 3),
    TensorSpec("obj.robot1.joints.vel", 3),
    *(
        TensorSpec(f"obj.robot1.base.{f}", 4 if f == "w_Q_b" else 3)
        for f in ("pos_b_rt_w_in_w", "w_Q_b", "lin_vel_b_rt_w_in_b", "ang_vel_b_rt_w_in_b")
    ),
    TensorSpec("cmd.se2_velocity.vel", 3),
    TensorSpec("cmd.se2_velocity.vel_with_range", 3),
    TensorSpec("cmd.se3_pose.pose", 7),
    TensorSpec("cmd.boolean.selector", 1, "bool"),
    TensorSpec("cmd.float.value", 1),
    TensorSpec("cmd.joint_pos.arm", 2),
    TensorSpec("sensor.imu.torso.w_Q_b", 4),
    TensorSpec("sensor.imu.pelvis.ang_vel_b_rt_w_in_b", 3),
    TensorSpec("sensor.imu.pelvis.lin_vel_b_rt_w_in_b", 3),
    TensorSpec("sensor.ray_caster.one.height", 4),
    TensorSpec("sensor.ray_caster.two.height", 4),
    *(TensorSpec(f"sensor.ray_caster.trail.{c}", 8) for c in ("height", "r", "g", "b")),
    TensorSpec("sensor.spherical_image.one.range", 4),
    TensorSpec("sensor.spherical_image.one.risk", 4),
    TensorSpec("sensor.pinhole_image.one.depth", 4),
    *(
        TensorSpec(f"obj.{b}.box.{f}", 4 if f == "w_Q_b" else 3)
        for b in ("box1", "box2")
        for f in ("pos_b_rt_w_in_w", "w_Q_b", "lin_vel_b_rt_w_in_b", "ang_vel_b_rt_w_in_b")
    ),
    TensorSpec("memory.hidden.in", 2),
    TensorSpec("ctx.step_count", 1, "int32"),
    TensorSpec("custom.extensible_data", 3),
]
REF_OUTPUTS = [
    TensorSpec("output.joint_targets.robot1.pos", 2),
    TensorSpec("output.joint_targets.robot1.vel", 2),
    TensorSpec("output.joint_targets.robot1.effort", 2),
    TensorSpec("output.se2_velocity.base_vel", 3),
    TensorSpec("memory.hidden.out", 2),
]
_GRID = {
    "pattern_type": "grid_pattern",
    "resolution": 0.1,
    "size_x": 1.6,
    "size_y": 1.0,
    "articulation_name": "robot1",
}
REF_METADATA = {
    "obj.robot1.joints": {"joint_names": list(REF_JOINTS)},
    "output.joint_targets.robot1": joint_targets_metadata(["j1", "j2"], [1.0, 2.0], [0.1, 0.2]),
    "output.se2_velocity.base_vel": {"target_frame": "base_frame"},
    "cmd.se2_velocity.vel_with_range": {
        "ranges": {"lin_vel_x": [-1.5, 1.5], "lin_vel_y": [-0.75, 0.75], "ang_vel_z": [-2.5, 2.5]}
    },
    "cmd.float.value": {"range": [0.0, 2.0]},
    "cmd.joint_pos.arm": {"joint_names": ["j1", "j2"]},
    "sensor.ray_caster.one": {**_GRID, "offset_x": 1.0},
    "sensor.ray_caster.two": _GRID,
    "sensor.ray_caster.trail": _GRID,
    "sensor.spherical_image.one": {
        "pattern_type": "lidar_pattern",
        "v_res": 2,
        "h_res": 2,
        "v_fov_min_deg": -45.0,
        "v_fov_max_deg": 45.0,
        "unobserved_value": -2.0,
    },
    "sensor.pinhole_image.one": {
        "pattern_type": "pinhole",
        "width": 2,
        "height": 2,
        "fx": 1.0,
        "fy": 1.0,
        "cx": 0.5,
        "cy": 0.5,
    },
}


def reference_model(
    path: pathlib.Path,
    *,
    inputs=None,
    outputs=None,
    metadata=None,
    base_names=None,
    seed: int = 0,
    **kwargs,
) -> pathlib.Path:
    """A random linear policy over the reference suite's tensors (override any part by keyword)."""
    ins = REF_INPUTS if inputs is None else inputs
    outs = REF_OUTPUTS if outputs is None else outputs
    rng = np.random.default_rng(seed)
    n_in, n_out = sum(s.size for s in ins), sum(s.size for s in outs)
    w = rng.uniform(-0.1, 0.1, (n_in, n_out))
    return export_mlp(
        path,
        inputs=ins,
        outputs=outs,
        layers=[(w, np.zeros(n_out))],
        activation=None,
        update_rate_hz=kwargs.pop("update_rate_hz", 10.0),
        metadata=REF_METADATA if metadata is None else metadata,
        base_names={"robot1": "base"} if base_names is None else base_names,
        actions_output=True,
        **kwargs,
    )


def set_full_example_commands(commands, goal: np.ndarray) -> None:
    """Values for every command of ``full_example_model`` (goal: (6,) rad, robot order)."""
    commands.set_joint_positions("goal", goal)
    commands.set_se3_pose("target", [0.4, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0])
    commands.set_se2_velocity("base_vel", [0.0, 0.0, 0.0])
    commands.set_boolean("enable", True)
    commands.set_float("speed", 0.5)


def drive(controller, robot, steps: int) -> np.ndarray:
    """Run ``steps`` control periods (update at the robot's clock, then step); returns q (steps, 6)."""
    qs = np.empty((steps, 6))
    for k in range(steps):
        if not controller.update(robot.read().t_us):
            raise AssertionError(f"update failed at step {k}: {controller.fault}")
        robot.step()
        qs[k] = robot.read().q
    return qs
