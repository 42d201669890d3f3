"""Fault injection on an emulated device's output: corrupt or drop bytes at a seeded rate, delay,
drop whole frames of one sender (a servo that goes silent, or loses its next N replies), and hold
a sender's next frame back until the device's next write (a late reply: ``delay_next``).

Forgeries (issue 31) damage a frame so that it still passes its CRC: ``rewrite_next(sender, fn)``
passes the next frame of ``sender`` that ``fn`` accepts through ``fn`` (the device's reply, e.g.
``forged_present``: one servo's present values changed and every CRC sealed again), and
``rewrite_next_in(fn)`` does the same to the next bytes the host writes to the device (its
``PtyPort`` hands them over first: e.g. ``forged_write``, a goal that reaches the servo
changed, with a valid CRC or without one); ``frames_rewritten`` counts both.

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
from twin.hardware.protocols.crc import crc16_dynamixel
from twin.hardware.protocols.dynamixel_packet import STUFF_PATTERN, fill_block_crcs
from twin.hardware.protocols.dynamixel_table import (
    BROADCAST_ID,
    PRESENT_BLOCK_LENGTH,
    STATUS_INSTRUCTION,
    Instruction,
    Register,
)


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
    frames_rewritten: int = 0


#: Cuts one write into ``(sender, frame)`` pieces, in order; ``sender`` is ``None`` for bytes that
#: belong to no frame.
FrameSplitter = Callable[[bytes], list[tuple[int | None, bytes]]]
#: A forgery: the bytes to send instead of a frame (or of a host write), or None to leave it be.
Rewrite = Callable[[bytes], bytes | None]


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
        self._rewrites: dict[int, Rewrite] = {}  # sender -> forgery of its next frame
        self._rewrite_in: Rewrite | None = None  # forgery of the host's next writes
        self._rewrites_in_left = 0
        #: Whether a forgery of the host's bytes is set (``PtyPort``'s lock-free check).
        self.armed_in = False
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

    def rewrite_next(self, sender: int, fn: Rewrite) -> None:
        """Send the next frame of ``sender`` that ``fn`` rewrites (returns bytes for) as ``fn``
        rewrote it; frames it leaves (None) pass unchanged and keep it armed."""
        self._need_split()
        with self._lock:
            self._rewrites[sender] = fn
            self._rearm()

    def rewrite_next_in(self, fn: Rewrite, n: int = 1) -> None:
        """Hand the device, instead of each of the next ``n`` host writes that ``fn`` rewrites,
        what ``fn`` returns (a damaged instruction; ``apply_in``)."""
        if not (isinstance(n, int) and n >= 1):
            raise InvalidArgumentError(f"rewrite_next_in needs a number of writes >= 1, got {n!r}")
        with self._lock:
            self._rewrite_in, self._rewrites_in_left = fn, n
            self.armed_in = True

    def apply_in(self, data: bytes) -> bytes:
        """The bytes the device reads for the host's ``data`` (module doc)."""
        with self._lock:
            fn = self._rewrite_in
            out = None if fn is None else fn(data)
            if out is None:
                return data
            self._rewrites_in_left -= 1
            if not self._rewrites_in_left:
                self._rewrite_in, self.armed_in = None, False
            self.stats.frames_rewritten += 1
            return out

    @property
    def rewrites_pending(self) -> int:
        """Forgeries set and not yet applied (outgoing frames and the host's bytes)."""
        return len(self._rewrites) + (self._rewrite_in is not None)

    def restore(self, sender: int) -> None:
        """Let the frames of ``sender`` through again."""
        with self._lock:
            self._frame_drops.pop(sender, None)
            self._frame_holds.pop(sender, None)
            self._rewrites.pop(sender, None)
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
            or bool(self._rewrites)
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
            forge = self._rewrites.get(sender)
            if forge is not None and (forged := forge(frame)) is not None:
                del self._rewrites[sender]
                self.stats.frames_rewritten += 1
                frame, dropped = forged, True
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
        if (self._frame_drops or self._frame_holds or self._rewrites) and data:
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


# --- forgeries of DYNAMIXEL frames that pass their CRC (``rewrite_next``, ``rewrite_next_in``) ----

