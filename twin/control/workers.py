"""Execution strategies for the read -> work (inference) -> write pipeline.

Timing follows exploy's workers exactly: the period is whole milliseconds,
``round(1000 / rate_hz)`` (half away from zero); the first ``update`` fires at once (the phase
reference is set one period back), later ones fire when the elapsed time, rounded to whole
milliseconds, reaches the period, and the phase advances by exactly one period
(``last += period``), so a late call does not shift later cycles.

``SyncWorker`` runs the three callbacks inline. ``AsyncWorker`` reads on the caller's thread,
infers on a background thread, and writes finished results on the caller's thread at the next
``update``. A cycle boundary reached while inference still runs first waits up to
``overrun_wait_s`` (a quarter period) for the result, blocked on the condition so that the
inference thread gets the interpreter; a result that comes is written and the cycle dispatched,
late by that wait; otherwise the cycle is skipped (an overrun: ``update`` returns ``True``). A
failed inference latches a fault (``update`` returns ``False``) until ``reset``, and so does an
inference thread found dead (``fault`` names it): a worker whose thread is gone never reports
success again. The watchdog latches one more: an inference busy longer than ``watchdog_s`` of
wall time or ``watchdog_periods`` periods of the caller's time base (``fault_error`` is an
``InferenceOverdueError`` saying which cycle and by how much); nothing is written until
``reset``, so the robot keeps the last command, and the late result is dropped.

Why the wait: with a control loop that never blocks, the inference thread runs only when the
interpreter takes the GIL from the loop by force, once per ``sys.getswitchinterval()`` (5 ms)
at best, and an inference needs several hand-offs (to take the request, after the onnxruntime
call, to publish); CPython asks for the forced switch only if no other thread took the GIL in
the interval, so other threads and CPU load postpone it further. Against a loop of 50-100 us a
tick that is tens to hundreds of skipped cycles after every start (``docs/faults/datapath.md``).

Threads: ``update``, ``reset`` and ``close`` of a worker may be called from any thread; they are
serialised by one lock, so ``reset`` from another thread waits for a running ``update`` and
then stops and joins the inference thread, which the next ``update`` starts afresh.

One deviation: the reference subtracts unsigned time stamps, so a clock that jumps backwards
fires at once; here a negative elapsed time does not fire.
"""

from __future__ import annotations

import abc
import enum
import logging
import math
import threading
import time
from collections.abc import Callable

from twin.control.errors import ControlError, InferenceOverdueError

__all__ = ["AsyncWorker", "SyncWorker", "Worker", "WorkerMode"]

logger = logging.getLogger(__name__)

Callback = Callable[[], bool]
#: Every how many consecutive overruns a warning is logged (as the reference does).
OVERRUN_WARN_EVERY = 10
_JOIN_TIMEOUT_S = 5.0
_clock = time.monotonic


class WorkerMode(enum.Enum):
    """``SYNC``: inference on the calling thread. ``ASYNC``: on a background thread."""

    SYNC = "sync"
    ASYNC = "async"


def period_ms(update_rate_hz: float) -> int:
    """The worker period: ``round(1000 / rate)`` whole milliseconds, half away from zero."""
    if not (math.isfinite(update_rate_hz) and update_rate_hz > 0.0):
        raise ValueError(f"update rate must be a positive number of Hz, got {update_rate_hz}")
    return _lround(1000.0 / update_rate_hz)


def _seconds(name: str, value: float, allow_inf: bool) -> float:
    """``value`` as seconds (>= 0; ``inf`` only where ``allow_inf``), or a ``ValueError``."""
    ok = value >= 0.0 and (math.isfinite(value) or (allow_inf and value == math.inf))
    if not ok:
        raise ValueError(
            f"{name} must be a number of seconds >= 0{' (or math.inf)' if allow_inf else ''}, "
            f"got {value!r}"
        )
    return float(value)


def _lround(x: float) -> int:
    return math.floor(x + 0.5) if x >= 0.0 else -math.floor(-x + 0.5)


