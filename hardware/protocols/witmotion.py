"""WitMotion standard protocol (WT901 / JY901 family): 11-byte output packets and register writes.

Pure functions, no I/O (``docs/protocols/witmotion-imu.md``). Output packet:
``0x55 | TYPE | D0..D7 | SUM``, SUM the low byte of the sum of bytes 0..9, data four little-endian
int16. Host commands are 5 bytes ``FF AA reg dataL dataH`` without checksum.
"""

from __future__ import annotations

import enum
import math
import struct
from dataclasses import dataclass

import numpy as np
from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.protocols.stream import FixedFrameParser

PACKET_HEADER = 0x55
PACKET_LENGTH = 11
COMMAND_PREFIX = b"\xff\xaa"
COMMAND_LENGTH = 5
_DATA = struct.Struct("<4h")
STANDARD_GRAVITY = 9.80665

#: Scales of the output packets: raw int16 * scale = SI value.
ACCEL_SCALE = 16.0 * STANDARD_GRAVITY / 32768.0  # m/s^2 per LSB
GYRO_SCALE = math.radians(2000.0) / 32768.0  # rad/s per LSB
ANGLE_SCALE = math.pi / 32768.0  # rad per LSB (180 deg / 32768)
QUAT_SCALE = 1.0 / 32768.0
TEMP_SCALE = 0.01  # deg C per LSB


class PacketType(enum.IntEnum):
    TIME = 0x50
    ACCEL = 0x51
    GYRO = 0x52
    ANGLE = 0x53
    MAG = 0x54
    QUATERNION = 0x59
    READ_REPLY = 0x5F


class Reg(enum.IntEnum):
    """Configuration registers (host -> sensor)."""

    SAVE = 0x00  # value 0 saves the configuration
    RSW = 0x02  # output content: bit n enables packet type 0x50 + n
    RRATE = 0x03  # output rate code (RATE_CODES)
    BAUD = 0x04  # baud code (BAUD_CODES)
    READ_ADDR = 0x27  # register read: answered by a 0x5F packet of four registers
    KEY = 0x69  # unlock with 0xB588


UNLOCK_VALUE = 0xB588
RSW_DEFAULT = 0x1E  # 0x51..0x54
RRATE_DEFAULT = 0x06  # 10 Hz
BAUD_DEFAULT = 0x02  # 9600

#: RRATE codes -> output rate in Hz (0x0C single shot, 0x0D off are not rates).
RATE_CODES: dict[int, float] = {
    0x01: 0.2,
    0x02: 0.5,
    0x03: 1.0,
    0x04: 2.0,
    0x05: 5.0,
    0x06: 10.0,
    0x07: 20.0,
    0x08: 50.0,
    0x09: 100.0,
    0x0A: 125.0,
    0x0B: 200.0,
}
RATE_SINGLE, RATE_OFF = 0x0C, 0x0D
MAX_RATE_HZ = 200.0
BAUD_CODES: dict[int, int] = {
    1: 4800,
    2: 9600,
    3: 19200,
    4: 38400,
    5: 57600,
    6: 115200,
    7: 230400,
    8: 460800,
    9: 921600,
}


def rate_code(rate_hz: float) -> int:
    """RRATE code of ``rate_hz`` (one of ``RATE_CODES``' rates)."""
    for code, hz in RATE_CODES.items():
        if abs(hz - rate_hz) < 1e-9:
            return code
    raise InvalidArgumentError(
        f"IMU rate must be one of {sorted(RATE_CODES.values())} Hz, got {rate_hz}"
    )


def rsw_for(types) -> int:
    """RSW bit mask enabling packet ``types`` (each 0x50..0x5E)."""
    mask = 0
    for t in types:
        if not 0x50 <= int(t) <= 0x5E:
            raise InvalidArgumentError(f"output packet type must be 0x50..0x5E, got {t!r}")
        mask |= 1 << (int(t) - 0x50)
    return mask


def types_in(rsw: int) -> tuple[int, ...]:
    """Packet types enabled by an RSW mask, in output order."""
    return tuple(0x50 + n for n in range(15) if rsw >> n & 1)


def checksum(first10: bytes) -> int:
    return sum(first10[:10]) & 0xFF


