"""Properties of SO3 and the quaternion kernels: group axioms, invariants, round trips, singularities."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from twin.spatial import SO3, quaternion

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
quats = arrays(np.float64, 4, elements=st.floats(-1.0, 1.0)).filter(
    lambda q: np.linalg.norm(q) > 1e-3
)
vectors = arrays(np.float64, 3, elements=finite)
angles = st.floats(-np.pi, np.pi)


def assert_same_rotation(a: SO3, b: SO3, tol: float = 1e-12) -> None:
    assert a.angle_to(b) < tol, (a, b)


def assert_invariants(r: SO3) -> None:
    q = r.wxyz
    assert abs(np.linalg.norm(q) - 1.0) < 1e-12
    assert q[0] >= 0.0
    m = r.matrix()
    np.testing.assert_allclose(m @ m.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(m) == pytest.approx(1.0, abs=1e-12)


@given(quats, quats, quats)
def test_product_is_associative_and_matches_matrix_product(a, b, c):
    ra, rb, rc = SO3(a), SO3(b), SO3(c)
    assert_same_rotation((ra @ rb) @ rc, ra @ (rb @ rc))
    np.testing.assert_allclose((ra @ rb).matrix(), ra.matrix() @ rb.matrix(), atol=1e-12)


@given(quats)
def test_inverse_and_identity(a):
    r = SO3(a)
    assert_same_rotation(r @ r.inverse(), SO3.identity())
    assert_same_rotation(r.inverse() @ r, SO3.identity())
    assert_same_rotation(SO3.identity() @ r, r, tol=1e-15)


@given(quats, quats)
def test_stored_quaternion_is_unit_and_canonical(a, b):
    for r in (SO3(a), SO3(a) @ SO3(b), SO3(a).inverse()):
        assert_invariants(r)


@given(quats)
def test_negated_quaternion_is_the_same_stored_rotation(a):
    np.testing.assert_array_equal(SO3(a).wxyz, SO3(-a).wxyz)


@given(quats)
def test_round_trip_quaternion_matrix(a):
    r = SO3(a)
    back = SO3.from_matrix(r.matrix())
    assert_same_rotation(back, r)
    if abs(r.wxyz[0]) > 1e-9:  # away from w = 0 the canonical form is unique componentwise
        np.testing.assert_allclose(back.wxyz, r.wxyz, atol=1e-12)


@given(quats)
def test_round_trip_quaternion_rotation_vector(a):
    r = SO3(a)
    rv = r.log()
    assert np.linalg.norm(rv) <= np.pi + 1e-12
    assert_same_rotation(SO3.exp(rv), r)


@given(quats)
def test_round_trip_quaternion_rpy(a):
    r = SO3(a)
    roll, pitch, yaw = r.rpy()
    assert abs(pitch) <= np.pi / 2 + 1e-12
    # Near gimbal lock Z-Y-X is bounded near sqrt(eps) (docs/reference/spatial.md): 1e-7 is the real limit.
    assert SO3.from_rpy(roll, pitch, yaw).angle_to(r) < 1e-7


@given(quats, vectors, vectors)
def test_rotation_is_an_isometry(a, u, v):
    r = SO3(a)
    ru, rv = r.act(u), r.act(v)
    scale = 1.0 + np.linalg.norm(u) * np.linalg.norm(v)
    assert np.linalg.norm(ru) == pytest.approx(np.linalg.norm(u), abs=1e-9 * scale)
    assert np.dot(ru, rv) == pytest.approx(np.dot(u, v), abs=1e-9 * scale)
    np.testing.assert_allclose(ru, r.matrix() @ u, atol=1e-9 * scale)


def test_100000_chained_products_stay_unit():
    rng = np.random.default_rng(1)
    steps = [SO3(q) for q in rng.normal(size=(100, 4))]
    r = SO3.identity()
    for i in range(100_000):
        r = r @ steps[i % 100]
    assert abs(np.linalg.norm(r.wxyz) - 1.0) < 1e-12
    assert_invariants(r)


def test_angle_of_quaternions_1e15_apart_is_below_1e14():
    a = SO3([1.0, 0.0, 0.0, 0.0])
    b = SO3._trusted(np.array([1.0, 1e-15, 0.0, 0.0]))
    angle = a.angle_to(b)
    assert 0.0 < angle < 1e-14
    # The acos form would report ~1e-8 here: the atan2 form is what makes this pass.
    assert angle == pytest.approx(2e-15, rel=1e-6)


@pytest.mark.parametrize("angle", [np.pi, np.pi - 1e-9, np.pi - 1e-6, -np.pi + 1e-12])
@pytest.mark.parametrize("axis", [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1], [-1, 2, 0.5]])
def test_angle_near_pi(angle, axis):
    r = SO3.from_axis_angle(axis, angle)
    assert_invariants(r)
    # The trace branch of a matrix -> quaternion conversion divides by ~0 here.
    assert_same_rotation(SO3.from_matrix(r.matrix()), r, tol=1e-9)
    assert np.linalg.norm(r.log()) == pytest.approx(abs(angle), abs=1e-9)
    assert_same_rotation(SO3.exp(r.log()), r, tol=1e-9)
    assert r.angle_to(SO3.identity()) == pytest.approx(abs(angle), abs=1e-12)


@pytest.mark.parametrize("angle", [0.0, 1e-300, 1e-15, 1e-10, 1e-6, 9.9e-5, 1e-4, 1.01e-4])
def test_angle_near_zero(angle):
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    r = SO3.exp(axis * angle)
    assert_invariants(r)
    np.testing.assert_allclose(r.log(), axis * angle, rtol=1e-12, atol=1e-300)
    assert r.angle_to(SO3.identity()) == pytest.approx(angle, rel=1e-12, abs=1e-300)
    # sin(theta/2)/theta is 0/0 at 0: the series branch must agree with the closed form.
    np.testing.assert_allclose(r.wxyz[1:], axis * np.sin(angle / 2), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("pitch", [np.pi / 2, -np.pi / 2, np.pi / 2 - 1e-9, -np.pi / 2 + 1e-10])
@pytest.mark.parametrize("roll, yaw", [(0.3, -0.2), (0.0, 0.0), (-2.5, 1.0)])
def test_pitch_at_gimbal_lock(pitch, roll, yaw):
    r = SO3.from_rpy(roll, pitch, yaw)
    out = r.rpy()
    assert np.all(np.isfinite(out))
    assert out[1] == pytest.approx(pitch, abs=1e-7)
    assert SO3.from_rpy(*out).angle_to(r) < 1e-7


def test_rpy_matches_z_y_x_definition():
    roll, pitch, yaw = 0.1, -0.4, 2.0
    c, s = np.cos, np.sin
    rz = np.array([[c(yaw), -s(yaw), 0], [s(yaw), c(yaw), 0], [0, 0, 1]])
    ry = np.array([[c(pitch), 0, s(pitch)], [0, 1, 0], [-s(pitch), 0, c(pitch)]])
    rx = np.array([[1, 0, 0], [0, c(roll), -s(roll)], [0, s(roll), c(roll)]])
    np.testing.assert_allclose(SO3.from_rpy(roll, pitch, yaw).matrix(), rz @ ry @ rx, atol=1e-15)
    np.testing.assert_allclose(SO3.from_rpy(roll, pitch, yaw).rpy(), [roll, pitch, yaw], atol=1e-14)


def test_batched_kernels_agree_with_single_values():
    rng = np.random.default_rng(7)
    q = quaternion.canonicalize(rng.normal(size=(500, 4)))
    p = quaternion.canonicalize(rng.normal(size=(500, 4)))
    prod = quaternion.multiply(q, p)
    for i in range(0, 500, 50):
        np.testing.assert_allclose(prod[i], (SO3(q[i]) @ SO3(p[i])).wxyz, atol=1e-15)
    matrices = quaternion.to_matrix(q)
    np.testing.assert_allclose(quaternion.from_matrix(matrices), q, atol=1e-12)
    # The single-matrix fast path takes the same branches as the batched kernel.
    singles = np.array([quaternion.from_matrix(m) for m in matrices])
    np.testing.assert_allclose(singles, quaternion.from_matrix(matrices), atol=2e-16)
    half_turns = quaternion.to_matrix(quaternion.exp(np.pi * np.eye(3)))
    np.testing.assert_array_equal(
        np.array([quaternion.from_matrix(m) for m in half_turns]),
        quaternion.from_matrix(half_turns),
    )
    np.testing.assert_allclose(quaternion.exp(quaternion.log(q)), q, atol=1e-12)


@pytest.mark.parametrize(
    "bad, message",
    [
        ([0.0, 0.0, 0.0, 0.0], "non-zero"),
        ([1.0, np.nan, 0.0, 0.0], "finite"),
        ([1.0, 0.0, 0.0], r"shape \(4,\)"),
    ],
)
def test_bad_quaternions_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        SO3(bad)


def test_non_rotation_matrix_is_refused():
    with pytest.raises(ValueError, match="orthonormal"):
        SO3.from_matrix(np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        SO3.from_matrix(np.eye(4))
