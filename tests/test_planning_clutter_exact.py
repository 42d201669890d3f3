"""Sphere obstacles checked exactly (``field.EXACT_SPHERES``): the kernel's verdicts equal the
exact sphere model (robot spheres against obstacle spheres, sphere pairs) at the margin, never
report free what PyBullet's exact geometry finds colliding, and more spheres than the limit fall
back to the field (still conservative)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.benchmarks.bench_planner_clutter import CAGE_RADIUS, clutter_scene
from twin.benchmarks.planner_exact import ExactChecker

from twin.planning import Obstacle, Planner, PlannerSettings
from twin.planning.collision.field import EXACT_SPHERES, DistanceField
from twin.planning.collision.scene_obstacles import obstacles_from_scene


@pytest.fixture(scope="module")
def planner() -> Planner:
    return Planner(PlannerSettings(seed=0))


def _exact_gaps(planner: Planner, q: np.ndarray, centers: np.ndarray, radii: np.ndarray):
    """(obstacle gap (N,), self gap (N,)) m of the sphere model, computed directly."""
    kernel, c = planner.checker._kernel, planner.checker._spheres()
    r = c.radii[kernel.order]
    x = kernel.centers(q)  # (N, S, 3)
    env = x[:, : kernel.n_env]
    d = np.linalg.norm(env[:, :, None] - centers[None, None], axis=-1)
    env_gap = (d - r[None, : kernel.n_env, None] - radii[None, None]).min(axis=(1, 2))
    pa, pb = kernel.pair_a, kernel.pair_b
    pair = np.linalg.norm(x[:, pa] - x[:, pb], axis=-1) - r[pa] - r[pb]
    return env_gap, pair.min(axis=1)


def test_cage_verdicts_equal_the_exact_sphere_model_and_never_pybullet_colliding(planner):
    rng = np.random.default_rng([4, 19])
    scene = clutter_scene(planner.checker.robot.origin_1(), rng)
    planner.set_obstacles(obstacles_from_scene(scene))
    try:
        centers, radii = planner._field.exact_spheres()
        assert len(radii) == len(scene.items) and np.all(radii == CAGE_RADIUS)
        q = rng.uniform(planner.lower, planner.upper, size=(1500, 6))  # its (soft) limits
        free = planner.configurations_free(q)
        env_gap, self_gap = _exact_gaps(planner, q, centers, radii)
        m = planner.checker.margin
        model = (env_gap >= m) & (self_gap >= m)
        # Equal except within rounding of the margin boundary (EXACT_ROUNDING is 1e-9 m).
        near = np.abs(env_gap - m) < 1e-8
        assert np.array_equal(free[~near], model[~near])
        assert 0.02 < free.mean() < 0.5
        assert not np.any(free & (env_gap < 0.0))  # never free where the spheres overlap
        with ExactChecker(planner.model.urdf_path, scene) as exact:
            idx = np.flatnonzero(free)[:60]
            assert len(idx) > 20
            assert not any(exact.colliding(x) for x in q[idx])
    finally:
        planner.clear_obstacles()


@given(
    st.lists(
        st.tuples(st.tuples(*[st.floats(-0.25, 0.25)] * 3), st.floats(0.001, 0.2)),
        min_size=1,
        max_size=5,
    ),
    st.tuples(*[st.floats(-0.3, 0.3)] * 3),
)
def test_exact_sphere_clearance_is_the_true_distance_less_rounding(spheres, point):
    field = DistanceField(np.full(3, -0.3), np.full(3, 0.3), 0.01, 0.1)
    field.rebuild(
        [
            field.patch(Obstacle.from_sphere(f"s{i}", np.array(c), r))
            for i, (c, r) in enumerate(spheres)
        ]
    )
    p = np.array(point)
    true = min(np.linalg.norm(p - np.array(c)) - r for c, r in spheres)
    got = field.clearance(p[None])[0]
    inside = np.all(np.abs(p) < 0.3 - field.h)  # the outer layer is -inf
    assert got <= true
    if inside:
        assert got >= min(true, field.band - 0.02) - 1e-8


def test_more_spheres_than_the_limit_are_drawn_into_the_field(planner):
    rng = np.random.default_rng(8)
    count = EXACT_SPHERES + 1
    centers = planner.checker.robot.origin_1() + rng.uniform(-0.6, 0.6, size=(count, 3))
    obstacles = [Obstacle.from_sphere(f"s{i}", c, 0.05) for i, c in enumerate(centers)]
    planner.set_obstacles(obstacles)
    try:
        assert len(planner._field.exact_spheres()[1]) == 0
        q = rng.uniform(planner.model.lower, planner.model.upper, size=(800, 6))
        free = planner.configurations_free(q)
        env_gap, _ = _exact_gaps(planner, q, centers, np.full(count, 0.05))
        assert not np.any(free & (env_gap < planner.checker.margin))
        planner.clear_obstacles()
        planner.set_obstacles(obstacles[:EXACT_SPHERES])
        assert len(planner._field.exact_spheres()[1]) == EXACT_SPHERES
        fewer = planner.configurations_free(q)
        assert np.all(fewer >= free)  # fewer spheres, exactly: never less free space
    finally:
        planner.clear_obstacles()
