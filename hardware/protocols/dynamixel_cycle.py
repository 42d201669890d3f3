"""The packets of one bus cycle, laid out once: the goal SYNC_WRITE and the present-values read
(``docs/protocols/dynamixel.md``, "The bus cycle").

A control cycle sends the same instructions to the same servos every period; only the goal
values change. ``GoalWriter`` keeps the SYNC_WRITE's bytes in a numpy record array (id, value per
servo) behind a fixed head, so a cycle's packet is one field assignment, one ``tobytes`` and the
CRC. ``PresentLayout`` holds the cycle's read instruction (FAST_SYNC_READ or SYNC_READ of Present
Current, Velocity and Position) as ready bytes and decodes the answer with one ``frombuffer``:
the fast read's aggregate status as records ``ERR | ID | current | velocity | position | CRC``,
its ids compared as bytes and its block CRCs checked in one pass of the 16-bit table over the
packet. With numba (``_compiled``) both run compiled: the goal's bytes and CRC written into a
buffer laid out once, and the fast read's answer checked, decoded and converted to joint units
(``PresentLayout.decode_joints``) in one call each; the same bytes and values as the Python
forms, which run without numba or with ``TWIN_HARDWARE_COMPILED=0``. Pure codec: no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.protocols import _compiled
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.crc import DXL_TABLE16, NATIVE_LITTLE_ENDIAN, crc16_dynamixel
from twin.hardware.protocols.dynamixel_packet import (
    FAST_BLOCK_OVERHEAD,
    HEADER,
    STUFF_PATTERN,
    fill_block_crcs,
)
from twin.hardware.protocols.dynamixel_table import (
    ALERT_BIT,
    BROADCAST_ID,
    PRESENT_BLOCK_ADDRESS,
    PRESENT_BLOCK_LENGTH,
    STATUS_INSTRUCTION,
    Instruction,
    Register,
)

_VALUE_TYPES = {(1, False): "u1", (2, False): "<u2", (2, True): "<i2", (4, False): "<u4"}
_VALUE_TYPES[(4, True)] = "<i4"
_PRESENT_FIELDS = [("current", "<i2"), ("velocity", "<i4"), ("position", "<i4")]
#: One block of a fast read's aggregate status for the present block (14 bytes).
FAST_PRESENT_BLOCK = np.dtype([("err", "u1"), ("id", "u1"), *_PRESENT_FIELDS, ("crc", "<u2")])
PRESENT_RECORD = np.dtype(_PRESENT_FIELDS)


def sync_write_length(n_servos: int, size: int) -> int:
    """Wire bytes of a SYNC_WRITE of ``size`` bytes to each of ``n_servos`` (unstuffed)."""
    return dxl.MIN_PACKET_LENGTH + 4 + n_servos * (1 + size)


def read_request_length(n_servos: int) -> int:
    """Wire bytes of a (FAST_)SYNC_READ instruction to ``n_servos``."""
    return dxl.MIN_PACKET_LENGTH + 4 + n_servos


def present_reply_length(n_servos: int, fast: bool) -> int:
    """Wire bytes of the answer to the cycle's read: one aggregate status packet (fast) or one
    status packet per servo."""
    if fast:
        return 7 + dxl.fast_status_length([PRESENT_BLOCK_LENGTH] * n_servos)
    return n_servos * (dxl.MIN_PACKET_LENGTH + 1 + PRESENT_BLOCK_LENGTH)


class GoalWriter:
    """SYNC_WRITE of one register (``reg``) to ``ids``, its bytes kept between cycles."""

    def __init__(self, reg: Register, ids: Sequence[int]) -> None:
        dxl.sync_write(reg.address, reg.size, {pid: bytes(reg.size) for pid in ids})  # checks ids
        self.reg, self.ids = reg, tuple(ids)
        code = _VALUE_TYPES[(reg.size, reg.signed)]
        info = np.iinfo(np.dtype(code))
        self._lo, self._hi = int(info.min), int(info.max)
        self._records = np.zeros(len(ids), np.dtype([("id", "u1"), ("value", code)]))
        self._records["id"] = ids
        self._shape = (len(ids),)
        length = sync_write_length(len(ids), reg.size) - 7
        self._head = HEADER + bytes(
            (BROADCAST_ID, length & 0xFF, length >> 8, Instruction.SYNC_WRITE)
        )
        self._head += reg.address.to_bytes(2, "little") + reg.size.to_bytes(2, "little")
        self._head_crc = crc16_dynamixel(self._head)
        kernels = _compiled.kernels()
        self._kernel = None if kernels is None else kernels.goal_wire
        # the compiled form's packet: head and ids laid out once, values and CRC per cycle
        self._wire = np.frombuffer(self._head + self._records.tobytes() + bytes(2), np.uint8).copy()

    def encode(self, values: np.ndarray, *, checked: bool = False) -> bytes:
        """Wire bytes for ``values`` (n,) raw register values, in the order of ``ids``;
        ``InvalidArgumentError`` if one does not fit the register (``checked``: the caller
        has range-checked them against a narrower range already)."""
        kernel = self._kernel
        if (
            kernel is not None
            and type(values) is np.ndarray
            and values.dtype == np.int64
            and values.shape == self._shape
            and values.flags.c_contiguous  # (the compiled entry takes its signature's layout)
        ):
            done = kernel(values, self._lo, self._hi, self._wire)
            if done == 0:
                return self._wire.tobytes()
            if done < 0:
                self._refuse(values)
            return self._encode(values)  # the stuffing pattern in a value: the codec stuffs it
        values = np.asarray(values)
        if not checked and (values.min() < self._lo or values.max() > self._hi):
            self._refuse(values)
        return self._encode(values)

    def _refuse(self, values: np.ndarray) -> None:
        raise InvalidArgumentError(
            f"{self.reg.name} values {values.tolist()} do not fit the register "
            f"[{self._lo}, {self._hi}]"
        )

    def _encode(self, values: np.ndarray) -> bytes:
        """``encode`` in Python: the records' values, their bytes, the CRC (stuffed if need
        be)."""
        self._records["value"] = values
        data = self._records.tobytes()
        if STUFF_PATTERN in data:  # rare (a value with FF FF FD in it): the codec stuffs it
            return dxl.encode_instruction(
                dxl.InstructionPacket(BROADCAST_ID, Instruction.SYNC_WRITE, self._head[8:] + data)
            )
        crc = crc16_dynamixel(data, self._head_crc)
        return self._head + data + bytes((crc & 0xFF, crc >> 8))


class PresentLayout:
    """The cycle's read of Present Current, Velocity and Position from ``ids`` (module doc):
    ``request`` is its instruction's wire bytes, ``reply_bytes`` the answer's, and
    ``reply_ids`` the senders the bus waits for."""

    def __init__(self, ids: Sequence[int], fast: bool) -> None:
        self.ids, self.fast = tuple(ids), fast
        n = len(ids)
        make = dxl.fast_sync_read if fast else dxl.sync_read
        self.instruction = make(PRESENT_BLOCK_ADDRESS, PRESENT_BLOCK_LENGTH, self.ids)
        self.request = dxl.encode_instruction(self.instruction)
        self.reply_bytes = present_reply_length(n, fast)
        self.reply_ids = (BROADCAST_ID,) if fast else self.ids
        self._id_bytes = bytes(self.ids)
        self.no_errors = bytes(n)
        if fast:
            block = PRESENT_BLOCK_LENGTH + FAST_BLOCK_OVERHEAD
            length = self.reply_bytes - 7
            self._head = HEADER + bytes(
                (BROADCAST_ID, length & 0xFF, length >> 8, STATUS_INSTRUCTION)
            )
            # Block k's CRC covers the packet from its first byte through block k's data (which
            # ends at an even offset: the CRC runs a 16-bit word at a time from block to block).
            ends = [len(self._head) + k * block + block - 2 for k in range(n - 1)]
            if any(e % 2 for e in ends):
                raise InvalidArgumentError("block ends must be at even offsets")
            self._spans = [(a // 2, e // 2, e) for a, e in zip([0, *ends[:-1]], ends)]
            self._words = struct.Struct(f"={ends[-1] // 2}H") if ends else None
            # the whole wire packet: every block's CRC, the last one being the packet's own
            last = self.reply_bytes - 2
            starts = [0, *ends]
            self._wire_spans = [(a // 2, e // 2, e) for a, e in zip(starts, [*ends, last])]
            self._wire_words = struct.Struct(f"={last // 2}H")
        kernels = _compiled.kernels() if fast else None
        self._kernel = None if kernels is None else kernels.present_joints
        self._consts: tuple[np.ndarray, np.ndarray] | None = None  # (terms, kernel constants)

    @property
    def compiled(self) -> bool:
        """Whether ``decode_joints`` runs compiled (a fast read, numba, not switched off)."""
        return self._kernel is not None

    def decode_joints(self, wire: bytes, terms: np.ndarray) -> tuple[np.ndarray, bytes] | None:
        """``decode_wire`` and the conversion to joint units in one compiled call (``compiled``
        only): ``(rows, err)`` with rows (3, n) read-only float64 q rad, qd rad/s, tau N m from
        ``terms`` (4, n) (``JointMap.present_terms``: the values of ``JointMap.from_present``)
        and the ERR bytes; ``None`` where ``decode_wire`` gives ``None``."""
        consts = self._consts
        if consts is None or consts[0] is not terms:
            head = np.frombuffer(self._head, np.uint8)
            packed = np.concatenate((np.ravel(terms), self.ids, head)).astype(np.float64)
            consts = self._consts = (terms, packed)
        rows = np.empty((3, len(self.ids)))
        flags = self._kernel(wire, consts[1], rows)
        if flags < 0:
            return None
        rows.flags.writeable = False
        return rows, (self.no_errors if flags == 0 else wire[8 :: FAST_PRESENT_BLOCK.itemsize])

    def decode(self, replies: Sequence[dxl.StatusPacket]) -> tuple[np.ndarray, bytes]:
        """``(records, err)`` of the answer: records (n,) with ``current``, ``velocity`` and
        ``position`` fields (raw register values) and the ERR bytes of the servos, in the order
        of ``ids``. ``ProtocolError`` for an answer of the wrong shape, ids or block CRCs."""
        if not self.fast:
            if any(len(r.params) != PRESENT_BLOCK_LENGTH for r in replies):
                raise ProtocolError(
                    f"a present-values reply must carry {PRESENT_BLOCK_LENGTH} data bytes, got "
                    f"{[len(r.params) for r in replies]}"
                )
            records = np.frombuffer(b"".join(r.params for r in replies), PRESENT_RECORD)
            return records, bytes(r.error for r in replies)
        (packet,) = replies
        body = bytes((packet.error,)) + packet.params + b"\0\0"  # the packet CRC was stripped
        size = FAST_PRESENT_BLOCK.itemsize
        if packet.id != BROADCAST_ID or len(body) != len(self.ids) * size:
            raise ProtocolError(
                f"fast-read status from id {packet.id} with {len(body) - 2} bytes of blocks; "
                f"expected id 0xFE and {len(self.ids) * size - 2}"
            )
        if body[1::size] != self._id_bytes:
            raise ProtocolError(
                f"fast-read blocks are from ids {list(body[1::size])}, expected {list(self.ids)}"
            )
        if self._words is not None:
            self._check_block_crcs(self._head + body)
        return np.frombuffer(body, FAST_PRESENT_BLOCK), body[0::size]

    def decode_wire(self, wire: bytes) -> tuple[np.ndarray, bytes] | None:
        """``decode`` straight from the answer's wire bytes (a fast read: exactly ``reply_bytes``
        of them), the packet's CRC and every block's checked in one pass; ``None`` for anything
        else (a short, long, stuffed, damaged or foreign answer), which the stream parser then
        takes (its counters, its resynchronisation, the lost-reply rules)."""
        if (
            not self.fast
            or len(wire) != self.reply_bytes
            or not wire.startswith(self._head)
            or STUFF_PATTERN in wire[8:]
            or wire[9 :: FAST_PRESENT_BLOCK.itemsize] != self._id_bytes
        ):
            return None
        try:
            self._check_block_crcs(wire, self._wire_words, self._wire_spans)
        except ProtocolError:
            return None
        records = np.frombuffer(wire, FAST_PRESENT_BLOCK, offset=len(self._head))
        return records, wire[8 :: FAST_PRESENT_BLOCK.itemsize]

    def _check_block_crcs(self, message: bytes, unpacker=None, spans=None) -> None:
        t16, r = DXL_TABLE16, 0  # r: the running CRC, byte-swapped on a little-endian host
        words = (unpacker or self._words).unpack_from(message)
        for k, (a, b, end) in enumerate(spans or self._spans):
            for word in words[a:b]:
                r = t16[r ^ word]
            crc = ((r & 0xFF) << 8) | (r >> 8) if NATIVE_LITTLE_ENDIAN else r
            if crc != message[end] | message[end + 1] << 8:
                raise ProtocolError(f"fast-read block {k} (id {self.ids[k]}): CRC-16 mismatch")


class CycleRequests:
    """The device side of the bus cycle: ``match`` recognises one read of the port that holds
    exactly the cycle's instructions to ``ids`` (the ``GoalWriter`` SYNC_WRITE of ``reg``, then
    the FAST_SYNC_READ of the present block, either alone or both in that order), unstuffed
    and CRC-intact, without building packets. Whatever else a device reads goes to its stream
    parser, which takes the same instructions to the same values (``tests/test_hw_emulator_cycle.py``)."""

    def __init__(self, reg: Register, ids: Sequence[int]) -> None:
        self.ids, self.reg = tuple(ids), reg
        n = len(ids)
        writer = GoalWriter(reg, ids)
        self.goal_bytes = sync_write_length(n, reg.size)
        #: The goal SYNC_WRITE's first 12 bytes: HEADER, 0xFE, LEN, SYNC_WRITE, address, size.
        self.goal_head = writer._head
        self._id_bytes = bytes(self.ids)
        code = _VALUE_TYPES[(reg.size, reg.signed)][-2:].replace("<", "")
        self._values = struct.Struct("<" + ("x" + np.dtype(code).char) * n).unpack_from
        self.read_request = PresentLayout(ids, True).request

    def match(self, data: bytes) -> tuple[tuple[int, ...] | None, bool] | None:
        """``(goal values in the order of ids, or None; whether the read follows)`` if ``data``
        is exactly the cycle's instructions (class doc), else None."""
        g = self.goal_bytes
        if not data.startswith(self.goal_head):
            return (None, True) if data == self.read_request else None
        n = len(data)
        if n != g and (n != g + len(self.read_request) or not data.endswith(self.read_request)):
            return None
        end = g - 2
        if (
            data[12 : end : 1 + self.reg.size] != self._id_bytes
            or STUFF_PATTERN in data[7:end]  # a stuffed body: the parser unstuffs it
            or crc16_dynamixel(data, 0, end) != data[end] | data[end + 1] << 8
        ):
            return None
        return self._values(data, len(self.goal_head)), n > g


