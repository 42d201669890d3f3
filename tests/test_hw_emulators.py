"""The emulators answer byte for byte like the devices (raw pyserial clients, no drivers)."""

from __future__ import annotations

import numpy as np
import pytest
import serial
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware.clock import ManualClock
from twin.hardware.config import load_config
from twin.hardware.emulator import BotaEmulator, IdealSource, ServoChainEmulator, WitmotionEmulator
from twin.hardware.emulator.sources import DriveArrays
from twin.hardware.emulator.testing import random_drive, wait_until
from twin.hardware.emulator.testing import status_replies as _replies
from twin.hardware.protocols import bota, witmotion
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import (
    ALERT_BIT,
    HardwareError,
    OperatingMode,
    StatusError,
    XTable,
)


@pytest.fixture()
def chain(tmp_path):
    clock = ManualClock()
    source = IdealSource()
    config = load_config()
    models = [j.model_number for j in config.joints]  # XH540 (1100) on joints 1-3, XM430 (1020)
    emu = ServoChainEmulator(
        source, config.joint_map(), clock, model_numbers=models, link_dir=tmp_path
    )
    port = serial.Serial(emu.port.path, 1_000_000, timeout=0.5)
    yield emu, port, clock, source
    port.close()
    emu.close()


def test_ping_answer_is_the_reference_status_packet(chain):
    _emu, port, *_ = chain
    port.write(bytes.fromhex("FFFFFD0001030001194E"))  # PING of id 1, docs/protocols/dynamixel.md
    raw = port.read(14)
    assert raw == dxl.encode_status(dxl.ping_status(1, 1100, 46))
    assert dxl.parse_ping_status(dxl.decode_packet(raw)) == (1100, 46)


def test_broadcast_ping_and_sync_read_answer_in_order(chain):
    _emu, port, *_ = chain
    port.write(dxl.encode_instruction(dxl.ping(0xFE)))
    assert [p.id for p in _replies(port, 6)] == [1, 2, 3, 4, 5, 6]
    ids = [5, 2, 6]
    port.write(dxl.encode_instruction(dxl.sync_read(XTable.PRESENT_POSITION.address, 4, ids)))
    replies = _replies(port, 3)
    assert [p.id for p in replies] == ids
    assert all(dxl.decode_value(p.params, True) == 2048 for p in replies)  # q = 0 at zero offset


def test_write_rules_and_error_codes(chain):
    _emu, port, *_ = chain

    def write(reg, value, pid=1):
        port.write(
            dxl.encode_instruction(dxl.write(pid, reg.address, dxl.encode_register(reg, value)))
        )
        return _replies(port, 1)[0]

    assert write(XTable.OPERATING_MODE, OperatingMode.CURRENT).error == 0
    assert write(XTable.OPERATING_MODE, 2).error_code is StatusError.DATA_RANGE
    assert write(XTable.TORQUE_ENABLE, 1).error == 0
    assert write(XTable.OPERATING_MODE, 3).error_code is StatusError.ACCESS  # EEPROM, torque on
    assert write(XTable.GOAL_CURRENT, 5000).error_code is StatusError.DATA_LIMIT
    port.write(dxl.encode_instruction(dxl.write(1, XTable.PRESENT_POSITION.address, b"\0\0\0\0")))
    assert _replies(port, 1)[0].error_code is StatusError.ACCESS  # read-only
    port.write(dxl.encode_instruction(dxl.write(1, XTable.GOAL_POSITION.address, b"\0\0")))
    assert _replies(port, 1)[0].error_code is StatusError.DATA_LENGTH  # half a register
    port.write(dxl.encode_instruction(dxl.InstructionPacket(1, 0x7F)))
    assert _replies(port, 1)[0].error_code is StatusError.INSTRUCTION
    # Broadcast and SYNC_WRITE are never answered; a READ with return level 0 is not either.
    port.write(
        dxl.encode_instruction(dxl.sync_write(XTable.LED.address, 1, {1: b"\x01", 2: b"\x01"}))
    )
    # Level 0 takes effect at once: not even this write is answered.
    port.write(dxl.encode_instruction(dxl.write(3, XTable.STATUS_RETURN_LEVEL.address, b"\x00")))
    port.write(dxl.encode_instruction(dxl.read(3, XTable.LED.address, 1)))
    port.write(dxl.encode_instruction(dxl.read(2, XTable.LED.address, 1)))
    (reply,) = _replies(port, 1)
    assert (reply.id, reply.params) == (2, b"\x01")
    assert port.read(1) == b""


