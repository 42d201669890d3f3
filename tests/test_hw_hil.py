"""Hardware in the loop: one scenario (a joint-space trajectory, then a hold) on ``sim.PyBulletRobot``
directly and on ``SerialRobot`` through the sim-backed emulators, compared.

The serial run is lock-step: a ``ManualClock`` shared by the robot and the emulators, so time only
advances when the robot steps, and every byte still crosses the pseudo-terminals, codecs, drivers
and reader threads. The bring-up runs with the clock pumped (the drivers wait in real time for
their first frames); the direct run is held for the same simulated time before both start.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from twin.hardware import ManualClock, SerialRobot
from twin.hardware.emulator import EmulatorStack, make_sim_source
from twin.hardware.emulator.testing import emulator_config, wait_until
from twin.hardware.protocols import witmotion as wit

from twin.kinematics.gravity import gravity_torques
from twin.robot import Health, JointCommand

sim_robot = pytest.importorskip("twin.sim.robot")

SEED = 3
PERIOD_US = 4000
N_MOVE, N_HOLD = 250, 100  # 1.0 s of trajectory, 0.4 s of hold
KP = np.array([120.0, 240.0, 120.0, 25.0, 25.0, 10.0])
KD = np.array([6.0, 12.0, 4.0, 0.5, 0.5, 0.2])
DELTA = np.array([0.4, -0.3, 0.3, 0.5, -0.4, 0.6])


def _scenario(model) -> list[JointCommand]:
    s = np.minimum(np.arange(1, N_MOVE + N_HOLD + 1) / N_MOVE, 1.0)[:, None]
    q = (
        model.home_q + (10 * s**3 - 15 * s**4 + 6 * s**5) * DELTA
    )  # quintic, rest to rest, then hold
    tau = gravity_torques(model, q)
    return [JointCommand(q_des=qk, tau_ff=tk, kp=KP, kd=KD) for qk, tk in zip(q, tau)]


@pytest.fixture(scope="module")
def runs():
    config = emulator_config(watchdog_s=None, stale_after_s=1.0)
    # Lock-step: a reply may wait for the sim to step; virtual time does not mind a slow machine.
    config = replace(config, bus=replace(config.bus, reply_timeout_s=2.0))
    clock = ManualClock()
    with EmulatorStack(config, make_sim_source(seed=SEED), clock=clock) as stack:
        with stack.clock_running(PERIOD_US):
            robot = SerialRobot(stack.robot_config(), clock=clock)
        with robot:
            model = robot.model
            commands = _scenario(model)
            t_start = clock.now_us()
            serial = []
            for cmd in commands:
                robot.write(cmd)
                robot.step()
                serial.append(robot.read())
            source = stack.source
            t_end = clock.now_us()
            last_imu_t = max(s.t_us for s in [source.imu_sample_at(t_end)] if s is not None)
            wait_until(
                lambda: (
                    robot.ft.latest is not None
                    and robot.ft.latest.device_t_us >= source.latest_ft_t_us()
                ),
                5.0,
            )
            ft_frames = list(robot.ft.history)
            emulated_ft = {s.t_us: s.wrench for s in source.ft_samples_after(t_start - 1)}
            emulated_imu = source.imu_sample_at(last_imu_t)
            wait_until(lambda: _imu_close(robot.imu.latest, emulated_imu, 0.0), 5.0)
            serial_imu = robot.imu.latest
            stats = (robot.stats, robot.bus.stats, robot.ft.parser_stats, robot.imu.parser_stats)
    with sim_robot.PyBulletRobot(
        model, seed=SEED, control_period_s=PERIOD_US * 1e-6, watchdog_s=None
    ) as direct:
        while direct.read().t_us < t_start:  # held for the bring-up time, as the emulated arm was
            direct.step()
        assert direct.read().t_us == t_start
        states = []
        for cmd in commands:
            direct.write(cmd)
            direct.step()
            states.append(direct.read())
    return dict(
        serial=serial,
        direct=states,
        ft_frames=ft_frames,
        emulated_ft=emulated_ft,
        emulated_imu=emulated_imu,
        serial_imu=serial_imu,
        stats=stats,
        tick=1.0 / config.joint_map().ticks_per_rad,
    )


def _imu_close(a, b, extra: float) -> bool:
    if a is None or b is None:
        return False
    return (
        np.all(np.abs(a.specific_force - b.specific_force) <= wit.ACCEL_SCALE / 2 + extra + 1e-9)
        and np.all(np.abs(a.angular_rate - b.angular_rate) <= wit.GYRO_SCALE / 2 + extra + 1e-9)
        and np.all(np.abs(a.orientation - b.orientation) <= wit.QUAT_SCALE + extra + 1e-9)
    )


def test_same_joint_trajectory_within_quantisation_and_one_period(runs):
    qs = np.array([s.q for s in runs["serial"]])
    qd = np.array([s.q for s in runs["direct"]])
    assert all(s.health == Health.OK for s in runs["serial"])
    # Allow one control period of latency either way, then the position quantisation (one tick).
    candidates = np.stack([np.roll(qd, 1, axis=0), qd, np.roll(qd, -1, axis=0)])
    candidates[0, 0], candidates[2, -1] = qd[0], qd[-1]
    err = np.min(np.abs(candidates - qs[None]), axis=0)
    assert np.all(err <= runs["tick"]), (err.max(axis=0), runs["tick"])
    # It moved: the comparison is not of two arms at rest.
    assert np.all(np.abs(qs[N_MOVE - 1] - qs[0]) > 0.8 * np.abs(DELTA))


def test_wrench_arrives_within_float32_quantisation_and_matches_the_direct_run(runs):
    frames, emulated = runs["ft_frames"], runs["emulated_ft"]
    matched = [f for f in frames if f.device_t_us in emulated]
    assert len(matched) >= 0.95 * len(emulated) > 200  # 200 Hz over 1.4 s
    for f in matched:  # the wire: exact up to float32
        want = emulated[f.device_t_us]
        assert np.all(np.abs(f.sample.wrench - want) <= np.abs(want) * 2**-23 + 1e-30)
    direct = {s.wrench.t_us: s.wrench.wrench for s in runs["direct"]}
    diff = np.array(
        [
            np.abs(f.sample.wrench - direct[f.device_t_us])
            for f in matched
            if f.device_t_us in direct
        ]
    )
    hold = np.array(
        [
            np.abs(f.sample.wrench - direct[f.device_t_us])
            for f in matched[-40:]
            if f.device_t_us in direct
        ]
    )
    # The arms differ by at most a tick per joint; the tool weight (~5 N) turns that into mN at rest.
    assert hold.max() < 0.02, hold.max(axis=0)
    assert diff.max() < 0.3, diff.max(axis=0)  # in motion, dynamic loads add to it


def test_imu_within_its_quantisation(runs):
    assert _imu_close(
        runs["serial_imu"], runs["emulated_imu"], 0.0
    )  # the wire: WitMotion quantisation
    direct = runs["direct"][-1].imu
    # at rest after the hold: the direct run's IMU within quantisation plus a tick of attitude
    assert _imu_close(runs["serial_imu"], direct, 9.81 * 6 * runs["tick"].max())


def test_no_frame_was_lost_or_corrupted(runs):
    robot_stats, bus_stats, ft_stats, imu_stats = runs["stats"]
    assert robot_stats.bus_errors == 0 and bus_stats.timeouts == 0
    assert ft_stats.crc_errors == ft_stats.dropped_frames == imu_stats.crc_errors == 0
