"""Device drivers against the emulators: DYNAMIXEL bus transactions and errors, the Bota start-up
and configuration, the WitMotion configuration and samples."""

from __future__ import annotations

import time

import numpy as np
import pytest
from twin.hardware.clock import ManualClock
from twin.hardware.config import load_config
from twin.hardware.drivers.bota_sensor import BotaSensor
from twin.hardware.drivers.dynamixel_bus import DynamixelBus
from twin.hardware.drivers.witmotion_imu import WitmotionImu
from twin.hardware.emulator import BotaEmulator, IdealSource, ServoChainEmulator, WitmotionEmulator
from twin.hardware.emulator.testing import wait_until
from twin.hardware.errors import (
    DeviceStatusError,
    DisconnectedError,
    InvalidArgumentError,
    ReplyTimeoutError,
)
from twin.hardware.protocols.dynamixel_table import HardwareError, StatusError, XTable

from twin.robot import FtSensorDevice, FtStatus

IDS = [1, 2, 3, 4, 5, 6]


@pytest.fixture()
def bus(tmp_path):
    config = load_config()
    emu = ServoChainEmulator(IdealSource(), config.joint_map(), ManualClock(), link_dir=tmp_path)
    drv = DynamixelBus(emu.port.path, reply_timeout_s=0.2).open()
    yield drv, emu
    drv.close()
    emu.close()


def test_bus_scan_read_write_and_sync(bus):
    drv, _emu = bus
    assert drv.scan([1, 2, 7, 6], timeout_s=0.05) == {1: (1020, 46), 2: (1020, 46), 6: (1020, 46)}
    assert drv.stats.timeouts == 1  # id 7 is not on the bus
    drv.write(3, XTable.RETURN_DELAY_TIME, 0)
    assert drv.read(3, XTable.RETURN_DELAY_TIME) == 0
    drv.sync_write_register(XTable.GOAL_POSITION, dict.fromkeys(IDS, 3000))
    assert drv.sync_read_register(XTable.GOAL_POSITION, IDS) == dict.fromkeys(IDS, 3000)
    pv = drv.read_present(IDS)
    assert pv.ids == tuple(IDS) and np.all(pv.position == 2048) and not pv.alert.any()
    assert drv.bulk_read([(2, XTable.ID.address, 1), (5, XTable.MODEL_NUMBER.address, 2)]) == [
        b"\x02",
        b"\xfc\x03",
    ]


def test_bus_errors_are_typed(bus):
    drv, emu = bus
    drv.set_torque([1], True)
    with pytest.raises(DeviceStatusError) as err:
        drv.set_operating_mode([1], 0)  # EEPROM while torque is on
    assert err.value.code == StatusError.ACCESS and "servo 1" in str(err.value)
    with pytest.raises(ReplyTimeoutError):
        drv.ping(9, timeout_s=0.02)
    with pytest.raises(InvalidArgumentError):
        drv.write(
            1, XTable.GOAL_CURRENT, 1 << 20
        )  # does not fit the register: refused before sending
    emu.inject_hardware_error(4, HardwareError.OVERHEATING)
    assert drv.read_present(IDS).alert.tolist() == [False, False, False, True, False, False]
    assert drv.alert_ids == {4}
    assert drv.hardware_errors(IDS) == {4: HardwareError.OVERHEATING}
    drv.reboot(4)
    assert drv.hardware_errors(IDS) == {} and drv.alert_ids == set()


def test_a_reply_that_came_while_the_host_did_not_run_is_taken_at_the_deadline(bus):
    """A loaded host's thread can wake from its reply wait only after the deadline although the
    reply came in time (here its first wait returns late and empty, as a descheduled thread's
    poll does): the bytes already in the port are read before the reply is declared lost."""
    drv, _emu = bus
    receive, late = drv.link.receive, []

    def descheduled(timeout_s: float) -> bytes:
        if late or timeout_s == 0:  # (a look at what waits: the request's late-reply check)
            return receive(timeout_s)
        late.append(timeout_s)
        time.sleep(timeout_s + 0.1)  # the servo answers within about a millisecond meanwhile
        return b""

    drv.link.receive = descheduled
    assert drv.ping(1, timeout_s=0.02) == (1020, 46)
    assert late == [pytest.approx(0.02, abs=0.005)] and drv.stats.timeouts == 0
    with pytest.raises(ReplyTimeoutError):  # nothing in the port: still a timeout
        drv.ping(9, timeout_s=0.02)
    assert drv.stats.timeouts == 1


