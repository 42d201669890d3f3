"""The sphere checks compiled by numba (optional: ``pip install numba``): one configuration at a
time with early exit, and whole segments in a bisection order inside one call.

``kernels()`` gives, once per process, the entry points of the functions below (called directly,
without numba's dispatcher, whose type resolution of some twenty arguments would cost more than a
check). The functions are plain Python; their source and ``@njit`` lines make one module
(``twin.numba_cache.load_generated``), compiled once per machine and then loaded from the disk
cache. ``TWIN_PLANNING_COMPILED=0`` turns it off (the numpy kernel runs), as does numba being
absent. The maths are ``kernel.SphereKernel``'s (the checker module doc), per configuration:

* Kinematics: ``R_1 = L_1``, ``R_k = R_{k-1} L_k`` with ``L_k = P_k + cos q_k AC_k + sin q_k AS_k``
  (``chain`` (n, 3, 3, 3): ``[P, AC, AS]`` of each joint, joint 1's times the base rotation);
  anchor origins ``o_1 = ctrans[0]``, ``o_k = o_{k-1} + R_{k-1} ctrans[k - 1]``; a sphere of
  group ``g >= 1`` sits at ``o_g + R_g l`` (``sph`` (T, 4): local centre m, radius m; a group-0
  sphere's entry holds its fixed base-frame centre).
* Obstacles: the field's lower bound at the nearest node (``grid`` flat float32, ``gshape`` (3,),
  ``gpar``: the grid's half-node origin (3,) m and ``1 / h``), lowered to the exact distance of
  every exact sphere (``exact`` (K, 4): centre m, radius plus rounding m), less the robot
  sphere's radius: a clearance.
* Self-collision: sphere pairs (``pairs`` (P, 2), ``pair_r`` (P,) sums of radii m); with body
  bounds (``bodies`` (Pb, 4): the two bound spheres' rows in ``sph`` and the pair range of the
  body pair; ``body_r`` (Pb,)), a body pair whose bounds keep ``margin`` apart skips its pairs
  when its bound's certified interval is no shorter than the best so far.
* A configuration is free when every clearance is at least ``margin``; its certified half width
  is ``min(clearance / motion)`` over the rows (``motion``: the rows' Lipschitz weights ``wenv``
  (E, n), ``wpair`` (P, n), ``wbody`` (Pb, n) times the segment's ``|dq|``).

Segments (``segments``): both ends, then the gaps their certified intervals leave, each gap
split at its midpoint in first-in first-out order (coarse to fine, as VAMP's bisection order),
every free sample removing its certified interval; the first blocked sample ends the segment.
Every free sample certifies at least ``margin / max motion``, so the count of samples is bounded
(``_queue_size``); a segment that would need more is reported blocked (conservative).
Blends (``blends``: the quadratic Beziers of ``motion.curve``): the same order, each sample's
interval certified with the joints' speed bound ``max(|2 (c - a)|, |2 (b - c)|)`` (the
derivative is linear in the parameter); about 15x fewer checks than fixed fine spacing.
Prefixes (``prefixes``): from ``qa`` forward, each next sample one certified half width past the
covered part (halved until the intervals meet); the parameter of the last free sample before
the first blocked one.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from twin import numba_cache

#: Lower bound of a row's motion over a segment (m), as the numpy kernel's.
MIN_MOTION = 1e-12
#: Exact spheres from which ``check`` first lists, per group, those its bound comes near; the
#: slack (m) those lists add to the bound (rounding: a listed sphere is only ever one more test).
CULL_MIN = 4
CULL_SLACK = 1e-9


# ------------------------------------------------------------------ compiled functions
def fk(q, chain, ctrans, sph, grp, x, rot, org):
    """Sphere centres ``x`` (T, 3) m of configuration q (n,) rad (module doc); ``rot`` (n, 3, 3)
    and ``org`` (n, 3) receive the anchors' rotations and origins."""
    n = q.shape[0]
    for k in range(n):
        c = math.cos(q[k])
        s = math.sin(q[k])
        if k == 0:
            for i in range(3):
                for j in range(3):
                    rot[0, i, j] = chain[0, 0, i, j] + c * chain[0, 1, i, j] + s * chain[0, 2, i, j]
            continue
        for j in range(3):  # column j of L_k, then column j of R_k = R_{k-1} L_k
            l0 = chain[k, 0, 0, j] + c * chain[k, 1, 0, j] + s * chain[k, 2, 0, j]
            l1 = chain[k, 0, 1, j] + c * chain[k, 1, 1, j] + s * chain[k, 2, 1, j]
            l2 = chain[k, 0, 2, j] + c * chain[k, 1, 2, j] + s * chain[k, 2, 2, j]
            for i in range(3):
                rot[k, i, j] = rot[k - 1, i, 0] * l0 + rot[k - 1, i, 1] * l1 + rot[k - 1, i, 2] * l2
    for i in range(3):
        org[0, i] = ctrans[0, i]
    for k in range(1, n):
        for i in range(3):
            org[k, i] = org[k - 1, i] + (
                rot[k - 1, i, 0] * ctrans[k, 0]
                + rot[k - 1, i, 1] * ctrans[k, 1]
                + rot[k - 1, i, 2] * ctrans[k, 2]
            )
    for s in range(sph.shape[0]):
        g = grp[s]
        if g == 0:
            x[s, 0] = sph[s, 0]
            x[s, 1] = sph[s, 1]
            x[s, 2] = sph[s, 2]
            continue
        lx = sph[s, 0]
        ly = sph[s, 1]
        lz = sph[s, 2]
        for i in range(3):
            x[s, i] = org[g - 1, i] + (
                rot[g - 1, i, 0] * lx + rot[g - 1, i, 1] * ly + rot[g - 1, i, 2] * lz
            )


