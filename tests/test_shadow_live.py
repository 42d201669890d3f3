"""The live twin against a "real" arm that is a second ``PyBulletRobot`` (other seed, noisy
sensors): nominal running, a payload change, a transient contact, a slowly drifting sensor."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_shadow_follow import tracking
from twin.sim import FtSensorConfig, ImuConfig, PyBulletRobot

from twin.robot import Health
from twin.shadow import Shadow, ShadowConfig, ShadowFlag

FT_NOISE = (0.1, 0.1, 0.1, 0.005, 0.005, 0.005)  # N, N m std: a Bota-class sensor
IMU = ImuConfig(accel_noise_std=0.05, gyro_noise_std=0.005)
CONFIG = ShadowConfig()
TARE_CYCLES = round(CONFIG.tare_s / 0.005) + 1


def run(real: PyBulletRobot, seconds: float, hook=None):
    """Track the test trajectory for ``seconds``; ``hook(t)`` runs before each cycle's step.
    Returns (reports, states, flags as ints)."""
    reports, states = [], []
    with Shadow(real, config=CONFIG) as shadow:
        for k in range(round(seconds / real.control_period_s)):
            t = k * real.control_period_s
            if hook is not None:
                hook(t)
            real.write(tracking(real, t))
            real.step()
            states.append(real.read())
            reports.append(shadow.update(states[-1]))
    return reports, states, np.array([int(r.flags) for r in reports])


def times(reports) -> np.ndarray:
    return np.array([r.t_us for r in reports]) * 1e-6


def test_nominal_running_stays_within_noise_and_raises_no_flag():
    with PyBulletRobot(seed=11, ft=FtSensorConfig(noise_std=FT_NOISE), imu=IMU) as real:
        reports, _, flags = run(real, 3.0)
    taring = flags == ShadowFlag.TARING
    assert taring[: TARE_CYCLES - 1].all() and not taring[TARE_CYCLES:].any()
    assert np.all(flags[TARE_CYCLES:] == ShadowFlag.OK)
    residual = np.array([r.wrench_residual for r in reports[TARE_CYCLES:]])
    std, noise = residual.std(axis=0), np.array(FT_NOISE)
    assert np.all(np.abs(std / noise - 1.0) < 0.15), std  # the residual is the sensor noise
    assert np.all(np.abs(residual.mean(axis=0)) < 0.2 * noise), residual.mean(axis=0)
    assert np.all(np.abs(residual) < 5 * noise)
    imu = np.array([r.imu_residual for r in reports[TARE_CYCLES:]])
    gyro_std = imu[:, 3:].std(axis=0)
    assert np.all(np.abs(gyro_std / IMU.gyro_noise_std - 1.0) < 0.15), gyro_std
    # accelerometer: noise plus the acceleration inside a control period (documented)
    assert np.sqrt(np.mean(imu[:, :3] ** 2)) < 1.5
    last = reports[-1]
    assert last.payload_mass_kg == 0.0 and np.isnan(last.payload_com).all()
    assert np.linalg.norm(last.ft_offset[:3]) < 0.05 and np.linalg.norm(last.ft_offset[3:]) < 0.003


def test_a_payload_change_is_flagged_and_weighed():
    attach_s = 1.5
    with PyBulletRobot(seed=12, ft=FtSensorConfig(noise_std=FT_NOISE), imu=IMU) as real:
        hook = lambda t: real.attach_payload(0.5) if abs(t - attach_s) < 1e-9 else None  # noqa: E731
        reports, _, flags = run(real, 3.0, hook)
    t = times(reports)
    before, after = flags[(t > CONFIG.tare_s + 0.01) & (t <= attach_s)], flags[t > attach_s]
    assert np.all(before == ShadowFlag.OK)
    payload = (after & ShadowFlag.PAYLOAD) != 0
    first = int(np.argmax(payload))
    assert payload[first:].all()  # recognised once, then held
    recognised_s = t[t > attach_s][first] - attach_s
    assert (
        CONFIG.settle_s + CONFIG.persist_s
        <= recognised_s
        <= CONFIG.settle_s + CONFIG.persist_s + 0.1
    )
    contact = (after & ShadowFlag.CONTACT) != 0
    assert contact[:10].any() and not contact[first:].any()  # a contact until it is a weight
    assert not np.any(after & (ShadowFlag.FT_DRIFT | ShadowFlag.IMU_DRIFT))
    last = reports[-1]
    assert last.payload_mass_kg == pytest.approx(0.5, rel=0.05)
    np.testing.assert_allclose(last.payload_com, [0.0, 0.0, 0.1], atol=0.01)  # at the TCP
    settled = np.array([r.contact_wrench for r in reports[-100:]])
    assert np.abs(settled[:, :3]).max() < 0.3  # the payload's wrench is now explained


def test_a_transient_contact_is_flagged_while_it_lasts():
    push = np.array([6.0, -4.0, 0.0])  # N, world, at the TCP, from 1.0 s to 1.1 s
    with PyBulletRobot(seed=13, ft=FtSensorConfig(noise_std=FT_NOISE), imu=IMU) as real:

        def hook(t: float) -> None:
            if abs(t - 1.0) < 1e-9:
                real.set_external_force(push)
            if abs(t - 1.1) < 1e-9:
                real.set_external_force(None)

        reports, _, flags = run(real, 2.0, hook)
    t = times(reports)
    contact = (flags & ShadowFlag.CONTACT) != 0
    during = (t > 1.0) & (t <= 1.1)
    assert contact[during].all()
    assert not contact[(t <= 1.0) | (t > 1.1 + 0.03)].any()  # released within a few filter times
    either = ShadowFlag.CONTACT | ShadowFlag.TORQUE_CONTACT
    assert np.all(flags[t > CONFIG.tare_s + 0.01] & ~either == ShadowFlag.OK)
    peak = max(np.linalg.norm(r.contact_wrench[:3]) for r in reports)
    assert peak == pytest.approx(np.linalg.norm(push), rel=0.1)  # the contact force, estimated
    assert reports[-1].payload_mass_kg == 0.0


def test_a_slowly_drifting_sensor_is_flagged_as_drift():
    """A thermal bias (FtSensorConfig: 0.1 N/C on fz, ...) warming up by 2 C/s at first."""
    bias_per_c = np.array([0.03, -0.02, 0.1, 0.0, 0.004, 0.0])
    ft = FtSensorConfig(
        noise_std=FT_NOISE,
        temperature_c=25.0,
        warmup_rise_c=30.0,
        warmup_tau_s=15.0,
        thermal_bias_per_c=tuple(bias_per_c),
    )
    with PyBulletRobot(seed=14, ft=ft, imu=IMU) as real:
        reports, states, flags = run(real, 5.0)
    temperature = np.array([s.wrench.temperature_c for s in states])
    true_drift = np.outer(temperature - np.median(temperature[:TARE_CYCLES]), bias_per_c)
    drift_n = np.linalg.norm(true_drift[:, :3], axis=1)
    # the tracked offset is the true drift one filter time constant earlier (a low-pass on a ramp)
    lag = round(CONFIG.offset_filter_s / real.control_period_s)
    np.testing.assert_allclose(reports[-1].ft_offset, true_drift[-1 - lag], atol=0.05)
    flagged = (flags & ShadowFlag.FT_DRIFT) != 0
    first = int(np.argmax(flagged))
    assert flagged[first:].all() and first > lag
    assert 0.45 <= drift_n[first - lag] <= 0.55  # raised as the (lagged) drift crosses 0.5 N
    assert not np.any(flags & (ShadowFlag.CONTACT | ShadowFlag.PAYLOAD | ShadowFlag.IMU_DRIFT))


def test_reports_config_and_lifetime():
    with pytest.raises(ValueError, match="event_force_n"):
        ShadowConfig(event_force_n=-1.0)
    with pytest.raises(ValueError, match="contact thresholds"):
        ShadowConfig(contact_force_n=0.1)
    with PyBulletRobot(seed=15) as real:
        with pytest.raises(TypeError, match="follow"):
            Shadow(real, twin=object())
        shadow = Shadow(real)
        real.step()
        state = real.read()
        report = shadow.update(state)
        assert report.flags == ShadowFlag.TARING and report.t_us == state.t_us
        np.testing.assert_allclose(report.wrench_residual, 0.0, atol=1e-6)  # ideal sensors
        with pytest.raises(ValueError):
            report.wrench_residual[0] = 1.0  # read-only
        stale = shadow.update(replace(state, health=Health.JOINTS_STALE))
        assert stale.flags & ShadowFlag.NOT_TRACKING and np.isnan(stale.wrench_residual).all()
        blind = shadow.update(replace(state, wrench=None, imu=None))
        assert blind.flags & ShadowFlag.NO_FT and blind.flags & ShadowFlag.NO_IMU
        assert np.isnan(blind.wrench_residual).all() and np.isnan(blind.imu_residual).all()
        twin = shadow.twin
        shadow.close()
        shadow.close()  # idempotent
        assert twin.closed and not real.closed  # the shadow closes only what it opened
        with Shadow(real, twin=twin_of(real)) as borrowed:
            borrowed.update()
        assert not borrowed.twin.closed
        borrowed.twin.close()


def twin_of(real: PyBulletRobot) -> PyBulletRobot:
    return PyBulletRobot(real.model, seed=99, watchdog_s=None)