def test_current_goal_moves_the_joint_in_lock_step(chain):
    _emu, port, clock, _source = chain

    def send(reg, value, pid=4):
        port.write(
            dxl.encode_instruction(dxl.write(pid, reg.address, dxl.encode_register(reg, value)))
        )
        _replies(port, 1)

    send(XTable.OPERATING_MODE, OperatingMode.CURRENT)
    send(XTable.TORQUE_ENABLE, 1)
    send(XTable.GOAL_CURRENT, 200)
    clock.advance(100_000)  # time only moves with the clock: the read below integrates 0.1 s
    port.write(dxl.encode_instruction(dxl.read(4, 126, 10)))
    block = _replies(port, 1)[0].params
    current, velocity, position = np.frombuffer(
        block, np.dtype([("c", "<i2"), ("v", "<i4"), ("p", "<i4")])
    )[0]
    tau = 200 * load_config().joint_map().torque_unit[3]
    assert current == 200
    # inertia 0.05, damping 0.5: qd(t) = tau/b (1 - exp(-t b / J)), sampled at 0.5 ms steps
    qd = tau / 0.5 * (1 - np.exp(-0.1 * 0.5 / 0.05))
    assert velocity * load_config().joint_map().velocity_unit[3] == pytest.approx(qd, abs=0.03)
    assert position > 2048


def test_hardware_error_sets_alert_turns_torque_off_and_reboot_clears(chain):
    emu, port, *_ = chain
    port.write(dxl.encode_instruction(dxl.write(2, XTable.TORQUE_ENABLE.address, b"\x01")))
    _replies(port, 1)
    emu.inject_hardware_error(2, HardwareError.OVERLOAD)
    port.write(dxl.encode_instruction(dxl.read(2, XTable.HARDWARE_ERROR_STATUS.address, 1)))
    reply = _replies(port, 1)[0]
    assert reply.error == ALERT_BIT and reply.params == bytes([HardwareError.OVERLOAD])
    port.write(dxl.encode_instruction(dxl.write(2, XTable.TORQUE_ENABLE.address, b"\x01")))
    assert _replies(port, 1)[0].error == ALERT_BIT | StatusError.RESULT_FAIL
    port.write(dxl.encode_instruction(dxl.reboot(2)))
    _replies(port, 1)
    port.write(dxl.encode_instruction(dxl.read(2, XTable.HARDWARE_ERROR_STATUS.address, 1)))
    reply = _replies(port, 1)[0]
    assert reply.error == 0 and reply.params == b"\x00"


def _read_until(port, needle: bytes, timeout_s: float = 2.0) -> bytes:
    got = bytearray()
    wait_until(lambda: got.extend(port.read(max(1, port.in_waiting))) or needle in got, timeout_s)
    return bytes(got)


def test_bota_boot_config_mode_acks_metadata_and_frames(tmp_path):
    clock, source = ManualClock(), IdealSource(sinc_length=512)
    emu = BotaEmulator(source, link_dir=tmp_path, boot_delay_s=0.0)
    try:
        port = serial.Serial(emu.port.path, 460800, timeout=0.2)
        assert b"App Init" in _read_until(port, b"FW version")
        port.write(b"f,64,0,0,1\n")
        assert b"r,0,f,1" in _read_until(port, b"r,0,f,")  # run mode: settings are rejected
        port.write(b"C\n")
        assert b"r,0,C,0" in _read_until(port, b"r,0,C,")
        port.write(b"p?\n")
        text = _read_until(port, b"r,0,p,0")
        assert bota.parse_metadata(text).serial_number == "SN0004242"
        for cmd, char in (
            ("c,0,1,0,4", "c"),
            ("f,64,0,0,1", "f"),
            ("b,1.0,0,0,0,0,0", "b"),
            ("R", "R"),
        ):
            port.write(cmd.encode() + b"\n")
            assert f"r,0,{char},0".encode() in _read_until(port, f"r,0,{char},".encode())
        t0 = source.t_us
        for _ in range(20):  # 20 ms of device time in 1 ms steps: 16 frames at 800 Hz
            clock.advance(1000)
            source.advance_to(clock.now_us())
        parser, frames = bota.BotaStreamParser(), []
        wait_until(
            lambda: (
                frames.extend(parser.feed(port.read(max(1, port.in_waiting)))) or len(frames) >= 16
            ),
            2.0,
        )
        stamps = np.array([f.timestamp_us for f in frames[:16]])
        assert np.all(np.diff(stamps) == 1250) and stamps[0] > t0
        truth = source.true_wrench(int(stamps[0])) - np.array([1.0, 0, 0, 0, 0, 0])
        assert np.allclose(frames[0].wrench, truth, atol=1e-5)  # offsets applied, float32 quantised
        port.close()
    finally:
        emu.close()