def motions(w, dq, out):
    """Row motions ``out`` (R,) m: ``w`` (R, n) m/rad times the joint steps ``dq`` (n,) rad."""
    for r in range(w.shape[0]):
        m = 0.0
        for j in range(dq.shape[0]):
            m += w[r, j] * dq[j]
        out[r] = m if m > MIN_MOTION else MIN_MOTION


def pair_ratio(x, pairs, pair_r, mpair, lo, hi, want, margin, best):
    """-1.0 when a sphere pair ``lo .. hi - 1`` of centres ``x`` keeps less than ``margin``, else
    the least of ``best`` and the pairs' ratios of gap to motion (``want``) or 1.0. A square root
    only where the gap could fall below ``margin`` or lower ``best``."""
    for p in range(lo, hi):
        a, c = pairs[p, 0], pairs[p, 1]
        dx, dy, dz = x[a, 0] - x[c, 0], x[a, 1] - x[c, 1], x[a, 2] - x[c, 2]
        d2 = dx * dx + dy * dy + dz * dz
        reach = margin
        if want and best * mpair[p] > reach:
            reach = best * mpair[p]
        reach += pair_r[p]
        if d2 >= reach * reach:
            continue
        gap = math.sqrt(d2) - pair_r[p]
        if gap < margin:
            return -1.0
        r = gap / mpair[p]
        if r < best:
            best = r
    return best if want else 1.0


