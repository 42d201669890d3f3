"""PyBulletRobot: the control law, determinism, step response, command safety and watchdog."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from twin.sim import (
    HOLD_KD,
    HOLD_KP,
    FtSensorConfig,
    ImuConfig,
    Payload,
    PyBulletRobot,
    RobotClosedError,
)

from twin.kinematics import ArmModel
from twin.robot import FtSensorDevice, Health, JointCommand, joint_torque

KP, KD = np.array(HOLD_KP), np.array(HOLD_KD)
STEP_RAD = 0.1
SETTLE_S = 0.25  # sim/robot.py documents 0.3 s; the q_des ramp (twin.safety rule 6) takes 0.13 s
OVERSHOOT = 0.03


def gravity(robot: PyBulletRobot, q: np.ndarray) -> np.ndarray:
    return robot.engine.inverse_dynamics("arm", q, np.zeros(6), np.zeros(6))


def run_hash(seed: int, steps: int = 2000) -> str:
    """SHA-256 over every state of a noisy run with a sinusoidal command (used across processes)."""
    ft = FtSensorConfig(noise_std=(0.05,) * 3 + (0.002,) * 3, bias=(0.1,) * 6)
    imu = ImuConfig(accel_noise_std=0.02, gyro_noise_std=0.002)
    digest = hashlib.sha256()
    with PyBulletRobot(seed=seed, ft=ft, imu=imu) as robot:
        q0 = robot.model.home_q
        phase = np.linspace(0.0, 2.0, 6)
        for k in range(steps):
            t = k * robot.control_period_s
            robot.write(JointCommand(q_des=q0 + 0.3 * np.sin(2.0 * t + phase), kp=KP, kd=KD))
            robot.step()
            s = robot.read()
            digest.update(s.t_us.to_bytes(8, "little"))
            for a in (s.q, s.qd, s.tau, s.wrench.wrench, s.imu.specific_force, s.imu.angular_rate):
                digest.update(a.tobytes())
    return digest.hexdigest()


def test_same_seed_and_commands_are_bit_identical_across_runs_and_processes():
    code = (
        f"import importlib.util as u; s = u.spec_from_file_location('t', {__file__!r}); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); print(m.run_hash(7))"
    )
    other = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:  # the other process runs while this one computes its own two runs
        first = run_hash(7)
        assert run_hash(7) == first
        assert run_hash(8, steps=50) != run_hash(7, steps=50)  # the seed drives the sensor noise
        out, _ = other.communicate(timeout=300)
    finally:
        other.kill()
    assert other.returncode == 0
    assert out.strip().splitlines()[-1] == first


def test_interface_basics():
    with PyBulletRobot(control_period_s=0.005) as robot:
        assert isinstance(robot.model, ArmModel)
        assert robot.control_period_s == pytest.approx(0.005)
        assert isinstance(robot.ft_device, FtSensorDevice)
        state = robot.read()
        assert state.t_us == 0 and state.wrench is None and state.imu is None
        np.testing.assert_array_equal(state.q, robot.model.home_q)
        robot.step()
        state = robot.read()
        assert state.t_us == 5000
        assert state.wrench is not None and state.imu is not None
        with pytest.raises(ValueError):
            state.q[0] = 1.0  # snapshots are read-only
        robot.follow(robot.model.home_q, np.zeros(6))
        for made_by in (robot.read(), robot.reset()):  # after step, follow and reset
            assert not any(a.flags.writeable for a in (made_by.q, made_by.qd, made_by.tau))
        assert not any(a.flags.writeable for a in (state.q, state.qd, state.tau))
    robot.close()  # idempotent
    with pytest.raises(RobotClosedError):
        robot.read()
    with pytest.raises(ValueError, match="multiple"):
        PyBulletRobot(control_period_s=0.0025)


def test_holds_the_initial_configuration_before_any_command():
    with PyBulletRobot() as robot:
        for _ in range(100):
            robot.step()
        state = robot.read()
        np.testing.assert_allclose(state.q, robot.model.home_q, atol=1e-6)
        assert state.health == Health.OK


def test_tau_is_the_law_applied_at_the_last_physics_step():
    with PyBulletRobot(control_period_s=0.001, joint_limits=False) as robot:  # the raw law
        before = robot.read()
        q_des = before.q + [0.2, -0.1, 0.1, 0.3, -0.2, 0.5]
        cmd = JointCommand(
            q_des=q_des, qd_des=np.full(6, 0.1), tau_ff=[0.1, 1, 0.5, 0, 0, 0], kp=KP, kd=KD
        )
        robot.write(cmd)
        robot.step()
        expected = joint_torque(cmd, before.q, before.qd, robot.model.effort_limits)
        np.testing.assert_array_equal(robot.read().tau, expected)
        assert np.any(np.abs(expected) == robot.model.effort_limits)  # the clamp was exercised


@pytest.mark.parametrize("joint", range(6))
def test_step_response(joint):
    """A 0.1 rad step with HOLD_KP / HOLD_KD and gravity feedforward at the target: settles to
    2 % within SETTLE_S, overshoot below OVERSHOOT (figures documented in sim/robot.py)."""
    with PyBulletRobot() as robot:
        target = robot.model.home_q.copy()
        target[joint] += STEP_RAD
        robot.write(JointCommand(q_des=target, tau_ff=gravity(robot, target), kp=KP, kd=KD))
        q = []
        for _ in range(round(0.4 / robot.control_period_s)):
            robot.step()
            q.append(robot.read().q[joint])
        err = (np.array(q) - target[joint]) / STEP_RAD
        outside = np.flatnonzero(np.abs(err) > 0.02)
        settle_s = (outside[-1] + 1) * robot.control_period_s if outside.size else 0.0
        assert settle_s <= SETTLE_S
        assert err.max() < OVERSHOOT
        assert abs(err[-1]) < 1e-3


def test_non_finite_command_is_refused_and_the_previous_stays():
    with PyBulletRobot() as robot:
        target = robot.model.home_q + [0.1, 0, 0, 0, 0, 0]
        good = JointCommand(q_des=target, tau_ff=gravity(robot, target), kp=KP, kd=KD)
        robot.write(good)
        bad_q = target.copy()
        bad_q[2] = np.nan
        with pytest.raises(ValueError, match="joint_3"):
            robot.write(JointCommand(q_des=bad_q, kp=KP, kd=KD))
        with pytest.raises(ValueError, match="kd"):
            robot.write(JointCommand(q_des=target, kp=KP, kd=np.full(6, np.inf)))
        for _ in range(100):
            robot.step()
        np.testing.assert_allclose(robot.read().q, target, atol=1e-4)


def test_watchdog_holds_the_position_measured_when_it_expires():
    with PyBulletRobot(watchdog_s=0.05) as robot:
        target = robot.model.home_q + [1.0, 0, 0, 0, 0, 0]  # a motion in progress
        robot.write(JointCommand(q_des=target, tau_ff=gravity(robot, target), kp=KP, kd=KD))
        states = [robot.read()]
        for _ in range(150):
            robot.step()
            states.append(robot.read())
        flags = [bool(s.health & Health.WATCHDOG) for s in states]
        first = flags.index(True)
        assert all(flags[first:])
        assert states[first].t_us - states[0].t_us > 50_000
        period_us = robot.control_period_s * 1e6  # detected at the start of the next step()
        assert states[first].t_us - states[0].t_us <= 50_000 + 2 * period_us
        held = states[first - 1].q  # measured at the start of the step in which it expired
        assert abs(held[0] - states[0].q[0]) > 0.02  # moved (<= 1.571 rad/s): not the start
        np.testing.assert_allclose(states[-1].q, held, atol=1e-4)
        np.testing.assert_allclose(states[-1].qd, 0.0, atol=1e-3)
        robot.write(JointCommand(q_des=held, kp=KP, kd=KD))
        robot.step()
        assert not robot.read().health & Health.WATCHDOG


def test_joint_friction_and_damping():
    def drive(robot: PyBulletRobot, torque: float, steps: int) -> float:
        q = robot.model.home_q
        ff = gravity(robot, q) + [torque, 0, 0, 0, 0, 0]
        robot.write(
            JointCommand(q_des=q, tau_ff=ff, kp=KP * [0, 1, 1, 1, 1, 1], kd=KD * [0, 1, 1, 1, 1, 1])
        )
        for _ in range(steps):
            robot.step()
        return robot.read().qd[0]

    with PyBulletRobot(joint_friction=1.0) as robot:
        assert abs(drive(robot, 0.5, 50)) < 1e-6  # below the 1 N m Coulomb friction: stuck
        assert drive(robot, 1.5, 50) > 0.1
    with PyBulletRobot(joint_damping=[2.0, 0, 0, 0, 0, 0], watchdog_s=None) as robot:
        assert drive(robot, 1.0, 150) == pytest.approx(1.0 / 2.0, rel=0.02)  # terminal velocity


def test_reset_scene_payload_and_render():
    with PyBulletRobot(scene="table", payload=None) as robot:
        assert "scene/table_top" in robot.scene_bodies
        q = robot.model.home_q + [0.5, 0.2, -0.2, 0, 0, 0]
        state = robot.reset(q)
        np.testing.assert_array_equal(state.q, q)
        np.testing.assert_array_equal(state.qd, 0.0)
        with pytest.raises(ValueError, match="6 finite"):
            robot.reset([0.0, 1.0])
        image = robot.render(64, 48)
        assert image.shape == (48, 64, 3) and image.dtype == np.uint8
        assert len(np.unique(image.reshape(-1, 3), axis=0)) > 3
    with PyBulletRobot(payload=Payload(0.5, (0, 0, 0.02))) as robot:
        assert robot.payload.mass == 0.5
        for _ in range(100):  # the hold sags a little under the extra weight, then settles
            robot.step()
        base = 9.81 * sum(robot.model.link_mass(k) for k in ("ft_sensor", "imu", "tool", "tcp"))
        assert robot.read().wrench.wrench[2] == pytest.approx(base + 0.5 * 9.81, rel=0.02)
