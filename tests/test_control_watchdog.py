"""The async worker's inference watchdog, driven by a real ONNX policy made slow on purpose (a
large MatMul on a branch of the graph that feeds the informational ``actions`` output, times
zero), on real onnxruntime and real threads: a late inference becomes a latched, typed fault
naming its cycle and lateness; nothing is written (the robot keeps the last command); the late
result is dropped; ``reset`` clears it. The limits hold on a fast or a loaded machine: one in
seconds no CPU can meet (``SLOW_LIMIT_S``), one in periods of the caller's time base."""

from __future__ import annotations

import math
import time

import numpy as np
import onnx
import pytest
from control_fakes import IdealArmRobot, full_example_model, set_full_example_commands
from onnx import helper, numpy_helper
from twin.hardware.emulator.testing import wait_until

from twin.control import CommandSource, OnnxRLController, OnnxRuntime, RobotStateAdapter
from twin.control.errors import InferenceOverdueError
from twin.control.workers import AsyncWorker, WorkerMode

SLOW_N = 1536  # the MatMul's side: (1536, 1536) @ (1536, 1536), about 7 GFLOP per inference
#: A watchdog limit no run of the slow policy can meet: 7 GFLOP in 5 ms is 1.4 TFLOP/s on one
#: thread, beyond any CPU core (the policy runs on one, ``OnnxRuntimeOptions``; an AVX-512 core
#: here ran the 2 GFLOP of a 1024 side in 15 ms, too near the test's four limits). A limit from a
#: measured run would not do: the machine may be four times less loaded when the policy runs.
SLOW_LIMIT_S = 0.005


def slow_example_model(path, joints, n: int = SLOW_N):
    """The full example policy (``full_example_model``) with ``actions = h0 + 0 * sum(A @ A)``,
    ``A`` the (n, n) expansion of ``tanh(sum(obs))``: the same joint targets, a slow run."""
    model = onnx.load(full_example_model(path, joints))
    graph = model.graph
    graph.node.remove(next(x for x in graph.node if x.output[0] == "actions"))
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array([n, n], np.int64), "slow/shape"),
            numpy_helper.from_array(np.zeros(1, np.float32), "slow/zero"),
        ]
    )
    graph.node.extend(
        [
            helper.make_node("ReduceSum", ["obs/concat"], ["slow/sum"], keepdims=0),
            helper.make_node("Tanh", ["slow/sum"], ["slow/a"]),
            helper.make_node("Expand", ["slow/a", "slow/shape"], ["slow/A"]),
            helper.make_node("MatMul", ["slow/A", "slow/A"], ["slow/B"]),
            helper.make_node("ReduceSum", ["slow/B"], ["slow/s"], keepdims=0),
            helper.make_node("Mul", ["slow/s", "slow/zero"], ["slow/nothing"]),
            helper.make_node("Add", ["mlp/h0", "slow/nothing"], ["actions"]),
        ]
    )
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """(fast policy, slow policy, the slow policy's shortest measured run in seconds)."""
    d = tmp_path_factory.mktemp("watchdog")
    joints = IdealArmRobot().model.joint_names
    fast = full_example_model(d / "fast.onnx", joints)
    slow = slow_example_model(d / "slow.onnx", joints)
    runtime = OnnxRuntime()
    runtime.initialize(slow)
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        assert runtime.evaluate(), runtime.last_error
        runs.append(time.perf_counter() - t0)
    runtime.close()
    return fast, slow, min(runs)


def test_the_slow_policy_computes_what_the_fast_one_does(models):
    fast, slow, run_s = models
    outputs = []
    for path in (fast, slow):
        runtime = OnnxRuntime()
        runtime.initialize(path)
        for name in runtime.input_names():
            runtime.input_buffer(name, runtime.input_info(name).dtype)[:] = 1
        assert runtime.evaluate(), runtime.last_error
        outputs.append({n: runtime.output_buffer(n).copy() for n in runtime.output_names()})
        runtime.close()
    assert outputs[0].keys() == outputs[1].keys()
    for name, value in outputs[0].items():
        np.testing.assert_array_equal(outputs[1][name], value, err_msg=name)
    assert run_s > 4 * SLOW_LIMIT_S  # on this machine, at least four times over the limit


def _running_controller(fast):
    """A controller on the fast policy that has written a few commands: (controller, robot)."""
    robot = IdealArmRobot()
    commands = CommandSource()
    controller = OnnxRLController(RobotStateAdapter(robot), commands)
    assert controller.create(fast), controller.error
    assert controller.init(mode=WorkerMode.ASYNC), controller.error
    set_full_example_commands(commands, robot.model.home_q + 0.05)
    wait_until(lambda: (controller.update(robot.t_us), robot.step(), robot.writes >= 5)[2], 15.0)
    return controller, robot


def _update_until_false(controller, robot, timeout_s: float = 30.0) -> list[bool]:
    results = []
    deadline = time.monotonic() + timeout_s
    while not results or results[-1]:
        assert time.monotonic() < deadline, "the watchdog never fired"
        results.append(controller.update(robot.t_us))
        robot.step()
    return results


