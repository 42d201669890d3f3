"""Rigid-transform helpers shared by the calibrations: rotation logs, the closed-form rigid fit
of point sets (Kabsch / Umeyama without scale) and the spread of a set of rotation axes.

Poses are (4, 4) homogeneous matrices (or (K, 4, 4) stacks), points (K, 3) m, rotation
vectors (K, 3) rad.
"""

from __future__ import annotations

import numpy as np

from twin.spatial import batch
from twin.spatial import quaternion as quat


def rotvec(r: np.ndarray) -> np.ndarray:
    """Rotation vectors (..., 3) rad of rotation matrices (..., 3, 3)."""
    return quat.log(quat.from_matrix(np.asarray(r, float)))


def rotation_angle(r: np.ndarray) -> np.ndarray:
    """Angles (...,) rad of rotation matrices (..., 3, 3)."""
    return np.linalg.norm(rotvec(r), axis=-1)


def kabsch(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The rotation (3, 3) ``R`` minimising ``sum |R s_k - t_k|^2`` of centred vectors (K, 3)."""
    h = np.asarray(source, float).T @ np.asarray(target, float)
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    return vt.T @ np.diag([1.0, 1.0, d]) @ u.T


def rigid_fit(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``target_T_source`` (4, 4) minimising ``sum |T s_k - t_k|^2`` over points (K, 3) m."""
    s, t = np.asarray(source, float), np.asarray(target, float)
    cs, ct = s.mean(axis=0), t.mean(axis=0)
    r = kabsch(s - cs, t - ct)
    out = np.eye(4)
    out[:3, :3], out[:3, 3] = r, ct - r @ cs
    return out


def transform(t: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Points (K, 3) mapped by (4, 4) ``t``."""
    t = np.asarray(t, float)
    return np.asarray(points, float) @ t[:3, :3].T + t[:3, 3]


def invert(t: np.ndarray) -> np.ndarray:
    """Inverse of rigid transforms (..., 4, 4)."""
    return batch.invert_matrices(t)


def axis_spread(vectors: np.ndarray, min_angle_rad: float) -> float:
    """Second singular value (0..1) of the unit axes of the rotation vectors (K, 3) whose angle
    exceeds ``min_angle_rad``: 0 when every rotation is about one axis (or there are none)."""
    v = np.asarray(vectors, float)
    norms = np.linalg.norm(v, axis=1)
    axes = v[norms > min_angle_rad] / norms[norms > min_angle_rad, None]
    if len(axes) < 2:
        return 0.0
    s = np.linalg.svd(axes / np.sqrt(len(axes)), compute_uv=False)
    return float(s[1])


def mean_pose(poses: np.ndarray) -> np.ndarray:
    """The chordal mean (4, 4) of poses (K, 4, 4): projected mean rotation, mean translation."""
    p = np.asarray(poses, float)
    u, _, vt = np.linalg.svd(p[:, :3, :3].sum(axis=0))
    d = np.sign(np.linalg.det(u @ vt)) or 1.0
    out = np.eye(4)
    out[:3, :3] = u @ np.diag([1.0, 1.0, d]) @ vt
    out[:3, 3] = p[:, :3, 3].mean(axis=0)
    return out
