"""Linear (Cartesian straight-line) motions: IK along the line with the posture kept.

A ``CartesianPath`` is a TCP path in the cell base frame: straight pieces (position linear,
orientation by slerp) and, at a way-point with a blend radius ``r`` m, a quadratic Bezier from
``r`` before the way-point to ``r`` after it (control point: the way-point; orientation slerped
across it). ``linear_motion`` turns it into joint configurations:

1. nodes along the path, at most ``node_step`` m apart (a rotation of ``1 / ROTATION_LENGTH`` rad
   counts as one metre), solved by the closed-form IK on the posture of the start configuration,
   each angle on the wrap nearest the previous node;
2. a node where IK fails is refused: ``JOINT_LIMIT`` when the pose is reachable with the limits
   ignored, else ``UNREACHABLE``; a node whose Jacobian's smallest singular value is below
   ``MIN_SINGULAR_VALUE`` is refused as ``SINGULARITY``; where two neighbouring nodes differ by
   more than ``MAX_JOINT_STEP`` rad in a joint the interval is halved, and an interval shorter
   than ``MIN_NODE_STEP`` m that still jumps (the IK branch flips across a singularity between
   nodes) is refused as ``SINGULARITY``;
3. the executed joint curve (``curve.build_curve`` with small blends at the nodes, see
   ``node_blends``) is checked by FK at a fine resolution (``FK_STEP`` rad of joint motion): the
   largest distance of the TCP from the Cartesian path must be within ``tolerance`` (0.5 mm by
   default), else the node spacing is halved and the motion rebuilt (up to ``REFINEMENTS`` times).

Singularity threshold: ``MIN_SINGULAR_VALUE = 0.02`` (m or rad per rad, the geometric Jacobian of
the TCP in the base frame). At that value a TCP speed of 0.1 m/s can need 5 rad/s of joint speed;
on the shipped arm it is reached at about 0.08 rad from the wrist singularity (q5 = 0).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from twin.planning import _validate as v
from twin.planning.errors import PlanningInputError
from twin.planning.motion.curve import JointCurve, build_curve
from twin.spatial import batch, quaternion

ROTATION_LENGTH = 0.1  # m per rad: how a rotation counts in node spacing and path length
MIN_SINGULAR_VALUE = 0.02  # smallest singular value of the TCP Jacobian accepted at a node
MAX_JOINT_STEP = 0.05  # rad, largest joint change between neighbouring nodes
NODE_STEP = 0.005  # m, initial node spacing
MIN_NODE_STEP = 1e-5  # m, intervals are not halved below this
FK_STEP = 2e-4  # rad, joint-space spacing of the FK verification samples
REFINEMENTS = 4
DEFAULT_TOLERANCE = 5e-4  # m, straightness
NODE_BLEND_FRACTION = 0.5  # node blend distance: this fraction of the shorter neighbouring step


class LinearFailure(enum.Enum):
    """Why a linear motion was refused."""

    UNREACHABLE = "unreachable"  # a pose on the path is out of the arm's reach
    JOINT_LIMIT = "joint_limit"  # reachable, but not within the joint limits on this posture
    SINGULARITY = "singularity"  # the path crosses or comes too close to a singularity
    NOT_STRAIGHT = "not_straight"  # straightness not reached after every refinement


def _rotvec_between(r0: np.ndarray, r1: np.ndarray) -> np.ndarray:
    return quaternion.log(quaternion.from_matrix(r0.T @ r1))


def _slerp(r0: np.ndarray, rotvec: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Rotations (K, 3, 3): ``r0 exp(t rotvec)`` for fractions t (K,)."""
    return r0 @ quaternion.to_matrix(quaternion.exp(t[:, None] * rotvec))


@dataclass(frozen=True)
class _Piece:
    kind: str  # "line" or "blend"
    p: tuple[np.ndarray, ...]  # line: (p0, p1); blend: (a, c, b), positions (3,) m
    r0: np.ndarray  # (3, 3) orientation at the start
    rotvec: np.ndarray  # (3,) rad, r1 = r0 exp(rotvec)
    length: float  # m-equivalent (see ROTATION_LENGTH)

    def positions(self, t: np.ndarray) -> np.ndarray:
        tt = t[:, None]
        if self.kind == "line":
            return self.p[0] + tt * (self.p[1] - self.p[0])
        a, c, b = self.p
        return (1 - tt) ** 2 * a + 2 * tt * (1 - tt) * c + tt**2 * b


