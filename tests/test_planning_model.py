"""The collision model's invariants: covers cover, the field never over-estimates a distance,
the Lipschitz bound holds, checked segments are free in between, FK of the anchors is exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.planning import Obstacle, Planner, TransformedBox
from twin.planning.collision import geometry, self_collision, spheres
from twin.planning.collision.checker import CollisionChecker
from twin.planning.collision.field import DistanceField, _windowed_squared_edt
from twin.planning.collision.scene_obstacles import obstacles_from_scene

dims = st.floats(0.01, 0.3)


@pytest.fixture(scope="module")
def planner() -> Planner:
    return Planner()


def _inside_some(points: np.ndarray, cover: spheres.SphereSet) -> np.ndarray:
    d = np.linalg.norm(points[:, None] - cover.centers[None], axis=-1) - cover.radii[None]
    return np.min(d, axis=1) <= 1e-12


@settings(max_examples=20)
@given(dims, dims, dims, st.floats(0.02, 0.1), st.floats(0.01, 0.03))
def test_box_cover_contains_the_box(a, b, c, max_radius, max_slack):
    half = np.array([a, b, c]) / 2
    if np.linalg.norm(half) / 8 > max_radius:  # beyond the search range of sub-divisions
        return
    cover = spheres.cover_centered_box(half, max_radius, max_slack)
    rng = np.random.default_rng(0)
    pts = rng.uniform(-half, half, size=(3000, 3))
    corners = np.array(np.meshgrid(*[[-h, h] for h in half], indexing="ij")).reshape(3, -1).T
    assert _inside_some(np.vstack((pts, corners)), cover).all()
    assert np.all(cover.radii <= max_radius + 1e-12)


@settings(max_examples=40)
@given(st.floats(0.01, 0.08), dims, st.floats(0.005, 0.03))
def test_cylinder_cover_contains_the_cylinder(radius, length, max_slack):
    cover = spheres.cover_cylinder(radius, length, 0.08, max_slack)
    rng = np.random.default_rng(1)
    p = rng.uniform(-1, 1, size=(6000, 3)) * [radius, radius, length / 2]
    p = p[np.hypot(p[:, 0], p[:, 1]) <= radius]
    a = np.linspace(0, 2 * np.pi, 64)
    rim = np.stack((radius * np.cos(a), radius * np.sin(a), np.full(64, length / 2)), axis=-1)
    assert _inside_some(np.vstack((p, rim, rim * [1, 1, -1])), cover).all()


def test_mesh_cover_contains_the_solid_and_triangle_kernels():
    tris = geometry.box_triangles(np.array([0.12, 0.08, 0.1]))
    assert geometry.is_closed_mesh(tris) and not geometry.is_closed_mesh(tris[:-2])
    cover = spheres.cover_mesh(tris, 0.02)
    rng = np.random.default_rng(2)
    pts = rng.uniform([-0.06, -0.04, 0.0], [0.06, 0.04, 0.1], size=(3000, 3))
    assert _inside_some(pts, cover).all()
    inside = geometry.points_inside_closed_mesh(tris, np.array([[0, 0, 0.05], [0, 0, 0.2]]))
    assert inside.tolist() == [True, False]
    samples = geometry.sample_triangles(tris, 0.005)
    q = rng.uniform(-0.2, 0.2, size=(200, 3))
    exact = geometry.point_triangle_distances(q, tris)
    sampled = np.linalg.norm(q[:, None] - samples[None], axis=-1).min(axis=1)
    assert np.all(exact <= sampled + 1e-12) and np.all(sampled <= exact + 0.005)


def test_windowed_distance_transform_is_exact_within_the_window():
    rng = np.random.default_rng(3)
    occ = rng.uniform(size=(20, 18, 16)) > 0.995
    d2 = _windowed_squared_edt(occ, 6)
    seeds = np.argwhere(occ)
    nodes = np.argwhere(np.ones_like(occ))
    brute = ((nodes[:, None] - seeds[None]) ** 2).sum(-1).min(1).reshape(occ.shape)
    near = brute <= 36
    assert np.array_equal(d2[near], brute[near])
    assert np.all(d2[~near] >= 36)


@settings(max_examples=25)
@given(
    st.tuples(st.floats(-0.3, 0.3), st.floats(-0.3, 0.3), st.floats(-0.2, 0.3)),
    st.tuples(dims, dims, dims),
    st.floats(-np.pi, np.pi),
)
def test_field_is_a_lower_bound_of_the_signed_distance(center, size, yaw):
    field = DistanceField(np.array([-0.6, -0.6, -0.5]), np.array([0.6, 0.6, 0.6]), 0.02, 0.12)
    pose = np.eye(4)
    pose[:2, :2] = [[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]]
    pose[:3, 3] = center
    size = np.array(size)
    rng = np.random.default_rng(4)
    cloud = rng.uniform(-0.1, 0.1, size=(300, 3)) + center + [0.1, 0.0, 0.0]
    mesh = geometry.box_triangles(size) @ pose[:3, :3].T + pose[:3, 3] + [0.0, 0.2, 0.0]
    obstacles = [
        Obstacle.from_box("b", TransformedBox(pose, size)),
        Obstacle.from_point_cloud("c", cloud, point_radius=0.01),
        Obstacle.from_mesh("m", mesh),
        Obstacle.from_sphere("s", np.array(center) - [0.2, 0, 0], size[0]),
        Obstacle.from_cylinder("y", pose @ _shift(0, -0.2, 0), size[0], size[1]),
    ]
    field.rebuild([p for p in (field.patch(o) for o in obstacles) if p is not None])
    q = rng.uniform(-0.7, 0.7, size=(4000, 3))
    centred = pose @ _shift(0, 0, size[2] / 2)
    exact = np.minimum.reduce(
        [
            geometry.box_signed_distance(centred, size / 2, q),
            np.linalg.norm(q[:, None] - cloud[None], axis=-1).min(axis=1) - 0.01,
            geometry.point_triangle_distances(q, mesh),
            np.linalg.norm(q - (np.array(center) - [0.2, 0, 0]), axis=1) - size[0],
            geometry.cylinder_signed_distance(pose @ _shift(0, -0.2, 0), size[0], size[1], q),
        ]
    )
    assert np.all(field.clearance(q) <= exact + 1e-6)


def _shift(x, y, z):
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def test_anchor_chain_matches_the_model_fk(planner: Planner):
    model, robot = planner.model, planner._robot
    q = np.random.default_rng(5).uniform(model.lower, model.upper, size=(50, 6))
    rot, trans = robot.anchor_frames(q)
    for g, link in enumerate(robot.anchors):
        ref = model.fk(q, link)
        assert np.allclose(rot[:, g], ref[:, :3, :3], atol=1e-12)
        assert np.allclose(trans[:, g], ref[:, :3, 3], atol=1e-12)


def test_lipschitz_bound_of_sphere_motion(planner: Planner):
    model, robot, checker = planner.model, planner._robot, planner.checker
    rng = np.random.default_rng(6)
    qa = rng.uniform(model.lower, model.upper, size=(300, 6))
    qb = np.clip(qa + rng.normal(0, 0.3, size=qa.shape), model.lower, model.upper)
    c = robot.compiled()
    bound = np.abs(qb - qa) @ c.weights.T  # (N, S)
    t = np.linspace(0, 1, 41)
    path = robot.centers((qa[:, None] + t[None, :, None] * (qb - qa)[:, None]).reshape(-1, 6))
    path = path[:, : len(c.radii)].reshape(len(qa), len(t), -1, 3)  # spheres, not body bounds
    length = np.linalg.norm(np.diff(path, axis=1), axis=-1).sum(axis=1)  # polyline <= arc
    assert np.all(length <= bound + 1e-9)
    assert np.all(checker.travel(qa, qb) >= bound.max(axis=1))


def test_free_segments_are_free_at_a_fine_resolution(planner: Planner):
    model = planner.model
    tip = planner.tcp_pose(model.home_q)[:3, 3]
    post = TransformedBox(_shift(tip[0], tip[1] + 0.25, -0.1), [0.08, 0.08, 1.0])
    planner.set_obstacles([Obstacle.from_box("post", post)])
    try:
        exact = CollisionChecker(planner._robot, planner._field, 1e-9, model.lower, model.upper)
        rng = np.random.default_rng(7)
        qa = np.clip(model.home_q + rng.normal(0, 0.6, size=(200, 6)), model.lower, model.upper)
        qb = np.clip(qa + rng.normal(0, 0.6, size=qa.shape), model.lower, model.upper)
        ok = planner.checker.segments_free(qa, qb)
        assert 10 < ok.sum() < len(ok)  # a mix of free and blocked segments
        # One segment at a time (the checker's path with fewer numpy calls) decides the same.
        single = [planner.checker.segment_free(a, b) for a, b in zip(qa, qb)]
        assert np.array_equal(single, ok)
        start_free, goals_free, direct = planner.checker.star(qa[0], qb[:20])
        assert np.array_equal(direct, planner.checker.segments_free(qa[:1].repeat(20, 0), qb[:20]))
        assert np.array_equal(goals_free, planner.checker.free(qb[:20]))
        assert start_free == planner.checker.free(qa[:1])[0]
        t = np.linspace(0, 1, 400)
        fine = (qa[ok][:, None] + t[None, :, None] * (qb - qa)[ok][:, None]).reshape(-1, 6)
        fine = np.clip(fine, model.lower, model.upper)  # rounding at t = 1
        assert exact.free(fine).all()  # true spheres, no margin, between the checked steps
    finally:
        planner.clear_obstacles()


@pytest.mark.parametrize("count", [5, 300, 1500])  # few (fewer calls), many, several chunks
def test_kernel_matches_a_direct_evaluation_of_the_model(planner: Planner, count: int):
    robot, checker = planner._robot, planner.checker
    planner.set_obstacles(obstacles_from_scene("shelf"))
    try:
        q = np.random.default_rng(count).uniform(checker.lower, checker.upper, size=(count, 6))
        kernel, c = checker._kernel, robot.compiled()
        centers = robot.centers(q)[:, : len(c.radii)]  # (N, S, 3): anchor-chain FK
        assert np.allclose(kernel.centers(q), centers[:, kernel.order], atol=1e-9)
        env = np.flatnonzero(c.env)
        env_gap = planner._field.clearance(centers[:, env]) - c.radii[env]
        d = np.linalg.norm(centers[:, c.pair_a] - centers[:, c.pair_b], axis=-1)
        pair_gap = d - c.radii[c.pair_a] - c.radii[c.pair_b]
        free = (env_gap.min(axis=1) >= checker.margin) & (pair_gap.min(axis=1) >= checker.margin)
        assert 0 < free.sum() < count or count == 5
        assert np.array_equal(checker.free(q), free)
    finally:
        planner.clear_obstacles()


def test_certified_intervals_are_free(planner: Planner):
    # A free sample of a segment certifies |t - t_i| <= half width (module doc of ``checker``):
    # obstacle spheres by their own motion bound, sphere pairs by the joints between their groups.
    model, checker = planner.model, planner.checker
    planner.set_obstacles(obstacles_from_scene("cage"))
    try:
        exact = CollisionChecker(planner._robot, planner._field, 1e-9, model.lower, model.upper)
        rng = np.random.default_rng(8)
        qa = rng.uniform(model.lower, model.upper, size=(400, 6))
        qb = np.clip(qa + rng.normal(0, 0.5, size=qa.shape), model.lower, model.upper)
        mid = 0.5 * (qa + qb)
        ok, half = checker._kernel.evaluate(mid, np.abs(qb - qa))
        assert ok.sum() > 50 and np.all(half[ok] > 0.0)
        s = np.linspace(-1.0, 1.0, 41)
        t = np.clip(0.5 + half[ok][:, None] * s[None], 0.0, 1.0)  # (K, 41)
        q = qa[ok][:, None] + t[..., None] * (qb - qa)[ok][:, None]
        assert exact.free(np.clip(q.reshape(-1, 6), model.lower, model.upper)).all()
    finally:
        planner.clear_obstacles()


def test_stored_self_collision_matrix_matches_the_urdf(planner: Planner):
    import json

    data = json.loads(self_collision.matrix_path(planner.model).read_text())
    assert data["urdf_sha256"] == self_collision.urdf_digest(planner.model)
    kept = {tuple(p) for p in data["kept_pairs"]}
    assert kept == set(planner._robot.kept_pairs)
    groups = {b.name: b.group for b in planner._robot.urdf_bodies}
    assert all(abs(groups[a] - groups[b]) >= 2 for a, b in kept)  # never adjacent links
