"""Bota serial protocol ("gen0"): the 37-byte run-mode frame and the ASCII configuration commands.

Pure functions, no I/O (``docs/protocols/bota-serial.md``). Frame layout, little-endian, packed:
``0xAA | status u16 | Fx Fy Fz Mx My Mz f32 | timestamp_us u32 | temperature f32 | CRC u16``;
the CRC-16/X-25 covers bytes 1..34 (not the header) and is stored little-endian.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass

import numpy as np
from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.protocols.crc import crc16_x25
from twin.hardware.protocols.stream import FixedFrameParser

from twin.robot import FtStatus
from twin.sensors import bota_commands
from twin.sensors.bota_commands import BAUD_BY_CODE
from twin.sensors.bota_commands import BOOT_BANNER as BOOT_BANNER  # re-exported
from twin.sensors.bota_commands import COMMAND_MAX_CHARS as MAX_COMMAND_LENGTH
from twin.sensors.bota_commands import FRAME_BYTES as FRAME_LENGTH
from twin.sensors.bota_commands import SINC_MAX as SINC_MAX  # re-exported
from twin.sensors.bota_commands import SINC_MIN as SINC_MIN  # re-exported
from twin.sensors.device import parse_config_dump

FRAME_HEADER = 0xAA
_BODY = struct.Struct("<H6fIf")  # bytes 1..34: status, wrench, timestamp, temperature
_CRC = struct.Struct("<H")
_FLOAT32_MAX = float(np.finfo(np.float32).max)

#: Output period per unit of sinc length: 1 / 51200 s (``period = SINC_PERIOD_S * sinc_length``).
SINC_PERIOD_S = 0.00001953125
TIMESTAMP_MODULUS = 1 << 32

#: Baud code of each baud rate, for the ``c`` command (the vendor host driver's table).
BAUD_CODES: dict[int, int] = {baud: code for code, baud in BAUD_BY_CODE.items()}


class Cmd:
    """Command characters of the ASCII configuration protocol."""

    CONFIG_MODE = "C"
    COMM_SETUP = "c"
    FILTER = "f"
    OFFSETS = "b"
    CALIBRATION_ROW = "m"
    SAVE = "s"
    LOAD = "l"
    PRINT_CONFIG = "w"
    SOFT_RESET = "I"
    HARD_RESET = "#"
    RUN_MODE = "R"
    METADATA = "p"


@dataclass(frozen=True)
class BotaFrame:
    """One run-mode frame.

    wrench: (6,) float32 values ``[fx, fy, fz, mx, my, mz]`` N, N m, sensor frame.
    timestamp_us: device clock (wraps at 2**32). status: bit field (``twin.robot.FtStatus``).
    """

    status: int
    wrench: tuple[float, float, float, float, float, float]
    timestamp_us: int
    temperature_c: float


def frame_period_s(sinc_length: int) -> float:
    """Output period in seconds for ``sinc_length`` (about 51200 / sinc_length Hz)."""
    check_sinc(sinc_length)
    return SINC_PERIOD_S * sinc_length


def check_sinc(sinc_length: int) -> int:
    """``sinc_length`` as an int by the device's rule (``bota_commands.check_sinc``), raising
    this backend's ``InvalidArgumentError`` outside it."""
    try:
        return bota_commands.check_sinc(sinc_length)
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None


def encode_frame(frame: BotaFrame) -> bytes:
    """The 37 bytes of ``frame``; refuses values that do not fit their fields."""
    if not 0 <= frame.status <= 0xFFFF:
        raise InvalidArgumentError(f"status must fit uint16, got {frame.status}")
    if not 0 <= frame.timestamp_us < TIMESTAMP_MODULUS:
        raise InvalidArgumentError(f"timestamp_us must fit uint32, got {frame.timestamp_us}")
    values = [*frame.wrench, frame.temperature_c]
    if len(frame.wrench) != 6 or not all(
        math.isfinite(v) and abs(v) <= _FLOAT32_MAX for v in values
    ):
        raise InvalidArgumentError(
            f"wrench must be 6 finite float32 values and temperature finite, got {values}"
        )
    return seal(_BODY.pack(frame.status, *frame.wrench, frame.timestamp_us, frame.temperature_c))


