"""The simulated IMU: gravity at rest, gyro on a spinning wrist, rate, noise and bias."""

from __future__ import annotations

import numpy as np
import pytest
from twin.sim import HOLD_KD, HOLD_KP, ImuConfig, PyBulletRobot

from twin.robot import JointCommand
from twin.safety import limits_for
from twin.spatial import SO3

G = 9.81
N_CONFIGS = 20


def hold(robot: PyBulletRobot, q: np.ndarray, steps: int) -> None:
    robot.reset(q)
    ff = robot.engine.inverse_dynamics("arm", q, np.zeros(6), np.zeros(6))
    robot.write(JointCommand(q_des=q, tau_ff=ff, kp=np.array(HOLD_KP), kd=np.array(HOLD_KD)))
    for _ in range(steps):
        robot.step()


@pytest.fixture(scope="module")
def robot():
    with PyBulletRobot() as r:
        yield r


def test_static_specific_force_is_gravity_up_in_the_imu_frame(robot):
    model = robot.model
    rng = np.random.default_rng(11)
    soft = limits_for(model)  # commands stop at the soft limits (twin.safety)
    for q in rng.uniform(soft.lower, soft.upper, (N_CONFIGS, 6)):
        hold(robot, q, 3)
        state = robot.read()
        f = state.imu.specific_force
        world_R_imu = model.fk(state.q, link="imu")[:3, :3]
        assert abs(np.linalg.norm(f) - G) <= 0.01
        np.testing.assert_allclose(
            f / np.linalg.norm(f), world_R_imu.T @ [0.0, 0.0, 1.0], atol=1e-3
        )
        np.testing.assert_allclose(state.imu.angular_rate, 0.0, atol=1e-3)
        # the reported orientation is the imu link's, as the kinematics package computes it
        assert SO3(state.imu.orientation).angle_to(SO3.from_matrix(world_R_imu)) < 1e-6


def test_gyro_reads_a_constant_spin_of_joint_6_on_the_imu_z_axis(robot):
    """Joint 6 turns about the flange z axis, which is the IMU's z axis (imu_joint is a pure yaw)."""
    model = robot.model
    rate = 2.0  # rad/s
    hold(robot, model.home_q, 1)
    q0 = robot.read().q.copy()
    ff = robot.engine.inverse_dynamics("arm", q0, np.zeros(6), np.zeros(6))
    kp = np.array(HOLD_KP) * [1, 1, 1, 1, 1, 0]  # joint 6: a pure velocity servo
    spin = JointCommand(
        q_des=q0, qd_des=[0, 0, 0, 0, 0, rate], tau_ff=ff, kp=kp, kd=np.array(HOLD_KD)
    )
    robot.write(spin)
    for _ in range(80):  # 0.4 s (under the 0.5 s watchdog): the spin-up settles within 0.05 s
        robot.step()
    state = robot.read()
    assert state.qd[5] == pytest.approx(rate, rel=1e-3)
    gyro = state.imu.angular_rate
    assert np.linalg.norm(gyro - [0.0, 0.0, rate]) <= 0.01 * rate
    # the IMU sits 18 mm off the axis: its specific force carries the centripetal term w^2 r
    r = np.hypot(0.015, 0.01)
    f = state.imu.specific_force
    assert np.hypot(f[0], f[1]) == pytest.approx(rate**2 * r, rel=0.05)
    assert f[2] == pytest.approx(-G, abs=0.01)  # IMU z points down at home


def test_rate_sample_and_hold_noise_and_bias():
    cfg = ImuConfig(rate_hz=100.0, accel_noise_std=0.05, gyro_noise_std=0.01,
                    accel_bias=(0.1, -0.2, 0.3), gyro_bias=(0.01, 0.02, -0.03), orientation=False)  # fmt: skip
    with PyBulletRobot(imu=cfg, control_period_s=0.001, seed=5) as r:
        hold(r, r.model.home_q, 1)
        times, forces, rates = [], [], []
        for _ in range(2000):
            r.step()
            s = r.read().imu
            if not times or s.t_us != times[-1]:
                times.append(s.t_us)
                forces.append(s.specific_force)
                rates.append(s.angular_rate)
            assert s.orientation is None
        world_R_imu = r.model.fk(r.read().q, link="imu")[:3, :3]
    assert np.all(np.diff(times[1:]) == 10_000)  # 100 Hz (after the restart sample), held between
    forces, rates = np.array(forces), np.array(rates)
    n = len(forces)
    f_true = world_R_imu.T @ [0.0, 0.0, G]
    assert np.all(np.abs(forces.mean(0) - f_true - cfg.accel_bias) < 4 * 0.05 / np.sqrt(n))
    assert np.all(np.abs(rates.mean(0) - cfg.gyro_bias) < 4 * 0.01 / np.sqrt(n))
    np.testing.assert_allclose(forces.std(0), 0.05, rtol=0.2)
    np.testing.assert_allclose(rates.std(0), 0.01, rtol=0.2)


def test_config_is_validated():
    with pytest.raises(ValueError, match="rate_hz"):
        ImuConfig(rate_hz=0.0)
    with pytest.raises(ValueError, match="accel_bias"):
        ImuConfig(accel_bias=(0.0, 1.0))
