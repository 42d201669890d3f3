"""The interfaces implemented once on ``twin.robot.Robot`` (RobotStateAdapter) and the settable
command source: name mapping to the robot's joint order, kinematics-based bodies and IMU,
refused writes keeping the previous command, command validation."""

from __future__ import annotations

import numpy as np
import pytest
from control_fakes import IdealArmRobot

from twin.control import CommandSource, ComponentInitError, RobotStateAdapter
from twin.control.interfaces import (
    BaseInfo,
    BodyInfo,
    CommandInfo,
    FloatCommandInfo,
    ImuInfo,
    JointGroupInfo,
    JointInfo,
    JointPositionCommandGroupInfo,
    JointPositionCommandInfo,
    Se2VelocityCommandInfo,
)
from twin.control.metadata import Range, Se2VelocityRanges
from twin.robot import Health, ImuSample
from twin.spatial import SE3, SO3, quaternion


@pytest.fixture
def robot():
    arm = IdealArmRobot()
    arm.q = arm.model.home_q + np.array([0.1, -0.2, 0.3, -0.4, 0.5, -0.6])
    arm.qd = np.array([0.5, -0.4, 0.3, -0.2, 0.1, 0.7])
    return arm


@pytest.fixture
def adapter(robot):
    state = RobotStateAdapter(robot)
    assert state.begin_cycle(0)
    return state


def test_joint_groups_map_policy_order_to_robot_order(robot, adapter):
    names = tuple(reversed(robot.model.joint_names))
    group = JointGroupInfo("arm", names)
    out = np.zeros(6, np.float32)
    assert adapter.joint_positions(group, out)
    np.testing.assert_allclose(out, robot.q[::-1], rtol=1e-6)
    assert adapter.joint_velocities(group, out)
    np.testing.assert_allclose(out, robot.qd[::-1], rtol=1e-6)
    assert adapter.joint_position(JointInfo("arm", "joint_3")) == robot.q[2]
    for joint in group.joints():
        adapter.init_joint_output(joint)
    adapter.finish_init()
    gains = np.arange(1.0, 7.0)
    assert adapter.set_joint_targets(
        group, 0.2 * np.arange(6.0), -0.1 * np.arange(6.0), np.full(6, 0.5), gains, gains / 10
    )  # inside the joint limits, which Robot.write enforces (twin.safety)
    assert robot.writes == 0  # staged, sent once at the end of the cycle
    assert adapter.end_cycle(0) and robot.writes == 1
    cmd = robot.command
    np.testing.assert_array_equal(cmd.q_des, 0.2 * np.arange(6.0)[::-1])
    np.testing.assert_array_equal(cmd.qd_des, -0.1 * np.arange(6.0)[::-1])
    np.testing.assert_array_equal(cmd.kp, gains[::-1])
    np.testing.assert_array_equal(cmd.kd, gains[::-1] / 10)
    assert adapter.end_cycle(0) and robot.writes == 1  # nothing staged: nothing sent


def test_per_joint_setters_build_the_same_command(robot, adapter):
    for i, name in enumerate(robot.model.joint_names):
        info = JointInfo("arm", name)
        assert adapter.set_joint_position(info, 0.1 * i) and adapter.set_joint_velocity(info, 0.0)
        assert adapter.set_joint_effort(info, 1.0) and adapter.set_joint_p_gain(info, 10.0)
        assert adapter.set_joint_d_gain(info, 1.0)
    assert adapter.end_cycle(0)
    np.testing.assert_allclose(robot.command.q_des, 0.1 * np.arange(6))
    np.testing.assert_allclose(robot.command.tau_ff, np.ones(6))


def test_a_refused_write_keeps_the_previous_command(robot, adapter):
    group = JointGroupInfo("arm", robot.model.joint_names)
    ones = np.ones(6)
    adapter.set_joint_targets(group, ones, 0 * ones, 0 * ones, ones, ones)
    assert adapter.end_cycle(0)
    good = robot.command
    adapter.set_joint_targets(group, ones, 0 * ones, 0 * ones, -ones, ones)  # negative gain
    assert not adapter.end_cycle(0)
    assert "kp" in adapter.last_error and robot.command is good
    assert not adapter._dirty and np.array_equal(adapter._pending[3], ones)  # staging restored