def packet_is_valid(raw: bytes) -> bool:
    return len(raw) == PACKET_LENGTH and raw[0] == PACKET_HEADER and sum(raw[:10]) & 0xFF == raw[10]


@dataclass(frozen=True)
class Packet:
    """One output packet: ``kind`` (packet type byte) and its four raw int16 ``values``."""

    kind: int
    values: tuple[int, int, int, int]


def encode_packet(kind: int, values) -> bytes:
    """The 11 bytes of a packet; values must be four int16."""
    vals = [int(v) for v in values]
    if not 0x50 <= kind <= 0x5F or len(vals) != 4 or not all(-32768 <= v <= 32767 for v in vals):
        raise InvalidArgumentError(
            f"packet type must be 0x50..0x5F and values four int16, got 0x{kind:X}, {values!r}"
        )
    first = bytes((PACKET_HEADER, kind)) + _DATA.pack(*vals)
    return first + bytes((checksum(first),))


def _unpack(raw: bytes) -> Packet:
    return Packet(raw[1], _DATA.unpack_from(raw, 2))


def decode_packet(raw: bytes) -> Packet:
    """Decode 11 bytes; ``ProtocolError`` for a wrong length, header or checksum."""
    if len(raw) != PACKET_LENGTH:
        raise ProtocolError(f"a WitMotion packet is {PACKET_LENGTH} bytes, got {len(raw)}")
    if raw[0] != PACKET_HEADER:
        raise ProtocolError(f"a WitMotion packet starts with 0x55, got 0x{raw[0]:02X}")
    if not packet_is_valid(raw):
        raise ProtocolError("WitMotion packet checksum mismatch")
    return _unpack(raw)


class WitmotionStreamParser(FixedFrameParser[Packet]):
    """Output stream -> ``Packet`` values, resynchronising on 0x55, dropping bad sums."""

    def __init__(self) -> None:
        super().__init__(PACKET_LENGTH, PACKET_HEADER, packet_is_valid, _unpack)


# --- physical values <-> raw ----------------------------------------------------------------------


def _quantise(values, scale: float, name: str) -> list[int]:
    """``values`` / ``scale`` rounded half to even (as ``np.rint``), each an int16; on Python
    floats (three or four values, where numpy's per-call cost would be all the cost)."""
    out = []
    for v in values:
        x = float(v) / scale
        r = round(x) if math.isfinite(x) else None
        if r is None or not -32768 <= r <= 32767:
            raise InvalidArgumentError(
                f"{name} {values!r} is outside the int16 range [{-32768 * scale:g}, {32767 * scale:g}]"
            )
        out.append(r)
    return out


def encode_accel(specific_force, temperature_c: float = 25.0) -> bytes:
    """0x51 packet. specific_force: (3,) m/s^2, IMU frame (range +-16 g)."""
    return encode_packet(
        PacketType.ACCEL,
        [
            *_quantise(specific_force, ACCEL_SCALE, "acceleration"),
            *_quantise([temperature_c], TEMP_SCALE, "temperature"),
        ],
    )


def encode_gyro(angular_rate, voltage_raw: int = 0) -> bytes:
    """0x52 packet. angular_rate: (3,) rad/s, IMU frame (range +-2000 deg/s)."""
    return encode_packet(
        PacketType.GYRO, [*_quantise(angular_rate, GYRO_SCALE, "angular rate"), voltage_raw]
    )


def encode_angle(rpy, firmware_version: int = 0) -> bytes:
    """0x53 packet. rpy: (3,) rad roll, pitch, yaw (Z-Y-X), each in [-pi, pi)."""
    return encode_packet(
        PacketType.ANGLE, [*_quantise(rpy, ANGLE_SCALE, "angle"), firmware_version]
    )


def encode_quaternion(wxyz) -> bytes:
    """0x59 packet. wxyz: (4,) unit quaternion [w, x, y, z] (q0..q3)."""
    q = np.clip(np.asarray(wxyz, dtype=float), -32767 * QUAT_SCALE, 32767 * QUAT_SCALE)
    return encode_packet(PacketType.QUATERNION, _quantise(q, QUAT_SCALE, "quaternion"))


def accel_of(packet: Packet) -> tuple[np.ndarray, float]:
    """(specific force (3,) m/s^2, temperature deg C) of a 0x51 packet."""
    v = packet.values
    return np.array(v[:3], dtype=float) * ACCEL_SCALE, v[3] * TEMP_SCALE