class Worker(abc.ABC):
    """Owns the pipeline; ``set_callbacks`` once, then ``update(t_us)`` every control tick."""

    def __init__(self, update_rate_hz: float) -> None:
        self.period_ms = period_ms(update_rate_hz)
        self._period_us = self.period_ms * 1000
        # For integer elapsed e >= 0, lround(e / 1000) >= P  <=>  e >= 1000 P - 500 (and any
        # e >= 0 when P is 0): one integer comparison per tick instead of a rounding.
        self._due_us = max(0, self._period_us - 500)
        self._read: Callback | None = None
        self._work: Callback | None = None
        self._write: Callback | None = None
        self._last_us = 0
        self._first = True
        #: Why the worker is faulted (``update`` returns False until ``reset``), else None.
        self.fault: str | None = None
        #: The typed error behind ``fault`` when there is one (the watchdog's), else None.
        self.fault_error: ControlError | None = None

    def set_callbacks(self, read_fn: Callback, work_fn: Callback, write_fn: Callback) -> bool:
        """Register the three callbacks (each returns ``True`` on success); ``False`` if one is None."""
        if read_fn is None or work_fn is None or write_fn is None:
            logger.error("all three worker callbacks must be given")
            return False
        self._read, self._work, self._write = read_fn, work_fn, write_fn
        return True

    def _due(self, t_us: int) -> bool:
        """Whether a cycle is due at ``t_us`` (sets the phase reference on the first call)."""
        if self._first:
            self._last_us = t_us - self._period_us
            self._first = False
        return t_us - self._last_us >= self._due_us

    def reset(self) -> None:
        """Back to the initial state: the next ``update`` fires at once."""
        self._last_us = 0
        self._first = True

    @abc.abstractmethod
    def update(self, t_us: int) -> bool:
        """Advance by one tick; ``True`` if the tick succeeded or was safely skipped."""

    def close(self) -> None:  # noqa: B027 - optional override
        """Release threads; safe to call twice."""


class SyncWorker(Worker):
    """Read, infer and write inline on the calling thread."""

    def update(self, t_us: int) -> bool:
        if self._read is None:
            logger.error("SyncWorker: callbacks not set; call set_callbacks() before update()")
            return False
        if self._first:
            self._due(t_us)  # sets the phase reference
        if t_us - self._last_us >= self._due_us:  # _due, inline: every tick
            if not (self._read() and self._work() and self._write()):
                return False
            self._last_us += self._period_us
        return True


