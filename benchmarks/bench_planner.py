"""Planner benchmark: success, plan time and collision checks per second on the stored queries.

For each scene (table, shelf, bin with its point cloud, cage) the stored solvable queries
(``assets/planning/queries_<scene>.json``, made by ``make_planner_queries.py``) are planned with
``twin.planning.Planner`` and, in the same run, with the baseline: the same RRT-Connect, smoothing
and goal logic (``twin.planning.search.goals``) over PyBullet's exact queries (one DIRECT client, joint
resets plus ``getClosestPoints``, segments at 0.05 rad as pybullet-planning does). Every returned
path of both is re-verified with PyBullet's exact geometry at 1 mm / 0.01 rad; colliding paths are
counted. Targets: success >= 99 %, zero colliding paths, median <= 50 ms, >= 10x the baseline.
First, the conservative model is compared with PyBullet's exact check on 100,000 random
configurations per scene (2,000 with ``--quick``): configurations reported free but colliding
(must be 0) and the share of free configurations reported blocked.

Timing: each planner's queries are timed in one loop and their paths verified afterwards (the
same for both planners). Verifying between timed queries would run PyBullet's exact geometry
right before each of them: that keeps the baseline's own code (PyBullet) in the CPU caches and
evicts ours, so it charges a cache refill only to the planner whose queries take about a
millisecond (measured: our median about doubles, the baseline's does not move). That effect is
still shown: ``cold median ms`` plans every query again right after the exact verification of
the previous path, and ``speedup (cold)`` compares it with the baseline's median.

Roadmap and tail: each scene's planner builds its roadmap over the static obstacles first
(``Planner.prepare_roadmap``, timed as ``roadmap s``); ``first ms`` is the first query after it
(cold: nothing of the queries in the caches yet), the percentiles are over all queries.
Targets of the tail: p95 <= 10 ms, p99 <= 30 ms on every scene. On a loaded machine the wall
clock of a query includes the time other processes ran on its core; ``CPU p95 / p99 ms`` (the
process's CPU time per query) shows the tail without that (``tail_targets_met_cpu``). ``Unreachable goal``: a goal
that is free but cut off (a small sphere beside the base blocks every configuration with joint 1
between about 0.9 and 2.7 rad; start at home, goal at home with joint 1 at 2.9 rad) must return
``blocked_path`` because the time limit stopped the search (``stats["deadline_hit"]``), within
the limit plus one RRT iteration or one roadmap build step: cold (the first query after
``set_obstacles``: the roadmap build runs inside it, given at most half of its time, and is
deferred) and warm (after ``prepare_roadmap``). Measured (load 1): cold 0.5006 s, warm 0.5010 s
under the 0.5 s limit.

Scaling (the tables at the end): plan time against the size of a point cloud (1k to 1M points in
a 0.3 m x 0.3 m x 0.1 m bin region beside the arm; the field is rebuilt once per cloud:
``set_obstacles`` time and its peak memory (tracemalloc) beside the plan time), and against the
number of goals (1 to 64, ``shortest_path``). Growth: ``set_obstacles`` grows linearly with the
points (each point marks its cells of the fixed-size distance field) and its peak memory with
them too (the points and their cell indices, a few dozen bytes a point, besides the fixed field);
plan time does not grow with the points (the field has a fixed size: a lookup costs the same).
The random cloud replaces the table and can bury a stored goal (``goals in cloud``: such a
query rightly fails with ``blocked_end``); ``success, free goals`` is the success over the
queries whose goal the cloud leaves free. (Only goals count: three stored starts lie between
the soft and the URDF limits, which ``configurations_free`` refuses and the planner accepts,
clamped into the soft limits.)
Plan time against goals grows about linearly (each goal is checked, and a goal needing a search
runs its own search until a path shorter than every remaining goal's straight distance is
found); nothing grows worse than linearly.

    python benchmarks/bench_planner.py [--quick] [--seed 0]
"""

from __future__ import annotations

import json
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import emit_json, parse_args, print_table
from planner_exact import ExactChecker, ExactMotionChecker, time_and_verify, verify_path

from twin.planning import (
    GoalPrioritization,
    InitialState,
    Obstacle,
    PathError,
    PathRequest,
    Planner,
    PlannerSettings,
)
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.search.goals import SearchParameters, plan_to_goals

