"""DYNAMIXEL Protocol 2.0 packets: the packet types, byte stuffing, framing with the CRC, and the
aggregate status packet of the fast reads (``docs/protocols/dynamixel.md``). Pure functions; the
codec (``dynamixel``) and the stream parser (``dynamixel_stream``) both build on this module.

``FF FF FD 00 | ID | LEN_L LEN_H | INST | params | CRC_L CRC_H``. Status packets carry INST 0x55
and an ERR byte before their parameters. Stuffing covers the instruction through the last
parameter; LEN counts the stuffed bytes plus the CRC; the CRC covers the stuffed packet from the
first ``FF``.

The answer to FAST_SYNC_READ (0x8A) and FAST_BULK_READ (0x9A) is one status packet from the
broadcast id ``0xFE``: after INST 0x55 one block ``ERR | ID | data (N_i) | CRC_L CRC_H`` per
listed servo, in list order, LEN = 1 + sum(N_i + 4). A block's CRC covers the packet from the
first ``FF`` through that block's data (each servo continues the CRC of what is already on the
bus), so the last block's CRC is the packet's. The aggregate packet is never stuffed (LEN is
fixed by the first servo before the others speak); as a ``StatusPacket`` its ``error`` is the
first block's ERR and its ``params`` the rest, without the packet CRC.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.protocols import _compiled
from twin.hardware.protocols.crc import crc16_dynamixel
from twin.hardware.protocols.dynamixel_table import (
    ALERT_BIT,
    BROADCAST_ID,
    ERROR_CODE_MASK,
    MAX_ID,
    STATUS_INSTRUCTION,
    StatusError,
)

HEADER = b"\xff\xff\xfd\x00"
STUFF_PATTERN = b"\xff\xff\xfd"
_STUFFED = b"\xff\xff\xfd\xfd"
MIN_PACKET_LENGTH = 10  # header 4, id, len 2, inst, crc 2
MAX_LEN_FIELD = 0xFFFF
#: Bytes of a fast-read block besides its data: ERR, ID, CRC L/H.
FAST_BLOCK_OVERHEAD = 4


class InstructionPacket(NamedTuple):
    """Host -> device. ``params`` are the unstuffed parameter bytes. (Named tuples: a stream
    parser makes thousands per second; compare packets of one kind only.)"""

    id: int
    instruction: int
    params: bytes = b""


class StatusPacket(NamedTuple):
    """Device -> host. ``error`` is the ERR byte (bit 7 alert, bits 0..6 a ``StatusError``)."""

    id: int
    error: int
    params: bytes = b""

    @property
    def alert(self) -> bool:
        """A hardware error is latched in the device (read Hardware Error Status)."""
        return bool(self.error & ALERT_BIT)

    @property
    def error_code(self) -> StatusError:
        code = self.error & ERROR_CODE_MASK
        try:
            return StatusError(code)
        except ValueError:
            return StatusError.RESULT_FAIL


Packet = InstructionPacket | StatusPacket


# --- stuffing, framing ------------------------------------------------------------------------------


def stuff(body: bytes) -> bytes:
    """Insert an extra ``FD`` after every ``FF FF FD`` (the pattern cannot overlap itself)."""
    return bytes(body).replace(STUFF_PATTERN, _STUFFED)


def unstuff(body: bytes) -> bytes:
    """Undo ``stuff``; ``ProtocolError`` for an ``FF FF FD`` that was not stuffed."""
    out = bytes(body).replace(_STUFFED, STUFF_PATTERN)
    if out.count(STUFF_PATTERN) != bytes(body).count(_STUFFED):
        raise ProtocolError("unstuffed FF FF FD inside a packet body")
    return out


def check_id(pid: int, allow_broadcast: bool) -> None:
    if not isinstance(pid, int) or not (
        0 <= pid <= MAX_ID or (allow_broadcast and pid == BROADCAST_ID)
    ):
        allowed = f"0..{MAX_ID}" + (" or 0xFE (broadcast)" if allow_broadcast else "")
        raise InvalidArgumentError(f"DYNAMIXEL id must be {allowed}, got {pid!r}")


def _frame(pid: int, body: bytes) -> bytes:
    stuffed = stuff(body)
    length = len(stuffed) + 2
    if length > MAX_LEN_FIELD:
        raise InvalidArgumentError(f"packet too long: LEN {length} > {MAX_LEN_FIELD}")
    head = HEADER + bytes((pid, length & 0xFF, length >> 8)) + stuffed
    crc = crc16_dynamixel(head)
    return head + bytes((crc & 0xFF, crc >> 8))


def encode_instruction(packet: InstructionPacket) -> bytes:
    """Wire bytes of an instruction packet."""
    check_id(packet.id, allow_broadcast=True)
    if not 0 <= packet.instruction <= 0xFF or packet.instruction == STATUS_INSTRUCTION:
        raise InvalidArgumentError(
            f"instruction must be a byte other than 0x55, got {packet.instruction!r}"
        )
    return _frame(packet.id, bytes((packet.instruction,)) + bytes(packet.params))


def encode_status(packet: StatusPacket) -> bytes:
    """Wire bytes of a status packet (a servo's own: ids 0..252)."""
    check_id(packet.id, allow_broadcast=False)
    if not 0 <= packet.error <= 0xFF:
        raise InvalidArgumentError(f"status ERR must be a byte, got {packet.error!r}")
    return _frame(packet.id, bytes((STATUS_INSTRUCTION, packet.error)) + bytes(packet.params))


def packet_crc_ok(raw: bytes) -> bool:
    return len(raw) >= MIN_PACKET_LENGTH and crc16_dynamixel(raw[:-2]) == raw[-2] | (raw[-1] << 8)


def decode_packet(raw: bytes) -> Packet:
    """Decode one whole packet (status or instruction); ``ProtocolError`` says what is wrong."""
    raw = bytes(raw)
    if len(raw) < MIN_PACKET_LENGTH:
        raise ProtocolError(f"a packet is at least {MIN_PACKET_LENGTH} bytes, got {len(raw)}")
    if raw[:3] != HEADER[:3]:
        raise ProtocolError(f"header must be FF FF FD, got {raw[:3].hex(' ')}")
    if raw[3] != 0:
        raise ProtocolError(f"reserved byte must be 0x00, got 0x{raw[3]:02X}")
    length = raw[5] | raw[6] << 8
    if length + 7 != len(raw):
        raise ProtocolError(f"LEN {length} does not match {len(raw)} bytes (expected LEN + 7)")
    if not packet_crc_ok(raw):
        raise ProtocolError("CRC-16 mismatch")
    return packet_from_body(raw[4], raw[7:-2])


def packet_from_body(pid: int, body: bytes) -> Packet:
    """The packet of a CRC-checked body (instruction byte onwards, CRC excluded), unstuffed
    unless it is the (never stuffed) aggregate status of a fast read."""
    if not body:
        raise ProtocolError("packet without an instruction byte")
    status = body[0] == STATUS_INSTRUCTION
    if STUFF_PATTERN in body and not (status and pid == BROADCAST_ID):
        body = unstuff(body)
    if status:
        if len(body) < 2:
            raise ProtocolError("status packet without ERR byte")
        return StatusPacket(pid, body[1], body[2:])
    return InstructionPacket(pid, body[0], body[1:])


# --- the aggregate status of FAST_SYNC_READ / FAST_BULK_READ ----------------------------------------


def fast_status_length(lengths: Sequence[int]) -> int:
    """LEN of the aggregate status for blocks of ``lengths`` data bytes: 1 + sum(N_i + 4)."""
    return 1 + sum(n + FAST_BLOCK_OVERHEAD for n in lengths)


def _fast_head(length: int) -> bytes:
    return HEADER + bytes((BROADCAST_ID, length & 0xFF, length >> 8, STATUS_INSTRUCTION))


def encode_fast_status(blocks: Sequence[StatusPacket], len_field: int | None = None) -> bytes:
    """Wire bytes of the aggregate status packet of ``blocks`` (one ``StatusPacket`` per servo:
    its id, ERR and data), in list order (module doc). ``len_field`` overrides LEN: the servos
    that answer before a silent one put out the first blocks of a longer packet."""
    if not blocks:
        raise InvalidArgumentError("a fast-read status needs at least one block")
    length = fast_status_length([len(b.params) for b in blocks]) if len_field is None else len_field
    if not 0 < length <= MAX_LEN_FIELD:
        raise InvalidArgumentError(f"fast-read status LEN must be 1..{MAX_LEN_FIELD}, got {length}")
    for b in blocks:
        check_id(b.id, allow_broadcast=False)
        if not 0 <= b.error <= 0xFF:
            raise InvalidArgumentError(f"status ERR must be a byte, got {b.error!r}")
    return fast_status_wire(length, [(b.error, b.id, b.params) for b in blocks])


_KERNELS: dict[int, object] = {}  # the compiled codec (or None), looked up once


def load_compiled() -> None:
    """Load the compiled codec ``fast_status_wire`` uses now (a device emulator does it when it
    starts, so that its first answer does not wait for the load)."""
    _KERNELS.setdefault(0, _compiled.kernels())


def fast_status_wire(len_field: int, blocks: Sequence[tuple[int, int, bytes]]) -> bytes:
    """``encode_fast_status`` of checked ``(err, id, data)`` blocks and LEN ``len_field``
    (a device's hot path: nothing is checked here; the block CRCs by ``fill_block_crcs``)."""
    out = bytearray(_fast_head(len_field))
    ends = []
    for err, pid, data in blocks:
        out.append(err)
        out.append(pid)
        out += data
        ends.append(len(out))
        out += b"\0\0"
    fill_block_crcs(out, ends)
    return bytes(out)


def fill_block_crcs(buf: bytearray, ends: Sequence[int]) -> None:
    """The CRC of every block of an aggregate status laid out in ``buf``, into the two bytes at
    each of ``ends`` (ascending indices): the running CRC-16 over ``buf[:end]``, so each step
    covers the previous block's CRC bytes and this block's ERR, ID and data. In one compiled
    call where numba is (``_compiled.block_crcs``)."""
    if not _KERNELS:
        load_compiled()
    kernels = _KERNELS[0]
    if kernels is not None:
        kernels.block_crcs(np.frombuffer(buf, np.uint8), np.asarray(ends, np.int64))
        return
    crc, done = 0, 0  # the running CRC over buf[:done]
    for end in np.asarray(ends).tolist():
        crc = crc16_dynamixel(buf[done:end], crc)
        buf[end], buf[end + 1] = crc & 0xFF, crc >> 8
        done = end


def decode_fast_status(
    packet: StatusPacket, ids: Sequence[int], lengths: Sequence[int]
) -> list[StatusPacket]:
    """The blocks of an aggregate status (a CRC-checked packet from the stream parser), one
    ``StatusPacket`` per servo in the order of ``ids``, each with ``lengths[i]`` data bytes.
    ``ProtocolError`` for a packet not from 0xFE, the wrong size, an unexpected id or a block
    CRC that does not match."""
    if packet.id != BROADCAST_ID:
        raise ProtocolError(f"a fast-read status comes from id 0xFE, got {packet.id}")
    body = bytes((packet.error,)) + bytes(packet.params)
    want = fast_status_length(lengths) - 3  # LEN less INST and the packet CRC
    if len(body) != want:
        raise ProtocolError(
            f"fast-read status has {len(body)} bytes of blocks, expected {want} for "
            f"{len(lengths)} servos"
        )
    crc = crc16_dynamixel(_fast_head(want + 3))
    out, pos, last = [], 0, len(ids) - 1
    for i, (pid, n) in enumerate(zip(ids, lengths)):
        end = pos + 2 + n
        if body[pos + 1] != pid:
            raise ProtocolError(f"fast-read block {i} is from id {body[pos + 1]}, expected {pid}")
        out.append(StatusPacket(pid, body[pos], body[pos + 2 : end]))
        if i == last:
            break  # its CRC is the packet's, checked by the parser
        crc = crc16_dynamixel(body, crc, end) if pos == 0 else crc16_dynamixel(body[pos:end], crc)
        if crc != body[end] | body[end + 1] << 8:
            raise ProtocolError(f"fast-read block {i} (id {pid}): CRC-16 mismatch")
        crc = crc16_dynamixel(body[end : end + 2], crc)
        pos = end + 2
    return out