def check(q, want, limit, menv, mpair, mbody, m, x, rot, org, near):
    """-1.0 when configuration q (n,) rad is not free, else its certified half width, at most
    ``limit`` (``want``; ``menv``, ``mpair``, ``mbody``: the rows' motions over the segment) or
    1.0; ``m`` the model tuple (``kernel.SphereKernel.compiled_model``). A caller that needs no
    more than ``limit`` passes it: rows that cannot bring the width below it are skipped."""
    chain, ctrans, sph, grp, n_env, grid, gshape = m[0], m[1], m[2], m[3], m[4], m[5], m[6]
    gpar, exact, pairs, pair_r, bodies, body_r, margin = (
        m[7],
        m[8],
        m[9],
        m[10],
        m[11],
        m[12],
        m[16],
    )
    fk(q, chain, ctrans, sph, grp, x, rot, org)
    best = limit
    ne = exact.shape[0]
    cull = ne >= CULL_MIN
    if cull:  # per group, the exact spheres its bound comes near (module doc)
        gb, top = m[17], m[18]
        t = margin
        if want:
            t = top[0] if top[0] > margin + top[1] else margin + top[1]
        for g in range(1, gb.shape[0]):
            count = 0
            if gb[g] >= 0.0:
                for e in range(ne):
                    dx = org[g - 1, 0] - exact[e, 0]
                    dy = org[g - 1, 1] - exact[e, 1]
                    dz = org[g - 1, 2] - exact[e, 2]
                    lim = gb[g] + exact[e, 3] + t + CULL_SLACK
                    if dx * dx + dy * dy + dz * dz < lim * lim:
                        near[g, count + 1] = e
                        count += 1
            near[g, 0] = count
    hx, hy, hz, inv_h = gpar[0], gpar[1], gpar[2], gpar[3]
    sx, sy, sz = gshape[0], gshape[1], gshape[2]
    uniform, level = gpar[4] != 0.0, gpar[5]
    for s in range(n_env):
        px, py, pz = x[s, 0], x[s, 1], x[s, 2]
        i = int((px - hx) * inv_h)  # truncation (the nearest node), clipped onto the grid
        j = int((py - hy) * inv_h)
        k = int((pz - hz) * inv_h)
        if uniform:  # no memory access: the outer layer holds -inf, the interior ``level``
            inner = 0 < i < sx - 1 and 0 < j < sy - 1 and 0 < k < sz - 1
            v = level if inner and px >= hx and py >= hy and pz >= hz else -math.inf
        else:
            i = 0 if i < 0 else (sx - 1 if i > sx - 1 else i)
            j = 0 if j < 0 else (sy - 1 if j > sy - 1 else j)
            k = 0 if k < 0 else (sz - 1 if k > sz - 1 else k)
            v = float(grid[(i * sy + j) * sz + k])
        rs = sph[s, 3]
        if v - rs < margin:
            return -1.0
        # An exact sphere matters only where it brings the clearance below ``margin`` or (with
        # ``want``) lowers ``v`` below both its value and what would lower ``best``: compared
        # squared, without a square root.
        cap = margin + rs
        if want:
            cap = best * menv[s] + rs
            cap = v if v < cap else cap
            cap = margin + rs if cap < margin + rs else cap
        lowered = False
        g = grp[s]
        listed = cull and g > 0
        for i_e in range(near[g, 0] if listed else ne):
            e = near[g, i_e + 1] if listed else i_e
            dx, dy, dz = px - exact[e, 0], py - exact[e, 1], pz - exact[e, 2]
            d2 = dx * dx + dy * dy + dz * dz
            lim = cap + exact[e, 3]
            if d2 >= lim * lim:
                continue
            if not want:
                return -1.0
            d = math.sqrt(d2) - exact[e, 3]
            if d - rs < margin:
                return -1.0
            if d < cap:
                cap = d
                lowered = True
        if want:
            r = ((cap if lowered else v) - rs) / menv[s]
            if r < best:
                best = r
    if bodies.shape[0] == 0:
        return pair_ratio(x, pairs, pair_r, mpair, 0, pairs.shape[0], want, margin, best)
    for b in range(bodies.shape[0]):
        a, c = bodies[b, 0], bodies[b, 1]
        dx, dy, dz = x[a, 0] - x[c, 0], x[a, 1] - x[c, 1], x[a, 2] - x[c, 2]
        bg = math.sqrt(dx * dx + dy * dy + dz * dz) - body_r[b]
        rb = -1.0
        if bg >= margin:  # the bounds' gap stands in for the pairs' when it certifies as long
            if not want:
                continue
            rb = bg / mbody[b]
            if rb >= best:
                continue
        r = pair_ratio(x, pairs, pair_r, mpair, bodies[b, 2], bodies[b, 3], want, margin, best)
        if r < 0.0:
            return -1.0
        r = r if r > rb else rb
        best = r if r < best else best
    return best if want else 1.0


def _queue_size(mrows):
    """Room for the pending gaps of one segment: every free sample certifies at least
    ``margin / max motion`` (module doc)."""
    return int(mrows) + 8