SCENES = ("table", "shelf", "bin", "cage")
QUERY_DIR = Path(__file__).resolve().parent.parent / "assets" / "planning"
QUICK_QUERIES = 5
BASELINE_QUERIES = 30  # per scene in a full run (the baseline is slow); all of them with --quick
CONSERVATIVE_SAMPLES = 100_000  # random configurations per scene (2,000 with --quick)


def load_queries(scene: str) -> list[dict]:
    data = json.loads((QUERY_DIR / f"queries_{scene}.json").read_text(encoding="utf-8"))
    return data["queries"]


def run_ours(planner: Planner, exact: ExactChecker, queries: list[dict]) -> dict:
    """Times every query in one loop, then verifies the paths and replays each query right after
    the verification of the previous path (the ``cold`` times): ``planner_exact.time_and_verify``,
    with ``checks`` the configurations checked over all queries."""
    pairs = [(np.array(q["start"]), np.array(q["goal"])) for q in queries]
    out = time_and_verify(planner, exact, pairs)
    return dict(out, checks=int(out["checks"].sum()))


def run_baseline(planner: Planner, exact: ExactChecker, queries: list[dict], seed: int) -> dict:
    """Times every query in one loop (as ``run_ours``), then verifies the paths."""
    settings = planner.settings
    params = SearchParameters(settings.rrt_step, settings.max_iterations, settings.shortcut_rounds)
    checker = ExactMotionChecker(exact, planner.model.lower, planner.model.upper)
    times, cpu, ok, colliding, paths = [], [], [], 0, []
    for i, q in enumerate(queries):
        start, goal = np.array(q["start"]), np.array(q["goal"])
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = plan_to_goals(
            checker,
            start,
            goal[None],
            GoalPrioritization.LIST_ORDER,
            lambda i=i: np.random.default_rng([seed, i]),
            params,
        )
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        ok.append(outcome.error is None)
        paths.append(outcome.path)
    for path in paths:
        if path is not None:
            colliding += verify_path(exact, path, planner.checker.travel)
    return {
        "times": np.array(times),
        "cpu": np.array(cpu),
        "ok": np.array(ok),
        "colliding": colliding,
        "checks": float(checker.checked),
    }


def conservative(scene: str, samples: int, seed: int) -> dict:
    """The model against PyBullet's exact check on random configurations (in chunks)."""
    planner = Planner()
    planner.set_obstacles(obstacles_from_scene(scene))
    model = planner.model
    rng = np.random.default_rng([seed, sum(map(ord, scene))])
    false_free = colliding = blocked_free = 0
    t_model = t_exact = 0.0
    with ExactChecker(model.urdf_path, scene) as exact:
        for start in range(0, samples, 10_000):
            q = rng.uniform(model.lower, model.upper, size=(min(10_000, samples - start), 6))
            t0 = time.perf_counter()
            free = planner.configurations_free(q)
            t1 = time.perf_counter()
            col = exact.colliding_many(q)
            t_exact += time.perf_counter() - t1
            t_model += t1 - t0
            false_free += int(np.sum(free & col))
            colliding += int(col.sum())
            blocked_free += int(np.sum(~free & ~col))
    return {
        "samples": samples,
        "exact_colliding": colliding,
        "false_free": false_free,
        "free_reported_blocked_share": blocked_free / max(1, samples - colliding),
        "model_checks_per_s": samples / t_model,
        "exact_checks_per_s": samples / t_exact,
    }


UNREACHABLE_LIMIT_S = 0.5


def unreachable_planner(settings: PlannerSettings) -> tuple[Planner, np.ndarray, np.ndarray]:
    """A planner whose goal is free but cut off: a sphere (r 2 cm at (0, 0.12, 0.2) m) beside
    the base blocks every configuration with joint 1 in about [0.9, 2.7] rad, joint 1's limits
    are +-2.97 rad; start: home, goal: home with joint 1 at 2.9 rad."""
    planner = Planner(settings)
    planner.set_obstacles([Obstacle.from_sphere("post", [0.0, 0.12, 0.2], 0.02)])
    start = np.asarray(planner.model.home_q, dtype=float)
    goal = start.copy()
    goal[0] = 2.9
    return planner, start, goal


