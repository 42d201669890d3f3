"""Fuzz suite of the F/T and IMU readers (issue 31): the Bota and WitMotion decoders, stream
parsers and the drivers' sample checks (``bota_checks.FrameScreen``, ``witmotion_cycle.ImuCycles``,
the objects the reader threads feed) on random bytes, on mutated frames and on re-sealed ones
(damaged, then given a valid CRC or check sum, as one damaged frame in 65,536 or 256 passes).

Two properties, for every input: nothing raises except ``ProtocolError`` from a decoder, and no
impossible reading is published (checked here by rules written out independently of the code).

Seeded and replayable (the project's hypothesis profile is derandomised, ``tests/conftest.py``).
Each property runs ``FUZZ_EXAMPLES`` cases (1,000 in CI: three properties, 3,000 cases and more
frames per reader; ``TWIN_FUZZ_LONG=1``: 100,000 each).
"""

from __future__ import annotations

import itertools
import math
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twin.hardware.drivers.bota_checks import FrameScreen
from twin.hardware.drivers.witmotion_cycle import ImuCycles
from twin.hardware.errors import ProtocolError
from twin.hardware.protocols import bota
from twin.hardware.protocols import witmotion as wit

from twin.robot import FtStatus
from twin.sensors.device import MEASURING_RANGE

FUZZ_LONG = os.environ.get("TWIN_FUZZ_LONG") == "1"
FUZZ_EXAMPLES = 100_000 if FUZZ_LONG else 1_000
fuzz = settings(max_examples=FUZZ_EXAMPLES)

# ---------------------------------------------------------------- what may be published
BOUND = 3.0 * np.asarray(MEASURING_RANGE)  # N, N m: 3x the measuring range
TEMPERATURE_C = (-60.0, 150.0)
PERIOD_US = 2500  # 400 Hz


def assert_possible_wrench(frame: bota.BotaFrame, raw: bota.RawOutput | None) -> None:
    """A published F/T frame is a measurement: defined status bits only, a temperature a
    sensor can have, and a finite wrench within 3x the range; a RAW frame only from a sensor
    configured for raw output, its gauge values finite and calibrated into the same bound."""
    assert frame.status & ~0x000F == 0, f"reserved status bits 0x{frame.status:04X}"
    assert TEMPERATURE_C[0] <= frame.temperature_c <= TEMPERATURE_C[1], frame
    values = np.asarray(frame.wrench, dtype=float)
    assert np.all(np.isfinite(values)), frame
    if frame.status & FtStatus.RAW:
        assert raw is not None, f"a RAW frame published without raw output: {frame}"
        values = raw.calibration @ values - raw.offsets  # what the F/T service publishes
    assert np.all(np.abs(values) <= BOUND), f"{values} beyond {BOUND}"


G16 = 16.0 * wit.STANDARD_GRAVITY
RATE_MAX = math.radians(2000.0)


def assert_possible_imu(sample, temperature_c: float) -> None:
    """A published IMU sample: finite force within 16 g, rate within 2000 deg/s, a unit canonical
    quaternion or none, from a cycle whose temperature a sensor can have."""
    assert np.all(np.abs(sample.specific_force) <= G16 + 1e-9), sample
    assert np.all(np.abs(sample.angular_rate) <= RATE_MAX + 1e-9), sample
    assert TEMPERATURE_C[0] <= temperature_c <= TEMPERATURE_C[1], temperature_c
    q = sample.orientation
    if q is not None:
        assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-9 and np.all(np.isfinite(q)), q
        assert q[0] >= 0.0, q