def evaluate(q, dq, want, m, ok, width, counter):
    """Free ``ok`` (N,) and certified half widths ``width`` (N,) of configurations q (N, n)
    inside the limits; ``dq`` (D, n) rad, D = 1 (one segment for all) or N (per row); unused
    without ``want``."""
    count, n = q.shape
    sph, n_env, pairs, bodies = m[2], m[4], m[9], m[11]
    wenv, wpair, wbody = m[13], m[14], m[15]
    x = np.empty((sph.shape[0], 3))
    rot = np.empty((n, 3, 3))
    org = np.empty((n, 3))
    menv = np.empty(n_env)
    mpair = np.empty(pairs.shape[0])
    mbody = np.empty(bodies.shape[0])
    near = m[19]  # the model's scratch of the per-group lists (``kernel.compiled_model``)
    for r in range(count):
        if want and (r == 0 or dq.shape[0] > 1):
            motions(wenv, dq[r if dq.shape[0] > 1 else 0], menv)
            motions(wpair, dq[r if dq.shape[0] > 1 else 0], mpair)
            motions(wbody, dq[r if dq.shape[0] > 1 else 0], mbody)
        w = check(q[r], want, math.inf, menv, mpair, mbody, m, x, rot, org, near)
        ok[r] = 1 if w >= 0.0 else 0
        width[r] = w if w > 0.0 else 0.0
    counter[0] += count


def work(m, n):
    """Scratch arrays of one thread: centres, rotations, origins, row motions, joint steps, a
    configuration and the model's per-group lists."""
    sph, n_env, pairs, bodies = m[2], m[4], m[9], m[11]
    return (
        np.empty((sph.shape[0], 3)),
        np.empty((n, 3, 3)),
        np.empty((n, 3)),
        np.empty(n_env),
        np.empty(pairs.shape[0]),
        np.empty(bodies.shape[0]),
        np.empty(n),
        np.empty(n),
        m[19],
    )


def set_motions(qa, qb, m, w):
    """The row motions of segment qa -> qb (n,) into the scratch ``w``; the largest of them."""
    dq = w[6]
    for j in range(qa.shape[0]):
        dq[j] = abs(qb[j] - qa[j])
    return row_motions(m, w)


def row_motions(m, w):
    """The row motions of the joint speed bounds in the scratch ``w`` (``w[6]`` (n,) rad per
    unit of the parameter) into ``w``; the largest of them."""
    dq, menv, mpair, mbody = w[6], w[3], w[4], w[5]
    motions(m[13], dq, menv)
    motions(m[14], dq, mpair)
    motions(m[15], dq, mbody)
    top = 0.0
    for v in menv:
        top = v if v > top else top
    for v in mpair:
        top = v if v > top else top
    for v in mbody:
        top = v if v > top else top
    return top


def inside(q, lower, upper):
    """Whether q (n,) lies in the box ``lower``, ``upper`` (a loop: numba compiles no generator)."""
    for j in range(q.shape[0]):  # noqa: SIM110
        if not (lower[j] <= q[j] <= upper[j]):
            return False
    return True


def segment_one(qa, qb, lower, upper, m, w, counter, first):
    """(segment free, start free, end free) of qa -> qb (n,) rad (module doc) as bits 1, 2, 4;
    0 when an end lies outside the limits. ``first``: -1, both ends are checked (all three
    bits); 0 or 1, only the verdict is wanted: that end (qa or qb) is checked first and the
    check stops (0) where an end is blocked (a search's new configuration first: most blocked
    edges end blocked, and their other end is a tree node, known free). A segment is checked
    from its lexicographically smaller end, so that qa -> qb and qb -> qa sample the same
    configurations (a path re-checked backwards, e.g. along a roadmap edge, gets the same
    verdict)."""
    if not (inside(qa, lower, upper) and inside(qb, lower, upper)):
        return 0
    for j in range(qa.shape[0]):
        if qa[j] != qb[j]:
            if qa[j] > qb[j]:
                bits = segment_forward(qb, qa, m, w, counter, first if first < 0 else 1 - first)
                return (bits & 1) + ((bits & 2) << 1) + ((bits & 4) >> 1)
            break
    return segment_forward(qa, qb, m, w, counter, first)


def segment_forward(qa, qb, m, w, counter, first):
    """``segment_one`` of a segment inside the limits, in the given direction."""
    top = set_motions(qa, qb, m, w)
    return sweep(qa, qb, qb, False, top, m, w, counter, first)


def point(qa, qc, qb, t, quad, q):
    """Into q (n,): the point at t of the segment qa -> qb or, with ``quad``, of the quadratic
    Bezier with control points qa, qc, qb (n,) rad."""
    if quad:
        u = 1.0 - t
        for j in range(q.shape[0]):
            q[j] = u * u * qa[j] + 2.0 * t * u * qc[j] + t * t * qb[j]
        return
    for j in range(q.shape[0]):
        q[j] = qa[j] + t * (qb[j] - qa[j])