def unreachable_goal(seed: int, cold: bool) -> dict:
    """The unreachable goal under ``UNREACHABLE_LIMIT_S``: ``cold``, the first query after
    ``set_obstacles`` (the roadmap build runs in it, at most half of its time); else after
    ``prepare_roadmap`` (warm)."""
    planner, start, goal = unreachable_planner(
        PlannerSettings(seed=seed, max_planning_time_s=UNREACHABLE_LIMIT_S)
    )
    if not cold:
        planner.prepare_roadmap()
    t0 = time.perf_counter()
    result = planner.path(InitialState(start), PathRequest([goal]))
    wall_s = time.perf_counter() - t0
    return {
        "case": "cold" if cold else "warm",
        "limit_s": UNREACHABLE_LIMIT_S,
        "error": None if result.error is None else result.error.value,
        "blocked_path": result.error is PathError.BLOCKED_PATH,
        "deadline_hit": bool(result.stats.get("deadline_hit")),
        "roadmap_deferred": bool(result.stats.get("roadmap_deferred")),
        "iterations": int(result.stats.get("iterations", 0)),
        "time_s": float(result.stats["time_s"]),
        "wall_s": wall_s,
    }


CLOUD_SIZES = (1_000, 10_000, 100_000, 1_000_000)
GOAL_COUNTS = (1, 4, 16, 64)


def _plan_times(planner: Planner, queries: list[dict], goals_of) -> tuple[np.ndarray, np.ndarray]:
    """Wall time (s) and success (bool) per query."""
    times, ok = [], []
    for i, q in enumerate(queries):
        request = PathRequest(goals_of(i, q))
        t0 = time.perf_counter()
        result = planner.path(InitialState(np.array(q["start"])), request)
        times.append(time.perf_counter() - t0)
        ok.append(bool(result))
    return np.array(times), np.array(ok)


def scaling_points(quick: bool, seed: int) -> tuple[list, dict]:
    """Plan time against point-cloud size (module doc)."""
    queries = load_queries("table")[: 5 if quick else 30]
    rows, figs = [], {}
    for n in CLOUD_SIZES[:2] if quick else CLOUD_SIZES:
        rng = np.random.default_rng([seed, n])
        points = rng.uniform([0.45, -0.45, 0.0], [0.75, -0.15, 0.1], size=(n, 3))
        planner = Planner(PlannerSettings(seed=seed))
        planner.set_obstacles(obstacles_from_scene("table"))
        tracemalloc.start()
        t0 = time.perf_counter()
        planner.set_obstacles([Obstacle.from_point_cloud("cloud", points)])
        set_s = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        planner.prepare_roadmap()
        times, solved = _plan_times(planner, queries, lambda i, q: [np.array(q["goal"])])
        goal_free = planner.configurations_free(np.array([q["goal"] for q in queries]))
        success = float(solved.mean())
        f = {
            "set_obstacles_s": set_s,
            "peak_mb": peak,
            "median_ms": 1e3 * float(np.median(times)),
            "p95_ms": 1e3 * float(np.percentile(times, 95)),
            "success": success,
            "goals_in_cloud": int((~goal_free).sum()),
            "success_free_goals": float(solved[goal_free].mean()),
        }
        figs[str(n)] = f
        rows.append(
            [
                n,
                f"{set_s:.3f}",
                f"{peak:.1f}",
                f["median_ms"],
                f["p95_ms"],
                f"{100 * success:.0f}%",
                f["goals_in_cloud"],
                f"{100 * f['success_free_goals']:.0f}%",
            ]
        )
    return rows, figs


def scaling_goals(quick: bool, seed: int) -> tuple[list, dict]:
    """Plan time against the number of goals (module doc): query i's goals are the goals of
    queries i, i + 1, ... (free configurations of the same scene)."""
    queries = load_queries("table")
    starts = queries[: 5 if quick else 30]
    planner = Planner(PlannerSettings(seed=seed))
    planner.set_obstacles(obstacles_from_scene("table"))
    planner.prepare_roadmap()
    rows, figs = [], {}
    for g in GOAL_COUNTS[:3] if quick else GOAL_COUNTS:

        def goals_of(i: int, _q: dict, g: int = g) -> list[np.ndarray]:
            return [np.array(queries[(i + k) % len(queries)]["goal"]) for k in range(g)]

        times, solved = _plan_times(planner, starts, goals_of)
        success = float(solved.mean())
        f = {
            "median_ms": 1e3 * float(np.median(times)),
            "p95_ms": 1e3 * float(np.percentile(times, 95)),
            "ms_per_goal": 1e3 * float(np.median(times)) / g,
            "success": success,
        }
        figs[str(g)] = f
        rows.append([g, f["median_ms"], f["p95_ms"], f["ms_per_goal"], f"{100 * success:.0f}%"])
    return rows, figs


