"""The bus cycle: its packets laid out once (``dynamixel_cycle``) against the general codec, the
wire bound and its warning, the emulators' wire timing, and lost replies that end the wait at
once (``ReplyLostError``) instead of at the reply timeout."""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np
import pytest
import serial
import tomllib
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware.clock import ManualClock
from twin.hardware.config import check_wire_bound, load_config, parse_config, wire_bound
from twin.hardware.drivers.dynamixel_bus import DynamixelBus
from twin.hardware.emulator import IdealSource, ServoChainEmulator
from twin.hardware.emulator.faults import FaultInjector, dynamixel_status_frames
from twin.hardware.emulator.stack import EmulatorStack
from twin.hardware.errors import (
    InvalidArgumentError,
    ProtocolError,
    ReplyLostError,
    ReplyTimeoutError,
    WireBoundWarning,
)
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.crc import crc16_dynamixel_bitwise
from twin.hardware.protocols.dynamixel_cycle import GoalWriter, PresentLayout
from twin.hardware.protocols.dynamixel_table import XTable

IDS = [1, 2, 3, 4, 5, 6]
CONFIG = load_config()
JOINT_MAP = CONFIG.joint_map()


# --------------------------------------------------------------------------- codec
@given(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=6, max_size=6))
def test_the_laid_out_goal_write_is_the_codecs_sync_write(values):
    writer = GoalWriter(XTable.GOAL_POSITION, IDS)
    data = {pid: dxl.encode_register(XTable.GOAL_POSITION, v) for pid, v in zip(IDS, values)}
    assert writer.encode(np.array(values)) == dxl.encode_instruction(
        dxl.sync_write(XTable.GOAL_POSITION.address, 4, data)
    )


def test_a_goal_with_the_header_pattern_in_it_is_stuffed_and_one_out_of_range_refused():
    writer = GoalWriter(XTable.GOAL_POSITION, IDS)
    values = np.array([0, 0xFDFFFF, 0, 0, 0, 0])  # bytes FF FF FD 00 in the second record
    raw = writer.encode(values)
    assert b"\xff\xff\xfd\xfd" in raw[7:-2]
    (packet,) = dxl.DynamixelStreamParser().feed(raw)
    assert dxl.parse_sync_write(packet.params)[2][2] == (0xFDFFFF).to_bytes(4, "little")
    with pytest.raises(InvalidArgumentError, match=r"goal_current .* do not fit"):
        GoalWriter(XTable.GOAL_CURRENT, IDS).encode(np.array([0, 0, 40000, 0, 0, 0]))


@given(
    st.lists(st.binary(min_size=10, max_size=10), min_size=6, max_size=6),
    st.lists(st.sampled_from([0, 0x80, 0x84, 0x01]), min_size=6, max_size=6),
)
def test_the_present_layout_decodes_what_the_codec_decodes(data, errors):
    blocks = [dxl.StatusPacket(pid, e, d) for pid, e, d in zip(IDS, errors, data)]
    layout = PresentLayout(IDS, fast=True)
    (packet,) = dxl.DynamixelStreamParser().feed(dxl.encode_fast_status(blocks))
    records, err = layout.decode([packet])
    ref = dxl.decode_fast_status(packet, IDS, [10] * 6)
    assert err == bytes(errors)
    for rec, b in zip(records, ref):
        assert rec["current"] == int.from_bytes(b.params[0:2], "little", signed=True)
        assert rec["velocity"] == int.from_bytes(b.params[2:6], "little", signed=True)
        assert rec["position"] == int.from_bytes(b.params[6:10], "little", signed=True)
    sync = PresentLayout(IDS, fast=False)
    records2, err2 = sync.decode(blocks)
    assert err2 == bytes(errors) and np.array_equal(records2["position"], records["position"])


def test_the_present_layout_refuses_a_bad_block_crc_a_wrong_id_and_a_short_answer():
    layout = PresentLayout(IDS, fast=True)
    blocks = [dxl.StatusPacket(pid, 0, bytes(range(pid, pid + 10))) for pid in IDS]
    raw = bytearray(dxl.encode_fast_status(blocks))
    assert layout.request == dxl.encode_instruction(dxl.fast_sync_read(126, 10, IDS))
    assert layout.reply_bytes == len(raw) == 92
    bad = bytearray(raw)
    bad[8 + 14 + 12] ^= 1  # block 1's CRC; the packet's CRC recomputed, so the parser passes it
    crc = crc16_dynamixel_bitwise(bytes(bad[:-2]))
    bad[-2:] = bytes((crc & 0xFF, crc >> 8))
    (packet,) = dxl.DynamixelStreamParser().feed(bytes(bad))
    with pytest.raises(ProtocolError, match=r"block 1 \(id 2\): CRC-16 mismatch"):
        layout.decode([packet])
    (packet,) = dxl.DynamixelStreamParser().feed(bytes(raw))
    with pytest.raises(ProtocolError, match=r"from ids \[1, 2, 3, 4, 5, 6\], expected"):
        PresentLayout([1, 2, 3, 4, 6, 5], fast=True).decode([packet])
    with pytest.raises(ProtocolError, match="expected id 0xFE and 82"):
        layout.decode([dxl.StatusPacket(0xFE, 0, bytes(40))])


