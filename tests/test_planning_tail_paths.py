"""The tail's levers keep the guarantees: certified blend checks are free at the margin, the
returned paths pass the executed-curve check, the roadmap's shortest-path table agrees with A*."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twin.planning import InitialState, PathRequest, Planner, PlannerSettings
from twin.planning.collision.checker import CollisionChecker
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.motion.blend import _blocked_runs, blend_searches
from twin.planning.motion.curve import (
    CORNER_SURE,
    Blend,
    blend_checks,
    blends_free,
    curve_free,
    piece_samples,
)
from twin.planning.motion.execute import joint_curve

QUERIES = Path(__file__).resolve().parent.parent / "assets" / "planning"


@pytest.fixture(scope="module", params=["shelf", "cage"])
def scene(request):
    planner = Planner(PlannerSettings(seed=0))
    planner.set_obstacles(obstacles_from_scene(request.param))
    planner.prepare_roadmap()
    data = json.loads((QUERIES / f"queries_{request.param}.json").read_text(encoding="utf-8"))
    return planner, data["queries"]


def _random_blends(planner: Planner, count: int, seed: int) -> tuple:
    """Blends (a, c, b) (count, 6) rad around free corners of random configurations."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(planner.lower, planner.upper, (4 * count, 6))
    c = c[planner.configurations_free(c)][:count]
    a = np.clip(c + rng.normal(0.0, 0.3, c.shape), planner.lower, planner.upper)
    b = np.clip(c + rng.normal(0.0, 0.3, c.shape), planner.lower, planner.upper)
    return a, c, b


def test_certified_blends_are_free_without_the_margin(scene):
    planner, _ = scene
    a, c, b = _random_blends(planner, 300, 7)
    ok = blends_free(a, c, b, planner.checker)
    assert 30 < ok.sum() < len(ok)  # both verdicts occur
    bare = CollisionChecker(planner._robot, planner._field, 0.0, planner.lower, planner.upper)
    for k in np.flatnonzero(ok):
        u_in, u_out = c[k] - a[k], b[k] - c[k]
        blend = Blend(a[k], c[k], b[k], u_in, u_out, 1.0, 1.0)
        dense = blend.at(np.linspace(0.0, 1.0, 4 * len(piece_samples(blend, planner.checker))))
        assert bare.free(dense).all(), k


def test_certified_and_fixed_spacing_verdicts_mostly_agree(scene):
    """Both are conservative; they may differ only near the margin."""
    planner, _ = scene

    class FixedSpacing:  # the checker without certified intervals: every fine sample
        free = planner.checker.free
        steps = planner.checker.steps

    a, c, b = _random_blends(planner, 300, 8)
    certified = blends_free(a, c, b, planner.checker)
    fixed = blends_free(a, c, b, FixedSpacing())
    assert np.mean(certified == fixed) > 0.9


def test_returned_paths_pass_the_executed_curve_check(scene):
    """Every stored query's path (on main, 4 of the 480 stored queries' paths failed it)."""
    planner, queries = scene
    blended = 0
    for q in queries:
        start = np.array(q["start"])
        result = planner.path(InitialState(start), PathRequest([np.array(q["goal"])]))
        assert result
        waypoints = list(result.waypoints)
        if not planner.checker.within_limits(start[None])[0]:  # the entry move (URDF limits)
            start, waypoints = waypoints[0].configuration, waypoints[1:]
        curve, _ = joint_curve(planner.model, start, waypoints)
        assert curve_free(curve, planner.checker)
        blended += any(w.blend_radius.entry > 0.0 for w in waypoints)
    assert blended >= 30


def test_the_shortest_path_table_agrees_with_a_star(scene):
    planner, _ = scene
    roadmap = planner.prepare_roadmap()
    assert roadmap._dist is not None
    rng = np.random.default_rng(3)
    compared = 0
    for _ in range(30):
        s, g = rng.choice(len(roadmap.nodes), 2, replace=False)
        if roadmap.component[s] != roadmap.component[g]:
            continue
        compared += 1
        d = np.linalg.norm(roadmap.nodes[None] - roadmap.nodes[[s, g]][:, None], axis=2)
        table = roadmap._table_path(d, np.array([s]), np.array([g]))
        star = roadmap._astar(roadmap.nodes[g].tolist(), {int(s): 0.0}, {int(g): 0.0}, None)
        length = lambda p: float(np.sum(np.linalg.norm(np.diff(roadmap.nodes[p], axis=0), axis=1)))  # noqa: E731
        assert table[0] == s and table[-1] == g
        assert length(table) == pytest.approx(length(star), rel=1e-9, abs=1e-12)
    assert compared >= 20  # most node pairs share a connected part: the comparison happened


def test_corner_widths_certify_blends_free_without_the_margin(scene):
    """A corner width ``w`` (``blend_checks``) certifies the blend and its scalings about the
    corner by any factor up to ``w``: dense samples are free even without the margin."""
    planner, _ = scene
    a, c, b = _random_blends(planner, 300, 9)
    a, b = c + 0.1 * (a - c), c + 0.1 * (b - c)  # small blends: some corners certify them
    ok, corner = blend_checks(a, c, b, planner.checker)
    sure = corner >= CORNER_SURE
    assert 10 < sure.sum() < len(sure)  # both occur
    assert ok[sure].all()
    bare = CollisionChecker(planner._robot, planner._field, 0.0, planner.lower, planner.upper)
    for k in np.flatnonzero(corner > 0.05)[:60]:
        f = min(1.0, corner[k])  # the blend scaled about its corner by the certified factor
        blend = Blend(c[k] + f * (a[k] - c[k]), c[k], c[k] + f * (b[k] - c[k]), c[k], c[k], 1, 1)
        assert bare.free(blend.at(np.linspace(0.0, 1.0, 200))).all(), k


def test_the_executed_curve_check_does_not_repeat_the_searched_blends(scene):
    """``_blocked_runs`` given the search's blends checks only the straight remainders (no
    certified blend samples); without them it checks the blends too, with the same verdict."""
    planner, queries = scene

    class Counting:  # the planner's checker, counting the blend checks (``certified`` and
        # the compiled checker's own ``blends_free``, which the search uses when compiled)
        def __init__(self, checker):
            self.checker, self.blend_calls = checker, 0
            self.free, self.steps = checker.free, checker.steps
            self.segments_free = checker.segments_free
            self.compiled = checker.compiled

        def certified(self, q, dq):
            self.blend_calls += 1
            return self.checker.certified(q, dq)

        def blends_free(self, a, c, b):
            self.blend_calls += 1
            return self.checker.blends_free(a, c, b)

    compared = 0
    for q in queries[:60]:
        start = np.array(q["start"])
        if not planner.checker.within_limits(start[None])[0]:
            continue
        result = planner.path(InitialState(start), PathRequest([np.array(q["goal"])]))
        if not any(w.blend_radius.entry > 0.0 for w in result.waypoints):
            continue  # no blend (a straight path, or a run that became stops)
        searches = blend_searches(start, list(result.waypoints), planner.checker)
        verified = [s.blend for s in searches if s.blend is not None]
        if not verified:
            continue
        with_blends, without = Counting(planner.checker), Counting(planner.checker)
        runs = _blocked_runs(start, list(result.waypoints), with_blends, verified)
        assert runs == _blocked_runs(start, list(result.waypoints), without) == []
        assert with_blends.blend_calls == 0 and without.blend_calls > 0
        compared += 1
    assert compared >= 10
