"""Talking to a Bota-style F/T device through ``twin.robot.FtSensorDevice`` (``docs/protocols/bota-serial.md``):
acknowledgements, the sinc-length / rate table, and parsing the ``w`` configuration dump."""

from __future__ import annotations

import math

import numpy as np

from twin.robot import FtSensorDevice
from twin.sensors.errors import BadDeviceError, InvalidArgumentError

ADC_CLOCK_HZ = 51200.0  # output rate = ADC_CLOCK_HZ / sinc_length
SINC_MIN, SINC_MAX = 64, 2048  # standard sensors
COMMAND_MAX_CHARS = 64  # "Each command is at most 64 characters"
DEFAULT_FILTER_FLAGS = (0, 0, 1)  # chop, fast, fir_disable as the vendor host driver sends them
#: Measuring range per axis of the modelled sensor, (6,) N, N m ``[fx, fy, fz, tx, ty, tz]``:
#: the sim flags over-range beyond it; drivers refuse values far beyond it as implausible.
MEASURING_RANGE = (200.0, 200.0, 400.0, 8.0, 8.0, 8.0)


def rate_of_sinc(sinc: int) -> float:
    return ADC_CLOCK_HZ / sinc


def nearest_sinc(rate_hz: float) -> int:
    """The sinc length in ``[SINC_MIN, SINC_MAX]`` whose rate is nearest ``rate_hz``."""
    ideal = ADC_CLOCK_HZ / rate_hz
    lo = min(max(math.floor(ideal), SINC_MIN), SINC_MAX)
    hi = min(max(math.ceil(ideal), SINC_MIN), SINC_MAX)
    return min((lo, hi), key=lambda s: abs(rate_of_sinc(s) - rate_hz))


def validate_command(text: object) -> str:
    """A raw command: 1..64 printable ASCII characters (no control characters, no newline)."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"a sensor command is a string, got {type(text).__name__}")
    if not 1 <= len(text) <= COMMAND_MAX_CHARS:
        raise InvalidArgumentError(
            f"a sensor command has 1..{COMMAND_MAX_CHARS} characters, got {len(text)}"
        )
    bad = [c for c in text if not (" " <= c <= "~")]
    if bad:
        raise InvalidArgumentError(
            f"a sensor command is printable ASCII only; {bad[0]!r} in {text!r} is not"
        )
    return text


def command(device: FtSensorDevice, text: str, expect: str | None = None) -> str:
    """Send ``text``; with ``expect`` (the command character) require the acknowledgement
    ``r,0,<expect>,0``. Any failure of the device is a ``BadDeviceError``."""
    try:
        reply = device.command(text)
    except Exception as e:  # the device's own error types differ per backend
        raise BadDeviceError(f"F/T device failed on command {text!r}: {e}") from e
    if expect is not None and f"r,0,{expect},0" not in reply:
        raise BadDeviceError(
            f"F/T device answered {reply!r} to {text!r}; expected the acknowledgement "
            f"'r,0,{expect},0'"
        )
    return reply


def parse_config_dump(text: str) -> tuple[np.ndarray | None, np.ndarray | None, tuple | None]:
    """From a ``w`` reply: calibration rows ``m0..m5`` (6, 6), offsets ``b`` (6,) and the
    filter flags ``(chop, fast, fir_disable)`` of the ``f`` line; None for what is missing."""
    rows: dict[int, np.ndarray] = {}
    offsets = flags = None
    for line in text.replace("\r", "\n").split("\n"):
        fields = [f.strip() for f in line.strip().split(",")]
        head = fields[0]
        try:
            if len(head) == 2 and head[0] == "m" and head[1].isdigit() and len(fields) == 7:
                rows[int(head[1])] = np.array([float(v) for v in fields[1:]])
            elif head == "b" and len(fields) == 7:
                offsets = np.array([float(v) for v in fields[1:]])
            elif head == "f" and len(fields) == 5:
                flags = tuple(int(v) for v in fields[2:])
        except ValueError:
            continue
    matrix = np.array([rows[i] for i in range(6)]) if sorted(rows) == list(range(6)) else None
    return matrix, offsets, flags
