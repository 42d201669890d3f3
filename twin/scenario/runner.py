"""Run one scenario on one backend: open the robot (for ``hardware``, against device emulators
started for this run on their own ports, in lock-step with the emulated physics), bring it to
the start state, run the task, record it, and check the metrics.

    result = run_scenario(load_scenario("scenarios/weigh.toml"), backend="hardware")
    if not result.ok:
        print("\\n".join(result.failures()))
"""

from __future__ import annotations

import contextlib
import pathlib
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from twin.backends import open_robot
from twin.names import closest
from twin.planning.settings import COUNTED_CHECKS, counted_budgets
from twin.robot import Robot
from twin.scenario.expect import Check
from twin.scenario.format import Scenario, ScenarioError
from twin.scenario.tasks import CAUSE, METRICS, TASKS, Plant, hold

#: Backends a scenario runs on.
BACKENDS = ("sim", "hardware")
#: Lock-step waits (s of wall time) for what the emulators answer: a reply, an acknowledgement,
#: the F/T sensor's first frame after ``R``, the IMU's first sample. In lock-step the emulated
#: devices answer at once in robot time, so a wait only ends early on a starved machine; these
#: are meant to be longer than any stall a loaded laptop gives (with the earlier 2 s bus wait
#: and the F/T sensor's 1-2 s waits, hardware scenarios failed their start-up at load 20-38 on
#: two cores), so a run's figures do not depend on the load. A dead emulator still ends the
#: run, later.
LOCK_STEP_WAIT_S = 20.0
#: Start-up tries of each device in lock-step (``startup.attempts``; the shipped 4 can all
#: fall within one stall of a loaded machine).
LOCK_STEP_ATTEMPTS = 8


@dataclass
class ScenarioResult:
    """A scenario run: its metrics, their checks, the recording, the wall time, the error that
    stopped it (if any: the first error, with what followed it), and ``cause``: why the task
    failed in its own words (the failed step and its reason; None when it did not say)."""

    scenario: Scenario
    backend: str
    seed: int
    metrics: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    recording: pathlib.Path | None = None
    wall_s: float = 0.0
    error: str | None = None
    cause: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(c.ok for c in self.checks)

    @property
    def id(self) -> str:
        return f"{self.scenario.name}[{self.backend}, seed {self.seed}]"

    def why(self) -> str | None:
        """The first cause of a failed run in one line: the error, else the task's cause, else
        None (then the failed metrics say it)."""
        if self.ok:
            return None
        return self.error if self.error is not None else self.cause

    def failures(self) -> list[str]:
        """The cause (the error, or the step that failed and why), then one line per failed
        metric (scenario, metric, expected, measured), then the recording."""
        lines = [c.message(self.scenario.name, self.backend) for c in self.checks if not c.ok]
        if self.error is not None:
            lines.insert(0, f"{self.scenario.name} [{self.backend}] error: {self.error}")
        elif self.cause is not None and lines:
            lines.insert(0, f"{self.scenario.name} [{self.backend}] cause: {self.cause}")
        if lines and self.recording is not None:
            lines.append(f"  recording: {self.recording} (twin replay {self.recording})")
        return lines


def check_metrics(scenario: Scenario) -> None:
    """Refuse ``[expect]`` metrics the scenario's task does not measure (with the closest)."""
    known = METRICS[scenario.task]
    for e in scenario.expect:
        if e.metric not in known:
            raise ScenarioError(
                f"{scenario.path}: [expect] {e.metric!r} is not measured by kind "
                f"{scenario.task!r}{closest(e.metric, known)}; expected one of {', '.join(known)}"
            )


class _SourcePlant:
    """The emulated hardware's world: the physics source's sim, under the source's lock."""

    def __init__(self, source) -> None:
        self._source = source

    def attach_payload(self, mass: float, com=(0.0, 0.0, 0.0), radius: float = 0.02) -> None:
        with self._source.lock:
            self._source.robot.attach_payload(mass, com, radius)

    def detach_payload(self) -> None:
        with self._source.lock:
            self._source.robot.detach_payload()

    def set_external_force(self, force, link: str = "tcp") -> None:
        with self._source.lock:
            self._source.robot.set_external_force(force, link)


