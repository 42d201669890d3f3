"""Blend radii (blend.py): the largest verified radius, half-segment cap, a constructed case where
a larger radius collides, and the reported blend verified with PyBullet's exact geometry."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from twin.planning import Obstacle, Planner, PlannerSettings
from twin.planning.motion import blend
from twin.planning.motion.blend import blend_radii, blend_searches, joint_blend_search
from twin.planning.motion.curve import build_curve, curve_free
from twin.planning.requests import BlendRadius, Movement, Waypoint

# Constructed case: the arm swings 2.9 rad about joint 1, then tilts 1.6 rad about joint 2. The
# straight segments stay clear of a ball beside the corner; cutting the corner (rotating while
# tilting) sweeps the forearm through it.
QA = np.array([2.9, 0.0, 0.6, 0.0, 0.0, 0.0])
QB = np.array([0.0, 0.0, 0.6, 0.0, 0.0, 0.0])
QC = np.array([0.0, 1.6, 0.6, 0.0, 0.0, 0.0])
BALL_CENTER, BALL_RADIUS = np.array([0.415, 0.155, 0.785]), 0.06


@pytest.fixture(scope="module")
def planner():
    p = Planner(PlannerSettings())
    p.set_obstacles([Obstacle.from_sphere("ball", BALL_CENTER, BALL_RADIUS)])
    return p


class ExactBall:
    """PyBullet (DIRECT): the arm's URDF collision geometry against the ball, exactly."""

    def __init__(self, model):
        self.cid = pb.connect(pb.DIRECT)
        self.arm = pb.loadURDF(str(model.urdf_path), useFixedBase=True, physicsClientId=self.cid)
        names = {
            pb.getJointInfo(self.arm, j, physicsClientId=self.cid)[1].decode(): j
            for j in range(pb.getNumJoints(self.arm, physicsClientId=self.cid))
        }
        self.joints = [names[n] for n in model.joint_names]
        shape = pb.createCollisionShape(
            pb.GEOM_SPHERE, radius=BALL_RADIUS, physicsClientId=self.cid
        )
        self.ball = pb.createMultiBody(
            0, shape, basePosition=BALL_CENTER.tolist(), physicsClientId=self.cid
        )

    def colliding(self, q: np.ndarray) -> np.ndarray:
        out = np.zeros(len(q), dtype=bool)
        for k, qk in enumerate(q):
            for j, x in zip(self.joints, qk):
                pb.resetJointState(self.arm, j, float(x), physicsClientId=self.cid)
            pts = pb.getClosestPoints(self.arm, self.ball, 0.0, physicsClientId=self.cid)
            out[k] = any(c[8] < 0.0 for c in pts)
        return out

    def close(self):
        pb.disconnect(self.cid)


def test_constructed_corner_reports_a_verified_radius_and_a_larger_one_collides(planner):
    checker = planner.checker
    # The way-points and both straight segments are free: a sharp corner is safe.
    assert checker.segment_free(QA, QB, include_start=True) and checker.segment_free(QB, QC)
    s = joint_blend_search(QA, QB, QC, checker)
    half_in, half_out = 0.5 * np.linalg.norm(QB - QA), 0.5 * np.linalg.norm(QC - QB)
    assert s.largest == BlendRadius(pytest.approx(half_in), pytest.approx(half_out))
    assert s.unit == "rad"
    assert 0.0 < s.radius.entry < half_in and 0.0 < s.radius.exit < half_out
    assert s.radius.entry / half_in == pytest.approx(s.radius.exit / half_out)
    reported = build_curve([QA, QB, QC], [0, s.radius.entry, 0], [0, s.radius.exit, 0])
    larger = build_curve([QA, QB, QC], [0, s.colliding.entry, 0], [0, s.colliding.exit, 0])
    assert curve_free(reported, checker)
    assert not curve_free(larger, checker)
    # Bracketed to 1/32 of the largest size (``blend.TOLERANCE``).
    assert blend.TOLERANCE == 1.0 / 32.0
    assert 0.0 < s.colliding.entry - s.radius.entry <= half_in / 32.0 + 1e-12
    # Exact geometry: the reported blend is free, the largest allowed blend hits the ball.
    exact = ExactBall(planner.model)
    try:
        assert not np.any(exact.colliding(reported.dense(0.005)))
        full = build_curve([QA, QB, QC], [0, half_in, 0], [0, half_out, 0])
        assert np.any(exact.colliding(full.dense(0.005)))
        assert not np.any(exact.colliding(build_curve([QA, QB, QC]).dense(0.005)))
    finally:
        exact.close()


def test_free_corner_gets_half_the_neighbouring_segments(planner):
    q0 = np.array(planner.model.home_q)
    w = [
        Waypoint(q0 + [0.4, 0.0, 0.0, 0.0, 0.0, 0.0]),
        Waypoint(q0 + [0.4, 0.0, 0.0, 0.0, 0.0, 0.6]),
        Waypoint(q0 + [0.4, 0.0, 0.0, 0.5, 0.0, 0.6]),
    ]
    out = blend_radii(q0, w, planner.checker)
    assert out[0].blend_radius == BlendRadius(pytest.approx(0.2), pytest.approx(0.3))
    assert out[1].blend_radius == BlendRadius(pytest.approx(0.3), pytest.approx(0.25))
    assert out[2].blend_radius == BlendRadius(0.0, 0.0)  # the last way-point


def test_mixed_waypoints_get_zero_and_linear_ones_get_metres(planner):
    model = planner.model
    q0 = np.array(model.home_q)
    t0 = model.fk(q0)
    poses = [t0.copy() for _ in range(2)]
    poses[0][:3, 3] += [0.0, 0.1, 0.0]
    poses[1][:3, 3] += [0.08, 0.1, 0.0]
    q1, q2 = model.ik(poses[0], q0), model.ik(poses[1], q0)
    w = [
        Waypoint(q1, Movement.LINEAR),
        Waypoint(q2, Movement.LINEAR),
        Waypoint(q0, Movement.JOINT),
    ]
    s = blend_searches(q0, w, planner.checker, model)
    assert s[0].unit == "m"
    # Free space: the full half of the shorter line (0.08 m / 2).
    assert s[0].radius == BlendRadius(pytest.approx(0.04), pytest.approx(0.04))
    assert s[1].radius == BlendRadius(0.0, 0.0)  # linear in, joint out: a stop