@dataclass(frozen=True)
class CartesianPath:
    """A TCP path (cell base frame) of straight pieces and blends; see the module doc."""

    pieces: tuple[_Piece, ...]

    @classmethod
    def through(cls, poses: list[np.ndarray], radii: list[float] | None = None) -> CartesianPath:
        """Straight lines through ``poses`` (each 4x4, base_T_tcp), blended at interior pose i
        with ``radii[i - 1]`` m (0: a sharp corner). A radius may not exceed half of either
        neighbouring line's length."""
        poses = [v.pose(p, f"pose {i}") for i, p in enumerate(poses)]
        if len(poses) < 2:
            raise PlanningInputError("a Cartesian path needs at least two poses")
        radii = [0.0] * (len(poses) - 2) if radii is None else [float(r) for r in radii]
        if len(radii) != len(poses) - 2 or any(not np.isfinite(r) or r < 0 for r in radii):
            raise PlanningInputError(
                f"radii: expected {len(poses) - 2} finite values >= 0 m, got {radii}"
            )
        pos = [p[:3, 3] for p in poses]
        rot = [p[:3, :3] for p in poses]
        seg_len = [float(np.linalg.norm(pos[i + 1] - pos[i])) for i in range(len(poses) - 1)]
        rad = [0.0, *radii, 0.0]
        for i in range(1, len(poses) - 1):
            if rad[i] > 0.5 * min(seg_len[i - 1], seg_len[i]) + 1e-12:
                raise PlanningInputError(
                    f"blend radius {rad[i]} m at pose {i} exceeds half the neighbouring line "
                    f"({0.5 * min(seg_len[i - 1], seg_len[i]):.6g} m)"
                )
        pieces: list[_Piece] = []

        def point_on(i: int, dist: float) -> tuple[np.ndarray, np.ndarray]:
            f = 0.0 if seg_len[i] == 0.0 else dist / seg_len[i]
            rv = _rotvec_between(rot[i], rot[i + 1])
            r = _slerp(rot[i], rv, np.array([f]))[0]
            return pos[i] + f * (pos[i + 1] - pos[i]), r

        for i in range(len(poses) - 1):
            p0, r0 = point_on(i, rad[i])
            p1, r1 = point_on(i, seg_len[i] - rad[i + 1])
            rv = _rotvec_between(r0, r1)
            length = max(
                float(np.linalg.norm(p1 - p0)), ROTATION_LENGTH * float(np.linalg.norm(rv))
            )
            if length > 0.0:
                pieces.append(_Piece("line", (p0, p1), r0, rv, length))
            if i + 1 < len(poses) - 1 and rad[i + 1] > 0.0:
                b, rb = point_on(i + 1, rad[i + 1])
                rv = _rotvec_between(r1, rb)
                blen = max(2.0 * rad[i + 1], ROTATION_LENGTH * float(np.linalg.norm(rv)))
                pieces.append(_Piece("blend", (p1, pos[i + 1], b), r1, rv, blen))
        if not pieces:  # every pose the same: a path of length zero
            pieces.append(_Piece("line", (pos[0], pos[0]), rot[0], np.zeros(3), 0.0))
        return cls(tuple(pieces))

    @classmethod
    def line(cls, start: np.ndarray, goal: np.ndarray) -> CartesianPath:
        """The straight line between two poses (4x4 base_T_tcp)."""
        return cls.through([start, goal])

    @property
    def length(self) -> float:
        """m-equivalent length (rotations count ``ROTATION_LENGTH`` m per rad)."""
        return float(sum(p.length for p in self.pieces))

    def _locate(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        bounds = np.concatenate(([0.0], np.cumsum([p.length for p in self.pieces])))
        k = np.clip(np.searchsorted(bounds, s, side="right") - 1, 0, len(self.pieces) - 1)
        lengths = np.array([max(p.length, 1e-300) for p in self.pieces])
        t = np.clip((s - bounds[k]) / lengths[k], 0.0, 1.0)
        return k, t

    def poses(self, s: object) -> np.ndarray:
        """Poses (K, 4, 4) base_T_tcp at path lengths s (K,) m-equivalent in [0, length]."""
        s = np.atleast_1d(np.asarray(s, dtype=float))
        k, t = self._locate(s)
        out = np.tile(np.eye(4), (len(s), 1, 1))
        for i, piece in enumerate(self.pieces):
            m = k == i
            if np.any(m):
                out[m, :3, 3] = piece.positions(t[m])
                out[m, :3, :3] = _slerp(piece.r0, piece.rotvec, t[m])
        return out

    def distance(self, points: np.ndarray) -> np.ndarray:
        """Distance (K,) m of points (K, 3) from the path's positions (blends: to a polyline of
        200 chords, whose error is far below the tolerances used here)."""
        pts = np.asarray(points, dtype=float)
        best = np.full(len(pts), np.inf)
        for piece in self.pieces:
            if piece.kind == "line":
                a, b = piece.p
                poly = np.stack((a, b))
            else:
                poly = piece.positions(np.linspace(0.0, 1.0, 201))
            best = np.minimum(best, _polyline_distance(pts, poly))
        return best


def _polyline_distance(points: np.ndarray, poly: np.ndarray) -> np.ndarray:
    a, b = poly[:-1], poly[1:]
    ab = b - a
    den = np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-30)
    out = np.full(len(points), np.inf)
    for start in range(0, len(points), 2048):
        p = points[start : start + 2048, None, :]
        t = np.clip(np.einsum("kij,ij->ki", p - a, ab) / den, 0.0, 1.0)
        d = np.linalg.norm(p - (a + t[..., None] * ab), axis=-1)
        out[start : start + 2048] = d.min(axis=1)
    return out


