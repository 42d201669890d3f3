"""The joint-limit safety layer (``twin.safety``): the rules on commands, the wall in the law,
and the same outcome on both backends (the sim, and the serial backend through the emulators in
its servo-side and host-side current modes)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from twin.kinematics import ArmModel
from twin.robot import JointCommand, joint_torque
from twin.safety import SOFT_MARGIN_RAD, WALL_RATE_PER_S, JointLimits, limits_for

MODEL = ArmModel.default()
LIMITS = limits_for(MODEL)
NAMES = MODEL.joint_names
EFFORT = MODEL.effort_limits
HI, LO = MODEL.upper - SOFT_MARGIN_RAD, MODEL.lower + SOFT_MARGIN_RAD
KP = np.array([30.0, 60.0, 30.0, 6.0, 6.0, 2.5])  # stable on the sim and the ideal joints
KD = np.array([6.0, 6.0, 3.0, 0.5, 0.5, 0.2])  # joint 1 over-damped on both


def shaped(**fields) -> JointCommand:
    base = dict(q_des=np.zeros(6), kp=KP, kd=KD)
    return JointCommand(**(base | fields)).validated(NAMES, EFFORT, LIMITS)


def test_soft_limits_are_the_urdf_limits_moved_inwards():
    np.testing.assert_allclose(LIMITS.upper, HI)
    np.testing.assert_allclose(LIMITS.lower, LO)
    assert LIMITS.upper[0] == pytest.approx(2.9670597283903604 - 0.02)
    narrow = JointLimits([0.0, -np.inf], [0.01, np.inf], [1.0, 1.0], [1.0, 1.0])
    np.testing.assert_allclose(narrow.lower, [0.0025, -np.inf])  # at most a quarter of the range
    with pytest.raises(ValueError, match="soft margin"):
        JointLimits([0.0], [1.0], [1.0], [1.0], margin=-0.1)


def test_position_and_velocity_targets_are_clamped():
    q = np.array([10.0, -10.0, 0.1, 0, 0, 4.8])
    out = shaped(q_des=q, qd_des=np.array([5.0, -5.0, 0.1, 0, 0, 0]))
    np.testing.assert_allclose(out.q_des, [HI[0], LO[1], 0.1, 0, 0, HI[5]])
    np.testing.assert_allclose(out.qd_des, [1.571, -0.785, 0.1, 0, 0, 0])
    assert q[0] == 10.0 and not out.q_des.flags.writeable  # the caller's array is untouched
    inside = shaped(q_des=MODEL.home_q)
    np.testing.assert_array_equal(inside.q_des, MODEL.home_q)
    assert "_wall" not in inside.__dict__
    # without limits (a backend's own hold), validated keeps the values
    raw = JointCommand(q_des=q, kp=KP, kd=KD).validated(NAMES, EFFORT)
    assert raw.q_des[0] == 10.0


def test_feed_forward_that_pushes_past_a_limit_is_cut_and_inward_feed_forward_kept():
    q = np.array([2.5, 0, 0, 0, 0, 0])
    out = shaped(q_des=q, tau_ff=np.array([19.0, -5.0, 0, 0, 0, 0]))
    # joint 1: rest point 2.5 + 19/30 beyond the soft limit -> tau_ff = kp (hi - q_des)
    assert out.tau_ff[0] == pytest.approx(KP[0] * (HI[0] - 2.5))
    assert out.tau_ff[1] == -5.0  # rest point -0.083 rad: inside, untouched
    at_limit = shaped(q_des=np.array([0, LO[1], 0, 0, 0, 0]), tau_ff=np.array([0, 5.0, 0, 0, 0, 0]))
    assert at_limit.tau_ff[1] == 5.0  # pointing inwards at the lower limit: kept
    # a velocity feed-forward beyond what tau_ff can cancel within the effort limit
    fast = shaped(
        q_des=np.array([HI[0], 0, 0, 0, 0, 0]),
        qd_des=np.array([1.5, 0, 0, 0, 0, 0]),
        kd=np.array([100.0, 6, 3, 0.5, 0.5, 0.2]),
    )
    assert fast.tau_ff[0] == -EFFORT[0] and fast.qd_des[0] == pytest.approx(EFFORT[0] / 100.0)


vec = st.lists(st.floats(-20.0, 20.0), min_size=6, max_size=6).map(np.array)
gains = st.lists(st.sampled_from([0.0, 0.5, 5.0, 50.0]), min_size=6, max_size=6).map(np.array)


@given(vec, vec, vec, gains, gains)
def test_every_shaped_command_rests_inside_the_soft_limits(q, qd, tau, kp, kd):
    out = JointCommand(q_des=q, qd_des=qd, tau_ff=tau * 3, kp=kp, kd=kd).validated(
        NAMES, EFFORT, LIMITS
    )
    tol = 1e-9
    assert np.all((out.q_des >= LO - tol) & (out.q_des <= HI + tol))
    assert np.all(np.abs(out.qd_des) <= MODEL.velocity_limits + tol)
    assert np.all(np.abs(out.tau_ff) <= EFFORT + tol)
    stiff = kp > 0
    rest = out.q_des[stiff] + (out.tau_ff[stiff] + kd[stiff] * out.qd_des[stiff]) / kp[stiff]
    assert np.all((rest >= LO[stiff] - 1e-7) & (rest <= HI[stiff] + 1e-7))
    ff = out.tau_ff + kd * out.qd_des
    assert ("_wall" in out.__dict__) == bool(np.any((kp == 0) & (ff != 0)))


@given(st.floats(-3.2, 3.2), st.floats(-5.0, 5.0), st.sampled_from([0.0, 0.1, 3.0]))
def test_the_wall_bounds_torque_control_at_the_soft_limits(q1, qd1, kd1):
    """Rule 5 on joint 1 (kp 0, full effort outwards): never more outward torque than the wall."""
    kd = np.array([kd1, 6, 3, 0.5, 0.5, 0.2])
    cmd = shaped(tau_ff=np.array([19.08, 0, 0, 0, 0, 0]), kp=KP * [0, 1, 1, 1, 1, 1], kd=kd)
    q, qd = np.array([q1, 0, 0, 0, 0, 0]), np.array([qd1, 0, 0, 0, 0, 0])
    u = joint_torque(cmd, q, qd, EFFORT)[0]
    law = np.clip(19.08 - kd1 * qd1, -EFFORT[0], EFFORT[0])
    if kd1 > 0:
        wall = WALL_RATE_PER_S * kd1 * (np.array([LO[0], HI[0]]) - q1) - kd1 * qd1
        expected = np.clip(np.clip(law, *wall), -EFFORT[0], EFFORT[0])
        assert u == pytest.approx(expected)
        assert u <= max(wall[1], -EFFORT[0]) + 1e-12  # outwards: never more than the wall
    else:
        assert u == (0.0 if q1 >= HI[0] else law)
    # joints with stiffness keep the plain law
    np.testing.assert_array_equal(
        joint_torque(cmd, q, qd, EFFORT)[1:],
        joint_torque(replace(cmd, kp=KP), q, qd, EFFORT)[1:],
    )


# --------------------------------------------------------------------- both backends
BACKENDS = ["sim", "hardware-servo", "hardware-current"]


@contextlib.contextmanager
def open_arm(backend: str, watchdog_s: float | None = None):
    """A robot at home (sim) or at zero (emulated ideal joints, no gravity), stepping in
    lock-step (the hardware one on a ManualClock shared with the emulators)."""
    if backend == "sim":
        from twin.sim import PyBulletRobot

        with PyBulletRobot(watchdog_s=watchdog_s) as robot:
            yield robot
        return
    from twin.hardware import ManualClock, SerialRobot
    from twin.hardware.emulator import EmulatorStack, IdealSource
    from twin.hardware.emulator.testing import emulator_config

    config = emulator_config(
        control_mode=backend.split("-")[1], watchdog_s=watchdog_s, hold_gravity_compensation=False
    )
    config = replace(
        config, ft=replace(config.ft, enabled=False), imu=replace(config.imu, enabled=False)
    )
    clock = ManualClock()
    source = IdealSource(effort_limits=EFFORT)
    with (
        EmulatorStack(config, source, clock=clock) as stack,
        SerialRobot(stack.robot_config(), model=MODEL, clock=clock) as robot,
    ):
        yield robot


@pytest.fixture(params=BACKENDS)
def arm(request):
    """A robot without a watchdog on each backend (``open_arm``)."""
    with open_arm(request.param) as robot:
        yield robot


def _drive(robot, command: JointCommand, seconds: float) -> np.ndarray:
    """Write ``command`` every period for ``seconds``; returns joint 1's positions (rad)."""
    q1 = []
    for _ in range(round(seconds / robot.control_period_s)):
        robot.write(command)
        robot.step()
        q1.append(robot.read().q[0])
    return np.array(q1)


