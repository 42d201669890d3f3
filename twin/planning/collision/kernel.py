"""The batched validity kernel: forward kinematics of every sphere centre, the distance-field
lookups and the self-collision pairs of many configurations in a few large numpy calls.

Layout: configurations run along the LAST axis of every array (structure of arrays), so every
gather (a sphere's centres, a pair's two spheres) copies contiguous rows.

Kinematics: with ``R_k`` the rotation of group ``k``'s anchor (base frame), the anchors' origins
are ``t_k = t_0 + sum_{m < k} R_m c_m`` (``c_m``: the constant step from anchor ``m`` to anchor
``m + 1`` in anchor ``m``'s frame), so every sphere centre ``R_g l + t_g`` is LINEAR in the nine
entries of ``R_1 .. R_n``: one matrix product ``M (3 S, 9 n) @ R (9 n, N)`` gives all centres, in
grid units (scaled by ``1 / h`` and shifted so that truncation finds the nearest field node).
Each rotation is ``R_k = R_{k-1} C_k Rot(a_k, q_k) = G_0 + cos q_k G_1 + sin q_k G_2`` with
``G = R_{k-1} [C_k P_k, C_k (I - P_k), C_k [a_k]x]`` (``P_k = a_k a_k^T``): one small product per
joint.

Matrix products run on column blocks of at most ``_BLOCK_MNK / (rows * inner)`` columns: one large
product lets OpenBLAS start threads, which on a loaded machine costs far more than it saves
(measured on the shared two-core machine: 10 to 100 times slower per column).

Small batches (up to ``_SMALL`` configurations, the usual start-to-goal check) take fewer,
slower-per-element numpy calls instead: at a few dozen configurations numpy's per-call cost is
what the query pays. Field indices are not clipped when every sphere centre provably stays
inside the grid (``set_reach``).

A configuration is free when every obstacle-checked sphere keeps ``margin`` from the obstacles
(field lower bound; exact centre-to-centre distances for the field's ``exact_spheres``, computed
in grid units as ``|u|^2 - 2 u . c + |c|^2`` by one broadcast product) and every checked sphere pair keeps a gap of ``margin``. In larger batches a
body pair whose bounding spheres keep ``margin`` apart in every configuration of the batch skips
its sphere pairs (its bounds' gap, a lower bound of theirs, stands in; in planning batches about
one body pair in fifteen comes that close). Given the joint steps ``dq`` of each sample's segment,
``evaluate`` also returns the half width (in the segment parameter) of the interval the free
sample certifies; the argument is in ``checker``'s doc.
"""

from __future__ import annotations

import numpy as np

from twin.planning.collision.field import EXACT_ROUNDING, DistanceField
from twin.planning.collision.robot_model import AnchorChain, CompiledSpheres

#: Largest m * n * k of one BLAS call (OpenBLAS stays single-threaded below 2 * 65536 * 4).
_BLOCK_MNK = 400_000
#: Configurations per pass of ``evaluate`` (bounds the temporaries).
_CHUNK = 1024
#: Up to this many configurations, the rotations take fewer (slower per element) numpy calls.
_SMALL = 48
#: Body-pair culling is kept when the body pairs hold at least this many sphere pairs each on
#: average (a model of one sphere per body, as VAMP's UR5, would compute every gap twice).
_PRUNE_RATIO = 2.0


