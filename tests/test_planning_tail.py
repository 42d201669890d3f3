"""The planner's tail: the time limit (settings and per request) and the roadmap over the static
obstacles (built once, invalidated when obstacles or the robot model change, replayed exactly)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from twin.benchmarks.bench_planner import unreachable_planner

from twin.planning import (
    InitialState,
    Obstacle,
    PathError,
    PathRequest,
    Planner,
    PlannerSettings,
    PlanningInputError,
)
from twin.planning.collision.scene_obstacles import obstacles_from_scene

QUERIES = Path(__file__).resolve().parent.parent / "assets" / "planning"


def _cut_off(**settings) -> tuple[Planner, np.ndarray, np.ndarray]:
    """A free goal that cannot be reached (``bench_planner.unreachable_planner``: a sphere
    beside the base blocks every configuration with joint 1 in about [0.9, 2.7] rad)."""
    return unreachable_planner(PlannerSettings(**settings))


def test_the_cut_off_goal_is_free_and_cut_off():
    planner, start, goal = _cut_off(roadmap_nodes=0)
    assert planner.configurations_free([start, goal]).all()
    q = np.random.default_rng(0).uniform(planner.model.lower, planner.model.upper, (500, 6))
    q[:, 0] = 1.8
    assert not planner.configurations_free(q).any()


#: An iteration budget that no search finishes inside the limits below (the compiled RRT-Connect
#: runs its 3,000 default iterations on the cut-off query in about 0.2 s, under a 0.3 s limit).
BIG_BUDGET = 1_000_000


def test_an_unreachable_goal_stops_at_the_time_limit():
    planner, start, goal = _cut_off(
        max_planning_time_s=0.3, roadmap_nodes=200, max_iterations=BIG_BUDGET
    )
    result = planner.path(InitialState(start), PathRequest([goal]))
    assert result.error is PathError.BLOCKED_PATH
    assert result.stats["deadline_hit"] == 1.0  # stopped by the clock, not the budget
    assert result.stats["time_limit_s"] == 0.3
    assert 0 < result.stats["iterations"] < planner.settings.max_iterations


def test_the_request_limit_overrides_the_settings():
    planner, start, goal = _cut_off(
        max_planning_time_s=60.0, roadmap_nodes=0, max_iterations=BIG_BUDGET
    )
    result = planner.path(InitialState(start), PathRequest([goal], max_planning_time_s=0.2))
    assert result.error is PathError.BLOCKED_PATH
    assert result.stats["time_limit_s"] == 0.2
    assert result.stats["iterations"] < planner.settings.max_iterations


def test_without_a_limit_the_iteration_budget_ends_the_search():
    planner, start, goal = _cut_off(max_planning_time_s=None, max_iterations=20, roadmap_nodes=0)
    result = planner.path(InitialState(start), PathRequest([goal]))
    assert result.error is PathError.BLOCKED_PATH
    assert "deadline_hit" not in result.stats
    assert result.stats["iterations"] == 20


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", True])
def test_bad_time_limits_are_refused(bad):
    with pytest.raises(PlanningInputError, match="max_planning_time_s"):
        PlannerSettings(max_planning_time_s=bad)
    with pytest.raises(PlanningInputError, match="max_planning_time_s"):
        PathRequest([np.zeros(6)], max_planning_time_s=bad)


@pytest.mark.parametrize("bad", [-1, 2.5, True, "10"])
def test_bad_roadmap_sizes_are_refused(bad):
    with pytest.raises(PlanningInputError, match="roadmap_nodes"):
        PlannerSettings(roadmap_nodes=bad)


def _shelf(nodes: int = 300) -> Planner:
    planner = Planner(PlannerSettings(roadmap_nodes=nodes, max_planning_time_s=None))
    planner.set_obstacles(obstacles_from_scene("shelf"))
    return planner


def _hard_queries(scene: str) -> list[tuple[np.ndarray, np.ndarray]]:
    data = json.loads((QUERIES / f"queries_{scene}.json").read_text(encoding="utf-8"))
    return [(np.array(q["start"]), np.array(q["goal"])) for q in data["queries"] if not q["direct"]]


def test_the_roadmap_is_free_deterministic_and_invalidated():
    planner = _shelf()
    roadmap = planner.prepare_roadmap()
    assert roadmap is planner.prepare_roadmap()  # built once
    assert len(roadmap.nodes) == 300
    assert planner.configurations_free(roadmap.nodes).all()
    a = np.array([i for i, nb in enumerate(roadmap.adjacency) for j, _ in nb if i < j])
    b = np.array([j for i, nb in enumerate(roadmap.adjacency) for j, _ in nb if i < j])
    assert len(a) == roadmap.edges > 0
    assert planner.checker.segments_free(roadmap.nodes[a], roadmap.nodes[b]).all()
    again = _shelf().prepare_roadmap()
    assert np.array_equal(again.nodes, roadmap.nodes) and again.edges == roadmap.edges
    planner.set_obstacles([Obstacle.from_sphere("ball", [0.3, 0.3, 0.3], 0.05)])
    assert planner.prepare_roadmap() is not roadmap
    roadmap = planner.prepare_roadmap()
    planner.set_attachments(["suction_cup"])
    assert planner.prepare_roadmap() is not roadmap
    assert Planner(PlannerSettings(roadmap_nodes=0)).prepare_roadmap() is None


def test_roadmap_paths_are_free_and_replay_whatever_came_before():
    queries = _hard_queries("shelf")[:12]
    first = _shelf()
    results = [first.path(InitialState(s), PathRequest([g])) for s, g in queries]
    assert all(results)
    assert sum(r.stats["roadmap_paths"] for r in results) >= 1  # the roadmap is used
    for (s, _), r in zip(queries, results):
        path = np.vstack([s, *[w.configuration for w in r.path()]])
        assert first.checker.segments_free(path[:-1], path[1:]).all()
    # A fresh planner, the queries in reverse order: the same paths.
    second = _shelf()
    for (s, g), r in reversed(list(zip(queries, results))):
        again = second.path(InitialState(s), PathRequest([g]))
        assert [w.configuration.tolist() for w in again.path()] == [
            w.configuration.tolist() for w in r.path()
        ]
