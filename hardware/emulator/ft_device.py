"""``IdealFtDevice``: the Bota configuration command set for the ideal physics source.

The commands, replies and pending/active/saved settings are ``twin.sensors.bota_commands``' (as
on the sim's device), except that ``c`` refuses data format 1 (CSV output is not emulated: code
2). The emulated output is ``M @ wrench - offsets`` with the active settings.
"""

from __future__ import annotations

import numpy as np
from twin.hardware.protocols import bota

from twin.robot import FtSensorDevice
from twin.sensors.bota_commands import BotaCommandInterpreter, BotaSettings


class IdealFtDevice(BotaCommandInterpreter, FtSensorDevice):
    """Device-level settings of the ideal source's F/T sensor (module doc).

    ``restarts`` counts ``R``, ``I`` and ``#``: the source restarts its output grid on a change.
    """

    def __init__(
        self, sinc_length: int = 256, serial_number: int = 4242, product: str = "BotaEmu"
    ) -> None:
        super().__init__(
            BotaSettings(sinc_length=bota.check_sinc(sinc_length)),
            serial_number=serial_number,
            product_name=product,
            data_formats=(0,),  # binary frames only
        )

    @property
    def sinc_length(self) -> int:
        return self.active.sinc_length

    def status_bits(self) -> int:
        return int(self.active.status())

    def output(self, wrench: np.ndarray) -> np.ndarray:
        """What the device reports for a true sensor-frame ``wrench`` (6,) N, N m."""
        s = self.active
        if not s.use_calibration:
            return np.asarray(wrench, float)
        return s.calibration @ wrench - s.offsets

    def command(self, text: str, timeout_s: float = 1.0) -> str:
        return self.reply(text)
