"""Observation features of the environments, as pure functions of exploy-style inputs.

Every term here is computable by the ONNX controller from the inputs of the exploy convention
(``docs/formats/onnx-policy.md``): joint positions and velocities, the TCP body pose
(``obj.arm.tcp.pos_b_rt_w_in_w``, ``obj.arm.tcp.w_Q_b``) and the commanded pose
(``cmd.se3_pose.target``). ``policies/export.py`` builds the same functions as ONNX nodes, so a
policy run by the controller sees exactly what it saw in training (a test checks both agree).

World frame = robot base frame. Quaternions ``[w, x, y, z]``.
"""

from __future__ import annotations

import functools

import numpy as np

from twin.spatial import quaternion

#: Layout of the Reach observation: (name, size, scale); the observation is ``value * scale``.
#: Scales bring each term to order one; the pose errors are scaled up so 1 cm reads 0.1.
REACH_TERMS: tuple[tuple[str, int, float], ...] = (
    ("joint_pos", 6, 1.0),  # q (6,) rad
    ("joint_vel", 6, 0.2),  # qd (6,) rad/s
    ("tcp_pos", 3, 1.0),  # world_p_tcp (3,) m
    ("tcp_quat", 4, 1.0),  # world_Q_tcp (4,) [w, x, y, z], w >= 0
    ("target_pos", 3, 1.0),  # world_p_target (3,) m
    ("target_quat", 4, 1.0),  # world_Q_target (4,) [w, x, y, z], w >= 0
    ("pos_error_tcp", 3, 10.0),  # tcp_R_world (p_target - p_tcp) (3,) m, TCP frame
    ("rot_error_tcp", 3, 1.0),  # 2 sign(w) vec(tcp_Q_target) (3,) ~rad, TCP frame
)
REACH_OBS_SIZE = sum(size for _, size, _ in REACH_TERMS)

#: Model-based Reach terms (``ReachEnv(model_features=True)``, the default), computed from the
#: arm model (URDF) here and by forward kinematics inside the exported ONNX graph:
#:
#: ``ik_step`` (6,) rad: a damped-least-squares IK step, the joint motion that would remove the
#: pose error to first order: ``dq = Jw^T (Jw Jw^T + IK_DAMPING I)^-1 ew``, ``Jw = W J(q)``,
#: ``ew = W [p_target - p_tcp; world_R_tcp rot_error]``, ``W = diag(IK_POSITION_WEIGHT x3, 1 x3)``
#: (1/m, 1), clipped to +-IK_STEP_CLIP_RAD. The graph takes the inverse by
#: ``IK_NEWTON_SCHULZ_ITERATIONS`` Newton-Schulz iterations from ``I / trace`` (ONNX has no
#: inverse op); they converge well within that count, so here one linear solve gives the same
#: step to rounding (``tests/test_policies_export.py`` checks both agree).
#:
#: ``gravity_offset`` (6,) rad: the joint-target offset that holds the arm against gravity under
#: the PD law, ``tau_hold(q) / kp``, from the masses and centres of mass of the links on the
#: base-to-TCP chain; scaled by 10 so the typical 0.04 rad reads 0.4.
IK_STEP_TERM: tuple[str, int, float] = ("ik_step", 6, 1.0)
GRAVITY_TERM: tuple[str, int, float] = ("gravity_offset", 6, 10.0)
IK_POSITION_WEIGHT = 5.0
IK_DAMPING = 0.01
IK_STEP_CLIP_RAD = 3.0
IK_NEWTON_SCHULZ_ITERATIONS = 24
GRAVITY_M_S2 = 9.81
REACH_MODEL_TERMS = (*REACH_TERMS, IK_STEP_TERM, GRAVITY_TERM)
REACH_MODEL_OBS_SIZE = sum(size for _, size, _ in REACH_MODEL_TERMS)


def reach_layout(model_terms: bool) -> tuple[tuple[str, int, float], ...]:
    """The Reach observation layout, with or without the model-based terms."""
    return REACH_MODEL_TERMS if model_terms else REACH_TERMS


