"""OnnxRLController: mirrors exploy's controller_test.cpp (load failures, init without load,
exact init* calls for joints and gains, update rate, read/write failures making update false),
plus NaN outputs, reload with custom matchers, data collection, and the same controller on a
second Robot implementation (the in-memory arm)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from control_fakes import (
    IdealArmRobot,
    MemoryCollection,
    RecordingCommand,
    RecordingState,
    drive,
    full_example_model,
    reference_model,
    set_full_example_commands,
)

from twin.control import (
    CommandSource,
    ComponentInitError,
    CsvDataCollection,
    Input,
    Match,
    Matcher,
    ModelLoadError,
    OnnxRLController,
    RobotStateAdapter,
    WorkerMode,
    load_csv,
)
from twin.control.export import export_mlp, joint_targets_metadata
from twin.control.interfaces import BaseInfo, JointInfo, Se2VelocityCommandInfo
from twin.robot import Health

TIMEOUT_S = 2.0


# ---------------------------------------------------------------- custom matcher (extensibility)
class CustomInterface:
    def __init__(self) -> None:
        self.inits: list[str] = []
        self.data = {"extensible_data": [0.1, 0.2, 0.3]}

    def init_extensible_command(self, name: str) -> None:
        self.inits.append(name)

    def extensible_command(self, name: str):
        return self.data.get(name)


class CustomInput(Input):
    def __init__(self, tensor: str, command_name: str, custom: CustomInterface) -> None:
        super().__init__(tensor, (tensor,))
        self.command_name, self.custom = command_name, custom

    def bind(self, runtime) -> None:
        self._buf = runtime.input_buffer(self.name)

    def init(self, state, command) -> None:
        self.custom.init_extensible_command(self.command_name)

    def read(self, runtime, state, command) -> bool:
        data = self.custom.extensible_command(self.command_name)
        if data is None:
            return False
        self._buf[:] = data
        return True


class CustomMatcher(Matcher):
    pattern = re.compile(r"custom\.([a-zA-Z0-9_]+)")

    def __init__(self, custom: CustomInterface) -> None:
        super().__init__("CustomMatcher")
        self.custom = custom

    def matches(self, match: Match) -> bool:
        m = self.pattern.fullmatch(match.name)
        if m:
            self.found[match.name] = (match, m)
        return m is not None

    def create_inputs(self):
        return [CustomInput(name, m[1], self.custom) for name, (_, m) in self.found.items()]


@pytest.fixture(scope="module")
def ref_path(tmp_path_factory):
    return reference_model(tmp_path_factory.mktemp("ctl") / "ref.onnx")


@pytest.fixture(scope="module")
def full_path(tmp_path_factory):
    return full_example_model(
        tmp_path_factory.mktemp("ctl") / "full.onnx", IdealArmRobot().model.joint_names
    )


def sensor_values(state: RecordingState) -> None:
    sizes = {"one": 4, "two": 4, "trail": 8}
    state.values["height_scan"] = lambda info: {
        ch: np.zeros(sizes[info.sensor_name]) for ch in info.layer_names
    }
    state.values["spherical_image"] = lambda info: {ch: np.zeros(4) for ch in info.channel_names}
    state.values["pinhole_image"] = lambda info: {"depth": np.zeros(4)}


@pytest.fixture
def mocked(ref_path):
    state, command, custom = RecordingState(), RecordingCommand(), CustomInterface()
    sensor_values(state)
    controller = OnnxRLController(state, command, MemoryCollection())
    controller.context().register_matcher(CustomMatcher(custom))
    assert controller.create(ref_path), controller.error
    assert controller.init(False), controller.error
    yield controller, state, command, custom
    controller.close()


# ---------------------------------------------------------------- reference suite
def test_load_fails(tmp_path):
    state, command = RecordingState(), RecordingCommand()
    controller = OnnxRLController(state, command)
    assert not controller.create("")
    assert isinstance(controller.error, ModelLoadError)
    assert not controller.create(tmp_path / "missing.onnx")
    assert "missing.onnx" in str(controller.error)
    assert state.calls == [] and command.calls == []  # nothing touched the robot


def test_init_without_load():
    state, command = RecordingState(), RecordingCommand()
    controller = OnnxRLController(state, command)
    assert not controller.init(False)
    assert "create" in str(controller.error)
    assert not controller.update(0) and "not initialized" in controller.fault
    assert state.calls == [] and command.calls == []


def test_init_calls_exactly_the_interfaces_the_model_needs(mocked):
    controller, state, command, custom = mocked
    assert controller.context().update_rate == 10
    assert state.called("init_base_pos_w") == [(BaseInfo("robot1"),)] * 4  # base + 3 height scans
    assert state.called("init_base_quat_w") == [(BaseInfo("robot1"),)] * 4
    assert len(state.called("init_base_lin_vel_b")) == len(state.called("init_base_ang_vel_b")) == 1
    assert state.called("init_joint_output") == [
        (JointInfo("robot1", "j1"),),
        (JointInfo("robot1", "j2"),),
    ]
    assert sorted(state.keys("init_joint_position")) == ["j1", "j2", "j3"]
    assert sorted(state.keys("init_joint_velocity")) == ["j1", "j2", "j3"]
    assert state.keys("init_se2_velocity") == ["base_frame"]
    assert sorted(state.keys("init_height_scan")) == ["one", "trail", "two"]
    assert state.keys("init_spherical_image") == ["one"] and state.keys("init_pinhole_image") == [
        "one"
    ]
    assert state.keys("init_imu_linear_velocity_imu") == ["pelvis"]
    assert state.keys("init_imu_angular_velocity_imu") == ["pelvis"]
    assert state.keys("init_imu_orientation_w") == ["torso"]
    for method in (
        "init_body_position_w",
        "init_body_orientation_w",
        "init_body_linear_velocity_b",
        "init_body_angular_velocity_b",
    ):
        assert sorted((a[0].articulation_name, a[0].body_name) for a in state.called(method)) == [
            ("box1", "box"),
            ("box2", "box"),
        ]
    assert len(state.called("finish_init")) == 1
    se2 = {a[0].command_name: a[0] for a in command.called("init_se2_velocity")}
    assert se2["vel"] == Se2VelocityCommandInfo("vel", None)
    assert (
        se2["vel_with_range"].ranges.lin_vel_x.lo,
        se2["vel_with_range"].ranges.ang_vel_z.hi,
    ) == (-1.5, 2.5)
    assert command.keys("init_se3_pose") == ["pose"] and command.keys("init_boolean_selector") == [
        "selector"
    ]
    assert command.called("init_float_value")[0][0].range.hi == 2.0
    assert [a[0].joint_name for a in command.called("init_joint_position")] == ["j1", "j2"]
    assert custom.inits == ["extensible_data"]
    assert not state.called("begin_cycle")  # init reads nothing


def test_update_sets_targets_with_metadata_gains(mocked):
    controller, state, _, _ = mocked
    assert controller.update(0), controller.fault
    gains = {
        (a[0].joint_name, name): a[1]
        for name, a in state.calls
        if name in ("set_joint_p_gain", "set_joint_d_gain")
    }
    assert gains == {
        ("j1", "set_joint_p_gain"): 1.0,
        ("j2", "set_joint_p_gain"): 2.0,
        ("j1", "set_joint_d_gain"): 0.1,
        ("j2", "set_joint_d_gain"): 0.2,
    }
    pos = controller.runtime.output_buffer("output.joint_targets.robot1.pos")
    assert [a[1] for a in state.called("set_joint_position")] == pytest.approx(pos.tolist())
    assert state.keys("set_se2_velocity") == ["base_frame"]
    assert len(state.called("begin_cycle")) == len(state.called("end_cycle")) == 1
    assert controller.runtime.input_buffer("custom.extensible_data").tolist() == pytest.approx(
        [0.1, 0.2, 0.3]
    )
    assert controller.update(50_000)  # within the 100 ms period: nothing runs
    assert len(state.called("begin_cycle")) == 1
    assert controller.update(100_000) and len(state.called("begin_cycle")) == 2


def test_read_joint_failure_makes_update_false_and_writes_nothing(mocked):
    controller, state, _, _ = mocked
    state.refuse.add(("joint_position", "j1"))
    assert not controller.update(0)
    assert "obj.robot1.joints.pos" in controller.fault
    assert not [name for name, _ in state.calls if name.startswith("set_")]


def test_write_joint_failure_makes_update_false(mocked):
    controller, state, _, _ = mocked
    state.refuse.add(("set_joint_position", "j1"))
    assert not controller.update(0)
    assert "output.joint_targets.robot1" in controller.fault
    assert not state.called("end_cycle")


def test_custom_input_failure_makes_update_false(mocked):
    controller, _, _, custom = mocked
    custom.data.clear()
    assert not controller.update(0) and "custom.extensible_data" in controller.fault


def test_create_is_recallable_and_custom_matchers_survive(ref_path, tmp_path):
    state, command, custom = RecordingState(), RecordingCommand(), CustomInterface()
    sensor_values(state)
    controller = OnnxRLController(state, command)
    controller.context().register_matcher(CustomMatcher(custom))
    assert not controller.create(ref_path, register_default_matchers=False)  # only the custom one
    assert "strict" in str(controller.error)
    assert controller.create(ref_path)  # defaults registered now
    n = len(controller.context().matchers)
    assert controller.create(ref_path) and len(controller.context().matchers) == n  # not twice
    assert any(isinstance(m, CustomMatcher) for m in controller.context().matchers)
    assert controller.init() and controller.update(0)
    assert not controller.create(tmp_path / "gone.onnx")
    assert not controller.update(0)  # a failed reload leaves no half-initialised controller


# ---------------------------------------------------------------- on a Robot
def _adapter_controller(path, robot=None, collection=None, **adapter_kwargs):
    robot = robot or IdealArmRobot()
    state, commands = RobotStateAdapter(robot, **adapter_kwargs), CommandSource()
    controller = OnnxRLController(state, commands, collection)
    assert controller.create(path), controller.error
    return controller, robot, commands


def test_second_robot_implementation_reaches_the_commanded_configuration(full_path):
    """The controller code that drives the sim arm (test_control_sim) runs unchanged here."""
    controller, robot, commands = _adapter_controller(full_path)
    assert controller.init(), controller.error
    goal = robot.model.home_q + np.array([0.2, -0.1, 0.15, 0.3, -0.2, 0.4])
    set_full_example_commands(commands, goal)
    qs = drive(controller, robot, 250)
    assert np.abs(qs[-50:] - goal).max() < 1e-3  # within 1 mrad, and staying
    assert np.abs(qs[0] - goal).max() > 0.1
    np.testing.assert_allclose(robot.command.kp, [240.0, 480.0, 240.0, 50.0, 50.0, 20.0])
    assert robot.writes == 250
    controller.close()


def test_nan_policy_output_keeps_the_last_safe_command_and_reports(tmp_path):
    joints = IdealArmRobot().model.joint_names
    w = np.zeros((7, 6))
    w[:6] = np.eye(6)  # pos target = q ...
    w[6] = 1e30  # ... + 1e30 * scale: overflows float32 for scale >= 1e9
    path = export_mlp(
        tmp_path / "nan.onnx",
        inputs=[("obj.arm.joints.pos", 6), ("cmd.float.scale", 1)],
        outputs=[("output.joint_targets.arm.pos", 6)],
        layers=[(w, np.zeros(6))],
        activation=None,
        update_rate_hz=250,
        metadata={
            "obj.arm.joints": {"joint_names": list(joints)},
            "output.joint_targets.arm": joint_targets_metadata(joints, [10.0] * 6, [1.0] * 6),
        },
    )
    for mode in (WorkerMode.SYNC, WorkerMode.ASYNC):
        controller, robot, commands = _adapter_controller(path)
        assert controller.init(mode=mode)
        commands.set_float("scale", 0.0)
        t = 0
        deadline = time.monotonic() + TIMEOUT_S
        while robot.writes == 0:  # async: the write comes at a later update
            assert controller.update(t) and time.monotonic() < deadline
            t += 4000
        commands.set_float("scale", 1e10)
        deadline = time.monotonic() + TIMEOUT_S
        while controller.update(t):  # async: a cycle already in flight may still write
            assert time.monotonic() < deadline
            t += 4000
        assert (
            "not finite" in controller.fault and "output.joint_targets.arm.pos" in controller.fault
        )
        safe, writes = robot.command, robot.writes
        assert np.all(np.isfinite(safe.q_des))
        for _ in range(3):
            t += 4000
            assert not controller.update(t)
        assert robot.command is safe and robot.writes == writes  # the last safe command stays
        commands.set_float("scale", 0.0)
        recovered = controller.update(t + 4000)
        assert recovered is (mode is WorkerMode.SYNC)  # async latches the fault until reset()
        if mode is WorkerMode.ASYNC:
            controller.reset()
            deadline = time.monotonic() + TIMEOUT_S
            while robot.writes == writes:
                assert controller.update(t) and time.monotonic() < deadline
                t += 4000
        assert controller.fault_count >= 1
        controller.close()


def test_reset_restarts_step_count_and_memory(full_path):
    controller, robot, commands = _adapter_controller(full_path)
    assert controller.init()
    set_full_example_commands(commands, robot.model.home_q + 0.1)
    drive(controller, robot, 3)
    rt = controller.runtime
    assert rt.input_buffer("ctx.step_count", np.int32)[0] == 3
    assert np.abs(rt.input_buffer("memory.integral.in")).max() > 0
    controller.reset()
    assert (
        rt.input_buffer("ctx.step_count", np.int32)[0] == 0
        and not rt.input_buffer("memory.integral.in").any()
    )
    drive(controller, robot, 1)
    assert rt.input_buffer("ctx.step_count", np.int32)[0] == 1


def test_unknown_joint_fails_init_naming_it(tmp_path):
    robot = IdealArmRobot()
    joints = (*robot.model.joint_names[:5], "joint_7")
    path = export_mlp(
        tmp_path / "j7.onnx",
        inputs=[("obj.arm.joints.pos", 6)],
        outputs=[("output.joint_targets.arm.pos", 6)],
        layers=[(np.zeros((6, 6)), np.zeros(6))],
        update_rate_hz=250,
        metadata={
            "obj.arm.joints": {"joint_names": list(robot.model.joint_names)},
            "output.joint_targets.arm": joint_targets_metadata(joints, [1.0] * 6, [0.1] * 6),
        },
    )
    controller, _, _ = _adapter_controller(path, robot)
    assert not controller.init()
    assert isinstance(controller.error, ComponentInitError)
    message = str(controller.error)
    assert "output.joint_targets.arm" in message and "unknown joint 'joint_7'" in message
    assert "'joint_1'" in message  # and lists the robot's joints
    assert not controller.update(0)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("obj.arm.gripper.w_Q_b", "unknown body 'gripper'"),
        ("sensor.imu.chest.w_Q_b", "unknown IMU 'chest'"),
    ],
)
def test_unknown_body_or_imu(tmp_path, name, expected):
    joints = IdealArmRobot().model.joint_names
    path = export_mlp(
        tmp_path / "b.onnx",
        inputs=[(name, 4)],
        outputs=[("output.joint_targets.arm.pos", 6)],
        layers=[(np.zeros((4, 6)), np.zeros(6))],
        update_rate_hz=250,
        metadata={"output.joint_targets.arm": joint_targets_metadata(joints, [1.0] * 6, [0.1] * 6)},
    )
    controller, _, _ = _adapter_controller(path)
    assert not controller.init() and expected in str(controller.error)


def test_joints_without_targets_need_hold_gains(tmp_path):
    robot = IdealArmRobot()
    joints = robot.model.joint_names[:3]
    path = export_mlp(
        tmp_path / "half.onnx",
        inputs=[("obj.arm.joints.pos", 3)],
        outputs=[("output.joint_targets.arm.pos", 3)],
        layers=[(np.eye(3), np.zeros(3))],
        update_rate_hz=250,
        activation=None,
        metadata={
            "obj.arm.joints": {"joint_names": list(joints)},
            "output.joint_targets.arm": joint_targets_metadata(joints, [5.0] * 3, [0.5] * 3),
        },
    )
    controller, robot, _ = _adapter_controller(path, robot)
    assert not controller.init()
    assert "['joint_4', 'joint_5', 'joint_6']" in str(controller.error) and "hold_kp" in str(
        controller.error
    )
    controller, robot, _ = _adapter_controller(
        path, robot, hold_kp=np.full(6, 7.0), hold_kd=np.full(6, 0.7)
    )
    assert controller.init() and controller.update(0)
    np.testing.assert_allclose(robot.command.kp, [5, 5, 5, 7, 7, 7])
    np.testing.assert_allclose(robot.command.q_des, robot.q, atol=1e-6)  # float32 round trip


def test_unusable_robot_state_fails_the_cycle(full_path):
    controller, robot, commands = _adapter_controller(full_path)
    assert controller.init()
    set_full_example_commands(commands, robot.model.home_q)
    robot.health = Health.DISCONNECTED
    assert not controller.update(0)
    assert "begin_cycle" in controller.fault and "DISCONNECTED" in controller.state.last_error
    assert robot.writes == 0


def test_unset_command_fails_the_cycle(full_path):
    controller, robot, commands = _adapter_controller(full_path)
    assert controller.init()
    set_full_example_commands(commands, robot.model.home_q)
    commands._se3.clear()  # as if never set
    assert not controller.update(0) and "cmd.se3_pose.target" in controller.fault


# ---------------------------------------------------------------- data collection
def test_data_collection_writes_every_source_each_cycle(full_path, tmp_path):
    csv = tmp_path / "log" / "run.csv"
    with CsvDataCollection(csv) as collection:
        controller, robot, commands = _adapter_controller(full_path, collection=collection)
        assert controller.init(enable_data_collection=True)
        set_full_example_commands(commands, robot.model.home_q + 0.05)
        qs, times = [], []
        for _ in range(5):
            qs.append(robot.read().q)
            times.append(robot.t_us)
            assert controller.update(robot.t_us)
            robot.step()
    log = load_csv(csv)
    assert log["t_us"].tolist() == times
    np.testing.assert_allclose(log["model/input/obj.arm.joints.pos"], np.float32(qs), rtol=1e-7)
    assert log["model/output/output.joint_targets.arm.pos"].shape == (5, 6)
    assert log["model/output/actions"].shape == (5, 24)
    assert np.all(log["model/inference/duration_s"] > 0)
    assert (
        "model/input/ctx.step_count" not in log and "model/input/cmd.boolean.enable" not in log
    )  # float only
    assert collection.rows_written == 5 and collection.rows_dropped == 0


def test_data_collection_that_cannot_write_faults_loudly(full_path, tmp_path):
    collection = CsvDataCollection(tmp_path)  # a directory: cannot be opened as a file
    controller, robot, commands = _adapter_controller(full_path, collection=collection)
    assert controller.init(enable_data_collection=True)
    set_full_example_commands(commands, robot.model.home_q)
    assert not controller.update(0)
    assert "data collection" in controller.fault
    assert collection.rows_dropped == 1 and str(tmp_path) in collection.error
    assert robot.writes == 1  # the command itself went out before the log failed


def test_data_sources_registered_match_the_reference(mocked):
    controller = mocked[0]
    collection = MemoryCollection()
    controller.data_collection = collection
    assert controller.init(enable_data_collection=True)
    assert "model/inference/duration_s" in collection.sources
    assert "model/input/obj.robot1.joints.pos" in collection.sources
    assert "model/output/memory.hidden.out" in collection.sources
    assert "model/input/cmd.boolean.selector" not in collection.sources
    assert controller.update(0) and len(collection.rows) == 1