def seal(body: bytes) -> bytes:
    """A whole frame around ``body`` (bytes 1..34, whatever they hold): header and a matching
    CRC. The emulator forges damaged frames that pass the CRC with it."""
    if len(body) != _BODY.size:
        raise InvalidArgumentError(f"a Bota frame body is {_BODY.size} bytes, got {len(body)}")
    return bytes((FRAME_HEADER,)) + body + _CRC.pack(crc16_x25(body))


def frame_is_valid(raw: bytes) -> bool:
    """True if ``raw`` is 37 bytes with the header and a matching CRC."""
    return (
        len(raw) == FRAME_LENGTH
        and raw[0] == FRAME_HEADER
        and crc16_x25(raw[1:35]) == raw[35] | (raw[36] << 8)
    )


def _unpack(raw: bytes) -> BotaFrame:
    status, fx, fy, fz, mx, my, mz, ts, temp = _BODY.unpack_from(raw, 1)
    return BotaFrame(status, (fx, fy, fz, mx, my, mz), ts, temp)


def decode_frame(raw: bytes) -> BotaFrame:
    """Decode one frame; raises ``ProtocolError`` for a wrong length, header or CRC."""
    if len(raw) != FRAME_LENGTH:
        raise ProtocolError(f"a Bota frame is {FRAME_LENGTH} bytes, got {len(raw)}")
    if raw[0] != FRAME_HEADER:
        raise ProtocolError(f"a Bota frame starts with 0xAA, got 0x{raw[0]:02X}")
    if not frame_is_valid(raw):
        raise ProtocolError("Bota frame CRC-16/X-25 mismatch")
    return _unpack(raw)


#: Status bits the protocol defines (0..3); bits 4..15 are reserved and never set by a device.
DEFINED_STATUS_BITS = 0x000F
#: A value beyond this multiple of the measuring range cannot be a measurement (the device
#: itself flags INVALID and saturates at 1.5 times its range).
PLAUSIBLE_RANGE_FACTOR = 3.0
#: Temperatures a working sensor can report, deg C (well beyond its operating range).
PLAUSIBLE_TEMPERATURE_C = (-60.0, 150.0)
#: Reasons of ``implausibility``, as the drivers count them.
RESERVED_BITS, OUT_OF_RANGE, TEMPERATURE = "reserved status bits", "out of range", "temperature"
RAW_NOT_CONFIGURED = "raw not configured"


@dataclass(frozen=True)
class RawOutput:
    """The device's settings in force while it sends raw gauge values (calibration use off, the
    ``c`` command): ``calibration`` M (6, 6) and ``offsets`` (6,) N, N m, read from its ``w``
    dump. The force a raw frame stands for is ``M @ gauge - offsets`` (N, N m, sensor frame),
    which is what the F/T service publishes for it (``G @ gauge + b``, ``G = M``, ``b = -offsets``).
    """

    calibration: np.ndarray
    offsets: np.ndarray

    def __post_init__(self) -> None:
        m = np.array(self.calibration, dtype=float)
        b = np.array(self.offsets, dtype=float).reshape(-1)
        if (
            m.shape != (6, 6)
            or b.shape != (6,)
            or not (np.all(np.isfinite(m)) and np.all(np.isfinite(b)))
        ):
            raise InvalidArgumentError(
                f"raw output needs a finite 6x6 calibration and 6 finite offsets, got shapes "
                f"{m.shape} and {b.shape}"
            )
        m.flags.writeable = b.flags.writeable = False
        object.__setattr__(self, "calibration", m)
        object.__setattr__(self, "offsets", b)

    def wrench(self, gauge) -> np.ndarray:
        """(6,) N, N m: the calibrated wrench of raw ``gauge`` values (6,)."""
        return self.calibration @ np.asarray(gauge, dtype=float) - self.offsets


