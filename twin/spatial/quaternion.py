"""Batched quaternion and rotation kernels on plain numpy arrays.

Every function broadcasts over leading axes: a quaternion argument is ``(..., 4)`` ordered
``[w, x, y, z]``, a rotation matrix ``(..., 3, 3)``, a vector or rotation vector ``(..., 3)``.
Quaternions returned are unit and canonical (``w >= 0``; where ``w == 0`` exactly, the first
non-zero of ``x, y, z`` is positive), so each rotation has exactly one stored form.

These kernels are the single implementation of rotation maths in the project: ``SO3``/``SE3``
wrap them for single values, and kinematics, transforms and the planner call them for batches.
"""

from __future__ import annotations

import math

import numpy as np

#: Below this rotation angle (rad) the exp/log maps switch to their Taylor series.
SMALL_ANGLE_RAD = 1e-4
#: Below this cos(pitch) the Z-Y-X decomposition is treated as gimbal-locked (docs/reference/spatial.md).
GIMBAL_LOCK_COS_PITCH = 1e-8


def canonicalize(q: np.ndarray) -> np.ndarray:
    """Unit, canonical copy of quaternions ``q`` (..., 4) [w, x, y, z]."""
    q = np.asarray(q, dtype=float)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(norm == 0.0) or not np.all(np.isfinite(norm)):
        raise ValueError(f"quaternion must be finite and non-zero, got norm {norm.ravel()}")
    q = q / norm
    # Pick the sign: w > 0, or for w == 0 the first non-zero vector component > 0.
    sign_source = q[..., 0]
    for k in (1, 2, 3):
        sign_source = np.where(sign_source == 0.0, q[..., k], sign_source)
    return np.where((sign_source < 0.0)[..., None], -q, q)