def tcp_chain(arm) -> list[tuple[object, float, np.ndarray]]:
    """The edges of ``arm.tree`` from the base to the TCP, each with its link's mass (kg) and
    centre of mass (3,) m in the link frame: the data of ``gravity_offset`` (and of the graph)."""
    tree = arm.tree
    chain = []
    for edge in tree.path("tcp"):
        inertial = arm.link_inertial(tree.link_names[edge.link])
        mass = 0.0 if inertial is None else float(inertial.mass)
        com = np.zeros(3) if inertial is None else np.asarray(inertial.com, float)
        chain.append((edge, mass, com))
    return chain


def gravity_offset(arm, q: np.ndarray, kp: np.ndarray) -> np.ndarray:
    """``GRAVITY_TERM`` (6,) rad: ``tau_hold / kp`` at ``q`` (6,) rad for gains ``kp`` (6,).

    ``tau_hold_k = g0 [z_k x (S_k - M_k o_k)]_z`` with ``S_k``, ``M_k`` the first moment and
    mass of the chain links beyond joint k, ``z_k``, ``o_k`` its axis and origin (base frame).
    The links behind a fixed joint are lumped into the moving link they hang on (``_ChainData``)
    and the sums beyond each joint are reversed cumulative sums: one pass, no loop.
    """
    data = _chain_data(arm)
    q = np.asarray(q, float)
    if q.ndim == 1 and q.shape == (arm.n_joints,) and np.all(np.isfinite(q)):
        # one configuration: the same lumped bodies through the generated inverse dynamics
        # (``twin.dynamics``, at rest) on plain floats, a tenth of the array path's cost
        zero = np.zeros(arm.n_joints)
        return data.dynamics().tau(q, zero, zero, _GRAVITY) / np.asarray(kp, float)
    frames = arm.tree.rotations_translations(np.atleast_2d(q), data.names)
    r = np.stack([frames[name][0][0] for name in data.names])  # (J, 3, 3) base_R_link
    p = np.stack([frames[name][1][0] for name in data.names])  # (J, 3) base_p_link, m
    first = data.mass[:, None] * (p + np.einsum("kij,kj->ki", r, data.com))  # (J, 3) kg m
    moment = np.cumsum(first[::-1], axis=0)[::-1]  # first moment of the links beyond each joint
    z = np.einsum("kij,kj->ki", r, data.axis)  # joint axes, base frame
    lever = moment - data.mass_beyond[:, None] * p
    tau = np.zeros(arm.n_joints)
    tau[data.q_index] = GRAVITY_M_S2 * (z[:, 0] * lever[:, 1] - z[:, 1] * lever[:, 0])
    return tau / np.asarray(kp, float)


class _ChainData:
    """``tcp_chain`` lumped onto its moving joints: for each moving edge (base to TCP) the name of
    its link, the mass (J,) kg and centre of mass (J, 3) m (link frame) of that link with the
    links fixed to it, the mass beyond the joint (J,) kg, the axis (J, 3) (link frame) and the
    index into ``q``."""

    def __init__(self, arm) -> None:
        link_names = arm.tree.link_names
        names, masses, moments, axes, q_index = [], [], [], [], []
        acc_r, acc_p = np.eye(3), np.zeros(3)  # moving link frame -> current link frame
        for edge, m, com in tcp_chain(arm):
            if edge.q_index >= 0:
                names.append(link_names[edge.link])
                masses.append(0.0)
                moments.append(np.zeros(3))
                axes.append(np.asarray(edge.axis, float))
                q_index.append(edge.q_index)
                acc_r, acc_p = np.eye(3), np.zeros(3)
            elif not names:
                continue  # fixed to the base: beyond no joint
            else:
                acc_r, acc_p = acc_r @ edge.origin_r, acc_p + acc_r @ edge.origin_p
            masses[-1] += m
            moments[-1] = moments[-1] + m * (acc_p + acc_r @ com)
        self.names = tuple(names)
        self.mass = np.array(masses)
        self.com = np.array([s / m if m > 0.0 else np.zeros(3) for s, m in zip(moments, masses)])
        self.mass_beyond = np.cumsum(self.mass[::-1])[::-1]
        self.axis = np.array(axes)
        self.q_index = np.array(q_index)
        self._arm, self._dynamics = arm, None

    def dynamics(self):
        """The generated rigid-body dynamics (``twin.dynamics.code.DynamicsCode``, Python floats)
        of these lumped bodies alone (point masses at the centres of mass: gravity needs no
        inertia), built on first use: its torques at rest are ``tau_hold``."""
        if self._dynamics is None:
            from twin.dynamics.code import DynamicsCode
            from twin.dynamics.model import BodyInertial, RigidBodyModel

            n = self._arm.n_joints
            bodies = [BodyInertial(0.0, np.zeros(3), np.zeros((3, 3))) for _ in range(n)]
            for k, i in enumerate(self.q_index):
                bodies[i] = BodyInertial(float(self.mass[k]), self.com[k], np.zeros((3, 3)))
            model = RigidBodyModel(self._arm, tuple(bodies))
            self._dynamics = DynamicsCode(model, compiled=False)  # no numba load per process
        return self._dynamics