_PRESENT_FIELDS = {"current": (0, 2), "velocity": (2, 4), "position": (6, 4)}  # offset, size


def _set_present(data: bytearray, at: int, values: dict[str, int]) -> None:
    for name, value in values.items():
        offset, size = _PRESENT_FIELDS[name]
        data[at + offset : at + offset + size] = int(value).to_bytes(size, "little", signed=True)


def forged_present(pid: int, **values: int) -> Rewrite:
    """A forgery of the answer to the cycle's read: servo ``pid``'s Present ``position``,
    ``velocity`` and/or ``current`` (raw register values) replaced and every CRC sealed again,
    in a FAST_SYNC_READ's aggregate status (sender 0xFE: its block's and every later block's
    CRC) or in a status packet of the present block (sender ``pid``). Other frames, or a result
    with the stuffing pattern, are left be."""
    unknown = set(values) - set(_PRESENT_FIELDS)
    if unknown or not values:
        raise InvalidArgumentError(
            f"forged_present takes position, velocity and/or current, got {sorted(values)}"
        )
    block = 2 + PRESENT_BLOCK_LENGTH + 2  # ERR, ID, data, CRC

    def forge(frame: bytes) -> bytes | None:
        if len(frame) < 11 or frame[7] != STATUS_INSTRUCTION:
            return None
        out = bytearray(frame)
        if frame[4] == BROADCAST_ID and (len(frame) - 8) % block == 0:
            ends = list(range(8 + 2 + PRESENT_BLOCK_LENGTH, len(frame), block))
            hits = [e for e in ends if frame[e - PRESENT_BLOCK_LENGTH - 1] == pid]
            if not hits:
                return None
            _set_present(out, hits[0] - PRESENT_BLOCK_LENGTH, values)
            fill_block_crcs(out, ends)
        elif frame[4] == pid and len(frame) == 11 + PRESENT_BLOCK_LENGTH:
            _set_present(out, 9, values)
            crc = crc16_dynamixel(bytes(out[:-2]))
            out[-2:] = bytes((crc & 0xFF, crc >> 8))
        else:
            return None
        return None if STUFF_PATTERN in out[8:] else bytes(out)

    return forge


def forged_write(reg: Register, pid: int, value: int, *, reseal: bool = True) -> Rewrite:
    """A forgery of the host's next write of ``reg`` to servo ``pid`` (its entry in a
    SYNC_WRITE of ``reg``, or a WRITE of ``reg`` to it): the value becomes ``value`` on the way
    in. ``reseal``: the CRC sealed again (the servo takes the other value, and acknowledges a
    WRITE); otherwise the packet fails its CRC and the servos drop it (the write is lost)."""
    want = int(value).to_bytes(reg.size, "little", signed=reg.signed)
    head = reg.address.to_bytes(2, "little")

    def entry(frame: bytes) -> int | None:
        """Where ``pid``'s value starts in ``frame``, if it writes ``reg`` to it."""
        if len(frame) < 12 + reg.size or STUFF_PATTERN in frame[7:]:
            return None
        if frame[4] == pid and frame[7] == Instruction.WRITE and frame[8:10] == head:
            return 10 if len(frame) == 12 + reg.size else None
        if frame[4] != BROADCAST_ID or frame[7] != Instruction.SYNC_WRITE or frame[8:10] != head:
            return None
        if int.from_bytes(frame[10:12], "little") != reg.size:
            return None
        for at in range(12, len(frame) - 2, 1 + reg.size):
            if frame[at] == pid:
                return at + 1
        return None

    def forge(data: bytes) -> bytes | None:
        pieces = dynamixel_status_frames(data)  # instruction packets frame the same way
        for k, (sender, frame) in enumerate(pieces):
            at = entry(frame)
            if at is None:
                continue
            out = bytearray(frame)
            out[at : at + reg.size] = want
            if reseal:
                crc = crc16_dynamixel(bytes(out[:-2]))
                out[-2:] = bytes((crc & 0xFF, crc >> 8))
            pieces[k] = (sender, bytes(out))
            return b"".join(f for _, f in pieces)
        return None

    return forge
