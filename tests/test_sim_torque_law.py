"""The sim's per-physics-step law (``twin.robot.torque_law``) is ``joint_torque`` bit for bit,
and the state the sim reports comes from it."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from twin.sim import HOLD_KD, HOLD_KP, PyBulletRobot

from twin.kinematics import ArmModel
from twin.robot import JointCommand, joint_torque, torque_law
from twin.safety import limits_for

MODEL = ArmModel.default()
EFFORT = MODEL.effort_limits
SIX = st.lists(st.floats(-4.0, 4.0), min_size=6, max_size=6)
GAINS = st.lists(st.sampled_from([0.0, 0.5, 25.0, 300.0, 1e6]), min_size=6, max_size=6)


@given(SIX, SIX, SIX, GAINS, GAINS, SIX, SIX)
def test_the_law_on_floats_is_joint_torque_bit_for_bit(q_des, qd_des, tau, kp, kd, q, qd):
    rows = np.array([q_des, qd_des, tau, kp, kd])
    command = JointCommand.from_rows(rows).validated(MODEL.joint_names, EFFORT, limits_for(MODEL))
    plain = JointCommand(*map(np.array, (q_des, qd_des, tau, kp, kd)))  # no staging rows
    for cmd in (command, plain):
        expected = joint_torque(cmd, np.array(q), np.array(qd), EFFORT)
        got = torque_law(cmd, EFFORT)(q, qd)
        assert isinstance(got, list) and len(got) == 6
        assert np.array(got).tobytes() == expected.tobytes()  # the same bits


def test_a_command_with_the_wall_goes_through_joint_torque():
    rows = np.zeros((5, 6))
    rows[2] = 1.0  # feed-forward without stiffness: rule 5
    rows[4] = 0.5
    command = JointCommand.from_rows(rows).validated(MODEL.joint_names, EFFORT, limits_for(MODEL))
    assert "_wall" in command.__dict__
    q = (MODEL.upper - 0.001).tolist()  # beyond the soft limits: the wall pushes back
    expected = joint_torque(command, np.array(q), np.zeros(6), EFFORT)
    assert np.array_equal(torque_law(command, EFFORT)(q, [0.0] * 6), expected)
    assert expected.max() < 1.0  # the wall cut the feed-forward


def test_the_reported_torque_is_the_law_at_the_state_before_the_last_physics_step():
    with PyBulletRobot(seed=1, control_period_s=0.001) as robot:
        q0 = robot.read().q
        q_des = q0 + 5e-4  # within one 1 ms period's step at the velocity limits (rule 6)
        command = JointCommand(q_des=q_des, kp=np.array(HOLD_KP), kd=np.array(HOLD_KD))
        robot.write(command)
        before = robot.read()
        robot.step()  # one physics step: tau is the law at the state read before it
        after = robot.read()
        checked = command.validated(MODEL.joint_names, EFFORT, limits_for(MODEL))
        expected = joint_torque(checked, before.q, before.qd, EFFORT)
        assert np.array_equal(after.tau, expected)
        assert not after.tau.flags.writeable and not after.q.flags.writeable
        assert math.isfinite(after.q.sum()) and not np.array_equal(after.q, before.q)