_GRAVITY = np.array([0.0, 0.0, -GRAVITY_M_S2])  # m/s^2, base frame
_CHAIN_CACHE: dict[int, tuple[object, _ChainData]] = {}


def _chain_data(arm) -> _ChainData:
    """The arm's ``_ChainData``, built once per arm object."""
    hit = _CHAIN_CACHE.get(id(arm))
    if hit is None or hit[0] is not arm:
        hit = (arm, _ChainData(arm))
        _CHAIN_CACHE[id(arm)] = hit
    return hit[1]


#: Extra terms of the Press observation, appended to the Reach layout.
PRESS_EXTRA_TERMS: tuple[tuple[str, int, float], ...] = (
    ("wrench", 6, 0.05),  # F/T reading (6,) [fx, fy, fz, tx, ty, tz] N, N m, sensor frame
    ("target_force", 1, 0.05),  # commanded normal force (1,) N
    ("force_error", 1, 0.1),  # target force - measured push along the tool axis (1,) N
)
PRESS_TERMS = REACH_TERMS + PRESS_EXTRA_TERMS
PRESS_OBS_SIZE = sum(size for _, size, _ in PRESS_TERMS)


#: Raw (unscaled) bounds of the observation terms that are not fixed by construction: the arm
#: does not leave them in operation (the environment clips into them; see ``observation_bounds``).
JOINT_POS_MARGIN_RAD = 0.2  # beyond the joint limits
JOINT_SPEED_BOUND_RAD_S = 100.0  # a tool striking the table spins the wrist up to ~55 rad/s
WORKSPACE_BOUND_M = 1.5  # |x|, |y|, |z| of any TCP or target position (base frame)
GRAVITY_OFFSET_BOUND_RAD = 2.0
FORCE_BOUND_N = 1000.0
TORQUE_BOUND_NM = 50.0
TARGET_FORCE_BOUND_N = 50.0


def _term_bounds(name: str, size: int, lower: np.ndarray, upper: np.ndarray):
    """Raw (low, high) of one term, (size,) each."""
    ones = np.ones(size)
    fixed = {
        "joint_vel": JOINT_SPEED_BOUND_RAD_S,
        "tcp_pos": WORKSPACE_BOUND_M,
        "target_pos": WORKSPACE_BOUND_M,
        "tcp_quat": 1.0,
        "target_quat": 1.0,
        "pos_error_tcp": 2.0 * np.sqrt(3.0) * WORKSPACE_BOUND_M,
        "rot_error_tcp": 2.0,  # 2 |v| of a unit quaternion
        "ik_step": IK_STEP_CLIP_RAD,
        "gravity_offset": GRAVITY_OFFSET_BOUND_RAD,
        "force_error": FORCE_BOUND_N + TARGET_FORCE_BOUND_N,
    }
    if name == "joint_pos":
        return np.asarray(lower, float) - JOINT_POS_MARGIN_RAD, (
            np.asarray(upper, float) + JOINT_POS_MARGIN_RAD
        )
    if name == "wrench":
        b = np.array([FORCE_BOUND_N] * 3 + [TORQUE_BOUND_NM] * 3)
        return -b, b
    if name == "target_force":
        return 0.0 * ones, TARGET_FORCE_BOUND_N * ones
    return -fixed[name] * ones, fixed[name] * ones


def observation_bounds(
    terms: tuple[tuple[str, int, float], ...], lower: np.ndarray, upper: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) (n,) of an observation layout, scaled as the observation; ``lower``/``upper``
    (6,) rad the joint limits."""
    lows, highs = zip(*(_term_bounds(name, size, lower, upper) for name, size, _ in terms))
    k = scales(terms)
    return np.concatenate(lows) * k, np.concatenate(highs) * k


def goal_bounds(with_force: bool) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of a goal: a pose (7,) [p m, q], with the pushed force N appended (8,)."""
    high = np.array([WORKSPACE_BOUND_M] * 3 + [1.0] * 4 + ([FORCE_BOUND_N] if with_force else []))
    return -high, high


