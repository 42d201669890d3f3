"""FAST_SYNC_READ (0x8A) and FAST_BULK_READ (0x9A) against the servo emulator, byte for byte.

Each answer is decoded twice: by our codec (stream parser + ``decode_fast_status``) and by the
independent decoder below, written from the protocol text alone (``docs/protocols/dynamixel.md``):
one status packet ``FF FF FD 00 | FE | LEN_L LEN_H | 55`` followed, per listed servo in list
order, by ``ERR | ID | data (N) | CRC_L CRC_H``, LEN = 1 + k (N + 4); a block's CRC covers the
packet from the first ``FF`` through its data, so the last one is the packet's; never stuffed.
Its CRC is the textbook bitwise CRC-16 (poly 0x8005, init 0, MSB first), not our table code.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import serial
from twin.hardware.clock import ManualClock
from twin.hardware.config import load_config
from twin.hardware.drivers.dynamixel_bus import DynamixelBus
from twin.hardware.emulator import IdealSource, ServoChainEmulator
from twin.hardware.emulator.sources import Drive, DriveKind
from twin.hardware.errors import DeviceStatusError, ProtocolError
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import ALERT_BIT, HardwareError, XTable

IDS = [1, 2, 3, 4, 5, 6]
Q0 = np.array([0.1, -0.2, 0.3, -0.4, 0.5, -0.6])
TORQUE = np.array([0.2, -0.4, 0.6, -0.8, 1.0, -1.2])  # N m, so velocity and current are non-zero


# --------------------------------------------------------------------------- independent decoder
def crc16_bitwise(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def decode_independently(raw: bytes, lengths: list[int]) -> list[tuple[int, int, bytes]]:
    """``[(id, err, data), ...]`` of one aggregate status packet; AssertionError if anything
    differs from the protocol text."""
    assert raw[:4] == b"\xff\xff\xfd\x00", raw[:4].hex()
    assert raw[4] == 0xFE, "the aggregate status comes from the broadcast id"
    length = raw[5] | raw[6] << 8
    assert length == 1 + sum(n + 4 for n in lengths)
    assert len(raw) == 7 + length
    assert raw[7] == 0x55
    out, pos = [], 8
    for n in lengths:
        err, pid, data = raw[pos], raw[pos + 1], raw[pos + 2 : pos + 2 + n]
        end = pos + 2 + n
        assert raw[end] | raw[end + 1] << 8 == crc16_bitwise(raw[:end]), f"block CRC of id {pid}"
        out.append((pid, err, bytes(data)))
        pos = end + 2
    assert pos == len(raw)
    return out


# --------------------------------------------------------------------------- set-up
@pytest.fixture()
def chain(tmp_path):
    clock = ManualClock()
    source = IdealSource(Q0)
    config = load_config()
    emu = ServoChainEmulator(
        source,
        config.joint_map(),
        clock,
        model_numbers=[j.model_number for j in config.joints],
        link_dir=tmp_path,
    )
    for j, tau in enumerate(TORQUE):
        source.set_drive(j, Drive(DriveKind.CURRENT, torque=float(tau)))
    clock.advance(20_000)
    port = serial.Serial(emu.port.path, 1_000_000, timeout=1.0)
    yield emu, port, config.joint_map(), source
    port.close()
    emu.close()


def ask(port, packet: dxl.InstructionPacket, lengths: list[int]) -> bytes:
    port.reset_input_buffer()
    port.write(dxl.encode_instruction(packet))
    n = 7 + 1 + sum(k + 4 for k in lengths)
    raw = port.read(n)
    assert len(raw) == n, f"got {len(raw)} of {n} bytes"
    return raw


def ours(raw: bytes, ids, lengths) -> list[tuple[int, int, bytes]]:
    (packet,) = dxl.DynamixelStreamParser().feed(raw)
    return [(b.id, b.error, b.params) for b in dxl.decode_fast_status(packet, ids, lengths)]


# --------------------------------------------------------------------------- tests
def test_fast_sync_read_of_position_velocity_and_current_for_six_servos(chain):
    _emu, port, jmap, source = chain
    lengths = [10] * 6
    raw = ask(port, dxl.fast_sync_read(126, 10, IDS), lengths)
    blocks = decode_independently(raw, lengths)
    assert [b[0] for b in blocks] == IDS and all(b[1] == 0 for b in blocks)
    current = np.array([int.from_bytes(b[2][0:2], "little", signed=True) for b in blocks])
    velocity = np.array([int.from_bytes(b[2][2:6], "little", signed=True) for b in blocks])
    position = np.array([int.from_bytes(b[2][6:10], "little", signed=True) for b in blocks])
    q, qd, tau = source.joint_state()  # the state the emulator read (the clock stands still)
    assert np.all(np.sign(qd) == np.sign(TORQUE)) and np.all(np.abs(q - Q0) > 1e-4)
    np.testing.assert_allclose(jmap.q_from_ticks(position), q, atol=np.pi / 4096)
    assert np.all(np.abs(jmap.qd_from_units(velocity) - qd) <= jmap.velocity_unit)
    assert np.all(np.abs(jmap.tau_from_current(current) - tau) <= jmap.torque_unit)
    assert np.all(velocity != 0) and np.all(current != 0)
    assert ours(raw, IDS, lengths) == blocks
    # the same registers as six status packets of a plain sync read, in the same state
    port.write(dxl.encode_instruction(dxl.sync_read(126, 10, IDS)))
    parser, replies = dxl.DynamixelStreamParser(), []
    while len(replies) < 6:
        chunk = port.read(max(1, port.in_waiting))
        assert chunk, "sync read timed out"
        replies += parser.feed(chunk)
    assert [(p.id, p.error, p.params) for p in replies] == blocks


def test_fast_bulk_read_blocks_of_different_addresses_and_lengths(chain):
    emu, port, *_ = chain
    items = [(4, XTable.PRESENT_POSITION.address, 4), (1, XTable.MODEL_NUMBER.address, 2),
             (6, XTable.ID.address, 1), (2, 126, 10)]  # fmt: skip
    lengths = [n for _, _, n in items]
    raw = ask(port, dxl.fast_bulk_read(items), lengths)
    blocks = decode_independently(raw, lengths)
    assert [b[0] for b in blocks] == [4, 1, 6, 2]
    assert int.from_bytes(blocks[1][2], "little") == emu.servos[1].model_number
    assert blocks[2][2] == bytes([6])
    assert blocks[3][2] == bytes(emu.servos[2].table[126:136])
    assert ours(raw, [i for i, _, _ in items], lengths) == blocks


def test_fast_read_is_not_stuffed_and_carries_each_servos_error(chain):
    emu, port, *_ = chain
    emu.servos[2].table[20:24] = b"\xff\xff\xfd\x00"  # Homing Offset bytes that look like a header
    emu.inject_hardware_error(3, HardwareError.OVERHEATING)
    lengths = [4] * 3
    raw = ask(port, dxl.fast_sync_read(20, 4, [1, 2, 3]), lengths)
    assert raw.count(b"\xff\xff\xfd\xfd") == 0
    blocks = decode_independently(raw, lengths)
    assert blocks[1][2] == b"\xff\xff\xfd\x00"
    assert [b[1] for b in blocks] == [0, 0, ALERT_BIT]
    assert ours(raw, [1, 2, 3], lengths) == blocks
    # a range no servo has: ACCESS in every block, the data still N zero bytes
    raw = ask(port, dxl.fast_sync_read(XTable.SIZE - 2, 4, [5, 6]), [4, 4])
    assert decode_independently(raw, [4, 4]) == [(5, 7, bytes(4)), (6, 7, bytes(4))]


def test_an_absent_servo_breaks_the_chain(chain):
    """Servos before it answer their blocks of the announced packet; nobody after it speaks, so
    the packet never completes and a client sees no status packet."""
    _emu, port, *_ = chain
    port.write(dxl.encode_instruction(dxl.fast_sync_read(132, 4, [1, 2, 9, 3])))
    want = 7 + 1 + 4 * 8
    raw = port.read(want)
    assert len(raw) == 8 + 2 * 8  # head and two blocks, then silence
    assert raw[5] | raw[6] << 8 == want - 7
    assert dxl.DynamixelStreamParser().feed(raw) == []
    for end in (14, 22):  # the blocks sent are valid
        assert raw[end] | raw[end + 1] << 8 == crc16_bitwise(raw[:end])


def test_servos_without_fast_reads_stay_silent(tmp_path):
    config = load_config()
    emu = ServoChainEmulator(IdealSource(), config.joint_map(), ManualClock(), link_dir=tmp_path,
                             fast_read=False)  # fmt: skip
    try:
        with serial.Serial(emu.port.path, 1_000_000, timeout=0.1) as port:
            port.write(dxl.encode_instruction(dxl.fast_sync_read(132, 4, IDS)))
            assert port.read(100) == b""
            port.write(dxl.encode_instruction(dxl.sync_read(132, 4, [1])))
            assert len(port.read(15)) == 15
    finally:
        emu.close()


# --------------------------------------------------------------------------- codec
def test_codec_round_trip_and_refusals():
    blocks = [dxl.StatusPacket(7, 0, b"\x01\x02"), dxl.StatusPacket(3, 0x80 | 4, b"\xff\xff\xfd")]
    raw = dxl.encode_fast_status(blocks)
    assert decode_independently(raw, [2, 3]) == [(7, 0, b"\x01\x02"), (3, 0x84, b"\xff\xff\xfd")]
    (packet,) = dxl.DynamixelStreamParser().feed(raw)
    assert dxl.decode_packet(raw) == packet and packet.id == 0xFE
    assert dxl.decode_fast_status(packet, [7, 3], [2, 3]) == blocks
    with pytest.raises(ProtocolError, match="block 1 is from id 3, expected 4"):
        dxl.decode_fast_status(packet, [7, 4], [2, 3])
    with pytest.raises(ProtocolError, match="11 bytes of blocks, expected 12"):
        dxl.decode_fast_status(packet, [7, 3], [2, 4])
    bad = bytearray(raw)
    bad[11] ^= 1  # the first block's CRC: the packet CRC no longer matches either; recompute it
    crc = crc16_bitwise(bytes(bad[:-2]))
    bad[-2:] = bytes((crc & 0xFF, crc >> 8))
    (packet,) = dxl.DynamixelStreamParser().feed(bytes(bad))
    with pytest.raises(ProtocolError, match=r"block 0 \(id 7\): CRC-16 mismatch"):
        dxl.decode_fast_status(packet, [7, 3], [2, 3])
    assert dxl.fast_sync_read(132, 4, [1, 2]).instruction == 0x8A
    assert dxl.fast_bulk_read([(1, 132, 4)]).params == bytes([1, 132, 0, 4, 0])
    assert dxl.fast_bulk_read([(1, 132, 4)]).instruction == 0x9A


# --------------------------------------------------------------------------- the serial driver
def _bus(tmp_path, fast_read_servos: bool, **kw):
    config = load_config()
    emu = ServoChainEmulator(
        IdealSource(Q0), config.joint_map(), ManualClock(), link_dir=tmp_path,
        fast_read=fast_read_servos,
    )  # fmt: skip
    return emu, DynamixelBus(emu.port.path, reply_timeout_s=0.5, **kw).open()


@pytest.mark.parametrize("servos_have_it", [True, False])
def test_driver_reads_present_values_with_fast_sync_read_where_supported(tmp_path, servos_have_it):
    emu, bus = _bus(tmp_path, servos_have_it)
    try:
        assert bus.uses_fast_read(IDS) is None
        first = bus.read_present(IDS)
        if not servos_have_it:  # one more silent probe before it is decided
            assert bus.uses_fast_read(IDS) is None and bus.stats.fast_read_refusals == 0
            first = bus.read_present(IDS)
        assert bus.uses_fast_read(IDS) is servos_have_it
        assert bus.stats.fast_read_refusals == (0 if servos_have_it else 1)
        n0, fast0 = bus.stats.transactions, bus.stats.fast_reads
        second = bus.read_present(IDS)
        assert bus.stats.transactions == n0 + 1  # one transaction a cycle, no probe again
        assert bus.stats.fast_reads == fast0 + servos_have_it
        assert bus.stats.timeouts == 0 and bus.stats.stray_packets == 0
        want = bus.sync_read(126, 10, IDS)  # the clock stands still: the same values
        for pv in (first, second):
            got = [
                int(c).to_bytes(2, "little", signed=True)
                + int(v).to_bytes(4, "little", signed=True)
                + int(p).to_bytes(4, "little", signed=True)
                for c, v, p in zip(pv.current, pv.velocity, pv.position)
            ]
            assert got == want and pv.ids == tuple(IDS) and not pv.alert.any()
        emu.inject_hardware_error(4)
        assert bus.read_present(IDS).alert.tolist() == [False, False, False, True, False, False]
        assert bus.alert_ids == {4}
    finally:
        bus.close()
        emu.close()


def test_driver_fast_read_can_be_switched_off_and_fast_bulk_read(tmp_path):
    emu, bus = _bus(tmp_path, True, fast_read=False)
    try:
        bus.read_present(IDS)
        assert bus.stats.fast_reads == 0 and bus.uses_fast_read(IDS) is False
        assert bus.fast_bulk_read([(2, 7, 1), (5, 0, 2)]) == [
            bytes([2]),
            (1020).to_bytes(2, "little"),
        ]
        assert bus.fast_sync_read(7, 1, [3, 1]) == [bytes([3]), bytes([1])]
        assert bus.stats.fast_reads == 2
        with pytest.raises(DeviceStatusError, match=r"servo 1 answered instruction 0x8A .* ACCESS"):
            bus.fast_sync_read(XTable.SIZE - 1, 2, [1])
    finally:
        bus.close()
        emu.close()


def test_paced_replies_take_their_wire_time_and_keep_their_bytes(chain):
    """With ``wire_baud`` the same bytes arrive, no sooner than 10 bits a byte allow (a lower
    bound only: a loaded machine may add to it, never take from it)."""
    emu, port, *_ = chain
    lengths = [10] * 6
    raw = ask(port, dxl.fast_sync_read(126, 10, IDS), lengths)
    emu.wire_baud = 9600
    t0 = time.perf_counter()
    assert ask(port, dxl.fast_sync_read(126, 10, IDS), lengths) == raw
    assert time.perf_counter() - t0 >= (len(raw) + 16) * 10 / 9600  # reply and instruction
