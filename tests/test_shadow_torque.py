"""The live twin's joint-torque residual (generalized-momentum observer): a contact shows in it
with the F/T sensor ignored, and it measures the contact's joint torques ``J^T F``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_shadow_follow import tracking
from test_shadow_live import FT_NOISE, IMU
from twin.sim import FtSensorConfig, PyBulletRobot

from twin.dynamics import ArmDynamics
from twin.dynamics.observer import MomentumObserver
from twin.shadow import Shadow, ShadowConfig, ShadowFlag

PUSH = np.array([6.0, -4.0, 0.0])  # N, world, at the TCP, from ON_S to OFF_S
ON_S, OFF_S = 1.0, 1.1
DETECT_WITHIN_S = 0.1


def _run(without_ft: bool, seconds: float = 1.6):
    """The transient-contact scenario of ``test_shadow_live``; the shadow sees no F/T reading
    when ``without_ft``. Returns (times s, reports, states)."""
    reports, states = [], []
    real = PyBulletRobot(seed=13, ft=FtSensorConfig(noise_std=FT_NOISE), imu=IMU)
    with real, Shadow(real, config=ShadowConfig()) as shadow:
        for k in range(round(seconds / real.control_period_s)):
            t = k * real.control_period_s
            if abs(t - ON_S) < 1e-9:
                real.set_external_force(PUSH)
            if abs(t - OFF_S) < 1e-9:
                real.set_external_force(None)
            real.write(tracking(real, t))
            real.step()
            state = real.read()
            states.append(state)
            reports.append(shadow.update(replace(state, wrench=None) if without_ft else state))
    return np.array([r.t_us for r in reports]) * 1e-6, reports, states


@pytest.fixture(scope="module")
def blind():
    return _run(without_ft=True)


def test_a_contact_is_flagged_from_the_torque_residual_alone_within_100_ms(blind):
    t, reports, _ = blind
    flags = np.array([int(r.flags) for r in reports])
    assert np.all(flags & ShadowFlag.NO_FT)  # the F/T sensor is ignored throughout
    torque = (flags & ShadowFlag.TORQUE_CONTACT) != 0
    contact = (flags & ShadowFlag.CONTACT) != 0
    np.testing.assert_array_equal(torque, contact)  # CONTACT comes from the torques alone here
    first = t[torque][0]
    assert ON_S < first <= ON_S + DETECT_WITHIN_S, first
    assert torque[(t > first) & (t <= OFF_S)].all()  # held while the push lasts
    assert not torque[(t <= ON_S) | (t > OFF_S + 0.05)].any()  # nothing before, released after


def test_the_torque_residual_is_the_contact_force_through_the_jacobian(blind):
    t, reports, states = blind
    arm = ArmDynamics.default().arm
    steady = (t > ON_S + 0.05) & (t <= OFF_S)  # five observer time constants in
    residual = np.array([r.torque_residual for r in reports])[steady]
    q = np.array([s.q for s in states])[steady]
    expected = np.einsum("kji,j->ki", arm.jacobian(q, "tcp")[:, :3], PUSH)  # J_v^T F
    assert np.max(np.abs(residual - expected)) < 0.15, np.abs(residual - expected).max(axis=0)
    quiet = np.array([r.torque_residual for r in reports])[(t > 0.05) & (t < ON_S)]
    assert np.all(np.abs(quiet) < 0.5 * np.array(ShadowConfig().contact_joint_torque_nm))
    predicted = np.array([r.predicted_torque for r in reports])
    measured = np.array([s.tau for s in states])
    np.testing.assert_allclose(predicted + np.array([r.torque_residual for r in reports]), measured)


def test_a_payload_the_twin_is_told_of_raises_no_flag():
    real = PyBulletRobot(seed=16, ft=FtSensorConfig(noise_std=FT_NOISE), imu=IMU)
    real.attach_payload(0.5, (0.0, 0.0, 0.02))  # TCP frame: 0.12 m from the sensor along z
    flags = []
    with real, Shadow(real) as shadow:
        shadow.set_payload(0.5, [0.0, 0.0, 0.12])  # as identified, sensor frame
        for k in range(300):
            real.write(tracking(real, k * real.control_period_s))
            real.step()
            flags.append(int(shadow.update().flags))
        with pytest.raises(ValueError, match="finite mass"):
            shadow.set_payload(float("nan"), [0.0, 0.0, 0.0])
    flags = np.array(flags)
    tared = flags[flags & ShadowFlag.TARING == 0]
    assert len(tared) > 150 and np.all(tared == ShadowFlag.PAYLOAD)  # expected: no contact


def test_observer_input_and_restart():
    dyn = ArmDynamics.default()
    with pytest.raises(ValueError, match="time constant"):
        MomentumObserver(dyn, 0.0)
    obs = MomentumObserver(dyn)
    q = dyn.arm.home_q
    g = dyn.gravity_torques(q)
    for k in range(50):  # at rest, holding exactly the model's gravity torques: no residual
        r = obs.update(5000 * k, q, np.zeros(6), g)
    np.testing.assert_allclose(r, 0.0, atol=1e-12)
    for k in range(50, 100):  # 0.5 N m more on joint 2 at rest: an external -0.5 N m holds it
        r = obs.update(5000 * k, q, np.zeros(6), g + [0, 0.5, 0, 0, 0, 0])
    np.testing.assert_allclose(r, [0, -0.5, 0, 0, 0, 0], atol=1e-9)
    obs.update(5000 * 100 + 200_000, q, np.zeros(6), g)  # a gap: restarted
    np.testing.assert_array_equal(obs.residual, 0.0)
    with pytest.raises(ValueError, match="contact_joint_torque_nm"):
        ShadowConfig(contact_joint_torque_nm=(0.5, -1.0))