class FastStatusWriter:
    """The aggregate status of a fast read of ``length`` data bytes from each of ``ids`` (a
    device's answer to the cycle's read, every servo answering), laid out once: ``encode``
    fills in each block's ERR byte and data and the CRCs (compiled where numba is), the same
    bytes as ``dxl.fast_status_wire`` (``tests/test_hw_emulator_cycle.py``)."""

    def __init__(self, ids: Sequence[int], length: int) -> None:
        n, self.length = len(ids), length
        len_field = dxl.fast_status_length([length] * n)
        self._buf = bytearray(
            dxl.fast_status_wire(len_field, [(0, pid, bytes(length)) for pid in ids])
        )
        block = length + FAST_BLOCK_OVERHEAD
        self._offsets = [8 + k * block for k in range(n)]
        self.ends = np.array([o + 2 + length for o in self._offsets], np.int64)
        #: The packet as a uint8 array (a compiled device's view: it fills in ERR, data and
        #: the CRCs at ``ends`` itself, then takes ``wire()``).
        self.array = np.frombuffer(self._buf, np.uint8)

    def encode(self, blocks: Sequence[tuple[int, bytes]]) -> bytes:
        """Wire bytes for one ``(err, data)`` per servo, in the order of ``ids`` (each ``data``
        exactly ``length`` bytes: not checked, a device's hot path)."""
        buf, n = self._buf, self.length
        for o, (err, data) in zip(self._offsets, blocks):
            buf[o] = err
            buf[o + 2 : o + 2 + n] = data
        fill_block_crcs(buf, self.ends)
        return bytes(buf)

    def wire(self) -> bytes:
        """The packet's bytes as they are (after ``array`` was filled in)."""
        return bytes(self._buf)


def alert_flags(err: bytes) -> np.ndarray:
    """(n,) bool: the alert bit of each ERR byte."""
    return (np.frombuffer(err, np.uint8) & ALERT_BIT) != 0
