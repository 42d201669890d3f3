"""TCP, base-frame and hand-eye estimators on synthetic data: exact on exact data, degenerate
data reported, bad input refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from twin.calibration.base import calibrate_base
from twin.calibration.handeye import hand_eye_fixed, hand_eye_wrist
from twin.calibration.lsq import solve
from twin.calibration.rigid import invert, rotation_angle
from twin.calibration.tcp import calibrate_tcp
from twin.spatial import quaternion as quat

vec3 = arrays(np.float64, 3, elements=st.floats(-0.3, 0.3))
rotvec3 = arrays(np.float64, 3, elements=st.floats(-2.0, 2.0))


def pose(rv, p) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = quat.to_matrix(quat.exp(np.asarray(rv, float)))
    out[:3, 3] = p
    return out


def random_poses(rng, k: int, spread: float = 1.0) -> np.ndarray:
    return np.array([pose(rng.normal(0, spread, 3), rng.normal(0, 0.3, 3)) for _ in range(k)])


@given(vec3, vec3, st.integers(0, 2**31))
def test_pivot_recovers_tip_and_point_exactly(tip, point, seed):
    rng = np.random.default_rng(seed)
    rots = np.array([quat.to_matrix(quat.exp(rng.normal(0, 0.5, 3))) for _ in range(6)])
    flange = np.tile(np.eye(4), (6, 1, 1))
    flange[:, :3, :3] = rots
    flange[:, :3, 3] = point - rots @ tip
    est = calibrate_tcp(flange)
    np.testing.assert_allclose(est.flange_p_tcp, tip, atol=1e-9)
    np.testing.assert_allclose(est.pivot, point, atol=1e-9)
    assert est.rms < 1e-9 and est.warning == ""


def test_pivot_about_one_axis_is_reported():
    tip, point = np.array([0.01, 0.0, 0.12]), np.array([0.4, 0.1, 0.2])
    rots = np.array([quat.to_matrix(quat.exp([0, 0, a])) for a in np.linspace(0, 2, 5)])
    flange = np.tile(np.eye(4), (5, 1, 1))
    flange[:, :3, :3] = rots
    flange[:, :3, 3] = point - rots @ tip
    est = calibrate_tcp(flange)
    assert "one axis" in est.warning and np.isinf(est.condition)
    assert est.rms < 1e-9  # it fits, but the tip along z is not determined
    with pytest.raises(ValueError, match="at least 4"):
        calibrate_tcp(flange[:3])


@given(rotvec3, vec3, st.integers(0, 2**31))
def test_rigid_fit_recovers_the_transform_exactly(rv, p, seed):
    rng = np.random.default_rng(seed)
    truth = pose(rv, p)
    base = rng.uniform(-0.5, 0.5, (8, 3))
    meas = base @ truth[:3, :3].T + truth[:3, 3]
    est = calibrate_base(base, meas)
    np.testing.assert_allclose(est.meas_T_base, truth, atol=1e-9)
    assert est.rms < 1e-9 and est.warning == ""


def test_collinear_points_are_reported():
    base = np.outer(np.linspace(0, 1, 5), [1.0, 2.0, 0.5])
    est = calibrate_base(base, base + 1.0)
    assert "one line" in est.warning
    with pytest.raises(ValueError, match="same K"):
        calibrate_base(base, base[:3])


@given(rotvec3, vec3, rotvec3, vec3, st.integers(0, 2**31))
def test_hand_eye_recovers_both_mounts_exactly(rx, px, rm, pm, seed):
    rng = np.random.default_rng(seed)
    x, other = pose(rx, px), pose(rm, pm)
    flange = random_poses(rng, 6)
    wrist_obs = invert(flange @ x) @ other  # camera on the flange at X, marker at other
    est = hand_eye_wrist(flange, wrist_obs)
    np.testing.assert_allclose(est.X, x, atol=1e-8)
    np.testing.assert_allclose(est.other, other, atol=1e-8)
    assert est.position_residuals.max() < 1e-8 and est.warning == ""
    fixed_obs = invert(other) @ flange @ x  # camera at other (base frame), marker at X on flange
    est = hand_eye_fixed(flange, fixed_obs)
    np.testing.assert_allclose(est.X, x, atol=1e-8)
    np.testing.assert_allclose(est.other, other, atol=1e-8)
    assert est.angle_residuals.max() < 1e-8


def test_hand_eye_with_rotations_about_one_axis_is_reported():
    x, marker = pose([0.1, 0.2, 0.3], [0.05, 0.0, 0.04]), pose([3.0, 0, 0], [0.4, 0, 0])
    flange = np.array([pose([0, 0, a], [0.3, 0.1 * a, 0.4]) for a in np.linspace(0, 1.5, 6)])
    est = hand_eye_wrist(flange, invert(flange @ x) @ marker)
    assert "one axis" in est.warning
    with pytest.raises(ValueError, match="at least 3"):
        hand_eye_wrist(flange[:2], flange[:2])


def test_least_squares_diagnostics():
    a = np.array([[1.0, 0.0], [0.0, 1e-3], [1.0, 1e-3]])
    fit = solve(a, a @ [2.0, 3.0])
    np.testing.assert_allclose(fit.x, [2.0, 3.0])
    assert fit.condition < 3.0  # column scaling: units do not make a design ill-conditioned
    rank_deficient = solve(np.array([[1.0, 2.0], [2.0, 4.0]]), np.ones(2))
    assert rank_deficient.degenerate and rank_deficient.rank == 1
    assert rotation_angle(np.eye(3)) == 0.0
