"""Reading a twin recording back, a whole one or one cut short by ``kill -9``.

``read_recording(path)`` streams the file with the ``mcap`` library's non-seeking reader, so a
file without its summary (a killed recorder) reads up to its last complete chunk; ``truncated``
says so. ``recording_info`` lists channels with message counts, rates and the duration.
"""

from __future__ import annotations

import json
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any

from mcap.exceptions import McapError
from mcap.reader import NonSeekingReader

from twin.record.writer import RecordingError


@dataclass(frozen=True)
class Message:
    """One recorded message: its topic, schema name, robot time (us), decoded JSON body and the
    wall time it was written (ns since the epoch)."""

    topic: str
    schema: str
    t_us: int
    data: dict[str, Any]
    wall_ns: int = 0


@dataclass(frozen=True)
class Recording:
    """The messages of a recording in file (= recording) order, and its ``twin`` metadata."""

    path: pathlib.Path
    metadata: dict[str, Any]
    messages: list[Message] = field(repr=False)
    #: True when the file ends without its summary (the recorder did not close it).
    truncated: bool = False

    def on(self, topic: str) -> list[Message]:
        """The messages of ``topic``, in order."""
        return [m for m in self.messages if m.topic == topic]


def read_recording(path: str | os.PathLike) -> Recording:
    """Every complete message of ``path``; raises ``RecordingError`` if it is not MCAP."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise RecordingError(f"no recording at {str(path)!r}: expected an existing .mcap file")
    metadata: dict[str, Any] = {}
    messages: list[Message] = []
    truncated = False
    with open(path, "rb") as f:
        reader = NonSeekingReader(f)
        try:
            for schema, channel, message in reader.iter_messages(log_time_order=False):
                messages.append(
                    Message(
                        channel.topic,
                        schema.name if schema is not None else "",
                        message.log_time // 1000,
                        json.loads(message.data),
                        message.publish_time,
                    )
                )
        except (McapError, EOFError, ValueError, OSError) as e:  # a cut-short tail
            if not messages and not _has_magic(path):
                raise RecordingError(
                    f"{str(path)!r} is not an MCAP file ({type(e).__name__}: {e})"
                ) from e
            truncated = True
        f.seek(0)
        try:
            for record in NonSeekingReader(f).iter_metadata():
                if record.name == "twin":
                    metadata = {k: json.loads(v) for k, v in record.metadata.items()}
        except (McapError, EOFError, ValueError, OSError):
            truncated = True
    return Recording(path, metadata, messages, truncated)


def _has_magic(path: pathlib.Path) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == b"\x89MCAP0\r\n"


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
