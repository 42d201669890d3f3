"""RAW F/T frames (issue 31, item 4): a frame with the RAW status bit skipped the range check, so
a forged 1e30 reached the filtered wrench as 2.8e35 with health OK. Now a RAW frame is refused
unless the sensor was configured for raw output, and then the range applies in raw units (the
gauge values through the device's calibration). The codec rule, the ``w`` dump it reads, then
end to end through the emulator's forged frames on the driver (the serial robot with the F/T
services: ``test_datapath_plausibility.test_published_force_stays_true_...``)."""

from __future__ import annotations

import numpy as np
import pytest
from twin.hardware.clock import MonotonicClock
from twin.hardware.drivers.bota_sensor import BotaSensor
from twin.hardware.emulator import BotaEmulator, IdealSource
from twin.hardware.emulator.sources import RealTimeRunner
from twin.hardware.emulator.testing import wait_until
from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.protocols import bota

from twin.robot import FtStatus
from twin.sensors.device import MEASURING_RANGE

RAW = int(FtStatus.RAW)
BOUND = 3.0 * np.asarray(MEASURING_RANGE)  # PLAUSIBLE_RANGE_FACTOR times the range


def _frame(status=RAW, wrench=(1.0, -2.0, 9.8, 0.1, 0.0, -0.1), temperature_c=30.0):
    return bota.BotaFrame(status, tuple(wrench), 5, temperature_c)


def _raw(scale=1.0, offsets=(0.0,) * 6):
    return bota.RawOutput(scale * np.eye(6), np.asarray(offsets))


# ---------------------------------------------------------------- the codec rule
@pytest.mark.parametrize(
    ("frame", "raw", "reason"),
    [
        (_frame(), None, bota.RAW_NOT_CONFIGURED),  # the gap: no raw output configured
        (_frame(wrench=(1e30, 0, 0, 0, 0, 0)), None, bota.RAW_NOT_CONFIGURED),
        (_frame(), _raw(), None),
        (_frame(wrench=(1e30, 0, 0, 0, 0, 0)), _raw(), bota.OUT_OF_RANGE),  # the forged 1e30
        (_frame(wrench=(0, 0, float("nan"), 0, 0, 0)), _raw(), bota.OUT_OF_RANGE),
        (_frame(wrench=(0, 0, float("inf"), 0, 0, 0)), _raw(0.0), bota.OUT_OF_RANGE),
        # raw units: gauge values through M @ gauge - offsets, against 3x the range (fz: 1200 N)
        (_frame(wrench=(0, 0, 12.0, 0, 0, 0)), _raw(100.0), None),  # 1200 N: the bound itself
        (_frame(wrench=(0, 0, 12.01, 0, 0, 0)), _raw(100.0), bota.OUT_OF_RANGE),
        (_frame(wrench=(0, 0, 0, 0, 0, 0)), _raw(1.0, (0, 0, 0, 0, 0, 25.0)), bota.OUT_OF_RANGE),
        (_frame(wrench=(0, 0, 5e3, 0, 0, 0)), _raw(0.1), None),  # 500 N: large gauge, fine
        (_frame(status=RAW | 0x0100), _raw(), bota.RESERVED_BITS),
        (_frame(temperature_c=400.0), _raw(), bota.TEMPERATURE),
        (_frame(status=0, wrench=(1e30, 0, 0, 0, 0, 0)), _raw(), bota.OUT_OF_RANGE),
    ],
)
def test_raw_frame_implausibility(frame, raw, reason):
    assert bota.implausibility(frame, MEASURING_RANGE, raw=raw) == reason


def test_an_accepted_raw_frame_calibrates_into_the_bound_on_every_axis():
    """What the F/T service publishes for a RAW frame is ``G @ gauge + b`` with ``G = M`` and
    ``b = -offsets``: for every accepted frame, within 3x the range."""
    rng = np.random.default_rng(31)
    raw = bota.RawOutput(rng.normal(size=(6, 6)), rng.normal(size=6))
    accepted = 0
    for _ in range(2000):
        gauge = rng.normal(scale=rng.choice([1.0, 100.0, 1e4]), size=6)
        frame = _frame(wrench=gauge)
        if bota.implausibility(frame, MEASURING_RANGE, raw=raw) is None:
            accepted += 1
            assert np.all(np.abs(raw.wrench(gauge)) <= BOUND)
    assert 200 < accepted < 2000  # both outcomes exercised