@given(
    st.lists(st.binary(min_size=10, max_size=10), min_size=6, max_size=6),
    st.lists(st.sampled_from([0, 0x80, 0x84, 0x01]), min_size=6, max_size=6),
    st.integers(0, 91),
    st.integers(1, 255),
)
def test_the_wire_decode_equals_the_parsed_decode_and_refuses_any_damaged_byte(
    data, errors, position, flip
):
    """``decode_wire`` (the cycle's read without the stream parser) gives what the parser and
    ``decode`` give for an intact answer, and ``None`` (the general path) for any byte changed,
    a byte short or one too many; so does the compiled ``decode_joints`` (with numba), whose rows
    are ``JointMap.from_present`` of those records bit for bit."""
    blocks = [dxl.StatusPacket(pid, e, d) for pid, e, d in zip(IDS, errors, data)]
    layout = PresentLayout(IDS, fast=True)
    raw = dxl.encode_fast_status(blocks)
    (packet,) = dxl.DynamixelStreamParser().feed(raw)
    records, err = layout.decode([packet])
    wire_records, wire_err = layout.decode_wire(raw)
    assert wire_err == err == bytes(errors)
    for name in ("id", "current", "velocity", "position"):
        assert np.array_equal(wire_records[name], records[name])
    damaged = bytearray(raw)
    damaged[position] ^= flip
    assert layout.decode_wire(bytes(damaged)) is None
    assert layout.decode_wire(raw[:-1]) is None and layout.decode_wire(raw + b"\0") is None
    assert PresentLayout(IDS, fast=False).decode_wire(raw) is None  # plain reads: never
    if layout.compiled:
        terms = JOINT_MAP.present_terms
        rows, joint_err = layout.decode_joints(raw, terms)
        want = JOINT_MAP.from_present(records["position"], records["velocity"], records["current"])
        assert joint_err == err and rows.tobytes() == want.tobytes() and not rows.flags.writeable
        assert layout.decode_joints(bytes(damaged), terms) is None
        assert layout.decode_joints(raw[:-1], terms) is None
        assert layout.decode_joints(raw + b"\0", terms) is None


# --------------------------------------------------------------------------- wire bound
def test_the_wire_bound_of_the_shipped_bus():
    b = wire_bound(CONFIG)
    assert (b.write_bytes, b.read_bytes, b.fast_reply_bytes, b.sync_reply_bytes) == (
        44,
        20,
        92,
        126,
    )
    assert b.fast_hz == pytest.approx(1e6 / 10 / 156)
    assert b.sync_hz == pytest.approx(1e6 / 10 / 190)
    current = wire_bound(replace(CONFIG, control_mode="current"))
    assert current.write_bytes == 44  # Goal Position too: the torque as a goal (arm_bus)
    slow = wire_bound(replace(CONFIG, bus=replace(CONFIG.bus, return_delay_time_us=100)))
    assert 1 / slow.fast_hz == pytest.approx(1 / b.fast_hz + 100e-6)
    assert 1 / slow.sync_hz == pytest.approx(1 / b.sync_hz + 6 * 100e-6)


def _toml(**robot):
    with open(CONFIG.source, "rb") as fh:
        data = tomllib.load(fh)
    data["robot"].update(robot)
    return data