# ---------------------------------------------------------------- Bota strategies
_RAW_OUTPUTS = (
    None,
    bota.RawOutput(np.eye(6), np.zeros(6)),
    bota.RawOutput(100.0 * np.eye(6), np.array([0.5, -0.5, 2.0, 0.01, 0.0, -0.02])),
    bota.RawOutput(np.random.default_rng(31).normal(size=(6, 6)), np.zeros(6)),
    bota.RawOutput(np.zeros((6, 6)), np.zeros(6)),  # degenerate: every finite gauge is 0 N
)
_SPECIAL_FLOATS = (1e30, -1e30, 2e36, 3.4e38, float("nan"), float("inf"), -float("inf"), 1e-45)
_STATUS = (0, 1, 2, 4, 8, 9, 12, 15, 0x10, 0x8008, 0xFFFF)

_FLOAT_OFFSETS = (3, 7, 11, 15, 19, 23, 31)  # the six wrench values, then the temperature
_BOTA_MUTATIONS = ("flip", "byte", "float", "status", "stamp", "delete", "insert")
_RANGE = np.asarray(MEASURING_RANGE)
seeds = st.integers(0, 2**63 - 1)  # a case: one seed, expanded with numpy (cheap, replayable)


def _bota_mutations(rng: np.random.Generator) -> list[tuple]:
    """Up to three mutations of a 37-byte frame (none for about a third of the frames)."""
    out = []
    for _ in range(int(rng.choice(4, p=[0.35, 0.35, 0.2, 0.1]))):
        kind = str(rng.choice(_BOTA_MUTATIONS))
        if kind == "flip":
            out.append((kind, int(rng.integers(37 * 8))))
        elif kind in ("byte", "insert"):
            out.append((kind, int(rng.integers(37)), int(rng.integers(256))))
        elif kind == "float":
            special = rng.random() < 0.5
            value = rng.choice(_SPECIAL_FLOATS) if special else rng.bytes(4)
            value = float(value) if special else struct.unpack("<f", value)[0]
            out.append((kind, int(rng.choice(_FLOAT_OFFSETS)), value))
        elif kind == "status":
            special = rng.random() < 0.5
            out.append((kind, int(rng.choice(_STATUS) if special else rng.integers(1 << 16))))
        elif kind == "stamp":
            out.append((kind, int(rng.integers(1 << 32))))
        else:
            out.append((kind, int(rng.integers(37))))
    return out


def _plausible_frame(rng: np.random.Generator, timestamp_us: int) -> bota.BotaFrame:
    wrench = np.float32(rng.uniform(-1.0, 1.0, 6) * _RANGE).tolist()
    status = int(rng.choice((0, 1, 2, 8, 9, 10)))
    return bota.BotaFrame(
        status, tuple(wrench), timestamp_us, float(np.float32(rng.uniform(-20, 80)))
    )


