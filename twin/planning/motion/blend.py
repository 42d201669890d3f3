"""Collision-safe blend radii per way-point (``BlendRadius``, ``docs/reference/planner.md``).

At way-point ``i`` of a path (start, w_1, ..., w_n) the blend replaces the corner by the curve
that ``curve`` (joint segments) or ``linear.CartesianPath`` (linear segments) defines. Units, as
the reference documents: for a joint segment the distance is the joint-space L2 norm (rad) from
the way-point's configuration; for a linear segment it is the TCP distance (m) from the
way-point's TCP position. A blend never reaches beyond half of either neighbouring segment
(joint: half the joint-space distance; linear: half the TCP distance), so neighbouring blends
never overlap and each is checked on its own.

Search (per way-point): the blend is scaled by a factor ``f`` in (0, 1] of its largest allowed
size (entry ``f * half the incoming segment``, exit ``f * half the outgoing one``). A linear
way-point (``_search``) tries ``1, 1/2, 1/4, ... 1/32`` (``LADDER``), keeps the largest free one
and narrows the bracket above it by ``REFINEMENTS`` bisections. The joint way-points of a path
are searched together (``joint_blend_searches``, ``_narrow``), one checker batch a step: the
largest blend of all of them first (free at about five corners in six of the stored shelf and
cage queries: one batch); where it collides, the bracket [``w``, 1] is split into
``FIRST_PARTS`` equal parts, then every bracket wider than ``TOLERANCE`` into ``PARTS``. ``w``
comes free with the first batch: the corner's certified width for the joint box of its largest
blend (``curve.blend_checks``; the blends of one corner are scalings about it, so that width
certifies every factor up to it). Every blend is checked with the certified intervals of
``curve.blend_checks`` (its corner first, then coarse samples, then fine ones in the gaps). So
the reported radius is verified free, and the smallest radius found colliding above it (if any)
is reported too (``BlendSearch.colliding``): "the largest free radius" to within
``TOLERANCE`` (1/32) of the largest size, in at most three batches a path (the halving ladder
and six bisections before took five; blend radii were half the slowest cage queries' time).
Like the reference, a smaller non-zero radius is not guaranteed free.

The returned path is the executed curve's check passed (``blend_radii``): the curve of every run
of joint way-points is built as execution builds it (``curve.build_curve``) and its pieces
checked (``curve.pieces_free``) except the blends the search built and verified
(``BlendSearch.blend``: built with ``build_curve``'s float operations, compared float for float,
so the check would repeat the search's verdict): the straight remainders (pieces of certified
segments, but checked on their own ends) and any blend the search did not build. A run with a
blocked piece gets no blends (its way-points become stops, the path the search certified).

Mixed way-points (a joint segment on one side, a linear one on the other) get ``BlendRadius(0,
0)``: the robot stops there. The last way-point always gets zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from twin.planning.errors import PlanningInputError
from twin.planning.motion.curve import (
    Blend,
    Line,
    MotionChecker,
    blend_checks,
    build_curve,
    curve_free,
    pieces_free,
)
from twin.planning.motion.linear import CartesianPath, linear_motion, resolve_flange_T_tcp
from twin.planning.requests import BlendRadius, Movement, Waypoint

#: ``_search`` (one linear way-point at a time): the halving ladder, then bisection steps of
#: the bracket.
LADDER = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125)
REFINEMENTS = 6
#: Joint way-points (``_narrow``): the first split of a bracket, the later ones, and the width
#: (a factor of the largest size) below which a bracket is not split further.
FIRST_PARTS = 8
PARTS = 4
TOLERANCE = 1.0 / 32.0
#: Splits at most (8 then 4 parts: two reach ``TOLERANCE`` from any bracket).
MAX_ROUNDS = 4
#: A corner width ``w`` certifies the factors up to ``w / CORNER_ALLOWANCE`` (rounding: the
#: built blend's box is the scaled one to a few ulps; ``curve.CORNER_SURE`` then passes it).
CORNER_ALLOWANCE = 1.0 + 1e-6


@dataclass(frozen=True)
class BlendSearch:
    """Result at one way-point: ``radius`` (verified free), ``colliding`` (the smallest radius
    found colliding above it, or None when the largest allowed size is free), ``largest``
    (the largest allowed size: half the neighbouring segments), ``unit`` "rad" or "m";
    ``blend``: a joint way-point's blend at ``radius`` as built and verified (None for zero
    and linear ones)."""

    radius: BlendRadius
    colliding: BlendRadius | None
    largest: BlendRadius
    unit: str
    blend: Blend | None = None


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
    one ``checker`` batch per step of ``_narrow`` for all of them. Each search's ``blend`` is
    the reported blend as it was built and verified (``_blocked_runs`` does not check it
    again)."""
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
    corner, half_in, half_out = q[idx, 1], 0.5 * d_in[idx], 0.5 * d_out[idx]

    def built(which: np.ndarray, f: np.ndarray) -> tuple:
        """(a, c, b) (B, n) of the blends of corners ``live[which]`` at factors ``f`` (B,),
        with the float operations of ``curve.build_curve`` (entry ``f * half_in``)."""
        e, x, c = f * half_in[which], f * half_out[which], corner[which]
        return c - e[:, None] * u_in[which], c, c + x[:, None] * u_out[which]

    def free_many(which: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(free (B,), corner widths (B,)) of those blends (``curve.blend_checks``)."""
        return blend_checks(*built(which, f), checker)

    found = _narrow(free_many, len(live))
    good = np.array([g for g, _ in found])
    a, c, b = built(np.arange(len(live)), good)
    for k, ((g, bad), m) in enumerate(zip(found, live)):
        h_in, h_out = float(half_in[k]), float(half_out[k])
        verified = None
        if g > 0.0:
            verified = Blend(a[k], c[k], b[k], u_in[k], u_out[k], g * h_in, g * h_out)
        out[m] = BlendSearch(
            BlendRadius(g * h_in, g * h_out) if g > 0.0 else BlendRadius(),
            None if bad is None else BlendRadius(bad * h_in, bad * h_out),
            BlendRadius(h_in, h_out),
            "rad",
            verified,
        )
    return out  # type: ignore[return-value]


def _narrow(free_many, count: int) -> list[tuple[float, float | None]]:
    """(largest factor found free or 0, smallest found colliding above it or None) of ``count``
    corners: the largest blend of all of them in one call; where it collides, the bracket from
    the factor its corner width certifies (``curve.blend_checks``; 0 without) to 1 is split
    into ``FIRST_PARTS`` equal parts, then every bracket wider than ``TOLERANCE`` into
    ``PARTS``, all inner factors of all corners checked in one call a round.
    ``free_many(corners (B,), factors (B,)) -> (free (B,), corner widths (B,))``."""
    free, width = free_many(np.arange(count), np.ones(count))  # the largest first
    lo = np.where(free, 1.0, np.clip(width / CORNER_ALLOWANCE, 0.0, 1.0))
    hi = np.where(free, np.nan, 1.0)  # nan: no colliding one above
    parts = FIRST_PARTS
    for _ in range(MAX_ROUNDS):
        open_ = np.flatnonzero(hi - lo > TOLERANCE * (1.0 + 1e-9))  # nan compares False
        if not len(open_):
            break
        inner = np.arange(1, parts) / parts
        f = lo[open_, None] + inner * (hi - lo)[open_, None]  # (O, parts - 1), ascending
        ok = free_many(np.repeat(open_, parts - 1), f.ravel())[0].reshape(f.shape)
        top = np.where(ok.any(axis=1), parts - 2 - np.argmax(ok[:, ::-1], axis=1), -1)
        rows = np.arange(len(open_))
        new_lo = np.where(top >= 0, f[rows, np.maximum(top, 0)], lo[open_])
        hi[open_] = np.where(top < parts - 2, f[rows, np.minimum(top + 1, parts - 2)], hi[open_])
        lo[open_] = new_lo
        parts = PARTS
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
    verified = [s.blend for s in searches if s.blend is not None]
    for lo, hi in _blocked_runs(q_start, out, checker, verified):
        for i in range(lo, hi):
            w = out[i]
            out[i] = Waypoint(w.configuration, w.movement, BlendRadius())
    return out


def _blocked_runs(
    q_start: object,
    waypoints: list[Waypoint],
    checker: MotionChecker,
    verified: Sequence[Blend] = (),
) -> list:
    """(lo, hi): the way-points ``lo .. hi - 1`` of each run of joint segments with a blend whose
    executed curve (``build_curve``, as ``execute.joint_curve`` builds it) has a blocked piece;
    the pieces of all runs checked in one ``pieces_free`` call, except the blends equal (same
    floats) to one of ``verified`` (the blend search's, already checked: the same check would
    give the same verdict): the straight remainders, and any blend the search did not build."""
    known = {v.c.tobytes(): v for v in verified}
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
            new = [p for p in curve.pieces if not _same_blend(p, known)]
            pieces.extend(new)
            owner.extend([len(runs)] * len(new))
            runs.append((i, j))
        i = j
    if not pieces:
        return []
    ok = pieces_free(pieces, checker)
    bad = set(np.asarray(owner)[~ok].tolist())
    return [r for k, r in enumerate(runs) if k in bad]


def _same_blend(piece: Line | Blend, known: dict) -> bool:
    """Whether ``piece`` is a blend equal, float for float, to a verified one of ``known``."""
    if not isinstance(piece, Blend):
        return False
    v = known.get(piece.c.tobytes())
    return v is not None and np.array_equal(v.a, piece.a) and np.array_equal(v.b, piece.b)
