"""Components: mirrors exploy's components_test.cpp (each input and output against recording
interfaces and a real runtime; step count increments; memory copies out to in), plus the
exteroceptive inputs failing ``init`` on a backend without such sensors."""

from __future__ import annotations

import numpy as np
import pytest
from control_fakes import IdealArmRobot, RecordingCommand, RecordingState, reference_model

from twin.control import ComponentInitError, OnnxRuntime, RobotStateAdapter
from twin.control import components as c
from twin.control.interfaces import (
    BaseInfo,
    BodyInfo,
    CommandInfo,
    FloatCommandInfo,
    FrameInfo,
    HeightScanInfo,
    ImuInfo,
    JointGroupInfo,
    JointInfo,
    JointPositionCommandGroupInfo,
    JointPositionCommandInfo,
    PinholeImageInfo,
    Se2VelocityCommandInfo,
    SphericalImageInfo,
)
from twin.control.metadata import (
    HeightScanMetadata,
    JointTargetsMetadata,
    PinholeImageMetadata,
    SphericalImageMetadata,
)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return reference_model(tmp_path_factory.mktemp("comp") / "ref.onnx")


@pytest.fixture
def rt(model_path):
    runtime = OnnxRuntime()
    runtime.initialize(model_path)
    yield runtime
    runtime.close()


@pytest.fixture
def state():
    return RecordingState()


@pytest.fixture
def command():
    return RecordingCommand()


def bound(component, rt):
    component.bind(rt)
    return component


def test_joint_position_input_init_and_read(rt, state, command):
    group = JointGroupInfo("robot1", ("j1", "j2", "j3"))
    joint_input = bound(c.JointPositionInput("obj.robot1.joints.pos", group), rt)
    joint_input.init(state, command)
    assert state.called("init_joint_position") == [
        (JointInfo("robot1", j),) for j in ("j1", "j2", "j3")
    ]
    state.values["joint_position"] = {"j1": 1.5, "j2": 2.0, "j3": 0.5}
    assert joint_input.read(rt, state, command)
    np.testing.assert_array_equal(rt.input_buffer("obj.robot1.joints.pos"), [1.5, 2.0, 0.5])
    state.refuse.add(("joint_position", "j2"))
    assert not joint_input.read(rt, state, command)


def test_joint_velocity_input_init_and_read(rt, state, command):
    group = JointGroupInfo("robot1", ("j1", "j2", "j3"))
    joint_input = bound(c.JointVelocityInput("obj.robot1.joints.vel", group), rt)
    joint_input.init(state, command)
    assert state.keys("init_joint_velocity") == ["j1", "j2", "j3"]
    state.values["joint_velocity"] = {"j1": 0.5, "j2": -0.3, "j3": 0.1}
    assert joint_input.read(rt, state, command)
    np.testing.assert_allclose(
        rt.input_buffer("obj.robot1.joints.vel"), [0.5, -0.3, 0.1], rtol=1e-7
    )


@pytest.mark.parametrize(
    ("cls", "tensor", "init", "getter", "value"),
    [
        (
            c.BasePositionInput,
            "obj.robot1.base.pos_b_rt_w_in_w",
            "init_base_pos_w",
            "base_pos_w",
            [1.0, 2.0, 3.0],
        ),
        (
            c.BaseOrientationInput,
            "obj.robot1.base.w_Q_b",
            "init_base_quat_w",
            "base_quat_w",
            [1.0, 0.0, 0.0, 0.0],
        ),
        (
            c.BaseLinearVelocityInput,
            "obj.robot1.base.lin_vel_b_rt_w_in_b",
            "init_base_lin_vel_b",
            "base_lin_vel_b",
            [0.5, 0.0, 0.0],
        ),
        (
            c.BaseAngularVelocityInput,
            "obj.robot1.base.ang_vel_b_rt_w_in_b",
            "init_base_ang_vel_b",
            "base_ang_vel_b",
            [0.0, 0.0, 0.1],
        ),
    ],
)
def test_base_inputs_init_read_and_init_failure(
    rt, state, command, cls, tensor, init, getter, value
):
    component = bound(cls(tensor, BaseInfo("robot1")), rt)
    component.init(state, command)
    assert state.called(init) == [(BaseInfo("robot1"),)]
    state.values[getter] = np.array(value)
    assert component.read(rt, state, command)
    np.testing.assert_allclose(rt.input_buffer(tensor), value)
    state.refuse.add(init)
    with pytest.raises(ComponentInitError, match=init):
        component.init(state, command)
    state.refuse.add(getter)
    assert not component.read(rt, state, command)


