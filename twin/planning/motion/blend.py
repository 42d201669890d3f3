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
``1, 1/2, 1/4, ... 1/32`` are tried, the largest free one kept, and between it and the colliding
one above it the bracket is narrowed by ``REFINEMENTS`` bisection steps. The joint way-points
of a path are searched together (``joint_blend_searches``): the ladders of all of them probed
in one checker batch (every ``PROBE_STRIDE``-th sample, so that the large blends that collide
cost a few samples), the largest factor that passed checked in full (usually one more batch),
then one batch per bisection step; the same radii as one way-point and one factor at a time, in
about 8 checker calls a path instead of up to 12 a way-point (on the stored shelf and cage
queries those calls were a third of the tail's time). So the reported radius is verified free, and the smallest radius found colliding
above it (if any) is reported too (``BlendSearch.colliding``): "the largest free radius" to
within ``largest size / 2^(REFINEMENTS + 1)`` (1/128 of it). Like the reference, a smaller
non-zero radius is not guaranteed free.

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
#: The ladder of joint way-points: one sample in this many (and the ends) checked first.
PROBE_STRIDE = 4


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
    return joint_blend_searches([(q_prev, q, q_next)], checker)[0]


def joint_blend_searches(corners: list[tuple], checker: MotionChecker) -> list[BlendSearch]:
    """``joint_blend_search`` of many corners ``(q_prev, q, q_next)`` ((n,) rad each) at once:
    one ``checker.free`` batch for the ladder of all of them and one per narrowing round."""
    q = np.array([[np.asarray(x, dtype=float) for x in c] for c in corners])  # (M, 3, n)
    if not len(q):
        return []
    seg_in, seg_out = q[:, 1] - q[:, 0], q[:, 2] - q[:, 1]
    d_in, d_out = np.linalg.norm(seg_in, axis=1), np.linalg.norm(seg_out, axis=1)
    out: list[BlendSearch | None] = [None] * len(q)
    live = []
    for m in range(len(q)):
        if d_in[m] == 0.0 or d_out[m] == 0.0:
            out[m] = BlendSearch(BlendRadius(), None, BlendRadius(), "rad")
        else:
            live.append(m)
    if not live:
        return out  # type: ignore[return-value]
    idx = np.array(live)
    u_in = seg_in[idx] / d_in[idx, None]
    u_out = seg_out[idx] / d_out[idx, None]

    def free_many(which: np.ndarray, f: np.ndarray, probe: bool) -> np.ndarray:
        """Whether the blends of corners ``live[which]`` (B,) at factors ``f`` (B,) are free;
        ``probe``: only whether their ends and every ``PROBE_STRIDE``-th sample are."""
        parts = []
        for w, fw in zip(which.tolist(), f.tolist()):
            m = live[w]
            e, x = 0.5 * fw * d_in[m], 0.5 * fw * d_out[m]
            c = q[m, 1]
            blend = Blend(c - e * u_in[w], c, c + x * u_out[w], u_in[w], u_out[w], e, x)
            parts.append(piece_samples(blend, checker))
        count = np.array([len(p) for p in parts])
        owner = np.repeat(np.arange(len(parts)), count)
        pts = np.concatenate(parts)
        ok = np.ones(len(parts), dtype=bool)
        if probe:
            k = np.arange(len(pts)) - (np.cumsum(count) - count)[owner]
            first = (k % PROBE_STRIDE == 0) | (k == count[owner] - 1)
            owner, pts = owner[first], pts[first]
        ok[owner[~np.asarray(checker.free(pts), dtype=bool)]] = False
        return ok

    found = _narrow(free_many, len(live))
    for (good, bad), m in zip(found, live):
        half_in, half_out = 0.5 * d_in[m], 0.5 * d_out[m]
        out[m] = BlendSearch(
            BlendRadius(good * half_in, good * half_out) if good > 0.0 else BlendRadius(),
            None if bad is None else BlendRadius(bad * half_in, bad * half_out),
            BlendRadius(half_in, half_out),
            "rad",
        )
    return out  # type: ignore[return-value]


def _narrow(free_many, count: int) -> list[tuple[float, float | None]]:
    """(largest factor found free or 0, smallest found colliding above it or None) of ``count``
    corners: the ladder of all probed (``free_many(..., probe=True)``), then of each corner its
    largest factor that passed checked in full, the next one where that collides, and so on;
    then ``REFINEMENTS`` bisection steps of every bracket. ``free_many(corners (B,), factors
    (B,), probe) -> free (B,)``: one call a step, for all corners."""
    ladder = np.array(LADDER)
    which = np.repeat(np.arange(count), len(ladder))
    ok = free_many(which, np.tile(ladder, count), True).reshape(count, len(ladder))
    lo, hi = np.zeros(count), np.full(count, np.nan)  # nan: no colliding factor above
    pending = np.arange(count)
    while len(pending):
        rows = ok[pending]
        k = np.where(rows.any(axis=1), np.argmax(rows, axis=1), len(ladder))
        tried = k < len(ladder)
        free = np.zeros(len(pending), dtype=bool)
        if tried.any():
            free[tried] = free_many(pending[tried], ladder[k[tried]], False)
        done = free | ~tried
        for m, km in zip(pending[done].tolist(), k[done].tolist()):
            lo[m] = ladder[km] if km < len(ladder) else 0.0
            hi[m] = np.nan if km == 0 else ladder[km - 1]
        ok[pending[~done], k[~done]] = False
        pending = pending[~done]
    open_ = np.flatnonzero((lo > 0.0) & ~np.isnan(hi))
    for _ in range(REFINEMENTS if len(open_) else 0):
        mid = 0.5 * (lo[open_] + hi[open_])
        free = free_many(open_, mid, False)
        lo[open_[free]] = mid[free]
        hi[open_[~free]] = mid[~free]
    return [(float(a), None if np.isnan(b) else float(b)) for a, b in zip(lo, hi)]


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
    out: list[BlendSearch | None] = []
    joint: list[int] = []
    for i, w in enumerate(waypoints):
        last = i == len(waypoints) - 1
        m_in, m_out = w.movement, None if last else waypoints[i + 1].movement
        if last or m_in is not m_out:
            unit = "m" if m_in is Movement.LINEAR else "rad"
            out.append(BlendSearch(BlendRadius(), None, BlendRadius(), unit))
        elif m_in is Movement.JOINT:
            out.append(None)  # below, all joint way-points together
            joint.append(i)
        else:
            if model is None:
                raise PlanningInputError("linear way-points need the arm model to blend them")
            out.append(linear_blend_search(model, q[i], q[i + 1], q[i + 2], checker, flange_T_tcp))
    searches = joint_blend_searches([(q[i], q[i + 1], q[i + 2]) for i in joint], checker)
    for i, s in zip(joint, searches):
        out[i] = s
    return out  # type: ignore[return-value]


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