@dataclass(frozen=True)
class LinearMotion:
    """A linear motion: truthy when ``error`` is None.

    configurations (K, n) rad from the start to the end of the path; path_s (K,) m-equivalent
    position of each node on the path; entry/exit (K,) rad node blend distances (``node_blends``);
    max_deviation_m: largest TCP distance from the path along the executed curve (FK-checked);
    min_singular_value: smallest over the nodes; reason: text for a failure.
    """

    error: LinearFailure | None
    configurations: np.ndarray
    path_s: np.ndarray
    entry: np.ndarray
    exit: np.ndarray
    max_deviation_m: float = float("nan")
    min_singular_value: float = float("nan")
    reason: str = ""

    def __bool__(self) -> bool:
        return self.error is None

    def curve(self) -> JointCurve:
        """The executed joint curve (polyline of the nodes with the node blends)."""
        return build_curve(self.configurations, self.entry, self.exit)


def node_blends(
    q: np.ndarray, fraction: float = NODE_BLEND_FRACTION
) -> tuple[np.ndarray, np.ndarray]:
    """Blend distances (K,), equal on entry and exit, at the interior nodes of a dense polyline
    q (K, n): ``fraction`` of the shorter neighbouring step (ends: 0)."""
    steps = np.linalg.norm(np.diff(q, axis=0), axis=1)
    d = np.zeros(len(q))
    d[1:-1] = fraction * np.minimum(steps[:-1], steps[1:])
    return d, d.copy()


def resolve_flange_T_tcp(model, flange_T_tcp: object | None) -> np.ndarray:
    """``flange_T_tcp`` (4x4) validated, or the model's own ``tcp`` link relative to ``flange``."""
    if flange_T_tcp is not None:
        return v.pose(flange_T_tcp, "flange_T_tcp")
    home = np.asarray(model.home_q, dtype=float)
    return np.linalg.solve(model.fk(home, "flange"), model.fk(home, "tcp"))


