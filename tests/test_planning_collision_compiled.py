"""The compiled checks (``collision._compiled``) against the numpy kernel: the same verdicts and
certified half widths per configuration (with and without body-pair culling, exact sphere
obstacles and a drawn field), segments reported free stay clear at every dense sample, prefixes
are free up to the returned parameter, and the compiled RRT-Connect replays."""

from __future__ import annotations

import numpy as np
import pytest
from twin.benchmarks.bench_planner_clutter import clutter_scene, load_ur5_spherized

from twin.planning import InitialState, PathRequest, Planner, PlannerSettings
from twin.planning.collision import _compiled, field
from twin.planning.collision.checker import CollisionChecker
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.motion import curve
from twin.planning.types import Obstacle
from twin.scenes import load_scene

pytestmark = pytest.mark.skipif(_compiled.kernels() is None, reason="numba not installed")


@pytest.fixture(scope="module")
def ur5() -> Planner:
    model, settings = load_ur5_spherized()
    planner = Planner(settings, model=model)
    scene = clutter_scene(planner.checker.robot.origin_1(), np.random.default_rng([0, 19]))
    planner.set_obstacles(obstacles_from_scene(scene))
    return planner


@pytest.fixture(scope="module")
def ours() -> Planner:
    """Our arm in the shelf scene (drawn field, body-pair culling)."""
    planner = Planner(PlannerSettings(seed=0))
    planner.set_obstacles(obstacles_from_scene(load_scene("shelf")))
    return planner


def _numpy(checker: CollisionChecker, q, dq):
    return checker._kernel.evaluate(q, dq)


def _compiled_eval(checker: CollisionChecker, q, dq):
    return checker._evaluate(q, dq)


@pytest.mark.parametrize("name", ["ur5", "ours"])
def test_verdicts_and_widths_equal_the_numpy_kernel(name, request):
    checker = request.getfixturevalue(name).checker
    assert checker.compiled
    rng = np.random.default_rng(7)
    q = rng.uniform(checker.lower, checker.upper, size=(3000, len(checker.lower)))
    dq = np.abs(rng.normal(scale=0.3, size=q.shape))
    ok_np, w_np = _numpy(checker, q, dq)
    ok, w = _compiled_eval(checker, q, dq)
    assert 0.02 < ok_np.mean() < 0.98  # both verdicts occur
    np.testing.assert_array_equal(ok, ok_np)
    # The numpy kernel's widths with body culling are lower bounds (batch-wide culling); the
    # compiled ones are never below them by more than rounding and equal without culling.
    if checker._kernel._prune:
        assert np.all(w[ok] >= w_np[ok] * (1 - 1e-9))
    else:
        np.testing.assert_allclose(w[ok], w_np[ok], rtol=1e-9)
    free_only, none = _compiled_eval(checker, q, None)
    assert none is None
    np.testing.assert_array_equal(free_only, ok_np)


@pytest.mark.parametrize("name", ["ur5", "ours"])
def test_free_segments_are_clear_at_every_dense_sample(name, request):
    planner = request.getfixturevalue(name)
    checker = planner.checker
    rng = np.random.default_rng(11)
    n = len(checker.lower)
    starts = rng.uniform(checker.lower, checker.upper, size=(4000, n))
    starts = starts[checker.free(starts)][:150]
    ends = np.clip(starts + rng.normal(scale=0.4, size=starts.shape), checker.lower, checker.upper)
    free, start_ok, end_ok = checker._segments(starts, ends)
    assert start_ok.all()
    np.testing.assert_array_equal(end_ok, checker.free(ends))
    assert 0 < free.sum() < len(free)
    # Clear (margin 0) at every sample 1/400 apart: a checker on the same model without margin.
    bare = CollisionChecker(checker.robot, checker.field, 1e-9, checker.lower, checker.upper)
    t = np.linspace(0.0, 1.0, 401)
    for qa, qb in zip(starts[free], ends[free]):
        assert bare.free(qa + t[:, None] * (qb - qa)).all()


