"""The certified query sets of ``bench_planner_clutter`` (``assets/planning/clutter_queries_<arm>.json``):
their header, certification, and loading with the check that a set matches the bench's run.

Pairs come from the bench's draw (``bench_planner_clutter.draw_pair``: both ends free in the
planner's model and in PyBullet's exact check, the straight segment blocked, not ``separated``),
from the generator that drew the cage (``[seed, CAGE_STREAM]``). Each pair is certified: an independent,
longer search (a planner with seed ``CERT_SEED``, up to ``CERT_ITERATIONS`` iterations and
``CERT_TIME_S`` seconds, no blend radii) finds a path that PyBullet's exact geometry confirms
free densely (``planner_exact.verify_path``, 1 mm / 0.01 rad). A pair without a certificate (its
start or goal in a pocket no path reaches, or beyond the certifier) is replaced by the next drawn
pair. Certifying takes minutes (a few per arm for 100 queries), so the sets are committed
(``make_planner_clutter_queries`` writes them); the bench checks that a file matches its
parameters (arm, seed, the URDF's SHA-256, the margins, the cage, the certifier) and says to
re-run that script when not (or certifies in-process with ``--certify``).

File (``format`` ``"twin-clutter-queries"``, version 1): ``header`` (those parameters),
``replaced`` (pairs replaced in all), ``queries``: ``{"start", "goal"}`` (6 rad each),
``"certificate"`` (the certifier's path, (K, 6) rad, start and goal included) and
``"replaced_before"`` (pairs replaced since the previous query, so the first k queries' count is
their sum). ``assets/planning/README.md`` shows an example.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from twin.benchmarks.planner_exact import ExactChecker, verify_path

from twin.planning import InitialState, PathRequest, Planner
from twin.scenes import Scene

QUERY_DIR = Path(__file__).resolve().parent.parent / "assets" / "planning"
FORMAT = "twin-clutter-queries"
VERSION = 1
#: The certifier: another seed than any bench planner's, a long budget.
CERT_SEED = 1_000_003
CERT_ITERATIONS = 100_000
CERT_TIME_S = 60.0
#: Second seed word of the generator that jitters the cage and then draws the pairs.
CAGE_STREAM = 19


class StaleQueries(Exception):
    """The stored query set does not match the bench's parameters (the message says which and
    how to regenerate it)."""


def path_for(arm: str) -> Path:
    return QUERY_DIR / f"clutter_queries_{arm}.json"


def header(arm: str, seed: int, planner: Planner, scene: Scene) -> dict:
    """The parameters a stored set must match (module doc)."""
    urdf = Path(planner.model.urdf_path).read_bytes()
    return {
        "arm": arm,
        "seed": seed,
        "rng": [seed, CAGE_STREAM],
        "urdf": Path(planner.model.urdf_path).name,
        "urdf_sha256": hashlib.sha256(urdf).hexdigest(),
        "motion_margin": planner.settings.motion_margin,
        "margins": planner.margins(),
        "cage_radius": float(scene.items[0].dims[0]),
        "cage": [item.pose[:3].tolist() for item in scene.items],
        "certifier": {
            "seed": CERT_SEED,
            "max_iterations": CERT_ITERATIONS,
            "max_planning_time_s": CERT_TIME_S,
        },
    }


def certifier(planner: Planner) -> Planner:
    """The independent planner (``CERT_SEED``, ``CERT_ITERATIONS``, ``CERT_TIME_S``) over the
    same model and obstacles."""
    settings = dataclasses.replace(
        planner.settings,
        seed=CERT_SEED,
        max_iterations=CERT_ITERATIONS,
        max_planning_time_s=CERT_TIME_S,
        compute_blend_radii=False,
    )
    out = Planner(settings, model=planner.model)
    out.set_obstacles(planner.obstacles())
    return out


def certify(
    planner: Planner,
    exact: ExactChecker,
    draw: Callable[[], tuple[np.ndarray, np.ndarray]],
    count: int,
    progress: bool = True,
) -> list[dict]:
    """``count`` certified queries (module doc) of the pairs (start, goal) (n,) rad that
    ``draw()`` gives in turn."""
    cert = certifier(planner)
    out: list[dict] = []
    replaced = 0
    t0 = time.perf_counter()
    while len(out) < count:
        start, goal = draw()
        result = cert.path(InitialState(start), PathRequest([goal]))
        path = np.vstack([start, *[w.configuration for w in result.path()]]) if result else None
        if path is None or verify_path(exact, path, cert.checker.travel):
            replaced += 1
            continue
        out.append(
            {
                "start": start.tolist(),
                "goal": goal.tolist(),
                "certificate": path.tolist(),
                "replaced_before": replaced,
            }
        )
        replaced = 0
        if progress:
            print(
                f"\r{len(out)}/{count} certified, {sum(q['replaced_before'] for q in out)} "
                f"replaced, {time.perf_counter() - t0:.0f} s",
                end="",
                flush=True,
            )
    if progress:
        print()
    return out


def regenerate_hint(arm: str, seed: int) -> str:
    return (
        f"re-run `python -m twin.benchmarks.make_planner_clutter_queries --arm {arm} --seed {seed}` "
        "(minutes), or pass --certify to certify in this run"
    )


def load(arm: str, seed: int, planner: Planner, scene: Scene, count: int) -> list[dict]:
    """The first ``count`` stored certified queries of ``arm``; ``StaleQueries`` when the file
    is missing, holds fewer, or its header differs from this run's (``header``)."""
    path = path_for(arm)
    if not path.is_file():
        raise StaleQueries(
            f"no certified queries for {arm!r} ({path}); {regenerate_hint(arm, seed)}"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise StaleQueries(
            f"{path}: expected format {FORMAT!r} version {VERSION}; {regenerate_hint(arm, seed)}"
        )
    want, have = header(arm, seed, planner, scene), data["header"]
    differ = [k for k in want if not _same(want[k], have.get(k))]
    if differ:
        raise StaleQueries(
            f"{path} was made for other parameters ({', '.join(differ)} differ: e.g. "
            f"{differ[0]} {_short(have.get(differ[0]))} stored, {_short(want[differ[0]])} "
            f"now); {regenerate_hint(arm, seed)}"
        )
    if len(data["queries"]) < count:
        raise StaleQueries(
            f"{path} holds {len(data['queries'])} queries, {count} asked for; "
            f"{regenerate_hint(arm, seed)} with --count {count}"
        )
    return data["queries"][:count]


def _same(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(b, int | float) and abs(float(a) - float(b)) <= 1e-12 * max(
            1.0, abs(float(a))
        )
    return a == b


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def pairs(queries: list[dict]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (start, goal) (n,) rad of stored queries."""
    return [(np.array(q["start"]), np.array(q["goal"])) for q in queries]
