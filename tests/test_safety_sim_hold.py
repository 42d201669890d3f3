"""The sim's hold (after ``reset``, before the first command, on a watchdog expiry) is stable at
every configuration, the wrist singularity (q5 = 0: axes 4 and 6 aligned) included (``sim.hold``)."""

from __future__ import annotations

import numpy as np
import pytest
from twin.sim import HOLD_KD, HOLD_KP, PyBulletRobot
from twin.sim.hold import STEP_BOUND, stable_gains

from twin.robot import Health, JointCommand

HOLD_S = 2.0


@pytest.fixture(scope="module")
def robot():
    with PyBulletRobot(seed=0) as r:
        yield r


def configurations(n_random: int, n_singular: int, seed: int = 7) -> np.ndarray:
    """(n_random + n_singular, 6) rad inside the limits; the last ``n_singular`` with |q5| < 0.05
    (exactly 0 and +-1e-6 among them)."""
    from twin.kinematics import ArmModel

    model = ArmModel.default()
    rng = np.random.default_rng(seed)
    q = rng.uniform(model.lower, model.upper, size=(n_random + n_singular, 6))
    q5 = rng.uniform(-0.05, 0.05, n_singular)
    q5[:3] = (0.0, 1e-6, -1e-6)
    q[n_random:, 4] = q5
    return q


def settle(robot: PyBulletRobot, seconds: float) -> None:
    for _ in range(round(seconds / robot.control_period_s)):
        robot.step()


def test_the_issue_case_now_holds(robot):
    """Issue 13 item 8: this ended with qd near [0.13, 0.01, -0.12, -8.9, 0.13, 10.4]."""
    q0 = np.array([0.3, 0.2, 1.0, 0.5, 0.1, 0.3])
    robot.reset(q0)
    settle(robot, 1.0)  # 200 steps
    state = robot.read()
    assert np.max(np.abs(state.qd)) < 1e-3
    assert np.max(np.abs(state.q - q0)) < 1e-3


def test_hold_is_still_after_2_s_at_200_configurations(robot):
    worst_qd, worst_q, where = 0.0, 0.0, None
    for q0 in configurations(150, 50):
        robot.reset(q0)
        settle(robot, HOLD_S)
        state = robot.read()
        qd = float(np.max(np.abs(state.qd)))
        if qd > worst_qd:
            worst_qd, where = qd, q0
        worst_q = max(worst_q, float(np.max(np.abs(state.q - q0))))
    assert worst_qd < 1e-3, f"|qd| {worst_qd} rad/s after {HOLD_S} s at q = {where}"
    assert worst_q < 5e-3  # and it holds where it was put


def test_watchdog_hold_settles_a_command_that_was_unstable_at_the_singularity(robot):
    """A command with the home-tuned gains at q5 = 0.02 oscillates; the watchdog's hold (which
    keeps those gains, lowered where unstable) brings the wrist to rest."""
    q0 = np.array([0.0, 0.4, 1.2, 0.3, 0.02, -0.4])
    robot.reset(q0)
    ff = robot.engine.inverse_dynamics("arm", q0, np.zeros(6), np.zeros(6))
    robot.write(JointCommand(q_des=q0, tau_ff=ff, kp=np.array(HOLD_KP), kd=np.array(HOLD_KD)))
    settle(robot, 0.4)
    assert np.max(np.abs(robot.read().qd)) > 1.0  # the user's command itself is unstable here
    settle(robot, 0.2)  # the 0.5 s watchdog fires
    assert robot.read().health & Health.WATCHDOG
    settle(robot, HOLD_S)
    assert np.max(np.abs(robot.read().qd)) < 1e-3


def test_stable_gains_keep_gains_that_are_stable_and_bound_the_rest(robot):
    engine = robot.engine
    kp, kd = np.array(HOLD_KP), np.array(HOLD_KD)
    home = robot.model.home_q
    same = stable_gains(engine.mass_matrix("arm", home), kp, kd, robot.physics_dt)
    np.testing.assert_array_equal(same[0], kp)
    np.testing.assert_array_equal(same[1], kd)
    for q5 in (0.25, 0.1, 0.0):
        m = engine.mass_matrix("arm", [0.3, 0.2, 1.0, 0.5, q5, 0.3])
        kp2, kd2 = stable_gains(m, kp, kd, robot.physics_dt)
        lam = np.max(np.linalg.eigvals(np.linalg.solve(m, np.diag(kd2))).real)
        assert robot.physics_dt * lam <= STEP_BOUND + 1e-9
        assert np.all(kd2 <= kd) and np.all(kp2 <= kp)
        np.testing.assert_array_equal(kd2[:3], kd[:3])  # the shoulder keeps its gains
        assert kd2[3] < kd[3]  # joint 4 carries the light wrist mode
