"""What the Bota driver does with each frame that passed its CRC, in one object the reader thread
feeds (``BotaSensor``) and the fuzz tests drive without a port (``tests/test_fuzz_ft_imu.py``).

A frame is dropped, counted by reason in ``checks`` and never published when its values cannot
be a measurement (``bota.implausibility``: reserved status bits, a value beyond
``PLAUSIBLE_RANGE_FACTOR`` times ``measuring_range`` or not finite, a temperature outside
``PLAUSIBLE_TEMPERATURE_C``, a RAW frame while the device is not configured for raw output, a
RAW frame whose calibrated wrench is out of range) or when its device clock jumps
(``sample_checks.DeviceClock``). ``raw``: the device's calibration while it sends raw gauge
values (``bota.RawOutput``), None while it sends calibrated forces.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from twin.hardware.drivers.sample_checks import CLOCK_JUMP, DeviceClock, SampleChecks
from twin.hardware.protocols import bota

from twin.sensors.device import MEASURING_RANGE


class FrameScreen:
    """The plausibility checks of one Bota sensor's frames (module doc).

    period_us: the nominal frame period (us; the driver updates it when the rate changes).
    measuring_range: (6,) N, N m per axis.
    """

    def __init__(self, period_us: float, measuring_range=MEASURING_RANGE) -> None:
        self.measuring_range = np.asarray(measuring_range, float).reshape(6).tolist()
        self.checks = SampleChecks()
        self.clock: DeviceClock[bota.BotaFrame] = DeviceClock(period_us, bota.TIMESTAMP_MODULUS)
        self.raw: bota.RawOutput | None = None

    def screen(
        self,
        frames: list[bota.BotaFrame],
        now_us: int,
        publish: Callable[[bota.BotaFrame, int], None],
    ) -> None:
        """Check ``frames`` received at host time ``now_us``; ``publish(frame, device_t_us)``
        for each one accepted (device time unwrapped), in order."""
        checks, limits, raw, clock = self.checks, self.measuring_range, self.raw, self.clock
        accepted = 0

        def accept(frame: bota.BotaFrame, device_t_us: int) -> None:
            nonlocal accepted
            accepted += 1
            publish(frame, device_t_us)

        for f in frames:
            reason = bota.implausibility(f, limits, raw=raw)
            if reason is not None:
                checks.reject(reason, now_us)
                continue
            jumps = clock.offer(f.timestamp_us, now_us, f, accept)
            if jumps:
                checks.reject(CLOCK_JUMP, now_us, jumps)
        checks.accept(accepted)
