"""Test configuration: hypothesis runs derandomised so every property test replays exactly; the
numba caches are built once before the first test (``_warm_numba_caches``); the real-time tests
run alone on the machine under pytest-xdist (``_WorkerLock``)."""

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "twin",
    derandomize=True,  # a fixed seed per test: a failure replays on every run
    deadline=None,  # machines are shared and noisy; speed is for benchmarks
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "twin"))

#: One process per line builds (or, on a warm cache, just loads) the compiled kernels that the
#: tests' subprocesses (the CLI, the scenario sweeps, Ray workers) and pytest-xdist's workers
#: would otherwise each build again while the disk cache is cold: the planner's checks; the
#: transformers' and the shipped arm's dynamics kernels; the serial bus cycle's codec and the servo
#: emulator's. Two processes: one a core.
WARM_UP = (
    "from twin.planning import Planner, PlannerSettings; Planner(PlannerSettings(seed=0))",
    "import numpy as np; from twin.transforms import _compiled; _compiled.kernels();"
    " from twin.dynamics import ArmDynamics; ArmDynamics.default().inverse_dynamics("
    "np.zeros(6), np.zeros(6), np.zeros(6));"
    " from twin.hardware.protocols import _compiled as cycle; cycle.kernels();"
    " from twin.hardware.emulator import _compiled as emulator; emulator.kernels()",
)


#: Tests with a real-time loop or a wall-clock check (serial I/O against the emulators at the
#: loop's rate, the hardware holds, rate and timeout checks): by module. Under pytest-xdist each
#: runs alone (``_WorkerLock``). A scenario on the emulated hardware is not one of them: it runs
#: in lock-step with its emulators (one clock, one period a cycle), whatever the load.
REALTIME_MODULES = (
    "test_hw_",
    "test_shadow_hil",
    "test_datapath_",
    "test_cli_backend",
    "test_cli_emulate",
    "test_cli_hardware",
    "test_control_controller",
    "test_control_workers",
    "test_record",
    "test_safety_limits",
)
#: Modules under a real-time prefix that open no port and read no clock (codecs, configuration
#: checks, records, the emulator's plant arithmetic): they run beside other tests.
NOT_REALTIME = (
    "test_hw_codecs.py",
    "test_hw_config_strict.py",
    "test_hw_records.py",
    "test_hw_emulator_plant.py",
)


def realtime(item: pytest.Item) -> bool:
    """Whether ``item`` is a real-time test (``REALTIME_MODULES``, not ``NOT_REALTIME``)."""
    name = Path(str(item.fspath)).name
    return name not in NOT_REALTIME and name.startswith(REALTIME_MODULES)


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has done it
        return
    if "TWIN_TEST_LOCKS" not in os.environ:  # the workers inherit it
        config._twin_locks = tempfile.mkdtemp(prefix="twin-test-locks-")
        os.environ["TWIN_TEST_LOCKS"] = config._twin_locks


def pytest_sessionstart(session):
    # before pytest-xdist's (trylast) starts the workers; not in a worker
    if not hasattr(session.config, "workerinput") and not session.config.option.collectonly:
        _warm_numba_caches()


def pytest_unconfigure(config):
    if hasattr(config, "_twin_locks"):
        shutil.rmtree(config._twin_locks, ignore_errors=True)
        del os.environ["TWIN_TEST_LOCKS"]


#: The longest modules (minutes each), handed out first under pytest-xdist so that none of them
#: is left running alone at the end (with ``--no-loadscope-reorder``: else xdist orders the
#: modules by their count of tests).
LONGEST_FIRST = (
    "test_scenario_tools.py",
    "test_scenario_runs.py",
    "test_cli_packaging.py",
    "test_safety_sim_hold.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if realtime(item):
            item.add_marker("realtime")
    if hasattr(config, "workerinput"):  # every worker sorts alike: the controller compares
        rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist a real-time test (its fixtures' setup and teardown included) runs
    while no other worker runs a test, and the others run side by side."""
    if not hasattr(item.config, "workerinput"):
        yield
        return
    _LOCK.acquire(item.get_closest_marker("realtime") is not None)
    try:
        yield
    finally:
        _LOCK.release()


class _WorkerLock:
    """A lock over the workers (``flock`` on files in ``$TWIN_TEST_LOCKS``): shared by ordinary
    tests, exclusive for real-time ones; a waiting real-time test holds the gate, so that no new
    ordinary test starts before it (it cannot starve)."""

    def acquire(self, exclusive: bool) -> None:
        folder = Path(os.environ["TWIN_TEST_LOCKS"])
        folder.mkdir(parents=True, exist_ok=True)
        gate = os.open(folder / "gate", os.O_CREAT | os.O_RDWR)
        fcntl.flock(gate, fcntl.LOCK_EX)
        self.tests = os.open(folder / "tests", os.O_CREAT | os.O_RDWR)
        fcntl.flock(self.tests, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        os.close(gate)  # releases the gate

    def release(self) -> None:
        os.close(self.tests)  # releases the lock


_LOCK = _WorkerLock()


#: A machine-code index of an entry point of each warmed module (``twin.numba_cache``'s names):
#: all present, the cache is taken as warm (after a change of a kernel the first test that uses
#: it builds it).
WARM_MARKS = (
    "twin_planning_checks_*.rrt_chunk-*.nbi",
    "twin_transforms_*.pose_batch_parallel-*.nbi",
    "twin_dynamics_*.mass_many-*.nbi",
    "twin_hardware_cycle_*.present_joints-*.nbi",
    "twin_emulator_plant_*.present_wire-*.nbi",
)


def _warm_numba_caches() -> None:
    """Run ``WARM_UP`` (in parallel) unless the cache looks warm; a failure here is reported by
    the tests that need it."""
    from twin.numba_cache import cache_dir

    built = cache_dir() / "__pycache__"
    if all(any(built.glob(mark)) for mark in WARM_MARKS):
        return
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL)
        for code in WARM_UP
    ]
    for proc in procs:
        proc.wait(timeout=900)