def sweep(qa, qc, qb, quad, top, m, w, counter, first):
    """(free, start free, end free) as bits 1, 2, 4 of the curve ``point`` from qa (t = 0) to qb
    (t = 1), its row motions already in ``w`` (``top``: the largest): both ends (``first``:
    ``segment_one``), then the gaps their certified intervals leave, split at their midpoints
    (module doc)."""
    x, rot, org, menv, mpair, mbody, q = w[0], w[1], w[2], w[3], w[4], w[5], w[7]
    if first == 1:  # 1.0: a width that covers all of it
        r1 = check(qb, True, 1.0, menv, mpair, mbody, m, x, rot, org, w[8])
        counter[0] += 1
        if r1 < 0.0:
            return 0
    r0 = check(qa, True, 1.0, menv, mpair, mbody, m, x, rot, org, w[8])
    counter[0] += 1
    if first == 0 and r0 < 0.0:
        return 0
    if first != 1:
        r1 = check(qb, True, 1.0, menv, mpair, mbody, m, x, rot, org, w[8])
        counter[0] += 1
    bits = (2 if r0 >= 0.0 else 0) + (4 if r1 >= 0.0 else 0)
    if bits != 6:
        return bits
    size = _queue_size(top / m[16])
    queue = np.empty((size, 2))
    head = 0
    tail = 0
    if r0 < 1.0 - r1:
        queue[0, 0] = r0
        queue[0, 1] = 1.0 - r1
        tail = 1
    while head != tail:
        lo, hi = queue[head % size, 0], queue[head % size, 1]
        head += 1
        t = 0.5 * (lo + hi)
        point(qa, qc, qb, t, quad, q)
        # a width of at least hi - lo leaves no gap: the same samples as without the cap
        r = check(q, True, 2.0 * (hi - lo), menv, mpair, mbody, m, x, rot, org, w[8])
        counter[0] += 1
        if r < 0.0:
            return bits
        for a, b in ((lo, t - r), (t + r, hi)):
            if b > a:
                if tail - head >= size:
                    return bits  # more samples than the bound allows: reported blocked
                queue[tail % size, 0] = a
                queue[tail % size, 1] = b
                tail += 1
    return bits + 1


def blend_one(qa, qc, qb, lower, upper, m, w, counter):
    """1 when the quadratic Bezier with control points qa, qc, qb (n,) rad is free, else 0 (0
    when a control point lies outside the limits: the curve lies in their box). Its joints move
    at most ``max(|2 (qc - qa)|, |2 (qb - qc)|)`` per unit of its parameter (its derivative is
    linear in the parameter), which sets the certified intervals."""
    if not (inside(qa, lower, upper) and inside(qc, lower, upper) and inside(qb, lower, upper)):
        return 0
    dq = w[6]
    for j in range(qa.shape[0]):
        d0 = abs(2.0 * (qc[j] - qa[j]))
        d1 = abs(2.0 * (qb[j] - qc[j]))
        dq[j] = d0 if d0 > d1 else d1
    top = row_motions(m, w)
    return 1 if sweep(qa, qc, qb, True, top, m, w, counter, 0) == 7 else 0


def prefix_one(qa, qb, lower, upper, m, w, counter):
    """For qa -> qb (n,) rad (qa free), the parameter of the last free sample before the first
    blocked one, covered from 0 (1.0: all free; 0.0 when qb lies outside the limits)."""
    if not inside(qb, lower, upper):
        return 0.0
    x, rot, org, menv, mpair, mbody, q = w[0], w[1], w[2], w[3], w[4], w[5], w[7]
    set_motions(qa, qb, m, w)
    r = check(qa, True, 1.0, menv, mpair, mbody, m, x, rot, org, w[8])
    counter[0] += 1
    if r < 0.0:
        return 0.0
    covered = r  # [0, covered] is certified
    last = 0.0
    step = r
    n = qa.shape[0]
    while covered < 1.0:
        t = covered + step
        t = 1.0 if t > 1.0 else t
        for j in range(n):
            q[j] = qa[j] + t * (qb[j] - qa[j])
        # a width of at least this covers [covered, 1]: the same samples as without the cap
        need = 1.0 - t if 1.0 - t > t - covered else t - covered
        r = check(q, True, 2.0 * need, menv, mpair, mbody, m, x, rot, org, w[8])
        counter[0] += 1
        if r < 0.0:
            break
        if t - r <= covered:
            last = t
            covered = t + r
            step = r
            if t >= 1.0:
                break
        else:  # a gap before t: a nearer sample
            half = 0.5 * (t - covered)
            step = r if r < half else half
    return 1.0 if covered >= 1.0 else last


