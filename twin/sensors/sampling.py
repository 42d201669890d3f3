"""Sample bookkeeping of the F/T services: the implied sample count behind ``hz()`` and log
decimation, and the tare window."""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np

#: ``hz()`` averages over this much sensor time.
HZ_WINDOW_S = 1.0


class SampleCounter:
    """Counts sensor samples from the time stamps of the samples the control loop sees.

    A gap under 1.5 nominal periods is one sample, so the rate is truly measured while the loop
    keeps up with the sensor. A longer gap means the loop skipped samples: it counts
    ``round(gap / period)`` with the rounding remainder carried to the next gap, so time stamps
    quantised by a slower clock (the sim's physics step) do not alias; the rate then leans on the
    nominal period.
    """

    def __init__(self) -> None:
        self._stamps: collections.deque = collections.deque()  # (t_us, implied sample index)
        self._carry = 0.0
        self._last_t_us: int | None = None

    def reset(self) -> None:
        """Forget the history (after a rate change)."""
        self._stamps.clear()

    def advance(self, t_us: int, rate_hz: float) -> int:
        """Register the sample at ``t_us`` (nominal rate ``rate_hz``); returns the number of
        sensor samples since the previous one seen (1 when none was skipped)."""
        stamps, last = self._stamps, self._last_t_us
        self._last_t_us = t_us
        if last is None or t_us < last or not stamps:
            stamps.clear()
            stamps.append((t_us, 0))
            self._carry = 0.0
            return 1
        ratio = (t_us - last) * rate_hz * 1e-6
        if ratio < 1.5:
            step, self._carry = 1, 0.0
        else:
            x = ratio + self._carry
            step = max(1, round(x))
            self._carry = x - step
        stamps.append((t_us, stamps[-1][1] + step))
        while len(stamps) > 2 and t_us - stamps[1][0] >= HZ_WINDOW_S * 1e6:
            stamps.popleft()
        return step

    def hz(self) -> float:
        """Samples per second over the window (0 before two samples)."""
        if len(self._stamps) < 2:
            return 0.0
        (t0, k0), (t1, k1) = self._stamps[0], self._stamps[-1]
        return (k1 - k0) * 1e6 / (t1 - t0)


@dataclass(frozen=True)
class TareResult:
    """Outcome of a tare: ``offset`` (6,) N, N m now subtracted, over ``samples`` samples and
    ``duration_s`` of sensor time; ``ok`` False with a ``reason`` if it could not complete."""

    ok: bool
    offset: np.ndarray
    samples: int
    duration_s: float
    reason: str = ""


class TareWindow:
    """Samples collected for a tare over ``duration_us`` of sensor time."""

    def __init__(self, duration_us: int) -> None:
        self.duration_us = duration_us
        self.first_t_us: int | None = None
        self.last_t_us = 0
        self.raw: list[np.ndarray] = []
        self.filtered: list[np.ndarray] = []

    def add(self, t_us: int, raw: np.ndarray, filtered: np.ndarray) -> bool:
        """Add a sample; True once the window spans ``duration_us``."""
        if self.first_t_us is None:
            self.first_t_us = t_us
        self.last_t_us = t_us
        self.raw.append(raw)
        self.filtered.append(filtered)
        return t_us - self.first_t_us >= self.duration_us

    def result(self) -> tuple[TareResult, np.ndarray | None]:
        """The tare (offset = mean of the calibrated samples) and the covariance (6, 6) of the
        filtered samples (None with fewer than two)."""
        raw = np.array(self.raw)
        offset = raw.mean(axis=0)
        cov = np.cov(np.array(self.filtered), rowvar=False) if len(raw) >= 2 else None
        duration_s = (self.last_t_us - self.first_t_us) * 1e-6
        return TareResult(True, offset, len(raw), duration_s), cov
