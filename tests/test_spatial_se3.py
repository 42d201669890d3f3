"""SE3, batched pose kernels and the frame graph."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from twin.spatial import SE3, SO3, FrameGraph, LookupFailure, batch

quats = arrays(np.float64, 4, elements=st.floats(-1.0, 1.0)).filter(
    lambda q: np.linalg.norm(q) > 1e-3
)
points = arrays(np.float64, 3, elements=st.floats(-10.0, 10.0))
poses = st.builds(lambda q, t: SE3(SO3(q), t), quats, points)


@given(poses, poses, poses)
def test_composition_is_associative_and_matches_matrices(a, b, c):
    left = ((a @ b) @ c).matrix()
    right = (a @ (b @ c)).matrix()
    np.testing.assert_allclose(left, right, atol=1e-12)
    np.testing.assert_allclose((a @ b).matrix(), a.matrix() @ b.matrix(), atol=1e-12)


@given(poses, points)
def test_inverse_undoes_the_transform(a, p):
    np.testing.assert_allclose((a @ a.inverse()).matrix(), np.eye(4), atol=1e-12)
    np.testing.assert_allclose(a.inverse().act(a.act(p)), p, atol=1e-12)


@given(poses, points, points)
def test_rigid_transforms_preserve_distances(a, p, r):
    d0 = np.linalg.norm(p - r)
    assert np.linalg.norm(a.act(p) - a.act(r)) == pytest.approx(d0, abs=1e-11)


@given(poses)
def test_round_trips_matrix_and_pose7(a):
    back = SE3.from_matrix(a.matrix())
    np.testing.assert_allclose(back.translation, a.translation, atol=1e-12)
    assert back.rotation.angle_to(a.rotation) < 1e-12
    np.testing.assert_allclose(SE3.from_pose7(a.pose7()).matrix(), a.matrix(), atol=1e-15)


def test_batch_kernels_agree_with_se3():
    rng = np.random.default_rng(3)
    a = [SE3(SO3(q), t) for q, t in zip(rng.normal(size=(50, 4)), rng.normal(size=(50, 3)))]
    b = [SE3(SO3(q), t) for q, t in zip(rng.normal(size=(50, 4)), rng.normal(size=(50, 3)))]
    pa = np.array([x.pose7() for x in a])
    pb = np.array([x.pose7() for x in b])
    ma = batch.matrices_from_pose7(pa)
    np.testing.assert_allclose(ma, np.array([x.matrix() for x in a]), atol=1e-15)
    np.testing.assert_allclose(batch.pose7_from_matrices(ma), pa, atol=1e-12)
    composed = batch.compose_pose7(pa, pb)
    np.testing.assert_allclose(
        composed, np.array([(x @ y).pose7() for x, y in zip(a, b)]), atol=1e-12
    )
    inv = batch.invert_matrices(ma)
    np.testing.assert_allclose(inv @ ma, np.broadcast_to(np.eye(4), ma.shape), atol=1e-12)
    np.testing.assert_allclose(
        batch.invert_pose7(pa), np.array([x.inverse().pose7() for x in a]), atol=1e-12
    )
    p = rng.normal(size=(50, 3))
    np.testing.assert_allclose(
        batch.transform_points(ma, p), np.array([x.act(y) for x, y in zip(a, p)]), atol=1e-12
    )
    dp, ang = batch.pose_errors(ma, ma)
    assert np.all(dp == 0.0) and np.all(ang < 1e-14)


def test_bad_inputs_name_what_was_expected():
    with pytest.raises(ValueError, match=r"translation must have shape \(3,\)"):
        SE3(SO3(), [1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        SE3.from_pose7([0, 0, np.inf, 1, 0, 0, 0])
    with pytest.raises(ValueError, match=r"last row"):
        SE3.from_matrix(np.ones((4, 4)))


def _graph() -> FrameGraph:
    g = FrameGraph()
    g.declare_root("world")
    g.declare_frame("base", "world", SE3(SO3.from_rpy(0, 0, 0.5), [1.0, 0.0, 0.0]))
    g.declare_frame("flange", "base", SE3(SO3.from_rpy(0.2, -np.pi / 2, 0.3), [0.4, 0.0, 0.65]))
    g.declare_frame("tcp", "flange", SE3.from_translation([0.0, 0.0, 0.125]))
    g.declare_frame("camera", "flange", SE3(SO3.from_rpy(0.0, 0.0, np.pi), [0.05, 0.0, 0.02]))
    return g


def test_lookup_composes_the_chain():
    g = _graph()
    world_T_tcp = g.lookup("world", "tcp").value
    expected = (
        SE3(SO3.from_rpy(0, 0, 0.5), [1.0, 0.0, 0.0])
        @ SE3(SO3.from_rpy(0.2, -np.pi / 2, 0.3), [0.4, 0.0, 0.65])
        @ SE3.from_translation([0.0, 0.0, 0.125])
    )
    np.testing.assert_allclose(world_T_tcp.matrix(), expected.matrix(), atol=1e-15)
    camera_T_tcp = g.lookup("camera", "tcp").value
    direct = g.lookup("flange", "camera").value.inverse() @ g.lookup("flange", "tcp").value
    np.testing.assert_allclose(camera_T_tcp.matrix(), direct.matrix(), atol=1e-15)
    np.testing.assert_allclose(g.lookup("tcp", "tcp").value.matrix(), np.eye(4), atol=0)


def test_lookup_routes_through_lowest_common_ancestor():
    # Under a 20-deep spine, two tools on the same wrist are related by their two edges only.
    g = FrameGraph()
    g.declare_root("root")
    parent = "root"
    rng = np.random.default_rng(5)
    for i in range(20):
        name = f"s{i}"
        g.declare_frame(name, parent, SE3(SO3(rng.normal(size=4)), rng.normal(size=3)))
        parent = name
    e1 = SE3(SO3(rng.normal(size=4)), rng.normal(size=3))
    e2 = SE3(SO3(rng.normal(size=4)), rng.normal(size=3))
    g.declare_frame("tool_a", parent, e1)
    g.declare_frame("tool_b", parent, e2)
    two_edge = e1.inverse() @ e2
    np.testing.assert_array_equal(g.lookup("tool_a", "tool_b").value.matrix(), two_edge.matrix())


def test_set_transform_moves_the_subtree():
    g = _graph()
    before = g.lookup("world", "tcp").value
    g.set_transform("flange", SE3.from_translation([0.0, 0.0, 1.0]))
    after = g.lookup("world", "tcp").value
    assert not np.allclose(before.translation, after.translation)
    np.testing.assert_allclose(g.lookup("base", "tcp").value.translation, [0, 0, 1.125], atol=1e-15)


def test_failures_are_values_with_distinct_reasons():
    g = _graph()
    unknown = g.lookup("world", "gripper")
    assert not unknown and unknown.failure is LookupFailure.UNKNOWN_FRAME
    assert "gripper" in unknown.reason
    g.declare_root("other_cell")
    g.declare_frame("fixture", "other_cell", SE3.identity())
    disconnected = g.lookup("tcp", "fixture")
    assert not disconnected and disconnected.failure is LookupFailure.DISCONNECTED


def test_declaration_errors():
    g = _graph()
    with pytest.raises(ValueError, match="already declared"):
        g.declare_frame("tcp", "flange", SE3.identity())
    with pytest.raises(ValueError, match="not declared"):
        g.declare_frame("x", "nowhere", SE3.identity())
    with pytest.raises(ValueError, match="root"):
        g.set_transform("world", SE3.identity())
    with pytest.raises(TypeError, match="SE3"):
        g.declare_frame("y", "world", np.eye(4))