def _gravity(robot, q: np.ndarray) -> np.ndarray:
    from twin.kinematics.gravity import gravity_torques

    return gravity_torques(MODEL, q) if robot.__class__.__name__ == "PyBulletRobot" else np.zeros(6)


def test_q_des_10_rad_on_joint_1_ends_at_the_limit(arm):
    q = arm.read().q.copy()
    q[0] = 10.0
    q1 = _drive(arm, JointCommand(q_des=q, tau_ff=_gravity(arm, q), kp=KP, kd=KD), 3.5)
    assert q1[-1] == pytest.approx(HI[0], abs=2e-3)  # the soft limit, within a servo tick
    assert q1.max() < MODEL.upper[0]  # never past the URDF limit on the way


def test_feed_forward_pushing_a_joint_past_its_limit_stops_at_it(arm):
    q = arm.read().q.copy()
    q[0] = 2.5
    tau = _gravity(arm, q) + [EFFORT[0], 0, 0, 0, 0, 0]  # the whole effort outwards
    q1 = _drive(arm, JointCommand(q_des=q, tau_ff=tau, kp=KP, kd=KD), 3.5)
    assert q1[-1] == pytest.approx(HI[0], abs=2e-3)
    assert q1.max() < MODEL.upper[0]


def test_torque_control_into_a_limit_stops_at_it(arm):
    """kp = 0 on joint 1 with a feed-forward (rule 5: the wall in the host-side law); the
    servo-side mode cannot fold a feed-forward without kp and refuses it, as before."""
    q = arm.read().q.copy()
    tau = _gravity(arm, q) + [9.0, 0, 0, 0, 0, 0]  # 1.5 rad/s against kd
    cmd = JointCommand(q_des=q, tau_ff=tau, kp=KP * [0, 1, 1, 1, 1, 1], kd=KD)
    if getattr(getattr(arm, "config", None), "control_mode", None) == "servo":
        from twin.hardware import InvalidArgumentError

        with pytest.raises(InvalidArgumentError, match="kp > 0"):
            arm.write(cmd)
        return
    q1 = _drive(arm, cmd, 4.0)
    assert q1[-1] == pytest.approx(HI[0], abs=2e-3)
    assert q1.max() < MODEL.upper[0]


