"""Sample bookkeeping of the F/T services: the sample count behind ``hz()`` and the tare window.

How many samples a tare needs (``docs/reference/ft-services.md``): the tare averages the
calibrated, unfiltered samples, and the device's sinc filter is a moving average over exactly one
output period, so successive samples carry independent noise and ``N`` of them leave
``sigma / sqrt(N)`` in the offset (sigma: one sample's noise). A tare therefore needs at least
``TARE_MIN_SAMPLES`` samples (at most a quarter of one sample's noise left), and at least
``TARE_MIN_SHARE`` of the samples its duration gives at the device rate: fewer means samples were
lost, rejected or delayed (a starved reader stamps a late burst at once, so the window spans the
duration with a handful), and the offset's noise is then more than sqrt(2) times what the
duration promises.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np

#: ``hz()`` averages over this much sensor time.
HZ_WINDOW_S = 1.0
#: The fewest samples a tare averages: the offset keeps at most sigma / 4 of noise (module doc).
TARE_MIN_SAMPLES = 16
#: The least share of the samples a tare's duration gives at the device rate (module doc).
TARE_MIN_SHARE = 0.5


def tare_expected_samples(duration_s: float, rate_hz: float) -> int:
    """Samples in a tare window of ``duration_s`` at ``rate_hz``, both ends included."""
    return math.floor(duration_s * rate_hz + 1e-9) + 1


def tare_min_samples(duration_s: float, rate_hz: float) -> int:
    """The fewest samples a tare of ``duration_s`` at ``rate_hz`` may average (module doc)."""
    expected = tare_expected_samples(duration_s, rate_hz)
    return max(TARE_MIN_SAMPLES, math.ceil(TARE_MIN_SHARE * expected))


class SampleCounter:
    """The measured sample rate: received samples per second of their time stamps, over the
    last ``HZ_WINDOW_S``. Every sample counts once (the service sees every received sample), so
    samples lost before reception lower the figure: it is what arrived, not what was sent."""

    def __init__(self) -> None:
        self._stamps: collections.deque = collections.deque()  # (t_us, sample index)

    def reset(self) -> None:
        """Forget the history (after a rate change)."""
        self._stamps.clear()

    def advance(self, t_us: int) -> None:
        """Register one received sample at ``t_us`` (a time stamp before the last restarts)."""
        stamps = self._stamps
        if not stamps or t_us < stamps[-1][0]:
            stamps.clear()
            stamps.append((t_us, 0))
            return
        stamps.append((t_us, stamps[-1][1] + 1))
        while len(stamps) > 2 and t_us - stamps[1][0] >= HZ_WINDOW_S * 1e6:
            stamps.popleft()

    def hz(self) -> float:
        """Samples per second over the window (0 before two samples with distinct stamps)."""
        if len(self._stamps) < 2:
            return 0.0
        (t0, k0), (t1, k1) = self._stamps[0], self._stamps[-1]
        return 0.0 if t1 == t0 else (k1 - k0) * 1e6 / (t1 - t0)


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
    """Samples collected for a tare over ``duration_us`` of sensor time at ``rate_hz`` (the
    device rate, for the least count: ``tare_min_samples``)."""

    def __init__(self, duration_us: int, rate_hz: float) -> None:
        self.duration_us = duration_us
        self.rate_hz = rate_hz
        self.min_samples = tare_min_samples(duration_us * 1e-6, rate_hz)
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

    def result(self, previous: np.ndarray) -> tuple[TareResult, np.ndarray | None]:
        """The tare (offset = mean of the calibrated samples) and the covariance (6, 6) of the
        filtered samples; a failed result keeping the ``previous`` offset (6,) and no covariance
        if the window holds fewer than ``min_samples``."""
        n = len(self.raw)
        duration_s = (self.last_t_us - self.first_t_us) * 1e-6
        if n < self.min_samples:
            expected = tare_expected_samples(self.duration_us * 1e-6, self.rate_hz)
            reason = (
                f"tare over {n} samples ({duration_s:.3f} s of sensor time); at least "
                f"{self.min_samples} are needed ({TARE_MIN_SAMPLES}, and {TARE_MIN_SHARE:g} of "
                f"the {expected} that {self.duration_us * 1e-6:g} s at {self.rate_hz:g} Hz "
                "gives): samples were lost, rejected or delayed; the previous offset stays, "
                "repeat the tare"
            )
            return TareResult(False, previous.copy(), n, duration_s, reason), None
        raw = np.array(self.raw)
        cov = np.cov(np.array(self.filtered), rowvar=False)
        return TareResult(True, raw.mean(axis=0), n, duration_s), cov