@functools.lru_cache(maxsize=16)
def scales(terms: tuple[tuple[str, int, float], ...]) -> np.ndarray:
    """The per-element scale vector of an observation layout, (n,) (read-only, built once per
    layout)."""
    out = np.concatenate([np.full(size, scale) for _, size, scale in terms])
    out.flags.writeable = False
    return out


def sign_nonnegative(x: np.ndarray) -> np.ndarray:
    """+1 where ``x >= 0``, -1 elsewhere (the graph uses the same rule)."""
    return np.where(np.asarray(x) >= 0.0, 1.0, -1.0)


def pose_error_tcp(
    tcp_pos: np.ndarray, tcp_quat: np.ndarray, target_pos: np.ndarray, target_quat: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pose error of the target seen from the TCP.

    tcp_pos, target_pos: (3,) m, world; tcp_quat, target_quat: (4,) [w, x, y, z] world_Q_*.
    Returns ``pos_error`` (3,) m in the TCP frame and ``rot_error`` (3,) = ``2 sign(w) v`` of
    ``tcp_Q_target = conj(world_Q_tcp) * world_Q_target``, TCP frame; its norm is
    ``2 sin(angle / 2)``, close to the angle in rad for small errors (no atan2 needed in ONNX).
    """
    if np.ndim(tcp_quat) == 1 and np.ndim(target_quat) == 1:
        return _pose_error_tcp_one(tcp_pos, tcp_quat, target_pos, target_quat)
    qc = np.asarray(tcp_quat, dtype=float) * np.array([1.0, -1.0, -1.0, -1.0])
    pos_error = quaternion.rotate(qc, np.asarray(target_pos, float) - np.asarray(tcp_pos, float))
    rel = _hamilton(qc, np.asarray(target_quat, dtype=float))
    rot_error = 2.0 * sign_nonnegative(rel[..., :1]) * rel[..., 1:]
    return pos_error, rot_error


def _pose_error_tcp_one(tcp_pos, tcp_quat, target_pos, target_quat):
    """``pose_error_tcp`` of one pose pair in plain floats (the same operations, in the same
    order as the batched path, so the same values to rounding)."""
    w, x, y, z = (float(c) for c in tcp_quat)
    x, y, z = -x, -y, -z  # conj(world_Q_tcp)
    px, py, pz = (float(b) - float(a) for a, b in zip(tcp_pos, target_pos))
    # v + w t + u x t with t = 2 u x v (``quaternion.rotate``)
    tx, ty, tz = 2.0 * (y * pz - z * py), 2.0 * (z * px - x * pz), 2.0 * (x * py - y * px)
    pos = (
        px + w * tx + (y * tz - z * ty),
        py + w * ty + (z * tx - x * tz),
        pz + w * tz + (x * ty - y * tx),
    )
    w2, x2, y2, z2 = (float(c) for c in target_quat)
    rw = w * w2 - x * x2 - y * y2 - z * z2
    k = 2.0 if rw >= 0.0 else -2.0  # 2 sign(w), sign_nonnegative's rule
    rot = (
        k * (w * x2 + x * w2 + y * z2 - z * y2),
        k * (w * y2 - x * z2 + y * w2 + z * x2),
        k * (w * z2 + x * y2 - y * x2 + z * w2),
    )
    return np.array(pos), np.array(rot)


def _hamilton(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Plain Hamilton product (no renormalisation, so it matches the ONNX nodes)."""
    w1, x1, y1, z1 = np.moveaxis(a, -1, 0)
    w2, x2, y2, z2 = np.moveaxis(b, -1, 0)
    return np.stack(
        (
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ),
        axis=-1,
    )


def ik_weights() -> np.ndarray:
    """The task-space weights ``W`` (6,) of the IK step: position 1/m, rotation 1."""
    return np.array([IK_POSITION_WEIGHT] * 3 + [1.0] * 3)


def ik_step(
    jacobian: np.ndarray, tcp_quat: np.ndarray, pos_error_tcp: np.ndarray, rot_error_tcp: np.ndarray
) -> np.ndarray:
    """``IK_STEP_TERM`` (6,) rad: the DLS IK step from the TCP Jacobian (6, 6) [v; w] (base
    frame) and the errors of ``pose_error_tcp`` (TCP frame, rotated back to the world)."""
    w = _IK_WEIGHTS
    world_r_tcp = _matrix_one(tcp_quat) if np.ndim(tcp_quat) == 1 else None
    if world_r_tcp is None:
        world_r_tcp = quaternion.to_matrix(tcp_quat)
    e = np.concatenate((world_r_tcp @ pos_error_tcp, world_r_tcp @ rot_error_tcp))
    jw = np.asarray(jacobian, float) * _IK_WEIGHTS_COLUMN
    a = jw @ jw.T + _IK_DAMPING_EYE
    # The graph's Newton-Schulz iterations have converged to a^-1 well within their count (the
    # damping bounds a's condition number), so one solve gives the same step, faster.
    return np.clip(jw.T @ np.linalg.solve(a, w * e), -IK_STEP_CLIP_RAD, IK_STEP_CLIP_RAD)


def _matrix_one(q) -> np.ndarray:
    """``quaternion.to_matrix`` of one unit quaternion (4,) in plain floats: (3, 3)."""
    w, x, y, z = (float(c) for c in q)
    xx, yy, zz, xy, xz, yz = x * x, y * y, z * z, x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    return np.array(
        (
            (1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy)),
            (2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx)),
            (2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy)),
        )
    )


