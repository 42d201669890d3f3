"""Clocks of the serial backend: real time (monotonic) or a manual clock for lock-step runs.

``SerialRobot.step()`` waits with ``sleep_until``; the emulators read ``now_us`` to know how far to
advance their physics. A ``ManualClock`` shared by both makes a hardware-in-the-loop run
deterministic: time advances only when the robot steps, while every byte still crosses the real
serial code paths.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

SPIN_S = 0.0005


class Clock(Protocol):
    def now_us(self) -> int:
        """Microseconds since the clock's epoch."""

    def sleep_until(self, t_us: int) -> None:
        """Return once ``now_us() >= t_us``."""


class MonotonicClock:
    """Real time from ``time.monotonic_ns``, epoch at construction."""

    def __init__(self) -> None:
        self._t0 = time.monotonic_ns()

    def now_us(self) -> int:
        return (time.monotonic_ns() - self._t0) // 1000

    def to_us(self, monotonic_s: float) -> int:
        """A ``time.monotonic()`` value on this clock (us)."""
        return round(monotonic_s * 1e6 - self._t0 / 1000)

    def sleep_until(self, t_us: int) -> None:
        """Sleep to ``SPIN_S`` before ``t_us``, then yield in a loop: a woken thread may wait for
        the scheduler, so the last stretch is not left to one long sleep."""
        while True:
            dt = (t_us - self.now_us()) * 1e-6
            if dt <= 0:
                return
            time.sleep(dt - SPIN_S if dt > 2 * SPIN_S else 0)


class ManualClock:
    """Virtual time: ``sleep_until`` jumps forward; thread safe; ``advanced`` notifies waiters."""

    def __init__(self, t_us: int = 0) -> None:
        self._t = int(t_us)
        self.advanced = threading.Condition()

    def now_us(self) -> int:
        return self._t

    def to_us(self, monotonic_s: float) -> int:
        return self._t

    def sleep_until(self, t_us: int) -> None:
        with self.advanced:
            if t_us > self._t:
                self._t = int(t_us)
                self.advanced.notify_all()

    def advance(self, dt_us: int) -> None:
        self.sleep_until(self._t + int(dt_us))