def implausibility(
    frame: BotaFrame,
    measuring_range,
    factor: float = PLAUSIBLE_RANGE_FACTOR,
    raw: RawOutput | None = None,
) -> str | None:
    """Why a frame that passed its CRC cannot be a measurement, or None if it can.

    measuring_range: (6,) N, N m per axis; a value beyond ``factor`` times it, a non-finite
    value, a reserved status bit or a temperature outside ``PLAUSIBLE_TEMPERATURE_C`` is refused.
    A RAW frame (strain-gauge values) is refused unless the device was configured for raw output
    (``raw``, its calibration in force); then the range applies in raw units: the gauge values
    must be finite and their calibrated wrench ``raw.wrench(gauge)`` within the same bound.
    """
    if frame.status & ~DEFINED_STATUS_BITS:
        return RESERVED_BITS
    values = frame.wrench
    if frame.status & FtStatus.RAW:
        if raw is None:
            return RAW_NOT_CONFIGURED
        if not all(map(math.isfinite, values)):
            return OUT_OF_RANGE
        values = raw.wrench(values).tolist()
    for v, r in zip(values, measuring_range):
        if not abs(v) <= factor * r:  # abs(nan) <= x is False
            return OUT_OF_RANGE
    lo, hi = PLAUSIBLE_TEMPERATURE_C
    if not lo <= frame.temperature_c <= hi:
        return TEMPERATURE
    return None


def raw_output_of_dump(text: str) -> RawOutput | None:
    """From the reply to ``w`` (the pending settings): their ``RawOutput`` if the ``c`` line turns
    calibration use off, None if it is on. ``ProtocolError`` if the dump has no ``c`` line, or
    turns calibration use off without all of ``m0..m5`` and ``b``."""
    comm = [
        fields
        for line in text.replace("\r", "\n").split("\n")
        if len(fields := [f.strip() for f in line.strip().split(",")]) == 5 and fields[0] == "c"
    ]
    if not comm or comm[-1][2] not in ("0", "1"):
        raise ProtocolError(
            f"the sensor's w dump has no c line with calibration use 0 or 1: {text!r}"
        )
    if comm[-1][2] == "1":
        return None
    matrix, offsets, _ = parse_config_dump(text)
    if matrix is None or offsets is None or not np.all(np.isfinite(np.append(matrix, offsets))):
        raise ProtocolError(
            f"the sensor's w dump turns calibration use off (raw output) without a finite "
            f"m0..m5 and b, which the range check of raw frames needs: {text!r}"
        )
    return RawOutput(matrix, offsets)


class BotaStreamParser(FixedFrameParser[BotaFrame]):
    """Run-mode byte stream -> ``BotaFrame`` values, resynchronising after garbage."""

    def __init__(self) -> None:
        super().__init__(FRAME_LENGTH, FRAME_HEADER, frame_is_valid, _unpack)


# --- ASCII configuration ------------------------------------------------------------------------


def _bounded(text: str) -> str:
    if len(text) > MAX_COMMAND_LENGTH:
        raise InvalidArgumentError(
            f"a Bota command is at most {MAX_COMMAND_LENGTH} characters, got {len(text)}: {text!r}"
        )
    return text


def _flag(name: str, value: int | bool) -> int:
    if value not in (0, 1, True, False):
        raise InvalidArgumentError(f"{name} must be 0 or 1, got {value!r}")
    return int(value)


def _six(name: str, values) -> list[float]:
    arr = [float(v) for v in np.asarray(values, dtype=float).reshape(-1)]
    if len(arr) != 6 or not all(math.isfinite(v) for v in arr):
        raise InvalidArgumentError(f"{name} must be 6 finite numbers, got {values!r}")
    return arr


def cmd_comm_setup(
    temp_comp: int = 0, use_calibration: int = 1, data_format: int = 0, baud: int = 460800
) -> str:
    """``c,<temp_comp>,<use_calibration>,<data_format>,<baud_code>`` (data_format 0 binary, 1 CSV)."""
    if baud not in BAUD_CODES:
        raise InvalidArgumentError(f"baud must be one of {sorted(BAUD_CODES)}, got {baud!r}")
    t, c, d = (
        _flag("temp_comp", temp_comp),
        _flag("use_calibration", use_calibration),
        _flag("data_format", data_format),
    )
    return _bounded(f"c,{t},{c},{d},{BAUD_CODES[baud]}")