def gyro_of(packet: Packet) -> np.ndarray:
    """Angular rate (3,) rad/s of a 0x52 packet."""
    return np.array(packet.values[:3], dtype=float) * GYRO_SCALE


def angle_of(packet: Packet) -> np.ndarray:
    """(3,) rad roll, pitch, yaw of a 0x53 packet."""
    return np.array(packet.values[:3], dtype=float) * ANGLE_SCALE


def quaternion_of(packet: Packet) -> np.ndarray:
    """(4,) [w, x, y, z] of a 0x59 packet (as sent: not renormalised)."""
    return np.array(packet.values, dtype=float) * QUAT_SCALE


def time_of(packet: Packet) -> int | None:
    """The device clock of a 0x50 packet as microseconds since the start of its month (day,
    hour, minute, second, millisecond), or None if a field is out of its calendar range."""
    v = [x & 0xFFFF for x in packet.values]
    _yy, mm, dd, hh = v[0] & 0xFF, v[0] >> 8, v[1] & 0xFF, v[1] >> 8
    mi, ss, ms = v[2] & 0xFF, v[2] >> 8, v[3]
    if not (1 <= mm <= 12 and 1 <= dd <= 31 and hh < 24 and mi < 60 and ss < 60 and ms < 1000):
        return None
    return ((((dd - 1) * 24 + hh) * 60 + mi) * 60 + ss) * 1_000_000 + ms * 1000


#: Temperatures a working IMU can report, deg C (well beyond its operating range).
PLAUSIBLE_TEMPERATURE_C = (-60.0, 150.0)
#: A reported quaternion whose norm is further than this from 1 is garbage (all zeros: none sent).
QUATERNION_NORM_TOLERANCE = 0.05


def implausibility(temperature_c: float, quaternion: np.ndarray | None) -> str | None:
    """Why one output cycle that passed its check sums cannot be a measurement, or None.

    The 8-bit sum passes one damaged packet in 256. Acceleration and rate fill their int16
    range exactly (16 g, 2000 deg/s), so no value of theirs is out of range; the temperature
    (deg C, from the 0x51 packet) and the quaternion (4,) norm, when one is sent, are checked.
    """
    lo, hi = PLAUSIBLE_TEMPERATURE_C
    if not lo <= temperature_c <= hi:
        return "temperature"
    if quaternion is not None:
        norm = float(np.linalg.norm(quaternion))
        if norm > 0.0 and abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
            return "quaternion norm"
    return None


# --- host commands ---------------------------------------------------------------------------------


def cmd_write_register(reg: int, value: int) -> bytes:
    """``FF AA reg dataL dataH``."""
    if not 0 <= reg <= 0xFF or not 0 <= value <= 0xFFFF:
        raise InvalidArgumentError(f"register must be a byte and value uint16, got {reg}, {value}")
    return COMMAND_PREFIX + bytes((reg, value & 0xFF, value >> 8))


def cmd_unlock() -> bytes:
    return cmd_write_register(Reg.KEY, UNLOCK_VALUE)


def cmd_save() -> bytes:
    return cmd_write_register(Reg.SAVE, 0)


def cmd_read_register(addr: int) -> bytes:
    """Ask for four registers from ``addr``; answered by a 0x5F packet."""
    return cmd_write_register(Reg.READ_ADDR, addr)


def parse_commands(buffer: bytearray) -> list[tuple[int, int]]:
    """Take every complete ``FF AA reg L H`` command out of ``buffer`` (device side).

    Returns ``(reg, value)`` pairs; bytes before a prefix are discarded; a trailing partial command
    stays in ``buffer``.
    """
    out = []
    while True:
        idx = buffer.find(COMMAND_PREFIX)
        if idx < 0:
            keep = 1 if buffer.endswith(b"\xff") else 0
            del buffer[: len(buffer) - keep]
            return out
        if len(buffer) - idx < COMMAND_LENGTH:
            del buffer[:idx]
            return out
        reg, lo, hi = buffer[idx + 2], buffer[idx + 3], buffer[idx + 4]
        out.append((reg, lo | hi << 8))
        del buffer[: idx + COMMAND_LENGTH]
