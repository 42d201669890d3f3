"""Workers: mirrors exploy's worker_test.cpp (sync trigger and phase, async flow on another
thread, overrun then catch-up, failure latch cleared by reset). Waits use events with timeouts."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.control.workers import AsyncWorker, SyncWorker, WorkerMode, _lround, period_ms

TIMEOUT_S = 2.0


class Callbacks:
    """Counts calls; ``results`` gives each callback's return values in order (default True)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.results = {"read": [], "work": [], "write": []}
        self.work_hook = None
        self.work_thread: list[int] = []
        self.work_done = threading.Event()

    def _result(self, name: str) -> bool:
        self.calls.append(name)
        return self.results[name].pop(0) if self.results[name] else True

    def read(self) -> bool:
        return self._result("read")

    def work(self) -> bool:
        self.work_thread.append(threading.get_ident())
        if self.work_hook is not None:
            self.work_hook()
        ok = self._result("work")
        self.work_done.set()
        return ok

    def write(self) -> bool:
        return self._result("write")

    def count(self, name: str) -> int:
        return self.calls.count(name)


def make(worker_cls, rate_hz: float = 10.0):
    worker, cb = worker_cls(rate_hz), Callbacks()
    assert worker.set_callbacks(cb.read, cb.work, cb.write)
    return worker, cb


def wait_work(cb: Callbacks) -> None:
    assert cb.work_done.wait(TIMEOUT_S), "timed out waiting for the worker thread"
    cb.work_done.clear()


def wait_idle(worker) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while worker.busy:
        assert time.monotonic() < deadline, "inference never finished"
        time.sleep(0.001)