def test_a_late_inference_in_seconds_is_a_fault_and_the_last_command_holds(models):
    fast, slow, _ = models
    controller, robot = _running_controller(fast)
    limit_s = SLOW_LIMIT_S
    assert controller.create(slow), controller.error  # the operator swaps in a slower policy
    assert controller.init(mode=WorkerMode.ASYNC, watchdog_s=limit_s), controller.error
    command, writes = robot.command, robot.writes
    t_start = robot.t_us
    results = _update_until_false(controller, robot)
    error = controller.fault_error
    assert isinstance(error, InferenceOverdueError)
    assert error.busy_s > limit_s and error.limit == f"{limit_s:.3f} s"
    assert error.dispatched_t_us == t_start  # the first cycle after init, which never finished
    assert error.t_us == robot.t_us - 4000  # the tick that found it late (before its step)
    assert controller.fault == str(error)
    assert "watchdog" in controller.fault and f"t_us={t_start}" in controller.fault
    assert all(results[:-1]) and len(results) >= 2
    # latched: no write, the robot keeps the fast policy's last command, also once the late
    # inference has finished (its result is dropped)
    wait_until(lambda: not controller.worker.busy, 30.0)
    for _ in range(10):
        assert controller.update(robot.t_us) is False
        robot.step()
    assert robot.writes == writes and robot.command is command
    assert controller.fault_error is error
    controller.reset()
    assert controller.fault is None and controller.fault_error is None
    assert controller.update(robot.t_us)  # a fresh cycle is dispatched
    controller.close()


def test_a_late_inference_in_periods_counts_the_callers_time_base(models):
    fast, slow, _ = models
    controller, robot = _running_controller(fast)
    assert controller.create(slow), controller.error
    assert controller.init(mode=WorkerMode.ASYNC, watchdog_s=math.inf, watchdog_periods=3)
    worker = controller.worker
    period_us = worker.period_ms * 1000
    assert period_us == robot.control_period_s * 1e6  # one robot step is one policy period
    writes, t0 = robot.writes, robot.t_us
    results = _update_until_false(controller, robot)  # one update per period, no sleep
    # dispatch at t0; skipped at t0 + P, 2P, 3P (within the limit); at t0 + 4P: the fault
    assert results == [True] * 4 + [False]
    error = controller.fault_error
    assert isinstance(error, InferenceOverdueError)
    assert (error.dispatched_t_us, error.t_us, error.busy_periods) == (t0, t0 + 4 * period_us, 4)
    assert error.limit == "3 periods of 4 ms"
    assert error.busy_s >= 4 * worker.overrun_wait_s  # each skipped cycle waited its quarter
    assert worker.consecutive_overruns == 4 and worker.faulted
    assert robot.writes == writes
    controller.close()


def test_a_tight_loop_waits_out_a_slow_policy_instead_of_spinning_through_cycles(models):
    """Without the worker's overrun wait a loop that never sleeps skips hundreds of cycles per
    inference; with it, a cycle waits up to a quarter period and then skips, so a policy that
    needs k quarter periods costs about k skipped cycles, not the loop's spin count."""
    fast, slow, _ = models
    controller, robot = _running_controller(fast)
    assert controller.create(slow), controller.error
    assert controller.init(mode=WorkerMode.ASYNC, watchdog_s=math.inf), controller.error
    worker = controller.worker
    quarter_s = worker.overrun_wait_s
    assert quarter_s == pytest.approx(0.001)
    writes = robot.writes
    t_wall = time.monotonic()
    wait_until(
        lambda: (controller.update(robot.t_us), robot.step(), robot.writes >= writes + 3)[2], 60.0
    )
    elapsed = time.monotonic() - t_wall
    # each skipped cycle waited its quarter period (or got the result): no spinning
    assert worker.overruns <= elapsed / quarter_s + 3
    controller.close()


def test_watchdog_settings_are_checked():
    with pytest.raises(ValueError, match="watchdog_s must be"):
        AsyncWorker(250.0, watchdog_s=-1.0)
    with pytest.raises(ValueError, match="watchdog_s must be more than 0"):
        AsyncWorker(250.0, watchdog_s=0.0)
    with pytest.raises(ValueError, match="watchdog_s must be"):
        AsyncWorker(250.0, watchdog_s=math.nan)
    with pytest.raises(ValueError, match="watchdog_periods must be a whole number"):
        AsyncWorker(250.0, watchdog_periods=0)
    with pytest.raises(ValueError, match="watchdog_periods must be a whole number"):
        AsyncWorker(250.0, watchdog_periods=2.5)
    with pytest.raises(ValueError, match="at 0 ms"):
        AsyncWorker(4000.0, watchdog_periods=3)  # a 0 ms period has no periods to count
    with pytest.raises(ValueError, match="overrun_wait_s must be"):
        AsyncWorker(250.0, overrun_wait_s=math.inf)
    worker = AsyncWorker(250.0)
    assert (worker.watchdog_s, worker.watchdog_periods, worker.overrun_wait_s) == (1.0, None, 0.001)
    assert AsyncWorker(0.5).watchdog_s == 8.0  # four periods of 2 s