@pytest.mark.parametrize(
    ("cls", "field", "getter", "value"),
    [
        (c.BodyPositionInput, "pos_b_rt_w_in_w", "body_position_w", [0.1, 0.2, 0.3]),
        (c.BodyOrientationInput, "w_Q_b", "body_orientation_w", [0.707, 0.0, 0.0, 0.707]),
        (
            c.BodyLinearVelocityInput,
            "lin_vel_b_rt_w_in_b",
            "body_linear_velocity_b",
            [1.0, 0.0, -1.0],
        ),
        (
            c.BodyAngularVelocityInput,
            "ang_vel_b_rt_w_in_b",
            "body_angular_velocity_b",
            [0.0, 3.0, 0.0],
        ),
    ],
)
def test_body_inputs(rt, state, command, cls, field, getter, value):
    tensor = f"obj.box1.box.{field}"
    component = bound(cls(tensor, BodyInfo("box1", "box")), rt)
    component.init(state, command)
    assert state.calls[-1][1] == (BodyInfo("box1", "box"),)
    state.values[getter] = {"box": np.array(value)}
    assert component.read(rt, state, command)
    np.testing.assert_allclose(rt.input_buffer(tensor), value, rtol=1e-7)


@pytest.mark.parametrize(
    ("cls", "tensor", "getter", "value"),
    [
        (
            c.ImuOrientationInput,
            "sensor.imu.torso.w_Q_b",
            "imu_orientation_w",
            [0.0, 1.0, 0.0, 0.0],
        ),
        (
            c.ImuAngularVelocityInput,
            "sensor.imu.pelvis.ang_vel_b_rt_w_in_b",
            "imu_angular_velocity_imu",
            [0.1, 0.2, 0.3],
        ),
        (
            c.ImuLinearVelocityInput,
            "sensor.imu.pelvis.lin_vel_b_rt_w_in_b",
            "imu_linear_velocity_imu",
            [1.0, 2.0, 3.0],
        ),
    ],
)
def test_imu_inputs(rt, state, command, cls, tensor, getter, value):
    imu = tensor.split(".")[2]
    component = bound(cls(tensor, ImuInfo(imu)), rt)
    component.init(state, command)
    assert state.keys(f"init_{getter}") == [imu]
    state.values[getter] = np.array(value)
    assert component.read(rt, state, command)
    np.testing.assert_allclose(rt.input_buffer(tensor), value, rtol=1e-7)


def test_command_inputs(rt, state, command):
    se2 = bound(
        c.CommandSe2VelocityInput("cmd.se2_velocity.vel", Se2VelocityCommandInfo("vel")), rt
    )
    pose = bound(c.CommandSe3PoseInput("cmd.se3_pose.pose", CommandInfo("pose")), rt)
    flag = bound(c.CommandBooleanInput("cmd.boolean.selector", CommandInfo("selector")), rt)
    value = bound(c.CommandFloatInput("cmd.float.value", FloatCommandInfo("value")), rt)
    group = JointPositionCommandGroupInfo("arm", ("j1", "j2"))
    joints = bound(c.CommandJointPositionInput("cmd.joint_pos.arm", group), rt)
    for comp in (se2, pose, flag, value, joints):
        comp.init(state, command)
    assert [name for name, _ in command.calls] == [
        "init_se2_velocity",
        "init_se3_pose",
        "init_boolean_selector",
        "init_float_value",
        "init_joint_position",
        "init_joint_position",
    ]
    assert command.called("init_joint_position") == [
        (JointPositionCommandInfo("arm", j),) for j in ("j1", "j2")
    ]
    assert state.calls == []  # commands never touch the state interface
    command.values.update(
        se2_velocity=np.array([0.5, -0.25, 1.0]),
        se3_pose=np.array([1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 1.0]),
        boolean_selector=True,
        float_value=1.23,
        joint_position={"j1": -0.5, "j2": 0.75},
    )
    assert all(comp.read(rt, state, command) for comp in (se2, pose, flag, value, joints))
    np.testing.assert_allclose(rt.input_buffer("cmd.se2_velocity.vel"), [0.5, -0.25, 1.0])
    np.testing.assert_allclose(rt.input_buffer("cmd.se3_pose.pose"), [1, 2, 3, 0, 0, 0, 1])
    assert rt.input_buffer("cmd.boolean.selector", np.bool_)[0]
    assert rt.input_buffer("cmd.float.value")[0] == pytest.approx(1.23)
    np.testing.assert_allclose(rt.input_buffer("cmd.joint_pos.arm"), [-0.5, 0.75])
    command.refuse.add("se3_pose")
    assert not pose.read(rt, state, command)