def test_a_rate_above_the_wire_bound_warns_once_in_one_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parse_config(_toml(control_period_s=0.004), "ok.toml")
        assert not caught
        parse_config(_toml(control_period_s=0.001), "fast.toml")
    (w,) = caught
    assert w.category is WireBoundWarning
    text = str(w.message)
    assert "\n" not in text
    assert "fast.toml" in text and "1000 Hz" in text and "641 Hz" in text and "1000000" in text
    four = replace(CONFIG, control_period_s=0.001, bus=replace(CONFIG.bus, baudrate=4_000_000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_wire_bound(four).fast_hz > 1000


def test_the_wire_timing_flag_is_read_and_reaches_the_emulator(tmp_path):
    data = _toml()
    data["bus"]["emulate_wire_time"] = False
    assert parse_config(data).bus.emulate_wire_time is False
    assert CONFIG.bus.emulate_wire_time is True
    off = replace(CONFIG, bus=replace(CONFIG.bus, emulate_wire_time=False))
    for config, want in ((CONFIG, CONFIG.bus.baudrate), (off, None)):
        with EmulatorStack(config, IdealSource(), link_dir=tmp_path) as stack:
            assert stack.servos.wire_baud == want


# --------------------------------------------------------------------------- emulator, bus
@pytest.fixture
def chain(tmp_path):
    faults = FaultInjector(3, split=dynamixel_status_frames)
    emu = ServoChainEmulator(
        IdealSource(), CONFIG.joint_map(), ManualClock(), link_dir=tmp_path, faults=faults
    )
    for s in emu.servos.values():
        s.set(XTable.RETURN_DELAY_TIME, 0)
    yield emu, faults
    emu.close()


def test_a_sync_write_holds_the_wire_before_the_read_after_it(chain):
    """At 57,600 baud the goal write (44 bytes), the read (20) and its answer (92) take 27 ms
    on the wire: the answer arrives no sooner (a lower bound: a loaded machine only adds)."""
    emu, _ = chain
    emu.wire_baud = 57_600
    port = serial.Serial(emu.port.path, 57_600, timeout=2.0)
    try:
        write = GoalWriter(XTable.GOAL_POSITION, IDS).encode(np.zeros(6, int))
        read = PresentLayout(IDS, fast=True)
        t0 = time.perf_counter()
        port.write(write + read.request)
        raw = port.read(read.reply_bytes)
        elapsed = time.perf_counter() - t0
    finally:
        port.close()
    assert len(raw) == 92
    assert elapsed >= (44 + 20 + 92) * 10 / 57_600


def _bus(emu, timeout_s: float) -> DynamixelBus:
    bus = DynamixelBus(emu.port.path, reply_timeout_s=timeout_s, fast_read=True)
    return bus.open()


def test_a_damaged_fast_reply_is_lost_at_once_not_at_the_timeout(chain):
    """Every reply damaged: each read ends in ``ReplyLostError`` (a CRC error, or all its bytes
    in without a packet), never a plain timeout, though the timeout is 30 s."""
    emu, faults = chain
    bus = _bus(emu, 30.0)
    try:
        assert len(bus.read_present(IDS).position) == 6
        faults.set(corrupt_rate=0.2)
        for _ in range(5):
            with pytest.raises(ReplyLostError, match="status packet from servo 254 lost"):
                bus.read_present(IDS)
        assert bus.stats.lost_replies == 5 and bus.stats.timeouts == 0
        faults.set(corrupt_rate=0.0)
        assert len(bus.read_present(IDS).position) == 6
    finally:
        bus.close()


def test_a_later_servos_reply_ends_the_wait_for_a_silent_one(chain):
    """SYNC_READ with servo 3 silent: servo 4's reply shows servo 3's is lost (30 s timeout
    unused); a servo silent at the end of the list still costs the timeout."""
    emu, faults = chain
    bus = _bus(emu, 30.0)
    bus.fast_read = False
    try:
        faults.silence(3)
        with pytest.raises(ReplyLostError, match="servo 3 lost: servo 4 answered before it"):
            bus.read_present(IDS)
        faults.restore(3)
        faults.silence(6)
        bus.reply_timeout_s = 0.2
        with pytest.raises(ReplyTimeoutError, match="no status packet from servo 6") as e:
            bus.read_present(IDS)
        assert not isinstance(e.value, ReplyLostError)
    finally:
        bus.close()


def test_the_fallback_sync_read_keeps_every_intact_reply(chain):
    """``sync_read_each``: the replies that arrived, by id, however many were lost; a silent
    servo in the middle ends nothing early, the last servo's reply ends the wait."""
    emu, faults = chain
    bus = _bus(emu, 0.5)
    try:
        faults.silence(3)
        got = bus.sync_read_each(126, 10, IDS)
        assert sorted(got) == [1, 2, 4, 5, 6] and all(len(p.params) == 10 for p in got.values())
        faults.restore(3)
        faults.silence(6)
        assert sorted(bus.sync_read_each(126, 10, IDS)) == [1, 2, 3, 4, 5]
        faults.restore(6)
        faults.set(corrupt_rate=1.0)
        assert bus.sync_read_each(126, 10, IDS) == {}
    finally:
        bus.close()