def test_the_command_in_force_is_a_copy_not_the_staging_rows(robot, adapter):
    # The adapter reuses one JointCommand whose fields view its staging rows; Robot.write must
    # keep a validated copy, so staging the next cycle leaves the command in force untouched.
    group = JointGroupInfo("arm", robot.model.joint_names)
    ones = np.ones(6)
    adapter.set_joint_targets(group, ones, 0 * ones, 0 * ones, 5 * ones, ones)
    assert adapter.end_cycle(0)
    sent = robot.command
    adapter.set_joint_targets(group, 1.5 * ones, ones, ones, 7 * ones, 2 * ones)
    np.testing.assert_array_equal(sent.q_des, ones)
    np.testing.assert_array_equal(sent.kp, 5 * ones)
    assert adapter.end_cycle(1) and robot.command is not sent
    np.testing.assert_array_equal(robot.command.q_des, 1.5 * ones)  # inside the joint limits
    np.testing.assert_array_equal(sent.q_des, ones)


def test_body_kinematics_are_one_snapshot_per_cycle(robot, adapter):
    body = BodyInfo("arm", "tcp")
    adapter.init_body_linear_velocity_b(body)  # registers the twist with the pose
    first = adapter.body_position_w(body).copy()
    q0 = robot.q.copy()
    robot.q = robot.q + 0.05
    np.testing.assert_array_equal(adapter.body_position_w(body), first)  # same cycle
    assert adapter.begin_cycle(1)
    np.testing.assert_allclose(adapter.body_position_w(body), robot.model.fk(robot.q)[:3, 3])
    twist = robot.model.jacobian(robot.q) @ robot.qd
    rot = robot.model.fk(robot.q)[:3, :3]
    np.testing.assert_allclose(rot @ adapter.body_linear_velocity_b(body), twist[:3], atol=1e-12)
    assert not np.allclose(robot.model.fk(q0)[:3, 3], robot.model.fk(robot.q)[:3, 3])


def test_a_non_finite_joint_reading_fails_body_inputs_without_raising(robot, adapter):
    body = BodyInfo("arm", "tcp")
    robot.q = robot.q.copy()
    robot.q[2] = np.nan
    assert adapter.begin_cycle(1)
    assert adapter.body_position_w(body) is None
    assert adapter.body_angular_velocity_b(body) is None
    assert adapter.imu_orientation_w(ImuInfo("imu")) is None
    assert "not all finite" in adapter.last_error


def test_unknown_names_and_foreign_articulations_fail_init(robot):
    adapter = RobotStateAdapter(robot, articulation="arm")
    with pytest.raises(ComponentInitError, match=r"unknown joint 'elbow'.*'joint_1'"):
        adapter.init_joint_position(JointInfo("arm", "elbow"))
    with pytest.raises(ComponentInitError, match="articulation 'robot1' is not this robot's"):
        adapter.init_joint_output(JointInfo("robot1", "joint_1"))
    with pytest.raises(ComponentInitError, match="unknown body 'hand'"):
        adapter.init_body_position_w(BodyInfo("arm", "hand"))
    with pytest.raises(ComponentInitError, match="unknown IMU 'chest'"):
        adapter.init_imu_orientation_w(ImuInfo("chest"))
    with pytest.raises(ComponentInitError, match="SE\\(2\\) velocity sink"):
        adapter.init_se2_velocity(type("F", (), {"frame_name": "base"})())


def test_base_is_fixed_at_the_world_origin(adapter):
    base = BaseInfo("arm")
    adapter.init_base_pos_w(base)
    np.testing.assert_array_equal(adapter.base_pos_w(base), np.zeros(3))
    np.testing.assert_array_equal(adapter.base_quat_w(base), [1.0, 0.0, 0.0, 0.0])
    assert not adapter.base_lin_vel_b(base).any() and not adapter.base_ang_vel_b(base).any()


def test_body_pose_and_velocity_come_from_the_kinematic_model(robot, adapter):
    body = BodyInfo("arm", "tcp")
    adapter.init_body_position_w(body)
    pose = robot.model.fk(robot.q, "tcp")
    twist = robot.model.jacobian(robot.q, "tcp") @ robot.qd
    rot = pose[:3, :3]
    np.testing.assert_allclose(adapter.body_position_w(body), pose[:3, 3])
    quat = adapter.body_orientation_w(body)
    assert SO3(quat).angle_to(SO3.from_matrix(rot)) < 1e-12 and quat[0] >= 0.0
    np.testing.assert_allclose(rot @ adapter.body_linear_velocity_b(body), twist[:3], atol=1e-12)
    np.testing.assert_allclose(rot @ adapter.body_angular_velocity_b(body), twist[3:], atol=1e-12)