def cmd_filter(sinc_length: int, chop: int = 0, fast: int = 0, fir_disable: int = 1) -> str:
    """``f,<sinc_length>,<chop_enable>,<fast_enable>,<fir_disable>``: filter and output rate."""
    s = check_sinc(sinc_length)
    flags = _flag("chop", chop), _flag("fast", fast), _flag("fir_disable", fir_disable)
    return _bounded(f"f,{s},{flags[0]},{flags[1]},{flags[2]}")


def cmd_offsets(offsets) -> str:
    """``b,<fx>,<fy>,<fz>,<mx>,<my>,<mz>`` with values ``%6.3f`` (N, N m)."""
    return _bounded("b," + ",".join(f"{v:6.3f}" for v in _six("offsets", offsets)))


def cmd_calibration_row(row: int, values) -> str:
    """``m<row>,<six values %9.6f>``: one row (0..5) of the 6x6 calibration matrix."""
    if not isinstance(row, (int, np.integer)) or not 0 <= row <= 5:
        raise InvalidArgumentError(f"calibration row must be 0..5, got {row!r}")
    return _bounded(f"m{row}," + ",".join(f"{v:9.6f}" for v in _six("calibration row", values)))


def ack(command_char: str, code: int = 0, digit: int = 0) -> str:
    """The acknowledgement text ``r,<digit>,<command char>,<code>`` (code 0 is success)."""
    if len(command_char) != 1 or not 0 <= digit <= 9 or code < 0:
        raise InvalidArgumentError(
            f"ack needs one command character, a digit and a code >= 0, got "
            f"{command_char!r}, {digit}, {code}"
        )
    return f"r,{digit},{command_char},{code}"


def find_ack(received: bytes, command_char: str) -> tuple[int, int] | None:
    """Search ``received`` for ``r,<digit>,<command_char>,<code>``.

    Returns ``(code, end_index)`` of the first match (the byte index just after the code), or
    ``None``. CR/LF are not required and binary frames may surround the reply.
    """
    m = re.search(rb"r,\d," + re.escape(command_char.encode()) + rb",(\d+)", received)
    if m is None:
        return None
    return int(m.group(1)), m.end()


@dataclass(frozen=True)
class Metadata:
    """Answer to ``p?``: ``p,0,<f1>,<f2>,<f3>,<f4>,...``."""

    serial_number: str  # "SN000" + f1
    product_name: str  # f4
    fields: tuple[str, ...]


def format_metadata(fields: tuple[str, ...]) -> str:
    if len(fields) < 4 or any("," in f or "\n" in f for f in fields):
        raise InvalidArgumentError(f"metadata needs >= 4 fields without commas, got {fields!r}")
    return "p,0," + ",".join(fields)


def parse_metadata(received: bytes) -> Metadata | None:
    """Find a ``p,0,...`` line in ``received``; ``None`` if there is none with >= 4 fields."""
    for line in received.replace(b"\r", b"\n").split(b"\n"):
        text = line.decode("ascii", errors="replace").strip()
        idx = text.find("p,0,")
        if idx < 0:
            continue
        fields = tuple(text[idx + 4 :].split(","))
        if len(fields) >= 4:
            return Metadata("SN000" + fields[0], fields[3], fields)
    return None


ParsedCommand = bota_commands.ParsedCommand  # re-exported: the one grammar is the device's


def parse_command(line: str) -> ParsedCommand:
    """Split one command line (without terminator) as the device does
    (``twin.sensors.bota_commands.parse_command``); ``ProtocolError`` if it is empty, too long or
    malformed. Value checks are the device's business (the emulator answers with a code)."""
    try:
        return bota_commands.parse_command(line)
    except ValueError as e:
        raise ProtocolError(str(e)) from e
