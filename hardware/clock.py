"""Clocks of the serial backend: real time (monotonic) or a manual clock for lock-step runs.

``SerialRobot.step()`` waits with ``sleep_until``; the emulators read ``now_us`` to know how far to
advance their physics. A ``ManualClock`` shared by both makes a hardware-in-the-loop run
deterministic: time advances only when the robot steps, while every byte still crosses the real
serial code paths. ``RateMonitor`` keeps the loop's achieved rate on such a clock.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_us(self) -> int:
        """Microseconds since the clock's epoch."""

    def sleep_until(self, t_us: int) -> None:
        """Return once ``now_us() >= t_us``."""


SPIN_US = 20  # MonotonicClock.sleep_until spins a wait up to this long (us) instead of sleeping


class MonotonicClock:
    """Real time from ``time.monotonic_ns``, epoch at construction."""

    def __init__(self) -> None:
        self._t0 = time.monotonic_ns()

    def now_us(self) -> int:
        return (time.monotonic_ns() - self._t0) // 1000

    def to_us(self, monotonic_s: float) -> int:
        """A ``time.monotonic()`` value on this clock (us)."""
        return round(monotonic_s * 1e6 - self._t0 / 1000)

    def in_cycle(self, on: bool) -> None:
        """A control cycle starts (``on``) or ends: nothing to do on real time."""

    def sleep_until(self, t_us: int) -> None:
        """Sleep to ``t_us`` (one ``time.sleep``, again if woken early). No spinning for a real
        wait: a spin costs the host its whole last stretch in CPU, and a loop's lateness of less
        than a period is caught up by its schedule anyway. A wait of at most ``SPIN_US`` (a
        free-running or late loop's: its deadline is a microsecond or so away) is spun instead:
        a sleep that short ends only after the timer slack (50 us) and a wake-up of the thread,
        which on a loaded machine is a scheduler tick, not the microsecond asked for."""
        while True:
            left = t_us - self.now_us()
            if left <= 0:
                return
            if left > SPIN_US:
                time.sleep(left * 1e-6)


class ManualClock:
    """Virtual time: ``sleep_until`` jumps forward; thread safe; ``advanced`` notifies waiters.
    The robot marks its cycles (``in_cycle``): ``cycling`` while one runs, ``last_cycle_wall``
    the ``time.monotonic()`` s the last one ended (None before the first), so that an idle pump
    (``twin.hardware.emulator.cli.IdlePump``) moves time only while no control loop does."""

    def __init__(self, t_us: int = 0) -> None:
        self._t = int(t_us)
        self.advanced = threading.Condition()
        self.cycling = False
        self.last_cycle_wall: float | None = None

    def in_cycle(self, on: bool) -> None:
        """A control cycle starts (``on``) or ends (wall time stamped)."""
        with self.advanced:
            self.cycling = on
            if not on:
                self.last_cycle_wall = time.monotonic()

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


class RateMonitor:
    """Rate bookkeeping of a control loop on a clock (us): cycles, the achieved rate from the
    start of the first cycle to the end of the last, the longest cycle, and whether the rate over
    the last ``window_s`` fell below ``warn_fraction`` of ``1 / period_s`` (``below``).

    A pause of the caller (a cycle starting more than ``pause_s`` after the previous one ended:
    a planner call, a sensor command, no loop running) is not the loop's rate: its time is left
    out of the achieved rate and the longest cycle, and the rate window starts again after it."""

    def __init__(
        self, period_s: float, warn_fraction: float, window_s: float = 1.0, pause_s: float = 0.05
    ) -> None:
        self.period_s, self.warn_fraction = period_s, warn_fraction
        self._window_us = round(window_s * 1e6)
        self._pause_us = round(pause_s * 1e6)
        self.cycles = 0
        self.first_us: int | None = None
        self.last_us: int | None = None
        self.paused_us = 0  # time spent in pauses since the first cycle
        self.pauses = 0
        self.worst_us = 0
        self._origin: int | None = None  # where the next cycle's time counts from
        self._window = (0, 0)  # (cycles, t_us) at the start of the rate window

    def start(self, t_us: int) -> bool:
        """A cycle starts at ``t_us``. Returns True if it ends a pause (the caller's schedule
        starts again from here)."""
        if self.first_us is None:
            self.first_us = t_us
            self._window = (0, t_us)
            return False
        last = self.last_us
        if last is None or t_us - last <= self._pause_us:
            return False
        self.paused_us += t_us - last
        self.pauses += 1
        self._origin = t_us
        self._window = (self.cycles, t_us)
        return True

    def end(self, t_us: int) -> tuple[float, float] | None:
        """A cycle ended at ``t_us``. Returns ``(rate_hz, window_s)`` when a window closed with
        a rate below the warning threshold, else None."""
        self.cycles += 1
        origin = self.last_us if self._origin is None else self._origin
        if origin is not None:
            self.worst_us = max(self.worst_us, t_us - origin)
        self._origin = None
        self.last_us = t_us
        c0, t0 = self._window
        if t_us - t0 < self._window_us:
            return None
        span_s = (t_us - t0) * 1e-6
        rate = (self.cycles - c0) / span_s
        self._window = (self.cycles, t_us)
        return (rate, span_s) if rate < self.warn_fraction / self.period_s else None

    @property
    def achieved_rate_hz(self) -> float:
        t0, t1 = self.first_us, self.last_us
        if t0 is None or t1 is None or t1 - t0 - self.paused_us <= 0:
            return float("nan")
        return self.cycles / ((t1 - t0 - self.paused_us) * 1e-6)

    @property
    def worst_cycle_s(self) -> float:
        return self.worst_us * 1e-6 if self.cycles >= 2 else float("nan")