def test_imu_rate_is_measured_orientation_measured_or_from_kinematics(robot, adapter):
    imu = ImuInfo("imu")
    adapter.init_imu_angular_velocity_imu(imu)
    np.testing.assert_array_equal(
        adapter.imu_angular_velocity_imu(imu), robot.read().imu.angular_rate
    )
    expected = quaternion.from_matrix(robot.model.fk(robot.q, "imu")[:3, :3])
    np.testing.assert_allclose(adapter.imu_orientation_w(imu), expected)  # the sample has none
    measured = np.array([0.0, 1.0, 0.0, 0.0])
    robot._imu = ImuSample(0, np.zeros(3), np.zeros(3), orientation=measured)
    robot.health = Health.IMU_STALE
    assert adapter.begin_cycle(1)
    np.testing.assert_array_equal(adapter.imu_orientation_w(imu), measured)
    assert adapter.imu_angular_velocity_imu(imu) is None  # stale rate: no value this cycle
    rot = robot.model.fk(robot.q, "imu")[:3, :3]
    np.testing.assert_allclose(
        rot @ adapter.imu_linear_velocity_imu(imu),
        (robot.model.jacobian(robot.q, "imu") @ robot.qd)[:3],
        atol=1e-12,
    )


def test_begin_cycle_fails_with_a_reason(robot):
    adapter = RobotStateAdapter(robot)
    assert adapter.joint_position(JointInfo("arm", "joint_1")) is None  # no snapshot yet
    robot.health = Health.JOINTS_STALE
    assert not adapter.begin_cycle(0) and "JOINTS_STALE" in adapter.last_error

    def broken():
        raise OSError("port vanished")

    robot.read = broken
    assert not adapter.begin_cycle(0) and "port vanished" in adapter.last_error


# ---------------------------------------------------------------- commands
def test_unset_commands_have_no_value():
    commands = CommandSource()
    assert commands.se3_pose(CommandInfo("target")) is None
    assert commands.boolean_selector(CommandInfo("flag")) is None
    assert not commands.joint_positions(JointPositionCommandGroupInfo("goal", ("a",)), np.zeros(1))


def test_se3_pose_accepts_pose7_matrix_or_se3_and_stores_a_canonical_unit_quaternion():
    commands, info = CommandSource(), CommandInfo("target")
    commands.set_se3_pose("target", [1.0, 2.0, 3.0, -2.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(commands.se3_pose(info), [1, 2, 3, 1, 0, 0, 0])
    pose = SE3(SO3.from_rpy(0.1, -0.2, 0.3), [0.4, 0.0, 0.5])
    commands.set_se3_pose("target", pose.matrix())
    np.testing.assert_allclose(commands.se3_pose(info), pose.pose7(), atol=1e-12)
    commands.set_se3_pose("target", pose)
    np.testing.assert_allclose(commands.se3_pose(info), pose.pose7())
    with pytest.raises(ValueError, match="7 finite"):
        commands.set_se3_pose("target", [0.0, 0.0, np.nan, 1.0, 0.0, 0.0, 0.0])


def test_ranges_from_metadata_are_enforced():
    commands = CommandSource()
    ranges = Se2VelocityRanges(Range(-1, 1), Range(-0.5, 0.5), Range(-2, 2))
    commands.init_se2_velocity(Se2VelocityCommandInfo("vel", ranges))
    commands.set_se2_velocity("vel", [1.0, -0.5, 0.0])
    with pytest.raises(ValueError, match=r"lin_vel_y=0\.6"):
        commands.set_se2_velocity("vel", [0.0, 0.6, 0.0])
    commands.init_float_value(FloatCommandInfo("speed", Range(0.0, 1.0)))
    commands.set_float("speed", 1.0)
    for bad in (1.5, np.inf):
        with pytest.raises(ValueError, match="speed"):
            commands.set_float("speed", bad)
    assert commands.float_value(FloatCommandInfo("speed")) == 1.0


def test_joint_position_commands_follow_the_group_order():
    commands = CommandSource()
    with pytest.raises(ValueError, match="not registered"):
        commands.set_joint_positions("goal", [0.1, 0.2])
    for joint in ("b", "a"):
        commands.init_joint_position(JointPositionCommandInfo("goal", joint))
    commands.set_joint_positions("goal", [0.1, 0.2])  # registration order: b, a
    out = np.zeros(2)
    group = JointPositionCommandGroupInfo("goal", ("a", "b"))
    assert commands.joint_positions(group, out)
    np.testing.assert_array_equal(out, [0.2, 0.1])
    commands.set_joint_positions("goal", {"a": -1.0})  # a partial update keeps b
    assert commands.joint_positions(group, out)
    np.testing.assert_array_equal(out, [-1.0, 0.1])
    assert commands.joint_position(JointPositionCommandInfo("goal", "a")) == -1.0
    with pytest.raises(ValueError, match=r"unknown joints \['c'\]"):
        commands.set_joint_positions("goal", {"c": 0.0})