class AsyncWorker(Worker):
    """Inference on a background thread; see the module docstring.

    ``overruns`` counts every skipped cycle since construction; ``consecutive_overruns`` those
    since the last dispatched cycle.

    overrun_wait_s: how long a due ``update`` that finds the inference still running waits for
    its result (default: a quarter period) before it skips the cycle. ``watchdog_s``: wall-clock
    seconds an inference may stay busy after its dispatch (default: the larger of 1 s and four
    periods; ``math.inf`` turns it off); ``watchdog_periods``: periods of the caller's time base
    it may stay busy (``None``: no such limit). Past either limit the worker faults
    (``fault_error`` is an ``InferenceOverdueError``) until ``reset``.
    """

    def __init__(
        self,
        update_rate_hz: float,
        watchdog_s: float | None = None,
        watchdog_periods: int | None = None,
        overrun_wait_s: float | None = None,
    ) -> None:
        super().__init__(update_rate_hz)
        period_s = self.period_ms / 1000.0
        self.watchdog_s = _seconds(
            "watchdog_s", max(1.0, 4 * period_s) if watchdog_s is None else watchdog_s, True
        )
        if self.watchdog_s == 0.0:
            raise ValueError("watchdog_s must be more than 0 s (math.inf turns it off), got 0")
        if watchdog_periods is not None and not (
            isinstance(watchdog_periods, int) and watchdog_periods >= 1 and self.period_ms > 0
        ):
            raise ValueError(
                "watchdog_periods must be a whole number of periods >= 1 (with a period of at "
                f"least 1 ms) or None, got {watchdog_periods!r} at {self.period_ms} ms"
            )
        self.watchdog_periods = watchdog_periods
        self.overrun_wait_s = _seconds(
            "overrun_wait_s", period_s / 4 if overrun_wait_s is None else overrun_wait_s, False
        )
        self._cv = threading.Condition()
        self._lifecycle = threading.RLock()  # update / reset / close, from any thread
        self._thread: threading.Thread | None = None
        self._generation = 0  # a thread runs while it matches; stopping moves it on
        self._requested = False
        self._working = False
        self._finished = False
        self._successful = True
        self._faulted = False
        self._dispatched_t_us = 0
        self._dispatched_s = 0.0
        self.consecutive_overruns = 0
        self.overruns = 0

    @property
    def faulted(self) -> bool:
        return self._faulted

    @property
    def busy(self) -> bool:
        """Inference requested or running (its result not yet published)."""
        with self._cv:
            return self._requested or self._working

    def _idle(self) -> bool:
        return not (self._requested or self._working)

    def update(self, t_us: int) -> bool:
        if self._read is None:
            logger.error("AsyncWorker: callbacks not set; call set_callbacks() before update()")
            return False
        with self._lifecycle:
            return self._update(t_us)

    def _update(self, t_us: int) -> bool:
        if self._faulted:
            return False
        if self._first:
            self._start()
        elif self._thread is None or not self._thread.is_alive():
            return self._latch(
                "the worker is closed; call reset() to start it again"
                if self._thread is None
                else f"the inference thread {self._thread.name!r} is dead; no policy output "
                "will come until reset()"
            )
        due = self._due(t_us)

        with self._cv:
            if due and self.overrun_wait_s > 0.0 and not self._idle():
                # Blocking here releases the GIL: a control loop that never sleeps would
                # otherwise leave the inference thread waiting for the interpreter's forced
                # switch, which other threads' GIL hand-offs postpone without bound.
                self._cv.wait_for(self._idle, self.overrun_wait_s)
            finished, successful = self._finished, self._successful  # work finished meanwhile
            self._finished = False
            busy = not self._idle()
        if finished and not (successful and self._write()):
            return False

        if busy:
            if due:
                self.consecutive_overruns += 1
                self.overruns += 1
                if self.consecutive_overruns % OVERRUN_WARN_EVERY == 0:
                    logger.warning(
                        "AsyncWorker: cycle overrun, inference still running at the cycle "
                        "boundary (%d consecutive skipped)",
                        self.consecutive_overruns,
                    )
            return self._watch(t_us)
        if due:
            if not self._read():
                return False
            self._dispatched_t_us, self._dispatched_s = t_us, _clock()
            with self._cv:
                self._requested = True
                self._cv.notify_all()
            self._last_us += self._period_us
            self.consecutive_overruns = 0
        return True

    def _watch(self, t_us: int) -> bool:
        """The watchdog, on every tick that finds the inference busy: ``False`` (latched) once
        it has been busy beyond ``watchdog_periods`` or ``watchdog_s``."""
        busy_us, busy_s = t_us - self._dispatched_t_us, _clock() - self._dispatched_s
        periods = busy_us // self._period_us if self._period_us else 0
        limit = None
        if self.watchdog_periods is not None and busy_us > self.watchdog_periods * self._period_us:
            limit = f"{self.watchdog_periods} periods of {self.period_ms} ms"
        elif busy_s > self.watchdog_s:
            limit = f"{self.watchdog_s:.3f} s"
        if limit is None:
            return True
        error = InferenceOverdueError(self._dispatched_t_us, t_us, periods, busy_s, limit)
        return self._latch(str(error), error)

    def _latch(self, why: str, error: ControlError | None = None) -> bool:
        self._faulted = True
        self.fault, self.fault_error = why, error
        logger.error("AsyncWorker: %s", why)
        return False

    def reset(self) -> None:
        """Stop the background thread, clear the fault and the phase (restarts on next update)."""
        with self._lifecycle:
            self._stop_thread()
            super().reset()
            self.consecutive_overruns = 0
            self._faulted = False
            self.fault = self.fault_error = None

    def close(self) -> None:
        with self._lifecycle:
            self._stop_thread()

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._cv:
            self._requested = self._working = self._finished = False
            self._successful = True
            generation = self._generation
        thread = threading.Thread(
            target=self._loop, args=(generation,), name="AsyncWorker", daemon=True
        )
        thread.start()
        self._thread = thread

    def _stop_thread(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        with self._cv:
            self._generation += 1  # a thread that outlives the join never publishes again
            self._cv.notify_all()
        thread.join(_JOIN_TIMEOUT_S)
        if thread.is_alive():
            logger.error(
                "AsyncWorker: inference thread did not stop within %.1f s", _JOIN_TIMEOUT_S
            )

    def _loop(self, generation: int) -> None:
        def stopped() -> bool:
            return self._generation != generation

        while True:
            with self._cv:
                self._cv.wait_for(lambda: stopped() or self._requested)
                if stopped():
                    return
                self._requested = False
                self._working = True
            try:
                success = bool(self._work())
            except Exception:  # a crashing callback must latch the fault, not kill the loop
                logger.exception("AsyncWorker: work function raised")
                success = False
            with self._cv:
                if stopped():  # reset meanwhile: this result belongs to no cycle
                    return
                self._working = False
                self._finished = True
                self._successful = success
                self._cv.notify_all()  # a control thread waiting out an overrun
                if not success:
                    logger.error("AsyncWorker: work function failed; faulted until reset()")
                    self._faulted = True
                    self.fault = "the work function (inference) failed"
