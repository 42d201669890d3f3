"""Many runs: scenario files x seeds x backends, here or on a Ray cluster.

Each run is self-contained (its own sim, or its own emulators on their own ports), so runs can
go to any worker. ``sweep(..., ray_address=...)`` sends each run to Ray as one task (``ray`` is
an optional extra: ``pip install 'twin[ray]'``); ``"local"`` starts a local Ray instance.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable, Sequence
from importlib import resources

from twin.scenario.format import Scenario, ScenarioError, load_scenario
from twin.scenario.runner import BACKENDS, ScenarioResult, run_scenario


def shipped_suite() -> pathlib.Path:
    """The folder of the shipped scenario suite (``scenarios/`` in the repository)."""
    return pathlib.Path(str(resources.files("twin.scenarios")))


def scenario_files(paths: Iterable[str | os.PathLike]) -> list[pathlib.Path]:
    """Scenario files among ``paths`` (files, or folders searched for ``*.toml``), sorted within
    each folder; raises ``ScenarioError`` for a path that does not exist."""
    out: list[pathlib.Path] = []
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            out.extend(sorted(p.rglob("*.toml")))
        elif p.is_file():
            out.append(p)
        else:
            raise ScenarioError(f"{p}: no such scenario file or folder")
    return out


def expand_backends(backend: str) -> tuple[str, ...]:
    """``"both"`` -> both backends; otherwise the one named (checked)."""
    if backend == "both":
        return BACKENDS
    if backend not in BACKENDS:
        raise ScenarioError(f"unknown backend {backend!r}; expected one of {(*BACKENDS, 'both')}")
    return (backend,)


def _run_one(path: str, backend: str, seed: int | None, record_dir: str | None) -> ScenarioResult:
    return run_scenario(load_scenario(path), backend, seed=seed, record_dir=record_dir)


def sweep(
    scenarios: Sequence[Scenario],
    backends: Sequence[str],
    seeds: Sequence[int | None] = (None,),
    record_dir: str | os.PathLike | None = None,
    ray_address: str | None = None,
) -> list[ScenarioResult]:
    """Every scenario x seed x backend; ``seeds`` ``(None,)`` means each scenario's own seed.
    Results come back in that order whichever worker ran them."""
    jobs = [
        (str(s.path), b, seed, None if record_dir is None else str(record_dir))
        for s in scenarios
        for seed in seeds
        for b in backends
    ]
    if ray_address is None:
        return [_run_one(*job) for job in jobs]
    try:
        import ray
    except ImportError as e:
        raise ScenarioError(
            "--ray needs the ray package: pip install 'twin[ray]' (or pip install ray)"
        ) from e
    started = not ray.is_initialized()
    if started:
        if ray_address == "local":
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=ray_address, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1)(_run_one)
        return ray.get([remote.remote(*job) for job in jobs])
    finally:
        if started:
            ray.shutdown()