def update_until(worker, t_us: int, done) -> None:
    """Call ``update(t_us)`` until ``done()`` (the result is published just after ``work``)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert worker.update(t_us)
        assert time.monotonic() < deadline, "the worker never published its result"
        time.sleep(0.001)


def update_until_false(worker, t_us: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while worker.update(t_us):
        assert time.monotonic() < deadline, "update() never returned False"
        time.sleep(0.001)


def test_period_is_whole_milliseconds_rounded_half_away_from_zero():
    assert period_ms(10.0) == 100
    assert period_ms(3.0) == 333  # 333.33 ms
    assert period_ms(400.0) == 3  # 2.5 ms rounds up, as std::lround does
    assert period_ms(2000.0 / 3.0) == 2  # 1.5 ms -> 2
    with pytest.raises(ValueError, match="positive"):
        period_ms(0.0)


def test_set_callbacks_refuses_a_missing_callback():
    worker = SyncWorker(10.0)
    assert not worker.set_callbacks(lambda: True, None, lambda: True)
    assert not worker.update(0)  # callbacks not set


def test_sync_update_trigger():
    worker, cb = make(SyncWorker)
    assert worker.update(1_000_000)  # the first call runs at once
    assert cb.calls == ["read", "work", "write"]
    assert worker.update(1_000_050)  # within the period: skipped
    assert len(cb.calls) == 3
    assert worker.update(1_100_000)  # one period later: runs
    assert cb.calls == ["read", "work", "write"] * 2


def test_sync_phase_is_kept_when_a_call_comes_late():
    worker, cb = make(SyncWorker)
    worker.update(1_000_000)
    worker.update(1_100_050)  # 50 us late: runs; the phase stays on the 100 ms grid
    assert cb.count("write") == 2
    worker.update(1_199_400)  # 99.4 ms after the grid point, rounds to 99 ms: not due
    assert cb.count("write") == 2
    worker.update(1_199_500)  # 99.5 ms rounds to 100 ms: due
    assert cb.count("write") == 3


def test_sync_elapsed_time_rounds_to_whole_milliseconds():
    worker, cb = make(SyncWorker, rate_hz=500.0)  # 2 ms
    worker.update(10_000)
    worker.update(11_499)  # 1.499 ms -> 1 ms: not due
    assert cb.count("read") == 1
    worker.update(11_500)  # 1.5 ms -> 2 ms: due
    assert cb.count("read") == 2


@pytest.mark.parametrize("failing", ["read", "work", "write"])
def test_sync_failure_of_any_callback_fails_the_update_and_keeps_the_phase(failing):
    worker, cb = make(SyncWorker)
    cb.results[failing] = [False]
    assert not worker.update(1_000_000)
    order = ["read", "work", "write"]
    assert cb.calls == order[: order.index(failing) + 1]  # later callbacks not called
    assert worker.update(1_000_001)  # the phase did not advance: the cycle is retried at once
    assert cb.calls[-3:] == order


def test_async_basic_flow_runs_inference_on_another_thread():
    worker, cb = make(AsyncWorker)
    try:
        assert worker.update(1_000_000)  # read + dispatch, no write yet
        wait_work(cb)
        assert cb.calls == ["read", "work"]
        assert cb.work_thread[0] != threading.get_ident()
        update_until(worker, 1_000_050, lambda: cb.count("write") == 1)  # mid-period: write only
        assert cb.calls == ["read", "work", "write"]
        assert worker.update(1_100_000)  # next period: read + dispatch
        wait_work(cb)
        assert cb.calls == ["read", "work", "write", "read", "work"]
    finally:
        worker.close()


def test_async_overrun_is_skipped_and_counted_then_catches_up():
    worker, cb = make(AsyncWorker)
    started, release = threading.Event(), threading.Event()

    def slow_first_inference():
        if not started.is_set():
            started.set()
            assert release.wait(TIMEOUT_S)

    cb.work_hook = slow_first_inference
    try:
        assert worker.update(1_000_000)
        assert started.wait(TIMEOUT_S)
        assert worker.update(1_100_000)  # boundary while busy: skipped, still True
        assert worker.update(1_150_000)
        assert (worker.overruns, worker.consecutive_overruns) == (2, 2)
        assert cb.calls == ["read"]
        release.set()
        wait_work(cb)
        wait_idle(worker)
        # Catch-up: the next update writes the late result and dispatches a new cycle at once.
        update_until(worker, 1_150_000, lambda: cb.count("write") == 1)
        wait_work(cb)
        assert cb.calls == ["read", "work", "write", "read", "work"]
        assert worker.consecutive_overruns == 0 and worker.overruns == 2
    finally:
        worker.close()


def test_async_work_failure_latches_until_reset():
    worker, cb = make(AsyncWorker)
    cb.results["work"] = [False]
    try:
        assert worker.update(1_000_000)
        wait_work(cb)
        update_until_false(worker, 1_000_050)
        assert worker.faulted
        assert not worker.update(1_100_000)
        assert not worker.update(1_200_000)
        assert cb.calls == ["read", "work"]  # no write, no new dispatch while faulted
        worker.reset()
        assert not worker.faulted
        assert worker.update(2_000_000)  # accepts new work after reset
        wait_work(cb)
        assert cb.calls == ["read", "work", "read", "work"]
    finally:
        worker.close()


def test_async_read_failure_fails_without_dispatch():
    worker, cb = make(AsyncWorker)
    cb.results["read"] = [False]
    try:
        assert not worker.update(1_000_000)
        assert cb.calls == ["read"]
    finally:
        worker.close()


def test_async_write_failure_fails_the_consuming_update():
    worker, cb = make(AsyncWorker)
    cb.results["write"] = [False]
    try:
        assert worker.update(1_000_000)
        wait_work(cb)
        update_until_false(worker, 1_000_050)
        assert cb.calls == ["read", "work", "write"]
    finally:
        worker.close()


def test_async_reset_stops_the_thread_and_restarts_cleanly():
    worker, cb = make(AsyncWorker)
    try:
        worker.update(1_000_000)
        wait_work(cb)
        thread = worker._thread
        worker.reset()
        assert thread is not None and not thread.is_alive()
        assert worker.update(2_000_000)  # first call after reset fires at once
        wait_work(cb)
        assert cb.count("read") == 2 and cb.count("work") == 2
    finally:
        worker.close()
        worker.close()  # idempotent


def test_worker_mode_values():
    assert WorkerMode("sync") is WorkerMode.SYNC and WorkerMode("async") is WorkerMode.ASYNC


@settings(max_examples=300)
@given(
    st.sampled_from([0.7, 3.0, 10.0, 250.0, 400.0, 1000.0, 2000.0 / 3.0, 2500.0, 5000.0]),
    st.integers(-5_000, 2_000_000),
)
def test_the_integer_due_rule_equals_the_reference_rounding(rate_hz, elapsed_us):
    # The reference fires when lround(elapsed_ms) >= period_ms (elapsed >= 0 here); the worker
    # compares integers (elapsed_us >= 1000 period - 500). Same decision for every elapsed.
    worker = SyncWorker(rate_hz)
    worker._due(0)  # the first call sets the phase reference; then put it at 1 s
    worker._last_us = 1_000_000
    reference = elapsed_us >= 0 and _lround(elapsed_us / 1000.0) >= worker.period_ms
    assert worker._due(1_000_000 + elapsed_us) == reference


@pytest.mark.parametrize("rate_hz", [0.7, 3.0, 10.0, 250.0, 400.0, 2000.0 / 3.0, 2500.0, 5000.0])
def test_the_integer_due_rule_at_the_rounding_boundaries(rate_hz):
    worker = SyncWorker(rate_hz)
    worker._due(0)
    worker._last_us = 1_000_000
    edge = 1000 * worker.period_ms - 500  # lround((edge - 1) / 1000) < period <= lround(edge)
    for elapsed_us in (-1, 0, 1, edge - 1, edge, edge + 1, 1000 * worker.period_ms):
        reference = elapsed_us >= 0 and _lround(elapsed_us / 1000.0) >= worker.period_ms
        assert worker._due(1_000_000 + elapsed_us) == reference, elapsed_us
