"""Reading a twin recording back: a whole one, one cut short by ``kill -9``, and refusing a
damaged or crafted one in one line.

``read_recording(path)`` scans the file record by record (``twin.record.mcap_scan``: every
length and chunk checked, a damaged chunk named by its byte offset), decodes every message's
JSON and checks each twin message against its channel's schema (``schemas.problem``), so what
it returns is what replay and the other readers may rely on; anything else is a
``RecordingError`` naming the file, where (byte offset, message index) and what was expected.
A file cut short reads up to its last complete chunk; ``cut`` says where, ``expected_messages``
how many messages the file shows were recorded. ``recording_info`` lists channels with message
counts, rates and the duration.
"""

from __future__ import annotations

import json
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any

from twin.record.mcap_scan import Cut, RawMessage, Scan, scan
from twin.record.schemas import CHANNELS, SCHEMAS, problem
from twin.record.writer import RecordingError


@dataclass(frozen=True)
class Message:
    """One recorded message: its topic, schema name, robot time (us), decoded JSON body, the
    wall time it was written (ns since the epoch), its index among the file's messages and the
    byte offset of its chunk (where a message is named in an error)."""

    topic: str
    schema: str
    t_us: int
    data: Any
    wall_ns: int = 0
    index: int = 0
    offset: int = 0

    @property
    def where(self) -> str:
        """``message <index> (<topic>, chunk at byte <offset>)``."""
        return f"message {self.index} ({self.topic}, chunk at byte {self.offset})"


@dataclass(frozen=True)
class Recording:
    """The messages of a recording in file (= recording) order, and its ``twin`` metadata."""

    path: pathlib.Path
    metadata: dict[str, Any]
    messages: list[Message] = field(repr=False)
    #: Where the file is cut short (None for a whole file, one that ends with its summary).
    cut: Cut | None = None
    #: The message count the file's summary declares (None without a summary).
    declared_messages: int | None = None

    @property
    def truncated(self) -> bool:
        """True when the file ends without its summary (the recorder did not close it)."""
        return self.cut is not None

    @property
    def expected_messages(self) -> int:
        """How many messages the file shows were recorded: its summary's count, or for a file
        cut short the messages read plus those the cut took (``Cut.lost``)."""
        if self.declared_messages is not None:
            return self.declared_messages
        return len(self.messages) + (self.cut.lost if self.cut else 0)

    @property
    def count_exact(self) -> bool:
        """False when ``expected_messages`` is an estimate (a file cut before its summary)."""
        return self.declared_messages is not None or self.cut is None or self.cut.exact

    def partial_line(self) -> str:
        """``partial: N of M messages, cut at t = T s`` (M as ``~M`` when estimated; T: the
        robot time of the last message read)."""
        t = max((m.t_us for m in self.messages), default=0) * 1e-6
        m = f"{'' if self.count_exact else '~'}{self.expected_messages}"
        return f"partial: {len(self.messages)} of {m} messages, cut at t = {t:.3f} s"

    def on(self, topic: str) -> list[Message]:
        """The messages of ``topic``, in order."""
        return [m for m in self.messages if m.topic == topic]


def read_recording(path: str | os.PathLike) -> Recording:
    """Every complete message of ``path``, checked (module doc); raises ``RecordingError`` for a
    file that is not MCAP, is damaged, or holds a twin message its schema refuses."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise RecordingError(f"no recording at {str(path)!r}: expected an existing .mcap file")
    try:
        found = scan(path)
    except OSError as e:
        raise RecordingError(f"{str(path)!r} cannot be read: {e.strerror or e}") from e
    messages = [_message(found, raw) for raw in found.messages]
    if found.declared_messages is not None and found.declared_messages != len(messages):
        raise RecordingError(
            f"{str(path)!r}: its summary declares {found.declared_messages} messages, "
            f"the file holds {len(messages)}: expected them to agree"
        )
    return Recording(path, _metadata(found), messages, found.cut, found.declared_messages)


def _json(text: bytes | str, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise RecordingError(f"{what}: expected JSON text ({type(e).__name__}: {e})") from None


def _message(found: Scan, raw: RawMessage) -> Message:
    topic, schema_id, encoding = found.channels[raw.channel_id]
    schema = found.schemas.get(schema_id, ("", ""))[0]
    where = f"{str(found.path)!r}: message {raw.index} ({topic}, chunk at byte {raw.offset})"
    if encoding != "json":
        raise RecordingError(f"{where}: expected JSON messages, found encoding {encoding!r}")
    data = _json(raw.data, where)
    if topic in CHANNELS:
        wrong = problem(data, SCHEMAS[CHANNELS[topic]])
        if wrong:
            raise RecordingError(f"{where}: {wrong}")
    t_us = raw.log_time_ns // 1000
    return Message(topic, schema, t_us, data, raw.publish_time_ns, raw.index, raw.offset)


def _metadata(found: Scan) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for offset, name, values in found.metadata:
        if name == "twin":
            where = f"{str(found.path)!r}: metadata 'twin' at byte {offset}"
            metadata = {k: _json(v, f"{where}, key {k!r}") for k, v in values.items()}
    return metadata


@dataclass(frozen=True)
class ChannelInfo:
    """One topic of a recording: schema, message count, first and last robot time, mean rate."""

    topic: str
    schema: str
    count: int
    first_us: int
    last_us: int

    @property
    def rate_hz(self) -> float:
        span = (self.last_us - self.first_us) * 1e-6
        return (self.count - 1) / span if self.count > 1 and span > 0 else 0.0


def recording_info(recording: Recording) -> list[ChannelInfo]:
    """Per topic (in first-seen order): schema, count, time span and rate."""
    seen: dict[str, list] = {}
    for m in recording.messages:
        entry = seen.get(m.topic)
        if entry is None:
            seen[m.topic] = [m.schema, 1, m.t_us, m.t_us]
        else:
            entry[1] += 1
            entry[2] = min(entry[2], m.t_us)
            entry[3] = max(entry[3], m.t_us)
    return [ChannelInfo(t, *v) for t, v in seen.items()]
