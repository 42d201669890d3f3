"""The single-state paths of the environment's per-step maths agree with the batched ones they
stand in for (``features.pose_error_tcp``, ``features.gravity_offset``, ``tasks.pose_errors``),
and ``core.TcpKinematics`` gives the model's FK and Jacobian of the state it is asked about."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.env import features
from twin.env.core import TcpKinematics, tcp_pose7
from twin.env.tasks import DEFAULT_GAINS, pose_errors
from twin.kinematics import ArmModel

ARM = ArmModel.default()
unit = st.floats(-1.0, 1.0, allow_nan=False)
vec3 = st.lists(st.floats(-1.5, 1.5, allow_nan=False), min_size=3, max_size=3).map(np.array)
quats = (
    st.lists(unit, min_size=4, max_size=4)
    .map(np.array)
    .filter(lambda q: np.linalg.norm(q) > 0.1)
    .map(lambda q: q / np.linalg.norm(q))
)
configs = st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6).map(
    lambda u: ARM.lower + np.array(u) * (ARM.upper - ARM.lower)
)


@settings(max_examples=200, deadline=None)
@given(p=vec3, q=quats, pt=vec3, qt=quats)
def test_one_pair_pose_error_tcp_equals_the_batched_one(p, q, pt, qt):
    one = features.pose_error_tcp(p, q, pt, qt)
    batch = features.pose_error_tcp(p[None], q[None], pt[None], qt[None])
    np.testing.assert_allclose(one[0], batch[0][0], atol=1e-12)
    np.testing.assert_allclose(one[1], batch[1][0], atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(p=vec3, q=quats, pt=vec3, qt=quats)
def test_one_pair_pose_errors_equal_the_batched_ones(p, q, pt, qt):
    a, d = np.concatenate((p, q)), np.concatenate((pt, qt))
    dp, ang = pose_errors(a, d)
    dp_b, ang_b = pose_errors(a[None], d[None])
    assert isinstance(dp, float) and isinstance(ang, float)
    assert dp == pytest.approx(float(dp_b[0]), abs=1e-12)
    assert ang == pytest.approx(float(ang_b[0]), abs=1e-9)
    assert 0.0 <= ang <= np.pi + 1e-12


@settings(max_examples=100, deadline=None)
@given(q=configs)
def test_one_configuration_gravity_offset_equals_the_batched_one(q):
    one = features.gravity_offset(ARM, q, DEFAULT_GAINS.kp)
    batch = features.gravity_offset(ARM, q[None], DEFAULT_GAINS.kp)
    np.testing.assert_allclose(one, batch, atol=1e-12)


def test_gravity_offset_at_a_singular_stretched_configuration():
    """Arm straight up (every link's centre of mass near the base axis): small, finite."""
    q = np.clip(np.zeros(6), ARM.lower, ARM.upper)
    one = features.gravity_offset(ARM, q, DEFAULT_GAINS.kp)
    batch = features.gravity_offset(ARM, q[None], DEFAULT_GAINS.kp)
    np.testing.assert_allclose(one, batch, atol=1e-12)
    assert np.all(np.isfinite(one))


@settings(max_examples=50, deadline=None)
@given(q=configs, q2=configs)
def test_tcp_kinematics_is_the_model_fk_and_jacobian_of_the_state_asked(q, q2):
    kinematics = TcpKinematics(ARM)
    for x in (q, q2, q):
        pose, jacobian = kinematics(x)
        np.testing.assert_allclose(pose, tcp_pose7(ARM, x), atol=1e-12)
        np.testing.assert_allclose(jacobian, ARM.jacobian(x), atol=1e-12)
        assert not pose.flags.writeable and not jacobian.flags.writeable
