"""The sim twin as a follower (``PyBulletRobot.follow``, ``sim.follow``) and the external-force
helper: predictions against the running sim's own sensors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.sim import FtSensorConfig, PyBulletRobot
from twin.sim.follow import MAX_GAP_US, RigidInertial

from twin.robot import JointCommand
from twin.shadow import payload_regressor

G = 9.81  # m/s^2, the engine's gravity
KP = np.array([150.0, 250.0, 150.0, 25.0, 25.0, 8.0])
KD = np.array([9.0, 12.0, 6.5, 0.7, 0.75, 0.08])
AMP = np.array([0.3, 0.2, 0.25, 0.6, 0.5, 0.8])  # rad
FREQ = np.array([0.23, 0.31, 0.27, 0.41, 0.37, 0.53])  # Hz


def tracking(robot: PyBulletRobot, t: float) -> JointCommand:
    """A multi-sine about home (the wrist turns through +-0.8 rad) with velocity and inverse
    dynamics feedforward: the trajectory of every shadow test."""
    phase = 2 * np.pi * FREQ * t
    q = robot.model.home_q + AMP * np.sin(phase)
    qd = AMP * 2 * np.pi * FREQ * np.cos(phase)
    qdd = -AMP * (2 * np.pi * FREQ) ** 2 * np.sin(phase)
    ff = robot.engine.inverse_dynamics("arm", q, qd, qdd)
    return JointCommand(q_des=q, qd_des=qd, tau_ff=ff, kp=KP, kd=KD)


def hold(robot: PyBulletRobot, q: np.ndarray, steps: int) -> None:
    """Hold ``q`` with exact gravity feedforward (the arm's, plus the payload's through J^T)."""
    ff = robot.engine.inverse_dynamics("arm", q, np.zeros(6), np.zeros(6))
    if robot.payload is not None:
        tcp = robot.model.fk(q, link="tcp")
        weight = np.array([0.0, 0.0, -G * robot.payload.mass])
        lever = tcp[:3, :3] @ np.asarray(robot.payload.com)
        wrench = np.concatenate([weight, np.cross(lever, weight)])
        ff = ff - robot.model.jacobian(q, link="tcp").T @ wrench
    robot.write(JointCommand(q_des=q, tau_ff=ff, kp=KP, kd=KD))
    for _ in range(steps):
        robot.step()


@pytest.fixture
def twin():
    with PyBulletRobot(seed=2, watchdog_s=None) as robot:
        yield robot


def test_at_rest_the_prediction_is_the_sim_sensor_reading(twin):
    """Random held configurations, with and without a payload on both: exact up to the hold's
    residual motion."""
    rng = np.random.default_rng(5)
    with PyBulletRobot(seed=1, ft=FtSensorConfig(lowpass=False), watchdog_s=None) as real:
        for payload in (None, (0.3, (0.01, -0.02, 0.03))):
            if payload is not None:
                real.attach_payload(*payload)
                twin.attach_payload(*payload)
            for _ in range(4):
                q = real.model.home_q + rng.uniform(-0.8, 0.8, 6)
                real.reset(q)
                hold(real, q, 4)
                s = real.read()
                twin.reset()
                p = twin.follow(s.q, s.qd, s.t_us)
                assert not p.dynamic  # first call: accelerations assumed zero
                # the payload's weld is a solved constraint, slightly soft: the arm still
                # moves by micrometres, which the real IMU's 1 ms difference sees
                tol = 1e-5 if payload is None else 1e-4
                np.testing.assert_allclose(p.wrench, s.wrench.wrench, atol=tol)
                np.testing.assert_allclose(p.specific_force, s.imu.specific_force, atol=10 * tol)
                np.testing.assert_allclose(p.angular_rate, s.imu.angular_rate, atol=1e-9)
                np.testing.assert_allclose(p.orientation, s.imu.orientation, atol=1e-9)
                assert np.linalg.norm(p.wrench[:3]) > 3.0  # the tool side's weight is in it


def test_in_motion_the_prediction_follows_the_sinc_averaged_sensor(twin):
    """5 ms control period (the sensor's sinc window): the period's mean acceleration is what the
    sensor averages; the dynamic terms matter (a quasi-static prediction is far worse)."""
    twin.reset()
    errors, static_errors = [], []
    with PyBulletRobot(seed=1, watchdog_s=None) as real, PyBulletRobot(watchdog_s=None) as still:
        for k in range(300):
            real.write(tracking(real, k * real.control_period_s))
            real.step()
            s = real.read()
            p = twin.follow(s.q, s.qd, s.t_us)
            quasi_static = still.follow(s.q, np.zeros(6), s.t_us)
            if k > 0:
                assert p.dynamic
                errors.append(s.wrench.wrench - p.wrench)
                static_errors.append(s.wrench.wrench - quasi_static.wrench)
                np.testing.assert_allclose(p.angular_rate, s.imu.angular_rate, atol=1e-9)
    errors, static_errors = np.abs(errors).max(axis=0), np.abs(static_errors).max(axis=0)
    assert errors[:3].max() < 0.05 and errors[3:].max() < 0.005, errors
    assert static_errors[:3].max() > 10 * errors[:3].max(), static_errors


def test_imu_prediction_is_exact_when_following_every_physics_step(twin):
    """With a 1 ms control period both difference the IMU velocity over the same physics step."""
    twin.reset()
    with PyBulletRobot(seed=1, control_period_s=0.001, watchdog_s=None) as real:
        worst = 0.0
        for k in range(400):
            real.write(tracking(real, k * 0.001))
            real.step()
            s = real.read()
            p = twin.follow(s.q, s.qd, s.t_us)
            if k > 0 and s.imu.t_us == s.t_us:
                worst = max(worst, float(np.abs(p.specific_force - s.imu.specific_force).max()))
        assert worst < 1e-6
        assert np.linalg.norm(s.imu.specific_force - p.specific_force) < 1e-6


def test_follow_validates_its_input_and_restarts_its_differences(twin):
    twin.reset()
    q, qd = twin.model.home_q, np.full(6, 0.1)
    with pytest.raises(ValueError, match="6 finite"):
        twin.follow(q[:5], qd)
    with pytest.raises(ValueError, match="qd"):
        twin.follow(q, [0, 0, np.nan, 0, 0, 0])
    with pytest.raises(ValueError, match="accel_window_s"):
        twin.follow(q, qd, 0, accel_window_s=-1.0)
    assert not twin.follow(q, qd, 1_000_000).dynamic
    assert twin.follow(q, qd).dynamic  # default time: one control period later
    assert twin.follow(q, qd, 1_020_000).dynamic
    assert not twin.follow(q, qd, 1_020_000 + MAX_GAP_US + 1).dynamic  # a gap: restart
    assert not twin.follow(q, qd, 5).dynamic  # time went back: restart
    np.testing.assert_array_equal(twin.read().q, q)  # the twin's state is the followed one


def test_an_external_force_reads_as_that_force_at_the_tcp(twin):
    """Held at home and pushed at the TCP: the reading minus the twin's prediction at the
    measured state is [R^T F, p_tcp x R^T F] in the sensor frame; removing the push removes it."""
    force = np.array([3.0, -2.0, 1.5])  # N, world
    with PyBulletRobot(seed=1, watchdog_s=None) as real:
        model = real.model
        with pytest.raises(ValueError, match="3 finite"):
            real.set_external_force([1.0, 2.0])
        real.set_external_force(force)
        hold(real, model.home_q, 200)
        s = real.read()
        twin.reset()
        residual = s.wrench.wrench - twin.follow(s.q, s.qd, s.t_us).wrench
        world_t_sensor = model.fk(s.q, link="ft_sensor")
        sensor_t_tcp = np.linalg.inv(world_t_sensor) @ model.fk(s.q, link="tcp")
        f = world_t_sensor[:3, :3].T @ force
        expected = np.concatenate([f, np.cross(sensor_t_tcp[:3, 3], f)])
        np.testing.assert_allclose(residual, expected, atol=2e-3)
        real.set_external_force(None)
        hold(real, model.home_q, 200)
        s = real.read()
        residual = s.wrench.wrench - twin.follow(s.q, s.qd, s.t_us).wrench
        np.testing.assert_allclose(residual, 0.0, atol=2e-3)


def test_rigid_inertial_combination_is_the_parallel_axis_theorem():
    d, m = 0.1, 2.0
    body = RigidInertial.combine(
        [(m, np.array([d, 0.0, 1.0]), np.zeros((3, 3))), (m, np.array([-d, 0.0, 1.0]), np.eye(3))]
    )
    assert body.mass == 2 * m
    np.testing.assert_allclose(body.com, [0.0, 0.0, 1.0])
    np.testing.assert_allclose(body.inertia, np.eye(3) + np.diag([0.0, 2 * m * d**2, 2 * m * d**2]))


vectors = st.lists(st.floats(-20.0, 20.0), min_size=3, max_size=3).map(np.array)


class _Motion:
    def __init__(self, s, w, al) -> None:
        self.sensor_specific_force = s
        self.sensor_angular_velocity = w
        self.sensor_angular_acceleration = al


@given(vectors, vectors, vectors, st.floats(0.01, 5.0), vectors)
def test_payload_regressor_is_the_point_mass_wrench(s, w, al, mass, p20):
    """Force rows exact for a point mass at p; torque rows p x (-m s) (second order in p left
    out, as documented)."""
    p = p20 / 100.0  # within 0.2 m of the sensor
    h = payload_regressor(_Motion(s, w, al)) @ np.concatenate([[mass], mass * p])
    accel = s + np.cross(al, p) + np.cross(w, np.cross(w, p))  # specific force at p
    np.testing.assert_allclose(h[:3], -mass * accel, atol=1e-9)
    np.testing.assert_allclose(h[3:], np.cross(p, -mass * s), atol=1e-9)
