"""Payload identification: recovers a payload welded in the sim from noisy static F/T readings,
refuses degenerate pose sets, and drives the F/T service's payload compensation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.sim import FtSensorConfig, PyBulletRobot

from twin.calibration.collect import hold_and_read, move_to
from twin.calibration.payload import (
    RECOMMENDED_POSES,
    gravity_from_imu,
    gravity_in_sensor,
    identify_payload,
    pose_set_condition,
    tool_load,
)
from twin.dynamics import ArmDynamics
from twin.kinematics import ArmModel
from twin.sensors.ft_service import FtSensorService
from twin.sensors.payload import PayloadCompensation

MODEL = ArmModel.default()
FT_NOISE = (0.1, 0.1, 0.1, 0.005, 0.005, 0.005)  # N, N m std: the shadow tests' Bota-class sensor
FT_BIAS = (0.3, -0.2, 0.5, 0.01, -0.02, 0.005)  # N, N m: offsets the fit must find
PAYLOAD_KG = 0.5
PAYLOAD_COM_TCP = np.array([0.02, -0.015, 0.03])  # m, TCP frame
SENSOR_T_TCP = np.linalg.inv(MODEL.fk(MODEL.home_q, "ft_sensor")) @ MODEL.fk(MODEL.home_q, "tcp")


def _sensor_rotations(q: np.ndarray) -> np.ndarray:
    return MODEL.fk(q, "ft_sensor")[:, :3, :3]


@pytest.fixture(scope="module")
def recorded():
    """Static readings at the recommended poses of the sim arm carrying the payload."""
    ft = FtSensorConfig(noise_std=FT_NOISE, bias=FT_BIAS)
    with PyBulletRobot(seed=21, ft=ft, watchdog_s=None) as robot:
        robot.attach_payload(PAYLOAD_KG, PAYLOAD_COM_TCP)
        dyn = ArmDynamics(MODEL).with_payload(PAYLOAD_KG, PAYLOAD_COM_TCP, link="tcp")
        samples = []
        for q in RECOMMENDED_POSES:
            move_to(robot, q, dyn, scale=1.0)
            samples.append(hold_and_read(robot, q, 0.5, dyn))
    return samples


def test_recovers_the_sim_payload_within_1_percent_and_2_mm(recorded):
    q = np.array([s.q for s in recorded])
    wrench = np.array([s.wrench for s in recorded])
    assert min(s.samples for s in recorded) >= 90  # 0.5 s of 200 Hz samples per pose
    est = identify_payload(wrench, gravity_in_sensor(_sensor_rotations(q)))
    assert est.ok, est.reason
    assert est.condition < 2.0
    payload = est.minus(tool_load(MODEL))
    truth_com = (SENSOR_T_TCP @ np.append(PAYLOAD_COM_TCP, 1.0))[:3]
    assert payload.mass == pytest.approx(PAYLOAD_KG, rel=0.01)
    assert np.linalg.norm(payload.com - truth_com) < 2e-3
    np.testing.assert_allclose(est.force_offset, FT_BIAS[:3], atol=0.05)
    np.testing.assert_allclose(est.torque_offset, FT_BIAS[3:], atol=0.003)
    # the residuals are the averaged noise: std / sqrt(samples), a few times over
    assert est.residual_rms[0] < 5 * 0.1 / np.sqrt(90) + 0.02
    assert 6 * est.std[0] > abs(est.mass - (PAYLOAD_KG + tool_load(MODEL).mass))


def test_gravity_from_the_imu_gives_the_same_estimate(recorded):
    q = np.array([s.q for s in recorded])
    wrench = np.array([s.wrench for s in recorded])
    sensor_T_imu = np.linalg.inv(MODEL.fk(MODEL.home_q, "ft_sensor")) @ MODEL.fk(
        MODEL.home_q, "imu"
    )
    g_imu = gravity_from_imu(np.array([s.specific_force for s in recorded]), sensor_T_imu[:3, :3])
    g_fk = gravity_in_sensor(_sensor_rotations(q))
    np.testing.assert_allclose(g_imu, g_fk, atol=0.05)  # the sim IMU's noise-free bias-free at rest
    a, b = identify_payload(wrench, g_imu), identify_payload(wrench, g_fk)
    assert a.mass == pytest.approx(b.mass, rel=0.01)


def test_a_degenerate_pose_set_is_refused_with_a_reason():
    rng = np.random.default_rng(4)
    q = np.tile(MODEL.home_q, (6, 1))
    q[:, 0] = rng.uniform(-2.0, 2.0, 6)  # only joint 1 turns: about the vertical
    q[:, 5] = 0.0
    g = gravity_in_sensor(_sensor_rotations(q))
    w = rng.normal(size=(6, 6))
    est = identify_payload(w, g)
    assert not est.ok and "same direction" in est.reason and np.isnan(est.mass)
    # tool down and tool up only: the centre of mass along the vertical is unobservable
    q = RECOMMENDED_POSES[[0, 1, 0, 1, 0, 1]]
    est = identify_payload(w, gravity_in_sensor(_sensor_rotations(q)))
    assert not est.ok and "one line" in est.reason
    # gravity round one great circle (only joint 6 turns, tool horizontal) is enough
    q = np.tile(RECOMMENDED_POSES[2], (6, 1))
    q[:, 5] = np.linspace(-3.0, 3.0, 6)
    assert identify_payload(w, gravity_in_sensor(_sensor_rotations(q))).ok
    two = identify_payload(w[:2], g[:2])
    assert not two.ok and "at least 3" in two.reason
    with pytest.raises(ValueError, match="same K"):
        identify_payload(w, g[:3])


@given(st.floats(0.05, 3.0), st.tuples(*[st.floats(-0.1, 0.1)] * 3))
def test_noise_free_readings_are_fitted_exactly(mass, com):
    g = gravity_in_sensor(_sensor_rotations(RECOMMENDED_POSES))
    comp = PayloadCompensation(mass, com, tuple(np.arange(6) * 0.1))
    rot = _sensor_rotations(RECOMMENDED_POSES)
    w = np.array([comp.weight_wrench(r) + comp.offsets for r in rot])
    est = identify_payload(w, g)
    assert est.ok and est.mass == pytest.approx(mass, rel=1e-9)
    np.testing.assert_allclose(est.com, com, atol=1e-9)
    np.testing.assert_allclose(
        np.concatenate((est.force_offset, est.torque_offset)), comp.offsets, atol=1e-9
    )
    assert pose_set_condition(g) == pytest.approx(est.condition)


def test_the_ft_service_compensates_the_payload_weight_leaving_the_contact(recorded):
    q = np.array([s.q for s in recorded])
    est = identify_payload(
        np.array([s.wrench for s in recorded]), gravity_in_sensor(_sensor_rotations(q))
    )
    with pytest.raises(ValueError, match="refused"):
        PayloadCompensation.from_estimate(identify_payload(np.zeros((2, 6)), np.ones((2, 3))))
    ft = FtSensorConfig(noise_std=FT_NOISE, bias=FT_BIAS)
    with PyBulletRobot(seed=22, ft=ft, watchdog_s=None) as robot:
        robot.attach_payload(PAYLOAD_KG, PAYLOAD_COM_TCP)
        dyn = ArmDynamics(MODEL).with_payload(PAYLOAD_KG, PAYLOAD_COM_TCP, link="tcp")
        with FtSensorService(robot) as service:
            service.connect()
            service.set_payload_compensation(PayloadCompensation.from_estimate(est))
            pose = np.array([0.5, 0.2, 1.2, 0.6, -0.7, 0.9])  # not one of the fitted poses
            move_to(robot, pose, dyn, scale=1.0)
            readings = []
            for _ in range(60):
                hold_and_read(robot, pose, robot.control_period_s, dyn, settle_s=0.0)
                service.update()
                readings.append(service.wrench.wrench)
            assert np.abs(np.mean(readings, axis=0)[:3]).max() < 0.1  # N: no weight left
            push = np.array([0.0, 3.0, -2.0])  # N, world, at the TCP
            robot.set_external_force(push)
            readings = []
            for _ in range(200):
                hold_and_read(robot, pose, robot.control_period_s, dyn, settle_s=0.0)
                service.update()
                readings.append(service.wrench.wrench)
            world_R_sensor = MODEL.fk(robot.read().q, "ft_sensor")[:3, :3]
            contact = world_R_sensor @ np.mean(readings[100:], axis=0)[:3]  # settled
            # the sensor reads what the tool side exerts on it: the push itself
            np.testing.assert_allclose(contact, push, atol=0.2)