def matmul_cols(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``a (p, k) @ x (k, N)`` as a stack of column blocks (no BLAS threads, module doc)."""
    p, k = a.shape
    n = x.shape[1]
    w = max(8, _BLOCK_MNK // max(1, p * k))
    if n <= w:
        return a @ x
    out = np.empty((p, n))
    full = n - n % w
    b = full // w
    np.matmul(
        a,
        x[:, :full].reshape(k, b, w).transpose(1, 0, 2),
        out=out[:, :full].reshape(p, b, w).transpose(1, 0, 2),
    )
    if full < n:
        np.matmul(a, x[:, full:], out=out[:, full:])
    return out


class SphereKernel:
    """Flat arrays of one robot model (``CompiledSpheres``), its anchor chain and a field."""

    def __init__(
        self, c: CompiledSpheres, chain: AnchorChain, field: DistanceField, margin: float
    ) -> None:
        n = len(chain.axes)
        self.n = n
        self.field = field
        self.margin = float(margin)
        h = field.h
        self.h = h
        base_r = chain.base[:3, :3]
        # Per joint: K_k = [C_k P_k, C_k (I - P_k), C_k [a_k]x] (3, 9); G = R_{k-1} K_k.
        ks = [np.hstack((chain.p[k], chain.ac[k], chain.as_[k])) for k in range(n)]  # (3, 9)
        self._k_t = [np.ascontiguousarray(kk.T) for kk in ks]  # (9, 3) each
        self._first = base_r @ ks[0]  # (3, 9): G of joint 1 (constant)
        # Small batches: loc_k = P_k + cos(q_k) AC_k + sin(q_k) AS_k = [cos q, sin q] @ trig + p.
        p, ac, as_ = chain.p.copy(), chain.ac.copy(), chain.as_.copy()
        p[0], ac[0], as_[0] = base_r @ p[0], base_r @ ac[0], base_r @ as_[0]
        # As one product: loc = sin(q S + phase) @ trig, with sin(q + pi / 2) = cos q and a
        # constant column sin(pi / 2) = 1 for P.
        self._spread = np.hstack((np.eye(n), np.eye(n), np.zeros((n, 1))))
        self._phase = np.concatenate((np.full(n, 0.5 * np.pi), np.zeros(n), [0.5 * np.pi]))
        self._trig = np.zeros((2 * n + 1, 9 * n))
        for k in range(n):
            self._trig[k, 9 * k : 9 * k + 9] = ac[k].ravel()
            self._trig[n + k, 9 * k : 9 * k + 9] = as_[k].ravel()
        self._trig[2 * n] = p.reshape(-1)
        # Sphere order in the kernel: obstacle-checked spheres first.
        env = np.flatnonzero(c.env)
        order = np.concatenate((env, np.flatnonzero(~c.env)))
        self.order = order  # kernel sphere k is compiled sphere order[k]
        pos = np.empty(len(order), dtype=int)
        pos[order] = np.arange(len(order))
        self.count = len(order)
        self.n_env = len(env)
        group, local, radii = c.group[order], c.local[order], c.radii[order]
        n_sph = len(c.radii)
        bound_group, bound_local = c.all_group[n_sph:], c.local_t[:, n_sph:].T
        t0 = chain.base[:3, 3]
        first_step = base_r @ chain.c_trans[0]
        total = self.count + len(bound_group)  # the spheres, then one bounding sphere per body
        m = np.zeros((3 * total, 9 * n))
        y0 = np.zeros(3 * total)
        all_group = np.concatenate((group, bound_group))
        all_local = np.vstack((local, bound_local))
        for s, (g, loc) in enumerate(zip(all_group, all_local)):
            if g == 0:
                y0[3 * s : 3 * s + 3] = base_r @ loc + t0
                continue
            y0[3 * s : 3 * s + 3] = t0 + first_step
            for i in range(3):
                for mm in range(1, g + 1):  # R_mm[i, j] sits in row 9 (mm - 1) + 3 i + j
                    vec = loc if mm == g else chain.c_trans[mm]
                    col = 9 * (mm - 1) + 3 * i
                    m[3 * s + i, col : col + 3] += vec
        half_node = field.origin - 0.5 * h
        ba, bb = c.body_pair_a, c.body_pair_b
        self._prune = len(ba) > 0 and len(c.pair_a) >= _PRUNE_RATIO * len(ba)
        if not self._prune:  # no body bounds needed
            total = self.count
            m, y0 = m[: 3 * total], y0[: 3 * total]
        self._m = m / h
        self._y0 = ((y0 - np.tile(half_node, total)) / h)[:, None]
        self._total = total
        # Field lookups: clipping is skipped when no centre can leave the grid's interior.
        self._need_clip = True
        self._upper = (np.asarray(field.shape) - 1)[:, None]
        self._strides = np.array([field.shape[1] * field.shape[2], field.shape[2], 1])
        self._env_r = radii[: self.n_env, None]
        self._exact_version = -1  # field version of the cached exact spheres (``_exact``)
        # Self-collision pairs (kernel order) and the sums of their radii (m).
        self.pair_a = pos[c.pair_a]
        self.pair_b = pos[c.pair_b]
        pair_r = radii[self.pair_a] + radii[self.pair_b]
        self._pair_r = pair_r[:, None]
        # Motion bounds over a segment, per joint step: an obstacle-checked centre moves at most
        # w_s . |dq|; a pair's gap (a on group ga <= b's group gb) shrinks at most as fast as b
        # moves relative to a's group, and only joints ga + 1 .. gb move b relative to a:
        # sum over those j of w_bj |dq_j| (w_bj bounds b's distance from joint j's axis), the
        # term of joint ga + 1 scaled down where a's centre lies near its axis (``_pair_weights``).
        w = c.weights[order]
        self._weights = np.vstack(
            (
                w[: self.n_env],
                _pair_weights(chain, group, local, w, self.pair_a, self.pair_b, pair_r),
            )
        )  # (E + P, n)
        joint = np.arange(1, n + 1)
        # Body pairs (their bounding spheres contain their spheres): a body pair whose bounds
        # keep ``margin`` apart needs none of its sphere pairs (larger batches only, where the
        # bookkeeping pays). Sphere pairs of body pair i: pair_a[start[i]:start[i + 1]].
        self._bpa, self._bpb = self.count + ba, self.count + bb
        self._bp_r = (c.bound_radius[ba] + c.bound_radius[bb])[:, None]
        self._bp_counts = np.diff(c.body_pair_start)
        wb = c.weights_all[n_sph:]
        gba, gbb = bound_group[ba], bound_group[bb]
        lo, hi = np.minimum(gba, gbb), np.maximum(gba, gbb)
        later = np.where((gbb >= gba)[:, None], wb[bb], wb[ba])
        between = (joint[None] > lo[:, None]) & (joint[None] <= hi[:, None])
        # Rows: obstacle spheres (E), body pairs (Pb), sphere pairs (P).
        self._weights_all = np.vstack(
            (w[: self.n_env], later * between, self._weights[self.n_env :])
        )

        # The compiled checks' model (``compiled_model``): sphere rows in metres (kernel order,
        # then the body bounds when body pairs are culled), group-0 rows in the base frame.
        rows_group = all_group[: self._total]
        rows = np.zeros((self._total, 4))
        rows[:, :3] = all_local[: self._total]
        rows[: self.count, 3] = radii
        fixed = rows_group == 0
        rows[fixed, :3] = rows[fixed, :3] @ base_r.T + t0
        ctrans = chain.c_trans.copy()
        ctrans[0] = t0 + first_step
        chain_arr = np.stack((p, ac, as_), axis=1)  # (n, 3, 3, 3), joint 1's times the base
        if self._prune:
            start = c.body_pair_start
            if start[0] != 0 or start[-1] != len(c.pair_a):
                raise ValueError("body pairs must partition the sphere pairs")
            bodies = np.stack((self._bpa, self._bpb, start[:-1], start[1:]), axis=1)
            body_r = self._bp_r[:, 0]
            w_body = self._weights_all[self.n_env : self.n_env + len(ba)]
        else:
            bodies, body_r, w_body = np.zeros((0, 4), int), np.zeros(0), np.zeros((0, n))
        self._model_parts = (
            np.ascontiguousarray(chain_arr, dtype=float),
            np.ascontiguousarray(ctrans, dtype=float),
            np.ascontiguousarray(rows, dtype=float),
            np.ascontiguousarray(rows_group, dtype=np.int64),
            int(self.n_env),
            field._flat,
            np.asarray(field.shape, dtype=np.int64),
            np.array([*half_node, 1.0 / h, 0.0, 0.0]),
        )
        self._model_tail = (
            np.ascontiguousarray(np.stack((self.pair_a, self.pair_b), axis=1), dtype=np.int64),
            np.ascontiguousarray(pair_r, dtype=float),
            np.ascontiguousarray(bodies, dtype=np.int64),
            np.ascontiguousarray(body_r, dtype=float),
            np.ascontiguousarray(self._weights[: self.n_env], dtype=float),
            np.ascontiguousarray(self._weights[self.n_env :], dtype=float),
            np.ascontiguousarray(w_body, dtype=float),
            float(margin),
            *self._group_bounds(rows, rows_group, n, field.band),
        )
        self._model_version = -1

    def _group_bounds(
        self, rows: np.ndarray, rows_group: np.ndarray, n: int, band: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(Per group 0 .. n, the radius m about its anchor origin that holds every obstacle
        sphere of the group, -1 for none (group 0: never used); [an upper bound of the field's
        values m, the largest obstacle sphere's radius m]) for ``_compiled.check``'s lists."""
        env = slice(0, self.n_env)
        reach = np.linalg.norm(rows[env, :3], axis=1) + rows[env, 3]
        bounds = np.full(n + 1, -1.0)
        np.maximum.at(bounds, rows_group[env], reach)
        bounds[0] = -1.0
        top = float(rows[env, 3].max()) if self.n_env else 0.0
        return bounds, np.array([band + 1e-6, top])

    def compiled_model(self) -> tuple:
        """The model tuple of the compiled checks (``_compiled`` module doc), with the field's
        exact spheres of its current version and the scratch of their per-group lists (both
        rebuilt when the obstacles change; one checker is used by one thread at a time)."""
        f = self.field
        if self._model_version != f.version:
            centers, radii = f.exact_spheres()
            exact = np.zeros((len(radii), 4))
            exact[:, :3] = centers
            exact[:, 3] = radii + EXACT_ROUNDING
            uniform = f.interior_value()
            gpar = self._model_parts[7]  # [4]: 1 when the grid's interior is uniform, [5] its value
            gpar[4], gpar[5] = (0.0, 0.0) if uniform is None else (1.0, uniform)
            # [19]: the per-group lists of exact spheres (``_compiled.check``), allocated here
            # once per obstacle set instead of on every call (rows 0 .. n: count, then indices).
            lists = np.empty((self.n + 1, len(radii) + 1), dtype=np.int64)
            self._model = (*self._model_parts, exact, *self._model_tail, lists)
            self._model_version = f.version
        return self._model

    def set_reach(self, center: np.ndarray, reach: float) -> None:
        """Skip the per-axis clipping of field indices when every sphere centre stays within
        ``reach`` m of ``center`` (3,) (a fixed point: joint 1's anchor origin) and that ball
        lies inside the grid with a node to spare."""
        f = self.field
        lo = np.floor((center - reach - (f.origin - 0.5 * f.h)) / f.h) - 1
        hi = np.floor((center + reach - (f.origin - 0.5 * f.h)) / f.h) + 1
        self._need_clip = not (np.all(lo >= 1) and np.all(hi <= np.asarray(f.shape) - 2))

    # ----------------------------------------------------------------------------- kinematics
    def rotations(self, q: np.ndarray) -> np.ndarray:
        """Anchor rotations R_1 .. R_n as (9 n, N) (row ``9 (k - 1) + 3 i + j``: ``R_k[i, j]``)
        of configurations q (N, n) rad."""
        count, n = q.shape
        if count <= _SMALL:
            return self._rotations_small(q)
        cos, sin = np.cos(q.T), np.sin(q.T)
        rot = np.empty((n, 3, 3, count))
        g = self._first
        np.multiply(g[:, 3:6, None], cos[0], out=rot[0])
        rot[0] += g[:, 0:3, None]
        rot[0] += g[:, 6:9, None] * sin[0]
        for k in range(1, n):
            g = np.matmul(self._k_t[k], rot[k - 1])  # (3, 9, N): rows of R_{k-1} times K_k
            out = rot[k]
            np.multiply(g[:, 3:6], cos[k], out=out)
            out += g[:, 0:3]
            g6 = g[:, 6:9]
            g6 *= sin[k]
            out += g6
        return rot.reshape(9 * n, count)

    def _rotations_small(self, q: np.ndarray) -> np.ndarray:
        """``rotations`` for a few configurations (fewer numpy calls): the joint rotations from
        one product, then one batched 3x3 product per joint; returned as a transposed view."""
        count, n = q.shape
        angles = q @ self._spread  # (N, 2 n + 1): q + pi / 2 (cos), q (sin), pi / 2 (one)
        angles += self._phase
        loc = np.sin(angles, out=angles) @ self._trig
        loc = loc.reshape(count, n, 3, 3)
        for k in range(1, n):  # in place: loc[:, k] becomes R_k
            np.matmul(loc[:, k - 1], loc[:, k], out=loc[:, k])
        return loc.reshape(count, 9 * n).T

    def grid_centers(self, q: np.ndarray) -> np.ndarray:
        """Centres (S + B, 3, N) in grid units of configurations q (N, n): the spheres (kernel
        order), then the bounding sphere of every body (B = 0 without body-pair culling)."""
        rot = self.rotations(q)
        u = matmul_cols(self._m, rot)  # blocks even for small batches: no BLAS threads
        u += self._y0
        return u.reshape(self._total, 3, len(q))

    def centers(self, q: np.ndarray) -> np.ndarray:
        """Sphere centres (N, S, 3) m in the base frame (kernel order)."""
        u = self.grid_centers(q)[: self.count].transpose(2, 0, 1)
        return u * self.h + (self.field.origin - 0.5 * self.h)

    # ------------------------------------------------------------------------------ validity
    def evaluate(
        self, q: np.ndarray, dq: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(free (N,), certified half widths (N,) or None) for configurations q (N, n) inside
        the limits; ``dq`` (N, n): |qb - qa| of each sample's segment, or (n,): of all
        (module doc)."""
        if len(q) <= _CHUNK:
            return self._evaluate(q, dq)
        parts = [
            self._evaluate(
                q[s : s + _CHUNK], dq if dq is None or dq.ndim == 1 else dq[s : s + _CHUNK]
            )
            for s in range(0, len(q), _CHUNK)
        ]
        ok = np.concatenate([p[0] for p in parts])
        return ok, None if dq is None else np.concatenate([p[1] for p in parts])

    def _evaluate(self, q, dq):
        e = self.n_env
        u = self.grid_centers(q)
        idx = u[:e].astype(np.intp)  # (E, 3, N) nearest nodes
        if self._need_clip:
            np.clip(idx, 0, self._upper, out=idx)
        values = self.field.at_nodes(self._strides @ idx)
        if len(self.field.exact_spheres()[1]):
            values = np.minimum(values, self._sphere_clearance(u[:e]))
        if len(q) > _SMALL and self._prune:
            return self._evaluate_pruned(u, values, dq)
        # Clearances (E + P, N) m: spheres from the obstacles, then sphere pairs.
        gap = np.empty((e + len(self.pair_a), len(q)))
        np.subtract(values, self._env_r, out=gap[:e])
        if len(self.pair_a):
            self._pair_gaps(u, self.pair_a, self.pair_b, self._pair_r, gap[e:])
        return self._verdict(gap, self._weights, dq)

    def _evaluate_pruned(self, u, values, dq):
        """``_evaluate`` after the field lookups, with the sphere pairs of only those body pairs
        whose bounding spheres come within ``margin`` in some configuration of the batch; the
        others count with their bounds' gap (a lower bound of all their sphere pairs' gaps)."""
        e, count = self.n_env, u.shape[2]
        body_gap = np.empty((len(self._bpa), count))  # (Pb, N)
        self._pair_gaps(u, self._bpa, self._bpb, self._bp_r, body_gap)
        near = body_gap.min(axis=1) < self.margin
        far = (~near).nonzero()[0]
        pairs = np.repeat(near, self._bp_counts).nonzero()[0]
        nf = len(far)
        gap = np.empty((e + nf + len(pairs), count))
        np.subtract(values, self._env_r, out=gap[:e])
        gap[e : e + nf] = body_gap[far]
        if len(pairs):
            pa, pb, r = self.pair_a[pairs], self.pair_b[pairs], self._pair_r[pairs]
            self._pair_gaps(u, pa, pb, r, gap[e + nf :])
        if dq is None:
            return self._verdict(gap, None, None)
        rows = np.concatenate((np.arange(e), e + far, e + len(self._bpa) + pairs))
        return self._verdict(gap, self._weights_all.take(rows, axis=0), dq)

    def _exact(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The field's exact spheres in grid units: centres (K, 3), squared norms (K, 1) and
        radii plus rounding (K, 1) m (cached per field version)."""
        f = self.field
        if self._exact_version != f.version:
            centers, radii = f.exact_spheres()
            c = (centers - (f.origin - 0.5 * self.h)) / self.h
            self._exact_cache = (c, np.einsum("kc,kc->k", c, c)[:, None], radii[:, None])
            self._exact_version = f.version
        return self._exact_cache

    def _sphere_clearance(self, u: np.ndarray) -> np.ndarray:
        """Exact signed distances (E, N) m from centres u (E, 3, N) (grid units) to the nearest
        of the field's exact spheres, less ``field.EXACT_ROUNDING``."""
        c, cc, r = self._exact()
        d = np.matmul(c, u)  # (E, K, N)
        d *= -2.0
        d += np.einsum("ecn,ecn->en", u, u)[:, None]
        d += cc
        np.maximum(d, 0.0, out=d)
        np.sqrt(d, out=d)
        d *= self.h
        d -= r + EXACT_ROUNDING
        return d.min(axis=1)

    def _pair_gaps(self, u, pa, pb, radii, out) -> None:
        """Into ``out`` (P, N): the gaps (m) between the spheres ``pa`` and ``pb`` (P,) of grid
        centres u (S + B, 3, N), less the sums of their radii ``radii`` (P, 1)."""
        d = u.take(pa, axis=0)
        d -= u.take(pb, axis=0)
        np.einsum("pkn,pkn->pn", d, d, out=out)
        np.sqrt(out, out=out)
        out *= self.h
        out -= radii

    def _verdict(self, gap, weights, dq):
        """(free (N,), certified half widths (N,) or None) from clearances ``gap`` (R, N) m and,
        with ``dq``, the motion weights (R, n) of its rows (``gap`` is overwritten)."""
        count = gap.shape[1]
        if gap.min() >= self.margin:  # one contiguous reduction in the common all-free case
            ok = np.ones(count, dtype=bool)
        else:
            ok = gap.min(axis=0) >= self.margin
        if dq is None:
            return ok, None
        if dq.ndim == 1:  # one segment for every sample
            motion = (weights @ dq)[:, None]
        elif count <= _SMALL:
            motion = weights @ dq.T
        else:
            motion = matmul_cols(weights, dq.T)
        np.maximum(motion, 1e-12, out=motion)  # (R, N) motion bounds over the segment
        gap /= motion
        return ok, gap.min(axis=0)


def _pair_weights(
    chain: AnchorChain,
    group: np.ndarray,
    local: np.ndarray,
    w: np.ndarray,
    pa: np.ndarray,
    pb: np.ndarray,
    pair_r: np.ndarray,
) -> np.ndarray:
    """Bounds (P, n) m/rad of how fast each sphere pair's gap shrinks per joint speed: for
    sphere a on group ``ga`` <= b's group ``gb`` (centres ``x_a``, ``x_b``; ``w`` (S, n) the
    spheres' Lipschitz weights, ``group`` (S,), ``local`` (S, 3) m anchor frame, kernel order),
    ``w_bj`` for the joints ``ga + 1 .. gb`` that move b relative to a, except joint ``ga + 1``,
    whose axis (through ``p``, direction ``u``) is fixed in a's frame: with ``d`` the distance
    of ``x_a`` from that axis, the joint changes ``|x_b - x_a|`` at a rate

        |(u x (x_b - p)) . (x_b - x_a)| / |x_b - x_a| = |(u x (x_b - p)) . (p - x_a)| / |x_b - x_a|
        <= w_bj d / |x_b - x_a| <= w_bj d / (r_a + r_b)

    (the first part ``(u x v) . v`` is zero; ``(u x v) . z`` sees only z's part across ``u``,
    of length ``d``; while the gap is not negative the distance is at least the sum of radii
    ``pair_r`` (P,) m, and a certified interval ends before the gap could reach zero). So its
    weight is ``w_bj min(1, d / pair_r)``: zero for a sphere on that axis (the UR5's base
    sphere, on joint 1's axis: its pairs no longer see joint 1, the joint that moves the arm
    most)."""
    n = w.shape[1]
    ga, gb = group[pa], group[pb]
    lo, hi = np.minimum(ga, gb), np.maximum(ga, gb)
    first = np.where(ga <= gb, pa, pb)  # the sphere on the earlier group
    later = np.where((gb >= ga)[:, None], w[pb], w[pa])
    joint = np.arange(1, n + 1)
    between = (joint[None] > lo[:, None]) & (joint[None] <= hi[:, None])
    out = later * between
    for k in range(n):  # joint k + 1 for the pairs whose earlier sphere sits on group k
        sel = (lo == k) & (hi > k)
        if not sel.any():
            continue
        u = chain.p[k] @ chain.axes[k]  # joint k + 1's axis in anchor k's frame, unit
        rel = local[first[sel]] - chain.c_trans[k]  # from a point of that axis
        d = np.linalg.norm(rel - np.outer(rel @ u, u), axis=1)
        out[sel, k] *= np.minimum(1.0, d / pair_r[sel])
    return out
