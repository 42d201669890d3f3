"""Batched, conservative validity checks of configurations and straight joint-space segments.

A configuration is free when it lies inside the joint limits, every robot sphere inflated by
``margin`` keeps clear of the obstacles (distance-field lower bound) and every sphere pair of the
self-collision matrix keeps a gap of at least ``margin``. Spheres cover the true geometry and the
field never over-estimates a distance, so "free" is never wrong for a configuration.

Segments ``q(t) = qa + t (qb - qa)``, t in [0, 1]: along a segment sphere ``s`` moves at most
``T_s = sum_j w_sj |dq_j|`` (Lipschitz weights of ``robot_model``), so a sample at ``t_i`` whose
sphere keeps a clearance ``c_s`` from the obstacles stays clear for ``|t - t_i| <= c_s / T_s``.
For a self-collision pair (a on group ``ga`` <= b's group ``gb``) only the joints ``ga + 1 ..
gb`` move b relative to a's frame, each at most ``w_bj |dq_j|`` (``w_bj`` bounds b's distance from
joint j's axis in every configuration), so their gap ``g`` shrinks by at most
``sum_{ga < j <= gb} w_bj |dq_j| |t - t_i|`` (<= ``T_b``; joint ``ga + 1``'s term scaled by
``min(1, d / (r_a + r_b))`` with ``d`` a's distance from its axis: ``kernel._pair_weights``). Each
free sample thus *certifies* an
interval of t (the minimum over spheres and pairs; ``kernel.SphereKernel.evaluate``).
``segments_free`` checks segments in two batched rounds: coarse samples (``COARSE_SPACING`` of
motion apart, both ends included; the ends and one in ``_PROBE_STRIDE`` first, the others only
on segments those did not block), then, in the gaps their certified intervals leave, samples
``2 margin / D`` apart (``D``: the largest ``T`` of the spheres): every free sample has all
clearances >= ``margin`` and so certifies at least ``margin / D`` either side, which closes every
gap. A segment is free when its samples are free and their intervals cover [0, 1]. A single
segment (the common start-to-goal check) takes the same two rounds with fewer numpy calls
(``_segment``). ``free_prefixes`` (RRT-Connect's *connect*) takes the same two rounds and keeps each segment up
to its last free sample before the first blocked one (the gaps before it are all filled).

The batched work (forward kinematics of every sphere, field lookups, sphere pairs) is done by
``kernel.SphereKernel``, built when the checker is made or refreshed (it depends on the robot
model and its attachments, not on the obstacles: the field is updated in place).

With numba installed (``_compiled``; ``TWIN_PLANNING_COMPILED=0`` turns it off) the same
verdicts and certified intervals are computed one configuration at a time with early exit
(about 2-4 us a configuration on VAMP's UR5 in its cage, against 16 us in small numpy
batches), and segments are checked inside one call each: both ends, then the gaps their
intervals leave, split at their midpoints (coarse to fine, as VAMP orders its samples) until
covered or blocked; ``free_prefixes`` marches forward one certified half width at a time;
``blends_free`` checks the blends of ``motion.curve`` the same way (compiled only). The two
schemes sample differently (both conservative), so a segment near the margin can be free
in one and blocked in the other. ``MotionChecker`` is the interface the search uses; the
benchmarks' PyBullet baseline implements it too.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from types import SimpleNamespace

import numpy as np

from twin.planning.collision import _compiled
from twin.planning.collision.field import DistanceField
from twin.planning.collision.kernel import SphereKernel
from twin.planning.collision.robot_model import CompiledSpheres, RobotSpheres

#: Motion (m) between the coarse samples of a segment's first round.
COARSE_SPACING = 0.1
#: Coarse samples per round of ``free_prefixes`` (in order along the segments).
_PREFIX_ROUNDS = (8, 24, 1 << 62)
#: ``segments_free``: coarse samples checked first (with the ends), one in this many.
_PROBE_STRIDE = 4


class MotionChecker(ABC):
    """Validity of configurations (N, n) rad and straight joint-space segments inside the joint
    box ``lower``, ``upper`` (n,) rad, as the search uses it; ``checked`` counts the
    configurations checked. Subclasses give ``_free_inside``, ``_segments``, ``free_prefixes``
    and ``steps``: ``CollisionChecker`` (the planner's sphere model) and the PyBullet baseline
    of the benchmarks."""

    lower: np.ndarray
    upper: np.ndarray
    checked: int

    @property
    def compiled(self) -> bool:
        """Whether ``rrt_chunk`` (the compiled search) is available."""
        return False

    def rrt_chunk(self, nodes, parent, radius, size, state, samples, step, domain) -> None:
        raise NotImplementedError(f"{type(self).__name__} has no compiled search")

    def within_limits(self, q: np.ndarray) -> np.ndarray:
        """True (N,) where q (N, n) lies inside the joint limits."""
        if len(q) == 1:  # one configuration: Python floats (fewer numpy calls)
            x, lo, hi = q[0].tolist(), self.lower.tolist(), self.upper.tolist()
            return np.array([all(a <= v <= b for a, v, b in zip(lo, x, hi))])
        inside = q >= self.lower
        inside &= q <= self.upper
        return inside.all(axis=-1)

    def free(self, q: np.ndarray) -> np.ndarray:
        """True (N,) where configurations q (N, n) rad are collision-free and inside the limits."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        ok = self.within_limits(q)
        if np.all(ok):
            return self._free_inside(q)
        idx = np.flatnonzero(ok)
        if len(idx):
            ok[idx] = self._free_inside(q[idx])
        return ok

    @abstractmethod
    def _free_inside(self, q: np.ndarray) -> np.ndarray:
        """``free`` for configurations (N, n) known to be inside the limits."""

    @abstractmethod
    def _segments(
        self, qa: np.ndarray, qb: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(segment free (K,), start free (K,), end free (K,)) of segments qa -> qb (K, n); all
        False where an end lies outside the limits."""

    @abstractmethod
    def free_prefixes(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        """Fractions (K,) t in [0, 1] such that qa -> qa + t (qb - qa) (K, n) is free (qa free;
        1.0: the whole segment; 0.0 when qb lies outside the limits)."""

    @abstractmethod
    def steps(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        """Steps (K,) >= 1 a segment qa -> qb (K, n) is checked in at the finest."""

    def star(self, start: np.ndarray, goals: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
        """The start, the goals and the straight segments to them, checked together (the
        common easy query costs two batched calls): (start free, goals free (G,), segments
        free (G,))."""
        if len(goals) == 0 or not self.within_limits(start[None])[0]:
            none = np.zeros(len(goals), dtype=bool)
            return bool(self.free(start[None])[0]), none, none
        qa = start[None] if len(goals) == 1 else np.repeat(start[None], len(goals), axis=0)
        free, start_ok, end_ok = self._segments(qa, goals)
        return bool(start_ok[0]), end_ok, free

    def segments_free(
        self, qa: np.ndarray, qb: np.ndarray, include_start: bool = True
    ) -> np.ndarray:
        """True (K,) where the straight segments qa[k] -> qb[k] (K, n) rad are free, both ends
        included; ``include_start`` is accepted for compatibility: the start is always checked
        (its certified interval is needed)."""
        del include_start
        return self._segments(np.atleast_2d(qa), np.atleast_2d(qb))[0]

    def segment_free(self, qa: np.ndarray, qb: np.ndarray, include_start: bool = True) -> bool:
        """Whether the straight segment qa -> qb (n,) rad is free (both ends included)."""
        return bool(self.segments_free(qa[None], qb[None], include_start)[0])

    def free_prefix(self, qa: np.ndarray, qb: np.ndarray) -> float:
        """Fraction t in [0, 1] such that qa -> qa + t (qb - qa) is free (qa assumed free):
        the last checked step before the first blocked one (1.0 when the segment is free)."""
        return float(self.free_prefixes(qa[None], qb[None])[0])


class CollisionChecker(MotionChecker):
    """``MotionChecker`` on the robot's sphere model and a distance field (module doc)."""

    def __init__(
        self,
        robot: RobotSpheres,
        field: DistanceField,
        margin: float,
        lower: np.ndarray,
        upper: np.ndarray,
    ) -> None:
        self.robot = robot
        self.field = field
        self.margin = float(margin)
        self.lower = np.ascontiguousarray(lower, dtype=float)
        self.upper = np.ascontiguousarray(upper, dtype=float)
        self.checked = 0  # configurations checked since construction (or reset)
        self._limits = (self.lower.tolist(), self.upper.tolist())
        self._no_dq = np.zeros((0, len(self.lower)))
        self._steps: dict[int, np.ndarray] = {}  # t = 0, 1/n, ..., 1 of the first round
        self._compiled: CompiledSpheres | None = None
        self._spheres()  # built now: the first query should not pay for it

    def refresh(self) -> None:
        """Re-read the robot's spheres (after a tool or carried object changed)."""
        self._compiled = None
        self._spheres()

    def _spheres(self) -> CompiledSpheres:
        if self._compiled is None:
            c = self.robot.compiled()
            self._compiled = c
            self._weights_t = np.ascontiguousarray(c.weights.T)  # (n, S)
            self._kernel = SphereKernel(c, self.robot.chain, self.field, self.margin)
            self._kernel.set_reach(self.robot.origin_1(), self.robot.reach())
            self._fast = None
            fast = _compiled.kernels()
            if fast is not None:  # compiled checks (``_compiled``), bound to this model
                self._fast = SimpleNamespace(
                    evaluate=_compiled.Entry(fast.evaluate),
                    segments=_compiled.Entry(fast.segments),
                    prefixes=_compiled.Entry(fast.prefixes),
                    blends=_compiled.Entry(fast.blends),
                    rrt_chunk=_compiled.Entry(fast.rrt_chunk),
                )
                self._counter = np.zeros(1, dtype=np.int64)
                self._warm_up()
        return self._compiled

    def _warm_up(self) -> None:
        """One call of every compiled entry (machine code loaded, or built on a first run, now:
        not inside a query's time limit); counts nothing."""
        n = len(self.lower)
        q = _c(self.lower[None])
        lo, hi = _c(self.lower), _c(self.upper)
        model = self._kernel.compiled_model()
        self._fast.evaluate(
            q, self._no_dq, False, model, np.empty(1, np.uint8), np.empty(1), self._counter
        )
        self._fast.segments(q, q, lo, hi, model, np.empty((1, 3), np.uint8), self._counter)
        self._fast.prefixes(q, q, lo, hi, model, np.empty(1), self._counter)
        self._fast.blends(q, q, q, lo, hi, model, np.empty(1, np.uint8), self._counter)
        self._fast.rrt_chunk(
            np.zeros((2, 1, n)),
            np.zeros((2, 1), np.int64),
            np.zeros((2, 1)),
            np.ones(2, np.int64),
            np.zeros(5, np.int64),
            np.zeros((0, 1, n)),
            lo,
            hi,
            1.0,
            np.ones(4),
            model,
            self._counter,
        )
        self._counter[0] = 0

    @property
    def compiled(self) -> bool:
        """Whether the checks (and ``rrt_chunk``) run compiled (``_compiled``; numba)."""
        self._spheres()
        return self._fast is not None

    def rrt_chunk(self, nodes, parent, radius, size, state, samples, step, domain) -> None:
        """Iterations of the compiled RRT-Connect (``_compiled.rrt_chunk``: the arrays' layout),
        one per row of ``samples``; only when ``compiled``."""
        self._fast.rrt_chunk(
            nodes,
            parent,
            radius,
            size,
            state,
            samples,
            _c(self.lower),
            _c(self.upper),
            float(step),
            domain,
            self._kernel.compiled_model(),
            self._counter,
        )
        self._count()

    def blends_free(self, a: np.ndarray, c: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether the quadratic Beziers ``(1 - s)^2 a + 2 s (1 - s) c + s^2 b``, s in [0, 1]
        (control points a, c, b (B, n) rad: a blend of ``motion.curve``), are free: (B,) bool;
        only when ``compiled``. Certified as segments are (module doc), in bisection order with
        early exit: the joints move at most ``max(|2 (c - a)|, |2 (b - c)|)`` per unit of s. A
        control point outside the limits: not free (the curve lies in their box)."""
        self._spheres()
        return self._run(self._fast.blends, (a, c, b), np.empty(len(a), np.uint8)).view(bool)

    def _run(self, entry, curves: tuple, out: np.ndarray) -> np.ndarray:
        """``out`` filled by the compiled ``entry`` (``segments``, ``prefixes`` or ``blends``)
        for the curves' points ``curves`` ((K, n) rad each: qa, qb or qa, qc, qb); the
        configurations it checked counted."""
        model = self._kernel.compiled_model()
        lo, hi = _c(self.lower), _c(self.upper)
        entry(*(_c(q) for q in curves), lo, hi, model, out, self._counter)
        self._count()
        return out

    def _count(self) -> None:
        """Adds the compiled calls' count of checked configurations to ``checked``."""
        self.checked += int(self._counter[0])
        self._counter[0] = 0

    # ------------------------------------------------------------------------ configurations
    def _free_inside(self, q: np.ndarray) -> np.ndarray:
        """``free`` for configurations (N, n) known to be inside the limits."""
        return self._evaluate(q)[0]

    def _evaluate(
        self, q: np.ndarray, dq: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Free (N,) for configurations q (N, n) inside the limits and, given ``dq`` (N, n)
        (the joint steps |qb - qa| of each sample's segment; (n,) when all share one segment),
        the half width (N,) of the interval of the segment parameter each free sample certifies
        (see the module doc)."""
        self._spheres()
        if self._fast is None:
            self.checked += len(q)
            return self._kernel.evaluate(q, dq)
        q = _c(q)
        ok = np.empty(len(q), dtype=np.uint8)
        width = np.empty(len(q))
        want = dq is not None
        d = self._no_dq if dq is None else _c(np.atleast_2d(dq))
        self._fast.evaluate(q, d, want, self._kernel.compiled_model(), ok, width, self._counter)
        self._count()
        return ok.view(bool), width if want else None

    def certified(self, q: np.ndarray, dq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(free (N,), certified half width (N,)) of configurations q (N, n) rad on curves whose
        joints move at most ``dq`` (N, n) rad per unit of their parameter (a segment's joint
        steps, a blend's largest speeds): a free sample's curve stays free within that half
        width of the parameter (module doc). Outside the limits: not free, width 0."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        ok = self.within_limits(q)
        if ok.all():  # the common case (a blend inside the box of its corners)
            return self._evaluate(q, dq)
        width = np.zeros(len(q))
        idx = np.flatnonzero(ok)
        if len(idx):
            ok[idx], width[idx] = self._evaluate(q[idx], np.asarray(dq, dtype=float)[idx])
        return ok, width

    # ------------------------------------------------------------------------------ segments
    def steps(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        """Steps (K,) >= 1 of ``2 margin / D`` along segments qa -> qb (K, n) (module doc)."""
        travel = self._travel(np.atleast_2d(qa), np.atleast_2d(qb), surface=False)
        return np.maximum(1, np.ceil(travel / (2.0 * self.margin)).astype(int))

    def travel(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        """Bound (K,) m of how far any point of the robot (sphere surfaces included) moves along
        the segments qa -> qb (K, n) rad."""
        return self._travel(np.atleast_2d(qa), np.atleast_2d(qb), surface=True)

    def _travel(self, qa: np.ndarray, qb: np.ndarray, surface: bool) -> np.ndarray:
        """Bound (K,) m of the path length of any sphere centre (``surface``: any point of a
        sphere) on the segments: ``max_s sum_j w_sj |dq_j|`` (Lipschitz weights)."""
        c = self._spheres()
        w = c.weights + c.radii[:, None] * (c.weights > 0) if surface else c.weights
        return np.max(np.abs(qb - qa) @ w.T, axis=1)

    def _segments(
        self, qa: np.ndarray, qb: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(segment free (K,), start free (K,), end free (K,)) in two batched rounds."""
        qa = np.asarray(qa, dtype=float)
        qb = np.asarray(qb, dtype=float)
        self._spheres()
        if self._fast is not None:
            out = self._run(self._fast.segments, (qa, qb), np.empty((len(qa), 3), np.uint8))
            out = out.view(bool)
            return out[:, 0], out[:, 1], out[:, 2]
        if len(qa) == 1:
            return self._segment(qa[0], qb[0])
        delta = qb - qa
        dq = np.abs(delta)
        d_max = np.max(dq @ self._weights_t, axis=1)  # the largest centre motion
        np.maximum(d_max, 1e-12, out=d_max)
        inside = self.within_limits(qa) & self.within_limits(qb)  # the limits are a box
        # Round 1: coarse samples, both ends included, each certifying an interval.
        n1 = np.ceil(d_max / COARSE_SPACING).astype(int)
        n1[~inside] = 1
        owner = np.repeat(np.arange(len(qa)), n1 + 1)
        offsets = np.cumsum(n1 + 1) - (n1 + 1)
        k = np.arange(len(owner)) - offsets[owner]
        t = k / n1[owner]
        # Round 1 in two parts: the ends and every ``_PROBE_STRIDE``-th sample first; the other
        # coarse samples only of the segments those left unblocked (blocked segments, most of
        # them in clutter, stop early).
        live = inside[owner]
        probe = (k == 0) | (k == n1[owner]) | (k % _PROBE_STRIDE == _PROBE_STRIDE // 2)
        ok, radius = self._sample(qa, delta, owner, t, dq, live & probe)
        hit = ~inside
        hit[owner[probe & ~ok]] = True
        rest = ~probe & ~hit[owner]
        if rest.any():
            ok2, radius2 = self._sample(qa, delta, owner, t, dq, rest)
            ok[rest], radius[rest] = ok2[rest], radius2[rest]
        start_ok, end_ok = ok[offsets], ok[offsets + n1]
        blocked = ~inside
        blocked[owner[~ok]] = True
        # Round 2: the gaps left, at the spacing that needs no certification.
        g_owner, g_lo, g_hi = _gaps(owner, t, radius, blocked)
        if len(g_owner):
            step = 2.0 * self.margin / d_max[g_owner]
            s_t, gap = _midpoints(g_lo, g_hi, np.ceil((g_hi - g_lo) / step).astype(int))
            s_owner = g_owner[gap]
            q = qa[s_owner] + s_t[:, None] * delta[s_owner]
            blocked[s_owner[~self._free_inside(q)]] = True
        return ~blocked, start_ok, end_ok

    def _segment(self, qa: np.ndarray, qb: np.ndarray):
        """``_segments`` of one segment qa -> qb (n,) with few numpy calls (the common query:
        start to goal; numpy's per-call cost dominates such small batches)."""
        not_free = np.zeros(1, dtype=bool)
        lower, upper = self._limits
        a, b = qa.tolist(), qb.tolist()
        a_in = all(lo <= x <= hi for lo, x, hi in zip(lower, a, upper))
        b_in = all(lo <= x <= hi for lo, x, hi in zip(lower, b, upper))
        if not (a_in and b_in):  # not evaluated: reported not free (as ``_segments`` does)
            return not_free, not_free, not_free
        delta = qb - qa
        dq = np.abs(delta)
        d_max = max(float((dq @ self._weights_t).max()), 1e-12)
        n1 = max(1, math.ceil(d_max / COARSE_SPACING))
        t = self._steps.get(n1)
        if t is None:
            t = self._steps[n1] = np.arange(n1 + 1) * (1.0 / n1)
            t.flags.writeable = False
        q = np.multiply.outer(t, delta)
        q += qa
        ok, radius = self._evaluate(q, dq)
        if not ok.all():
            return not_free, ok[:1], ok[-1:]
        # Consecutive samples (1 / n1 apart) leave a gap unless their half widths cover it.
        cover = radius[:-1] + radius[1:]
        if cover.min() < 1.0 / n1:  # Round 2 (see ``_segments``), in the gaps only
            gap = cover < 1.0 / n1
            lo, hi = t[:-1][gap] + radius[:-1][gap], t[1:][gap] - radius[1:][gap]
            s_t = _midpoints(
                lo, hi, np.ceil((hi - lo) * (d_max / (2.0 * self.margin))).astype(int)
            )[0]
            q = np.multiply.outer(s_t, delta)
            q += qa
            if not self._free_inside(q).all():
                return not_free, ok[:1], ok[-1:]
        return ok[:1], ok[:1], ok[-1:]

    def _sample(self, qa, delta, owner, t, dq, live):
        """Evaluate the samples ``t`` (M,) of segments ``owner`` (M,) where ``live``: (free,
        certified half width) (M,) each (not free and 0 elsewhere)."""
        ok = np.zeros(len(owner), dtype=bool)
        radius = np.zeros(len(owner))
        idx = np.flatnonzero(live)
        if len(idx):
            o = owner[idx]
            q = qa[o] + t[idx, None] * delta[o]
            ok[idx], radius[idx] = self._evaluate(q, dq[o])
        return ok, radius

    def free_prefixes(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        """``free_prefix`` of segments qa -> qb (K, n) together: fractions (K,), each the
        parameter of the last free sample before the first blocked one (1.0 when the segment
        is free; 0.0 when qb lies outside the limits). The same two rounds as
        ``segments_free`` (module doc): coarse samples with their certified intervals, then
        samples ``2 margin / D`` apart in the gaps those leave before each segment's first
        blocked coarse sample; everything up to the returned sample is covered."""
        qa = np.atleast_2d(np.asarray(qa, dtype=float))
        qb = np.atleast_2d(np.asarray(qb, dtype=float))
        self._spheres()
        out = np.zeros(len(qa))
        if self._fast is not None:
            return self._run(self._fast.prefixes, (qa, qb), out)
        live = np.flatnonzero(self.within_limits(qb))  # the limits are a box
        if not len(live):
            return out
        qa, qb = qa[live], qb[live]
        delta = qb - qa
        dq = np.abs(delta)
        d_max = np.maximum(np.max(dq @ self._weights_t, axis=1), 1e-12)
        n1 = np.ceil(d_max / COARSE_SPACING).astype(int)
        owner = np.repeat(np.arange(len(qa)), n1 + 1)
        offsets = np.cumsum(n1 + 1) - (n1 + 1)
        k = np.arange(len(owner)) - offsets[owner]
        t = k / n1[owner]
        ok = np.zeros(len(owner), dtype=bool)
        radius = np.zeros(len(owner))
        # First blocked coarse sample per segment (max: none), found in rounds of growing
        # index ranges: a segment blocked early (most connect attempts in clutter) stops there.
        first = np.full(len(qa), np.iinfo(np.int64).max)
        lo = 0
        for size in _PREFIX_ROUNDS:
            sel = np.flatnonzero((k >= lo) & (k < lo + size) & (first[owner] > lo))
            if len(sel):
                o = owner[sel]
                ok[sel], radius[sel] = self._evaluate(qa[o] + t[sel, None] * delta[o], dq[o])
                bad = sel[~ok[sel]]
                np.minimum.at(first, owner[bad], k[bad])
            lo += size
            if lo > n1.max():
                break
        before = k < first[owner]  # free coarse samples before the first blocked one
        lo, hi = t[:-1] + radius[:-1], t[1:] - radius[1:]
        gap = (owner[:-1] == owner[1:]) & before[:-1] & before[1:] & (lo < hi)
        g_owner, g_lo, g_hi = owner[:-1][gap], lo[gap], hi[gap]
        s_owner, s_t, s_ok = owner[:0], t[:0], ok[:0]
        if len(g_owner):
            step = 2.0 * self.margin / d_max[g_owner]
            s_t, gap = _midpoints(g_lo, g_hi, np.ceil((g_hi - g_lo) / step).astype(int))
            s_owner = g_owner[gap]
            s_ok = self._free_inside(qa[s_owner] + s_t[:, None] * delta[s_owner])
        all_owner = np.concatenate((owner, s_owner))
        all_t = np.concatenate((t, s_t))
        all_ok = np.concatenate((ok, s_ok))
        blocked_at = np.full(len(qa), np.inf)
        np.minimum.at(blocked_at, all_owner[~all_ok], all_t[~all_ok])
        good = all_ok & (all_t < blocked_at[all_owner])
        prefix = np.zeros(len(qa))
        np.maximum.at(prefix, all_owner[good], all_t[good])
        out[live] = prefix
        return out


def _c(a: np.ndarray) -> np.ndarray:
    """``a`` as a writable C-contiguous float64 array (the one layout the compiled entries
    take: they are called without type dispatch)."""
    a = np.ascontiguousarray(a, dtype=float)
    return a if a.flags.writeable else a.copy()


def _midpoints(lo: np.ndarray, hi: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints of ``count`` (at least 1) equal parts of each interval [lo, hi] (G,): the sample
    parameters (M,) and the interval (M,) each belongs to."""
    np.maximum(count, 1, out=count)
    interval = np.repeat(np.arange(len(count)), count)
    j = np.arange(len(interval)) - (np.cumsum(count) - count)[interval]
    return lo[interval] + (j + 0.5) * ((hi - lo) / count)[interval], interval


def _gaps(owner: np.ndarray, t: np.ndarray, radius: np.ndarray, blocked: np.ndarray):
    """Intervals of t not covered by consecutive samples' certified intervals, per segment not
    yet blocked: (owner, low, high) arrays. Samples are sorted by (owner, t); ``radius`` is only
    read for samples of segments not blocked (all of them free)."""
    left, right = slice(None, -1), slice(1, None)
    lo = t[left] + radius[left]
    hi = t[right] - radius[right]
    gap = (owner[left] == owner[right]) & (lo < hi) & ~blocked[owner[left]]
    return owner[left][gap], lo[gap], hi[gap]