def test_bus_refuses_commands_once_the_port_is_gone(bus):
    drv, emu = bus
    emu.port.unplug()
    wait_until(lambda: not drv.ready, 2.0)
    with pytest.raises(DisconnectedError):
        drv.ping(1)
    assert [e.kind for e in drv.link.events][-1] in ("lost", "retry_failed")


@pytest.fixture()
def ft_stack(tmp_path):
    source = IdealSource(sinc_length=256)
    from twin.hardware.clock import MonotonicClock
    from twin.hardware.emulator.sources import RealTimeRunner

    runner = RealTimeRunner(source, MonotonicClock())
    emu = BotaEmulator(source, link_dir=tmp_path, boot_delay_s=0.01)
    yield source, emu
    emu.close()
    runner.close()


def test_bota_startup_metadata_and_stream(ft_stack):
    source, emu = ft_stack
    with BotaSensor(emu.port.path, sinc_length=128, boot_timeout_s=1.0) as ft:
        assert isinstance(ft, FtSensorDevice)
        assert ft.metadata.serial_number == "SN0004242" and ft.metadata.product_name == "BotaEmu"
        # the vendor sequence: C, p? twice, c, f, R
        assert emu.commands[:6] == ["C", "p?", "p?", "c,0,1,0,4", "f,128,0,0,1", "R"]
        n0 = ft.frames_received
        wait_until(lambda: ft.frames_received >= n0 + 10, 2.0)
        stamps = np.array([r.device_t_us for r in list(ft.history)[-10:]])
        assert np.all(np.diff(stamps) == 2500)  # 51200 / 128 = 400 Hz
        reading = ft.latest
        assert reading.sample.wrench == pytest.approx(
            source.true_wrench(reading.device_t_us), abs=1e-5
        )
        assert ft.rate_hz == 400.0 and ft.parser_stats.crc_errors == 0


def test_bota_configuration_through_the_device_api(ft_stack):
    source, emu = ft_stack
    with BotaSensor(emu.port.path, sinc_length=256, boot_timeout_s=1.0, read_metadata=False) as ft:
        # A setting in run mode is wrapped in C ... R; the reply is the device's.
        assert ft.command("f,512,0,0,1") == "r,0,f,0" and ft.sinc_length == 512
        assert emu.commands[-3:] == ["C", "f,512,0,0,1", "R"]
        ft.set_offsets([1.0, 2.0, 0.0, 0.0, 0.0, 0.5])
        gain = np.diag([2.0, 1, 1, 1, 1, 1])
        ft.set_calibration(gain)
        n0 = ft.frames_received
        wait_until(lambda: ft.frames_received >= n0 + 3, 2.0)
        r = ft.latest
        want = gain @ source.true_wrench(r.device_t_us) - [1.0, 2.0, 0.0, 0.0, 0.0, 0.5]
        assert r.sample.wrench == pytest.approx(want, abs=1e-4)
        assert r.sample.status == FtStatus.OK
        with pytest.raises(DeviceStatusError):
            ft.command("c,0,1,1,4")  # CSV output is not emulated: the device answers code 2
        with pytest.raises(InvalidArgumentError):
            ft.command("x,1")
        ft.command("C")
        assert ft.in_config_mode and "r,0,w,0" in ft.command("w")
        ft.command("R")
        n0 = ft.frames_received
        wait_until(lambda: ft.frames_received > n0, 2.0)


def test_imu_configuration_and_samples(tmp_path):
    source = IdealSource()
    from twin.hardware.clock import MonotonicClock
    from twin.hardware.emulator.sources import RealTimeRunner

    runner = RealTimeRunner(source, MonotonicClock())
    emu = WitmotionEmulator(source, link_dir=tmp_path, baudrate=115200)
    try:
        with WitmotionImu(emu.port.path, 115200, rate_hz=200.0) as imu:
            assert emu.registers[0x02] == 0x0206 and emu.registers[0x03] == 0x0B
            n0 = imu.samples_received
            wait_until(lambda: imu.samples_received >= n0 + 5, 2.0)
            s = imu.latest
            assert s.specific_force == pytest.approx([0, 0, 9.80665], abs=0.005)
            assert s.angular_rate == pytest.approx([0, 0, 0]) and s.orientation == pytest.approx(
                [1, 0, 0, 0]
            )
            assert imu.incomplete_cycles == 0 and imu.parser_stats.crc_errors == 0
    finally:
        emu.close()
        runner.close()
