"""The executed joint curve (curve.py) and its time parameterisation (timing.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.planning.errors import PlanningInputError
from twin.planning.motion.curve import Blend, Line, build_curve, curve_free, curve_samples
from twin.planning.motion.timing import time_parameterize

VMAX = np.array([1.571, 0.785, 1.571, 4.817, 2.409, 4.817])
AMAX = VMAX / 0.25
DT = 0.005
RTOL = 1e-7  # finite differences of the analytic trajectory: limits hold up to rounding


def check_limits(traj, dt=DT):
    """Commanded samples at the control rate: velocity and acceleration within the limits,
    analytic and by finite differences of the sampled positions and velocities."""
    t = traj.sample_times(dt)
    q, qd, qdd = traj.sample(t)
    assert np.all(np.abs(qd) <= VMAX * (1 + RTOL))
    assert np.all(np.abs(qdd) <= AMAX * (1 + RTOL))
    assert np.all(np.abs(np.diff(q, axis=0)) / dt <= VMAX * (1 + RTOL))
    assert np.all(np.abs(np.diff(qd, axis=0)) / dt <= AMAX * (1 + RTOL))
    assert np.all(np.abs(np.diff(q, 2, axis=0)) / dt**2 <= AMAX * (1 + 1e-6))
    return q, qd


def corner_path():
    return np.array(
        [
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [1.0, 0.5, 0.0, 0.0, 0.0, 0.0],
            [1.0, 1.5, 0.3, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.2, 0.0, 0.0],
        ]
    )


def test_blend_pieces_are_tangent_to_their_segments_and_pass_near_the_corner():
    p = corner_path()
    curve = build_curve(p, [0, 0.3, 0.2, 0], [0, 0.3, 0.4, 0])
    kinds = [type(x) for x in curve.pieces]
    assert kinds == [Line, Blend, Line, Blend, Line]
    b = curve.pieces[1]
    assert np.allclose(b.a, p[1] - 0.3 * (p[1] - p[0]) / np.linalg.norm(p[1] - p[0]))
    # Pieces join without gaps.
    for x, y in zip(curve.pieces, curve.pieces[1:]):
        end = x.end if isinstance(x, Line) else x.b
        start = y.start if isinstance(y, Line) else y.a
        assert np.allclose(end, start, atol=1e-12)
    # The blend's deviation from the corner is |a + b - 2c| / 4 at tau = 1/2.
    mid = b.at(np.array([0.5]))[0]
    assert np.linalg.norm(mid - b.c) == pytest.approx(b.deviation(), rel=1e-12)


def test_blends_longer_than_the_segment_are_refused():
    p = corner_path()
    length = np.linalg.norm(p[2] - p[1])
    with pytest.raises(PlanningInputError, match="exceed the segment length"):
        build_curve(p, [0, 0.1, 0.6 * length, 0], [0, 0.6 * length, 0.1, 0])
    with pytest.raises(PlanningInputError, match="finite distances"):
        build_curve(p, [0, -0.1, 0, 0], [0, 0.1, 0, 0])


def test_trajectory_starts_and_ends_at_rest_on_the_vertices_and_respects_the_limits():
    p = corner_path()
    traj = time_parameterize(build_curve(p, [0, 0.3, 0.2, 0], [0, 0.3, 0.4, 0]), VMAX, AMAX)
    q, qd = check_limits(traj)
    assert np.allclose(q[0], p[0]) and np.allclose(q[-1], p[-1])
    assert np.allclose(qd[0], 0.0) and np.allclose(qd[-1], 0.0)
    # Continuity of position and velocity at a fine resolution.
    t = np.linspace(0.0, traj.duration, 100_001)
    qf, qdf, _ = traj.sample(t)
    h = t[1] - t[0]
    assert np.max(np.abs(np.diff(qf, axis=0))) <= np.max(VMAX) * h * (1 + 1e-6)
    assert np.max(np.abs(np.diff(qdf, axis=0))) <= np.max(AMAX) * h * (1 + 1e-6)


def test_blending_is_faster_than_stopping_and_a_stop_passes_the_vertex_at_rest():
    p = corner_path()
    stop = time_parameterize(build_curve(p), VMAX, AMAX)
    blended = time_parameterize(build_curve(p, [0, 0.3, 0.2, 0], [0, 0.3, 0.2, 0]), VMAX, AMAX)
    assert blended.duration < stop.duration - 0.05
    # With stops the trajectory passes each vertex exactly, at rest.
    t = np.linspace(0.0, stop.duration, 20001)
    q, qd, _ = stop.sample(t)
    for vertex in p[1:-1]:
        k = np.argmin(np.linalg.norm(q - vertex, axis=1))
        assert np.linalg.norm(q[k] - vertex) < 1e-6
        assert np.linalg.norm(qd[k]) < 1e-3


def test_single_segment_is_a_trapezoid_with_the_textbook_duration():
    p = np.array([[0.0] * 6, [1.0, 0, 0, 0, 0, 0]])
    traj = time_parameterize(build_curve(p), VMAX, AMAX)
    v, a, d = VMAX[0], AMAX[0], 1.0
    assert traj.duration == pytest.approx(d / v + v / a, rel=1e-12)
    short = time_parameterize(build_curve(p * 0.1), VMAX, AMAX)  # triangle profile
    assert short.duration == pytest.approx(2 * np.sqrt(0.1 / a), rel=1e-12)


paths = st.lists(st.lists(st.floats(-2.0, 2.0), min_size=6, max_size=6), min_size=2, max_size=6)


@settings(max_examples=60)
@given(paths, st.floats(0.0, 1.0), st.floats(0.05, 1.0))
def test_random_blended_paths_respect_the_limits_on_the_samples(points, fraction, scale):
    p = np.array(points)
    steps = np.linalg.norm(np.diff(p, axis=0), axis=1)
    if np.any(steps < 1e-3):
        return
    d = np.zeros(len(p))
    d[1:-1] = fraction * 0.5 * np.minimum(steps[:-1], steps[1:])
    traj = time_parameterize(build_curve(p, d, d), VMAX * scale, AMAX * scale)
    t = traj.sample_times(DT)
    q, qd, qdd = traj.sample(t)
    assert np.all(np.abs(qd) <= VMAX * scale * (1 + RTOL))
    assert np.all(np.abs(qdd) <= AMAX * scale * (1 + RTOL))
    assert np.all(np.abs(np.diff(qd, axis=0)) / DT <= AMAX * scale * (1 + RTOL))
    assert np.allclose(q[-1], p[-1]) and np.allclose(q[0], p[0])


class BallChecker:
    """A joint-space obstacle: configurations within ``radius`` of ``center`` are blocked.
    ``steps``: the number of samples making the sample spacing at most ``margin`` rad."""

    def __init__(self, center, radius, margin=0.01):
        self.center, self.radius, self.margin = np.asarray(center, float), radius, margin

    def free(self, q):
        return np.linalg.norm(np.atleast_2d(q) - self.center, axis=1) > self.radius + self.margin

    def steps(self, qa, qb):
        d = np.linalg.norm(np.atleast_2d(qb) - np.atleast_2d(qa), axis=1)
        return np.maximum(1, np.ceil(d / (2 * self.margin)).astype(int))


def test_curve_samples_are_dense_enough_for_the_checker():
    p = corner_path()
    curve = build_curve(p, [0, 0.3, 0.2, 0], [0, 0.3, 0.2, 0])
    checker = BallChecker(p[1], 0.01)
    s = curve_samples(curve, checker)
    assert np.max(np.linalg.norm(np.diff(s, axis=0), axis=1)) <= 2 * checker.margin + 1e-12
    # The blend cuts the corner: blocked corner, free blend; the sharp path is blocked.
    assert curve_free(curve, checker)
    assert not curve_free(build_curve(p), checker)
