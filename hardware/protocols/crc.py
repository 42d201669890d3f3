"""CRC-16 variants of the serial protocols, as pure functions of ``bytes``.

- ``crc16_x25``: the Bota frame check (``docs/protocols/bota-serial.md``): poly 0x1021 reflected (0x8408),
  init 0xFFFF, input and output reflected, final XOR 0xFFFF; ``crc16_x25(b"123456789") == 0x906E``.
- ``crc16_dynamixel``: DYNAMIXEL Protocol 2.0 (``docs/protocols/dynamixel.md``): CRC-16/BUYPASS,
  poly 0x8005, init 0, no reflection, no final XOR; ``crc16_dynamixel(b"123456789") == 0xFEE8``.

The fast forms are table or C driven; ``*_bitwise`` are the textbook definitions, kept as the
reference the property tests compare against.
"""

from __future__ import annotations

import binascii
import struct
import sys

import numpy as np

X25_POLY_REFLECTED = 0x8408
X25_INIT = 0xFFFF
X25_XOROUT = 0xFFFF
DXL_POLY = 0x8005

# Bit reversal of a byte; a reflected CRC equals the plain CRC of bit-reversed bytes, reversed.
_REV8 = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))


def _reverse16(x: int) -> int:
    return (_REV8[x & 0xFF] << 8) | _REV8[x >> 8]


def crc16_x25(data: bytes | bytearray | memoryview) -> int:
    """CRC-16/X-25 of ``data`` (C speed through ``binascii.crc_hqx`` on bit-reversed bytes)."""
    plain = binascii.crc_hqx(bytes(data).translate(_REV8), X25_INIT)
    return _reverse16(plain) ^ X25_XOROUT


def crc16_x25_bitwise(data: bytes | bytearray) -> int:
    """Reference CRC-16/X-25, bit by bit (reflected algorithm with poly 0x8408)."""
    crc = X25_INIT
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ X25_POLY_REFLECTED if crc & 1 else crc >> 1
    return crc ^ X25_XOROUT


def _dxl_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ DXL_POLY) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return tuple(table)


DXL_TABLE8 = _dxl_table()


def _dxl_table16() -> list[int]:
    """16 data bits per step. For a 16-bit MSB-first CRC the register after a big-endian word
    ``w`` depends on ``crc ^ w`` only: ``crc' = T[crc ^ w]``. Words are read in the machine's
    byte order, so the register is kept byte-swapped (``r = swap(crc)``) when that is little
    endian: ``r' = swap(T[swap(r ^ w_native)])``; the table stores that composition."""
    t8 = np.array(DXL_TABLE8, dtype=np.int64)
    x = np.arange(1 << 16, dtype=np.int64)
    first = t8[x >> 8]
    table = ((first << 8) & 0xFFFF) ^ t8[(first >> 8) ^ (x & 0xFF)]
    if NATIVE_LITTLE_ENDIAN:
        swap = ((x & 0xFF) << 8) | (x >> 8)
        table = swap[table[swap]]
    return table.tolist()


NATIVE_LITTLE_ENDIAN = sys.byteorder == "little"
DXL_TABLE16 = _dxl_table16()


def crc16_dynamixel(
    data: bytes | bytearray | memoryview, crc: int = 0, length: int | None = None
) -> int:
    """CRC-16/BUYPASS of ``data`` (its first ``length`` bytes if given), 16 bits per step;
    ``crc`` continues a running CRC."""
    n = len(data) if length is None else length
    words = _WORDS.get(n)
    if words is None:
        words = _WORDS.setdefault(n, struct.Struct(f"={n // 2}H"))
    t16 = DXL_TABLE16
    r = ((crc & 0xFF) << 8) | (crc >> 8) if NATIVE_LITTLE_ENDIAN else crc
    for word in words.unpack_from(data):
        r = t16[r ^ word]
    crc = ((r & 0xFF) << 8) | (r >> 8) if NATIVE_LITTLE_ENDIAN else r
    if n & 1:
        crc = ((crc << 8) & 0xFFFF) ^ DXL_TABLE8[((crc >> 8) ^ data[n - 1]) & 0xFF]
    return crc


_WORDS: dict[int, struct.Struct] = {}  # native-order word unpackers by data length
_POSITION_TABLES: dict[int, np.ndarray] = {}


def crc16_position_table(length: int) -> np.ndarray:
    """(length, 256) uint16: the CRC-16/BUYPASS contribution of each byte value at each position
    of a ``length``-byte message. The CRC is linear (init 0, no final XOR), so a message's CRC is
    the XOR of one entry per byte: a whole batch of packets is checked in a few numpy calls."""
    table = _POSITION_TABLES.get(length)
    if table is None:
        t8 = np.array(DXL_TABLE8, dtype=np.int64)
        rows = np.empty((length, 256), np.int64)
        r = t8.copy()  # a value in the last position: one table step
        for j in range(length - 1, -1, -1):
            rows[j] = r
            r = ((r << 8) & 0xFFFF) ^ t8[r >> 8]  # one more zero byte after it
        table = _POSITION_TABLES.setdefault(length, rows.astype(np.uint16))
    return table


def crc16_dynamixel_bitwise(data: bytes | bytearray) -> int:
    """Reference CRC-16/BUYPASS, bit by bit (MSB first, poly 0x8005, init 0)."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ DXL_POLY) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc
