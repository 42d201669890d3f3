"""Batched, conservative validity checks of configurations and straight joint-space segments.

A configuration is free when it lies inside the joint limits, every robot sphere inflated by
``margin`` keeps clear of the obstacles (distance-field lower bound) and every sphere pair of the
self-collision matrix keeps a gap of at least ``margin``. Spheres cover the true geometry and the
field never over-estimates a distance, so "free" is never wrong for a configuration.

Segments ``q(t) = qa + t (qb - qa)``, t in [0, 1]: along a segment sphere ``s`` moves at most
``T_s = sum_j w_sj |dq_j|`` (Lipschitz weights of ``robot_model``), so a sample at ``t_i`` whose
sphere keeps a clearance ``c_s`` from the obstacles stays clear for ``|t - t_i| <= c_s / T_s``.
For a self-collision pair (a on group ``ga`` < b's group ``gb``) only the joints between the groups
move b relative to a, so their gap ``g`` shrinks by at most ``max(T_a, T_b) |t - t_i|``. Each
free sample thus *certifies* an interval of t (the minimum over spheres, pairs and body bounds).
``segments_free`` checks segments in two batched rounds: coarse samples (``COARSE_SPACING`` of
motion apart, both ends included), then, in the gaps their certified intervals leave, samples
``2 margin / D`` apart (``D``: the largest ``T`` of the spheres and body bounds): every free sample
has all clearances >= ``margin`` and so certifies at least ``margin / D`` either side, which
closes every gap. A segment is free when its samples are free and their intervals cover [0, 1].
``free_prefixes`` (RRT-Connect's *connect*) checks steps of ``2 margin / D`` in order: between
two free steps nothing moves more than ``margin`` from its position at the nearer one.
"""

from __future__ import annotations

import numpy as np

from twin.planning.field import DistanceField
from twin.planning.robot_model import CompiledSpheres, RobotSpheres

#: Motion (m) between the coarse samples of a segment's first round.
COARSE_SPACING = 0.1
#: Chunk sizes (steps) of ``free_prefixes``.
_PREFIX_CHUNKS = (32, 128, 512, 2048, 1 << 62)


class CollisionChecker:
    """Checks over configurations (N, n) rad; counts every configuration it checks."""

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
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)
        self.checked = 0  # configurations checked since construction (or reset)
        self._compiled: CompiledSpheres | None = None

    def refresh(self) -> None:
        """Re-read the robot's spheres (after a tool or carried object changed)."""
        self._compiled = None

    def _spheres(self) -> CompiledSpheres:
        if self._compiled is None:
            c = self.robot.compiled()
            self._compiled = c
            env = np.flatnonzero(c.env)
            contiguous = len(env) and np.array_equal(env, np.arange(env[0], env[-1] + 1))
            self._env_idx = slice(env[0], env[-1] + 1) if contiguous else env
            self._env_r0 = c.radii[self._env_idx]
            self._pair_r = c.radii[c.pair_a] + c.radii[c.pair_b]
            self._body_r = c.bound_radius[c.body_pair_a] + c.bound_radius[c.body_pair_b]
        return self._compiled

    # ------------------------------------------------------------------------ configurations
    def within_limits(self, q: np.ndarray) -> np.ndarray:
        """True (N,) where q (N, n) lies inside the joint limits."""
        return np.all((q >= self.lower) & (q <= self.upper), axis=-1)

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

    def _free_inside(self, q: np.ndarray) -> np.ndarray:
        """``free`` for configurations (N, n) known to be inside the limits."""
        return self._evaluate(q)[0]

    def _evaluate(
        self, q: np.ndarray, dq: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Free (N,) for configurations q (N, n) inside the limits and, given ``dq`` (N, n)
        (the joint steps |qb - qa| of each sample's segment), the half width (N,) of the interval
        of the segment parameter each free sample certifies (see the module doc)."""
        c = self._spheres()
        self.checked += len(q)
        centers = self.robot.centers(q, c)
        slack = self.field.clearance(centers[:, self._env_idx]) - self._env_r0
        ok = np.all(slack >= self.margin, axis=1)
        motion = radius = None
        if dq is not None:
            motion = dq @ c.weights_all.T  # (N, S + B) motion bound over the whole segment
            with np.errstate(divide="ignore"):
                radius = np.min(slack / motion[:, self._env_idx], axis=1)
        if len(c.pair_a):
            live = np.flatnonzero(ok)
            if len(live):
                sub = None if motion is None else motion[live]
                self_ok, self_radius = self._self_check(centers[live], c, sub)
                ok[live] = self_ok
                if radius is not None:
                    radius[live] = np.minimum(radius[live], self_radius)
        return ok, radius

    def _self_check(self, cl: np.ndarray, c: CompiledSpheres, motion: np.ndarray | None):
        """(no pair closer than ``margin`` (N,), certified half width (N,) or None) for centres
        cl (N, S + B, 3) and, optionally, their motion bounds (N, S + B) m over the segment:
        body pairs whose bounding spheres keep the gap skip their sphere pairs.
        A pair's gap shrinks at most as fast as the later-group centre moves (``max`` of the two
        bounds)."""
        result = np.ones(len(cl), dtype=bool)
        radius = None if motion is None else np.full(len(cl), np.inf)
        if not len(c.body_pair_a):
            return result, radius
        s = len(c.radii)
        ba, bb = s + c.body_pair_a, s + c.body_pair_b
        d = cl[:, ba] - cl[:, bb]
        gap = np.sqrt(np.einsum("npk,npk->np", d, d)) - self._body_r  # (N, Pb)
        close = gap < self.margin
        if radius is not None:
            rel = np.maximum(motion[:, ba], motion[:, bb])
            with np.errstate(divide="ignore", invalid="ignore"):
                radius = np.min(np.where(close, np.inf, gap / rel), axis=1)
        row, bp = np.nonzero(close)
        if len(row):  # the sphere pairs of the close body pairs, all at once
            count = c.body_pair_start[bp + 1] - c.body_pair_start[bp]
            rows = np.repeat(row, count)
            first = np.repeat(c.body_pair_start[bp] - (np.cumsum(count) - count), count)
            pair = first + np.arange(len(rows))
            pa, pb = c.pair_a[pair], c.pair_b[pair]
            d = cl[rows, pa] - cl[rows, pb]
            g = np.sqrt(np.einsum("pk,pk->p", d, d)) - self._pair_r[pair]
            result[rows[g < self.margin]] = False
            if radius is not None:
                rel = np.maximum(motion[rows, pa], motion[rows, pb])
                with np.errstate(divide="ignore", invalid="ignore"):
                    np.minimum.at(radius, rows, g / rel)
        return result, radius

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

    def star(self, start: np.ndarray, goals: np.ndarray) -> tuple[bool, np.ndarray, np.ndarray]:
        """The start, the goals and the straight segments to them, checked together (the
        common easy query costs two batched calls): (start free, goals free (G,), segments
        free (G,))."""
        if len(goals) == 0 or not self.within_limits(start[None])[0]:
            none = np.zeros(len(goals), dtype=bool)
            return bool(self.free(start[None])[0]), none, none
        qa = np.repeat(start[None], len(goals), axis=0)
        free, start_ok, end_ok = self._segments(qa, goals)
        return bool(start_ok[0]), end_ok, free

    def segments_free(
        self, qa: np.ndarray, qb: np.ndarray, include_start: bool = True
    ) -> np.ndarray:
        """True (K,) where the straight segments qa[k] -> qb[k] (K, n) rad are free, both ends
        included (see the module doc); ``include_start`` is accepted for compatibility: the
        start is always checked (its certified interval is needed)."""
        del include_start
        return self._segments(np.atleast_2d(qa), np.atleast_2d(qb))[0]

    def _segments(
        self, qa: np.ndarray, qb: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(segment free (K,), start free (K,), end free (K,)) in two batched rounds."""
        qa = np.asarray(qa, dtype=float)
        qb = np.asarray(qb, dtype=float)
        c = self._spheres()
        dq = np.abs(qb - qa)
        d_max = np.maximum(np.max(dq @ c.weights_all.T, axis=1), 1e-12)  # spheres and bounds
        inside = self.within_limits(qa) & self.within_limits(qb)  # the limits are a box
        blocked = ~inside
        # Round 1: coarse samples, both ends included, each certifying an interval.
        n1 = np.where(inside, np.maximum(1, np.ceil(d_max / COARSE_SPACING)), 1).astype(int)
        owner = np.repeat(np.arange(len(qa)), n1 + 1)
        offsets = np.cumsum(n1 + 1) - (n1 + 1)
        t = (np.arange(len(owner)) - np.repeat(offsets, n1 + 1)) / n1[owner]
        ok, radius = self._sample(qa, qb, owner, t, dq, inside[owner])
        start_ok, end_ok = ok[offsets], ok[offsets + n1]
        blocked[owner[~ok]] = True
        # Round 2: the gaps left, at the spacing that needs no certification.
        g_owner, g_lo, g_hi = _gaps(owner, t, np.where(ok, radius, 0.0), blocked)
        if len(g_owner):
            step = 2.0 * self.margin / d_max[g_owner]
            count = np.maximum(1, np.ceil((g_hi - g_lo) / step).astype(int))
            s_owner = np.repeat(g_owner, count)
            j = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
            s_t = np.repeat(g_lo, count) + (j + 0.5) * np.repeat((g_hi - g_lo) / count, count)
            q = qa[s_owner] + s_t[:, None] * (qb - qa)[s_owner]
            blocked[s_owner[~self._free_inside(q)]] = True
        return ~blocked, start_ok, end_ok

    def _sample(self, qa, qb, owner, t, dq, live):
        """Evaluate the samples ``t`` (M,) of segments ``owner`` (M,) where ``live``: (free,
        certified half width) (M,) each (not free and 0 elsewhere)."""
        ok = np.zeros(len(owner), dtype=bool)
        radius = np.zeros(len(owner))
        idx = np.flatnonzero(live)
        if len(idx):
            o = owner[idx]
            q = qa[o] + t[idx, None] * (qb - qa)[o]
            ok[idx], radius[idx] = self._evaluate(q, dq[o])
        return ok, radius

    def segment_free(self, qa: np.ndarray, qb: np.ndarray, include_start: bool = True) -> bool:
        """Whether the straight segment qa -> qb (n,) rad is free (both ends included)."""
        return bool(self.segments_free(qa[None], qb[None], include_start)[0])

    def free_prefix(self, qa: np.ndarray, qb: np.ndarray) -> float:
        """Fraction t in [0, 1] such that qa -> qa + t (qb - qa) is free (qa assumed free):
        the last checked step before the first blocked one (1.0 when the segment is free)."""
        return float(self.free_prefixes(qa[None], qb[None])[0])

    def free_prefixes(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        """``free_prefix`` of segments qa -> qb (K, n) together: fractions (K,). Steps are
        checked in order, in rounds of growing size; a segment stops at its first blocked step."""
        qa = np.atleast_2d(np.asarray(qa, dtype=float))
        qb = np.atleast_2d(np.asarray(qb, dtype=float))
        n_steps = self.steps(qa, qb)
        owner = np.repeat(np.arange(len(qa)), n_steps)
        k = np.arange(n_steps.sum()) - np.repeat(np.cumsum(n_steps) - n_steps, n_steps) + 1
        configs = qa[owner] + (k / n_steps[owner])[:, None] * (qb - qa)[owner]
        first_bad = np.full(len(qa), np.iinfo(np.int64).max)
        first_bad[~self.within_limits(qb)] = 1  # outside the limits: nothing beyond qa is kept
        lo = 1
        for size in _PREFIX_CHUNKS:
            hi = lo + size
            sel = np.flatnonzero((k >= lo) & (k < hi) & (k < first_bad[owner]))
            if len(sel):
                ok = self._free_inside(configs[sel])
                bad = sel[~ok]
                np.minimum.at(first_bad, owner[bad], k[bad])
            lo = hi
            if lo > n_steps.max():
                break
        return np.where(first_bad > n_steps, 1.0, (np.minimum(first_bad, n_steps) - 1) / n_steps)


def _gaps(owner: np.ndarray, t: np.ndarray, radius: np.ndarray, blocked: np.ndarray):
    """Intervals of t not covered by consecutive samples' certified intervals, per segment not
    yet blocked: (owner, low, high) arrays. Samples are sorted by (owner, t)."""
    left, right = slice(None, -1), slice(1, None)
    lo = t[left] + radius[left]
    hi = t[right] - radius[right]
    gap = (owner[left] == owner[right]) & (lo < hi) & ~blocked[owner[left]]
    return owner[left][gap], lo[gap], hi[gap]
