"""Closed-form IK of 6R arms with a spherical wrist, derived from the URDF geometry.

Supported geometry (checked at load, in the zero configuration): axis 1 not parallel to axis
2; axes 2 and 3 parallel; axes 4, 5, 6 meeting in one point, the wrist centre; consecutive
wrist axes not parallel. Offsets (shoulder, lateral, elbow) are arbitrary. With the joint
screws ``xi_i`` in the base frame at ``q = 0`` (product of exponentials),
``base_T_link(q) = exp(xi_1 q1) ... exp(xi_6 q6) M`` and the wrist centre ``c`` moves with
``q1..q3`` only, so the problem splits into Paden-Kahan subproblems:

* q1: the wrist centre's coordinate along axis 2 does not change with q2, q3 (subproblem 4);
  two roots, the *shoulder* flag.
* q3: the distance from axis 2 to the wrist centre (subproblem 3); two roots, the *elbow* flag.
* q2: one rotation about axis 2 (subproblem 1).
* q4, q5: two rotations taking axis 6 to its target direction (subproblem 2); two roots, the
  *wrist* flag. q6: one rotation (subproblem 1).

Posture flags are +1/-1 and are also computed from any configuration by ``posture(q)``:
shoulder = side of the wrist centre relative to axis 1 (+1: in front, the side the arm reaches
at q1 = 0 for the shipped arm), elbow = sign of ``sin(q3 - q3_stretched)``, wrist = sign of the
q5 bend away from the wrist singularity. Singular cases pick the free angle from the reference
configuration: shoulder (wrist centre on axis 1: q1), wrist (axes 4 and 6 aligned: q4, the rest
goes to q6), wrist centre on axis 2 (q2). A stretched elbow is clamped, not rejected, within
``REACH_TOL``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from twin.kinematics import vec3 as v3

if TYPE_CHECKING:
    from twin.kinematics.arm_data import ArmData

#: Tolerance (m, or unit-vector components) of the geometry checks at load.
GEOMETRY_TOL = 1e-9
#: Slack on cosines of the reach conditions: beyond +-1 by less than this is clamped.
REACH_TOL = 1e-10
#: Below this norm (m or unit-vector components) an angle is free and taken from the reference.
SINGULAR_EPS = 1e-12
#: Slack (rad) on joint limits; solutions within it are clipped onto the limit.
LIMIT_TOL = 1e-10
#: The posture of each of the 8 branches: rows ``[shoulder, elbow, wrist]``.
POSTURES = np.array([[s, e, w] for s in (1, -1) for e in (1, -1) for w in (1, -1)], dtype=np.int8)
POSTURES.flags.writeable = False
#: Poses solved per pass of the batched kernel: large batches stream through it in chunks of
#: this size, so the temporaries (about 50 arrays of up to 8 x chunk floats, a few MB) stay
#: near the caches whatever N is, and peak memory is the output plus a constant. Measured
#: (``bench_kinematics``): 1,024 to 8,192 run alike, one pass of 65,536 about 25 % slower.
CHUNK = 2048
_SIGNS = np.array([1.0, -1.0])
_TWO_PI = 2.0 * np.pi
#: ``floor(x + WRAP_ROUND)`` rounds the number of turns between an angle and its reference: a
#: half-turn is rounded up, and a tie (an angle exactly pi from the reference, as the free joint
#: of a wrist singularity gives) stays a tie an ulp either side, so that the batched kernel and
#: the single-pose code (``scalar_ik``, whose ``atan2`` may round an ulp apart) wrap it alike.
WRAP_ROUND = 0.5 + 1e-9


class NoClosedFormError(RuntimeError):
    """The arm's geometry has no closed-form IK here; use the numeric IK."""


def branch_index(flags: np.ndarray) -> int:
    """Index 0..7 of the branch with posture ``flags`` (3,) ``[shoulder, elbow, wrist]``."""
    s, e, w = (int(f) for f in flags)
    return (1 - s) * 2 + (1 - e) + (1 - w) // 2


@dataclass(frozen=True, eq=False)
class IkSolutions:
    """Solutions of one pose: ``configurations`` (k, 6) rad inside the limits, their
    ``postures`` (k, 3) int ``[shoulder, elbow, wrist]``; ``reason`` says why k = 0.
    At a singular pose two postures may share one configuration."""

    configurations: np.ndarray
    postures: np.ndarray
    reason: str = ""

    def __len__(self) -> int:
        return len(self.configurations)