def main() -> None:
    args = parse_args(__doc__.split("\n")[0])
    samples = 2_000 if args.quick else CONSERVATIVE_SAMPLES
    cons_rows, cons = [], {}
    for scene in SCENES:
        c = conservative(scene, samples, args.seed)
        cons[scene] = c
        cons_rows.append(
            [
                scene,
                c["samples"],
                c["exact_colliding"],
                c["false_free"],
                f"{100 * c['free_reported_blocked_share']:.1f}%",
                f"{c['model_checks_per_s']:.3g}",
                f"{c['exact_checks_per_s']:.3g}",
            ]
        )
    print_table(
        "Conservative model vs PyBullet's exact check (random configurations within the limits)",
        [
            "scene",
            "configs",
            "exact colliding",
            "reported free but colliding",
            "free reported blocked",
            "model checks/s (batched)",
            "exact checks/s",
        ],
        cons_rows,
    )
    rows, figures = [], {}
    for scene in SCENES:
        queries = load_queries(scene)
        if args.quick:
            queries = queries[:QUICK_QUERIES]
        planner = Planner(PlannerSettings(seed=args.seed))
        planner.set_obstacles(obstacles_from_scene(scene))
        t0 = time.perf_counter()
        planner.prepare_roadmap()
        build_s = time.perf_counter() - t0
        with ExactChecker(planner.model.urdf_path, scene) as exact:
            ours = run_ours(planner, exact, queries)
            subset = queries[: QUICK_QUERIES if args.quick else BASELINE_QUERIES]
            base = run_baseline(planner, exact, subset, args.seed)
        n_sub = len(subset)
        ours_sub = np.median(ours["times"][:n_sub])
        speedup = float(np.median(base["times"]) / ours_sub)
        speedup_cpu = float(np.median(base["cpu"]) / np.median(ours["cpu"][:n_sub]))
        speedup_cold = float(np.median(base["times"]) / np.median(ours["cold"][:n_sub]))
        ours_rate = ours["checks"] / ours["times"].sum()
        base_rate = base["checks"] / base["times"].sum()
        fig = {
            "queries": len(queries),
            "success": float(ours["ok"].mean()),
            "median_ms": 1e3 * float(np.median(ours["times"])),
            "p95_ms": 1e3 * float(np.percentile(ours["times"], 95)),
            "p99_ms": 1e3 * float(np.percentile(ours["times"], 99)),
            "cpu_median_ms": 1e3 * float(np.median(ours["cpu"])),
            "cpu_p95_ms": 1e3 * float(np.percentile(ours["cpu"], 95)),
            "cpu_p99_ms": 1e3 * float(np.percentile(ours["cpu"], 99)),
            "max_ms": 1e3 * float(np.max(ours["times"])),
            "first_query_ms": 1e3 * float(ours["times"][0]),
            "roadmap_build_s": build_s,
            "cold_median_ms": 1e3 * float(np.median(ours["cold"])),
            "checks_per_s": ours_rate,
            "colliding_paths": int(ours["colliding"]),
            "replay_mismatches": int(ours["mismatches"]),
            "baseline_queries": n_sub,
            "baseline_success": float(base["ok"].mean()),
            "baseline_median_ms": 1e3 * float(np.median(base["times"])),
            "baseline_p95_ms": 1e3 * float(np.percentile(base["times"], 95)),
            "baseline_checks_per_s": base_rate,
            "baseline_colliding_paths": int(base["colliding"]),
            "speedup_median": speedup,
            "speedup_median_cpu": speedup_cpu,
            "speedup_median_cold": speedup_cold,
            "checks_per_s_ratio": ours_rate / base_rate,
        }
        figures[scene] = fig
        rows.append(
            [
                scene,
                len(queries),
                f"{100 * fig['success']:.1f}%",
                fig["median_ms"],
                fig["p95_ms"],
                fig["p99_ms"],
                f"{fig['cpu_p95_ms']:.3g} / {fig['cpu_p99_ms']:.3g}",
                fig["first_query_ms"],
                f"{build_s:.2f}",
                fig["cold_median_ms"],
                f"{ours_rate:.3g}",
                fig["colliding_paths"],
                f"{n_sub}: {100 * fig['baseline_success']:.0f}%",
                fig["baseline_median_ms"],
                f"{base_rate:.3g}",
                fig["baseline_colliding_paths"],
                f"{speedup:.1f}x",
                f"{speedup_cpu:.1f}x",
                f"{speedup_cold:.1f}x",
                f"{fig['checks_per_s_ratio']:.0f}x",
            ]
        )
        print(f"{scene}: done", flush=True)
    print_table(
        "Planner vs PyBullet-query baseline (same RRT-Connect; times per query, wall clock)",
        [
            "scene",
            "queries",
            "success",
            "median ms",
            "p95 ms",
            "p99 ms",
            "CPU p95 / p99 ms",
            "first ms",
            "roadmap s",
            "cold median ms",
            "checks/s",
            "colliding",
            "baseline n: success",
            "base median ms",
            "base checks/s",
            "base colliding",
            "speedup (median)",
            "speedup (CPU)",
            "speedup (cold)",
            "checks/s ratio",
        ],
        rows,
    )
    all_ok = all(
        f["success"] >= 0.99
        and f["colliding_paths"] == 0
        and f["replay_mismatches"] == 0
        and f["median_ms"] <= 50.0
        and f["speedup_median"] >= 10.0
        for f in figures.values()
    ) and all(c["false_free"] == 0 for c in cons.values())
    print(
        f"\ntargets (>= 99 % success, 0 colliding, replayed, median <= 50 ms, >= 10x): {'met' if all_ok else 'NOT met'}"
    )
    tail_ok = all(
        f["success"] == 1.0
        and f["colliding_paths"] == 0
        and f["p95_ms"] <= 10.0
        and f["p99_ms"] <= 30.0
        for f in figures.values()
    )
    tail_ok_cpu = all(
        f["success"] == 1.0
        and f["colliding_paths"] == 0
        and f["cpu_p95_ms"] <= 10.0
        and f["cpu_p99_ms"] <= 30.0
        for f in figures.values()
    )
    print(
        f"tail targets (100 % success, 0 colliding, p95 <= 10 ms, p99 <= 30 ms): {'met' if tail_ok else 'NOT met'}"
        f" (wall clock); on CPU time: {'met' if tail_ok_cpu else 'NOT met'}"
    )
    unreachable = [unreachable_goal(args.seed, cold) for cold in (True, False)]
    print_table(
        "Unreachable goal (free but cut off) under a time limit: cold (first query after "
        "set_obstacles, the roadmap build inside it) and warm (after prepare_roadmap)",
        [
            "case",
            "limit s",
            "error",
            "stopped by the deadline",
            "roadmap deferred",
            "iterations",
            "time s",
        ],
        [
            [
                u["case"],
                u["limit_s"],
                u["error"],
                u["deadline_hit"],
                u["roadmap_deferred"],
                u["iterations"],
                u["wall_s"],
            ]
            for u in unreachable
        ],
    )
    cloud_rows, clouds = scaling_points(args.quick, args.seed)
    print_table(
        "Scaling: point-cloud size (table queries; set_obstacles once per cloud)",
        [
            "points",
            "set_obstacles s",
            "peak MB",
            "plan median ms",
            "plan p95 ms",
            "success",
            "goals in cloud",
            "success, free goals",
        ],
        cloud_rows,
    )
    goal_rows, goal_figs = scaling_goals(args.quick, args.seed)
    print_table(
        "Scaling: number of goals (table scene, shortest_path)",
        ["goals", "plan median ms", "plan p95 ms", "ms per goal", "success"],
        goal_rows,
    )
    emit_json(
        "planner",
        {
            "quick": args.quick,
            "seed": args.seed,
            "targets_met": all_ok,
            "tail_targets_met": tail_ok,
            "tail_targets_met_cpu": tail_ok_cpu,
            "planning": figures,
            "unreachable": {u["case"]: u for u in unreachable},
            "scaling_points": clouds,
            "scaling_goals": goal_figs,
            "conservative": cons,
        },
    )


if __name__ == "__main__":
    main()