def test_witmotion_locked_writes_register_read_and_rate(tmp_path):
    clock, source = ManualClock(), IdealSource()
    emu = WitmotionEmulator(source, link_dir=tmp_path, baudrate=115200)
    try:
        port = serial.Serial(emu.port.path, 115200, timeout=0.2)
        wait_until(lambda: emu.port.client_connected, 2.0)
        port.write(witmotion.cmd_write_register(witmotion.Reg.RRATE, 0x0B))  # locked: ignored
        port.write(witmotion.cmd_read_register(witmotion.Reg.RSW))
        parser, packets = witmotion.WitmotionStreamParser(), []
        wait_until(
            lambda: packets.extend(parser.feed(port.read(max(1, port.in_waiting)))) or packets, 2.0
        )
        assert packets[0] == witmotion.Packet(0x5F, (0x1E, 0x06, 0x06, 0))
        port.write(witmotion.cmd_unlock() + witmotion.cmd_write_register(witmotion.Reg.RRATE, 0x0B))
        port.write(witmotion.cmd_unlock() + witmotion.cmd_write_register(witmotion.Reg.RSW, 0x0206))
        port.write(witmotion.cmd_read_register(witmotion.Reg.RSW))
        packets.clear()
        wait_until(
            lambda: packets.extend(parser.feed(port.read(max(1, port.in_waiting)))) or packets, 2.0
        )
        assert packets[0].values[:2] == (0x0206, 0x0B)
        assert emu.rate_hz == 200.0
        for _ in range(10):  # 50 ms: ten 200 Hz cycles of accel, gyro, quaternion
            clock.advance(5000)
            source.advance_to(clock.now_us())
        packets.clear()
        wait_until(
            lambda: (
                packets.extend(parser.feed(port.read(max(1, port.in_waiting))))
                or len(packets) >= 30
            ),
            2.0,
        )
        assert [p.kind for p in packets[:3]] == [0x51, 0x52, 0x59]
        force, _ = witmotion.accel_of(packets[0])
        assert force == pytest.approx([0, 0, 9.80665], abs=witmotion.ACCEL_SCALE)
        port.close()
    finally:
        emu.close()


@given(st.integers(0, 2**32 - 1), st.integers(1, 40))
def test_the_ideal_sources_float_integration_is_the_array_formulation_bit_for_bit(seed, steps):
    """``IdealSource`` integrates joint by joint on Python floats; the state it reaches is the
    one ``DriveArrays.torques`` and the effort clamp give on arrays, exactly."""
    rng = np.random.default_rng(seed)
    source = IdealSource(
        rng.normal(size=6),
        effort_limits=rng.uniform(0.5, 5.0, 6),
        inertia=rng.uniform(0.01, 0.1, 6),
        damping=rng.uniform(0.0, 1.0, 6),
    )
    for j in range(6):
        source.set_drive(j, random_drive(rng))
    q, qd = source.joint_state()[:2]
    arrays, dt, effort = DriveArrays(source._drives), IdealSource.DT_US * 1e-6, source._effort
    for _ in range(steps):
        tau = np.minimum(np.maximum(arrays.torques(q, qd), -effort), effort)
        qd += dt * (tau - source._damping * qd) / source._inertia
        q += dt * qd
    source.advance_to(steps * IdealSource.DT_US)
    got = source.joint_state()
    assert np.array_equal(got[0], q) and np.array_equal(got[1], qd) and np.array_equal(got[2], tau)