def test_raw_output_is_read_from_the_w_dump():
    dump = "c,0,{u},0,4\r\nf,256,0,0,1\r\nb, 0.500, 0.000, 0.000, 0.000, 0.000, 0.000\r\n" + (
        "".join(
            f"m{i}," + ",".join(f"{2.0 if i == j else 0.0:9.6f}" for j in range(6)) + "\r\n"
            for i in range(6)
        )
        + "r,0,w,0"
    )
    assert bota.raw_output_of_dump(dump.format(u=1)) is None
    raw = bota.raw_output_of_dump(dump.format(u=0))
    np.testing.assert_array_equal(raw.calibration, 2.0 * np.eye(6))
    np.testing.assert_array_equal(raw.offsets, [0.5, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(raw.wrench(np.ones(6)), [1.5, 2, 2, 2, 2, 2])
    with pytest.raises(ProtocolError, match=r"without a finite m0\.\.m5 and b"):
        bota.raw_output_of_dump("c,0,0,0,4\r\nf,256,0,0,1\r\nr,0,w,0")
    with pytest.raises(ProtocolError, match="no c line"):
        bota.raw_output_of_dump("f,256,0,0,1\r\nr,0,w,0")
    with pytest.raises(InvalidArgumentError, match="6x6"):
        bota.RawOutput(np.eye(5), np.zeros(6))


# ---------------------------------------------------------------- the driver, end to end
@pytest.fixture
def rig(tmp_path):
    source = IdealSource(sinc_length=128)  # 400 Hz
    runner = RealTimeRunner(source, MonotonicClock())
    emu = BotaEmulator(source, link_dir=tmp_path, boot_delay_s=0.01)
    try:
        yield emu
    finally:
        emu.close()
        runner.close()


def _forge_and_collect(emu, ft, kind: str, count: int) -> list:
    """Forge ``count`` frames, wait until the driver has judged them and published 10 more;
    every sample published meanwhile."""
    ft.take_samples()
    before = ft.checks.rejected_total
    emu.forge(kind, count)
    wait_until(lambda: emu.frames_forged >= count, 10.0)
    wait_until(lambda: ft.checks.rejected_total >= before + count, 10.0)
    n = ft.frames_received
    wait_until(lambda: ft.frames_received >= n + 10, 10.0)
    return list(ft.take_samples().samples)


def test_a_forged_raw_frame_is_refused_when_raw_output_is_not_configured(rig):
    emu = rig
    with BotaSensor(emu.port.path, sinc_length=128, boot_timeout_s=1.0) as ft:
        wait_until(lambda: ft.frames_received >= 10, 10.0)
        samples = _forge_and_collect(emu, ft, "raw_out_of_range", 3)
        report = ft.checks.report()
    assert report.rejected == {bota.RAW_NOT_CONFIGURED: 3}
    assert samples and all(not s.status & FtStatus.RAW for s in samples)
    assert max(np.abs(s.wrench).max() for s in samples) < 20.0  # never the 1e30
    assert "w" not in emu.commands  # calibrated output: the start-up is the vendor's sequence


def test_raw_output_configured_by_command_is_range_checked_in_raw_units(rig):
    emu = rig
    with BotaSensor(emu.port.path, sinc_length=128, boot_timeout_s=1.0) as ft:
        wait_until(lambda: ft.frames_received >= 10, 10.0)
        ft.command("c,0,0,0,4")  # calibration use off: wrapped in C ... R, the dump read
        assert emu.commands[-4:] == ["C", "c,0,0,0,4", "w", "R"]
        n = ft.frames_received
        wait_until(lambda: ft.frames_received >= n + 10, 10.0)
        assert ft.latest.sample.status & FtStatus.RAW  # the gauge values, published
        samples = _forge_and_collect(emu, ft, "raw_out_of_range", 3)
        assert ft.checks.report().rejected == {bota.OUT_OF_RANGE: 3}
        assert samples and all(s.status & FtStatus.RAW for s in samples)
        assert max(np.abs(s.wrench).max() for s in samples) < 20.0
        ft.command("c,0,1,0,4")  # calibration use back on: RAW frames implausible again
        assert emu.commands[-3:] == ["C", "c,0,1,0,4", "R"]
        samples = _forge_and_collect(emu, ft, "raw_out_of_range", 2)
        report = ft.checks.report()
    assert report.rejected == {bota.OUT_OF_RANGE: 3, bota.RAW_NOT_CONFIGURED: 2}
    assert all(not s.status & FtStatus.RAW for s in samples[1:])


def test_raw_output_at_start_up_follows_the_devices_calibration(rig):
    """``raw_output=True``: the start-up turns calibration use off and reads the dump; a new
    calibration matrix moves the raw range with it (the ideal source's |fz| is about 9.8:
    through M = 100 I that is 980 N, in range; through M = 200 I 1960 N, beyond 1200 N)."""
    emu = rig
    with BotaSensor(emu.port.path, sinc_length=128, boot_timeout_s=1.0, raw_output=True) as ft:
        assert emu.commands[:7] == ["C", "p?", "p?", "c,0,0,0,4", "f,128,0,0,1", "w", "R"]
        wait_until(lambda: ft.frames_received >= 10, 10.0)
        assert ft.latest.sample.status & FtStatus.RAW
        ft.set_calibration(100.0 * np.eye(6))
        n = ft.frames_received
        wait_until(lambda: ft.frames_received >= n + 10, 10.0)
        assert ft.checks.rejected_total == 0
        ft.set_calibration(200.0 * np.eye(6))
        wait_until(lambda: ft.checks.report().rejected.get(bota.OUT_OF_RANGE, 0) >= 20, 10.0)
        n = ft.frames_received
        ft.set_calibration(np.eye(6))
        wait_until(lambda: ft.frames_received >= n + 10, 10.0)