def test_step_count_increments_by_one_before_each_inference(rt, state, command):
    step = bound(c.StepCountInput("ctx.step_count"), rt)
    buf = rt.input_buffer("ctx.step_count", np.int32)
    for expected in (1, 2, 3):
        assert step.read(rt, state, command)
        assert buf[0] == expected
    rt.reset_buffers()
    assert step.read(rt, state, command) and buf[0] == 1
    assert state.calls == [] and command.calls == []


def test_memory_output_copies_out_to_in(rt, state, command):
    memory = bound(c.MemoryOutput("hidden"), rt)
    memory_in = rt.input_buffer("memory.hidden.in")
    memory_in[:] = [100.0, 101.0]
    rt.input_buffer("obj.robot1.joints.pos")[:] = [0.3, -0.2, 0.1]
    assert rt.evaluate()
    out = rt.output_buffer("memory.hidden.out").copy()
    assert not np.array_equal(out, memory_in)
    assert memory.write(rt, state, command)
    np.testing.assert_array_equal(memory_in, out)
    assert memory.tensors == ("memory.hidden.in", "memory.hidden.out")


def test_joint_target_output_sends_targets_and_metadata_gains(rt, state, command):
    meta = JointTargetsMetadata(("j1", "j2"), np.array([1.0, 2.0]), np.array([0.1, 0.2]))
    target = bound(
        c.JointTargetOutput(
            "output.joint_targets.robot1", "robot1", meta, ("pos", "vel", "effort")
        ),
        rt,
    )
    target.init(state, command)
    assert state.called("init_joint_output") == [
        (JointInfo("robot1", "j1"),),
        (JointInfo("robot1", "j2"),),
    ]
    rt.output_buffer("output.joint_targets.robot1.pos")[:] = [0.5, -0.5]
    rt.output_buffer("output.joint_targets.robot1.vel")[:] = [1.0, -1.0]
    rt.output_buffer("output.joint_targets.robot1.effort")[:] = [2.0, -2.0]
    state.calls.clear()
    assert target.write(rt, state, command)
    j1, j2 = JointInfo("robot1", "j1"), JointInfo("robot1", "j2")
    assert state.calls == [
        ("set_joint_position", (j1, 0.5)),
        ("set_joint_velocity", (j1, 1.0)),
        ("set_joint_effort", (j1, 2.0)),
        ("set_joint_p_gain", (j1, 1.0)),
        ("set_joint_d_gain", (j1, 0.1)),
        ("set_joint_position", (j2, -0.5)),
        ("set_joint_velocity", (j2, -1.0)),
        ("set_joint_effort", (j2, -2.0)),
        ("set_joint_p_gain", (j2, 2.0)),
        ("set_joint_d_gain", (j2, 0.2)),
    ]
    state.refuse.add(("set_joint_position", "j1"))
    state.calls.clear()
    assert not target.write(rt, state, command)
    assert [name for name, _ in state.calls] == ["set_joint_position"]  # stops at the refusal


