"""Recordings to damage: a short sim run rewritten deterministically (fixed chunk size, publish
time = log time), so that a byte offset or a seed names the same case on every run, and the
ways of damaging one (flipped bytes, re-sealed chunks, rewritten fields)."""

from __future__ import annotations

import json
import pathlib
import zlib
from typing import Any

import numpy as np
import zstandard
from mcap.writer import CompressionType, Writer

from twin.record import open_recorded, read_recording
from twin.record.mcap_scan import MAGIC, scan
from twin.record.schemas import CHANNELS, SCHEMAS
from twin.robot import JointCommand

Q0 = np.array([0.1, 0.3, 0.6, 0.0, 0.5, 0.0])
#: Chunk size of the rewritten files (bytes): a 120-step run spans several chunks.
CHUNK_SIZE = 16_384


def record_run(path: pathlib.Path, steps: int = 120) -> None:
    """A sim run with every kind of message: a reset, a push, commands, states, frames, events."""
    with open_recorded(str(path), "sim", seed=2, scene="table") as robot:
        robot.reset(q=Q0)
        for k in range(steps):
            robot.read()
            if k == steps // 2:
                robot.set_external_force(np.array([0.0, 0.0, -5.0]))
                robot.event("test", "push", newtons=5.0)
            q = Q0 + 0.1 * np.sin(0.05 * k)
            robot.write(JointCommand(q_des=q, kp=np.full(6, 60.0), kd=np.full(6, 2.0)))
            robot.step()
        robot.read()


def rewrite(
    path: pathlib.Path,
    metadata: dict[str, Any],
    messages: list[tuple[str, int, Any]],
) -> pathlib.Path:
    """Write ``messages`` (topic, t_us, body: a JSON-able value, or ``bytes`` as they are) to
    ``path`` deterministically, with ``metadata`` (values JSON-encoded; ``bytes`` as they are)."""
    with open(path, "wb") as f:
        writer = Writer(f, chunk_size=CHUNK_SIZE, compression=CompressionType.ZSTD)
        writer.start(profile="twin", library="twin")
        writer.add_metadata(
            "twin",
            {
                k: v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else json.dumps(v)
                for k, v in metadata.items()
            },
        )
        schemas: dict[str, int] = {}
        channels: dict[str, int] = {}
        for topic, t_us, body in messages:
            if topic not in channels:
                name = CHANNELS.get(topic, "other")
                if name not in schemas:
                    text = json.dumps(SCHEMAS.get(name, {})).encode()
                    schemas[name] = writer.register_schema(name, "jsonschema", text)
                channels[topic] = writer.register_channel(topic, "json", schemas[name])
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            writer.add_message(channels[topic], t_us * 1000, data, t_us * 1000)
        writer.finish()
    return path


def base_messages(recorded: pathlib.Path) -> tuple[dict, list[tuple[str, int, Any]]]:
    """The metadata and messages of a recording, to rewrite (``rewrite``)."""
    rec = read_recording(recorded)
    return rec.metadata, [(m.topic, m.t_us, m.data) for m in rec.messages]


def chunks(path: pathlib.Path) -> list[tuple[int, int, int]]:
    """Every chunk of a whole file: (offset of its record, offset and length of its compressed
    records)."""
    data = path.read_bytes()
    found, at = [], len(MAGIC)
    while at < len(data) - len(MAGIC):
        opcode, length = data[at], int.from_bytes(data[at + 1 : at + 9], "little")
        if opcode == 0x06:
            body = at + 9
            n = int.from_bytes(data[body + 28 : body + 32], "little")
            start = body + 32 + n + 8
            size = int.from_bytes(data[start - 8 : start], "little")
            found.append((at, start, size))
        if opcode == 0x02:
            break
        at += 9 + length
    return found


def reseal(data: bytes, chunk: tuple[int, int, int], records: bytes) -> bytes:
    """``data`` with ``chunk``'s records replaced by ``records`` (recompressed, its sizes and
    CRC rewritten): damage inside a chunk that its CRC does not catch."""
    at = chunk[0]
    compressed = zstandard.ZstdCompressor().compress(records)
    body = at + 9
    n = int.from_bytes(data[body + 28 : body + 32], "little")
    header = bytearray(data[body : body + 32 + n])
    header[16:24] = len(records).to_bytes(8, "little")
    header[24:28] = zlib.crc32(records).to_bytes(4, "little")
    content = bytes(header) + len(compressed).to_bytes(8, "little") + compressed
    record = bytes([0x06]) + len(content).to_bytes(8, "little") + content
    old_length = int.from_bytes(data[at + 1 : at + 9], "little")
    return data[:at] + record + data[at + 9 + old_length :]


def chunk_records(data: bytes, chunk: tuple[int, int, int]) -> bytes:
    """The decompressed records of ``chunk``."""
    _, start, size = chunk
    return zstandard.ZstdDecompressor().decompress(data[start : start + size])


def message_offsets(path: pathlib.Path) -> dict[int, int]:
    """Message index -> byte offset of its chunk."""
    return {m.index: m.offset for m in scan(path).messages}
