"""The ONNX controller and its async worker from several threads (issue 13, item 9): ``reset``,
``init`` and ``close`` from another thread while the control thread runs ``update``; a dead
inference thread is a fault. Real threads, real onnxruntime, many trials, values asserted."""

from __future__ import annotations

import threading
import time

import pytest
from control_fakes import IdealArmRobot, full_example_model, set_full_example_commands
from twin.hardware.emulator.testing import wait_until

from twin.control import CommandSource, OnnxRLController, RobotStateAdapter
from twin.control.workers import AsyncWorker, WorkerMode

TRIALS = 40
#: Cycles a control loop may skip after a reset before the fresh inference's result arrives,
#: beyond one per quarter period of wall time waited (the worker waits that long on a due cycle
#: whose inference still runs, so the thread gets the interpreter; what the OS does not
#: schedule in that time is the watchdog's). A small policy needs about 0.3 ms: 0-3 cycles here.
#: A loop that never sleeps skipped 200-800 before, about 10 per ms (a forced GIL switch, 5 ms,
#: per hand-off).
SKIP_BOUND = 25


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return full_example_model(
        tmp_path_factory.mktemp("threads") / "p.onnx",
        IdealArmRobot().model.joint_names,
        update_rate_hz=250.0,
    )


def _controller(policy, mode):
    robot = IdealArmRobot()
    commands = CommandSource()
    controller = OnnxRLController(RobotStateAdapter(robot), commands)
    assert controller.create(policy), controller.error
    assert controller.init(mode=mode), controller.error
    set_full_example_commands(commands, robot.model.home_q + 0.05)
    return controller, robot


class ControlLoop:
    """The control thread: ``update`` then ``step`` (tight, or paced by ``pace_s`` of sleep: a
    loop's own rate, not a synchronisation), recording every result and exception and the
    longest run of skipped cycles (``max_skipped``, reset by the test)."""

    def __init__(self, controller, robot, pace_s: float = 0.0) -> None:
        self.controller, self.robot, self.pace_s = controller, robot, pace_s
        self.results: list[bool] = []
        self.errors: list[BaseException] = []
        self.max_skipped = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.results.append(self.controller.update(self.robot.t_us))
                skipped = getattr(self.controller.worker, "consecutive_overruns", 0)
                self.max_skipped = max(self.max_skipped, skipped)
            except BaseException as e:  # what must never happen: recorded, asserted empty
                self.errors.append(e)
                return
            self.robot.step()
            if self.pace_s:
                time.sleep(self.pace_s)

    def __enter__(self) -> ControlLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5.0)


@pytest.mark.parametrize("pace_s", [0.0, 0.001], ids=["tight", "paced"])
def test_reset_from_another_thread_while_the_async_worker_runs(policy, pace_s):
    controller, robot = _controller(policy, WorkerMode.ASYNC)
    with ControlLoop(controller, robot, pace_s) as loop:
        for _ in range(TRIALS):
            controller.reset()  # from this thread, while the loop thread updates
            writes, loop.max_skipped, t0 = robot.writes, 0, time.monotonic()
            # after each reset the policy runs again: new commands reach the robot
            wait_until(lambda w=writes: robot.writes >= w + 3, 15.0)
            waited_s = time.monotonic() - t0
            worker = controller.worker
            assert isinstance(worker, AsyncWorker) and not worker.faulted
            assert worker._thread is not None and worker._thread.is_alive()
            bound = SKIP_BOUND + waited_s / worker.overrun_wait_s
            assert loop.max_skipped <= bound, ("the fresh inference came too late", waited_s)
    assert loop.errors == []
    assert all(loop.results), controller.fault
    threads = [t for t in threading.enumerate() if t.name == "AsyncWorker"]
    assert len(threads) == 1  # every reset joined its thread: no leak, no second inference thread
    controller.close()
    assert not any(t.name == "AsyncWorker" and t.is_alive() for t in threading.enumerate())


@pytest.mark.parametrize("mode", [WorkerMode.SYNC, WorkerMode.ASYNC])
def test_init_and_close_from_another_thread(policy, mode):
    controller, robot = _controller(policy, mode)
    with ControlLoop(controller, robot) as loop:
        for k in range(TRIALS // 4):
            writes = robot.writes
            assert controller.init(mode=mode), controller.error
            wait_until(lambda w=writes: robot.writes >= w + 3, 15.0)
            if k % 3 == 2:
                controller.close()  # the loop's updates now fail cleanly: not initialized
                n = len(loop.results)
                wait_until(lambda n=n: len(loop.results) > n + 2, 15.0)
                assert loop.results[-1] is False and "not initialized" in controller.fault
                assert controller.create(policy), controller.error
    assert loop.errors == []
    controller.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_inference_thread_is_a_fault_naming_it(policy):
    controller, robot = _controller(policy, WorkerMode.ASYNC)
    infer = controller._infer
    kill = threading.Event()

    def work() -> bool:
        if kill.is_set():
            raise SystemExit  # not an Exception: it ends the thread, as a fatal error would
        return infer()

    controller.worker.set_callbacks(controller._read_inputs, work, controller._write_outputs)
    for _ in range(5):
        assert controller.update(robot.t_us), controller.fault
        robot.step()
    thread = controller.worker._thread
    kill.set()
    wait_until(
        lambda: (controller.update(robot.t_us), robot.step(), not thread.is_alive())[2], 15.0
    )
    writes = robot.writes
    results = []
    for _ in range(10):
        results.append(controller.update(robot.t_us))
        robot.step()
    assert results == [False] * 10  # never True again with no thread to infer
    assert "inference thread 'AsyncWorker' is dead" in controller.fault
    assert robot.writes == writes  # and nothing was written
    kill.clear()
    controller.reset()  # a new thread
    assert controller.update(robot.t_us) and controller.fault is None
    wait_until(
        lambda: (controller.update(robot.t_us), robot.step(), robot.writes > writes)[2], 15.0
    )
    assert controller.worker._thread.is_alive()
    controller.close()


def test_worker_reset_races_start_without_error():
    """The worker alone, with a trivial work function: reset from a second thread against the
    first update's thread start, many times (the race behind 'cannot join thread before it is
    started')."""
    for trial in range(TRIALS * 5):
        worker = AsyncWorker(1000.0)  # a 1 ms period
        calls: list[int] = []
        worker.set_callbacks(lambda: True, lambda c=calls: c.append(1) or True, lambda: True)
        go = threading.Barrier(2)
        errors: list[BaseException] = []

        def resetter(w=worker, errors=errors, go=go) -> None:
            go.wait()
            try:
                w.reset()
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=resetter)
        t.start()
        go.wait()
        first = worker.update(0)
        t.join()
        assert errors == [] and first is True, trial
        # whatever the interleaving, the worker infers afterwards
        ticks = iter(range(1000, 10**9, 1000))
        wait_until(lambda w=worker, c=calls, t=ticks: w.update(next(t)) and len(c) > 0, 15.0)
        assert not worker.faulted and worker.fault is None
        worker.close()
        assert worker.update(next(ticks)) is False and "closed" in worker.fault
