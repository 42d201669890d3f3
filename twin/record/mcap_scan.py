"""Scanning an MCAP file record by record, trusting nothing: every record's length, every field
and every chunk is checked against the file that holds it (``docs/formats/recording.md``).

``scan(path)`` walks the records in file order (MCAP framing: opcode u8, length u64 LE, body)
and returns the raw messages, schemas, channels and metadata, each with where it came from (the
byte offset of its record or chunk, and its message index). It never trusts a length beyond the
bytes the file has, decompresses a chunk only up to the size its header declares (bounded by
``MAX_CHUNK_BYTES``) and checks its CRC, so a flipped byte or a crafted counter is a
``RecordingError`` naming the byte offset and what was expected, never an exception of the
``mcap`` or ``zstandard`` libraries, a huge allocation or a long loop.

A file cut short (it does not end with the MCAP magic and a record runs past its end) is not an
error: the scan keeps what came before the cut record and describes the cut (``Cut``).
"""

from __future__ import annotations

import os
import pathlib
import zlib
from dataclasses import dataclass, field

import zstandard

from twin.record.writer import RecordingError

MAGIC = b"\x89MCAP0\r\n"
#: The largest decompressed chunk read (bytes): the writer's chunks are about 1 MiB.
MAX_CHUNK_BYTES = 256 * 1024 * 1024
#: Pieces in which a chunk is decompressed (bytes): memory grows only with real output.
_PIECE = 1024 * 1024

# Record opcodes (MCAP specification, "Records").
HEADER, FOOTER, SCHEMA, CHANNEL, MESSAGE, CHUNK = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
MESSAGE_INDEX, CHUNK_INDEX, ATTACHMENT, ATTACHMENT_INDEX = 0x07, 0x08, 0x09, 0x0A
STATISTICS, METADATA, METADATA_INDEX, SUMMARY_OFFSET, DATA_END = 0x0B, 0x0C, 0x0D, 0x0E, 0x0F
_KNOWN = frozenset(range(HEADER, DATA_END + 1))
_IN_CHUNK = frozenset((SCHEMA, CHANNEL, MESSAGE))


class _Damage(Exception):
    """A field that does not parse: what was expected (the caller adds where)."""


@dataclass(frozen=True)
class RawMessage:
    """One message record as found: channel id, log time (ns), publish time (ns), body bytes,
    and where: the byte offset of its chunk (or of the record itself, outside chunks) and its
    index among the file's messages."""

    channel_id: int
    log_time_ns: int
    publish_time_ns: int
    data: bytes
    offset: int
    index: int


@dataclass(frozen=True)
class Cut:
    """Where a file cut short ends: the byte offset of the record the cut goes through and the
    file's size. ``lost`` is how many messages the cut took as far as the file tells: 0 when it
    came after the data (in the summary, ``exact``); for a cut through a chunk, that chunk's
    messages estimated from its declared size at the file's mean bytes per message (at least
    one, and at least those whose records begin in what is left; not ``exact``, and the file may
    have gone on after it); for a cut between chunks, 0 known (not ``exact``)."""

    offset: int
    size: int
    lost: int = 0
    exact: bool = False


@dataclass
class Scan:
    """What ``scan`` found, in file order."""

    path: pathlib.Path
    schemas: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (name, encoding)
    channels: dict[int, tuple[str, int, str]] = field(default_factory=dict)  # id -> topic, ...
    messages: list[RawMessage] = field(default_factory=list)
    metadata: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    #: The message count of the file's Statistics record (None without a summary).
    declared_messages: int | None = None
    cut: Cut | None = None