@dataclass(frozen=True, eq=False)
class IkBatch:
    """Closed-form IK of N poses: ``q`` (N, 8, 6) rad (NaN where invalid), ``valid`` (N, 8),
    ``postures`` (8, 3) of the branches, ``reachable`` (N,): some branch reaches the pose if
    joint limits are ignored."""

    q: np.ndarray
    valid: np.ndarray
    postures: np.ndarray
    reachable: np.ndarray

    def solutions(self, i: int) -> IkSolutions:
        keep = self.valid[i]
        if not keep.any():
            reason = (
                "every solution violates the joint limits"
                if self.reachable[i]
                else "pose out of reach of the arm"
            )
        else:
            reason = ""
        return IkSolutions(self.q[i][keep], self.postures[keep], reason)


def _perp(axis: np.ndarray, v: np.ndarray) -> np.ndarray:
    return v - ((v @ axis)[..., None]) * axis


def _to4(x: np.ndarray) -> np.ndarray:
    """A (2, N) shoulder or (2, 2, N) shoulder x elbow array, broadcastable to (2, 2, 2, N)."""
    if x.ndim == 2:
        return x[:, None, None, :]
    return x[:, :, None, :] if x.ndim == 3 else x


def _cos_sin_of_acos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``cos``, ``sin`` of ``acos(x)`` with ``x`` clipped to [-1, 1] (``sin`` >= 0)."""
    c = np.clip(x, -1.0, 1.0)
    return c, np.sqrt((1.0 - c) * (1.0 + c))


def _angle_cos_sin(
    y: np.ndarray,
    x: np.ndarray,
    free: np.ndarray | None = None,
    is_free: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Angle ``atan2(y, x)`` with its cosine and sine; where ``is_free`` (a singular case)
    the angle is ``free`` (the reference, broadcastable) wrapped into [-pi, pi]."""
    h = np.sqrt(x * x + y * y)
    if is_free is not None and is_free.any():
        angle = np.where(is_free, free, np.arctan2(y, x))
        c, s = np.cos(angle), np.sin(angle)
        return np.arctan2(s, c), c, s
    return v3.atan2(y, x, h), x / h, y / h  # h = 0 only in invalid branches (NaN, masked)


def _half_turn(a: np.ndarray) -> np.ndarray:
    """``a + pi`` wrapped into [-pi, pi] for ``a`` in [-pi, pi]."""
    return a - np.copysign(np.pi, a)


def _flag(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0.0, 1, -1).astype(np.int8)


