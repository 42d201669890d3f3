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
``1, 1/2, 1/4, ... 1/32`` are tried, the largest free one kept, and the bracket between it and
the colliding one above it is narrowed to 1/64 of its width (linear way-points: ``REFINEMENTS``
bisection steps). The joint way-points of a path are searched together
(``joint_blend_searches``), in at most five checker batches a path: the largest blend of all
of them (usually free far from obstacles: one batch), the rest of the ladder of those where it
collides, then ``ROUNDS`` rounds that check ``PARTS - 1`` factors inside every bracket at once
(the bisection's eight or nine batches, at about 80 us of Python each, were most of a
single-corner query's blend time); every blend is checked with the certified intervals of
``curve.blends_free`` (a fifth of the fixed-spacing samples far from obstacles; blend search on
fixed-spacing samples was the largest stage of the stored shelf and cage tail queries). So the
reported radius is verified free, and the smallest radius found colliding above it (if any) is
reported too (``BlendSearch.colliding``): "the largest free radius" to within 1/128 of the
largest size (the ladder's brackets are at most half of it wide). Like the reference, a smaller non-zero
radius is not guaranteed free.

The returned path is the executed curve's check passed (``blend_radii``): the curve of every run
of joint way-points is built as execution builds it (``curve.build_curve``) and checked piece by
piece (``curve.pieces_free``: its straight remainders too, which are pieces of certified segments
but are checked on their own ends); a run with a blocked piece gets no blends (its way-points
become stops, the path the search certified).

Mixed way-points (a joint segment on one side, a linear one on the other) get ``BlendRadius(0,
0)``: the robot stops there. The last way-point always gets zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.planning.errors import PlanningInputError
from twin.planning.motion.curve import (
    MotionChecker,
    blends_free,
    build_curve,
    curve_free,
    pieces_free,
)
from twin.planning.motion.linear import CartesianPath, linear_motion, resolve_flange_T_tcp
from twin.planning.requests import BlendRadius, Movement, Waypoint

LADDER = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125)
#: ``_search`` (one linear way-point at a time): bisection steps of the bracket.
REFINEMENTS = 6
#: Joint way-points (``_narrow``): rounds that split every bracket into ``PARTS`` equal parts;
#: the same precision as ``REFINEMENTS`` bisections (4^3 = 2^6) in half the checker calls.
ROUNDS = 3
PARTS = 4


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

    corner, d_live_in, d_live_out = q[idx, 1], d_in[idx], d_out[idx]

    def free_many(which: np.ndarray, f: np.ndarray) -> np.ndarray:
        """Whether the blends of corners ``live[which]`` (B,) at factors ``f`` (B,) are free
        (``curve.blends_free``)."""
        e = (0.5 * f) * d_live_in[which]
        x = (0.5 * f) * d_live_out[which]
        c = corner[which]
        a = c - e[:, None] * u_in[which]
        b = c + x[:, None] * u_out[which]
        return blends_free(a, c, b, checker)

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
    corners: the largest blend of all of them checked in one call, the rest of the ladder of
    those where it collides in one more, then ``ROUNDS`` rounds that split every bracket into
    ``PARTS`` equal parts and check all the inner factors in one call.
    ``free_many(corners (B,), factors (B,)) -> free (B,)``: one call a step, for all
    corners."""
    ladder = np.array(LADDER)
    ok = np.zeros((count, len(ladder)), dtype=bool)
    ok[:, 0] = free_many(np.arange(count), np.ones(count))  # the largest first
    rest = np.flatnonzero(~ok[:, 0])
    if len(rest):  # the rest of the ladder of the corners where it collides
        which = np.repeat(rest, len(ladder) - 1)
        ok[rest, 1:] = free_many(which, np.tile(ladder[1:], len(rest))).reshape(len(rest), -1)
    k = np.where(ok.any(axis=1), np.argmax(ok, axis=1), len(ladder))  # the largest free one
    lo = np.where(k < len(ladder), ladder[np.minimum(k, len(ladder) - 1)], 0.0)
    hi = np.where(k > 0, ladder[np.maximum(k - 1, 0)], np.nan)  # nan: no colliding one above
    open_ = np.flatnonzero((lo > 0.0) & ~np.isnan(hi))
    inner = np.arange(1, PARTS) / PARTS
    for _ in range(ROUNDS if len(open_) else 0):
        f = lo[open_, None] + inner * (hi - lo)[open_, None]  # (O, PARTS - 1), ascending
        free = free_many(np.repeat(open_, PARTS - 1), f.ravel()).reshape(f.shape)
        top = np.where(free.any(axis=1), PARTS - 2 - np.argmax(free[:, ::-1], axis=1), -1)
        rows = np.arange(len(open_))
        new_lo = np.where(top >= 0, f[rows, np.maximum(top, 0)], lo[open_])
        hi[open_] = np.where(top < PARTS - 2, f[rows, np.minimum(top + 1, PARTS - 2)], hi[open_])
        lo[open_] = new_lo
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
    """The way-points with their ``blend_radius`` set to the largest verified free radius; every
    run of joint way-points whose executed curve has a blocked piece gets none (module doc)."""
    searches = blend_searches(q_start, waypoints, checker, model, flange_T_tcp)
    out = [
        w if s.radius == w.blend_radius else Waypoint(w.configuration, w.movement, s.radius)
        for w, s in zip(waypoints, searches)
    ]
    for lo, hi in _blocked_runs(q_start, out, checker):
        for i in range(lo, hi):
            w = out[i]
            out[i] = Waypoint(w.configuration, w.movement, BlendRadius())
    return out


def _blocked_runs(q_start: object, waypoints: list[Waypoint], checker: MotionChecker) -> list:
    """(lo, hi): the way-points ``lo .. hi - 1`` of each run of joint segments with a blend whose
    executed curve (``build_curve``, as ``execute.joint_curve`` builds it) has a blocked piece;
    the pieces of all runs checked in one ``pieces_free`` call."""
    q = [np.asarray(q_start, dtype=float)] + [w.configuration for w in waypoints]
    runs, pieces, owner = [], [], []
    i = 0
    while i < len(waypoints):
        if waypoints[i].movement is not Movement.JOINT:
            i += 1
            continue
        j = i
        while j < len(waypoints) and waypoints[j].movement is Movement.JOINT:
            j += 1
        radii = [waypoints[k].blend_radius for k in range(i, j - 1)]  # interior vertices
        if any(r.entry > 0.0 or r.exit > 0.0 for r in radii):
            entry = [0.0] + [r.entry for r in radii] + [0.0]
            exit_ = [0.0] + [r.exit for r in radii] + [0.0]
            curve = build_curve(np.array(q[i : j + 1]), entry, exit_)
            pieces.extend(curve.pieces)
            owner.extend([len(runs)] * len(curve.pieces))
            runs.append((i, j))
        i = j
    if not pieces:
        return []
    ok = pieces_free(pieces, checker)
    bad = set(np.asarray(owner)[~ok].tolist())
    return [r for k, r in enumerate(runs) if k in bad]
