"""The planner's joint limits: every path keeps to the safety layer's soft limits
(``twin.safety.limits_for``); a start between the soft and the URDF limits moves into them first;
goals and IK beyond the soft limits are refused with the joint named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from twin import safety
from twin.planning import (
    InitialState,
    Obstacle,
    PathError,
    PathRequest,
    Planner,
    PlannerSettings,
)
from twin.planning.collision.scene_obstacles import obstacles_from_scene

QUERY_DIR = Path(__file__).resolve().parent.parent / "assets" / "planning"


def _queries(scene: str) -> list[dict]:
    text = (QUERY_DIR / f"queries_{scene}.json").read_text(encoding="utf-8")
    return json.loads(text)["queries"]


@pytest.fixture(scope="module")
def planner():
    return Planner(PlannerSettings(max_planning_time_s=None))


@pytest.fixture(scope="module")
def cage():
    p = Planner(PlannerSettings(max_planning_time_s=None))
    p.set_obstacles(obstacles_from_scene("cage"))
    return p


def _home(planner) -> np.ndarray:
    return np.array(planner.model.home_q, dtype=float)


def _all_points(start: np.ndarray, result) -> np.ndarray:
    return np.vstack([start, *[w.configuration for w in result.path()]])


def test_the_planner_s_limits_are_the_safety_layer_s_soft_limits(planner):
    soft = safety.limits_for(planner.model)
    np.testing.assert_array_equal(planner.lower, soft.lower)
    np.testing.assert_array_equal(planner.upper, soft.upper)
    np.testing.assert_allclose(planner.lower, planner.model.lower + safety.SOFT_MARGIN_RAD)
    np.testing.assert_array_equal(planner.checker.lower, soft.lower)


def test_a_goal_between_the_soft_and_the_urdf_limit_is_refused_naming_the_joint(planner):
    start = _home(planner)
    goal = start.copy()
    goal[3] = planner.model.upper[3] - 0.01  # inside the URDF limit, beyond the soft one
    result = planner.path(InitialState(start), PathRequest([goal]))
    assert result.error is PathError.KINEMATIC_VIOLATION
    assert "joint_4" in result.reason and "soft limits" in result.reason
    # with another goal inside the soft limits, that one is planned to
    ok = start.copy()
    ok[3] = planner.upper[3] - 0.01
    result = planner.path(InitialState(start), PathRequest([goal, ok]))
    assert result and result.selected_goal_idx == 1


def test_a_start_beyond_the_soft_limits_first_moves_into_them(planner):
    start = _home(planner)
    start[0] = planner.model.lower[0] + 0.005  # 15 mrad beyond the soft limit
    goal = _home(planner)
    goal[0] = 0.5
    result = planner.path(InitialState(start), PathRequest([goal]))
    assert result, result.reason
    first = result.path()[0].configuration
    np.testing.assert_allclose(first, np.clip(start, planner.lower, planner.upper))
    assert first[0] == planner.lower[0]
    assert np.max(np.abs(first - start)) <= safety.SOFT_MARGIN_RAD
    rest = np.array([w.configuration for w in result.path()])
    assert np.all(rest >= planner.lower) and np.all(rest <= planner.upper)
    np.testing.assert_array_equal(result.final_configuration(), goal)
    # replays exactly
    again = planner.path(InitialState(start), PathRequest([goal]))
    np.testing.assert_array_equal(_all_points(start, again), _all_points(start, result))


def test_a_start_beyond_the_urdf_limits_is_blocked_naming_the_joint(planner):
    start = _home(planner)
    start[5] = planner.model.upper[5] + 0.001
    result = planner.path(InitialState(start), PathRequest([_home(planner)]))
    assert result.error is PathError.BLOCKED_START
    assert "joint_6" in result.reason and "URDF limits" in result.reason


def test_a_start_whose_move_into_the_soft_limits_collides_is_blocked_with_the_reason():
    p = Planner(PlannerSettings(max_planning_time_s=None))
    start = _home(p)
    start[0] = p.model.upper[0] - 0.005
    tcp = p.tcp_pose(start)[:3, 3]
    p.set_obstacles([Obstacle.from_sphere("ball", tcp, 0.05)])  # on the TCP
    result = p.path(InitialState(start), PathRequest([_home(p)]))
    assert result.error is PathError.BLOCKED_START
    assert "joint_1" in result.reason and "collides" in result.reason


def test_a_touch_start_beyond_the_soft_limits_is_refused_naming_the_joint(planner):
    start = _home(planner)
    start[3] = planner.model.lower[3] + 0.01
    result = planner.path(InitialState.from_touch(start), PathRequest([_home(planner)]))
    assert result.error is PathError.BLOCKED_START
    assert "touch start" in result.reason and "joint_4" in result.reason


def test_stored_cage_starts_near_a_limit_are_planned_within_the_soft_limits(cage):
    queries = _queries("cage")
    near = [
        q
        for q in queries
        if np.any(np.array(q["start"]) < cage.lower) or np.any(np.array(q["start"]) > cage.upper)
    ]
    assert len(near) >= 2  # the stored set has such starts (the case that must not fail)
    for q in near:
        start = np.array(q["start"])
        result = cage.path(InitialState(start), PathRequest([np.array(q["goal"])]))
        assert result, result.reason
        rest = np.array([w.configuration for w in result.path()])
        assert np.all(rest >= cage.lower) and np.all(rest <= cage.upper)


def test_stored_goals_are_inside_the_soft_limits():
    lim = safety.limits_for(Planner().model)
    for scene in ("table", "shelf", "bin", "cage"):
        queries = _queries(scene)
        goals = np.array([q["goal"] for q in queries])
        assert np.all(goals >= lim.lower) and np.all(goals <= lim.upper), scene


@given(
    st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6),
    st.sampled_from([0, 1, 2, 3, 4, 5]),
    st.booleans(),
)
def test_ik_solutions_keep_to_the_soft_limits(planner, u, joint, high):
    """IK of the pose of a configuration near a URDF limit: None or inside the soft limits
    (and then reaching the pose)."""
    m = planner.model
    q = m.lower + np.array(u) * (m.upper - m.lower)
    q[joint] = (m.upper if high else m.lower)[joint] - (0.01 if high else -0.01)
    pose = planner.tcp_pose(q)
    sol = planner.compute_inverse_kinematics(pose, q)
    if sol is not None:
        assert np.all(sol >= planner.lower) and np.all(sol <= planner.upper)
        np.testing.assert_allclose(planner.tcp_pose(sol), pose, atol=1e-6)