class _Fields:
    """A cursor over one record's body: little-endian fields, each checked against the bytes
    left (a length beyond them is damage, never a short read)."""

    def __init__(self, body: memoryview) -> None:
        self.body, self.at = body, 0

    def take(self, n: int, what: str) -> memoryview:
        if n > len(self.body) - self.at:
            raise _Damage(f"{what} of {n} bytes, but the record has {len(self.body) - self.at}")
        out = self.body[self.at : self.at + n]
        self.at += n
        return out

    def int(self, size: int, what: str) -> int:
        return int.from_bytes(self.take(size, what), "little")

    def text(self, what: str) -> str:
        raw = self.take(self.int(4, f"the length of {what}"), what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise _Damage(f"{what} as UTF-8 text ({e.reason} at byte {e.start})") from None

    def blob(self, size: int, what: str) -> memoryview:
        return self.take(self.int(size, f"the length of {what}"), what)

    def mapping(self, what: str) -> dict[str, str]:
        inner = _Fields(self.blob(4, what))
        out = {}
        while inner.at < len(inner.body):
            key = inner.text(f"a key of {what}")
            out[key] = inner.text(f"the value of {what}[{key!r}]")
        return out


def scan(path: str | os.PathLike) -> Scan:
    """Every record of the MCAP file at ``path`` (module doc). Raises ``RecordingError`` naming
    the file, the byte offset and what was expected when the file is not MCAP or is damaged."""
    path = pathlib.Path(path)
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise RecordingError(
            f"{str(path)!r} is not an MCAP file: expected it to begin with the MCAP magic"
        )
    return _Scanner(path, memoryview(data), len(data)).run()


class _Scanner:
    def __init__(self, path: pathlib.Path, view: memoryview, size: int) -> None:
        self.view, self.size = view, size
        self.out = Scan(path)
        self.complete = bytes(view[size - len(MAGIC) :]) == MAGIC and size >= 2 * len(MAGIC)
        self.data_ended = False  # the DataEnd record was read: every message is before it
        self.chunk_bytes = 0  # uncompressed bytes of the complete chunks, and their messages
        self.chunk_messages = 0

    def fail(self, offset: int, what: str) -> RecordingError:
        return RecordingError(f"{str(self.out.path)!r}: damaged at byte {offset}: expected {what}")

    def run(self) -> Scan:
        at, first = len(MAGIC), True
        while True:
            if at == self.size:  # no Footer: the writer never finished the file
                self.out.cut = Cut(at, self.size, 0, self.data_ended)
                return self.out
            if self.size - at < 9:
                return self._cut_or_fail(at, "a record's opcode and length (9 bytes)")
            opcode = self.view[at]
            length = int.from_bytes(self.view[at + 1 : at + 9], "little")
            if opcode not in _KNOWN:
                raise self.fail(at, f"an MCAP record opcode (1-15), found 0x{opcode:02x}")
            if first and opcode != HEADER:
                raise self.fail(at, f"the Header record first, found opcode 0x{opcode:02x}")
            first = False
            if length > self.size - at - 9:
                return self._cut_or_fail(
                    at, f"a record within the file, found a length of {length} bytes", opcode
                )
            body = self.view[at + 9 : at + 9 + length]
            try:
                self._record(opcode, body, at)
            except _Damage as e:
                raise self.fail(at, f"{_NAMES.get(opcode, 'a record')}: {e}") from None
            at += 9 + length
            self.data_ended |= opcode == DATA_END
            if opcode == FOOTER:
                tail = bytes(self.view[at:])
                if tail != MAGIC and not (len(tail) < len(MAGIC) and MAGIC.startswith(tail)):
                    raise self.fail(at, "the closing MCAP magic right after the Footer")
                if tail != MAGIC:  # cut inside the closing magic: every record is there
                    self.out.cut = Cut(at, self.size, 0, True)
                return self.out

    def _cut_or_fail(self, at: int, what: str, opcode: int | None = None) -> Scan:
        if self.complete:  # the file ends as a whole one does: the length is damaged
            raise self.fail(at, what)
        lost = 0
        if opcode == CHUNK:
            lost = self._lost_in_cut_chunk(at)
        elif opcode == MESSAGE:
            lost = 1
        self.out.cut = Cut(at, self.size, lost, self.data_ended)
        return self.out

    def _record(self, opcode: int, body: memoryview, at: int) -> None:
        fields = _Fields(body)
        if opcode == CHUNK:
            self._chunk(fields, at)
        elif opcode in _IN_CHUNK:
            self._inner(opcode, fields, at)
        elif opcode == METADATA:
            name = fields.text("the metadata name")
            self.out.metadata.append((at, name, fields.mapping("the metadata map")))
        elif opcode == STATISTICS:
            self.out.declared_messages = fields.int(8, "the message count")

    def _inner(self, opcode: int, fields: _Fields, at: int) -> None:
        """A Schema, Channel or Message record (in a chunk or not); ``at``: where to name."""
        if opcode == SCHEMA:
            sid = fields.int(2, "the schema id")
            name = fields.text("the schema name")
            self.out.schemas[sid] = (name, fields.text("the schema encoding"))
        elif opcode == CHANNEL:
            cid = fields.int(2, "the channel id")
            sid = fields.int(2, "the schema id")
            topic = fields.text("the topic")
            self.out.channels[cid] = (topic, sid, fields.text("the message encoding"))
        else:
            cid = fields.int(2, "the channel id")
            fields.int(4, "the sequence number")
            log, pub = fields.int(8, "the log time"), fields.int(8, "the publish time")
            if cid not in self.out.channels:
                raise _Damage(f"a message on a channel declared before it, found channel {cid}")
            data = bytes(fields.take(len(fields.body) - fields.at, "the message data"))
            index = len(self.out.messages)
            self.out.messages.append(RawMessage(cid, log, pub, data, at, index))

    def _chunk_header(self, fields: _Fields) -> tuple[int, int, str, memoryview]:
        fields.int(16, "the chunk's start and end times")
        usize = fields.int(8, "the chunk's uncompressed size")
        crc = fields.int(4, "the chunk's CRC")
        compression = fields.text("the chunk's compression")
        if compression not in ("", "zstd"):
            raise _Damage(f"compression 'zstd' or none, found {compression!r}")
        if usize > MAX_CHUNK_BYTES:
            raise _Damage(f"an uncompressed size of at most {MAX_CHUNK_BYTES}, found {usize}")
        return usize, crc, compression, fields.blob(8, "the chunk's records")

    def _chunk(self, fields: _Fields, at: int) -> None:
        usize, crc, compression, records = self._chunk_header(fields)
        data = _decompress(records, usize) if compression else bytes(records)
        if len(data) != usize:
            raise _Damage(f"{usize} bytes of records, found {len(data)}")
        if crc and zlib.crc32(data) != crc:
            raise _Damage(f"records with CRC 0x{crc:08x}, found 0x{zlib.crc32(data):08x}")
        inner, pos = memoryview(data), 0
        before = len(self.out.messages)
        while pos < len(inner):
            if len(inner) - pos < 9:
                raise _Damage("a whole record in the chunk (9 bytes of opcode and length)")
            opcode = inner[pos]
            length = int.from_bytes(inner[pos + 1 : pos + 9], "little")
            if opcode not in _IN_CHUNK:
                raise _Damage(f"a Schema, Channel or Message in the chunk, found 0x{opcode:02x}")
            if length > len(inner) - pos - 9:
                raise _Damage(f"a record within the chunk, found a length of {length} bytes")
            self._inner(opcode, _Fields(inner[pos + 9 : pos + 9 + length]), at)
            pos += 9 + length
        self.chunk_bytes += usize
        self.chunk_messages += len(self.out.messages) - before

    def _lost_in_cut_chunk(self, at: int) -> int:
        """The messages of a chunk cut short (``Cut``): its declared size over the mean bytes
        per message of the complete chunks, and at least the message records that begin in the
        part of it that decompresses (at least one: the writer writes no empty chunk)."""
        fields = _Fields(self.view[at + 9 : self.size])
        try:
            fields.int(16, "the chunk's start and end times")
            usize = fields.int(8, "the chunk's uncompressed size")
            fields.int(4, "the chunk's CRC")
            compression = fields.text("the chunk's compression")
            fields.int(8, "the length of the chunk's records")
        except _Damage:
            return 1
        rest = fields.body[fields.at :]
        try:
            data = _decompress(rest, min(usize, MAX_CHUNK_BYTES), True) if compression else rest
        except _Damage:
            data = b""
        begun, pos = 0, 0
        while len(data) - pos >= 9:
            begun += data[pos] == MESSAGE
            pos += 9 + int.from_bytes(data[pos + 1 : pos + 9], "little")
        estimate = 0
        if self.chunk_messages:
            estimate = round(usize * self.chunk_messages / max(self.chunk_bytes, 1))
        return max(1, begun, estimate)


def _decompress(compressed: memoryview, size: int, partial: bool = False) -> bytes:
    """At most ``size + 1`` bytes of the zstd data (one more shows a size that lies). A frame that
    stops early gives what it has when ``partial``, else is damage."""
    reader = zstandard.ZstdDecompressor().stream_reader(bytes(compressed))
    pieces, total = [], 0
    try:
        while total <= size:
            piece = reader.read(min(_PIECE, size + 1 - total))
            if not piece:
                break
            pieces.append(piece)
            total += len(piece)
    except zstandard.ZstdError as e:
        if not partial:
            raise _Damage(f"zstd-compressed records ({e})") from None
    return b"".join(pieces)


_NAMES = {
    HEADER: "the Header",
    FOOTER: "the Footer",
    SCHEMA: "a Schema",
    CHANNEL: "a Channel",
    MESSAGE: "a Message",
    CHUNK: "a Chunk",
    METADATA: "a Metadata record",
    STATISTICS: "the Statistics",
}
