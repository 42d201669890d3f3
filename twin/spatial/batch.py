"""Batched rigid-transform kernels over ``(N, ...)`` arrays for kinematics and the planner.

Poses are either homogeneous matrices ``(N, 4, 4)`` or 7-vectors ``(N, 7)``
``[px, py, pz, qw, qx, qy, qz]`` (m, unit quaternion). All functions broadcast over leading axes.
"""

from __future__ import annotations

import numpy as np

from twin.spatial import quaternion as quat


def matrices_from_pose7(poses: np.ndarray) -> np.ndarray:
    """Homogeneous matrices (..., 4, 4) of poses (..., 7)."""
    poses = np.asarray(poses, dtype=float)
    out = np.zeros(poses.shape[:-1] + (4, 4))
    out[..., :3, :3] = quat.to_matrix(quat.canonicalize(poses[..., 3:]))
    out[..., :3, 3] = poses[..., :3]
    out[..., 3, 3] = 1.0
    return out


def pose7_from_matrices(matrices: np.ndarray) -> np.ndarray:
    """Poses (..., 7) of homogeneous matrices (..., 4, 4), quaternions canonical."""
    m = np.asarray(matrices, dtype=float)
    return np.concatenate((m[..., :3, 3], quat.from_matrix(m[..., :3, :3])), axis=-1)


def invert_matrices(matrices: np.ndarray) -> np.ndarray:
    """Inverses (..., 4, 4) of rigid homogeneous matrices, using ``R^T`` (no general inverse)."""
    m = np.asarray(matrices, dtype=float)
    out = np.zeros_like(m)
    rt = np.swapaxes(m[..., :3, :3], -1, -2)
    out[..., :3, :3] = rt
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", rt, m[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def transform_points(matrices: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply transforms (..., 4, 4) to points (..., 3) m; shapes broadcast."""
    m = np.asarray(matrices, dtype=float)
    p = np.asarray(points, dtype=float)
    return np.einsum("...ij,...j->...i", m[..., :3, :3], p) + m[..., :3, 3]


def compose_pose7(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for poses (..., 7): rotation product renormalised and canonical."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    t = quat.rotate(a[..., 3:], b[..., :3]) + a[..., :3]
    return np.concatenate((t, quat.multiply(a[..., 3:], b[..., 3:])), axis=-1)


def invert_pose7(a: np.ndarray) -> np.ndarray:
    """Inverses of poses (..., 7)."""
    a = np.asarray(a, dtype=float)
    q_inv = quat.conjugate(a[..., 3:])
    return np.concatenate((-quat.rotate(q_inv, a[..., :3]), q_inv), axis=-1)


def pose_errors(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position error (...,) m and rotation angle (...,) rad between matrices (..., 4, 4)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    dp = np.linalg.norm(a[..., :3, 3] - b[..., :3, 3], axis=-1)
    ang = quat.angle_between(quat.from_matrix(a[..., :3, :3]), quat.from_matrix(b[..., :3, :3]))
    return dp, ang
