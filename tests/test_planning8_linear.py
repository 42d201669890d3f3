"""Linear motions (linear.py): straight within 0.5 mm by FK at fine resolution, posture kept,
refused at a singularity, a joint limit or out of reach."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.kinematics import ArmModel
from twin.planning.errors import PlanningInputError
from twin.planning.motion.linear import (
    MIN_SINGULAR_VALUE,
    CartesianPath,
    LinearFailure,
    linear_motion,
    linear_to,
)

TOL = 0.5e-3


@pytest.fixture(scope="module")
def model():
    return ArmModel.default()


def executed_tcp(model, motion, step=1e-4, flange_T_tcp=None):
    """TCP positions (K, 3) along the executed joint curve, every ``step`` rad."""
    q = motion.curve().dense(step)
    t = model.fk(q) if flange_T_tcp is None else model.fk(q, "flange") @ flange_T_tcp
    return q, t[:, :3, 3]


def line_distance(points, a, b):
    ab = b - a
    t = np.clip((points - a) @ ab / max(ab @ ab, 1e-30), 0.0, 1.0)
    return np.linalg.norm(points - (a + t[:, None] * ab), axis=1)


def test_line_is_straight_within_half_a_millimetre_and_keeps_the_posture(model):
    q0 = np.array(model.home_q)
    start = model.fk(q0)
    goal = start.copy()
    goal[:3, 3] += [0.1, 0.15, -0.05]
    motion = linear_to(model, q0, goal)
    assert motion, motion.reason
    q, p = executed_tcp(model, motion)
    assert np.max(line_distance(p, start[:3, 3], goal[:3, 3])) < TOL
    assert motion.max_deviation_m < TOL
    assert np.allclose(motion.configurations[0], q0)
    assert np.allclose(model.fk(motion.configurations[-1]), goal, atol=1e-9)
    assert np.all(model.posture(q) == model.posture(q0))
    assert motion.min_singular_value >= MIN_SINGULAR_VALUE


def test_line_with_rotation_and_a_custom_tcp(model):
    q0 = np.array(model.home_q) + [0.2, 0.1, -0.1, 0.3, 0.2, 0.1]
    f_T_t = np.eye(4)
    f_T_t[:3, 3] = [0.0, 0.03, 0.12]
    start = model.fk(q0, "flange") @ f_T_t
    turn = np.array([[np.cos(0.4), -np.sin(0.4), 0], [np.sin(0.4), np.cos(0.4), 0], [0, 0, 1]])
    goal = start.copy()
    goal[:3, :3] = start[:3, :3] @ turn
    goal[:3, 3] += [-0.08, 0.05, 0.1]
    motion = linear_to(model, q0, goal, f_T_t)
    assert motion, motion.reason
    _, p = executed_tcp(model, motion, flange_T_tcp=f_T_t)
    assert np.max(line_distance(p, start[:3, 3], goal[:3, 3])) < TOL
    end = model.fk(motion.configurations[-1], "flange") @ f_T_t
    assert np.allclose(end, goal, atol=1e-9)


def test_a_line_through_the_wrist_singularity_is_refused(model):
    q = np.array(model.home_q)
    q[3], q[4], q[5] = -1.4, 0.3, 1.0
    flipped = q.copy()
    flipped[4] = -0.3  # the same arm, wrist bent the other way: the line passes q5 = 0
    motion = linear_to(model, q, model.fk(flipped))
    assert motion.error is LinearFailure.SINGULARITY
    assert not motion and len(motion.configurations) == 0


def test_a_line_close_to_the_wrist_singularity_is_refused_by_the_threshold(model):
    q = np.array(model.home_q)
    q[4] = 0.1
    near = q.copy()
    near[4] = 0.05  # sigma_min about 0.0125 < 0.02
    motion = linear_to(model, q, model.fk(near))
    assert motion.error is LinearFailure.SINGULARITY
    assert "singular value" in motion.reason


def test_joint_limit_and_reach_are_refused_with_their_reason(model):
    q0 = np.array(model.home_q)
    up = model.fk(q0)
    up[:3, 3] += [0.0, 0.0, 0.5]
    assert linear_to(model, q0, up).error is LinearFailure.JOINT_LIMIT
    far = model.fk(q0)
    far[:3, 3] += [0.6, 0.0, 0.0]
    assert linear_to(model, q0, far).error is LinearFailure.UNREACHABLE


def test_path_must_start_at_the_start_configuration(model):
    q0 = np.array(model.home_q)
    other = model.fk(q0 + 0.1)
    with pytest.raises(PlanningInputError, match="away from the TCP pose"):
        linear_motion(model, q0, CartesianPath.line(other, model.fk(q0)))


def test_blended_cartesian_path_stays_near_its_lines(model):
    q0 = np.array(model.home_q)
    t0 = model.fk(q0)
    t1, t2 = t0.copy(), t0.copy()
    t1[:3, 3] += [0.1, 0.0, 0.0]
    t2[:3, 3] += [0.1, 0.1, 0.0]
    path = CartesianPath.through([t0, t1, t2], [0.03])
    motion = linear_motion(model, q0, path)
    assert motion, motion.reason
    _, p = executed_tcp(model, motion)
    assert np.max(path.distance(p)) < TOL
    # The blend cuts the corner by about r / 4 (quadratic Bezier at tau = 1/2): 7.5 mm.
    corner = np.min(np.linalg.norm(p - t1[:3, 3], axis=1))
    assert corner == pytest.approx(0.03 * np.sqrt(2) / 4, abs=1e-3)
    with pytest.raises(PlanningInputError, match="exceeds half"):
        CartesianPath.through([t0, t1, t2], [0.06])


@settings(max_examples=15)
@given(st.lists(st.floats(-0.12, 0.12), min_size=3, max_size=3))
def test_random_lines_are_straight_or_refused_with_a_reason(offset):
    model = ArmModel.default()
    q0 = np.array(model.home_q)
    start = model.fk(q0)
    goal = start.copy()
    goal[:3, 3] += offset
    motion = linear_to(model, q0, goal)
    if not motion:
        assert motion.error in LinearFailure and motion.reason
        return
    _, p = executed_tcp(model, motion, step=2e-4)
    assert np.max(line_distance(p, start[:3, 3], goal[:3, 3])) < TOL