def test_a_velocity_command_beyond_the_limit_runs_at_the_limit_and_stops_at_the_soft_limit(arm):
    """qd_des = 10 rad/s on joint 1 (URDF velocity 1.571 rad/s), as a pure velocity servo
    (kp = 0): it runs no faster than the limit and comes to rest at the soft position limit."""
    q = arm.read().q.copy()
    qd = np.array([10.0, 0, 0, 0, 0, 0])
    kd = KD * [2, 1, 1, 1, 1, 1]
    cmd = JointCommand(
        q_des=q, qd_des=qd, tau_ff=_gravity(arm, q), kp=KP * [0, 1, 1, 1, 1, 1], kd=kd
    )
    if getattr(getattr(arm, "config", None), "control_mode", None) == "servo":
        from twin.hardware import InvalidArgumentError

        with pytest.raises(InvalidArgumentError, match="kp > 0"):
            arm.write(cmd)
        return
    q1 = _drive(arm, cmd, 3.0)
    window = round(0.1 / arm.control_period_s)  # 0.1 s: above the serial position's tick steps
    speed = np.abs(q1[window:] - q1[:-window]) / (window * arm.control_period_s)
    assert speed.max() <= MODEL.velocity_limits[0] * 1.01
    assert speed.max() > 0.8 * MODEL.velocity_limits[0]  # it did run near the limit
    assert q1[-1] == pytest.approx(HI[0], abs=2e-3)
    assert q1.max() < MODEL.upper[0]


def test_a_sim_used_as_an_emulator_plant_is_raw_physics():
    """``joint_limits=False`` (a device emulator's plant): commands are only validated, and
    PyBullet's hard stop at the URDF limit is what stops the joint."""
    from twin.sim import PyBulletRobot

    with PyBulletRobot(watchdog_s=None, joint_limits=False) as plant:
        assert not plant.limits_enforced
        q = plant.read().q.copy()
        q[0] = 10.0
        q1 = _drive(plant, JointCommand(q_des=q, tau_ff=_gravity(plant, q), kp=KP, kd=KD), 2.5)
        assert q1[-1] == pytest.approx(MODEL.upper[0], abs=2e-3)  # the hard stop, not 2.947


