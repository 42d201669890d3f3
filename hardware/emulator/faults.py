"""Fault injection on an emulated device's output: corrupt or drop bytes at a seeded rate, delay,
drop whole frames of one sender (a servo that goes silent, or loses its next N replies), and hold
a sender's next frame back until the device's next write (a late reply: ``delay_next``).

Applied per ``write`` of the emulator (one frame, packet or reply), so ``writes_affected`` counts
the frames that left the device damaged: the number a driver must account for. Frame faults need
a ``split`` function that cuts one write into ``(sender, frame)`` pieces (the servo chain's is
``dynamixel_status_frames``); ``frames_dropped`` counts the frames they removed, ``frames_delayed``
the frames they held back.

``armed`` says whether any fault is set; a device's hot path reads it without the lock and skips
the injector when it is False (a plain attribute, rewritten under the lock by every change, so a
fault armed from another thread takes effect from the next write on).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from twin.hardware.errors import InvalidArgumentError


@dataclass
class FaultStats:
    """Counts of the writes that passed an armed injector (``FaultInjector.armed``; a write with
    nothing armed skips it uncounted) and of what they lost."""

    bytes_in: int = 0
    bytes_corrupted: int = 0
    bytes_dropped: int = 0
    writes: int = 0
    writes_affected: int = 0
    frames_dropped: int = 0
    frames_delayed: int = 0


#: Cuts one write into ``(sender, frame)`` pieces, in order; ``sender`` is ``None`` for bytes that
#: belong to no frame.
FrameSplitter = Callable[[bytes], list[tuple[int | None, bytes]]]


def dynamixel_status_frames(data: bytes) -> list[tuple[int | None, bytes]]:
    """Protocol 2.0 packets of one write, keyed by servo id (``docs/protocols/dynamixel.md``:
    header ``FF FF FD 00``, id, a 2-byte length counting the bytes after it)."""
    out: list[tuple[int | None, bytes]] = []
    i = 0
    while i < len(data):
        if data[i : i + 4] != _DXL_HEADER or len(data) < i + 7:
            out.append((None, data[i:]))
            break
        end = i + 7 + (data[i + 5] | data[i + 6] << 8)
        out.append((data[i + 4], data[i:end]))
        i = end
    return out


_DXL_HEADER = b"\xff\xff\xfd\x00"
_FOREVER = -1


class FaultInjector:
    """Seeded byte faults: each byte is corrupted (XOR with a non-zero value) with probability
    ``corrupt_rate`` and dropped with probability ``drop_rate``; every write waits ``delay_s``."""

    def __init__(
        self,
        seed: int = 0,
        corrupt_rate: float = 0.0,
        drop_rate: float = 0.0,
        delay_s: float = 0.0,
        *,
        split: FrameSplitter | None = None,
    ) -> None:
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.stats = FaultStats()
        self._split = split
        self._frame_drops: dict[int, int] = {}  # sender -> frames still to drop (-1: all)
        self._frame_holds: dict[int, int] = {}  # sender -> frames still to hold back
        self._held = b""  # frames held back, sent ahead of the next write
        self.corrupt_rate = self.drop_rate = self.delay_s = 0.0
        #: Whether any fault is set (``active``): the devices' lock-free check (module doc).
        self.armed = False
        self.set(corrupt_rate=corrupt_rate, drop_rate=drop_rate, delay_s=delay_s)

    def set(
        self,
        *,
        corrupt_rate: float | None = None,
        drop_rate: float | None = None,
        delay_s: float | None = None,
    ) -> None:
        """Change rates (probability per byte, 0..1) or the delay (s) while running."""
        for name, value in (("corrupt_rate", corrupt_rate), ("drop_rate", drop_rate)):
            if value is not None and not 0.0 <= value <= 1.0:
                raise InvalidArgumentError(f"{name} must be a probability in [0, 1], got {value}")
        if delay_s is not None and not 0.0 <= delay_s < 10.0:
            raise InvalidArgumentError(f"delay_s must be in [0, 10) s, got {delay_s}")
        with self._lock:
            for name, value in (
                ("corrupt_rate", corrupt_rate),
                ("drop_rate", drop_rate),
                ("delay_s", delay_s),
            ):
                if value is not None:
                    setattr(self, name, float(value))
            self._rearm()

    def silence(self, sender: int) -> None:
        """Drop every frame of ``sender`` (e.g. a servo id) until ``restore(sender)``."""
        self._drop_frames(sender, _FOREVER)

    def drop_next(self, sender: int, n: int) -> None:
        """Drop the next ``n`` frames of ``sender``, then let its frames through again."""
        if not (isinstance(n, int) and n >= 1):
            raise InvalidArgumentError(f"drop_next needs a number of frames >= 1, got {n!r}")
        self._drop_frames(sender, n)

    def delay_next(self, sender: int, n: int = 1) -> None:
        """Hold the next ``n`` frames of ``sender`` back and send each, unchanged, just ahead of
        the device's next write (whoever sends it): a reply that comes late, after the host has
        stopped waiting for it, just before the answer to a later request (a loaded device)."""
        if not (isinstance(n, int) and n >= 1):
            raise InvalidArgumentError(f"delay_next needs a number of frames >= 1, got {n!r}")
        self._need_split()
        with self._lock:
            self._frame_holds[sender] = n
            self._rearm()

    def restore(self, sender: int) -> None:
        """Let the frames of ``sender`` through again."""
        with self._lock:
            self._frame_drops.pop(sender, None)
            self._frame_holds.pop(sender, None)
            self._rearm()

    def take_frame_drop(self, sender: int) -> bool:
        """Whether the next frame of ``sender`` is to be dropped (counted, as ``apply`` counts a
        dropped frame): for a device that builds one frame of several senders' parts (a servo's
        block in a FAST_SYNC_READ status), where the whole-frame filter cannot see them."""
        with self._lock:
            left = self._frame_drops.get(sender, 0)
            if not left:
                return False
            self.stats.frames_dropped += 1
            if left == 1:
                del self._frame_drops[sender]
                self._rearm()
            elif left > 1:
                self._frame_drops[sender] = left - 1
            return True

    @property
    def drops_frames(self) -> bool:
        """Whether any sender's frames are to be dropped (``take_frame_drop`` can say True)."""
        return bool(self._frame_drops)

    def frames_pending_drop(self, sender: int) -> int:
        """Frames of ``sender`` still to be dropped (-1: silenced)."""
        return self._frame_drops.get(sender, 0)

    def _need_split(self) -> None:
        if self._split is None:
            raise InvalidArgumentError(
                "frame faults need an injector built with split= (a frame splitter); this one "
                "only damages bytes"
            )

    def _drop_frames(self, sender: int, n: int) -> None:
        self._need_split()
        with self._lock:
            self._frame_drops[sender] = n
            self._rearm()

    @property
    def active(self) -> bool:
        return (
            self.corrupt_rate > 0
            or self.drop_rate > 0
            or self.delay_s > 0
            or bool(self._frame_drops)
            or bool(self._frame_holds)
            or bool(self._held)
        )

    def _rearm(self) -> None:
        """``armed`` from the faults now set (lock held)."""
        self.armed = self.active

    def _filter_frames(self, data: bytes) -> tuple[bytes, bool]:
        """``data`` without the frames of the senders being dropped or held back (held ones are
        kept for the next write; lock held)."""
        kept, dropped = [], False
        for sender, frame in self._split(data):
            if self._frame_holds.get(sender, 0):
                dropped = True
                self.stats.frames_delayed += 1
                self._held += frame
                self._frame_holds[sender] -= 1
                if not self._frame_holds[sender]:
                    del self._frame_holds[sender]
                continue
            left = self._frame_drops.get(sender, 0) if sender is not None else 0
            if left:
                dropped = True
                self.stats.frames_dropped += 1
                if left > 0:
                    if left == 1:
                        del self._frame_drops[sender]
                    else:
                        self._frame_drops[sender] = left - 1
                continue
            kept.append(frame)
        return (b"".join(kept), True) if dropped else (data, False)

    def apply(self, data: bytes) -> tuple[bytes, bool]:
        """The bytes that leave the device for ``data`` (after any frames held back from earlier
        writes), and whether any was damaged (the delay is the caller's to wait)."""
        with self._lock:
            held, self._held = self._held, b""
            data, damaged = self._apply(data)
            self._rearm()  # frame faults count down, held frames leave
            return (held + data if held else data), damaged

    def _apply(self, data: bytes) -> tuple[bytes, bool]:
        """``apply`` of this write's own bytes (lock held)."""
        s = self.stats
        s.writes += 1
        s.bytes_in += len(data)
        framed = False
        if (self._frame_drops or self._frame_holds) and data:
            data, framed = self._filter_frames(data)
            if framed:
                s.writes_affected += 1
        if not (self.corrupt_rate or self.drop_rate) or not data:
            return data, framed
        arr = np.frombuffer(data, np.uint8).copy()
        n = arr.size
        hit = self._rng.random(n) < self.corrupt_rate
        k = int(hit.sum())
        if k:
            arr[hit] ^= self._rng.integers(1, 256, k, dtype=np.uint8)
        drop = self._rng.random(n) < self.drop_rate
        d = int(drop.sum())
        s.bytes_corrupted += k
        s.bytes_dropped += d
        if (k or d) and not framed:
            s.writes_affected += 1
        return (arr[~drop].tobytes() if d else arr.tobytes()), bool(k or d or framed)
