"""``PoseTf`` position semantics: the vendor's minimal cases with its numbers, and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.transforms import PoseTf, ReturnCode, Rotation, TfConfig, Translation

IDENTITY = (1.0, 0.0, 0.0, 0.0)
X_IN = [1.0, 2.0, 3.0, 1.0, 0.0, 0.0, 0.0]
coord = st.floats(-2.0, 2.0, allow_nan=False)
vec3 = st.tuples(coord, coord, coord)


@st.composite
def unit_quaternions(draw) -> tuple:
    q = np.array(draw(st.tuples(*[st.floats(-1.0, 1.0, allow_nan=False)] * 4)))
    n = np.linalg.norm(q)
    return (1.0, 0.0, 0.0, 0.0) if n < 0.1 else tuple((q / n).tolist())


@st.composite
def poses7(draw) -> np.ndarray:
    return np.array([*draw(vec3), *draw(unit_quaternions())])


def pose_tf(point_in, point_out, axes_in=IDENTITY, axes_out=("fixed_frame", IDENTITY)) -> PoseTf:
    return PoseTf(
        TfConfig(
            input_ref_point=Translation(*point_in),
            input_expr_axes=Rotation("fixed_frame", axes_in),
            output_ref_point=Translation(*point_out),
            output_expr_axes=Rotation(*axes_out),
        )
    )


@pytest.mark.parametrize(
    ("point_in", "point_out", "position"),
    [
        # the vendor's numbers (identity axes, input [1, 2, 3, 1, 0, 0, 0])
        (("fixed_frame", (0, 0, 0)), ("fixed_frame", (0, 0, 0)), [0.0, 0.0, 0.0]),
        (("moving_frame", (0, 0, 0)), ("fixed_frame", (0.1, 0, 0)), [0.1, 0.0, 0.0]),
        (("fixed_frame", (0.1, 0, 0)), ("moving_frame", (0, 0, 0)), [0.9, 2.0, 3.0]),
        (("moving_frame", (0, 0, 0)), ("moving_frame", (0, 0, 0)), [1.0, 2.0, 3.0]),
    ],
)
def test_minimal_cases_give_the_vendors_positions(point_in, point_out, position):
    tf = pose_tf(point_in, point_out)
    code, out = tf.update(X_IN)
    assert code is ReturnCode.OK
    np.testing.assert_allclose(out, [*position, 1.0, 0.0, 0.0, 0.0], atol=1e-15)
    _, batch = tf.update_batch(np.array([X_IN, X_IN]))
    np.testing.assert_allclose(batch, [out, out], atol=1e-15)


def test_a_moving_output_point_is_a_body_point():
    """Body at [1, 2, 3] turned 90 degrees about z: the body point [0.1, 0, 0] is at
    [1, 2.1, 3]; with moving output axes the same vector is written in the body's axes."""
    s = np.sqrt(0.5)
    x = [1.0, 2.0, 3.0, s, 0.0, 0.0, s]
    out = pose_tf(("moving_frame", (0, 0, 0)), ("moving_frame", (0.1, 0, 0))).update(x)[1]
    np.testing.assert_allclose(out, [1.0, 2.1, 3.0, s, 0.0, 0.0, s], atol=1e-12)
    body_axes = pose_tf(
        ("moving_frame", (0, 0, 0)),
        ("moving_frame", (0.1, 0, 0)),
        axes_out=("moving_frame", IDENTITY),
    )
    out = body_axes.update(x)[1]
    np.testing.assert_allclose(out, [2.1, -1.0, 3.0, 1.0, 0.0, 0.0, 0.0], atol=1e-12)


@settings(max_examples=60)
@given(vec3, unit_quaternions(), st.sampled_from(["fixed_frame", "moving_frame"]), vec3,
       unit_quaternions(), st.lists(poses7(), min_size=2, max_size=4))  # fmt: skip
def test_a_fixed_output_point_gives_a_constant_position(d_out, q_out, in_origin, d_in, q_in, xs):
    """A point of the base is where it is whatever the body does: the same position for every
    input with fixed output axes, the same distance from the base with moving ones."""
    fixed = pose_tf((in_origin, d_in), ("fixed_frame", d_out), q_in, ("fixed_frame", q_out))
    moving = pose_tf((in_origin, d_in), ("fixed_frame", d_out), q_in, ("moving_frame", q_out))
    xs = np.array(xs)
    _, batch = fixed.update_batch(xs)
    for x, row in zip(xs, batch):
        code, out = fixed.update(x)
        assert code is ReturnCode.OK
        np.testing.assert_allclose(out[:3], batch[0][:3], atol=1e-12)
        np.testing.assert_allclose(row, out, atol=1e-12)
        dist = np.linalg.norm(moving.update(x)[1][:3])
        np.testing.assert_allclose(dist, np.linalg.norm(d_out), atol=1e-12)


def test_batch_is_canonical_like_single_updates_at_w_zero_and_negative_w():
    """Half turns (w = 0: the first non-zero of x, y, z decides the sign) and negative w, in a
    batch (array path) and one by one (scalar path)."""
    tf = pose_tf(("moving_frame", (0, 0, 0)), ("moving_frame", (0, 0, 0)))
    qs = [[0, 1, 0, 0], [0, -1, 0, 0], [0, 0, -1, 0], [0, 0, 0, -1], [-0.5, 0.5, 0.5, 0.5]]
    xs = np.array([[0.1, 0.2, 0.3, *q] for q in qs], dtype=float)
    codes, batch = tf.update_batch(xs)
    assert (codes == ReturnCode.OK).all()
    for x, row in zip(xs, batch):
        np.testing.assert_array_equal(row, tf.update(x)[1])
    np.testing.assert_array_equal(batch[:, 3:], [[0, 1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0],
                                                 [0, 0, 0, 1], [0.5, -0.5, -0.5, -0.5]])  # fmt: skip