@pytest.mark.parametrize("name", ["ur5", "ours"])
def test_free_blends_are_clear_at_every_dense_sample(name, request):
    checker = request.getfixturevalue(name).checker
    rng = np.random.default_rng(13)
    n = len(checker.lower)
    c = rng.uniform(checker.lower, checker.upper, size=(4000, n))
    c = c[checker.free(c)][:120]
    a, b = (
        np.clip(c + rng.normal(scale=0.4, size=c.shape), checker.lower, checker.upper)
        for _ in range(2)
    )
    free = checker.blends_free(a, c, b)
    assert 0 < free.sum() < len(free)
    # The sampled check of ``motion.curve`` (coarse certified samples, then the fine spacing)
    # finds no free blend that this one calls blocked by more than a few near the margin, and
    # every blend this one calls free is clear (margin 0) at every sample 1/400 apart.
    sampled = curve.blends_free(a, c, b, _Sampled(checker))
    assert np.count_nonzero(sampled & ~free) <= max(1, len(c) // 50)
    bare = CollisionChecker(checker.robot, checker.field, 1e-9, checker.lower, checker.upper)
    s = np.linspace(0.0, 1.0, 401)[:, None]
    for qa, qc, qb in zip(a[free], c[free], b[free]):
        assert bare.free((1 - s) ** 2 * qa + 2 * s * (1 - s) * qc + s**2 * qb).all()
    outside = c.copy()
    outside[:, 0] = checker.upper[0] + 0.1
    assert not checker.blends_free(a, outside, b).any()


class _Sampled:
    """A checker without its compiled blend check: ``curve.blends_free`` samples instead."""

    def __init__(self, checker: CollisionChecker) -> None:
        self.certified, self.free, self.steps = checker.certified, checker.free, checker.steps


def test_prefixes_are_free_up_to_the_returned_parameter(ur5):
    checker = ur5.checker
    rng = np.random.default_rng(5)
    n = len(checker.lower)
    qa = rng.uniform(checker.lower, checker.upper, size=(3000, n))
    qa = qa[checker.free(qa)][:100]
    qb = rng.uniform(checker.lower, checker.upper, size=qa.shape)
    t = checker.free_prefixes(qa, qb)
    assert np.all((t >= 0.0) & (t <= 1.0)) and 0 < np.count_nonzero(t < 1.0) < len(t)
    mid = qa + t[:, None] * (qb - qa)
    keep = t > 0.0
    assert checker.free(mid[keep]).all()  # the returned parameter is a free sample
    assert checker.segments_free(qa[keep], mid[keep]).sum() >= 0.9 * keep.sum()
    bare = CollisionChecker(checker.robot, checker.field, 1e-9, checker.lower, checker.upper)
    s = np.linspace(0.0, 1.0, 201)
    for a, b in zip(qa[keep], mid[keep]):
        assert bare.free(a + s[:, None] * (b - a)).all()
    outside = qb.copy()
    outside[:, 0] = checker.upper[0] + 0.1
    assert np.all(checker.free_prefixes(qa, outside) == 0.0)


def test_compiled_search_replays_and_counts_its_checks(ur5):
    rng = np.random.default_rng([3, 19])
    n = len(ur5.checker.lower)
    for _ in range(200):
        q = rng.uniform(ur5.model.lower, ur5.model.upper, size=(2, n))
        if ur5.configurations_free(q).all() and not ur5.checker.segment_free(q[0], q[1]):
            break
    c0 = ur5.checker.checked
    first = ur5.path(InitialState(q[0]), PathRequest([q[1]]))
    assert ur5.checker.checked > c0 + 100
    again = ur5.path(InitialState(q[0]), PathRequest([q[1]]))
    assert bool(first) and bool(again)
    a = np.array([w.configuration for w in first.path()])
    b = np.array([w.configuration for w in again.path()])
    np.testing.assert_array_equal(a, b)


def test_without_numba_the_numpy_kernel_gives_the_same_verdicts(ur5, monkeypatch):
    monkeypatch.setattr(_compiled, "kernels", lambda: None)
    c = ur5.checker
    slow = CollisionChecker(c.robot, c.field, c.margin, c.lower, c.upper)
    assert not slow.compiled
    rng = np.random.default_rng(9)
    q = rng.uniform(c.lower, c.upper, size=(500, len(c.lower)))
    np.testing.assert_array_equal(slow.free(q), c.free(q))
    qa = q[c.free(q)][:40]
    qb = np.clip(qa + rng.normal(scale=0.3, size=qa.shape), c.lower, c.upper)
    fast, slow_free = c.segments_free(qa, qb), slow.segments_free(qa, qb)
    # Both are conservative schemes sampling differently: they agree on most segments.
    assert np.mean(fast == slow_free) >= 0.9


def test_group_lists_of_exact_spheres_change_no_verdict_or_width(ur5):
    """``check`` lists, per group, the exact spheres its bound comes near (from ``CULL_MIN``
    of them): dense clutter (``EXACT_SPHERES`` spheres) and configurations close to it give the
    numpy kernel's verdicts and widths, with and without the certified widths."""
    rng = np.random.default_rng(21)
    count = field.EXACT_SPHERES
    d = rng.normal(size=(count, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    centers = ur5.checker.robot.origin_1() + d * rng.uniform(0.25, 0.8, size=(count, 1))
    radii = rng.uniform(0.01, 0.08, size=count)
    before = ur5.obstacles()
    ur5.clear_obstacles()
    ur5.set_obstacles(
        [Obstacle.from_sphere(f"s{i}", c, float(r)) for i, (c, r) in enumerate(zip(centers, radii))]
    )
    try:
        checker = ur5.checker
        assert len(checker._kernel.compiled_model()[8]) == count >= _compiled.CULL_MIN
        q = rng.uniform(checker.lower, checker.upper, size=(6000, len(checker.lower)))
        near = q[checker.free(q)][:300]  # small steps from free configurations: both verdicts
        q = np.vstack((q[:2000], near + rng.normal(scale=0.05, size=near.shape)))
        q = np.clip(q, checker.lower, checker.upper)
        dq = np.abs(rng.normal(scale=0.3, size=q.shape))
        ok_np, w_np = _numpy(checker, q, dq)
        ok, w = _compiled_eval(checker, q, dq)
        assert 0.02 < ok_np.mean() < 0.98
        np.testing.assert_array_equal(ok, ok_np)
        np.testing.assert_allclose(w[ok], w_np[ok], rtol=1e-9)
        np.testing.assert_array_equal(_compiled_eval(checker, q, None)[0], ok_np)
    finally:
        ur5.clear_obstacles()
        ur5.set_obstacles(before)
