"""``DynamixelStreamParser``: a DYNAMIXEL Protocol 2.0 byte stream -> packets, resynchronising.

The reference path takes one candidate at a time: find ``FF FF FD 00``, read LEN, check the CRC
on the stuffed bytes, unstuff; a failed CRC counts a CRC error and a dropped frame and the search
restarts one byte further on. A fast path handles the common burst (the replies to a sync read:
consecutive status packets of one length) with numpy: headers, LEN and the CRC of a whole run are
checked at once, using the linearity of this CRC (init 0, no final XOR): the CRC of an ``L``-byte
message is the XOR of one table entry per byte position. Whatever it does not accept (a bad CRC,
stuffing, an instruction packet) goes through the reference path, so both give the same packets
and counters (``tests/test_hw_codecs.py`` feeds streams both ways).
"""

from __future__ import annotations

import contextlib
import struct

import numpy as np
from twin.hardware.errors import ProtocolError
from twin.hardware.protocols.crc import (
    DXL_TABLE8,
    DXL_TABLE16,
    NATIVE_LITTLE_ENDIAN,
    crc16_position_table,
)
from twin.hardware.protocols.dynamixel_packet import (
    HEADER,
    STUFF_PATTERN,
    Packet,
    StatusPacket,
    packet_from_body,
)
from twin.hardware.protocols.dynamixel_table import STATUS_INSTRUCTION
from twin.hardware.protocols.stream import ParserStats

_HEADER_ARRAY = np.frombuffer(HEADER, np.uint8)
_FAST_MIN = 16  # packets in a run before the vectorised path pays off (measured: ~10)
_WORDS: dict[int, object] = {}  # native-order word unpackers by data length


def _unpacker(n: int):
    """Unpacker of the ``n // 2`` native-order words of ``n`` bytes (cached)."""
    return _WORDS.setdefault(n, struct.Struct(f"={n // 2}H").unpack_from)


class DynamixelStreamParser:
    """Byte stream -> packets (status and instruction), resynchronising on the header (module doc).

    LEN values above ``max_length`` are taken as false headers.
    """

    def __init__(self, max_length: int = 1024) -> None:
        self.max_length = max_length
        self._buf = bytearray()
        self._in_garbage = False
        self._seen_packet = False
        self.stats = ParserStats()

    @property
    def pending(self) -> bool:
        """Whether bytes of an incomplete packet (or garbage) wait for the next ``feed``."""
        return bool(self._buf)

    def reset(self) -> None:
        self._buf.clear()
        self._in_garbage = False

    def _skip(self, n: int) -> None:
        if n <= 0:
            return
        self.stats.garbage_bytes += n
        if self._seen_packet and not self._in_garbage:
            self.stats.sync_losses += 1
        self._in_garbage = True

    def _run(self, buf: bytearray, pos: int, total: int, out: list[Packet]) -> int:
        """Accept the leading run of valid, unstuffed status packets of ``total`` bytes at
        ``pos``; returns how many were appended to ``out``."""
        m = (len(buf) - pos) // total
        if m < _FAST_MIN or total < 11:  # a status packet has at least INST, ERR and the CRC
            return 0
        chunk = bytes(buf[pos : pos + m * total])
        rows = np.frombuffer(chunk, np.uint8).reshape(m, total)
        ok = (rows[:, :4] == _HEADER_ARRAY).all(axis=1)
        ok &= (
            (rows[:, 5] == rows[0, 5])
            & (rows[:, 6] == rows[0, 6])
            & (rows[:, 7] == STATUS_INSTRUCTION)
        )
        body = rows[:, 7 : total - 2]
        ok &= ~((body[:, :-2] == 0xFF) & (body[:, 1:-1] == 0xFF) & (body[:, 2:] == 0xFD)).any(
            axis=1
        )
        n = total - 2
        table = crc16_position_table(n)
        crc = np.bitwise_xor.reduce(table[np.arange(n), rows[:, :n]], axis=1)
        ok &= crc == (rows[:, n].astype(np.uint16) | (rows[:, n + 1].astype(np.uint16) << 8))
        k = m if ok.all() else int(np.argmin(ok))
        for i in range(0, k * total, total):
            out.append(StatusPacket(chunk[i + 4], chunk[i + 8], chunk[i + 9 : i + total - 2]))
        return k

    def feed(self, data: bytes) -> list[Packet]:
        """Append ``data``; return every packet it completes, in order."""
        buf = self._buf
        buf += data
        out: list[Packet] = []
        pos, end = 0, len(buf)
        stats, max_length = self.stats, self.max_length
        words, t16, t8, little = _WORDS, DXL_TABLE16, DXL_TABLE8, NATIVE_LITTLE_ENDIAN
        while True:
            idx = buf.find(HEADER, pos)
            if idx < 0:
                keep = max(pos, end - (len(HEADER) - 1))
                self._skip(keep - pos)
                pos = keep
                break
            if idx != pos:
                self._skip(idx - pos)
            pos = idx
            if end - idx < 7:
                break
            length = buf[idx + 5] | buf[idx + 6] << 8
            if not 3 <= length <= max_length:
                self._skip(1)
                pos = idx + 1
                continue
            total = 7 + length
            if end - idx < total:
                break
            k = self._run(buf, idx, total, out)
            if k:
                pos = idx + k * total
                self._seen_packet, self._in_garbage = True, False
                continue
            raw = bytes(buf[idx : idx + total])
            packet = None
            # _crc(raw, n), inlined: this loop is the parser's hot path
            n = total - 2
            unpack = words.get(n) or _unpacker(n)
            r = 0
            for word in unpack(raw):
                r = t16[r ^ word]
            crc = ((r & 0xFF) << 8) | (r >> 8) if little else r
            if n & 1:
                crc = ((crc << 8) & 0xFFFF) ^ t8[((crc >> 8) ^ raw[n - 1]) & 0xFF]
            if crc == raw[-2] | (raw[-1] << 8):
                body = raw[7:-2]
                if body[0] == STATUS_INSTRUCTION and len(body) >= 2 and STUFF_PATTERN not in body:
                    packet = StatusPacket(raw[4], body[1], body[2:])
                else:  # stuffed, an instruction or a fast read's aggregate status
                    with contextlib.suppress(ProtocolError):
                        packet = packet_from_body(raw[4], body)
            else:
                stats.crc_errors += 1
            if packet is None:
                stats.dropped_frames += 1
                self._skip(1)
                pos = idx + 1
                continue
            out.append(packet)
            pos = idx + total
            self._seen_packet, self._in_garbage = True, False
        stats.frames += len(out)
        del buf[:pos]
        return out
