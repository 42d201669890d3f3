"""Codec properties of the serial protocols: CRC check values, round trips, stuffing, corruption
detection and stream resynchronisation (hypothesis, derandomised)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.protocols import bota, crc, dynamixel, witmotion
from twin.hardware.protocols.dynamixel_table import Instruction, StatusError, XTable

CHECK = b"123456789"

f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
frames = st.builds(
    bota.BotaFrame,
    status=st.integers(0, 0xFFFF),
    wrench=st.tuples(f32, f32, f32, f32, f32, f32),
    timestamp_us=st.integers(0, 2**32 - 1),
    temperature_c=f32,
)


def test_crc_check_values():
    assert crc.crc16_x25(CHECK) == 0x906E
    assert crc.crc16_x25_bitwise(CHECK) == 0x906E
    assert crc.crc16_dynamixel(CHECK) == 0xFEE8
    assert crc.crc16_dynamixel_bitwise(CHECK) == 0xFEE8


@given(st.binary(max_size=200))
def test_fast_crcs_equal_bitwise_definitions(data):
    assert crc.crc16_x25(data) == crc.crc16_x25_bitwise(data)
    assert crc.crc16_dynamixel(data) == crc.crc16_dynamixel_bitwise(data)


# --- DYNAMIXEL ---------------------------------------------------------------------------------------


def test_dynamixel_reference_ping_packet():
    raw = bytes.fromhex("FFFFFD0001030001194E")
    assert dynamixel.encode_instruction(dynamixel.ping(1)) == raw
    assert dynamixel.decode_packet(raw) == dynamixel.InstructionPacket(1, Instruction.PING, b"")


@given(st.binary(max_size=64))
def test_stuffing_round_trip_and_no_unstuffed_pattern(body):
    stuffed = dynamixel.stuff(body)
    assert dynamixel.unstuff(stuffed) == body
    assert len(stuffed) == len(body) + body.count(b"\xff\xff\xfd")
    # After stuffing, every FF FF FD is followed by FD: a receiver never sees a false header.
    i = stuffed.find(b"\xff\xff\xfd")
    while i >= 0:
        assert stuffed[i + 3 : i + 4] == b"\xfd"
        i = stuffed.find(b"\xff\xff\xfd", i + 4)


ids = st.integers(0, 252)
params = st.binary(max_size=40).map(lambda b: b + b"\xff\xff\xfd" if len(b) % 3 == 0 else b)


@given(ids, st.sampled_from([i for i in Instruction if i != Instruction.STATUS]), params)
def test_instruction_round_trip(pid, inst, data):
    pkt = dynamixel.InstructionPacket(pid, inst, data)
    raw = dynamixel.encode_instruction(pkt)
    assert raw[:4] == dynamixel.HEADER
    assert raw[5] | raw[6] << 8 == len(raw) - 7
    assert dynamixel.decode_packet(raw) == pkt


@given(ids, st.integers(0, 255), params)
def test_status_round_trip(pid, err, data):
    pkt = dynamixel.StatusPacket(pid, err, data)
    assert dynamixel.decode_packet(dynamixel.encode_status(pkt)) == pkt


def test_status_error_byte():
    pkt = dynamixel.StatusPacket(3, 0x80 | StatusError.ACCESS)
    assert pkt.alert and pkt.error_code is StatusError.ACCESS
    assert not dynamixel.StatusPacket(3, StatusError.CRC).alert


@given(ids, params, st.data())
def test_dynamixel_any_single_corrupted_byte_is_detected(pid, data, draw):
    raw = bytearray(dynamixel.encode_status(dynamixel.StatusPacket(pid, 0, data)))
    i = draw.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= draw.draw(st.integers(1, 255))
    with pytest.raises(ProtocolError):
        dynamixel.decode_packet(bytes(raw))


@given(
    st.integers(0, 0xFFFF), st.integers(1, 8), st.lists(ids, min_size=1, max_size=8, unique=True)
)
def test_sync_and_bulk_params_round_trip(address, length, id_list):
    pkt = dynamixel.sync_read(address, length, id_list)
    assert pkt.id == 0xFE and dynamixel.parse_sync_read(pkt.params) == (
        address,
        length,
        tuple(id_list),
    )
    data = {i: bytes((i + k) % 256 for k in range(length)) for i in id_list}
    assert dynamixel.parse_sync_write(dynamixel.sync_write(address, length, data).params) == (
        address,
        length,
        data,
    )
    items = [(i, address, length) for i in id_list]
    assert dynamixel.parse_bulk_read(dynamixel.bulk_read(items).params) == items
    witems = [(i, address, data[i]) for i in id_list]
    assert dynamixel.parse_bulk_write(dynamixel.bulk_write(witems).params) == witems


@given(st.sampled_from(XTable.registers()), st.data())
def test_register_values_round_trip(reg, draw):
    bits = 8 * reg.size
    lo, hi = (-(1 << bits - 1), (1 << bits - 1) - 1) if reg.signed else (0, (1 << bits) - 1)
    value = draw.draw(st.integers(lo, hi))
    assert dynamixel.decode_value(dynamixel.encode_register(reg, value), reg.signed) == value
    with pytest.raises(InvalidArgumentError):
        dynamixel.encode_register(reg, hi + 1)


def test_dynamixel_builders_refuse_bad_arguments():
    with pytest.raises(InvalidArgumentError):
        dynamixel.ping(253)
    with pytest.raises(InvalidArgumentError):
        dynamixel.read(0xFE, 0, 4)  # READ is never broadcast
    with pytest.raises(InvalidArgumentError):
        dynamixel.sync_read(132, 4, [1, 1])
    with pytest.raises(InvalidArgumentError):
        dynamixel.sync_write(116, 4, {1: b"\x00\x00"})
    with pytest.raises(InvalidArgumentError):
        dynamixel.read(1, 70000, 1)


@settings(max_examples=100)
@given(st.lists(st.tuples(ids, params), min_size=1, max_size=6), st.binary(max_size=30), st.data())
def test_dynamixel_parser_resyncs_after_garbage(packets, garbage, draw):
    pkts = [dynamixel.StatusPacket(i, 0, d) for i, d in packets]
    wire = garbage + b"".join(
        garbage[: k % 7] + dynamixel.encode_status(p) for k, p in enumerate(pkts)
    )
    parser = dynamixel.DynamixelStreamParser()
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(wire)), max_size=5)))
    got = []
    for a, b in zip([0, *cuts], [*cuts, len(wire)]):
        got += parser.feed(wire[a:b])
    # Garbage may hold a false header only if it also passes the CRC: compare the tail.
    assert got[-len(pkts) :] == pkts
    assert parser.stats.frames == len(got)


@settings(max_examples=100)
@given(
    st.lists(st.tuples(ids, st.integers(0, 3), params), min_size=1, max_size=12),
    st.lists(st.integers(0, 10_000), max_size=4),
)
def test_dynamixel_parser_fast_path_equals_the_reference_path(packets, corrupt_at):
    """Bursts go through the vectorised path when fed at once; byte by byte they cannot: same
    packets, same counters, for status bursts with stuffing, instructions and corrupted bytes."""
    wire = bytearray()
    for pid, kind, data in packets:
        if kind == 3:
            wire += dynamixel.encode_instruction(dynamixel.InstructionPacket(pid, 0x03, data))
            continue
        burst = [dynamixel.StatusPacket(pid, 0, data[:4])] * (20 if kind < 2 else 0)
        for p in [*burst, dynamixel.StatusPacket(pid, kind, data)]:
            wire += dynamixel.encode_status(p)
    for k in corrupt_at:
        wire[k % len(wire)] ^= 0x5A
    whole, single = dynamixel.DynamixelStreamParser(), dynamixel.DynamixelStreamParser()
    got = whole.feed(bytes(wire))
    ref = [p for b in bytes(wire) for p in single.feed(bytes((b,)))]
    assert [(type(p), tuple(p)) for p in got] == [(type(p), tuple(p)) for p in ref]
    assert whole.stats == single.stats


# --- Bota ---------------------------------------------------------------------------------------------


@settings(max_examples=100)
@given(frames)
def test_bota_frame_round_trip(frame):
    raw = bota.encode_frame(frame)
    assert len(raw) == bota.FRAME_LENGTH and raw[0] == 0xAA
    assert bota.decode_frame(raw) == frame


@settings(max_examples=100)
@given(frames, st.data())
def test_bota_any_single_corrupted_byte_is_detected(frame, draw):
    raw = bytearray(bota.encode_frame(frame))
    i = draw.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= draw.draw(st.integers(1, 255))
    with pytest.raises(ProtocolError):
        bota.decode_frame(bytes(raw))


def test_bota_crc_is_stored_little_endian_over_bytes_1_to_34():
    raw = bota.encode_frame(bota.BotaFrame(5, (1, 2, 3, 4, 5, 6), 1234, 25.0))
    assert raw[35] | raw[36] << 8 == crc.crc16_x25(raw[1:35])


def _frames(n, rng):
    return [
        bota.BotaFrame(0, tuple(float(np.float32(v)) for v in rng.normal(0, 10, 6)), 1000 * k, 30.0)
        for k in range(n)
    ]


@settings(max_examples=100)
@given(st.binary(max_size=80), st.integers(0, 2**31))
def test_bota_parser_resyncs_after_random_garbage(garbage, seed):
    rng = np.random.default_rng(seed)
    sent = _frames(8, rng)
    wire = bytearray(garbage + b"".join(bota.encode_frame(f) for f in sent))
    # A false header inside the payload: a 0xAA byte among the garbage must not lock the search.
    parser = bota.BotaStreamParser()
    got = []
    for chunk in np.array_split(np.frombuffer(bytes(wire), np.uint8), 5):
        got += parser.feed(chunk.tobytes())
    assert got == sent
    assert parser.stats.frames == 8 and parser.stats.crc_errors == 0


def test_bota_parser_counts_corrupt_and_lost_frames():
    rng = np.random.default_rng(7)
    sent = _frames(20, rng)
    wire = [bytearray(bota.encode_frame(f)) for f in sent]
    wire[3][10] ^= 0x40  # payload corruption: CRC error, sync kept
    wire[8][0] = 0x00  # header corruption: sync lost, one frame skipped
    del wire[12][20]  # a dropped byte: that frame is lost, the next one recovered
    parser = bota.BotaStreamParser()
    got = parser.feed(b"".join(bytes(w) for w in wire))
    want = [f for k, f in enumerate(sent) if k not in (3, 8, 12)]
    assert got == want
    s = parser.stats
    # Only frame 3 was in place when its check failed; 8 and 12 were skipped as bytes.
    assert (s.frames, s.crc_errors, s.sync_losses, s.dropped_frames) == (17, 2, 2, 1)
    assert s.garbage_bytes == 37 + 36


def test_bota_parser_counts_a_garbage_burst_as_garbage_not_as_frames():
    rng = np.random.default_rng(8)
    sent = _frames(6, rng)
    burst = rng.integers(0, 256, 20_000, dtype=np.uint8).tobytes()  # 540 frames' worth
    wire = b"".join(bota.encode_frame(f) for f in sent[:3]) + burst
    wire += b"".join(bota.encode_frame(f) for f in sent[3:])
    parser = bota.BotaStreamParser()
    got = []
    for chunk in np.array_split(np.frombuffer(wire, np.uint8), 7):
        got += parser.feed(chunk.tobytes())
    assert got == sent
    s = parser.stats
    assert s.dropped_frames <= 1  # at most the frame position the burst started at, not 540
    assert s.garbage_bytes == len(burst) - 37 * s.dropped_frames


def test_bota_commands_and_acks():
    assert bota.cmd_comm_setup(0, 1, 0, 460800) == "c,0,1,0,4"
    assert bota.cmd_filter(512) == "f,512,0,0,1"
    assert bota.cmd_offsets([1, -2, 0.5, 0, 0, 0]) == "b, 1.000,-2.000, 0.500, 0.000, 0.000, 0.000"
    assert bota.cmd_calibration_row(2, [1, 0, 0, 0, 0, 0]).startswith("m2, 1.000000, 0.000000")
    assert bota.ack("C") == "r,0,C,0"
    assert bota.find_ack(b"\xaa\x01junk r,0,C,0\r\n", "C") == (0, 14)
    assert bota.find_ack(b"r,0,f,3", "f")[0] == 3
    assert bota.find_ack(b"r,0,f,0", "c") is None
    md = bota.parse_metadata(b"xx\r\np,0,4242,1,2,Rokubi\r\nr,0,p,0\r\n")
    assert md.serial_number == "SN0004242" and md.product_name == "Rokubi"
    for bad in (
        lambda: bota.cmd_filter(32),
        lambda: bota.cmd_comm_setup(baud=12345),
        lambda: bota.cmd_offsets([1, 2, 3]),
        lambda: bota.cmd_calibration_row(6, [0] * 6),
    ):
        with pytest.raises(InvalidArgumentError):
            bad()
    assert bota.parse_command("m3,1,2,3,4,5,6") == bota.ParsedCommand(
        "m", 3, ("1", "2", "3", "4", "5", "6")
    )
    assert bota.parse_command("p?").args == ("?",)


def test_bota_frame_period():
    assert bota.frame_period_s(512) == pytest.approx(0.01)
    assert 1.0 / bota.frame_period_s(64) == pytest.approx(800.0)
    assert pytest.approx(1 / 1245.4, rel=1e-3) == bota.FRAME_LENGTH * 10 / 460800


# --- WitMotion ----------------------------------------------------------------------------------------

int16 = st.integers(-32768, 32767)


@given(st.sampled_from(list(witmotion.PacketType)), st.tuples(int16, int16, int16, int16))
def test_witmotion_packet_round_trip(kind, values):
    raw = witmotion.encode_packet(kind, values)
    assert len(raw) == 11 and raw[10] == sum(raw[:10]) & 0xFF
    assert witmotion.decode_packet(raw) == witmotion.Packet(kind, values)


@given(
    st.sampled_from(list(witmotion.PacketType)), st.tuples(int16, int16, int16, int16), st.data()
)
def test_witmotion_any_single_corrupted_byte_is_detected(kind, values, draw):
    raw = bytearray(witmotion.encode_packet(kind, values))
    i = draw.draw(st.integers(0, 10))
    raw[i] ^= draw.draw(st.integers(1, 255))
    with pytest.raises(ProtocolError):
        witmotion.decode_packet(bytes(raw))


@given(
    st.lists(st.floats(-150, 150), min_size=3, max_size=3),
    st.lists(st.floats(-30, 30), min_size=3, max_size=3),
)
def test_witmotion_physical_values_within_quantisation(acc, gyro):
    a, temp = witmotion.accel_of(witmotion.decode_packet(witmotion.encode_accel(acc, 31.25)))
    assert np.all(np.abs(a - acc) <= witmotion.ACCEL_SCALE / 2 + 1e-12) and temp == pytest.approx(
        31.25
    )
    g = witmotion.gyro_of(witmotion.decode_packet(witmotion.encode_gyro(gyro)))
    assert np.all(np.abs(g - gyro) <= witmotion.GYRO_SCALE / 2 + 1e-12)
    with pytest.raises(InvalidArgumentError):
        witmotion.encode_accel([200.0, 0, 0])


@settings(max_examples=100)
@given(
    st.binary(max_size=60), st.lists(st.tuples(int16, int16, int16, int16), min_size=1, max_size=10)
)
def test_witmotion_parser_resyncs(garbage, values):
    sent = [witmotion.Packet(0x51, v) for v in values]
    parser = witmotion.WitmotionStreamParser()
    got = parser.feed(garbage + b"".join(witmotion.encode_packet(p.kind, p.values) for p in sent))
    # The 8-bit sum lets a false header pass 1 time in 256: the true packets end the list.
    assert got[-len(sent) :] == sent


def test_witmotion_commands():
    assert witmotion.cmd_unlock() == bytes.fromhex("FFAA6988B5")
    assert witmotion.cmd_save() == bytes.fromhex("FFAA000000")
    assert witmotion.cmd_write_register(
        witmotion.Reg.RRATE, witmotion.rate_code(200)
    ) == bytes.fromhex("FFAA030B00")
    assert witmotion.rsw_for([0x51, 0x52, 0x59]) == 0x0206
    buf = bytearray(b"\x00" + witmotion.cmd_unlock() + witmotion.cmd_read_register(0x02) + b"\xff")
    assert witmotion.parse_commands(buf) == [(0x69, 0xB588), (0x27, 0x02)]
    assert buf == bytearray(b"\xff")
    with pytest.raises(InvalidArgumentError):
        witmotion.rate_code(300)


def test_dynamixel_modules_import_one_way():
    """The stream parser and the codec both build on ``dynamixel_packet`` (types, constants,
    framing); neither the parser nor the packet module imports the codec (no import circle)."""
    import ast
    import inspect

    from twin.hardware.protocols import dynamixel_packet, dynamixel_stream

    def imported(module) -> set[str]:
        tree = ast.parse(inspect.getsource(module))
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}

    codec = "twin.hardware.protocols.dynamixel"
    assert codec not in imported(dynamixel_stream) | imported(dynamixel_packet)
    assert "twin.hardware.protocols.dynamixel_stream" not in imported(dynamixel_packet)
    assert "twin.hardware.protocols.dynamixel_packet" in imported(dynamixel_stream)
    assert dynamixel.StatusPacket is dynamixel_packet.StatusPacket


@settings(max_examples=100)
@given(
    st.lists(
        st.tuples(st.integers(0, 252), st.integers(0, 255), st.binary(min_size=0, max_size=12)),
        min_size=1,
        max_size=8,
        unique_by=lambda b: b[0],
    )
)
def test_fast_status_round_trip(blocks):
    """Any blocks (data with header-like bytes included) encode to one packet the stream parser
    accepts whole, and decode back; a split feed gives the same."""
    packets = [dynamixel.StatusPacket(i, e, d) for i, e, d in blocks]
    raw = dynamixel.encode_fast_status(packets)
    ids, lengths = [p.id for p in packets], [len(p.params) for p in packets]
    parser = dynamixel.DynamixelStreamParser()
    got = parser.feed(raw[:5]) + parser.feed(raw[5:])
    assert len(got) == 1 and parser.stats.crc_errors == 0
    assert dynamixel.decode_fast_status(got[0], ids, lengths) == packets