def segments(qa, qb, lower, upper, m, out, counter):
    """``out`` (K, 3): (segment free, start free, end free) of segments qa -> qb (K, n) rad
    (module doc); all three 0 when an end lies outside the limits (``lower``, ``upper`` (n,))."""
    w = work(m, qa.shape[1])
    for s in range(qa.shape[0]):
        bits = segment_one(qa[s], qb[s], lower, upper, m, w, counter, -1)
        out[s, 0] = bits & 1
        out[s, 1] = (bits >> 1) & 1
        out[s, 2] = (bits >> 2) & 1


def blends(qa, qc, qb, lower, upper, m, out, counter):
    """``out`` (K,): ``blend_one`` of the quadratic Beziers qa, qc, qb (K, n) rad."""
    w = work(m, qa.shape[1])
    for s in range(qa.shape[0]):
        out[s] = blend_one(qa[s], qc[s], qb[s], lower, upper, m, w, counter)


def prefixes(qa, qb, lower, upper, m, out, counter):
    """``out`` (K,): ``prefix_one`` of segments qa -> qb (K, n) rad."""
    w = work(m, qa.shape[1])
    for s in range(qa.shape[0]):
        out[s] = prefix_one(qa[s], qb[s], lower, upper, m, w, counter)


def nearest(nodes, size, q):
    """Index of the node of ``nodes[:size]`` (N, n) nearest to q (n,) (Euclidean)."""
    best = math.inf
    at = 0
    for i in range(size):
        d = 0.0
        for j in range(q.shape[0]):
            e = nodes[i, j] - q[j]
            d += e * e
        if d < best:
            best = d
            at = i
    return at


def rrt_chunk(nodes, parent, radius, size, state, samples, lower, upper, step, domain, m, counter):
    """Iterations of RRT-Connect (``search.rrt`` module doc) over the two trees ``nodes`` (2, C,
    n) rad, ``parent`` (2, C), ``radius`` (2, C) rad (dynamic domain), ``size`` (2,), one per
    row of ``samples`` (I, B, n) rad; ``state``: [active tree, found, start-tree node, goal-tree
    node, iterations done]. ``domain``: [initial radius, minimum, alpha, retry fraction]. The caller leaves room
    for every node these iterations can add."""
    n = nodes.shape[2]
    batch = samples.shape[1]
    w = work(m, n)
    near = np.empty(batch, dtype=np.int64)
    q_new = np.empty((batch, n))
    keep = np.empty(batch, dtype=np.bool_)
    ok = np.empty(batch, dtype=np.bool_)
    part = np.empty(batch, dtype=np.bool_)
    new_nodes = np.empty(batch, dtype=np.int64)
    q_near = np.empty(n)
    for it in range(samples.shape[0]):
        a = state[0]
        b = 1 - a
        for i in range(batch):  # extend: nearest nodes first, then the edges, then the radii
            target = samples[it, i]
            j = nearest(nodes[a], size[a], target)
            near[i] = j
            dist = 0.0
            for k in range(n):
                e = target[k] - nodes[a, j, k]
                dist += e * e
            dist = math.sqrt(dist)
            keep[i] = dist > 1e-9 and dist <= radius[a, j]
            scale = step / (dist if dist > 1e-12 else 1e-12) if dist > step else 1.0
            for k in range(n):
                q_new[i, k] = nodes[a, j, k] + (target[k] - nodes[a, j, k]) * scale
        for i in range(batch):  # a blocked edge retries its first ``domain[3]``
            ok[i] = (
                keep[i]
                and (segment_one(nodes[a, near[i]], q_new[i], lower, upper, m, w, counter, 1) & 1)
                == 1
            )
            part[i] = keep[i] and not ok[i]
            if part[i]:  # blocked: the first ``domain[3]`` of the edge
                j = near[i]
                for k in range(n):
                    q_new[i, k] = nodes[a, j, k] + domain[3] * (q_new[i, k] - nodes[a, j, k])
                bits = segment_one(nodes[a, j], q_new[i], lower, upper, m, w, counter, 1)
                part[i] = (bits & 1) == 1
        count = 0
        for i in range(batch):
            if not keep[i]:
                continue
            j = near[i]
            r = radius[a, j]
            if ok[i]:
                if r < math.inf:
                    radius[a, j] = r * (1.0 + domain[2])
            else:
                shrunk = r * (1.0 - domain[2])
                radius[a, j] = domain[0] if r == math.inf else max(shrunk, domain[1])
        for i in range(batch):
            if ok[i] or part[i]:
                s = size[a]
                nodes[a, s] = q_new[i]
                parent[a, s] = near[i]
                radius[a, s] = math.inf
                size[a] = s + 1
                new_nodes[count] = s
                count += 1
        hit_a = -1
        hit_b = -1
        if count > 0:  # connect: the other tree straight towards every new node
            for i in range(count):
                near[i] = nearest(nodes[b], size[b], nodes[a, new_nodes[i]])
            for i in range(count):
                target = nodes[a, new_nodes[i]]
                j = near[i]
                q_near[:] = nodes[b, j]
                frac = prefix_one(q_near, target, lower, upper, m, w, counter)
                dist = 0.0
                for k in range(n):
                    e = target[k] - q_near[k]
                    dist += e * e
                dist = math.sqrt(dist)
                if frac <= 0.0 or dist < 1e-12:
                    continue
                pieces = max(1, math.ceil(frac * dist / step))
                par = j
                for p in range(1, pieces + 1):
                    s = size[b]
                    if frac >= 1.0 and p == pieces:
                        nodes[b, s] = target
                    else:
                        f = frac * p / pieces
                        for k in range(n):
                            nodes[b, s, k] = q_near[k] + f * (target[k] - q_near[k])
                    parent[b, s] = par
                    radius[b, s] = math.inf
                    size[b] = s + 1
                    par = s
                if frac >= 1.0 and hit_a < 0:
                    hit_a = new_nodes[i]
                    hit_b = par
        state[4] += 1
        if hit_a >= 0:
            state[1] = 1
            state[2] = hit_a if a == 0 else hit_b
            state[3] = hit_b if a == 0 else hit_a
            return
        sa, sb = size[a], size[b]  # VAMP's balance: swap unless the other has grown twice as big
        if abs(sa - sb) / sa < 1.0:
            state[0] = b


