"""The executed joint-space curve: straight segments joined by parabolic blends.

A path is a polyline of configurations ``P_0 .. P_n`` (n+1, d) rad. At an interior vertex ``P_i``
with blend distances ``(entry, exit)`` (joint-space L2 norm, rad) the corner is replaced by the
quadratic Bezier curve ``A -> B`` with control point ``P_i``::

    A = P_i - entry u_in,   B = P_i + exit u_out,   q(tau) = (1-tau)^2 A + 2 tau (1-tau) P_i + tau^2 B

(``u_in``, ``u_out`` the unit directions of the segments into and out of ``P_i``). Run with
``tau`` linear in time this is the constant-acceleration ("parabolic") blend of LSPB: its velocity
is continuous with both segments. The curve stays inside the triangle ``A, P_i, B``. A vertex
without a blend (``entry`` or ``exit`` zero) is a stop: the robot passes it at rest.

This module is the single definition of that curve: ``blend`` verifies it against the collision
model and ``timing`` time-parameterises exactly it, so what is checked is what is executed.

Collision verification (``curve_samples``): a checked sample stands for every point of the curve
within half a sample spacing; the spacing is chosen with the checker's own rule for straight
segments (``checker.steps``: no sphere moves more than twice its inflation between samples), fed
with the largest per-joint speed of the piece, so the guarantee of ``checker.segments_free`` holds
for blends too. ``curve_free`` gives the straight pieces to ``checker.segments_free`` itself where
the checker has it, so a path the planner certified segment by segment is verified the same way.

Blends with a checker that certifies intervals (``certified``: the collision checker's own
argument for segments, ``collision.checker``): no joint of a blend moves faster than its
``max_joint_speed`` in ``tau``, so a free sample certifies the same interval of ``tau`` as on a
segment with those joint steps. ``blends_free`` checks coarse samples first (one in
``COARSE_EVERY`` of the fine spacing, both ends included), then the gaps their intervals leave at
the fine spacing (``checker.steps``: each free fine sample certifies half a spacing either side);
far from obstacles a blend costs a fifth of its fine samples. The corner ``c`` is evaluated in
the same call with the joint box of the whole blend (``blend_checks``): a corner far enough
from obstacles certifies the blend alone. The blend search (``blend``) and
``curve_free`` call the same function on the same numbers, so what the planner accepted is what
the executed-curve check passes (``blend.blend_radii`` verifies the curve it returns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from twin.planning.errors import PlanningInputError

#: Vertices closer than this (rad, joint-space norm) are merged.
DUPLICATE_TOLERANCE = 1e-12
#: Blend distances below this (rad) make the vertex a stop instead.
MIN_BLEND = 1e-6
#: ``blends_free``: fine samples per coarse sample of the first round (the checker's coarse
#: segment samples are 0.1 m of motion apart, its fine ones 2 margin = 0.02 m by default).
COARSE_EVERY = 5
#: ``blend_checks``: the corner width that certifies a whole blend (1 and a rounding allowance:
#: the blend's ends lie on the box's faces).
CORNER_SURE = 1.0 + 1e-9


class MotionChecker(Protocol):
    """What the curve needs of a collision checker (``checker.CollisionChecker`` fits).

    ``free(q (N, d)) -> (N,) bool``; ``steps(qa (K, d), qb (K, d)) -> (K,) int``: samples needed
    on each straight segment ``qa -> qb`` so that checking them checks the whole segment.
    """

    def free(self, q: np.ndarray) -> np.ndarray: ...

    def steps(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class Line:
    """A straight piece ``start -> start + length u`` (start (d,) rad, u (d,) unit)."""

    start: np.ndarray
    u: np.ndarray
    length: float

    @property
    def end(self) -> np.ndarray:
        return self.start + self.length * self.u

    def at(self, tau: np.ndarray) -> np.ndarray:
        """Points (K, d) at parameters tau (K,) in [0, 1]."""
        return self.start + np.outer(tau * self.length, self.u)

    def max_joint_speed(self) -> np.ndarray:
        """Per-joint maximum |dq/dtau| (d,) rad."""
        return np.abs(self.u) * self.length


@dataclass(frozen=True)
class Blend:
    """A parabolic blend ``a -> b`` with control point ``c`` (each (d,) rad); ``u_in``, ``u_out``
    the unit directions of the neighbouring segments; ``entry = |c - a|``, ``exit = |b - c|``."""

    a: np.ndarray
    c: np.ndarray
    b: np.ndarray
    u_in: np.ndarray
    u_out: np.ndarray
    entry: float
    exit: float

    def at(self, tau: np.ndarray) -> np.ndarray:
        """Points (K, d) at parameters tau (K,) in [0, 1]."""
        t = np.asarray(tau, dtype=float)[:, None]
        return (1 - t) ** 2 * self.a + 2 * t * (1 - t) * self.c + t**2 * self.b

    def max_joint_speed(self) -> np.ndarray:
        """Per-joint maximum |dq/dtau| (d,) rad (the derivative is linear in tau)."""
        return np.maximum(np.abs(2 * (self.c - self.a)), np.abs(2 * (self.b - self.c)))

    def deviation(self) -> float:
        """Largest joint-space distance (rad) of the blend from the corner ``c``'s polyline: at
        tau = 1/2, ``|a + b - 2c| / 4``."""
        return float(np.linalg.norm(self.a + self.b - 2 * self.c) / 4.0)


@dataclass(frozen=True)
class JointCurve:
    """Pieces in order (``Line`` and ``Blend``), the vertices (n+1, d) rad and, per vertex, the
    blend distances used ``entry``/``exit`` (n+1,) rad (zero at the ends and at stops)."""

    pieces: tuple[Line | Blend, ...]
    vertices: np.ndarray
    entry: np.ndarray
    exit: np.ndarray

    @property
    def start(self) -> np.ndarray:
        return self.vertices[0]

    @property
    def end(self) -> np.ndarray:
        return self.vertices[-1]

    def dense(self, step: float) -> np.ndarray:
        """Points (K, d) along the whole curve, at most ``step`` rad (parameter spacing times the
        piece's largest speed norm) apart, both ends included."""
        out = [self.vertices[:1]]
        for p in self.pieces:
            span = float(np.linalg.norm(p.max_joint_speed()))
            k = max(1, int(np.ceil(span / step)))
            out.append(p.at(np.arange(1, k + 1) / k))
        return np.concatenate(out)


def build_curve(
    points: object, entry: object | None = None, exit: object | None = None
) -> JointCurve:
    """The curve through ``points`` (n+1, d) rad with blends ``entry``/``exit`` (n+1,) rad per
    vertex (ends ignored; a distance below ``MIN_BLEND`` on either side makes the vertex a stop).

    Repeated vertices are merged (the first one's distances are kept). Raises
    ``PlanningInputError`` when a segment is too short for the blends at its two ends
    (``exit_i + entry_{i+1} > |P_{i+1} - P_i|``) or a distance is negative or not finite.
    """
    p = np.asarray(points, dtype=float)
    if p.ndim != 2 or p.shape[0] < 1 or not np.all(np.isfinite(p)):
        raise PlanningInputError(
            f"path: expected finite configurations of shape (n+1, d), got {p.shape}"
        )
    d_in = _distances(entry, len(p), "entry")
    d_out = _distances(exit, len(p), "exit")
    steps = np.linalg.norm(np.diff(p, axis=0), axis=1)
    keep = np.concatenate(([True], steps > DUPLICATE_TOLERANCE))
    p, d_in, d_out = p[keep], d_in[keep], d_out[keep]
    n = len(p)
    d_in[[0, -1]] = d_out[[0, -1]] = 0.0
    stop = (d_in < MIN_BLEND) | (d_out < MIN_BLEND)
    d_in[stop] = d_out[stop] = 0.0
    if n == 1:
        return JointCurve((), p, d_in, d_out)
    seg = np.diff(p, axis=0)
    lengths = np.linalg.norm(seg, axis=1)
    dirs = seg / lengths[:, None]
    over = d_out[:-1] + d_in[1:] - lengths
    if np.any(over > 1e-12 * np.maximum(1.0, lengths)):
        i = int(np.argmax(over))
        raise PlanningInputError(
            f"blend distances {d_out[i]:.6g} (exit of vertex {i}) + {d_in[i + 1]:.6g} (entry of "
            f"vertex {i + 1}) exceed the segment length {lengths[i]:.6g} rad; expected at most "
            "the segment length (the reported radii never exceed half of it)"
        )
    # every piece's points in a few array operations (the same float operations row by row)
    starts = p[:-1] + d_out[:-1, None] * dirs
    blend_a = p[1:-1] - d_in[1:-1, None] * dirs[:-1]
    blend_b = p[1:-1] + d_out[1:-1, None] * dirs[1:]
    rest = (lengths - d_out[:-1] - d_in[1:]).tolist()
    entries, exits = d_in.tolist(), d_out.tolist()
    pieces: list[Line | Blend] = []
    for i in range(n - 1):
        length = max(0.0, rest[i])
        if length > DUPLICATE_TOLERANCE:
            pieces.append(Line(starts[i], dirs[i], length))
        if i + 1 < n - 1 and entries[i + 1] > 0.0:
            e, x = entries[i + 1], exits[i + 1]
            pieces.append(Blend(blend_a[i], p[i + 1], blend_b[i], dirs[i], dirs[i + 1], e, x))
    return JointCurve(tuple(pieces), p, d_in, d_out)


def _distances(values: object | None, n: int, what: str) -> np.ndarray:
    if values is None:
        return np.zeros(n)
    d = np.array(values, dtype=float).reshape(-1)
    if d.shape != (n,):
        raise PlanningInputError(
            f"blend {what}: expected one value per vertex ({n} values), got {d.shape}"
        )
    if not np.all(np.isfinite(d)) or np.any(d < 0.0):
        raise PlanningInputError(f"blend {what}: expected finite distances >= 0 rad, got {d}")
    return d


def piece_samples(piece: Line | Blend, checker: MotionChecker) -> np.ndarray:
    """Samples (K, d) of one piece (both ends included) whose check checks the piece."""
    speed = piece.max_joint_speed()
    steps = int(checker.steps(np.zeros((1, len(speed))), speed[None])[0])
    return piece.at(np.arange(steps + 1) / steps)


def curve_samples(curve: JointCurve, checker: MotionChecker) -> np.ndarray:
    """Samples (K, d) of the whole curve whose check checks the curve (see the module doc)."""
    parts = [piece_samples(p, checker) for p in curve.pieces]
    return np.concatenate(parts) if parts else curve.vertices[:1].copy()


def blends_free(a: np.ndarray, c: np.ndarray, b: np.ndarray, checker: MotionChecker) -> np.ndarray:
    """Whether the blends ``a -> b`` with control points ``c`` ((B, d) rad each, as ``Blend``)
    are free according to ``checker``: (B,) bool (``blend_checks``)."""
    return blend_checks(a, c, b, checker)[0]


def blend_checks(
    a: np.ndarray, c: np.ndarray, b: np.ndarray, checker: MotionChecker
) -> tuple[np.ndarray, np.ndarray]:
    """(free (B,) bool, corner width (B,)) of the blends ``a -> b`` with control points ``c``
    ((B, d) rad each). With ``certified`` on the checker: the corner ``c`` with the joint box
    ``max(|c - a|, |b - c|)`` of its blend (every point of the blend lies in that box about
    ``c``: ``q - c = -(1 - tau)^2 (c - a) + tau^2 (b - c)``), evaluated in the same call as the
    coarse samples; a corner width of at least ``CORNER_SURE`` certifies the whole blend, and
    the corner width ``w`` certifies the blend scaled about ``c`` by any factor up to ``w``
    (``blend``'s search reads it so). Other blends: the coarse samples with their certified
    intervals, then the gaps at the fine spacing (module doc). A compiled ``CollisionChecker``
    checks the blends the corners leave itself (``CollisionChecker.blends_free``: certified in
    bisection order with early exit). Without ``certified``: every fine sample
    (``piece_samples``), corner widths 0."""
    speed = np.maximum(np.abs(2.0 * (c - a)), np.abs(2.0 * (b - c)))  # (B, d) max |dq/dtau|
    ok = np.ones(len(a), dtype=bool)
    certified = getattr(checker, "certified", None)
    if certified is not None and getattr(checker, "compiled", False):
        free, width = certified(c, 0.5 * speed)
        corner = np.where(free, width, 0.0)
        rest = corner < CORNER_SURE
        if rest.any():
            ok[rest] = checker.blends_free(a[rest], c[rest], b[rest])
        return ok, corner
    fine = np.asarray(checker.steps(np.zeros_like(speed), speed), dtype=int)
    if certified is None:
        owner, tau = _grid(fine)
        ok[owner[~np.asarray(checker.free(_bezier(a, c, b, owner, tau)), dtype=bool)]] = False
        return ok, np.zeros(len(a))
    owner, tau = _grid(np.maximum(1, -(-fine // COARSE_EVERY)))
    free, width = certified(
        np.concatenate((c, _bezier(a, c, b, owner, tau))),
        np.concatenate((0.5 * speed, speed[owner])),
    )
    corner = np.where(free[: len(a)], width[: len(a)], 0.0)
    free, width = free[len(a) :], width[len(a) :]
    sure = corner >= CORNER_SURE
    ok[owner[~free]] = False
    ok |= sure
    lo, hi = tau[:-1] + width[:-1], tau[1:] - width[1:]
    gap = (owner[:-1] == owner[1:]) & (lo < hi) & ok[owner[:-1]] & ~sure[owner[:-1]]
    if gap.any():  # midpoints of equal parts at most one fine spacing long
        g_owner, lo, hi = owner[:-1][gap], lo[gap], hi[gap]
        which, k = _parts(np.ceil((hi - lo) * fine[g_owner]).astype(int))
        n = np.bincount(which)[which]
        s_tau = lo[which] + (k + 0.5) * (hi - lo)[which] / n
        s_owner = g_owner[which]
        ok[s_owner[~checker.free(_bezier(a, c, b, s_owner, s_tau))]] = False
    return ok, corner


def _grid(count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner (M,), tau (M,)): ``tau = k / count`` for k = 0 .. count of every piece."""
    owner, k = _parts(count + 1)
    return owner, k / count[owner]


def _parts(count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner (M,), index (M,)): ``count[i]`` (at least 1) consecutive indices 0, 1, ... of
    every i."""
    count = np.maximum(count, 1)
    owner = np.repeat(np.arange(len(count)), count)
    return owner, np.arange(len(owner)) - (np.cumsum(count) - count)[owner]


def _bezier(a, c, b, owner: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Points (M, d) of the blends ``owner`` (M,) at ``tau`` (M,) (``Blend.at``)."""
    t = tau[:, None]
    return (1 - t) ** 2 * a[owner] + 2 * t * (1 - t) * c[owner] + t**2 * b[owner]


def pieces_free(pieces: list[Line | Blend] | tuple, checker: MotionChecker) -> np.ndarray:
    """Whether each piece is free according to ``checker``: (P,) bool. Straight pieces go to the
    checker's own segment check where it has one (``segments_free``, as the planner certified
    them: its certified intervals need not agree with point checks at fixed samples near the
    margin, both being conservative), blends to ``blends_free``; the straight pieces of a
    checker without ``segments_free`` are checked at ``piece_samples``."""
    ok = np.ones(len(pieces), dtype=bool)
    segments_free = getattr(checker, "segments_free", None)
    lines = [i for i, p in enumerate(pieces) if segments_free and isinstance(p, Line)]
    blends = [i for i, p in enumerate(pieces) if isinstance(p, Blend)]
    sampled = [i for i, p in enumerate(pieces) if isinstance(p, Line) and not segments_free]
    if lines:
        ok[lines] = segments_free(
            np.array([pieces[i].start for i in lines]), np.array([pieces[i].end for i in lines])
        )
    if blends:
        a, c, b = (np.array([getattr(pieces[i], x) for i in blends]) for x in "acb")
        ok[blends] = blends_free(a, c, b, checker)
    for i in sampled:
        ok[i] = bool(np.all(checker.free(piece_samples(pieces[i], checker))))
    return ok


def curve_free(curve: JointCurve, checker: MotionChecker) -> bool:
    """Whether every point of the curve is free according to ``checker`` (``pieces_free``)."""
    if not curve.pieces:
        return bool(np.all(checker.free(curve.vertices[:1])))
    return bool(np.all(pieces_free(curve.pieces, checker)))
