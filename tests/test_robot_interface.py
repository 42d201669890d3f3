"""The robot interface's command validation and control law, backend-free."""

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from twin.robot import (
    CommandWatchdog,
    Health,
    JointCommand,
    RobotState,
    joint_torque,
    robot_state,
)

NAMES = tuple(f"joint_{i}" for i in range(1, 7))
LIMITS = np.array([19.0, 38.0, 19.0, 4.1, 7.4, 4.1])


def command(**fields) -> JointCommand:
    base = dict(q_des=np.zeros(6), kp=np.full(6, 10.0), kd=np.ones(6))
    return JointCommand(**(base | fields))


def test_valid_command_is_a_read_only_float_copy_with_tau_ff_clamped():
    tau = np.array([100.0, -100.0, 1.0, 0.0, 8.0, -4.0])
    out = command(tau_ff=tau).validated(NAMES, LIMITS)
    np.testing.assert_array_equal(out.tau_ff, [19.0, -38.0, 1.0, 0.0, 7.4, -4.0])
    assert tau[0] == 100.0  # the caller's array is untouched
    for name in ("q_des", "qd_des", "tau_ff", "kp", "kd"):
        arr = getattr(out, name)
        assert arr.dtype == np.float64 and arr.shape == (6,) and not arr.flags.writeable
    integer = command(q_des=[0, 1, 2, 3, 4, 5]).validated(NAMES, LIMITS)
    np.testing.assert_array_equal(integer.q_des, np.arange(6.0))


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(kp=np.array([1, 2, 3, 4, 5, np.nan])), r"kp for joint 'joint_6' \(index 5\) is nan"),
        (dict(tau_ff=np.array([np.inf, -np.inf, 0, 0, 0, 0])), r"tau_ff for joint 'joint_1'"),
        (dict(qd_des=np.array([0, 0, -np.inf, 0, 0, 0])), r"qd_des for joint 'joint_3'"),
        (dict(kd=-np.ones(6)), r"kd for joint 'joint_1' is -1.0; expected a gain >= 0"),
        (dict(q_des=np.zeros(5)), r"q_des must have shape \(6,\).*got \(5,\)"),
        (dict(kp=np.zeros((2, 6))), r"kp must have shape \(6,\)"),
        (dict(q_des=[1, 2, 3, 4, 5, "x"]), r"q_des must hold numbers"),
    ],
)
def test_bad_commands_name_the_field_and_joint(fields, message):
    with pytest.raises(ValueError, match=message):
        command(**fields).validated(NAMES, LIMITS)


def test_huge_finite_values_are_accepted():
    out = command(q_des=np.full(6, 1e308), kp=np.full(6, 1e308)).validated(NAMES, LIMITS)
    assert np.all(out.kp == 1e308)


def test_control_law_is_clamped_to_the_effort_limits():
    cmd = command(q_des=np.full(6, 0.1), qd_des=np.full(6, 0.2), tau_ff=np.full(6, 0.5))
    cmd = cmd.validated(NAMES, LIMITS)
    q, qd = np.zeros(6), np.full(6, 0.1)
    np.testing.assert_allclose(joint_torque(cmd, q, qd, LIMITS), 0.5 + 10 * 0.1 + 1 * 0.1)
    far = command(q_des=np.full(6, 100.0)).validated(NAMES, LIMITS)
    np.testing.assert_array_equal(joint_torque(far, q, np.zeros(6), LIMITS), LIMITS)


def test_watchdog_expires_only_after_its_timeout():
    dog = CommandWatchdog(0.01)
    assert not dog.expired(10**9)  # never fed: nothing to expire
    dog.feed(1_000)
    assert not dog.expired(11_000)
    assert dog.expired(11_001)
    assert not CommandWatchdog(None).expired(10**12)
    with pytest.raises(ValueError, match="positive number of seconds"):
        CommandWatchdog(0.0)


def test_a_command_over_one_staging_array_validates_like_any_other():
    rows = np.zeros((5, 6))
    cmd = JointCommand.from_rows(rows)
    rows[0] = np.arange(6.0)  # q_des
    rows[2] = [100.0, -100.0, 1.0, 0.0, 8.0, -4.0]  # tau_ff, clamped when validated
    rows[3], rows[4] = 10.0, 1.0
    out = cmd.validated(NAMES, LIMITS)
    np.testing.assert_array_equal(out.q_des, np.arange(6.0))
    np.testing.assert_array_equal(out.tau_ff, [19.0, -38.0, 1.0, 0.0, 7.4, -4.0])
    np.testing.assert_array_equal(out.kp, 10.0)
    np.testing.assert_array_equal(out.qd_des, 0.0)
    rows[:] = 7.0  # the validated copy does not follow the staging array
    assert out.q_des[0] == 0.0 and not out.kd.flags.writeable and cmd.q_des[0] == 7.0
    rows[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"kp for joint 'joint_5' \(index 4\) is nan"):
        cmd.validated(NAMES, LIMITS)
    with pytest.raises(ValueError, match=r"q_des must have shape \(6,\).*got \(5,\)"):
        JointCommand.from_rows(np.zeros((5, 5))).validated(NAMES, LIMITS)


@pytest.mark.parametrize("rows", [np.zeros((4, 6)), np.zeros((5, 6), np.float32), [[0.0] * 6] * 5])
def test_from_rows_needs_one_float64_array_of_five_rows(rows):
    with pytest.raises(ValueError, match=r"float64 array of shape \(5, n\)"):
        JointCommand.from_rows(rows)


def test_robot_state_builds_the_same_frozen_snapshot_as_the_constructor():
    q = np.arange(6.0)
    fast = robot_state(5, q, q + 1, q + 2, None, None, Health.WATCHDOG)
    slow = RobotState(5, q, q + 1, q + 2, None, None, Health.WATCHDOG)
    assert repr(fast) == repr(slow) and fast.q is q and fast.health is Health.WATCHDOG
    defaults = robot_state(1, q, q, q)
    assert defaults.wrench is None and defaults.imu is None and defaults.health is Health.OK
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.t_us = 6


def test_copies_and_pickles_of_a_staging_command_follow_their_own_fields():
    rows = np.zeros((5, 6))
    rows[3] = 10.0
    for duplicate in (copy.copy, copy.deepcopy, lambda c: pickle.loads(pickle.dumps(c))):
        other = duplicate(JointCommand.from_rows(rows))
        other.q_des[:] = 0.5  # (a deep copy or a pickle owns new arrays; a shallow copy not)
        np.testing.assert_array_equal(other.validated(NAMES, LIMITS).q_des, 0.5)
        rows[0] = 0.0
