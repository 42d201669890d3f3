"""DYNAMIXEL Protocol 2.0 packets: pure encoders/decoders, byte stuffing, CRC and a stream parser.

``FF FF FD 00 | ID | LEN_L LEN_H | INST | params | CRC_L CRC_H`` (``docs/protocols/dynamixel.md``).
Status packets carry INST 0x55 and an ERR byte before their parameters. Stuffing covers the
instruction through the last parameter; LEN counts the stuffed bytes plus the CRC; the CRC covers
the stuffed packet from the first ``FF``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.protocols.crc import crc16_dynamixel
from twin.hardware.protocols.dynamixel_table import (
    ALERT_BIT,
    BROADCAST_ID,
    ERROR_CODE_MASK,
    MAX_ID,
    STATUS_INSTRUCTION,
    Instruction,
    Register,
    StatusError,
)

HEADER = b"\xff\xff\xfd\x00"
_STUFF_PATTERN = b"\xff\xff\xfd"
_STUFFED = b"\xff\xff\xfd\xfd"
MIN_PACKET_LENGTH = 10  # header 4, id, len 2, inst, crc 2
MAX_LEN_FIELD = 0xFFFF


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
    return bytes(body).replace(_STUFF_PATTERN, _STUFFED)


def unstuff(body: bytes) -> bytes:
    """Undo ``stuff``; ``ProtocolError`` for an ``FF FF FD`` that was not stuffed."""
    out = bytes(body).replace(_STUFFED, _STUFF_PATTERN)
    if out.count(_STUFF_PATTERN) != bytes(body).count(_STUFFED):
        raise ProtocolError("unstuffed FF FF FD inside a packet body")
    return out


def _check_id(pid: int, allow_broadcast: bool) -> None:
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
    _check_id(packet.id, allow_broadcast=True)
    if not 0 <= packet.instruction <= 0xFF or packet.instruction == STATUS_INSTRUCTION:
        raise InvalidArgumentError(
            f"instruction must be a byte other than 0x55, got {packet.instruction!r}"
        )
    return _frame(packet.id, bytes((packet.instruction,)) + bytes(packet.params))


def encode_status(packet: StatusPacket) -> bytes:
    """Wire bytes of a status packet."""
    _check_id(packet.id, allow_broadcast=True)
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
    return _packet(raw[4], raw[7:-2])


def _packet(pid: int, stuffed: bytes) -> Packet:
    """The packet of a CRC-checked stuffed body (instruction byte onwards, CRC excluded)."""
    body = unstuff(stuffed) if _STUFF_PATTERN in stuffed else stuffed
    if body[0] == STATUS_INSTRUCTION:
        if len(body) < 2:
            raise ProtocolError("status packet without ERR byte")
        return StatusPacket(pid, body[1], body[2:])
    return InstructionPacket(pid, body[0], body[1:])


# --- values -------------------------------------------------------------------------------------------


def encode_value(value: int, size: int, signed: bool = False) -> bytes:
    """Little-endian ``size``-byte integer; ``InvalidArgumentError`` if it does not fit."""
    if size not in (1, 2, 4):
        raise InvalidArgumentError(f"register size must be 1, 2 or 4 bytes, got {size}")
    lo, hi = (
        (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if signed else (0, (1 << 8 * size) - 1)
    )
    if not isinstance(value, int) or not lo <= value <= hi:
        kind = "signed" if signed else "unsigned"
        raise InvalidArgumentError(
            f"value {value!r} does not fit a {kind} {size}-byte register [{lo}, {hi}]"
        )
    return int(value).to_bytes(size, "little", signed=signed)


def decode_value(data: bytes, signed: bool = False) -> int:
    return int.from_bytes(data, "little", signed=signed)


def encode_register(reg: Register, value: int) -> bytes:
    return encode_value(value, reg.size, reg.signed)


def decode_register(reg: Register, data: bytes, offset: int = 0) -> int:
    """Value of ``reg`` from ``data`` that starts at address ``reg.address - offset``."""
    start = reg.address - offset
    return decode_value(data[start : start + reg.size], reg.signed)


def _u16(value: int, name: str) -> bytes:
    if not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise InvalidArgumentError(f"{name} must be 0..65535, got {value!r}")
    return struct.pack("<H", value)


# --- instruction builders (host side) -------------------------------------------------------------------


def ping(pid: int) -> InstructionPacket:
    _check_id(pid, allow_broadcast=True)
    return InstructionPacket(pid, Instruction.PING)


def read(pid: int, address: int, length: int) -> InstructionPacket:
    _check_id(pid, allow_broadcast=False)
    return InstructionPacket(
        pid, Instruction.READ, _u16(address, "address") + _u16(length, "length")
    )


def write(pid: int, address: int, data: bytes, *, registered: bool = False) -> InstructionPacket:
    """WRITE (or REG_WRITE with ``registered``) of ``data`` at ``address``."""
    _check_id(pid, allow_broadcast=True)
    if not data:
        raise InvalidArgumentError("write needs at least one data byte")
    inst = Instruction.REG_WRITE if registered else Instruction.WRITE
    return InstructionPacket(pid, inst, _u16(address, "address") + bytes(data))


def action(pid: int = BROADCAST_ID) -> InstructionPacket:
    _check_id(pid, allow_broadcast=True)
    return InstructionPacket(pid, Instruction.ACTION)


def reboot(pid: int) -> InstructionPacket:
    _check_id(pid, allow_broadcast=True)
    return InstructionPacket(pid, Instruction.REBOOT)


def factory_reset(pid: int, mode: int) -> InstructionPacket:
    _check_id(pid, allow_broadcast=True)
    if mode not in (0xFF, 0x01, 0x02):
        raise InvalidArgumentError(f"factory reset mode must be 0xFF, 0x01 or 0x02, got {mode!r}")
    return InstructionPacket(pid, Instruction.FACTORY_RESET, bytes((mode,)))


def _ids(ids: Sequence[int]) -> bytes:
    if not ids:
        raise InvalidArgumentError("need at least one device id")
    for i in ids:
        _check_id(i, allow_broadcast=False)
    if len(set(ids)) != len(ids):
        raise InvalidArgumentError(f"device ids must be distinct, got {list(ids)}")
    return bytes(ids)


def sync_read(address: int, length: int, ids: Sequence[int]) -> InstructionPacket:
    """SYNC_READ to the broadcast id; each listed device answers in list order."""
    params = _u16(address, "address") + _u16(length, "length") + _ids(ids)
    return InstructionPacket(BROADCAST_ID, Instruction.SYNC_READ, params)


def sync_write(address: int, length: int, data: Mapping[int, bytes]) -> InstructionPacket:
    """SYNC_WRITE of ``length`` bytes per device (``{id: data}``); no reply."""
    _ids(list(data))
    body = bytearray(_u16(address, "address") + _u16(length, "length"))
    for pid, chunk in data.items():
        if len(chunk) != length:
            raise InvalidArgumentError(
                f"sync write data for id {pid} is {len(chunk)} bytes, expected {length}"
            )
        body += bytes((pid,)) + bytes(chunk)
    return InstructionPacket(BROADCAST_ID, Instruction.SYNC_WRITE, bytes(body))


def bulk_read(items: Sequence[tuple[int, int, int]]) -> InstructionPacket:
    """BULK_READ of ``(id, address, length)`` per device; answers come in list order."""
    _ids([i for i, _, _ in items])
    body = b"".join(bytes((i,)) + _u16(a, "address") + _u16(n, "length") for i, a, n in items)
    return InstructionPacket(BROADCAST_ID, Instruction.BULK_READ, body)


def bulk_write(items: Sequence[tuple[int, int, bytes]]) -> InstructionPacket:
    """BULK_WRITE of ``(id, address, data)`` per device; no reply."""
    _ids([i for i, _, _ in items])
    body = b"".join(
        bytes((i,)) + _u16(a, "address") + _u16(len(d), "length") + bytes(d) for i, a, d in items
    )
    return InstructionPacket(BROADCAST_ID, Instruction.BULK_WRITE, body)


# --- parameter parsers (device side) ---------------------------------------------------------------------


def _need(params: bytes, n: int, what: str) -> None:
    if len(params) < n:
        raise ProtocolError(f"{what} needs at least {n} parameter bytes, got {len(params)}")


def parse_read(params: bytes) -> tuple[int, int]:
    """``(address, length)`` of a READ."""
    _need(params, 4, "READ")
    return struct.unpack_from("<HH", params)


def parse_write(params: bytes) -> tuple[int, bytes]:
    """``(address, data)`` of a WRITE / REG_WRITE."""
    _need(params, 3, "WRITE")
    return params[0] | params[1] << 8, bytes(params[2:])


def parse_sync_read(params: bytes) -> tuple[int, int, tuple[int, ...]]:
    """``(address, length, ids)`` of a SYNC_READ."""
    _need(params, 5, "SYNC_READ")
    address, length = struct.unpack_from("<HH", params)
    return address, length, tuple(params[4:])


def parse_sync_write(params: bytes) -> tuple[int, int, dict[int, bytes]]:
    """``(address, length, {id: data})`` of a SYNC_WRITE."""
    _need(params, 4, "SYNC_WRITE")
    address, length = struct.unpack_from("<HH", params)
    rest = params[4:]
    if length == 0 or len(rest) % (length + 1):
        raise ProtocolError(
            f"SYNC_WRITE data of {len(rest)} bytes is not a multiple of 1 + {length}"
        )
    step = length + 1
    return (
        address,
        length,
        {rest[i]: bytes(rest[i + 1 : i + step]) for i in range(0, len(rest), step)},
    )


def parse_bulk_read(params: bytes) -> list[tuple[int, int, int]]:
    """``[(id, address, length), ...]`` of a BULK_READ."""
    if not params or len(params) % 5:
        raise ProtocolError(f"BULK_READ parameters must be 5 bytes per device, got {len(params)}")
    return [
        (params[i], *struct.unpack_from("<HH", params, i + 1)) for i in range(0, len(params), 5)
    ]


def parse_bulk_write(params: bytes) -> list[tuple[int, int, bytes]]:
    """``[(id, address, data), ...]`` of a BULK_WRITE."""
    out, i = [], 0
    while i < len(params):
        _need(params[i:], 5, "BULK_WRITE entry")
        pid, address, length = params[i], *struct.unpack_from("<HH", params, i + 1)
        data = params[i + 5 : i + 5 + length]
        if len(data) != length:
            raise ProtocolError(
                f"BULK_WRITE entry for id {pid} is short: {len(data)} of {length} bytes"
            )
        out.append((pid, address, bytes(data)))
        i += 5 + length
    return out


def ping_status(pid: int, model_number: int, firmware: int, error: int = 0) -> StatusPacket:
    """A device's answer to PING: model number L/H and firmware version."""
    return StatusPacket(pid, error, encode_value(model_number, 2) + encode_value(firmware, 1))


def parse_ping_status(packet: StatusPacket) -> tuple[int, int]:
    """``(model_number, firmware)`` of a PING answer."""
    _need(packet.params, 3, "PING status")
    return packet.params[0] | packet.params[1] << 8, packet.params[2]


# --- stream parser (its own module; re-exported here, after everything it imports is defined) ----

from twin.hardware.protocols.dynamixel_stream import DynamixelStreamParser  # noqa: E402, F401