def test_a_hold_keeps_stiff_gains_and_holds_the_joints_a_command_left_without_stiffness():
    """The hold of both backends (``hold_command``): per joint, the previous command's gains where
    it had kp > 0, the hold gains elsewhere (a torque-controlled joint is held, not left limp)."""
    from twin.robot import hold_command

    hold_kp, hold_kd = np.full(6, 100.0), np.full(6, 5.0)
    previous = JointCommand(q_des=np.zeros(6), kp=KP * [0, 1, 1, 1, 1, 0], kd=KD)
    q = np.array([HI[0] + 0.01, 0.1, 0.2, 0.3, 0.4, 0.5])  # in the margin: held where it is
    hold = hold_command(q, previous, hold_kp, hold_kd)
    np.testing.assert_array_equal(hold.q_des, q)
    np.testing.assert_array_equal(hold.kp, [100.0, *KP[1:5], 100.0])
    np.testing.assert_array_equal(hold.kd, [5.0, *KD[1:5], 5.0])
    np.testing.assert_array_equal(hold.qd_des, 0.0)
    first = hold_command(q, None, hold_kp, hold_kd)
    np.testing.assert_array_equal(first.kp, hold_kp)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_watchdog_holds_a_joint_that_was_driven_into_its_limit(backend):
    """Joint 1 driven into its limit (torque control where the backend allows it, else a
    position beyond the limit), then no command: the watchdog's hold keeps every joint where it
    was, inside the URDF limit, on every backend."""
    from twin.robot import Health

    with open_arm(backend, watchdog_s=0.1) as robot:
        q = robot.read().q.copy()
        tau = _gravity(robot, q) + [9.0, 0, 0, 0, 0, 0]
        cmd = JointCommand(q_des=q, tau_ff=tau, kp=KP * [0, 1, 1, 1, 1, 1], kd=KD)
        if backend == "hardware-servo":  # refuses kp = 0 with a feed-forward
            cmd = JointCommand(q_des=q + [10.0, 0, 0, 0, 0, 0], kp=KP, kd=KD)
        q1 = _drive(robot, cmd, 3.5)  # 2.95 rad at <= 1.571 rad/s, then settling
        assert q1[-1] == pytest.approx(HI[0], abs=2e-3)
        for _ in range(round(0.15 / robot.control_period_s)):  # no command: the watchdog fires
            robot.step()
        assert Health.WATCHDOG in robot.read().health
        held = robot.read().q.copy()
        for _ in range(round(1.0 / robot.control_period_s)):
            robot.step()
        state = robot.read()
        assert np.max(np.abs(state.q - held)) < 0.01
        assert np.max(np.abs(state.qd)) < 0.05
        assert state.q[0] < MODEL.upper[0]


def test_servo_mode_watchdog_holds_a_joint_the_command_left_without_stiffness():
    """Servo mode accepts pure damping on a joint (kp 0, no feed-forward); its watchdog hold adds
    gravity compensation. The hold used to keep kp 0 there, and step() raised
    InvalidArgumentError (a feed-forward without kp); now the joint gets the hold gains."""
    from twin.hardware import ManualClock, SerialRobot
    from twin.hardware.emulator import EmulatorStack, IdealSource
    from twin.hardware.emulator.testing import emulator_config

    config = emulator_config(control_mode="servo", watchdog_s=0.1, hold_gravity_compensation=True)
    config = replace(
        config, ft=replace(config.ft, enabled=False), imu=replace(config.imu, enabled=False)
    )
    clock = ManualClock()
    with (
        EmulatorStack(config, IdealSource(effort_limits=EFFORT), clock=clock) as stack,
        SerialRobot(stack.robot_config(), model=MODEL, clock=clock) as robot,
    ):
        robot.write(JointCommand(q_des=np.zeros(6), kp=KP * [1, 0, 1, 1, 1, 1], kd=KD))
        for _ in range(60):  # 0.24 s: the 0.1 s watchdog fires
            robot.step()
        hold = robot.command_in_force
        assert hold.kp[1] == config.hold_kp[1] and hold.kd[1] == config.hold_kd[1]
        np.testing.assert_array_equal(hold.kp[[0, 2, 3, 4, 5]], KP[[0, 2, 3, 4, 5]])