_HELPERS = (
    fk, motions, pair_ratio, check, _queue_size, work, set_motions, row_motions, inside, point,
    sweep, segment_forward, segment_one, blend_one, prefix_one, nearest,
)  # fmt: skip
_ENTRIES = (evaluate, segments, prefixes, blends, rrt_chunk)


def source() -> str:
    """The compiled module's source (module doc)."""
    head = [
        "import math",
        "",
        "import numpy as np",
        "from numba import njit",
        "",
        f"MIN_MOTION = {MIN_MOTION!r}",
        f"CULL_MIN = {CULL_MIN!r}",
        f"CULL_SLACK = {CULL_SLACK!r}",
        "",
    ]
    functions = [(fn, numba_cache.NJIT) for fn in _HELPERS + _ENTRIES]
    return numba_cache.njit_source(__name__, head, functions)


def enabled() -> bool:
    """Whether compiled checks are wanted (``TWIN_PLANNING_COMPILED`` not "0") and numba is
    importable."""
    return numba_cache.enabled("TWIN_PLANNING_COMPILED")


def kernels() -> SimpleNamespace | None:
    """The compiled module's dispatchers (``evaluate``, ``segments``, ``prefixes``, ``blends``,
    ``rrt_chunk``) plus ``load_s``; None when disabled or without numba."""
    names = [fn.__name__ for fn in _ENTRIES]
    return numba_cache.compiled_module(
        "twin_planning_checks", "TWIN_PLANNING_COMPILED", source, names
    )


class Entry:
    """Calls one compiled function through its entry point (no type dispatch) after a first
    call through the dispatcher; every later call must pass the same argument types."""

    def __init__(self, dispatcher) -> None:
        self._dispatcher = dispatcher
        self._fn = None

    def __call__(self, *args) -> None:
        if self._fn is None:
            self._dispatcher(*args)
            d = self._dispatcher
            self._fn = d.overloads[d.signatures[-1]].entry_point
            return
        self._fn(*args)
