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
        _ray_init(ray, ray_address)
    try:
        remote = ray.remote(num_cpus=1)(_run_one)
        return ray.get([remote.remote(*job) for job in jobs])
    except ray.exceptions.RayTaskError as e:  # a run's own error, raised again here as itself
        cause = getattr(e, "cause", None)
        if isinstance(cause, Exception):
            raise cause from None
        raise ScenarioError(f"--ray {ray_address}: a run failed on Ray: {_first_line(e)}") from None
    except ray.exceptions.RayError as e:  # a lost worker or node, a failed object transfer
        raise ScenarioError(f"--ray {ray_address}: {_first_line(e)}") from None
    finally:
        if started:
            ray.shutdown()


#: s to wait for a TCP connection to a ``--ray`` address before handing it to Ray, which
#: otherwise retries an unreachable head for minutes.
RAY_CONNECT_TIMEOUT_S = 5.0


def _ray_init(ray, address: str) -> None:
    """``ray.init`` for ``--ray ADDRESS`` (``"local"``: a local instance); ``ScenarioError`` in
    one line, naming the address, for an address that cannot be reached or that Ray refuses."""
    expected = (
        "expected 'local', host:port of a running Ray head (ray start --head) or ray://host:port"
    )
    if address != "local":
        _check_reachable(address, expected)
    try:
        if address == "local":
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except Exception as e:  # Ray raises ValueError, ConnectionError, RuntimeError, its own
        raise ScenarioError(f"--ray {address}: {_first_line(e)}; {expected}") from None


def _check_reachable(address: str, expected: str) -> None:
    """``ScenarioError`` unless ``[ray://]host:port`` accepts a TCP connection within
    ``RAY_CONNECT_TIMEOUT_S``; other forms (``auto``) are left to Ray."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError, OverflowError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        raise ScenarioError(f"--ray {address}: cannot connect ({reason}); {expected}") from None


def _first_line(error: BaseException) -> str:
    """The first non-empty line of ``error``'s message (Ray's run to many lines)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
