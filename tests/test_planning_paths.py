"""Planning on stored benchmark queries, every path re-verified with PyBullet's exact geometry
at 1 mm / 0.01 rad; seeded replay; several goals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from planner_exact import ExactChecker, verify_path

from twin.planning import InitialState, PathRequest, Planner, PlannerSettings
from twin.planning.collision.scene_obstacles import obstacles_from_scene

QUERIES = Path(__file__).resolve().parent.parent / "assets" / "planning"


def queries(scene: str) -> list[dict]:
    return json.loads((QUERIES / f"queries_{scene}.json").read_text())["queries"]


def full_path(start: np.ndarray, result) -> np.ndarray:
    return np.vstack([start, *[w.configuration for w in result.path()]])


@pytest.mark.parametrize("scene", ["table", "shelf", "bin", "cage"])
def test_stored_queries_plan_and_verify_exactly(scene: str):
    stored = queries(scene)
    assert len(stored) >= 100
    hard = [q for q in stored if not q["direct"]][:2]
    picked = [stored[0], *hard]
    planner = Planner(PlannerSettings(seed=0))
    planner.set_obstacles(obstacles_from_scene(scene))
    with ExactChecker(planner.model.urdf_path, scene) as exact:
        for q in picked:
            start, goal = np.array(q["start"]), np.array(q["goal"])
            result = planner.path(InitialState(start), PathRequest([goal]))
            assert result, f"{scene}: {result}"
            assert np.array_equal(result.final_configuration(), goal)
            assert not verify_path(exact, full_path(start, result), planner.checker.travel)


def test_a_query_replays_exactly_with_its_seed():
    q = next(q for q in queries("cage") if not q["direct"])
    start, goal = np.array(q["start"]), np.array(q["goal"])
    paths = []
    for _ in range(2):
        planner = Planner(PlannerSettings(seed=5))
        planner.set_obstacles(obstacles_from_scene("cage"))
        first = planner.path(InitialState(start), PathRequest([goal]))
        again = planner.path(InitialState(start), PathRequest([goal]))
        assert first and again
        assert np.array_equal(full_path(start, first), full_path(start, again))
        paths.append(full_path(start, first))
    assert np.array_equal(paths[0], paths[1])


def test_several_goals_from_inverse_kinematics_verify_exactly():
    q = next(q for q in queries("shelf") if not q["direct"])
    start = np.array(q["start"])
    planner = Planner()
    planner.set_obstacles(obstacles_from_scene("shelf"))
    solutions = planner.model.ik_all(np.array(q["goal_pose"])).configurations
    goals = [g for g in solutions if planner.configurations_free(g)[0]]
    assert len(goals) >= 2
    result = planner.path(InitialState(start), PathRequest(goals))  # shortest path
    assert result and 0 <= result.selected_goal_idx < len(goals)
    listed = planner.path(InitialState(start), PathRequest(goals, goal_prioritization="list_order"))
    assert listed.selected_goal_idx == 0  # the first goal is reachable (free, same shelf)
    assert result.stats["path_length"] <= listed.stats["path_length"] + 1e-9
    with ExactChecker(planner.model.urdf_path, "shelf") as exact:
        for r in (result, listed):
            assert not verify_path(exact, full_path(start, r), planner.checker.travel)