def test_joint_target_output_sends_zeros_for_members_the_model_lacks(rt, state, command):
    meta = JointTargetsMetadata(("j1", "j2"), np.array([1.0, 2.0]), np.array([0.1, 0.2]))
    target = bound(c.JointTargetOutput("output.joint_targets.robot1", "robot1", meta, ("pos",)), rt)
    rt.output_buffer("output.joint_targets.robot1.vel")[:] = 9.0  # not part of this component
    assert target.write(rt, state, command)
    assert {
        args[1] for name, args in state.calls if name in ("set_joint_velocity", "set_joint_effort")
    } == {0.0}


def test_se2_velocity_output(rt, state, command):
    out = bound(c.Se2VelocityOutput("output.se2_velocity.base_vel", "base_frame"), rt)
    out.init(state, command)
    assert state.called("init_se2_velocity") == [(FrameInfo("base_frame"),)]
    rt.output_buffer("output.se2_velocity.base_vel")[:] = [0.1, 0.2, 0.3]
    assert out.write(rt, state, command)
    (info, velocity) = state.called("set_se2_velocity")[0]
    assert info == FrameInfo("base_frame")
    np.testing.assert_allclose(velocity, [0.1, 0.2, 0.3], rtol=1e-7)


GRID = HeightScanMetadata("grid_pattern", 0.1, 1.6, 1.0, articulation_name="robot1")


def _sensors():
    channels = frozenset({"height", "r", "g", "b"})
    scan = c.HeightScanInput(
        "sensor.ray_caster.trail", HeightScanInfo("trail", GRID, channels), channels
    )
    lidar_meta = SphericalImageMetadata("lidar", 2, 2, -45.0, 45.0, -2.0)
    lidar_channels = frozenset({"range", "risk"})
    lidar = c.SphericalImageInput(
        "sensor.spherical_image.one",
        SphericalImageInfo("one", lidar_meta, lidar_channels),
        lidar_channels,
    )
    cam_meta = PinholeImageMetadata("pinhole", 2, 2, 1.0, 1.0, 0.5, 0.5)
    cam = c.PinholeImageInput(
        "sensor.pinhole_image.one",
        PinholeImageInfo("one", cam_meta, frozenset({"depth"})),
        frozenset({"depth"}),
    )
    return scan, lidar, cam


def test_exteroceptive_inputs_read_every_channel(rt, state, command):
    scan, lidar, cam = (bound(s, rt) for s in _sensors())
    for comp in (scan, lidar, cam):
        comp.init(state, command)
    assert [name for name, _ in state.calls] == [
        "init_height_scan",
        "init_base_pos_w",
        "init_base_quat_w",
        "init_spherical_image",
        "init_pinhole_image",
    ]
    assert state.called("init_base_pos_w") == [(BaseInfo("robot1"),)]
    layers = {ch: np.full(8, k, np.float32) for k, ch in enumerate(("height", "r", "g", "b"))}
    state.values.update(
        height_scan=lambda info: layers,
        spherical_image=lambda info: {"range": np.arange(4.0), "risk": -np.arange(4.0)},
        pinhole_image=lambda info: {"depth": np.full((2, 2), 0.5)},
    )
    assert (
        scan.read(rt, state, command)
        and lidar.read(rt, state, command)
        and cam.read(rt, state, command)
    )
    np.testing.assert_array_equal(rt.input_buffer("sensor.ray_caster.trail.g"), np.full(8, 2.0))
    np.testing.assert_array_equal(
        rt.input_buffer("sensor.spherical_image.one.risk"), -np.arange(4.0)
    )
    np.testing.assert_array_equal(
        rt.input_buffer("sensor.pinhole_image.one.depth"), np.full(4, 0.5)
    )
    state.values["pinhole_image"] = lambda info: {"depth": np.zeros(3)}  # wrong size: no value
    assert not cam.read(rt, state, command)


def test_exteroceptive_inputs_fail_init_on_the_arm_backend(rt):
    adapter = RobotStateAdapter(IdealArmRobot())
    for comp, what in zip(
        _sensors(), ("height scanner", "spherical image sensor", "pinhole camera")
    ):
        with pytest.raises(ComponentInitError, match=f"{what}.*this backend has none"):
            bound(comp, rt).init(adapter, RecordingCommand())