def multiply(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Hamilton product ``q1 * q2`` (..., 4), renormalised and canonical."""
    q1 = np.asarray(q1, dtype=float)
    q2 = np.asarray(q2, dtype=float)
    w1, x1, y1, z1 = np.moveaxis(q1, -1, 0)
    w2, x2, y2, z2 = np.moveaxis(q2, -1, 0)
    out = np.stack(
        (
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ),
        axis=-1,
    )
    return canonicalize(out)


def conjugate(q: np.ndarray) -> np.ndarray:
    """Inverse of unit quaternions ``q`` (..., 4), canonical."""
    q = np.asarray(q, dtype=float)
    out = q * np.array([1.0, -1.0, -1.0, -1.0])
    return canonicalize(out)


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of unit quaternions ``q`` (..., 4)."""
    q = np.asarray(q, dtype=float)
    w, x, y, z = np.moveaxis(q, -1, 0)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    m = np.stack(
        (
            1 - 2 * (yy + zz),
            2 * (xy - wz),
            2 * (xz + wy),
            2 * (xy + wz),
            1 - 2 * (xx + zz),
            2 * (yz - wx),
            2 * (xz - wy),
            2 * (yz + wx),
            1 - 2 * (xx + yy),
        ),
        axis=-1,
    )
    return m.reshape(q.shape[:-1] + (3, 3))


def from_matrix(m: np.ndarray) -> np.ndarray:
    """Canonical unit quaternions (..., 4) of rotation matrices ``m`` (..., 3, 3).

    Shepperd's method: the largest of the four squared components is taken from the diagonal,
    the others from off-diagonal sums, so no branch divides by a small number.
    """
    m = np.asarray(m, dtype=float)
    if m.shape == (3, 3):
        return _from_one_matrix(m)
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    squares = np.stack(
        (
            1.0 + m00 + m11 + m22,
            1.0 + m00 - m11 - m22,
            1.0 - m00 + m11 - m22,
            1.0 - m00 - m11 + m22,
        ),
        axis=-1,
    )
    pick = np.argmax(squares, axis=-1)
    big = 0.5 * np.sqrt(np.maximum(np.take_along_axis(squares, pick[..., None], -1)[..., 0], 0.0))
    inv = 0.25 / big
    cand = np.empty(m.shape[:-2] + (4, 4))
    # Row k is the quaternion computed with component k as the large one.
    cand[..., 0, :] = np.stack((big, (m21 - m12) * inv, (m02 - m20) * inv, (m10 - m01) * inv), -1)
    cand[..., 1, :] = np.stack(((m21 - m12) * inv, big, (m01 + m10) * inv, (m02 + m20) * inv), -1)
    cand[..., 2, :] = np.stack(((m02 - m20) * inv, (m01 + m10) * inv, big, (m12 + m21) * inv), -1)
    cand[..., 3, :] = np.stack(((m10 - m01) * inv, (m02 + m20) * inv, (m12 + m21) * inv, big), -1)
    q = np.take_along_axis(cand, pick[..., None, None], axis=-2)[..., 0, :]
    return canonicalize(q)


def _from_one_matrix(m: np.ndarray) -> np.ndarray:
    """``from_matrix`` for one (3, 3) matrix in plain floats (same branches, no array overhead)."""
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = m.tolist()
    squares = (
        1.0 + m00 + m11 + m22,
        1.0 + m00 - m11 - m22,
        1.0 - m00 + m11 - m22,
        1.0 - m00 - m11 + m22,
    )
    pick = max(range(4), key=squares.__getitem__)
    big = 0.5 * math.sqrt(max(squares[pick], 0.0))
    inv = 0.25 / big
    if pick == 0:
        q = (big, (m21 - m12) * inv, (m02 - m20) * inv, (m10 - m01) * inv)
    elif pick == 1:
        q = ((m21 - m12) * inv, big, (m01 + m10) * inv, (m02 + m20) * inv)
    elif pick == 2:
        q = ((m02 - m20) * inv, (m01 + m10) * inv, big, (m12 + m21) * inv)
    else:
        q = ((m10 - m01) * inv, (m02 + m20) * inv, (m12 + m21) * inv, big)
    sign_source = next((c for c in q if c != 0.0), 1.0)  # w, or the first non-zero if w == 0
    scale = math.copysign(1.0, sign_source) / math.sqrt(sum(c * c for c in q))
    return np.array([c * scale for c in q])


def exp(rotvec: np.ndarray) -> np.ndarray:
    """Canonical unit quaternions (..., 4) of rotation vectors ``rotvec`` (..., 3) rad."""
    v = np.asarray(rotvec, dtype=float)
    theta = np.linalg.norm(v, axis=-1)
    half = 0.5 * theta
    small = theta < SMALL_ANGLE_RAD
    safe_theta = np.where(small, 1.0, theta)
    # sin(theta/2)/theta, with its Taylor series near 0.
    scale = np.where(small, 0.5 - theta**2 / 48.0 + theta**4 / 3840.0, np.sin(half) / safe_theta)
    q = np.concatenate((np.cos(half)[..., None], v * scale[..., None]), axis=-1)
    return canonicalize(q)


def log(q: np.ndarray) -> np.ndarray:
    """Rotation vectors (..., 3) rad, angle in [0, pi], of unit quaternions ``q`` (..., 4)."""
    q = canonicalize(q)
    w = q[..., 0]
    u = q[..., 1:]
    s = np.linalg.norm(u, axis=-1)
    small = s < SMALL_ANGLE_RAD
    safe_s = np.where(small, 1.0, s)
    safe_w = np.where(small, w, 1.0)
    # theta / s = 2 atan2(s, w) / s, with its series 2/w (1 - s^2 / (3 w^2)) near s = 0.
    scale = np.where(
        small, 2.0 / safe_w * (1.0 - s**2 / (3.0 * safe_w**2)), 2.0 * np.arctan2(s, w) / safe_s
    )
    return u * scale[..., None]


def angle_between(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Angle (...,) rad in [0, pi] of the rotation taking ``q1`` to ``q2``: ``2 atan2(|v|, |w|)``.

    Uses the relative quaternion, never ``acos`` of a dot product (accurate near zero).
    """
    q1 = np.asarray(q1, dtype=float)
    q2 = np.asarray(q2, dtype=float)
    w1, x1, y1, z1 = np.moveaxis(q1, -1, 0)
    w2, x2, y2, z2 = np.moveaxis(q2, -1, 0)
    # conj(q1) * q2, not renormalised: the atan2 ratio is scale-free.
    w = w1 * w2 + x1 * x2 + y1 * y2 + z1 * z2
    x = w1 * x2 - x1 * w2 - y1 * z2 + z1 * y2
    y = w1 * y2 + x1 * z2 - y1 * w2 - z1 * x2
    z = w1 * z2 - x1 * y2 + y1 * x2 - z1 * w2
    return 2.0 * np.arctan2(np.sqrt(x * x + y * y + z * z), np.abs(w))


def from_rpy(roll: np.ndarray, pitch: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Quaternions (..., 4) of Z-Y-X Euler angles: ``R = Rz(yaw) Ry(pitch) Rx(roll)``, rad."""
    hr, hp, hy = (0.5 * np.asarray(a, dtype=float) for a in (roll, pitch, yaw))
    cr, sr = np.cos(hr), np.sin(hr)
    cp, sp = np.cos(hp), np.sin(hp)
    cy, sy = np.cos(hy), np.sin(hy)
    q = np.stack(
        (
            cy * cp * cr + sy * sp * sr,
            cy * cp * sr - sy * sp * cr,
            cy * sp * cr + sy * cp * sr,
            sy * cp * cr - cy * sp * sr,
        ),
        axis=-1,
    )
    return canonicalize(q)


def matrix_to_rpy(m: np.ndarray) -> np.ndarray:
    """Z-Y-X Euler angles ``[roll, pitch, yaw]`` (..., 3) rad of rotation matrices (..., 3, 3).

    Pitch comes from ``atan2(-m20, hypot(m00, m10))``; at gimbal lock (``cos(pitch)`` below
    ``GIMBAL_LOCK_COS_PITCH``) yaw is set to 0 and the whole rotation about x goes to roll.
    """
    m = np.asarray(m, dtype=float)
    cos_pitch = np.hypot(m[..., 0, 0], m[..., 1, 0])
    pitch = np.arctan2(-m[..., 2, 0], cos_pitch)
    locked = cos_pitch < GIMBAL_LOCK_COS_PITCH
    roll = np.where(
        locked, np.arctan2(-m[..., 1, 2], m[..., 1, 1]), np.arctan2(m[..., 2, 1], m[..., 2, 2])
    )
    yaw = np.where(locked, 0.0, np.arctan2(m[..., 1, 0], m[..., 0, 0]))
    return np.stack((roll, pitch, yaw), axis=-1)


def skew(v: np.ndarray) -> np.ndarray:
    """Cross-product matrices (..., 3, 3) of vectors ``v`` (..., 3): ``skew(a) @ b == a x b``."""
    v = np.asarray(v, dtype=float)
    x, y, z = np.moveaxis(v, -1, 0)
    zero = np.zeros_like(x)
    return np.stack((zero, -z, y, z, zero, -x, -y, x, zero), axis=-1).reshape(v.shape + (3,))
