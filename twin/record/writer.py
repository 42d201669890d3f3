"""``McapWriter``: messages to an MCAP file, written off the control thread, that survives
``kill -9`` and counts exactly what reached the file.

``add(topic, t_us, encode, *args)`` only queues: the caller's thread (a control loop) pays for an
append. A writer thread calls ``encode(*args)`` (JSON text, or a dict to be JSON-encoded) and
hands the message to the ``mcap`` library's writer (JSON messages, JSON schemas
(``schemas.SCHEMAS``), zstd-compressed chunks), which writes into memory (``_Sink``). Every
``flush_interval_s`` of wall time the chunk in progress is closed and its bytes are written to
the file and flushed (a commit), so a process killed at any moment loses at most about that
interval and leaves a file whose complete chunks the readers read. ``close()`` drains the queue
and writes the summary (statistics, indexes) that a seeking reader uses.

A failure to write (a full disk) never raises into the control loop: the writer stops, cuts the
file back to the end of its last complete commit (so no half chunk is left to be mistaken for
data), counts every message it could not write, and ``close()`` raises ``RecordingError`` with
the cause and the counts. ``written`` counts a message only once its commit reached the file, so
after a failure it equals what ``read_recording`` reads back. An encoder that raises stops the
recording the same way; what was committed or pending before it is still written and the file
closed whole. A queue that outgrows ``max_queued`` messages (a writer that cannot keep up) drops
new messages and counts them the same way.
"""

from __future__ import annotations

import collections
import errno
import json
import os
import pathlib
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from mcap.writer import CompressionType, Writer

from twin.record.schemas import CHANNELS, SCHEMAS

#: Wall time between forced chunk writes (s): about the most a killed recording loses.
DEFAULT_FLUSH_INTERVAL_S = 0.5
#: Wall time the writer thread sleeps between drains of the queue (s).
DRAIN_INTERVAL_S = 0.02
#: Messages the queue may hold before new ones are dropped (and counted).
DEFAULT_MAX_QUEUED = 200_000
#: Profile string written in the MCAP header.
PROFILE = "twin"


class RecordingError(ValueError):
    """A recording could not be written or read; the message says what and why."""


def _identity(message: Any) -> Any:
    return message


