"""Plausibility beyond the check sum (issue 13, item 6): a frame that passes its CRC but cannot
be a measurement is dropped and counted, never published. The device-clock check as a unit and
as a property; then end to end through the emulators' forged frames (valid CRC, garbage inside)
on the Bota driver, the serial robot with the F/T services, and the IMU driver."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware import SerialRobot
from twin.hardware.clock import MonotonicClock
from twin.hardware.drivers.bota_sensor import BotaSensor
from twin.hardware.drivers.sample_checks import CLOCK_JUMP, DeviceClock
from twin.hardware.drivers.witmotion_imu import DEFAULT_CONTENT, WitmotionImu
from twin.hardware.emulator import FT, BotaEmulator, EmulatorStack, IdealSource
from twin.hardware.emulator.sources import RealTimeRunner
from twin.hardware.emulator.testing import emulator_config, wait_until
from twin.hardware.emulator.witmotion import WitmotionEmulator
from twin.hardware.protocols import bota
from twin.hardware.protocols import witmotion as wit

from twin.kinematics import ArmModel
from twin.robot import FtStatus
from twin.sensors import FtSensorService
from twin.sensors.device import MEASURING_RANGE

PERIOD = 1000
MOD = 1 << 32


def _run_clock(stamps, host=None, period=PERIOD):
    clock: DeviceClock[int] = DeviceClock(period, MOD)
    out, jumps = [], 0
    for k, raw in enumerate(stamps):
        h = k * period if host is None else host[k]
        jumps += clock.offer(raw, h, k, lambda item, t: out.append((item, t)))
    return clock, out, jumps


# ---------------------------------------------------------------- device clock
def test_one_garbage_time_stamp_costs_one_frame_and_never_shifts_the_clock():
    stamps = [5000 + k * PERIOD for k in range(20)]
    stamps[7] = (stamps[7] + (1 << 31)) % MOD  # a frame that passed the CRC with a wild stamp
    clock, out, jumps = _run_clock(stamps)
    assert [k for k, _ in out] == [k for k in range(20) if k != 7]
    assert [t for _, t in out] == [s for k, s in enumerate(stamps) if k != 7]  # no 2**32 shift
    assert jumps == 1 and clock.lost == 1  # the gap it left is one missing frame


def test_the_clock_unwraps_at_two_to_the_32():
    stamps = [(MOD - 3 * PERIOD + k * PERIOD) % MOD for k in range(8)]
    _, out, jumps = _run_clock(stamps)
    times = [t for _, t in out]
    assert jumps == 0 and len(times) == 8
    assert np.all(np.diff(times) == PERIOD) and times[-1] == MOD + 4 * PERIOD


def test_a_real_restart_re_anchors_without_losing_frames_and_stays_monotonic():
    stamps = [900_000 + k * PERIOD for k in range(6)] + [k * PERIOD for k in range(6)]
    clock, out, jumps = _run_clock(stamps)
    assert [k for k, _ in out] == list(range(12)) and jumps == 0
    times = [t for _, t in out]
    assert np.all(np.diff(times) > 0) and clock.reanchors == 1
    assert times[6] - times[5] == PERIOD  # across the restart it advances by the host time


def test_after_a_restart_the_unwrapped_time_advances_by_the_host_time():
    clock: DeviceClock[int] = DeviceClock(PERIOD, MOD)
    out = []
    for k in range(5):
        clock.offer(50_000 + k * PERIOD, k * PERIOD, k, lambda i, t: out.append(t))
    clock.restart()  # the sensor reboots; 2 s of host time pass
    for k in range(5):
        clock.offer(k * PERIOD, 2_000_000 + k * PERIOD, k, lambda i, t: out.append(t))
    assert len(out) == 10 and out[5] - out[4] == 2_000_000 - 4 * PERIOD
    assert np.all(np.diff(out[5:]) == PERIOD)


def test_frames_lost_on_the_line_are_counted_from_the_gaps():
    stamps = [k * PERIOD for k in (0, 1, 2, 5, 6, 10)]
    host = [k * PERIOD for k in (0, 1, 2, 5, 6, 10)]
    clock, out, jumps = _run_clock(stamps, host)
    assert len(out) == 6 and jumps == 0 and clock.lost == 2 + 3


@given(
    st.lists(st.integers(0, MOD - 1), min_size=1, max_size=6),
    st.lists(st.integers(2, 60), min_size=1, max_size=6, unique=True),
    st.integers(0, MOD - 1),
)
def test_isolated_garbage_stamps_never_reach_the_output(garbage, positions, start):
    """Whatever the garbage values and where they sit (never two in a row), every good frame is
    accepted with its unwrapped stamp and every garbage one is dropped as a jump. (A garbage
    stamp that lands within a few periods ahead of the clock is a plausible frame: shifted out.)"""
    n = 70
    good = [(start + k * PERIOD) % MOD for k in range(n)]
    stream, host, kinds = [], [], []
    slots = sorted({p - p % 2 for p in positions})  # even positions: never adjacent
    for k in range(n):
        if k in slots:
            g = garbage[slots.index(k) % len(garbage)]
            if 0 < (g - good[k - 1]) % MOD <= 6 * PERIOD:
                g = (g + (1 << 31)) % MOD
            stream.append(g)
            host.append(k * PERIOD)
            kinds.append(("garbage", g))
        stream.append(good[k])
        host.append(k * PERIOD)
        kinds.append(("good", k))
    clock: DeviceClock[tuple] = DeviceClock(PERIOD, MOD)
    out = []
    jumps = sum(
        clock.offer(r, h, kd, lambda i, t: out.append((i, t)))
        for r, h, kd in zip(stream, host, kinds)
    )
    assert [i for i, _ in out] == [("good", k) for k in range(n)]
    assert [t for _, t in out] == [start + k * PERIOD for k in range(n)]
    assert jumps == len(slots) and clock.lost == 0


# ---------------------------------------------------------------- codec checks
def _frame(**kw):
    base = dict(
        status=0, wrench=(1.0, -2.0, 9.8, 0.1, 0.0, -0.1), timestamp_us=5, temperature_c=30.0
    )
    return bota.BotaFrame(**{**base, **kw})


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (_frame(), None),
        (_frame(status=int(FtStatus.OVER_RANGE | FtStatus.INVALID)), None),
        (_frame(status=0x0010), "reserved status bits"),
        (_frame(status=0x8000), "reserved status bits"),
        (_frame(wrench=(2e36, 0, 0, 0, 0, 0)), "out of range"),
        (_frame(wrench=(0, 0, 3 * 400.0 + 1, 0, 0, 0)), "out of range"),
        (_frame(wrench=(0, 0, 3 * 400.0, 0, 0, 0)), None),  # the bound itself is plausible
        (_frame(wrench=(0, 0, 0, 0, 0, float("nan"))), "out of range"),
        (_frame(temperature_c=-1e20), "temperature"),
        # RAW frames: refused unless configured (issue 31; tests/test_sensors_raw_frames.py)
        (_frame(status=int(FtStatus.RAW)), "raw not configured"),
        (_frame(status=int(FtStatus.RAW), wrench=(float("inf"),) * 6), "raw not configured"),
    ],
)
def test_bota_frame_implausibility(frame, reason):
    assert bota.implausibility(frame, MEASURING_RANGE) == reason


# ---------------------------------------------------------------- Bota driver, end to end
@pytest.fixture
def bota_rig(tmp_path):
    source = IdealSource(sinc_length=128)  # 400 Hz: 2500 us apart
    runner = RealTimeRunner(source, MonotonicClock())
    emu = BotaEmulator(source, link_dir=tmp_path, boot_delay_s=0.01)
    try:
        with BotaSensor(emu.port.path, sinc_length=128, boot_timeout_s=1.0) as ft:
            yield emu, ft
    finally:
        emu.close()
        runner.close()


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("reserved_bits", "reserved status bits"),
        ("out_of_range", "out of range"),
        ("clock_jump", CLOCK_JUMP),
    ],
)
def test_forged_bota_frames_are_dropped_counted_and_never_published(bota_rig, kind, reason):
    emu, ft = bota_rig
    wait_until(lambda: ft.frames_received >= 10, 10.0)
    ft.take_samples()
    start = len(ft.history)
    emu.forge(kind, 3)
    wait_until(lambda: emu.frames_forged == 3, 10.0)
    wait_until(lambda: ft.checks.rejected_total >= 3, 10.0)  # the reader got that far
    n = ft.frames_received
    wait_until(lambda: ft.frames_received >= n + 10, 10.0)
    report = ft.checks.report()
    assert report.rejected == {reason: 3} and report.last_reason == reason
    assert ft.checks.rejected_since(report.last_t_us) and not ft.checks.rejected_since(
        report.last_t_us + 1
    )
    readings = list(ft.history)[start - 1 :]
    stamps = np.array([r.device_t_us for r in readings])
    forged = set(emu.forged_t_us)
    assert not forged & set(stamps.tolist())  # none of the forged frames was published
    gaps = np.diff(stamps)
    assert set(gaps.tolist()) <= {2500, 5000, 7500, 10000}  # gaps only where frames were dropped
    assert gaps.sum() == 2500 * (len(stamps) - 1 + 3)  # the clock never jumped
    batch = ft.take_samples()
    assert batch.rejected == 3 and batch.lost == 0
    for s in batch.samples:
        assert s.status & ~0xF == 0
        assert np.all(np.abs(s.wrench) < 20.0)  # the ideal source's wrench, never 2e36


def test_random_bodies_with_a_valid_crc_are_caught(bota_rig):
    emu, ft = bota_rig
    wait_until(lambda: ft.frames_received >= 10, 10.0)
    ft.take_samples()
    emu.forge("random", 50, seed=5)
    wait_until(lambda: emu.frames_forged == 50, 15.0)
    wait_until(lambda: ft.checks.rejected_total >= 50, 15.0)
    n = ft.frames_received
    wait_until(lambda: ft.frames_received >= n + 5, 10.0)
    assert ft.checks.report().rejected_total == 50  # every random body is implausible
    assert all(np.all(np.abs(s.wrench) < 20.0) for s in ft.take_samples().samples)


def test_published_force_stays_true_through_a_filter_when_frames_are_forged(tmp_path):
    """The issue's scenario: garbage frames through a 10 Hz low-pass kept the published force
    above 100 N for 2.25 s. Now they never enter the filter; health counts them. (Issue 31: a
    forged RAW 1e30 reached the filtered wrench as 2.8e35 with health OK: refused too.)"""
    model = ArmModel.default()
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False)
    source = IdealSource(effort_limits=model.effort_limits)
    with (
        EmulatorStack(config, source, link_dir=tmp_path) as stack,
        SerialRobot(stack.robot_config(), model=model) as robot,
        FtSensorService(robot) as svc,
    ):
        svc.connect()
        svc.set_ft_filter([10.0] * 3, [10.0] * 3)
        wait_until(lambda: robot.step() or svc.update(), 2.0)
        for _ in range(100):
            robot.step()
            svc.update()
        stack.ft.forge("out_of_range", 5)
        stack.ft.forge("reserved_bits", 5)
        stack.ft.forge("raw_out_of_range", 5)
        forces = []
        for _ in range(100):
            robot.step()
            if svc.update():
                forces.append(np.linalg.norm(svc.wrench.force))

        def cycle() -> bool:
            robot.step()
            if svc.update():
                forces.append(np.linalg.norm(svc.wrench.force))
            return svc.health().rejected >= 15

        wait_until(cycle, 10.0, interval_s=0.0)  # until the reader has seen all fifteen
        assert stack.ft.frames_forged == 15
        health = svc.health()
        assert health.rejected == 15 and health.lost == 0
        assert max(forces) < 11.0  # |f| of the ideal source is about 9.8 N
        assert robot.ft.checks.report().rejected == {
            "out of range": 5,
            "reserved status bits": 5,
            "raw not configured": 5,
        }
    assert FT == "ft_sensor"


# ---------------------------------------------------------------- IMU driver, end to end
@pytest.mark.parametrize(
    ("kind", "reason"),
    [("temperature", "temperature"), ("quaternion", "quaternion norm"), ("clock", CLOCK_JUMP)],
)
def test_forged_imu_cycles_are_dropped_and_counted(tmp_path, kind, reason):
    source = IdealSource()
    runner = RealTimeRunner(source, MonotonicClock())
    emu = WitmotionEmulator(source, link_dir=tmp_path, baudrate=115200)
    try:
        content = (wit.PacketType.TIME, *DEFAULT_CONTENT)  # with the device clock
        with WitmotionImu(emu.port.path, 115200, rate_hz=200.0, content=content) as imu:
            wait_until(lambda: imu.samples_received >= 5, 10.0)
            published = []
            emu.forge(kind, 4)
            wait_until(lambda: emu.groups_forged == 4, 10.0)
            wait_until(lambda: imu.checks.rejected_total >= 4, 10.0)
            n = imu.samples_received
            while imu.samples_received < n + 5:
                wait_until(lambda m=imu.samples_received: imu.samples_received > m, 10.0)
                published.append(imu.latest)
            report = imu.checks.report()
    finally:
        emu.close()
        runner.close()
    assert report.rejected == {reason: 4}
    for s in published:  # the IMU at rest: +g along z, identity orientation
        np.testing.assert_allclose(s.specific_force, [0, 0, 9.81], atol=0.01)
        np.testing.assert_allclose(s.orientation, [1, 0, 0, 0], atol=1e-3)