def _mutate_bota(raw: bytes, mutations, reseal: bool) -> bytes:
    buf = bytearray(raw)
    for m in mutations:
        kind, *args = m
        n = len(buf)
        if kind == "flip" and args[0] // 8 < n:
            buf[args[0] // 8] ^= 1 << (args[0] % 8)
        elif kind == "byte" and args[0] < n:
            buf[args[0]] = args[1]
        elif kind == "float" and n == bota.FRAME_LENGTH:
            struct.pack_into("<f", buf, args[0], args[1])
        elif kind == "status" and n == bota.FRAME_LENGTH:
            struct.pack_into("<H", buf, 1, args[0])
        elif kind == "stamp" and n == bota.FRAME_LENGTH:
            struct.pack_into("<I", buf, 27, args[0])
        elif kind == "delete" and n:
            del buf[args[0] % n]
        elif kind == "insert":
            buf.insert(min(args[0], n), args[1])
    if reseal and len(buf) == bota.FRAME_LENGTH:
        return bota.seal(bytes(buf[1:35]))
    return bytes(buf)


def _screen_stream(chunks: list[bytes], raw: bota.RawOutput | None) -> list[bota.BotaFrame]:
    """Feed the chunks (one per host period) through the parser and the driver's checks; the
    frames published, each checked for possibility."""
    parser, screen = bota.BotaStreamParser(), FrameScreen(PERIOD_US)
    screen.raw = raw
    published: list[tuple[bota.BotaFrame, int]] = []
    for k, chunk in enumerate(chunks):
        screen.screen(
            parser.feed(chunk), (k + 1) * PERIOD_US, lambda f, t: published.append((f, t))
        )
    for frame, _ in published:
        assert_possible_wrench(frame, raw)
    stamps = [t for _, t in published]
    assert all(b > a for a, b in itertools.pairwise(stamps))  # the unwrapped device clock advances
    report = screen.checks.report()
    assert report.accepted == len(published)
    return [f for f, _ in published]


# ---------------------------------------------------------------- Bota
@fuzz
@given(st.binary(max_size=120))
def test_bota_decoders_on_random_bytes(data):
    """Random bytes: ``decode_frame`` returns a frame or raises ``ProtocolError``; the parser,
    the reply search and the metadata reader never raise; nothing random is published."""
    try:
        frame = bota.decode_frame(data)
    except ProtocolError:
        frame = None
    assert frame is None or bota.frame_is_valid(data)
    bota.find_ack(data, "C")
    bota.parse_metadata(data)
    for raw in _RAW_OUTPUTS[:2]:
        _screen_stream([data[: len(data) // 2], data[len(data) // 2 :]], raw)


@fuzz
@given(st.binary(min_size=34, max_size=34), st.booleans(), st.sampled_from(_RAW_OUTPUTS))
def test_bota_resealed_random_bodies(body, defined_status_only, raw):
    """A random body under a valid CRC (the status masked to the defined bits or not): decoded,
    and published only when it is a possible measurement."""
    if defined_status_only:
        body = bytes((body[0] & 0x0F, 0)) + body[2:]
    frame = bota.decode_frame(bota.seal(body))
    if all(map(math.isfinite, (*frame.wrench, frame.temperature_c))):
        assert bota.encode_frame(frame) == bota.seal(body)  # the decoder loses nothing
    # twice, on the device clock: the first frame is held until the next confirms its clock
    again = bota.seal(
        body[:26] + struct.pack("<I", (frame.timestamp_us + PERIOD_US) % (1 << 32)) + body[30:]
    )
    _screen_stream([bota.seal(body), again], raw)


@fuzz
@given(seeds)
def test_bota_mutated_and_resealed_streams(seed):
    """A stream of up to six plausible frames on the device clock, about two thirds of them
    mutated (bits, bytes, special and random floats, status words, time stamps, lost and extra
    bytes), half of those re-sealed, through any of the raw outputs: no exception, and every
    frame published is possible; a stream left whole is published whole (the checks refuse no
    good frame)."""
    rng = np.random.default_rng(seed)
    raw = _RAW_OUTPUTS[int(rng.integers(len(_RAW_OUTPUTS)))]
    start_us = int(rng.integers(1 << 32))
    chunks, frames, whole = [], [], True
    for k in range(int(rng.integers(1, 7))):
        frame = _plausible_frame(rng, (start_us + k * PERIOD_US) % bota.TIMESTAMP_MODULUS)
        mutations = _bota_mutations(rng)
        whole = whole and not mutations
        chunks.append(_mutate_bota(bota.encode_frame(frame), mutations, rng.random() < 0.5))
        frames.append(frame)
    published = _screen_stream(chunks, raw)
    in_range = raw is _RAW_OUTPUTS[1] or all(not f.status & FtStatus.RAW for f in frames)
    if whole and len(frames) >= 2 and in_range:  # a first frame waits for the next
        assert published == frames


def test_a_pristine_stream_is_published_whole_and_raw_frames_only_when_configured():
    frames = [
        bota.encode_frame(
            bota.BotaFrame(int(FtStatus.RAW), (1.0, 2.0, 9.8, 0.1, 0.0, 0.0), k * PERIOD_US, 30.0)
        )
        for k in range(50)
    ]
    assert len(_screen_stream(frames, _RAW_OUTPUTS[1])) == 50
    assert _screen_stream(frames, None) == []


@settings(max_examples=FUZZ_EXAMPLES // 4)
@given(st.lists(st.text(alphabet="cmbfrw0123456789,.-+eEnaif \r\n", max_size=40), max_size=10))
def test_the_raw_output_dump_reader_raises_only_protocol_errors(lines):
    try:
        raw = bota.raw_output_of_dump("\r\n".join(lines))
    except ProtocolError:
        return
    assert raw is None or (
        np.all(np.isfinite(raw.calibration)) and np.all(np.isfinite(raw.offsets))
    )


# ---------------------------------------------------------------- WitMotion strategies
T = wit.PacketType
CONTENTS = (
    (T.ACCEL, T.GYRO, T.QUATERNION),
    (T.TIME, T.ACCEL, T.GYRO, T.QUATERNION),
    (T.ACCEL, T.GYRO, T.ANGLE),
)
_WIT_MUTATIONS = ("flip", "byte", "value", "delete", "insert")


def _plausible_cycle(rng: np.random.Generator, content, k: int) -> bytes:
    """One output cycle of ``content`` at cycle index ``k``: a unit quaternion, a temperature in
    range, any force and rate, the device clock at 200 Hz from day 1, 00:00:00.000."""
    out = b""
    for kind in content:
        if kind == T.QUATERNION:
            q = rng.normal(size=4)
            out += wit.encode_quaternion(q / np.linalg.norm(q))
        elif kind == T.ACCEL:
            values = [*rng.integers(-32768, 32768, 3).tolist(), int(rng.integers(-2000, 8000))]
            out += wit.encode_packet(kind, values)
        elif kind == T.TIME:
            sec, ms = divmod(k * 5, 1000)
            out += wit.encode_packet(kind, [1 << 8 | 25, 1, sec << 8, ms])
        else:
            out += wit.encode_packet(kind, rng.integers(-32768, 32768, 4).tolist())
    return out


def _wit_mutations(rng: np.random.Generator, length: int) -> list[tuple]:
    out = []
    for _ in range(int(rng.choice(4, p=[0.35, 0.35, 0.2, 0.1]))):
        kind = str(rng.choice(_WIT_MUTATIONS))
        if kind == "flip":
            out.append((kind, int(rng.integers(length * 8))))
        elif kind in ("byte", "insert"):
            out.append((kind, int(rng.integers(length)), int(rng.integers(256))))
        elif kind == "value":
            value = int(
                rng.choice((-32768, 32767, 0, 32768 // 2))
                if rng.random() < 0.3
                else rng.integers(-32768, 32768)
            )
            out.append((kind, int(rng.integers(length // 11)), int(rng.integers(4)), value))
        else:
            out.append((kind, int(rng.integers(length))))
    return out


def _mutate_cycle(raw: bytes, mutations, reseal: bool) -> bytes:
    buf = bytearray(raw)
    for kind, *args in mutations:
        n = len(buf)
        if kind == "flip" and args[0] // 8 < n:
            buf[args[0] // 8] ^= 1 << (args[0] % 8)
        elif kind == "byte" and args[0] < n:
            buf[args[0]] = args[1]
        elif kind == "value" and 11 * args[0] + 10 <= n:
            struct.pack_into("<h", buf, 11 * args[0] + 2 + 2 * args[1], args[2])
        elif kind == "delete" and n:
            del buf[args[0] % n]
        elif kind == "insert":
            buf.insert(min(args[0], n), args[1])
    if reseal and len(buf) % wit.PACKET_LENGTH == 0:
        for at in range(0, len(buf), wit.PACKET_LENGTH):
            buf[at + 10] = sum(buf[at : at + 10]) & 0xFF
    return bytes(buf)


def _imu_stream(chunks: list[bytes], content) -> list:
    """Feed the chunks (one per output period) through the parser and the driver's cycle
    checks; every published sample checked for possibility against its cycle's temperature."""
    parser, cycles = wit.WitmotionStreamParser(), ImuCycles(content, 200.0)
    temperatures: dict[tuple, list[float]] = {}  # accel values -> temperatures of its cycles
    published = []
    for k, chunk in enumerate(chunks):
        for p in parser.feed(chunk):
            for decode in (wit.accel_of, wit.gyro_of, wit.angle_of, wit.quaternion_of, wit.time_of):
                decode(p)  # any packet: values, never an exception
            if p.kind == T.ACCEL:
                force, temp = wit.accel_of(p)
                temperatures.setdefault(tuple(force), []).append(temp)
            if p.kind in cycles.content:
                cycles.feed(p, (k + 1) * 5000, published.append)
    for s in published:
        temps = temperatures[tuple(s.specific_force)]
        assert any(TEMPERATURE_C[0] <= t <= TEMPERATURE_C[1] for t in temps), temps
        assert_possible_imu(s, next(t for t in temps if TEMPERATURE_C[0] <= t <= TEMPERATURE_C[1]))
    assert cycles.checks.report().accepted == len(published)
    return published


# ---------------------------------------------------------------- WitMotion
@fuzz
@given(st.binary(max_size=80), st.sampled_from(CONTENTS))
def test_witmotion_decoders_on_random_bytes(data, content):
    try:
        packet = wit.decode_packet(data)
    except ProtocolError:
        packet = None
    assert packet is None or wit.packet_is_valid(data)
    wit.parse_commands(bytearray(data))
    _imu_stream([data[: len(data) // 2], data[len(data) // 2 :]], content)


@fuzz
@given(seeds)
def test_witmotion_resealed_random_packets(seed):
    """Up to twelve packets of random types (the output types and the read reply) and random
    values with valid check sums, in any order, through any content: complete cycles of any
    values; published only when possible."""
    rng = np.random.default_rng(seed)
    kinds = [*T]
    data = b"".join(
        wit.encode_packet(int(rng.choice(kinds)), rng.integers(-32768, 32768, 4).tolist())
        for _ in range(int(rng.integers(13)))
    )
    _imu_stream([data], CONTENTS[int(rng.integers(len(CONTENTS)))])


@fuzz
@given(seeds)
def test_witmotion_mutated_and_resealed_cycles(seed):
    """Up to five plausible cycles on the device clock, about two thirds of them mutated (bits,
    bytes, int16 values, lost and extra bytes), half of those re-sealed: no exception, every
    sample published possible, and a stream left whole is published whole."""
    rng = np.random.default_rng(seed)
    content = CONTENTS[int(rng.integers(len(CONTENTS)))]
    n = int(rng.integers(1, 6))
    chunks, whole = [], True
    for k in range(n):
        cycle = _plausible_cycle(rng, content, k)
        mutations = _wit_mutations(rng, len(cycle))
        whole = whole and not mutations
        chunks.append(_mutate_cycle(cycle, mutations, rng.random() < 0.5))
    published = _imu_stream(chunks, content)
    if whole:  # with the time packet a first cycle waits for the next to confirm its clock
        assert len(published) == (0 if n == 1 and T.TIME in content else n)


@pytest.mark.parametrize("content", CONTENTS)
def test_a_pristine_imu_stream_is_published_whole(content):
    rng = np.random.default_rng(7)
    chunks = []
    for k in range(20):
        q = rng.normal(size=4)
        packets = {
            T.ACCEL: wit.encode_accel(rng.normal(size=3), 30.0),
            T.GYRO: wit.encode_gyro(rng.normal(size=3)),
            T.QUATERNION: wit.encode_quaternion(q / np.linalg.norm(q)),
            T.ANGLE: wit.encode_angle([0.1, -0.2, 0.3]),
            T.TIME: wit.encode_packet(T.TIME, [1 << 8 | 25, 1, (k * 5 // 1000) << 8, k * 5 % 1000]),
        }
        chunks.append(b"".join(packets[kind] for kind in content))
    assert len(_imu_stream(chunks, content)) == 20
