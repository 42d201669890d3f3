"""The Bota ASCII configuration command set as one pure interpreter (``docs/protocols/bota-serial.md``).

Both F/T devices answer through it: the sim's ``sim.ft_sensor.SimFtDevice`` and the serial
emulator's ``hardware.emulator.ft_device.IdealFtDevice``. No I/O, no threads, no physics:
``BotaCommandInterpreter.reply(text)`` updates the settings and returns the device's reply text;
the owner reads ``active``, ``streaming`` and ``restarts`` to drive its output.

Replies are ``r,0,<cmd>,<code>``: code 0 success, 1 rejected (the command needs configuration
mode, entered with ``C``), 2 unknown command or bad arguments.

==============================  ======================================================  ==========
command                         effect                                                  reply
==============================  ======================================================  ==========
``C``                           configuration mode: streaming stops                     ``r,0,C,0``
``R``                           the pending settings take effect; run mode, new grid    ``r,0,R,0``
``I`` / ``#``                   soft / hardware reset: saved settings pending and       ``App Init``
                                active; run mode, new grid                              / nothing
``c,<t>,<u>,<d>,<baud code>``   temperature compensation, calibration use, data format  ``r,0,c,0``
``f,<sinc>,<chop>,<fast>,<fir>``  filter; sinc length 64..2048                          ``r,0,f,0``
``b,<six values>``              offsets (N, N m)                                        ``r,0,b,0``
``m<row>,<six values>``         calibration row 0..5                                    ``r,0,m,0``
``s`` / ``l``                   save pending settings / load the saved ones             ``r,0,s,0``
``w``                           the pending settings as ``c``/``f``/``b``/``m`` lines   ``r,0,w,0``
``p`` (``p?``)                  ``p,0,<serial>,0,0,<product>``                          ``r,0,p,0``
==============================  ======================================================  ==========

``c f b m s l w p`` need configuration mode (else code 1); their changes go to the pending settings
and take effect on ``R`` (or are dropped by a reset). Commands are at most 64 characters; a longer or
empty one is an input error (``InvalidArgumentError``), not a reply.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from twin.robot import FtStatus
from twin.sensors.device import ADC_CLOCK_HZ, COMMAND_MAX_CHARS, SINC_MAX, SINC_MIN
from twin.sensors.errors import InvalidArgumentError

__all__ = [
    "BAD_ARGUMENT",
    "BAUD_BY_CODE",
    "BITS_PER_BYTE_8N1",
    "BOOT_BANNER",
    "COMMAND_MAX_CHARS",
    "FRAME_BYTES",
    "OK",
    "REJECTED",
    "SINC_MAX",
    "SINC_MIN",
    "BotaCommandInterpreter",
    "BotaSettings",
    "ack",
    "check_sinc",
    "line_rate_hz",
]

#: Baud rate of each baud code of the ``c`` command (the vendor host driver's table).
BAUD_BY_CODE: dict[int, int] = {
    0: 9600,
    1: 57600,
    2: 115200,
    3: 230400,
    4: 460800,
    5: 921600,
    7: 500000,
    8: 1000000,
    9: 2000000,
}
BOOT_BANNER = "App Init"  # the first line after a (soft) reset
FRAME_BYTES = 37  # one run-mode frame
BITS_PER_BYTE_8N1 = 10
OK, REJECTED, BAD_ARGUMENT = 0, 1, 2  # acknowledgement codes of r,0,<cmd>,<code>
DATA_FORMATS = (0, 1)  # 0 binary frames, 1 CSV
SETTING_COMMANDS = "cfbmslwp"  # the commands that need configuration mode


def check_sinc(sinc_length: int) -> int:
    """``sinc_length`` as an int if it is an integer in ``[SINC_MIN, SINC_MAX]``."""
    if not (isinstance(sinc_length, int | np.integer) and SINC_MIN <= sinc_length <= SINC_MAX):
        raise InvalidArgumentError(
            f"sinc_length must be an integer in [{SINC_MIN}, {SINC_MAX}], got {sinc_length!r}"
        )
    return int(sinc_length)


def line_rate_hz(baud_code: int) -> float:
    """The most frames per second (37-byte frames, 8N1) the line carries at ``baud_code``."""
    return BAUD_BY_CODE[baud_code] / (FRAME_BYTES * BITS_PER_BYTE_8N1)


@dataclass(frozen=True)
class ParsedCommand:
    """A configuration command as the device reads it: its character, the calibration row of
    ``m<row>`` (None for the others), and the comma-separated arguments (whitespace stripped)."""

    char: str
    row: int | None
    args: tuple[str, ...]


def parse_command(text: str) -> ParsedCommand:
    """The one grammar of the commands, for the device (the interpreter below) and the host (the
    driver): ``<char>[,<args>]``, ``m<row>,<args>``, ``p<arg>``. ``ValueError`` naming the command
    if it is empty, longer than ``COMMAND_MAX_CHARS``, or not of that form. Argument values are
    checked by the device (which answers with a code)."""
    cmd = text.strip()
    if not cmd or len(cmd) > COMMAND_MAX_CHARS:
        raise ValueError(f"a sensor command is 1..{COMMAND_MAX_CHARS} characters, got {text!r}")
    head, *rest = cmd.split(",")
    char, suffix = head[0], head[1:]
    row = None
    if char == "m":
        if not suffix.isdigit():
            raise ValueError(f"calibration command needs a row number, got {text!r}")
        row = int(suffix)
    elif char == "p":
        rest = [suffix, *rest] if suffix else rest
    elif suffix:
        raise ValueError(f"unknown command {text!r}")
    return ParsedCommand(char, row, tuple(r.strip() for r in rest))


def ack(command_char: str, code: int = OK) -> str:
    """The acknowledgement ``r,0,<command_char>,<code>``."""
    return f"r,0,{command_char},{code}"


@dataclass
class BotaSettings:
    """The device's configurable state: what ``c``, ``f``, ``b``, ``m`` change and ``s`` saves.

    offsets: (6,) N, N m (``b``); calibration: (6, 6) matrix ``M`` (rows ``m0..m5``), the output
    being ``M @ gauge - offsets`` when ``use_calibration`` is set.
    """

    temp_comp: int = 0
    use_calibration: int = 1
    data_format: int = 0
    baud_code: int = 4
    sinc_length: int = 256
    chop: int = 0
    fast: int = 0
    fir_disable: int = 1
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(6))
    calibration: np.ndarray = field(default_factory=lambda: np.eye(6))

    def copy(self) -> BotaSettings:
        return replace(self, offsets=self.offsets.copy(), calibration=self.calibration.copy())

    def describe(self) -> list[str]:
        """The ``w`` dump: the ``c``, ``f``, ``b`` lines and the rows ``m0..m5``."""
        return [
            f"c,{self.temp_comp},{self.use_calibration},{self.data_format},{self.baud_code}",
            f"f,{self.sinc_length},{self.chop},{self.fast},{self.fir_disable}",
            "b," + ",".join(f"{v:6.3f}" for v in self.offsets),
            *(
                f"m{i}," + ",".join(f"{v:9.6f}" for v in row)
                for i, row in enumerate(self.calibration)
            ),
        ]

    def status(self, too_slow: bool = False) -> FtStatus:
        """Status bits these settings imply: ``APP_TOO_SLOW`` if the output rate exceeds what the
        serial line carries (or ``too_slow``, another limit of the owner), ``RAW`` when
        calibration use is off."""
        too_slow = too_slow or ADC_CLOCK_HZ / self.sinc_length > line_rate_hz(self.baud_code)
        status = FtStatus.APP_TOO_SLOW if too_slow else FtStatus.OK
        if not self.use_calibration:
            status |= FtStatus.RAW
        return status


class BotaCommandInterpreter:
    """The device's command state machine (module doc).

    ``pending``: the settings the commands change; ``active``: the settings in force (``R`` copies
    ``pending``); ``saved``: what ``s`` stored and ``l``, ``I``, ``#`` restore. ``streaming``: run
    mode. ``restarts`` counts ``R``, ``I`` and ``#``: each starts a new output grid with the
    ``active`` settings. ``data_formats``: the ``c`` data formats accepted (0 binary, 1 CSV).
    """

    def __init__(
        self,
        settings: BotaSettings,
        *,
        serial_number: int | str,
        product_name: str,
        data_formats: Iterable[int] = DATA_FORMATS,
    ) -> None:
        identity = (str(serial_number), product_name)
        if any(c in f for f in identity for c in ",\r\n"):
            raise InvalidArgumentError(
                f"serial number and product name are fields of the p reply: no commas or line "
                f"breaks, got {identity!r}"
            )
        self.identity = identity
        self.data_formats = tuple(data_formats)
        self.pending = settings.copy()
        self.active = settings.copy()
        self.saved = settings.copy()
        self.streaming = True
        self.restarts = 0

    @property
    def in_config_mode(self) -> bool:
        return not self.streaming

    def reply(self, text: str) -> str:
        """Interpret one command (surrounding whitespace ignored); returns the reply text."""
        cmd = text.strip()
        if not cmd or len(cmd) > COMMAND_MAX_CHARS:
            raise InvalidArgumentError(
                f"a sensor command is 1..{COMMAND_MAX_CHARS} characters, got {text!r}"
            )
        head = cmd[0]
        if head == "C":
            self.streaming = False
            return ack(head)
        if head == "R":
            self.active = self.pending.copy()
            self._restart()
            return ack(head)
        if head in "I#":
            self.pending = self.saved.copy()
            self.active = self.saved.copy()
            self._restart()
            return "" if head == "#" else BOOT_BANNER
        if head not in SETTING_COMMANDS:
            return ack(head, BAD_ARGUMENT)
        if self.streaming:
            return ack(head, REJECTED)
        return self._configure(head, cmd)

    def _restart(self) -> None:
        self.streaming = True
        self.restarts += 1

    def _configure(self, head: str, cmd: str) -> str:
        s = self.pending
        if head == "s":
            self.saved = s.copy()
        elif head == "l":
            self.pending = self.saved.copy()
        elif head == "w":
            return "\r\n".join([*s.describe(), ack(head)])
        elif head == "p":
            serial, product = self.identity
            return f"p,0,{serial},0,0,{product}\r\n{ack(head)}"
        else:
            try:
                self._set(s, cmd)
            except ValueError:
                return ack(head, BAD_ARGUMENT)
        return ack(head)

    def _set(self, s: BotaSettings, cmd: str) -> None:
        """Apply ``c``, ``f``, ``b`` or ``m<row>`` to ``s``; ``ValueError`` for bad arguments
        (then ``s`` is unchanged). The grammar is ``parse_command``'s."""
        parsed = parse_command(cmd)
        head, args = parsed.char, parsed.args
        if head == "m":
            if not 0 <= parsed.row <= 5:
                raise ValueError(cmd)
            s.calibration[parsed.row] = _six(args)
            return
        if head == "b":
            s.offsets = _six(args)
        elif head == "c":
            t, u, d, b = (int(v) for v in args)
            if (
                t not in (0, 1)
                or u not in (0, 1)
                or d not in self.data_formats
                or b not in BAUD_BY_CODE
            ):
                raise ValueError(cmd)
            s.temp_comp, s.use_calibration, s.data_format, s.baud_code = t, u, d, b
        else:  # f
            sinc, chop, fast, fir = (int(v) for v in args)
            s.sinc_length, s.chop, s.fast, s.fir_disable = check_sinc(sinc), chop, fast, fir


def _six(fields: Sequence[str]) -> np.ndarray:
    values = np.array([float(v) for v in fields])
    if values.shape != (6,) or not np.all(np.isfinite(values)):
        raise ValueError(fields)
    return values