class _Sink:
    """The stream the ``mcap`` writer writes to: bytes held in memory until ``take()``;
    ``tell()`` counts every byte given, as a file's position would."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._position = 0

    def write(self, data: bytes) -> int:
        self._pending += data
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        out = bytes(self._pending)
        self._pending.clear()
        return out


class McapWriter:
    """Register channels lazily, queue messages with robot-time stamps, write on a thread.

    output: the ``.mcap`` file (created or replaced), or an open binary stream (closed with the
    writer). metadata: string -> JSON-able values, stored as the MCAP metadata record ``twin``
    (values JSON-encoded), written before ``__init__`` returns.
    """

    def __init__(
        self,
        output: str | os.PathLike | BinaryIO,
        metadata: dict[str, Any] | None = None,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        max_queued: int = DEFAULT_MAX_QUEUED,
    ) -> None:
        if not (flush_interval_s > 0.0):
            raise ValueError(f"flush_interval_s must be > 0 s, got {flush_interval_s}")
        if isinstance(output, (str, os.PathLike)):
            self.path = pathlib.Path(output)
            if self.path.suffix != ".mcap":
                raise ValueError(f"a recording file must end in .mcap, got {str(self.path)!r}")
            # Unbuffered: a commit reaches the file whole or the error says it did not.
            self._file = open(self.path, "wb", buffering=0)  # noqa: SIM115 - writer thread closes
        else:
            self.path = pathlib.Path(getattr(output, "name", "<stream>"))
            self._file = output
        self._sink = _Sink()
        self._committed = 0  # bytes of the file known to be whole (the end of the last commit)
        self._writer = Writer(self._sink, compression=CompressionType.ZSTD)
        self._writer.start(profile=PROFILE, library="twin")
        if metadata:
            self._writer.add_metadata(
                "twin", {k: json.dumps(v, sort_keys=True) for k, v in metadata.items()}
            )
        self.error: BaseException | None = None
        self.written: dict[str, int] = collections.defaultdict(int)
        self._pending: dict[str, int] = collections.defaultdict(int)
        self.dropped = 0
        self._commit()  # header and metadata are on disk at once
        if self.error is not None:
            self._file.close()
            raise RecordingError(
                f"recording {str(self.path)!r} cannot be written: "
                f"{type(self.error).__name__}: {self.error}"
            ) from self.error
        self._channels: dict[str, int] = {}
        self._schemas: dict[str, int] = {}
        self._queue: collections.deque = collections.deque()
        self._max_queued = max_queued
        self._flush_interval_s = flush_interval_s
        self._closing = threading.Event()
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name=f"mcap {self.path.name}", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ control thread
    def add(
        self, topic: str, t_us: int, encode: Callable[..., Any] = _identity, *args: Any
    ) -> None:
        """Queue a message on ``topic`` at robot time ``t_us``: ``encode(*args)`` (run on the
        writer thread) gives its JSON text or a JSON-able dict; ``add(topic, t, message)``
        queues a ready message. Never raises for a write failure: see the module doc."""
        if self._closed:
            raise RecordingError(f"the recording {str(self.path)!r} is closed")
        if topic not in CHANNELS:
            raise ValueError(f"unknown recording topic {topic!r}; expected one of {list(CHANNELS)}")
        if not callable(encode):  # a ready message
            encode, args = _identity, (encode,)
        if self.error is not None or len(self._queue) >= self._max_queued:
            self.dropped += 1
            return
        self._queue.append((topic, t_us, time.time_ns(), encode, args))

    # ------------------------------------------------------------------- writer thread
    def _run(self) -> None:
        next_flush = time.monotonic() + self._flush_interval_s
        while True:
            closing = self._closing.wait(DRAIN_INTERVAL_S)
            self._drain()
            now = time.monotonic()
            if closing or now >= next_flush:
                self._commit()
                next_flush = now + self._flush_interval_s
            if closing:
                break
        if not self._failed_io:
            self._commit(finish=True)
        self._guard(self._file.close)

    def _drain(self) -> None:
        queue = self._queue
        while queue:
            topic, t_us, wall_ns, encode, args = queue.popleft()
            if self.error is not None:
                self.dropped += 1
                continue
            try:
                message = encode(*args)
                data = message if isinstance(message, str) else json.dumps(message)
                cid = self._channels.get(topic)
                if cid is None:
                    cid = self._channel(topic)
                self._writer.add_message(cid, int(t_us) * 1000, data.encode(), wall_ns)
                self._pending[topic] += 1
            except Exception as e:  # a bad encoder: stop, count, report at close
                self.error = e
                self.dropped += 1

    @property
    def _failed_io(self) -> bool:
        return isinstance(self.error, OSError)

    def _commit(self, finish: bool = False) -> None:
        """Close the chunk in progress (and write the summary when ``finish``), write its bytes
        to the file and flush it; only then count its messages as written. A write that fails
        counts them as dropped and cuts the file back to the last whole commit."""
        if self._failed_io:
            return
        (self._writer.finish if finish else self._writer.flush)()
        data = self._sink.take()
        try:
            view = memoryview(data)
            while view:
                n = self._file.write(view)
                if not n:  # a non-blocking stream that took nothing: it is not a file
                    raise OSError(errno.EAGAIN, "the stream took no bytes", str(self.path))
                view = view[n:]
            self._file.flush()
        except OSError as e:  # a full disk
            self.error = e
            self.dropped += sum(self._pending.values())
            self._pending.clear()
            self._cut_back()
            return
        self._committed += len(data)
        for topic, n in self._pending.items():
            self.written[topic] += n
        self._pending.clear()

    def _cut_back(self) -> None:
        """Cut the file back to the end of the last whole commit (shrinking needs no space), so
        that no part of the failed commit stays to be read; a stream that cannot be cut keeps
        it (the readers treat a partial chunk at the end as a cut)."""
        target = getattr(self._file, "raw", self._file)
        try:
            target.truncate(self._committed)
            target.seek(self._committed)
        except (OSError, ValueError, AttributeError):
            pass

    def _guard(self, call: Callable[[], object]) -> None:
        try:
            call()
        except Exception as e:
            if self.error is None:  # the first failure is the cause
                self.error = e

    def _channel(self, topic: str) -> int:
        schema_name = CHANNELS[topic]
        if schema_name not in self._schemas:
            self._schemas[schema_name] = self._writer.register_schema(
                schema_name, "jsonschema", json.dumps(SCHEMAS[schema_name]).encode()
            )
        cid = self._writer.register_channel(topic, "json", self._schemas[schema_name])
        self._channels[topic] = cid
        return cid

    # ------------------------------------------------------------------------ lifetime
    @property
    def counts(self) -> dict[str, int]:
        """Messages written so far, per topic."""
        return dict(self.written)

    def close(self) -> None:
        """Write what is queued and the summary, close the file; safe to call twice. Raises
        ``RecordingError`` once if messages were lost (the cause and the counts)."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self._thread.join()
        if self.error is not None or self.dropped:
            cause = f"{type(self.error).__name__}: {self.error}" if self.error else "queue full"
            raise RecordingError(
                f"recording {str(self.path)!r}: {self.dropped} messages were not written "
                f"({cause}); {sum(self.written.values())} were"
            )

    def __enter__(self) -> McapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
