"""Physics of the transformers against independent numpy/SE3 references (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from twin.spatial import SE3, SO3, quaternion
from twin.transforms import (
    ImuTf,
    PoseTf,
    ReturnCode,
    Rotation,
    TfConfig,
    Translation,
    TwistTf,
    WrenchTf,
)
from twin.transforms import _scalar as sc

ORIGINS = st.sampled_from(["fixed_frame", "moving_frame"])
coord = st.floats(-2.0, 2.0, allow_nan=False)
vec3 = st.tuples(coord, coord, coord)
#: 60 examples per property (the profile's 200 would take about a minute on the shared machine).
FEW = settings(max_examples=60)
vec6 = st.lists(st.floats(-50.0, 50.0, allow_nan=False), min_size=6, max_size=6)


@st.composite
def unit_quaternions(draw) -> tuple:
    q = np.array(draw(st.tuples(*[st.floats(-1.0, 1.0, allow_nan=False)] * 4)))
    n = np.linalg.norm(q)
    assume(n > 0.1)
    return tuple((q / n).tolist())


@st.composite
def sides(draw, moving_axes: bool = True) -> tuple[Translation, Rotation]:
    """One side (reference point and expression axes) of a transformer."""
    point = Translation(draw(ORIGINS), draw(vec3))
    axes_origin = draw(ORIGINS) if moving_axes else "fixed_frame"
    return point, Rotation(axes_origin, draw(unit_quaternions()))


@st.composite
def poses7(draw) -> np.ndarray:
    return np.array([*draw(vec3), *draw(unit_quaternions())])


def config(a, b) -> TfConfig:
    return TfConfig(
        input_ref_point=a[0], input_expr_axes=a[1], output_ref_point=b[0], output_expr_axes=b[1]
    )


def make(cls, a, b, moving: np.ndarray | None = None):
    tf = cls(config(a, b))
    if moving is not None:
        tf.set_fixed_to_moving_frame_tf(moving)
    return tf


def frame_in_fixed(side, moving: np.ndarray) -> np.ndarray:
    """fixed_T_side (4, 4) built with SE3, independently of the transformer code."""
    point, axes = side
    fixed_T_moving = SE3.from_pose7(moving)
    rot = SO3(axes.rotation)
    if axes.origin == "moving_frame":
        rot = fixed_T_moving.rotation @ rot
    p = np.asarray(point.translation, float)
    if point.origin == "moving_frame":
        p = fixed_T_moving.act(p)
    return SE3(rot, p).matrix()


def adjoint(t: np.ndarray) -> np.ndarray:
    """Ad of a_T_b (4, 4) for twists [v; w]: twist in b -> twist in a."""
    r, p = t[:3, :3], t[:3, 3]
    ad = np.zeros((6, 6))
    ad[:3, :3] = r
    ad[3:, 3:] = r
    ad[:3, 3:] = quaternion.skew(p) @ r
    return ad


def in_T_out(a, b, moving) -> np.ndarray:
    return np.linalg.inv(frame_in_fixed(a, moving)) @ frame_in_fixed(b, moving)


@FEW
@given(sides(), sides(), poses7(), vec6)
def test_wrench_is_the_transposed_adjoint(a, b, moving, w):
    code, out = make(WrenchTf, a, b, moving).update(w)
    expected = adjoint(in_T_out(a, b, moving)).T @ np.asarray(w)
    assert code is ReturnCode.OK
    np.testing.assert_allclose(out, expected, atol=1e-9, rtol=0)


@FEW
@given(sides(), sides(), poses7(), vec6)
def test_twist_is_the_adjoint_of_out_T_in(a, b, moving, t):
    code, out = make(TwistTf, a, b, moving).update(t)
    expected = adjoint(np.linalg.inv(in_T_out(a, b, moving))) @ np.asarray(t)
    assert code is ReturnCode.OK
    np.testing.assert_allclose(out, expected, atol=1e-9, rtol=0)


@FEW
@given(sides(), sides(), poses7(), vec6, vec6)
def test_power_is_invariant_under_change_of_point_and_axes(a, b, moving, w, t):
    _, w_b = make(WrenchTf, a, b, moving).update(w)
    _, t_b = make(TwistTf, a, b, moving).update(t)
    power_a = float(np.dot(w, t))
    scale = 1.0 + np.linalg.norm(w_b) * np.linalg.norm(t_b)  # size of the products summed
    assert abs(float(np.dot(w_b, t_b)) - power_a) <= 1e-13 * scale


@FEW
@given(sides(), sides(), poses7(), vec6, st.sampled_from([WrenchTf, TwistTf, ImuTf]))
def test_a_to_b_to_a_is_identity(a, b, moving, x, cls):
    _, y = make(cls, a, b, moving).update(x)
    _, back = make(cls, b, a, moving).update(y)
    np.testing.assert_allclose(back, x, atol=1e-9, rtol=0)


@FEW
@given(sides(), sides(), poses7(), vec6)
def test_imu_matches_the_reference_formula(a, b, moving, x):
    code, out = make(ImuTf, a, b, moving).update(x)
    f_in = frame_in_fixed(a, moving)
    f_out = frame_in_fixed(b, moving)
    r_fi, r_of = f_in[:3, :3], f_out[:3, :3].T
    w_f = r_fi @ np.asarray(x[3:])
    acc = r_of @ (
        r_fi @ np.asarray(x[:3]) + np.cross(w_f, np.cross(w_f, f_out[:3, 3] - f_in[:3, 3]))
    )
    assert code is ReturnCode.OK
    np.testing.assert_allclose(out[:3], acc, atol=1e-9, rtol=0)
    np.testing.assert_allclose(out[3:], r_of @ w_f, atol=1e-12, rtol=0)


@FEW
@given(
    st.floats(0.5, 20.0),  # spin rate rad/s
    st.floats(0.05, 1.0),  # radius m
    st.floats(0.0, 6.0),  # time s
)
def test_imu_spinning_body_gives_centripetal_acceleration(w, radius, t):
    """A body spinning about world z: the output point at radius r accelerates -w^2 r (also
    checked against a finite difference of its trajectory)."""
    tf = ImuTf(
        TfConfig(
            input_ref_point=Translation("moving_frame", (0.0, 0.0, 0.0)),
            input_expr_axes=Rotation("moving_frame", (1.0, 0.0, 0.0, 0.0)),
            output_ref_point=Translation("moving_frame", (radius, 0.0, 0.0)),
            output_expr_axes=Rotation("fixed_frame", (1.0, 0.0, 0.0, 0.0)),
        )
    )

    def position(time: float) -> np.ndarray:
        return SO3.from_axis_angle((0.0, 0.0, 1.0), w * time).act(np.array([radius, 0.0, 0.0]))

    rot = SO3.from_axis_angle((0.0, 0.0, 1.0), w * t)
    tf.set_fixed_to_moving_frame_tf(np.concatenate(([0.0, 0.3, 0.1], rot.wxyz)))
    code, out = tf.update([0.0, 0.0, 0.0, 0.0, 0.0, w])
    assert code is ReturnCode.OK
    np.testing.assert_allclose(out[:3], -(w**2) * position(t), atol=1e-9)
    h = 1e-4
    finite_diff = (position(t + h) - 2.0 * position(t) + position(t - h)) / h**2
    np.testing.assert_allclose(out[:3], finite_diff, atol=1e-4 * w**2 * radius + 1e-6)
    np.testing.assert_allclose(out[3:], [0.0, 0.0, w], atol=1e-12)


def pose_reference(a, b, pose7: np.ndarray) -> SE3:
    """The vendor's pose meaning (``twin.transforms.pose`` module doc) with SO3 / SE3: the body
    origin ``o``, the output point ``P`` and the output axes ``R_oa``; out = [R_oa^T P, R_oa^T R_fm]."""
    (pt_in, ax_in), (pt_out, ax_out) = a, b
    r_ia = SO3(ax_in.rotation)
    r_fm = r_ia @ SO3(pose7[3:])
    p = r_ia.act(np.asarray(pose7[:3]))
    d_in, d_out = np.asarray(pt_in.translation), np.asarray(pt_out.translation)
    o = p - (d_in if pt_in.origin == "fixed_frame" else r_fm.act(d_in))
    point = d_out if pt_out.origin == "fixed_frame" else o + r_fm.act(d_out)
    r_oa = SO3(ax_out.rotation)
    if ax_out.origin == "moving_frame":
        r_oa = r_fm @ r_oa
    return SE3(r_oa.inverse() @ r_fm, r_oa.inverse().act(point))


def assert_same_pose(got: np.ndarray, want: np.ndarray, atol: float) -> None:
    np.testing.assert_allclose(got[:3], want[:3], atol=atol, rtol=0)
    assert got[3] >= 0.0
    sign = 1.0 if np.dot(got[3:], want[3:]) >= 0.0 else -1.0  # canonical form may flip at w = 0
    np.testing.assert_allclose(got[3:], sign * want[3:], atol=atol, rtol=0)


@FEW
@given(sides(moving_axes=False), sides(), poses7())
def test_pose_agrees_with_se3_composition(a, b, x):
    code, out = make(PoseTf, a, b).update(x)
    assert code is ReturnCode.OK
    assert_same_pose(out, pose_reference(a, b, x).pose7(), 1e-9)


@st.composite
def moving_point_sides(draw) -> tuple[Translation, Rotation]:
    """A side with its reference point on the moving body and fixed axes (invertible poses)."""
    return Translation("moving_frame", draw(vec3)), Rotation(
        "fixed_frame", draw(unit_quaternions())
    )


@FEW
@given(moving_point_sides(), moving_point_sides(), poses7())
def test_pose_moving_to_moving_round_trip(a, b, x):
    _, y = make(PoseTf, a, b).update(x)
    _, back = make(PoseTf, b, a).update(y)
    assert_same_pose(back, x * (1.0 if x[3] >= 0 else np.r_[1, 1, 1, -1, -1, -1, -1]), 1e-9)


@FEW
@given(sides(), sides(), st.integers(0, 2**32 - 1), st.sampled_from([WrenchTf, TwistTf, ImuTf]))
def test_batch_with_per_row_transforms_equals_single_updates(a, b, seed, cls):
    rng = np.random.default_rng(seed)
    n = 20
    x = rng.normal(scale=10.0, size=(n, 6))
    q = rng.normal(size=(n, 4))
    moving = np.hstack((rng.uniform(-1, 1, (n, 3)), q / np.linalg.norm(q, axis=1, keepdims=True)))
    tf = make(cls, a, b)
    codes, batch_out = tf.update_batch(x, moving)
    single = np.empty_like(x)
    for k in range(n):
        tf.set_fixed_to_moving_frame_tf(moving[k])
        assert tf.update(x[k], single[k])[0] is ReturnCode.OK
    assert np.all(codes == ReturnCode.OK)
    np.testing.assert_allclose(batch_out, single, atol=1e-12, rtol=1e-15)
    # without per-row transforms the last pushed one serves every row (BLAS: rounding may differ)
    codes, static = tf.update_batch(x)
    np.testing.assert_allclose(
        static, np.array([tf.update(r)[1] for r in x]), atol=1e-12, rtol=1e-14
    )


@FEW
@given(sides(moving_axes=False), sides(), st.integers(0, 2**32 - 1))
def test_pose_batch_equals_single_updates(a, b, seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(20, 4))
    x = np.hstack((rng.uniform(-1, 1, (20, 3)), q / np.linalg.norm(q, axis=1, keepdims=True)))
    tf = make(PoseTf, a, b)
    codes, batch_out = tf.update_batch(x)
    assert np.all(codes == ReturnCode.OK)
    for k in range(20):
        assert_same_pose(batch_out[k], tf.update(x[k])[1], 1e-12)


@FEW
@given(unit_quaternions(), vec3)
def test_scalar_kernels_match_the_spatial_kernels(q, v):
    np.testing.assert_allclose(
        np.reshape(sc.quat_to_mat9(q), (3, 3)), quaternion.to_matrix(np.array(q)), atol=1e-15
    )
    np.testing.assert_allclose(
        sc.qrot(q, v), quaternion.rotate(np.array(q), np.array(v)), atol=1e-14
    )
    np.testing.assert_allclose(sc.qcanonical(q), quaternion.canonicalize(np.array(q)), atol=1e-15)
    np.testing.assert_allclose(
        sc.qcanonical(sc.qmul(q, q)), quaternion.multiply(np.array(q), np.array(q)), atol=1e-14
    )


def test_large_batch_uses_several_chunks_and_matches_single():
    rng = np.random.default_rng(7)
    n = 10_000  # more than one chunk of BATCH_CHUNK rows
    a = (
        Translation("moving_frame", (0.0, 0.0, 0.05)),
        Rotation("moving_frame", (0.0, 1.0, 0.0, 0.0)),
    )
    b = (Translation("fixed_frame", (0.1, 0.0, 0.0)), Rotation("fixed_frame", (1.0, 0.0, 0.0, 0.0)))
    x = rng.normal(size=(n, 6))
    q = rng.normal(size=(n, 4))
    moving = np.hstack((rng.normal(size=(n, 3)), q / np.linalg.norm(q, axis=1, keepdims=True)))
    tf = make(WrenchTf, a, b)
    _, out = tf.update_batch(x, moving)
    for k in (0, 4095, 4096, 9999):
        tf.set_fixed_to_moving_frame_tf(moving[k])
        np.testing.assert_allclose(out[k], tf.update(x[k])[1], atol=1e-12, rtol=0)


@FEW
@given(sides(), sides(), poses7(), vec6)
def test_moving_frame_as_matrix_equals_as_pose(a, b, moving, x):
    by_pose = make(WrenchTf, a, b, moving)
    by_matrix = make(WrenchTf, a, b)
    by_matrix.set_fixed_to_moving_frame_matrix(SE3.from_pose7(moving).matrix())
    np.testing.assert_allclose(by_matrix.update(x)[1], by_pose.update(x)[1], atol=1e-9, rtol=0)


def test_moving_frame_matrix_that_is_not_a_rotation_is_reported():
    a = (
        Translation("moving_frame", (0.0, 0.0, 0.0)),
        Rotation("moving_frame", (1.0, 0.0, 0.0, 0.0)),
    )
    b = (Translation("fixed_frame", (0.0, 0.0, 0.0)), Rotation("fixed_frame", (1.0, 0.0, 0.0, 0.0)))
    tf = make(WrenchTf, a, b)
    sheared = np.eye(4)
    sheared[0, 1] = 0.01
    tf.set_fixed_to_moving_frame_matrix(sheared)
    code, out = tf.update(np.ones(6))
    assert code is ReturnCode.NonFatalError and not out.any() and "not a rotation" in tf.reason