@contextlib.contextmanager
def _robot(scenario: Scenario, backend: str, seed: int) -> Iterator[tuple[Robot, Plant | None]]:
    if backend == "sim":
        with open_robot("sim", scene=scenario.scene, seed=seed) as robot:
            yield robot, robot  # the start state: reset in place (run_scenario, recorded)
        return
    if backend != "hardware":
        raise ValueError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    from twin.hardware.clock import ManualClock
    from twin.hardware.emulator import EmulatorStack, make_sim_source
    from twin.hardware.emulator.cli import IdlePump
    from twin.hardware.emulator.testing import emulator_config

    # Lock-step: the robot and the emulators share a virtual clock, so the emulated physics
    # advances one period per robot.step() whatever the machine's load (a sweep shares it);
    # the idle pump keeps time moving while nothing steps (device set-up, a planner call).
    config = lock_step_config(emulator_config(watchdog_s=None, stale_after_s=1.0))
    clock = ManualClock()
    start = None if scenario.start_q is None else np.asarray(scenario.start_q)
    source = make_sim_source(seed=seed, scene=scenario.scene, initial_q=start)
    with EmulatorStack(config, source, clock=clock, seed=seed) as stack:
        pump = IdlePump(stack, round(config.control_period_s * 1e6))
        try:
            with open_robot("hardware", config=stack.robot_config(), clock=clock) as robot:
                yield robot, _SourcePlant(source)
        finally:
            pump.close()


def lock_step_config(config):
    """``config`` (a ``HardwareConfig``) with the waits and start-up tries of a lock-step run
    (``LOCK_STEP_WAIT_S``, ``LOCK_STEP_ATTEMPTS``): what the emulators answer is waited for,
    however loaded the machine."""
    wait = LOCK_STEP_WAIT_S
    return replace(
        config,
        bus=replace(config.bus, reply_timeout_s=wait),
        ft=replace(config.ft, ack_timeout_s=wait, activation_timeout_s=wait),
        imu=replace(config.imu, first_sample_timeout_s=wait),
        startup=replace(config.startup, attempts=LOCK_STEP_ATTEMPTS),
    )


def first_error(e: BaseException) -> str:
    """``e`` in one line, led by the errors it was raised while handling, first one first
    (``twin.cli.closing.errors_in_order``; an error raised ``from`` another names it itself), in
    the ``twin`` command's words: ``DeviceFaultError: ...; then: ParkError: ...``."""
    from twin.cli.closing import errors_in_order  # here: the CLI package imports every command

    chain = errors_in_order(e) or [e]
    return "; then: ".join(f"{type(x).__name__}: {x}" for x in chain)


def _settle(robot: Robot, q: np.ndarray) -> None:
    """Hold the start position for a moment: a run from a given start starts at rest there."""
    hold(robot, np.asarray(q, dtype=float), 0.2)


def run_scenario(
    scenario: Scenario,
    backend: str = "sim",
    *,
    seed: int | None = None,
    record_dir: str | pathlib.Path | None = None,
    planning_checks: int = COUNTED_CHECKS,
) -> ScenarioResult:
    """Run ``scenario`` on ``backend`` (seed: the scenario's unless given); with ``record_dir``,
    the run is recorded there as ``<name>-<backend>-<seed>.mcap``. Errors of the run (not of the
    file) are caught and reported in the result, the first one first (``first_error``).

    The run's figures do not depend on the machine's load: its planners' budgets count
    collision checks, not seconds (``planning_checks`` a query, through
    ``planning.settings.counted_budgets``); the sim steps in robot time; the emulated hardware
    runs in lock-step with generous waits (``_robot``, ``lock_step_config``)."""
    check_metrics(scenario)
    seed = scenario.seed if seed is None else seed
    result = ScenarioResult(scenario, backend, seed)
    t0 = time.perf_counter()
    try:
        with _robot(scenario, backend, seed) as (robot, plant):
            if record_dir is not None:
                from twin.record import RecordingRobot, versions

                path = pathlib.Path(record_dir) / f"{scenario.name}-{backend}-{seed}.mcap"
                path.parent.mkdir(parents=True, exist_ok=True)
                meta = {
                    "backend": backend,
                    "robot_options": {"scene": scenario.scene, "seed": seed},
                    "scene": scenario.scene,
                    "seed": seed,
                    "scenario": str(scenario.path),
                    "versions": versions(),
                }
                recorded = RecordingRobot(robot, path, metadata=meta)
                if plant is robot:  # the sim is its own plant: its calls are recorded too
                    plant = recorded
                robot = recorded
                result.recording = path
            try:
                start = None if scenario.start_q is None else np.asarray(scenario.start_q)
                if start is not None:
                    if callable(getattr(robot, "reset", None)):
                        robot.reset(
                            q=start
                        )  # a sim is reset in place; the emulated one starts there
                    _settle(robot, start)
                with counted_budgets(planning_checks):
                    metrics = TASKS[scenario.task](robot, scenario, plant)
                result.cause = metrics.pop(CAUSE, None)
                result.metrics = metrics
            finally:
                if record_dir is not None:
                    robot.recording.close()
    except Exception as e:  # a fault of the run (device, model, file) fails this run only
        result.error = first_error(e)
        result.metrics.setdefault("traceback", traceback.format_exc(limit=4))
    result.wall_s = time.perf_counter() - t0
    result.checks = [Check(e, result.metrics.get(e.metric)) for e in scenario.expect]
    return result