class SphericalWristIk:
    """The closed form of one arm; ``build`` checks the geometry and returns it or a reason."""

    def __init__(self, model: ArmData, w: np.ndarray, o: np.ndarray, c: np.ndarray) -> None:
        self.model = model
        self.w = w  # (6, 3) joint axes, base frame, q = 0
        self.o = o  # (6, 3) a point on each axis (the joint frame origin), m
        self.c = c  # (3,) wrist centre at q = 0, m
        self.wc = tuple(v3.const(x) for x in w)  # the axes as float tuples (vec3)
        self.oc = tuple(v3.const(x) for x in o[:3])
        self.c_o3 = v3.const(c - o[2])
        w1, w2, w3, w4, w5, w6 = w
        self.sigma = float(np.sign(w2 @ w3))  # axis 3 = sigma * axis 2
        # q1 (subproblem 4): cos(q1) A + sin(q1) B = D with A, B, D linear in p_wc - o1.
        self.k12 = float(w1 @ w2)
        self.e2p = v3.const(w2 - self.k12 * w1)
        self.n12 = v3.const(np.cross(w1, w2))
        self.d12 = float(w2 @ (c - o[0]))
        # q3 (subproblem 3): the elbow triangle in the plane normal to axis 3.
        u3 = _perp(w3, c - o[2])
        t3 = _perp(w3, o[1] - o[2])
        self.len_u3 = float(np.linalg.norm(u3))
        self.len_v3 = float(np.linalg.norm(t3))
        self.theta0 = float(np.arctan2(w3 @ np.cross(u3, t3), u3 @ t3))  # q3, folded elbow
        self.q3_stretched = float(np.arctan2(-np.sin(self.theta0), -np.cos(self.theta0)))
        # q4, q5 (subproblem 2): rotations about axes 4, 5 taking axis 6 to its target.
        self.k45 = float(w4 @ w5)
        self.k56 = float(w5 @ w6)
        self.n45 = v3.const(np.cross(w4, w5))
        self.n45_sq = float(np.cross(w4, w5) @ np.cross(w4, w5))
        self.n54 = v3.const(np.cross(w5, w4))
        self.w5p = v3.const(_perp(w4, w5))  # axis 5's part normal to axis 4
        self.n45_neg = v3.const(-np.cross(w4, w5))
        self.s46 = float(np.sign(w4 @ w6))
        self.orthogonal_wrist = bool(
            np.linalg.norm(np.cross(w4, w6)) < GEOMETRY_TOL
            and abs(self.k45) < GEOMETRY_TOL
            and abs(self.k56) < GEOMETRY_TOL
        )
        self.w6p = v3.const(_perp(w5, w6))
        p6 = np.cross(w6, np.eye(3)[np.argmin(np.abs(w6))])
        self.p6_array = p6 / np.linalg.norm(p6)  # a unit vector normal to axis 6
        self.p6 = v3.const(self.p6_array)
        self._links: dict[str, np.ndarray] = {}
        #: Generated single-pose code per link, filled by ``scalar_ik.for_link``.
        self.scalar_code: dict[str, object] = {}

    def __getstate__(self) -> dict:
        """Pickle without the generated code (rebuilt on first use)."""
        return {**self.__dict__, "scalar_code": {}}

    @classmethod
    def build(cls, model: ArmData) -> SphericalWristIk | str:
        """The solver for ``model``, or a string saying which geometric condition fails."""
        if model.n_joints != 6:
            return f"the closed form needs 6 revolute joints, the arm has {model.n_joints}"
        by_name = {j.name: j for j in model.robot.joints}
        children = [by_name[n].child for n in model.joint_names]
        frames = model.tree.rotations_translations(np.zeros((1, 6)), tuple(children))
        w = np.array(
            [frames[ch][0][0] @ by_name[n].axis for n, ch in zip(model.joint_names, children)]
        )
        o = np.array([frames[ch][1][0] for ch in children])
        if np.linalg.norm(np.cross(w[0], w[1])) < 1e-6:
            return "axes 1 and 2 are parallel"
        if np.linalg.norm(np.cross(w[1], w[2])) > GEOMETRY_TOL:
            return "axes 2 and 3 are not parallel"
        n45 = np.cross(w[3], w[4])
        n56 = np.cross(w[4], w[5])
        if np.linalg.norm(n45) < 1e-6 or np.linalg.norm(n56) < 1e-6:
            return "consecutive wrist axes are parallel"
        d45 = abs((o[4] - o[3]) @ n45) / np.linalg.norm(n45)
        t = np.cross(o[4] - o[3], w[4]) @ n45 / (n45 @ n45)
        c = o[3] + t * w[3]
        d6 = np.linalg.norm(np.cross(c - o[5], w[5]))
        if max(d45, d6) > GEOMETRY_TOL:
            return (
                "the wrist is not spherical: axes 4, 5, 6 miss a common point by "
                f"{max(d45, d6):.3g} m"
            )
        if (
            np.linalg.norm(_perp(w[2], c - o[2])) < 1e-6
            or np.linalg.norm(_perp(w[2], o[1] - o[2])) < 1e-6
        ):
            return "the wrist centre or axis 2 lies on axis 3"
        return cls(model, w, o, c)

    def link_constants(self, link: str) -> np.ndarray:
        """(3, 3) columns: wrist centre (m), axis 6 and a normal to it, in ``link``'s frame."""
        if link not in self._links:
            tree = self.model.tree
            if tree.path_joints(link) != tuple(range(6)):
                raise ValueError(
                    f"closed-form IK needs a link beyond joint 6, got {link!r} "
                    f"(which moves with joints {tree.path_joints(link)})"
                )
            r, p = tree.rotations_translations(np.zeros((1, 6)), (link,))[link]
            rt = r[0].T
            cols = (rt @ (self.c - p[0]), rt @ self.w[5], rt @ self.p6_array)
            self._links[link] = np.stack(cols, axis=1)
        return self._links[link]

    def solve(self, poses: np.ndarray, ref: np.ndarray, link: str) -> IkBatch:
        """All 8 branches for poses (N, 4, 4) ``base_T_link``; free angles and ``+-2 pi``
        wraps follow ``ref`` (N, 6) rad.

        Arrays carry the branch axes first and the pose axis last (``(2, N)`` shoulder,
        ``(2, 2, N)`` shoulder x elbow, ``(2, 2, 2, N)`` all), so numpy's inner loops run
        over N; batches beyond ``CHUNK`` poses run chunk by chunk into the output. Cosines and sines come from the subproblems' own atan2 arguments; one
        ``arctan2`` per angle gives the angle itself.
        """
        n = poses.shape[0]
        with np.errstate(divide="ignore", invalid="ignore"):  # invalid branches may divide by 0
            if n <= CHUNK:
                return self._solve(poses, ref, link)
            q = np.empty((n, 8, 6))
            valid = np.empty((n, 8), dtype=bool)
            reachable = np.empty(n, dtype=bool)
            for start in range(0, n, CHUNK):
                part = self._solve(poses[start : start + CHUNK], ref[start : start + CHUNK], link)
                q[start : start + CHUNK] = part.q
                valid[start : start + CHUNK] = part.valid
                reachable[start : start + CHUNK] = part.reachable
        return IkBatch(q=q, valid=valid, postures=POSTURES, reachable=reachable)

    def _solve(self, poses: np.ndarray, ref: np.ndarray, link: str) -> IkBatch:
        w1, w2, w3 = self.wc[:3]
        o1, o2, o3 = self.oc
        n = poses.shape[0]
        ref_t = np.ascontiguousarray(ref.T)  # (6, N)
        rot = np.ascontiguousarray(poses[:, :3, :3]).reshape(3 * n, 3)
        cols = (rot @ self.link_constants(link)).reshape(n, 3, 3).transpose(2, 1, 0)
        wv = v3.sub(tuple(poses[:, :3, 3].T + cols[0]), o1)  # wrist centre - o1, (N,) each
        v0, u0 = tuple(cols[1]), tuple(cols[2])  # targets of axis 6 and of a normal to it
        # q1: shoulder branches (2, N), subproblem 4: q1 = phi +- acos(D / rho).
        a_, b_ = v3.dot_const(self.e2p, wv), v3.dot_const(self.n12, wv)
        d_ = self.d12 - self.k12 * v3.dot_const(w1, wv)
        rho = np.sqrt(a_ * a_ + b_ * b_)
        free1 = rho < SINGULAR_EPS
        safe_rho = np.where(free1, 1.0, rho)
        ratio = d_ / safe_rho
        ok1 = np.where(free1, np.abs(d_) < SINGULAR_EPS, np.abs(ratio) <= 1.0 + REACH_TOL)
        ca, sa = _cos_sin_of_acos(ratio)
        cphi, sphi = a_ / safe_rho, b_ / safe_rho
        c1 = cphi * ca - _SIGNS[:, None] * (sphi * sa)
        s1 = sphi * ca + _SIGNS[:, None] * (cphi * sa)
        if free1.any():
            free_q1 = ref_t[0] + np.array([[0.0], [np.pi]])
            c1 = np.where(free1, np.cos(free_q1), c1)
            s1 = np.where(free1, np.sin(free_q1), s1)
        q1 = v3.atan2(s1, c1, 1.0)
        ms1 = -s1  # rotations by -q1 take the target into the q1 = 0 frame
        # Wrist centre in the q1 = 0 frame (2, N); q3: elbow branches (2, 2, N), subproblem 3.
        d2 = v3.sub(v3.add(o1, v3.rotate(w1, c1, ms1, wv)), o2)
        delta2 = v3.dot(d2, d2) - v3.dot_const(w3, d2) ** 2
        lu, lv = self.len_u3, self.len_v3
        x3 = (lu * lu + lv * lv - delta2) / (2.0 * lu * lv)
        ok3 = np.abs(x3) <= 1.0 + REACH_TOL
        ca, sa = _cos_sin_of_acos(x3[:, None, :])  # q3 = theta0 -+ acos(x3)
        ct, st = np.cos(self.theta0), np.sin(self.theta0)
        c3 = ct * ca + _SIGNS[:, None] * (st * sa)
        s3 = st * ca - _SIGNS[:, None] * (ct * sa)
        q3 = v3.atan2(s3, c3, 1.0)
        # q2 (2, 2, N): rotate the elbow-placed wrist centre about axis 2 onto it, subproblem 1.
        x_elbow = v3.rotate(w3, c3, s3, self.c_o3)
        up = v3.perp(w2, v3.sub(v3.add(o3, x_elbow), o2))
        vp = v3.expand(v3.perp(w2, d2))
        free2 = (v3.dot(up, up) < SINGULAR_EPS**2) | (v3.dot(vp, vp) < SINGULAR_EPS**2)
        q2, c2, s2 = _angle_cos_sin(*v3.angle_parts(w2, up, vp), ref_t[1], free2)
        # Axis 6 target and its normal in the frame after q1..q3 (2, 2, N).
        s3s = self.sigma * s3
        c23, s23 = c2 * c3 - s2 * s3s, s2 * c3 + c2 * s3s  # of q2 + sigma q3
        ms23 = -s23
        v = v3.rotate(w2, c23, ms23, v3.expand(v3.rotate(w1, c1, ms1, v0)))
        u = v3.rotate(w2, c23, ms23, v3.expand(v3.rotate(w1, c1, ms1, u0)))
        # q4, q5, q6: wrist branches (2, 2, 2, N).
        q4, q5, q6, okw = self._wrist(v, u, ref_t[3])
        # Validity, then each angle wrapped into its limits (before broadcasting to 8 branches).
        shape = q4.shape
        ok = ok1 & _to4(ok3) & _to4(okw)  # (2, 2, 2, N) by broadcasting
        reachable = ok1 & np.any(ok3[:, None, :] & okw, axis=(0, 1))
        q_t = np.empty((6, *shape))
        for j, qj in enumerate((q1, q2, q3, q4, q5, q6)):
            qj, fits = self._wrap_into_limits(qj, ref_t[j], j)
            ok = ok & _to4(fits)
            q_t[j] = _to4(qj)
        ok = np.ascontiguousarray(np.broadcast_to(ok, shape))
        q_t += np.where(ok, 0.0, np.nan)  # NaN where invalid
        valid = ok.reshape(8, n).T  # (N, 8)
        q = q_t.reshape(6, 8, n).T  # (N, 8, 6), a view
        return IkBatch(q=q, valid=valid, postures=POSTURES, reachable=reachable)

    def _wrist(
        self, v: v3.Vec, u: v3.Vec, ref4: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """q4, q5, q6 (2, 2, 2, N) and whether the wrist reaches (2, 2, N), from the targets of
        axis 6 (``v``) and of its normal (``u``) in the frame after q1..q3 (2, 2, N).

        With ``c = R5 w6 = R4^T v = alpha w4 + beta w5 + gamma (w4 x w5)``, the part of ``c``
        normal to axis 4 is ``beta w5' + gamma (w4 x w5)`` and as long as ``v``'s part normal
        to axis 4 (``delta``): ``gamma^2 = delta^2 / |w4 x w5|^2 - beta^2``, exact near the
        wrist singularity.
        """
        if self.orthogonal_wrist:
            return self._orthogonal_wrist(v, u, ref4)
        w4, w5, w6 = self.wc[3:]
        vp4 = v3.perp(w4, v)
        delta2 = v3.dot(vp4, vp4)
        beta = (self.k45 * v3.dot_const(w4, v) - self.k56) / (self.k45**2 - 1.0)
        gamma2 = delta2 / self.n45_sq - beta**2
        gamma = -_SIGNS[:, None] * np.sqrt(np.maximum(gamma2, 0.0))[..., None, :]
        cp = tuple((beta * self.w5p[i])[..., None, :] + gamma * self.n45[i] for i in range(3))
        free4 = (delta2 < SINGULAR_EPS**2)[..., None, :]  # axis 6 target along axis 4
        q4, c4, s4 = _angle_cos_sin(*v3.angle_parts(w4, cp, v3.expand(vp4)), ref4, free4)
        c_act = v3.rotate(w4, c4, -s4, v3.expand(v))
        q5, c5, s5 = _angle_cos_sin(*v3.angle_parts(w5, self.w6p, v3.perp(w5, c_act)))
        u6 = v3.rotate(w5, c5, -s5, v3.rotate(w4, c4, -s4, v3.expand(u)))
        q6 = v3.angle(w6, self.p6, v3.perp(w6, u6))
        return q4, q5, q6, gamma2 >= -REACH_TOL

    def _orthogonal_wrist(
        self, v: v3.Vec, u: v3.Vec, ref4: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``_wrist`` when axis 6 lies along axis 4 at q = 0 and axis 5 is normal to both:
        ``beta = 0``, ``c = (v . w4) w4 + gamma (w4 x w5)`` with ``gamma = -+delta``, so
        ``q5 = atan2(-s6 gamma, s6 v . w4)`` (``s6 = w4 . w6 = +-1``). Only the first root is
        solved; the other is ``(q4 + pi, -q5, q6 + pi)``."""
        w4, w5, w6 = self.wc[3:]
        vp4 = v3.perp(w4, v)
        delta2 = v3.dot(vp4, vp4)
        free4 = delta2 < SINGULAR_EPS**2  # axis 6 target along axis 4: q4 is free
        # q4 turns c's normal part gamma (w4 x w5) = -delta (w4 x w5) onto v's.
        q4, c4, s4 = _angle_cos_sin(*v3.angle_parts(w4, self.n45_neg, vp4), ref4, free4)
        c5 = self.s46 * v3.dot_const(w4, v)
        s5 = self.s46 * np.sqrt(delta2)
        q5 = v3.atan2(s5, c5, 1.0)
        u6 = v3.rotate(w5, c5, -s5, v3.rotate(w4, c4, -s4, u))
        q6 = v3.angle(w6, self.p6, v3.perp(w6, u6))
        flip4, flip6 = _half_turn(q4), _half_turn(q6)
        if free4.any():  # at the singularity both roots keep q4 from the reference
            flip4, flip6 = np.where(free4, q4, flip4), np.where(free4, q6, flip6)
        out = np.empty((3, *q4.shape[:-1], 2, q4.shape[-1]))
        out[0, ..., 0, :], out[0, ..., 1, :] = q4, flip4
        out[1, ..., 0, :], out[1, ..., 1, :] = q5, -q5
        out[2, ..., 0, :], out[2, ..., 1, :] = q6, flip6
        return out[0], out[1], out[2], np.ones(delta2.shape, dtype=bool)

    def _wrap_into_limits(
        self, q: np.ndarray, ref: np.ndarray, j: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Angles ``q`` (in [-pi, pi]) of joint ``j`` moved by a multiple of 2 pi to the in-limit
        value nearest ``ref`` (broadcastable, rad), clipped onto the limits within
        ``LIMIT_TOL``; also whether each fits."""
        lo, hi = float(self.model.lower[j]), float(self.model.upper[j])
        if -np.pi <= lo and hi <= np.pi:  # q is in [-pi, pi]: no other wrap can fit
            fits = (q >= lo - LIMIT_TOL) & (q <= hi + LIMIT_TOL)
            return np.minimum(np.maximum(q, lo), hi), fits
        r = np.minimum(np.maximum(ref, lo), hi)
        near = q + _TWO_PI * np.floor((r - q) / _TWO_PI + WRAP_ROUND)  # the wrap nearest r
        above = near > hi + LIMIT_TOL
        below = near < lo - LIMIT_TOL
        if above.any() or below.any():
            near = np.where(above, near - _TWO_PI, np.where(below, near + _TWO_PI, near))
        fits = (near >= lo - LIMIT_TOL) & (near <= hi + LIMIT_TOL)
        return np.minimum(np.maximum(near, lo), hi), fits

    def posture(self, q: np.ndarray) -> np.ndarray:
        """Posture flags (N, 3) int ``[shoulder, elbow, wrist]`` of configurations (N, 6)."""
        _, w2, w3, _, w5, w6 = self.wc
        o1, o2, o3 = self.oc
        x3 = v3.rotate(w3, np.cos(q[:, 2]), np.sin(q[:, 2]), self.c_o3)
        x2 = v3.rotate(w2, np.cos(q[:, 1]), np.sin(q[:, 1]), v3.sub(v3.add(o3, x3), o2))
        shoulder = _flag(-v3.dot_const(self.n12, v3.sub(v3.add(o2, x2), o1)))
        elbow = _flag(np.sin(q[:, 2] - self.q3_stretched))
        bent6 = v3.rotate(w5, np.cos(q[:, 4]), np.sin(q[:, 4]), w6)
        wrist = _flag(v3.dot_const(self.n54, bent6))
        return np.stack((shoulder, elbow, wrist), axis=-1)
