"""``OnnxRLController``: run an exploy-convention ONNX policy against the three interfaces.

    controller = OnnxRLController(state, commands, data_collection)
    if not controller.create("policy.onnx"):   # parse and match the model
        raise SystemExit(controller.error)
    controller.init(enable_data_collection=False, mode=WorkerMode.SYNC)
    while running:
        ok = controller.update(t_us)          # read -> infer -> write when a period is due
        robot.step()

``create`` and ``init`` return ``False`` on failure with the typed exception in ``error``;
``update`` returns ``False`` on a failed cycle with the reason in ``fault``. A policy output of
NaN or inf fails the cycle before anything is written, so the robot keeps the last safe command.

A cycle: ``state.begin_cycle`` (one robot snapshot), every input's ``read``, inference (timed),
the finiteness check, every output's ``write``, ``state.end_cycle`` (one ``robot.write``), and,
with data collection enabled, one row of every registered source. The reads and writes are the
components' compiled calls (``compile``, made once by ``init``: buffers, interface methods and
joint indices bound, nothing looked up per cycle). Unlike the reference, which
collects at every ``update`` call (including skipped ticks), a row is written per completed cycle,
so inputs and outputs in a row belong together (also in async mode). A row that cannot be
written fails that ``update`` (``fault`` names the data collection, ``collection_failures``
counts them) but not the cycle: the command was sent and the policy keeps its rate.

Threads: ``create``, ``init``, ``reset``, ``update`` and ``close`` may be called from any thread;
one lock serialises them, so a ``reset`` from another thread waits for a running ``update`` and
stops the async worker's thread before the buffers are zeroed. A dead inference thread is a
fault: ``update`` returns ``False`` and ``fault`` names the thread. So is an inference that
stays busy past the async worker's watchdog (``init(watchdog_s=..., watchdog_periods=...)``):
``fault_error`` is the ``InferenceOverdueError`` (which cycle, how late), nothing is written
until ``reset``, and the robot keeps the last command.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import partial
from math import isfinite

import numpy as np

from twin import events
from twin.control.context import OnnxContext
from twin.control.errors import ComponentInitError, ControlError
from twin.control.interfaces import CommandInterface, DataCollectionInterface, RobotStateInterface
from twin.control.matchers import default_group_matchers, default_matchers
from twin.control.runtime import OnnxRuntime, OnnxRuntimeOptions
from twin.control.workers import AsyncWorker, SyncWorker, Worker, WorkerMode

__all__ = ["NullDataCollection", "OnnxRLController"]

logger = logging.getLogger(__name__)
_clock = time.perf_counter


class NullDataCollection(DataCollectionInterface):
    """Collects nothing (for controllers created without data collection)."""

    def register_data_source(self, prefix: str, data: np.ndarray) -> bool:
        return True

    def collect_data(self, t_us: int) -> bool:
        return True


class OnnxRLController:
    """An ONNX policy controller; see the module docstring."""

    def __init__(
        self,
        state: RobotStateInterface,
        command: CommandInterface,
        data_collection: DataCollectionInterface | None = None,
    ) -> None:
        self.state = state
        self.command = command
        self.data_collection = data_collection or NullDataCollection()
        self.runtime = OnnxRuntime()
        self._context = OnnxContext()
        self._defaults_registered = False
        self._worker: Worker | None = None
        self._initialized = False
        self._collect = False
        self._t_us = 0
        # (component, compiled call) pairs and bound hooks, resolved once in ``init`` (_compile).
        self._readers: tuple = ()
        self._writers: tuple = ()
        self._begin_cycle = self._end_cycle = self._evaluate = self._arena_dot = None
        #: Wall time (s) of the last inference, (1,) float64 (registered for data collection).
        self.inference_duration_s = np.zeros(1)
        #: Why the last ``create``/``init`` failed (a ``ControlError``), else ``None``.
        self.error: ControlError | None = None
        #: Why the last failed ``update`` failed, else ``None`` (cleared by a good cycle).
        self.fault: str | None = None
        #: The typed error behind a worker's latched ``fault`` (the watchdog's
        #: ``InferenceOverdueError``), else ``None``; cleared by ``reset``.
        self.fault_error: ControlError | None = None
        #: Failed cycles since construction.
        self.fault_count = 0
        #: Rows the data collection failed to write (each fails its ``update``, not the cycle).
        self.collection_failures = 0
        self._collection_failed = False
        self._logged_fault: str | None = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ setup
    def context(self) -> OnnxContext:
        """The matching context: register custom matchers here before ``create``."""
        return self._context

    def create(
        self,
        onnx_model_path: str | os.PathLike[str],
        register_default_matchers: bool = True,
        options: OnnxRuntimeOptions | None = None,
        strict: bool = True,
    ) -> bool:
        """Load the model and match its tensors (call ``init`` afterwards).

        Built-in matchers are registered on the first call with ``register_default_matchers``;
        custom matchers registered through ``context()`` survive later calls (e.g. a reload).
        Returns ``False`` with the reason in ``error``.
        """
        with self._lock:
            return self._create(onnx_model_path, register_default_matchers, options, strict)

    def _create(self, onnx_model_path, register_default_matchers, options, strict) -> bool:
        self._stop_worker()
        self._initialized = False
        self.error = None
        if register_default_matchers and not self._defaults_registered:
            self._defaults_registered = True
            for matcher in default_matchers():
                self._context.register_matcher(matcher)
            for matcher in default_group_matchers():
                self._context.register_group_matcher(matcher)
        try:
            self.runtime.initialize(onnx_model_path, options)
            self._context.create_context(self.runtime, strict=strict)
        except ControlError as e:
            return self._failed(e, f"creating the controller from {str(onnx_model_path)!r}")
        return True

    def init(
        self,
        enable_data_collection: bool = False,
        mode: WorkerMode = WorkerMode.SYNC,
        watchdog_s: float | None = None,
        watchdog_periods: int | None = None,
    ) -> bool:
        """Connect every component to the interfaces and set up the worker.

        ``watchdog_s`` / ``watchdog_periods``: the async worker's inference watchdog (wall
        seconds, or periods of the ``t_us`` time base; defaults in ``AsyncWorker``); an
        inference busy beyond either is a latched fault (``fault_error`` is an
        ``InferenceOverdueError``). The sync worker infers inline and has none.
        Returns ``False`` (reason in ``error``) if no model was created or a component cannot be
        served (unknown joint, missing sensor, ...). Ends with ``reset()``.
        """
        with self._lock:
            return self._init(enable_data_collection, mode, watchdog_s, watchdog_periods)

    def _init(
        self,
        enable_data_collection: bool,
        mode: WorkerMode,
        watchdog_s: float | None,
        watchdog_periods: int | None,
    ) -> bool:
        self._stop_worker()
        self._initialized = False
        self.error = None
        if not self.runtime.is_initialized or not self._context.update_rate:
            return self._failed(
                ControlError("no model: call create(path) successfully before init()"), "init"
            )
        try:
            for component in (*self._context.inputs, *self._context.outputs):
                try:
                    component.init(self.state, self.command)
                except ComponentInitError as e:
                    raise ComponentInitError(
                        f"component {component!r} (tensors {component.tensors}): {e}"
                    ) from e
            self.state.finish_init()
            self._collect = enable_data_collection and self._register_data_sources()
        except ControlError as e:
            return self._failed(e, "init")
        if WorkerMode(mode) is WorkerMode.ASYNC:
            self._worker = AsyncWorker(self._context.update_rate, watchdog_s, watchdog_periods)
        else:
            self._worker = SyncWorker(self._context.update_rate)
        self._worker.set_callbacks(self._read_inputs, self._infer, self._write_outputs)
        self._compile()
        self._initialized = True
        self.reset()
        return True

    def _compile(self) -> None:
        """The cycle's data path, once: every component's zero-argument call (``compile``:
        buffers, interface methods and joint indices bound) and the interface hooks."""
        rt, state, command = self.runtime, self.state, self.command
        self._readers = tuple((c, c.compile(rt, state, command)) for c in self._context.inputs)
        self._writers = tuple((c, c.compile(rt, state, command)) for c in self._context.outputs)
        self._begin_cycle, self._end_cycle = state.begin_cycle, state.end_cycle
        self._evaluate = rt.evaluate
        self._arena_dot = partial(rt.output_arena.dot, rt.output_arena)  # outputs_finite, inline

    def _register_data_sources(self) -> bool:
        """Every float32 input and output, and the inference duration (as the reference does)."""
        rt, dc = self.runtime, self.data_collection
        sources = [
            (f"model/input/{n}", rt.input_buffer(n))
            for n in rt.input_names()
            if rt.input_info(n).dtype is np.float32
        ]
        sources += [
            (f"model/output/{n}", rt.output_buffer(n))
            for n in rt.output_names()
            if rt.output_info(n).dtype is np.float32
        ]
        sources.append(("model/inference/duration_s", self.inference_duration_s))
        for prefix, data in sources:
            if not dc.register_data_source(prefix, data):
                raise ControlError(
                    f"registering data source {prefix!r} with {type(dc).__name__} failed"
                )
        return True

    def _failed(self, error: ControlError, what: str) -> bool:
        self.error = error
        logger.error("%s failed: %s", what, error)
        return False

    # ------------------------------------------------------------------ running
    def reset(self) -> None:
        """Reset the worker (stopping its thread) and zero every buffer (memory and step count
        restart at 0)."""
        with self._lock:
            if self._worker is not None:
                self._worker.reset()
            if self.runtime.is_initialized:
                self.runtime.reset_buffers()
            self.fault = self.fault_error = None
            self._collection_failed = False

    def update(self, t_us: int) -> bool:
        """One control tick at ``t_us`` (integer microseconds): read, infer, write when due.

        ``False`` if the cycle failed (``fault`` says why); the robot then keeps its last command.
        Also ``False`` when the cycle's data-collection row was not written (the command was).
        """
        with self._lock:
            if not self._initialized:
                return self._set_fault(
                    "the controller is not initialized: call create() and init() first"
                )
            self._t_us = t_us
            worker = self._worker
            if worker.update(t_us):
                if not self._collection_failed:
                    return True
                self._collection_failed = False
                return self._set_fault(
                    f"data collection failed at t_us={t_us}; the command was sent and the policy "
                    "keeps its rate (see the collector's error)"
                )
            if worker.fault_error is not None:
                self.fault_error = worker.fault_error
                self._set_fault(worker.fault)
            elif self.fault is None:
                self._set_fault(worker.fault or "the policy cycle failed")
            return False

    @property
    def worker(self) -> Worker | None:
        return self._worker

    def _read_inputs(self) -> bool:
        self.fault = None
        if not self._begin_cycle(self._t_us):
            state = self.state
            why = getattr(state, "last_error", None) or "no robot state"
            return self._set_fault(f"{type(state).__name__}.begin_cycle failed ({why})")
        for component, read in self._readers:
            if not read():
                return self._set_fault(f"input {component.name!r} has no value this cycle")
        return True

    def _infer(self) -> bool:
        t0 = _clock()
        ok = self._evaluate()
        self.inference_duration_s[0] = _clock() - t0
        if not ok:
            return self._set_fault(self.runtime.last_error or "inference failed")
        if not isfinite(self._arena_dot()):  # rt.outputs_finite()
            rt = self.runtime
            bad = rt.non_finite_outputs()
            return self._set_fault(
                f"policy output(s) {bad} are not finite (NaN/inf, or beyond "
                f"{rt.output_limit:.1e}); nothing was written, the last command stays in force"
            )
        return True

    def _write_outputs(self) -> bool:
        for component, write in self._writers:
            if not write():
                return self._set_fault(f"output {component.name!r} was refused by the robot")
        if not self._end_cycle(self._t_us):
            return self._set_fault(
                f"{type(self.state).__name__}.end_cycle failed (command not sent)"
            )
        if events.listening():  # for a recording: what went into the policy and what came out
            rt = self.runtime
            events.publish(
                "controller",
                "policy_step",
                t_us=self._t_us,
                inputs={n: rt.input_buffer(n, rt.input_info(n).dtype) for n in rt.input_names()},
                outputs={
                    n: rt.output_buffer(n, rt.output_info(n).dtype) for n in rt.output_names()
                },
            )
        if self._collect and not self.data_collection.collect_data(self._t_us):
            self.collection_failures += 1
            self._collection_failed = True  # reported by update; the cycle itself completed
        else:
            self._logged_fault = None
        return True

    def _set_fault(self, reason: str) -> bool:
        if self.fault is None:
            self.fault_count += 1
        if reason != self._logged_fault:  # log each new reason once, not every cycle
            logger.warning("controller cycle failed: %s", reason)
            self._logged_fault = reason
        self.fault = reason
        return False

    # ------------------------------------------------------------------ cleanup
    def _stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def close(self) -> None:
        """Stop the background worker and release the session (idempotent)."""
        with self._lock:
            self._stop_worker()
            self._initialized = False
            self.runtime.close()

    def __enter__(self) -> OnnxRLController:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
