"""Sample bookkeeping of the F/T services: the sample count behind ``hz()`` and the tare window."""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np

#: ``hz()`` averages over this much sensor time.
HZ_WINDOW_S = 1.0


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
