"""The roadmap build in steps (``search.roadmap.RoadmapBuild``): every query bounded by its time
limit, the build included; a build spread over queries or slices gives the roadmap built in one
go; an unreachable goal stops at its limit cold and warm; replays pin the build's progress."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import numpy as np
import pytest
from twin.benchmarks.bench_planner import unreachable_planner

from twin.planning import InitialState, PathError, PathRequest, Planner, PlannerSettings
from twin.planning.api_log import RecordingPlanner
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.planner import ROADMAP_STREAM
from twin.planning.replay import replay
from twin.planning.search.roadmap import Roadmap, RoadmapBuild

QUERIES = Path(__file__).resolve().parent.parent / "assets" / "planning"
NODES = 1000
#: A limit (s) far below the build's time (the shelf's 1,000 nodes: about 0.3 s on a quiet
#: machine) and its allowance: a query may end one build step or one search chunk after its
#: deadline (tens of ms); the allowance is generous for a loaded CI machine.
LIMIT = 0.05
ALLOWANCE = 0.5


def _shelf(limit: float | None = LIMIT) -> Planner:
    planner = Planner(PlannerSettings(roadmap_nodes=NODES, max_planning_time_s=limit))
    planner.set_obstacles(obstacles_from_scene("shelf"))
    return planner


@functools.cache
def _hard_queries() -> list[tuple[np.ndarray, np.ndarray]]:
    """Stored shelf queries whose straight segment is blocked but which a via configuration
    solves without the roadmap (no search: each takes milliseconds, well inside ``LIMIT``, so
    a replay reproduces them; with the roadmap built they may take its path instead)."""
    data = json.loads((QUERIES / "queries_shelf.json").read_text(encoding="utf-8"))
    hard = [(np.array(q["start"]), np.array(q["goal"])) for q in data["queries"] if not q["direct"]]
    plain = Planner(PlannerSettings(roadmap_nodes=0, max_planning_time_s=None))
    plain.set_obstacles(obstacles_from_scene("shelf"))
    out = []
    for start, goal in hard[:20]:
        r = plain.path(InitialState(start), PathRequest([goal]))
        if r and r.stats["iterations"] == 0:
            out.append((start, goal))
    assert len(out) >= 6
    return out


def _same(a: Roadmap, b: Roadmap) -> None:
    assert np.array_equal(a.nodes, b.nodes)
    assert np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    assert np.array_equal(a._dist, b._dist) and np.array_equal(a._pred, b._pred)


@pytest.fixture(scope="module")
def one_go() -> Roadmap:
    """The shelf roadmap built in one go (``prepare_roadmap()`` without a limit)."""
    roadmap = _shelf(None).prepare_roadmap()
    assert roadmap is not None and len(roadmap.nodes) == NODES and roadmap.edges > 0
    return roadmap


def test_a_build_in_single_steps_or_time_slices_equals_the_build_in_one_go(one_go):
    planner = _shelf()
    rng = np.random.default_rng([planner.settings.seed, ROADMAP_STREAM])
    stepped = RoadmapBuild(planner.checker, rng, NODES, step=planner.settings.rrt_step)
    while stepped.advance(steps=stepped.steps + 1) is None:
        pass
    assert stepped.steps > 10  # it did advance in many small steps
    _same(stepped.roadmap, one_go)
    assert stepped.roadmap.build_s == pytest.approx(stepped.spent_s)
    # through the planner, in slices of 10 ms
    assert planner.prepare_roadmap(time_limit_s=0.01) is None
    slices = 1
    while planner.prepare_roadmap(time_limit_s=0.01) is None:
        slices += 1
    assert slices > 1
    _same(planner.prepare_roadmap(), one_go)
    assert planner.roadmap_progress() == (stepped.steps, True)


def test_a_short_limit_defers_the_build_and_later_queries_finish_it(one_go):
    planner = _shelf()
    queries = _hard_queries()
    results = []
    for start, goal in queries * 100:
        r = planner.path(InitialState(start), PathRequest([goal]))
        results.append(r)
        assert r.stats["time_s"] <= LIMIT + ALLOWANCE
        if "roadmap_deferred" not in r.stats and "roadmap_steps" in r.stats:
            break
    first = results[0]
    assert first.stats["roadmap_deferred"] == 1.0  # planned with RRT-Connect alone
    assert first.stats["roadmap_paths"] == 0.0
    assert 0.0 < first.stats["roadmap_build_s"] <= 0.5 * LIMIT + ALLOWANCE  # half, one step more
    steps = [r.stats["roadmap_steps"] for r in results if "roadmap_steps" in r.stats]
    assert steps == sorted(steps) and len(set(steps)) > 1  # the next queries resumed it
    done, finished = planner.roadmap_progress()
    assert finished and done == steps[-1]
    _same(planner.prepare_roadmap(), one_go)  # the same roadmap however the build was spread


def test_an_unreachable_goal_is_blocked_within_its_limit_cold_and_warm():
    """A free goal no path reaches (``bench_planner.unreachable_planner``)."""
    planner, start, goal = unreachable_planner(
        PlannerSettings(roadmap_nodes=NODES, max_planning_time_s=0.1, max_iterations=1_000_000)
    )
    cold = planner.path(InitialState(start), PathRequest([goal]))
    assert cold.error is PathError.BLOCKED_PATH
    assert cold.stats["deadline_hit"] == 1.0 and cold.stats["roadmap_deferred"] == 1.0
    assert cold.stats["time_s"] <= 0.1 + ALLOWANCE
    planner.prepare_roadmap()
    t0 = time.perf_counter()
    warm = planner.path(InitialState(start), PathRequest([goal], max_planning_time_s=0.2))
    assert time.perf_counter() - t0 >= warm.stats["time_s"]
    assert warm.error is PathError.BLOCKED_PATH and warm.stats["deadline_hit"] == 1.0
    assert "roadmap_deferred" not in warm.stats and "roadmap_build_s" not in warm.stats
    assert warm.stats["time_s"] <= 0.2 + ALLOWANCE


def test_a_log_of_deferred_queries_replays_exactly(tmp_path):
    recorder = RecordingPlanner(_shelf())
    recorder.set_obstacles(obstacles_from_scene("shelf"))
    for start, goal in _hard_queries()[:6]:
        recorder.path(InitialState(start), PathRequest([goal]))
    logged = [c["result"] for c in recorder.calls if c["method"] == "path"]
    assert logged[0]["roadmap_deferred"] is True and logged[0]["roadmap_steps"] > 0
    steps = [r["roadmap_steps"] for r in logged if "roadmap_steps" in r]
    assert steps == sorted(steps)
    path = recorder.export_api_log(tmp_path)
    fresh = Planner(recorder.planner.settings)
    report = replay(path, planner=fresh)
    assert report, report.differences
    assert fresh.roadmap_progress() == recorder.planner.roadmap_progress()


def test_a_build_step_that_raises_leaves_no_half_build_behind():
    """An interrupt inside a build step (here: the checker's segment check raising once, as
    Ctrl-C in a query would): the error reaches the caller, the half-done build is dropped, and
    the next call builds the same roadmap from the start; a bare RoadmapBuild whose step failed
    says it cannot resume instead of stepping for ever."""
    planner = _shelf(limit=None)
    checker = planner._checker
    real = checker.segments_free
    calls = {"n": 0}

    def interrupted_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    checker.segments_free = interrupted_once
    try:
        with pytest.raises(KeyboardInterrupt):
            planner.prepare_roadmap()
        assert planner.roadmap_progress() == (0, False)
        roadmap = planner.prepare_roadmap()
    finally:
        del checker.segments_free
    assert roadmap is not None
    _same(roadmap, _shelf(limit=None).prepare_roadmap())

    rng = np.random.default_rng([0, ROADMAP_STREAM])
    build = RoadmapBuild(checker, rng, NODES)
    build._steps.close()  # what a step that raised leaves
    with pytest.raises(RuntimeError, match="cannot resume"):
        build.advance()
