"""The stored certified queries of ``bench_planner_clutter`` (``bench_planner_clutter_queries``):
they match the bench's problem, their certificates join their ends and are free in PyBullet's
exact geometry, and a set made for other parameters is refused with what to re-run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from twin.benchmarks import bench_planner_clutter_queries as certified
from twin.benchmarks.bench_planner_clutter import clutter_problem
from twin.benchmarks.planner_exact import verify_path

from twin.planning import Planner


@pytest.fixture(scope="module")
def ur5():
    """The bench's UR5 problem, seed 0: (planner, scene, PyBullet's exact checker)."""
    with clutter_problem("ur5_spherized", 0) as (planner, scene, _, exact, _):
        yield planner, scene, exact


def test_stored_queries_match_the_problem_and_their_certificates_are_free(ur5):
    planner, scene, exact = ur5
    stored = certified.load("ur5_spherized", 0, planner, scene, 100)
    assert len(stored) == 100
    for (start, goal), q in zip(certified.pairs(stored), stored):
        path = np.array(q["certificate"])
        assert np.array_equal(path[0], start) and np.array_equal(path[-1], goal)
        assert q["replaced_before"] >= 0
    ends = np.array([[q["start"], q["goal"]] for q in stored]).reshape(-1, 6)
    assert planner.configurations_free(ends).all()
    starts, goals = ends[0::2], ends[1::2]
    assert not any(planner.checker.segment_free(s, g) for s, g in zip(starts[:10], goals[:10]))
    assert not exact.colliding_many(ends[:20]).any()
    path = np.array(stored[0]["certificate"])
    assert not verify_path(exact, path, planner.checker.travel)


def test_a_set_made_for_other_parameters_is_refused_saying_what_to_rerun(ur5):
    planner, scene, _ = ur5
    other = Planner(dataclasses.replace(planner.settings, motion_margin=0.004), model=planner.model)
    with pytest.raises(certified.StaleQueries, match=r"motion_margin.*make_planner_clutter"):
        certified.load("ur5_spherized", 0, other, scene, 10)
    with pytest.raises(certified.StaleQueries, match="seed"):
        certified.load("ur5_spherized", 1, planner, scene, 10)
    with pytest.raises(certified.StaleQueries, match="holds 100 queries, 101 asked"):
        certified.load("ur5_spherized", 0, planner, scene, 101)
    with pytest.raises(certified.StaleQueries, match="no certified queries for 'nope'"):
        certified.load("nope", 0, planner, scene, 10)