_IK_WEIGHTS = ik_weights()
_IK_WEIGHTS_COLUMN = _IK_WEIGHTS[:, None]
_IK_DAMPING_EYE = IK_DAMPING * np.eye(6)


def reach_observation(
    q: np.ndarray,
    qd: np.ndarray,
    tcp_pose: np.ndarray,
    target_pose: np.ndarray,
    model_terms: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """The Reach observation (REACH_OBS_SIZE,) float32, or (REACH_MODEL_OBS_SIZE,) with
    ``model_terms``.

    q: (6,) rad; qd: (6,) rad/s; tcp_pose, target_pose: (7,) [px, py, pz, qw, qx, qy, qz] world.
    Quaternions are sign-fixed to ``w >= 0`` before use. model_terms: ``(jacobian, gravity)``,
    the TCP Jacobian (6, 6) [v; w] in the base frame at ``q`` and ``gravity_offset(arm, q, kp)``
    (6,) rad; when given, ``ik_step`` and ``gravity_offset`` are appended.
    """
    tcp_pose = np.asarray(tcp_pose, dtype=float)
    target_pose = np.asarray(target_pose, dtype=float)
    tcp_quat = tcp_pose[3:] if tcp_pose[3] >= 0.0 else -tcp_pose[3:]  # sign_nonnegative
    target_quat = target_pose[3:] if target_pose[3] >= 0.0 else -target_pose[3:]
    pos_err, rot_err = pose_error_tcp(tcp_pose[:3], tcp_quat, target_pose[:3], target_quat)
    parts = [q, qd, tcp_pose[:3], tcp_quat, target_pose[:3], target_quat, pos_err, rot_err]
    if model_terms is not None:
        jacobian, gravity = model_terms
        parts += (ik_step(jacobian, tcp_quat, pos_err, rot_err), gravity)
    raw = np.concatenate(parts)
    raw *= scales(reach_layout(model_terms is not None))
    return raw.astype(np.float32)


def press_observation(
    q: np.ndarray,
    qd: np.ndarray,
    tcp_pose: np.ndarray,
    target_pose: np.ndarray,
    wrench: np.ndarray,
    target_force_n: float,
) -> np.ndarray:
    """The Press observation (PRESS_OBS_SIZE,) float32.

    The Reach terms (``target_pose`` is the contact pose on the table), then the F/T reading
    ``wrench`` (6,) [fx, fy, fz, tx, ty, tz] N, N m in the sensor frame, the target normal force
    ``target_force_n`` N and the force error ``target - pushed`` N, where ``pushed = -fz``
    (the tool pressing on the table is pushed back along its own -z axis: the sensor reads -fz).
    """
    reach = reach_observation(q, qd, tcp_pose, target_pose).astype(float)
    wrench = np.asarray(wrench, dtype=float)
    extra = np.concatenate((wrench, [target_force_n], [target_force_n + wrench[2]]))
    return np.concatenate((reach, extra * scales(PRESS_EXTRA_TERMS))).astype(np.float32)