class _Solver:
    """IK, Jacobian and FK of the TCP ``flange_T_tcp`` on the posture of ``q_start``."""

    def __init__(self, model, q_start: np.ndarray, flange_T_tcp: np.ndarray) -> None:
        self.model = model
        self.f_T_t = flange_T_tcp
        self.t_T_f = batch.invert_matrices(flange_T_tcp)
        self.q_start = q_start

    def ik(self, base_T_tcp: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Solutions (K, n) rad (NaN where none) and found (K,) for poses (K, 4, 4)."""
        return self.model.ik_batch(base_T_tcp @ self.t_T_f, ref, "flange")

    def reachable(self, base_T_tcp: np.ndarray) -> np.ndarray:
        """(K,) whether some posture reaches each pose with the joint limits ignored."""
        return self.model.ik_all_batch(base_T_tcp @ self.t_T_f, self.q_start, "flange").reachable

    def tcp(self, q: np.ndarray) -> np.ndarray:
        return self.model.fk(q, "flange") @ self.f_T_t

    def min_singular_values(self, q: np.ndarray) -> np.ndarray:
        jac = self.model.jacobian(q, "flange")
        # The TCP Jacobian: v_tcp = v_flange + w x (p_tcp - p_flange).
        r = self.tcp(q)[:, :3, 3] - self.model.fk(q, "flange")[:, :3, 3]
        jv = jac[:, :3] - np.cross(jac[:, 3:].transpose(0, 2, 1), r[:, None, :]).transpose(0, 2, 1)
        j = np.concatenate((jv, jac[:, 3:]), axis=1)
        return np.linalg.svd(j, compute_uv=False)[:, -1]


def linear_motion(
    model,
    q_start: object,
    path: CartesianPath,
    flange_T_tcp: object | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> LinearMotion:
    """Joint configurations following ``path`` from ``q_start`` (n,) rad (see the module doc).

    ``path`` must start at the TCP pose of ``q_start`` (within 1e-6 m / rad); ``flange_T_tcp``
    (4x4) is the TCP, default the model's ``tcp`` link.
    """
    q0 = v.configuration(q_start, "q_start", len(model.joint_names))
    solver = _Solver(model, q0, resolve_flange_T_tcp(model, flange_T_tcp))
    start = path.poses([0.0])[0]
    dp, da = batch.pose_errors(solver.tcp(q0[None])[0], start)
    if dp > 1e-6 or da > 1e-6:
        raise PlanningInputError(
            f"the path starts {dp:.3g} m / {da:.3g} rad away from the TCP pose of q_start; "
            "expected it to start there"
        )
    step = NODE_STEP
    last = None
    for _ in range(REFINEMENTS + 1):
        last = _attempt(solver, q0, path, step, tolerance)
        if last.error is not LinearFailure.NOT_STRAIGHT:
            return last
        step *= 0.5
    return last  # type: ignore[return-value]


def _attempt(
    solver: _Solver, q0: np.ndarray, path: CartesianPath, step: float, tol: float
) -> LinearMotion:
    count = max(1, int(np.ceil(path.length / step)))
    s = np.linspace(0.0, path.length, count + 1)
    q, fail = _solve_nodes(solver, q0, path, s)
    if fail is not None:
        return fail
    s, q = _refine_jumps(solver, path, s, q)
    if s is None:
        return _failure(LinearFailure.SINGULARITY, q0, "the IK branch jumps between nodes")
    sv = solver.min_singular_values(q)
    if np.min(sv) < MIN_SINGULAR_VALUE:
        i = int(np.argmin(sv))
        return _failure(
            LinearFailure.SINGULARITY,
            q0,
            f"smallest Jacobian singular value {sv[i]:.3g} < {MIN_SINGULAR_VALUE} at "
            f"{s[i]:.4f} m along the path",
        )
    entry, exit_ = node_blends(q)
    motion = LinearMotion(None, q, s, entry, exit_, min_singular_value=float(np.min(sv)))
    dense = motion.curve().dense(FK_STEP)
    dev = float(np.max(path.distance(solver.tcp(dense)[:, :3, 3])))
    if dev > tol:
        return _failure(LinearFailure.NOT_STRAIGHT, q0, f"deviation {dev * 1e3:.3f} mm > tolerance")
    return LinearMotion(None, q, s, entry, exit_, dev, float(np.min(sv)))


def _failure(error: LinearFailure, q0: np.ndarray, reason: str) -> LinearMotion:
    empty = np.zeros((0, len(q0)))
    return LinearMotion(error, empty, np.zeros(0), np.zeros(0), np.zeros(0), reason=reason)


def _solve_nodes(solver, q0, path, s) -> tuple[np.ndarray, LinearMotion | None]:
    """IK of every node (posture of q0; wraps: first nearest q0, then nearest the neighbour)."""
    poses = path.poses(s)
    q, found = solver.ik(poses, q0)
    if np.all(found):
        q, found = solver.ik(poses, np.vstack((q0, q[:-1])))
    if not np.all(found):
        i = int(np.flatnonzero(~found)[0])
        reachable = bool(solver.reachable(poses[i : i + 1])[0])
        err = LinearFailure.JOINT_LIMIT if reachable else LinearFailure.UNREACHABLE
        where = f"{s[i]:.4f} m along the path"
        return q, _failure(err, q0, f"no IK solution on the start's posture at {where}")
    q[0] = q0
    return q, None


def _refine_jumps(solver, path, s, q):
    """Halve every interval whose joint step exceeds MAX_JOINT_STEP; (None, q0) on a jump that
    survives down to MIN_NODE_STEP."""
    for _ in range(40):
        big = np.flatnonzero(np.max(np.abs(np.diff(q, axis=0)), axis=1) > MAX_JOINT_STEP)
        if not len(big):
            return s, q
        if np.any(np.diff(s)[big] < MIN_NODE_STEP):
            return None, q[0]
        mid = 0.5 * (s[big] + s[big + 1])
        qm, found = solver.ik(path.poses(mid), q[big])
        if not np.all(found):
            return None, q[0]
        s = np.insert(s, big + 1, mid)
        q = np.insert(q, big + 1, qm, axis=0)
    return None, q[0]


def linear_to(
    model,
    q_start: object,
    goal_pose: object,
    flange_T_tcp: object | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> LinearMotion:
    """The straight line from the TCP pose of ``q_start`` to ``goal_pose`` (4x4 base_T_tcp)."""
    q0 = v.configuration(q_start, "q_start", len(model.joint_names))
    f_T_t = resolve_flange_T_tcp(model, flange_T_tcp)
    start = model.fk(q0, "flange") @ f_T_t
    return linear_motion(model, q0, CartesianPath.line(start, goal_pose), f_T_t, tolerance)
