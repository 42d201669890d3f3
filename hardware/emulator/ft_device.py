"""``IdealFtDevice``: the Bota configuration command set for the ideal physics source.

Same reply scheme as the device (``specs/bota-serial.md``): ``r,0,<cmd>,<code>``, code 0 success,
1 rejected (a setting needs configuration mode, entered with ``C``), 2 bad arguments. Settings
(``c``, ``f``, ``b``, ``m``) take effect on ``R``; ``s``/``l`` save and load; ``I``/``#`` reload the
saved settings and resume streaming. The emulated output is ``M @ wrench - offsets``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from hardware.protocols import bota
from twin.robot import FtSensorDevice, FtStatus

OK, REJECTED, BAD_ARGUMENT = 0, 1, 2
_BAUD_BY_CODE = {code: baud for baud, code in bota.BAUD_CODES.items()}


@dataclass
class _Settings:
    temp_comp: int = 0
    use_calibration: int = 1
    data_format: int = 0
    baud_code: int = 4
    filter: tuple[int, int, int, int] = (256, 0, 0, 1)
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(6))
    calibration: np.ndarray = field(default_factory=lambda: np.eye(6))

    def copy(self) -> _Settings:
        return replace(self, offsets=self.offsets.copy(), calibration=self.calibration.copy())


class IdealFtDevice(FtSensorDevice):
    """Device-level settings of the ideal source's F/T sensor (module doc)."""

    def __init__(
        self, sinc_length: int = 256, serial_number: int = 4242, product: str = "BotaEmu"
    ) -> None:
        self.pending = _Settings(filter=(bota.check_sinc(sinc_length), 0, 0, 1))
        self.active = self.pending.copy()
        self.saved = self.pending.copy()
        self.streaming = True
        self.identity = (str(serial_number), product)
        self.restarts = 0  # incremented whenever the output grid restarts (R, I, #)

    @property
    def sinc_length(self) -> int:
        return self.active.filter[0]

    @property
    def in_config_mode(self) -> bool:
        return not self.streaming

    def status_bits(self) -> int:
        line_rate = _BAUD_BY_CODE[self.active.baud_code] / (bota.FRAME_LENGTH * 10)
        status = FtStatus.APP_TOO_SLOW if self.rate_hz > line_rate else FtStatus.OK
        if not self.active.use_calibration:
            status |= FtStatus.RAW
        return int(status)

    def output(self, wrench: np.ndarray) -> np.ndarray:
        """What the device reports for a true sensor-frame ``wrench`` (6,) N, N m."""
        s = self.active
        if not s.use_calibration:
            return np.asarray(wrench, float)
        return s.calibration @ wrench - s.offsets

    def command(self, text: str, timeout_s: float = 1.0) -> str:
        cmd = text.strip()
        if not cmd or len(cmd) > bota.MAX_COMMAND_LENGTH:
            raise ValueError(
                f"a sensor command is 1..{bota.MAX_COMMAND_LENGTH} characters, got {text!r}"
            )
        head = cmd[0]
        if head == bota.Cmd.CONFIG_MODE:
            self.streaming = False
            return bota.ack(head)
        if head == bota.Cmd.RUN_MODE:
            self.active = self.pending.copy()
            self._restart()
            return bota.ack(head)
        if head in (bota.Cmd.SOFT_RESET, bota.Cmd.HARD_RESET):
            self.pending = self.saved.copy()
            self.active = self.saved.copy()
            self._restart()
            return "" if head == bota.Cmd.HARD_RESET else bota.BOOT_BANNER
        if head not in "cfbmslwp":
            return bota.ack(head, BAD_ARGUMENT)
        if self.streaming:
            return bota.ack(head, REJECTED)
        return self._configure(head, cmd)

    def _restart(self) -> None:
        self.streaming = True
        self.restarts += 1

    def _configure(self, head: str, cmd: str) -> str:
        s = self.pending
        if head == bota.Cmd.SAVE:
            self.saved = s.copy()
            return bota.ack(head)
        if head == bota.Cmd.LOAD:
            self.pending = self.saved.copy()
            return bota.ack(head)
        if head == bota.Cmd.METADATA:
            return (
                bota.format_metadata((self.identity[0], "0", "0", self.identity[1]))
                + "\r\n"
                + bota.ack("p")
            )
        if head == bota.Cmd.PRINT_CONFIG:
            lines = [
                f"c,{s.temp_comp},{s.use_calibration},{s.data_format},{s.baud_code}",
                "f," + ",".join(str(v) for v in s.filter),
                "b," + ",".join(f"{v:6.3f}" for v in s.offsets),
                *(f"m{i}," + ",".join(f"{v:9.6f}" for v in s.calibration[i]) for i in range(6)),
            ]
            return "\r\n".join([*lines, bota.ack(head)])
        try:
            parsed = bota.parse_command(cmd)
            args = parsed.args
            if head == bota.Cmd.COMM_SETUP:
                t, c, d, b = (int(v) for v in args)
                if not {t, c, d} <= {0, 1} or b not in _BAUD_BY_CODE or d != 0:
                    raise ValueError(cmd)  # data_format 1 (CSV) is not emulated
                s.temp_comp, s.use_calibration, s.data_format, s.baud_code = t, c, d, b
            elif head == bota.Cmd.FILTER:
                sinc, chop, fast, fir = (int(v) for v in args)
                bota.check_sinc(sinc)
                s.filter = (sinc, chop, fast, fir)
            elif head == bota.Cmd.OFFSETS:
                s.offsets = _six(args)
            else:
                if parsed.row is None or not 0 <= parsed.row <= 5:
                    raise ValueError(cmd)
                s.calibration[parsed.row] = _six(args)
        except ValueError:
            return bota.ack(head, BAD_ARGUMENT)
        return bota.ack(head)


def _six(args: tuple[str, ...]) -> np.ndarray:
    values = np.array([float(v) for v in args])
    if values.shape != (6,) or not np.all(np.isfinite(values)):
        raise ValueError(args)
    return values
