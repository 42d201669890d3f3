"""DYNAMIXEL Protocol 2.0 codec: values, instruction builders (host side) and parameter parsers
(device side), as pure functions (``docs/protocols/dynamixel.md``).

Packet types, stuffing, framing and the fast reads' aggregate status live in
``dynamixel_packet``, the stream parser in ``dynamixel_stream``; both are re-exported here, so
``dynamixel`` is the one name to import.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.protocols.dynamixel_packet import (
    FAST_BLOCK_OVERHEAD,
    HEADER,
    MAX_LEN_FIELD,
    MIN_PACKET_LENGTH,
    InstructionPacket,
    Packet,
    StatusPacket,
    decode_fast_status,
    decode_packet,
    encode_fast_status,
    encode_instruction,
    encode_status,
    fast_status_length,
    fast_status_wire,
    packet_crc_ok,
    packet_from_body,
    stuff,
    unstuff,
)
from twin.hardware.protocols.dynamixel_packet import check_id as _check_id
from twin.hardware.protocols.dynamixel_stream import DynamixelStreamParser
from twin.hardware.protocols.dynamixel_table import BROADCAST_ID, Instruction, Register

__all__ = [
    "FAST_BLOCK_OVERHEAD",
    "HEADER",
    "MAX_LEN_FIELD",
    "MIN_PACKET_LENGTH",
    "DynamixelStreamParser",
    "InstructionPacket",
    "InvalidArgumentError",
    "Packet",
    "ProtocolError",
    "StatusPacket",
    "decode_fast_status",
    "decode_packet",
    "encode_fast_status",
    "encode_instruction",
    "encode_status",
    "fast_status_length",
    "fast_status_wire",
    "packet_crc_ok",
    "packet_from_body",
    "stuff",
    "unstuff",
]


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


def fast_sync_read(address: int, length: int, ids: Sequence[int]) -> InstructionPacket:
    """FAST_SYNC_READ: parameters as SYNC_READ; one aggregate status packet answers
    (``decode_fast_status``)."""
    return InstructionPacket(
        BROADCAST_ID, Instruction.FAST_SYNC_READ, sync_read(address, length, ids).params
    )


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


def fast_bulk_read(items: Sequence[tuple[int, int, int]]) -> InstructionPacket:
    """FAST_BULK_READ: parameters as BULK_READ; one aggregate status packet answers."""
    return InstructionPacket(BROADCAST_ID, Instruction.FAST_BULK_READ, bulk_read(items).params)


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
