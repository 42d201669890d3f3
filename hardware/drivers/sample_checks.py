"""Plausibility beyond the check sum: what a driver does with a frame that passed its CRC.

A 16-bit CRC passes about one damaged frame in 65,536 (an 8-bit sum one in 256), so a frame that
passes it can still be garbage. Drivers drop such a sample, count it by reason in a
``SampleChecks`` and never publish it. The value checks (reserved bits, range, temperature,
quaternion norm) are the codecs' pure functions; this module holds the counters and the
device-clock check, which needs state:

``DeviceClock`` unwraps a device's wrapping time stamp and refuses a jump: a frame is accepted when
its time stamp advances by more than zero and by at most the host time elapsed since the last
accepted frame plus ``max_jump_periods`` periods (frames lost on the line make real gaps; the
host clock bounds them). A frame that fails is held as a candidate, not published: if the next
frame continues the candidate's clock rather than the accepted one, the device clock really
moved (a reboot, a long outage) and the clock re-anchors on the candidate (both are published);
otherwise the candidate is dropped as a clock jump. One garbage time stamp therefore costs one
frame and never shifts the unwrapped clock; a real restart costs nothing. The unwrapped device
time stays monotonic: across a re-anchor it advances by the host time elapsed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

#: A device-clock advance beyond the host time elapsed plus this many periods is a jump.
MAX_JUMP_PERIODS = 4
CLOCK_JUMP = "clock jump"


@dataclass(frozen=True)
class CheckReport:
    """Counters of a driver's sample checks (``SampleChecks.report()``).

    accepted: samples published. rejected: samples dropped as implausible, by reason.
    last_reason / last_t_us: the latest rejection and its host time (us), or None.
    """

    accepted: int
    rejected: dict[str, int] = field(default_factory=dict)
    last_reason: str | None = None
    last_t_us: int | None = None

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


class SampleChecks:
    """Thread-safe counters of accepted and rejected samples (the reader thread counts, any
    thread reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._accepted = 0
        self._rejected: dict[str, int] = {}
        self._last: tuple[str, int] | None = None

    def accept(self, n: int = 1) -> None:
        with self._lock:
            self._accepted += n

    def reject(self, reason: str, t_us: int, n: int = 1) -> None:
        if n <= 0:
            return
        with self._lock:
            self._rejected[reason] = self._rejected.get(reason, 0) + n
            self._last = (reason, t_us)

    @property
    def rejected_total(self) -> int:
        with self._lock:
            return sum(self._rejected.values())

    def rejected_since(self, t_us: int) -> bool:
        """Whether a sample was rejected at or after host time ``t_us`` (for a health flag:
        ``checks.rejected_since(now - stale_us)``)."""
        with self._lock:
            return self._last is not None and self._last[1] >= t_us

    def report(self) -> CheckReport:
        with self._lock:
            last = self._last
            return CheckReport(
                self._accepted,
                dict(self._rejected),
                None if last is None else last[0],
                None if last is None else last[1],
            )


@dataclass(slots=True)
class _Stamp(Generic[T]):
    raw: int
    host_t_us: int
    item: T


class DeviceClock(Generic[T]):
    """Unwrapping and jump check of one device clock (module doc).

    period_us: nominal sample period (us); modulus: where the raw time stamp wraps.
    ``offer(raw, host_t_us, item)`` returns the items now accepted, each with its unwrapped device
    time (us), and how many offered items were dropped as clock jumps. ``lost`` counts samples
    the accepted time stamps show missing (gaps of whole periods).
    """

    def __init__(
        self, period_us: float, modulus: int, max_jump_periods: int = MAX_JUMP_PERIODS
    ) -> None:
        self.modulus = modulus
        self.max_jump_periods = max_jump_periods
        self.period_us = float(period_us)
        self.lost = 0
        self.reanchors = 0
        self._last: _Stamp[T] | None = None
        self._last_device_t: int | None = None  # kept across restart: the unwrapped time goes on
        self._last_host_t: int | None = None
        self._candidate: _Stamp[T] | None = None

    def restart(self) -> None:
        """Forget the anchor (the device restarts its clock); the unwrapped time stays monotonic."""
        self._last = self._candidate = None

    def _follows(self, before: _Stamp[T], raw: int, host_t_us: int) -> int | None:
        """The advance (us) from ``before`` to ``raw`` if plausible, else None."""
        gap = (raw - before.raw) % self.modulus
        allowed = max(0, host_t_us - before.host_t_us) + self.max_jump_periods * self.period_us
        return gap if 0 < gap <= allowed else None

    def offer(self, raw: int, host_t_us: int, item: T, on_accept: Callable[[T, int], None]) -> int:
        """Check one sample; ``on_accept(item, device_t_us)`` for every sample accepted now (the
        held candidate first, if it is confirmed). Returns the number dropped as clock jumps."""
        stamp = _Stamp(raw, host_t_us, item)
        last, candidate = self._last, self._candidate
        if last is not None:
            gap = self._follows(last, raw, host_t_us)
            if gap is not None:
                self._candidate = None
                self._accept(stamp, self._last_device_t + gap, on_accept, gap)
                return 0 if candidate is None else 1
        if candidate is not None:
            gap = self._follows(candidate, raw, host_t_us)
            if gap is not None:  # the device clock moved: re-anchor on the candidate
                self._candidate = None
                if self._last_device_t is None:
                    start = candidate.raw  # the first anchor: the device's own clock
                else:
                    since = candidate.host_t_us - self._last_host_t
                    start = self._last_device_t + max(round(self.period_us), since)
                    self.reanchors += 1
                self._accept(candidate, start, on_accept, None)
                self._accept(stamp, start + gap, on_accept, gap)
                return 0
        self._candidate = stamp
        return 0 if candidate is None else 1

    def _accept(
        self,
        stamp: _Stamp[T],
        device_t: int,
        on_accept: Callable[[T, int], None],
        gap: int | None,
    ) -> None:
        if gap is not None:
            self.lost += max(0, round(gap / self.period_us) - 1)
        self._last, self._last_device_t, self._last_host_t = stamp, device_t, stamp.host_t_us
        on_accept(stamp.item, device_t)
