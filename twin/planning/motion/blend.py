"""Collision-safe blend radii per way-point (``BlendRadius``, ``docs/reference/planner.md``).

At way-point ``i`` of a path (start, w_1, ..., w_n) the blend replaces the corner by the curve
that ``curve`` (joint segments) or ``linear.CartesianPath`` (linear segments) defines. Units, as
the reference documents: for a joint segment the distance is the joint-space L2 norm (rad) from
the way-point's configuration; for a linear segment it is the TCP distance (m) from the
way-point's TCP position. A blend never reaches beyond half of either neighbouring segment
(joint: half the joint-space distance; linear: half the TCP distance), so neighbouring blends
never overlap and each is checked on its own.

Search (per way-point): the blend is scaled by a factor ``f`` in (0, 1] of its largest allowed
size (entry ``f * half the incoming segment``, exit ``f * half the outgoing one``); factors
``1, 1/2, 1/4, ... 1/32`` are tried from the largest, and between the first free one and the
colliding one above it ``REFINEMENTS`` bisection steps keep the largest factor found free. So
the reported radius is verified free, and the smallest radius found colliding above it (if any)
is reported too (``BlendSearch.colliding``): "the largest free radius" to within
``largest size / 2^(REFINEMENTS + 1)`` (1/128 of it). Like the reference, a smaller non-zero radius is not guaranteed free.

Mixed way-points (a joint segment on one side, a linear one on the other) get ``BlendRadius(0,
0)``: the robot stops there. The last way-point always gets zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.planning.errors import PlanningInputError
from twin.planning.motion.curve import Blend, MotionChecker, curve_free, piece_samples
from twin.planning.motion.linear import CartesianPath, linear_motion, resolve_flange_T_tcp
from twin.planning.requests import BlendRadius, Movement, Waypoint

LADDER = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125)
REFINEMENTS = 6


@dataclass(frozen=True)
class BlendSearch:
    """Result at one way-point: ``radius`` (verified free), ``colliding`` (the smallest radius
    found colliding above it, or None when the largest allowed size is free), ``largest``
    (the largest allowed size: half the neighbouring segments), ``unit`` "rad" or "m"."""

    radius: BlendRadius
    colliding: BlendRadius | None
    largest: BlendRadius
    unit: str


def _search(is_free, largest_in: float, largest_out: float, unit: str) -> BlendSearch:
    def radius(f: float) -> BlendRadius:
        return BlendRadius(f * largest_in, f * largest_out)

    largest = radius(1.0)
    if largest_in <= 0.0 or largest_out <= 0.0:
        return BlendSearch(BlendRadius(), None, largest, unit)
    good, bad = 0.0, None
    for f in LADDER:
        if is_free(f):
            good = f
            break
        bad = f
    if good > 0.0 and bad is not None:
        lo, hi = good, bad
        for _ in range(REFINEMENTS):
            mid = 0.5 * (lo + hi)
            if is_free(mid):
                lo = mid
            else:
                hi = mid
        good, bad = lo, hi
    return BlendSearch(
        radius(good) if good > 0.0 else BlendRadius(),
        None if bad is None else radius(bad),
        largest,
        unit,
    )


def joint_blend_search(
    q_prev: np.ndarray, q: np.ndarray, q_next: np.ndarray, checker: MotionChecker
) -> BlendSearch:
    """Largest collision-free blend at ``q`` between joint segments q_prev -> q -> q_next
    ((n,) rad each), in joint-space norm (rad)."""
    q_prev, q, q_next = (np.asarray(x, dtype=float) for x in (q_prev, q, q_next))
    d_in, d_out = np.linalg.norm(q - q_prev), np.linalg.norm(q_next - q)
    if d_in == 0.0 or d_out == 0.0:
        return BlendSearch(BlendRadius(), None, BlendRadius(), "rad")
    u_in, u_out = (q - q_prev) / d_in, (q_next - q) / d_out

    def is_free(f: float) -> bool:
        e, x = 0.5 * f * d_in, 0.5 * f * d_out
        blend = Blend(q - e * u_in, q, q + x * u_out, u_in, u_out, e, x)
        return bool(np.all(checker.free(piece_samples(blend, checker))))

    return _search(is_free, 0.5 * d_in, 0.5 * d_out, "rad")


def linear_blend_search(
    model,
    q_prev: np.ndarray,
    q: np.ndarray,
    q_next: np.ndarray,
    checker: MotionChecker,
    flange_T_tcp: np.ndarray | None = None,
) -> BlendSearch:
    """Largest collision-free blend at ``q`` between linear segments (TCP lines from the poses of
    q_prev, q, q_next), in metres of TCP distance. The blended Cartesian path from ``q_prev`` is
    solved by ``linear_motion`` and its executed joint curve checked; a radius whose motion is
    refused (singularity, limits) counts as colliding."""
    f_T_t = resolve_flange_T_tcp(model, flange_T_tcp)
    poses = [model.fk(np.asarray(x, dtype=float), "flange") @ f_T_t for x in (q_prev, q, q_next)]
    d_in = float(np.linalg.norm(poses[1][:3, 3] - poses[0][:3, 3]))
    d_out = float(np.linalg.norm(poses[2][:3, 3] - poses[1][:3, 3]))
    half = 0.5 * min(d_in, d_out)

    def is_free(f: float) -> bool:
        path = CartesianPath.through(poses, [f * half])
        motion = linear_motion(model, q_prev, path, f_T_t)
        return bool(motion) and curve_free(motion.curve(), checker)

    return _search(is_free, half, half, "m")


def blend_searches(
    q_start: object,
    waypoints: list[Waypoint],
    checker: MotionChecker,
    model=None,
    flange_T_tcp: np.ndarray | None = None,
) -> list[BlendSearch]:
    """``BlendSearch`` per way-point (the last one and mixed way-points: zero)."""
    q = [np.asarray(q_start, dtype=float)] + [w.configuration for w in waypoints]
    out = []
    for i, w in enumerate(waypoints):
        last = i == len(waypoints) - 1
        m_in, m_out = w.movement, None if last else waypoints[i + 1].movement
        if last or m_in is not m_out:
            unit = "m" if m_in is Movement.LINEAR else "rad"
            out.append(BlendSearch(BlendRadius(), None, BlendRadius(), unit))
        elif m_in is Movement.JOINT:
            out.append(joint_blend_search(q[i], q[i + 1], q[i + 2], checker))
        else:
            if model is None:
                raise PlanningInputError("linear way-points need the arm model to blend them")
            out.append(linear_blend_search(model, q[i], q[i + 1], q[i + 2], checker, flange_T_tcp))
    return out


def blend_radii(
    q_start: object,
    waypoints: list[Waypoint],
    checker: MotionChecker,
    model=None,
    flange_T_tcp: np.ndarray | None = None,
) -> list[Waypoint]:
    """The way-points with their ``blend_radius`` set to the largest verified free radius."""
    searches = blend_searches(q_start, waypoints, checker, model, flange_T_tcp)
    return [
        w if s.radius == w.blend_radius else Waypoint(w.configuration, w.movement, s.radius)
        for w, s in zip(waypoints, searches)
    ]
