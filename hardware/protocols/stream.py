"""Resynchronising stream parser for fixed-length frames, and the counters every parser keeps.

The rule (``docs/protocols/bota-serial.md``, Resynchronisation): search for the header byte, read a whole
frame, accept it only if its check matches. Once synchronised, a frame whose check fails is dropped
alone (counted as a check error) as long as the next frame's header is where it should be; a bad
header drops sync and the search restarts one byte after the last frame start, so a header value
inside a payload cannot lock the search onto a false frame (a candidate must pass the check).

What is counted is what the parser knows: bytes skipped while searching are garbage, a frame
whose header was in place but whose check failed is a dropped frame. How many frames a garbage
burst hid is not knowable from the bytes (inserted noise and lost frames look alike); a driver
with a device clock counts those from its time stamps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class ParserStats:
    """Counters of one stream parser; a driver that hides them cannot be trusted.

    frames: accepted frames; crc_errors: frames dropped for a failed check while synchronised;
    sync_losses: times the parser lost synchronisation; dropped_frames: frames known to be lost,
    i.e. frames in place (header where expected, next header in place) that failed the check;
    garbage_bytes: bytes skipped while searching for a header (never counted as frames).
    """

    frames: int = 0
    crc_errors: int = 0
    sync_losses: int = 0
    dropped_frames: int = 0
    garbage_bytes: int = 0

    def snapshot(self) -> ParserStats:
        return ParserStats(**{f.name: getattr(self, f.name) for f in fields(self)})

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class FixedFrameParser(Generic[T]):
    """Parser of a byte stream of ``length``-byte frames that start with ``header``.

    ``check(frame) -> bool`` validates a candidate; ``decode(frame) -> T`` turns a valid frame into
    a value. ``feed(data)`` returns the decoded frames completed by ``data``. The buffer is bounded:
    at most one partial frame plus one byte is kept between calls.
    """

    def __init__(
        self,
        length: int,
        header: int,
        check: Callable[[bytes], bool],
        decode: Callable[[bytes], T],
    ) -> None:
        if length < 2 or not 0 <= header <= 0xFF:
            raise ValueError(f"frame length must be >= 2 and header a byte, got {length}, {header}")
        self.length = length
        self.header = header
        self._check = check
        self._decode = decode
        self._buf = bytearray()
        self._synced = False
        self.stats = ParserStats()

    @property
    def synced(self) -> bool:
        return self._synced

    def reset(self) -> None:
        """Forget buffered bytes and synchronisation (counters are kept)."""
        self._buf.clear()
        self._synced = False

    def feed(self, data: bytes) -> list[T]:
        """Append ``data`` and return every frame it completes, in order."""
        buf = self._buf
        buf += data
        n, hdr, out = self.length, self.header, []
        stats, check, decode = self.stats, self._check, self._decode
        pos = 0
        end = len(buf)
        while True:
            if self._synced:
                if end - pos < n:
                    break
                if buf[pos] == hdr:
                    frame = bytes(buf[pos : pos + n])
                    if check(frame):
                        out.append(decode(frame))
                        stats.frames += 1
                        pos += n
                        continue
                    # Bad check: a corrupted frame if the next header is in place, else lost sync.
                    if end - pos < n + 1:
                        break
                    if buf[pos + n] == hdr:
                        stats.crc_errors += 1
                        stats.dropped_frames += 1
                        pos += n
                        continue
                    stats.crc_errors += 1
                self._synced = False
                stats.sync_losses += 1
                stats.garbage_bytes += 1
                pos += 1
            # Not synchronised: look for a header whose frame passes the check.
            idx = buf.find(hdr, pos)
            if idx < 0:
                stats.garbage_bytes += end - pos
                pos = end
                break
            if end - idx < n:
                stats.garbage_bytes += idx - pos
                pos = idx
                break
            frame = bytes(buf[idx : idx + n])
            if check(frame):
                stats.garbage_bytes += idx - pos
                self._synced = True
                out.append(decode(frame))
                stats.frames += 1
                pos = idx + n
            else:
                stats.garbage_bytes += idx + 1 - pos
                pos = idx + 1
        del buf[:pos]
        return out
