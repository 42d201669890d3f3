"""The transformers' compiled fast paths (``twin.transforms._compiled``) against their Python
paths, and the fast path's bookkeeping: it is taken only while nothing but the moving-frame
transform changes, and every change of code, entries or argument type goes the checked way.

The compiled half is skipped where numba is not installed (an optional dependency)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_transforms_physics import config, poses7, sides

from twin.transforms import (
    ImuTf,
    PoseTf,
    ReturnCode,
    Rotation,
    TfConfig,
    Translation,
    TwistTf,
    WrenchTf,
    _compiled,
)
from twin.transforms.base import NOT_READY

pytest.importorskip("numba")
if _compiled.kernels() is None:
    pytest.skip("compiled transformers switched off", allow_module_level=True)

SIX = [WrenchTf, TwistTf, ImuTf]
FEW = settings(max_examples=40)


def python_twin(cls, cfg, monkeypatch):
    """The same transformer on its Python paths (no compiled kernels)."""
    monkeypatch.setattr(_compiled, "kernels", lambda: None)
    tf = cls(cfg)
    monkeypatch.undo()
    assert tf._fast is None
    return tf


def _moving(rng, n):
    q = rng.normal(size=(n, 4))
    return np.hstack((rng.uniform(-1, 1, (n, 3)), q / np.linalg.norm(q, axis=1, keepdims=True)))


@FEW
@given(sides(), sides(), st.integers(0, 2**32 - 1), st.sampled_from(SIX))
def test_six_vector_compiled_equals_python(a, b, seed, cls):
    rng = np.random.default_rng(seed)
    x, tfs = rng.normal(scale=10.0, size=(50, 6)), _moving(rng, 50)
    with pytest.MonkeyPatch.context() as mp:
        slow = python_twin(cls, config(a, b), mp)
    fast = cls(config(a, b))
    out_fast, out_slow = np.empty(6), np.empty(6)
    for k in range(50):
        fast.set_fixed_to_moving_frame_tf(tfs[k])
        slow.set_fixed_to_moving_frame_tf(tfs[k])
        assert fast.update(x[k], out_fast)[0] is slow.update(x[k], out_slow)[0] is ReturnCode.OK
        np.testing.assert_allclose(out_fast, out_slow, rtol=1e-13, atol=1e-12)
    assert fast._fast_out is out_fast  # the loop took the compiled path
    codes_f, batch_f = fast.update_batch(x, tfs)
    codes_s, batch_s = slow.update_batch(x, tfs)
    np.testing.assert_array_equal(codes_f, codes_s)
    np.testing.assert_allclose(batch_f, batch_s, rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(fast.update_batch(x)[1], slow.update_batch(x)[1], atol=1e-11)
    ga, gs = fast.geometry(), slow.geometry()
    np.testing.assert_allclose(ga[0], gs[0], atol=1e-15)
    np.testing.assert_allclose(ga[1], gs[1], atol=1e-15)


@FEW
@given(sides(moving_axes=False), sides(), st.lists(poses7(), min_size=1, max_size=20))
def test_pose_compiled_equals_python(a, b, xs):
    with pytest.MonkeyPatch.context() as mp:
        slow = python_twin(PoseTf, config(a, b), mp)
    fast = PoseTf(config(a, b))
    out_fast, out_slow = np.empty(7), np.empty(7)
    for x in xs:
        assert fast.update(x, out_fast)[0] is slow.update(x, out_slow)[0] is ReturnCode.OK
        np.testing.assert_allclose(out_fast, out_slow, rtol=1e-13, atol=1e-12)
    x = np.array(xs)
    codes_f, batch_f = fast.update_batch(x)
    codes_s, batch_s = slow.update_batch(x)
    np.testing.assert_array_equal(codes_f, codes_s)
    np.testing.assert_allclose(batch_f, batch_s, rtol=1e-13, atol=1e-12)


def moving_wrench() -> WrenchTf:
    tf = WrenchTf()
    tf.set_input_reference_point("moving_frame", [0.0, 0.0, 0.05])
    tf.set_input_expression_axes("moving_frame", [1.0, 0.0, 0.0, 0.0])
    tf.set_output_reference_point("fixed_frame", [0.1, 0.0, 0.0])
    tf.set_output_expression_axes("fixed_frame", [1.0, 0.0, 0.0, 0.0])
    return tf


def test_fast_path_leaves_on_any_change_and_reports_it(caplog):
    tf, out = moving_wrench(), np.empty(6)
    x = np.array([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
    tf.set_fixed_to_moving_frame_tf(np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]))
    assert tf.update(x, out)[0] is ReturnCode.OK
    assert tf._fast_out is out
    # a transform with a NaN: refused with the policy's code, logged once, and the fast path off
    with caplog.at_level(logging.INFO, logger="twin.transforms"):
        tf.set_fixed_to_moving_frame_tf(np.array([np.nan, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]))
        code, y = tf.update(x, out)
        assert code is ReturnCode.NonFatalError and not y.any()
        assert tf._fast_out is NOT_READY
        # a good transform again: back to OK (logged), the values of the new transform
        tf.set_fixed_to_moving_frame_tf(np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]))
        assert tf.update(x, out)[0] is ReturnCode.OK
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
    expected = out.copy()
    # rotation by pi about z: f = (-1, -2, 3); the compiled path from now on gives the same
    assert tf.update(x, out)[0] is ReturnCode.OK and tf._fast_out is out
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_allclose(out[:3], [-1.0, -2.0, 3.0], atol=1e-15)
    # a NaN input on the compiled path: the checked path refuses it
    assert tf.update(np.array([np.nan, 0, 0, 0, 0, 0]), out)[0] is ReturnCode.NonFatalError
    assert tf.update(x, out)[0] is ReturnCode.OK
    np.testing.assert_array_equal(out, expected)
    # an off-norm transform: normalised, Degraded (the compiled setter leaves it to the checked)
    tf.set_fixed_to_moving_frame_tf(np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.01]))
    assert tf.update(x, out)[0] is ReturnCode.Degraded
    np.testing.assert_allclose(out, expected, atol=1e-14)
    # a change of entries: the new geometry at once
    tf.set_fixed_to_moving_frame_tf(np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]))
    tf.update(x, out)
    tf.update(x, out)
    tf.set_output_reference_point("fixed_frame", [0.0, 0.0, 0.05])
    assert tf._fast_out is NOT_READY
    assert tf.update(x, out)[0] is ReturnCode.OK
    np.testing.assert_allclose(out[3:], -x[3:] * [1, 1, -1], atol=1e-15)  # r = 0: A t only


def body_pose() -> PoseTf:
    return PoseTf(
        TfConfig(
            input_ref_point=Translation("moving_frame", (0.0, 0.0, 0.0)),
            input_expr_axes=Rotation("fixed_frame", (1.0, 0.0, 0.0, 0.0)),
            output_ref_point=Translation("moving_frame", (0.0, 0.0, 0.1)),
            output_expr_axes=Rotation("fixed_frame", (0.5, 0.5, 0.5, 0.5)),
        )
    )


@pytest.mark.parametrize("cls", [WrenchTf, PoseTf])
def test_other_argument_types_take_the_checked_path(cls):
    size = cls.SIZE
    tf = moving_wrench() if cls is WrenchTf else body_pose()
    if cls is WrenchTf:
        tf.set_fixed_to_moving_frame_tf(np.array([0.1, 0.2, 0.3, 0.5, 0.5, 0.5, 0.5]))
        x = np.array([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
    else:
        x = np.array([0.1, 0.2, 0.3, 0.5, 0.5, 0.5, 0.5])
    out = np.empty(size)
    tf.update(x, out)
    expected = tf.update(x, out)[1].copy()
    assert tf._fast_out is out
    read_only = x.copy()
    read_only.flags.writeable = False
    strided = np.repeat(x, 2)[::2]
    for value in (read_only, strided, x.tolist()):
        assert tf.update(value, out)[0] is ReturnCode.OK
        np.testing.assert_array_equal(out, expected)
    assert tf.update(x.astype(np.float32), out)[0] is ReturnCode.OK  # float32: converted
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    ints = np.arange(size)  # an int64 array: converted, not read as float bits
    np.testing.assert_array_equal(tf.update(ints, out)[1], tf.update(ints.astype(float))[1])
    with pytest.raises(ValueError, match=f"expected {size} numbers"):
        tf.update(np.zeros(size + 1), out)
    with pytest.raises(ValueError, match=f"expected {size} numbers"):
        tf.update(np.zeros((1, size)), out)
    listed = [0.0] * size
    tf.update(x, listed)  # a list for out: written in place through the checked path
    np.testing.assert_array_equal(listed, expected)
    frozen = np.empty(size)
    frozen.flags.writeable = False
    tf.update(x, np.empty(size))
    assert tf._fast_out is not frozen


def test_batch_into_a_non_float64_out_and_wrong_tf_length():
    tf = moving_wrench()
    rng = np.random.default_rng(3)
    x, tfs = rng.normal(size=(10, 6)), _moving(rng, 10)
    expected = tf.update_batch(x, tfs)[1]
    out32 = np.empty((10, 6), dtype=np.float32)
    tf.update_batch(x, tfs, out=out32)
    np.testing.assert_allclose(out32, expected, rtol=1e-6)
    with pytest.raises(ValueError, match="expected 7 numbers"):
        tf.set_fixed_to_moving_frame_tf(np.zeros(6))
