"""The controller's compiled cycle (``compile`` at ``init``): the adapter's and the command
source's bound calls do what the group calls do, in any joint order, and a refused write keeps
the previous command with them too."""

from __future__ import annotations

import numpy as np
import pytest
from control_fakes import IdealArmRobot

from twin.control import CommandSource, RobotStateAdapter
from twin.control.interfaces import JointGroupInfo, JointPositionCommandGroupInfo


@pytest.fixture
def robot():
    arm = IdealArmRobot()
    arm.q = arm.model.home_q + np.array([0.1, -0.2, 0.3, -0.4, 0.5, -0.6])
    arm.qd = np.array([0.5, -0.4, 0.3, -0.2, 0.1, 0.7])
    return arm


@pytest.mark.parametrize("order", [slice(None), slice(None, None, -1), [4, 1]])
def test_compiled_readers_follow_each_cycles_snapshot(robot, order):
    names = tuple(np.array(robot.model.joint_names)[order])
    adapter = RobotStateAdapter(robot)
    pos, vel = np.zeros(len(names), np.float32), np.zeros(len(names), np.float32)
    group = JointGroupInfo("arm", names)
    read_q = adapter.joint_positions_reader(group, pos)
    read_qd = adapter.joint_velocities_reader(group, vel)
    assert not read_q() and not read_qd()  # no snapshot before the first cycle
    for shift in (0.0, 0.25):
        robot.q = robot.q + shift
        assert adapter.begin_cycle(0) and read_q() and read_qd()
        np.testing.assert_allclose(pos, robot.q[order], rtol=1e-6)
        np.testing.assert_allclose(vel, robot.qd[order], rtol=1e-6)


def test_the_compiled_writer_stages_the_gains_once_and_keeps_them_after_a_refusal(robot):
    adapter = RobotStateAdapter(robot)
    assert adapter.begin_cycle(0)
    group = JointGroupInfo("arm", robot.model.joint_names)
    pos, vel, effort = np.zeros(6, np.float32), np.zeros(6, np.float32), np.zeros(6, np.float32)
    kp, kd = np.full(6, 40.0), np.full(6, 2.0)
    write = adapter.joint_targets_writer(group, pos, vel, effort, kp, kd)
    pos[:] = 0.1
    assert write() and adapter.end_cycle(0)
    good = robot.command
    np.testing.assert_allclose(good.q_des, 0.1, rtol=1e-6)
    np.testing.assert_array_equal(good.kp, kp)
    np.testing.assert_array_equal(good.kd, kd)
    pos[2] = np.inf  # the robot refuses a non-finite target: the previous command stays
    assert write() and not adapter.end_cycle(0)
    assert robot.command is good and "q_des" in adapter.last_error
    pos[:] = 0.2  # the next cycle sends again, with the gains staged at compile time
    assert write() and adapter.end_cycle(0)
    np.testing.assert_allclose(robot.command.q_des, 0.2, rtol=1e-6)
    np.testing.assert_array_equal(robot.command.kp, kp)


def test_a_compiled_writer_for_some_joints_writes_only_those(robot):
    adapter = RobotStateAdapter(robot, hold_kp=np.full(6, 7.0), hold_kd=np.full(6, 0.7))
    names = ("joint_5", "joint_2")
    group = JointGroupInfo("arm", names)
    for joint in group.joints():
        adapter.init_joint_output(joint)
    adapter.finish_init()  # the other joints are held at the measured position
    assert adapter.begin_cycle(0)
    pos = np.array([0.3, -0.3], np.float32)
    zeros = np.zeros(2, np.float32)
    write = adapter.joint_targets_writer(group, pos, zeros, zeros, np.full(2, 50.0), np.ones(2))
    assert write() and adapter.end_cycle(0)
    cmd = robot.command
    assert cmd.q_des[4] == pytest.approx(0.3) and cmd.q_des[1] == pytest.approx(-0.3)
    assert cmd.kp[4] == cmd.kp[1] == 50.0 and cmd.kp[0] == 7.0


def test_the_compiled_command_reader_follows_every_set():
    commands = CommandSource()
    group = JointPositionCommandGroupInfo("goal", ("a", "b"))
    for joint in group.joints():
        commands.init_joint_position(joint)
    out = np.zeros(2, np.float32)
    read = commands.joint_positions_reader(group, out)
    assert not read()  # never set: no value
    commands.set_joint_positions("goal", [0.5, -0.5])
    assert read() and out.tolist() == [0.5, -0.5]
    commands.set_joint_positions("goal", {"b": 1.0})  # a partial set replaces the values
    assert read() and out.tolist() == [0.5, 1.0]
