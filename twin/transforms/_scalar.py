"""Scalar (plain float) rotation helpers for the single-sample hot path.

``twin.spatial.quaternion`` is the project's rotation maths for arrays; on one 3-vector its numpy
overhead (several microseconds per call) would dominate a transformer ``update``, so the hot path
uses these tuple-of-float equivalents. Tests check them against the spatial kernels.
Matrices are row-major 9-tuples; quaternions ``(w, x, y, z)``. The functions use plain
arithmetic only, so each component may also be an (N,) array: ``update_batch`` evaluates the
same formulas on columns of a batch; and numba compiles the same source (``_compiled``).
"""

from __future__ import annotations

import math

import numpy as np

Vec3 = tuple[float, float, float]
Mat9 = tuple[float, float, float, float, float, float, float, float, float]
Quat = tuple[float, float, float, float]

IDENTITY9: Mat9 = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


def quat_to_mat9(q: Quat) -> Mat9:
    """Rotation matrix of a unit quaternion (same formula as ``quaternion.to_matrix``)."""
    w, x, y, z = q
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    return (
        1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy),
        2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx),
        2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy),
    )  # fmt: skip


def mat_mul(a: Mat9, b: Mat9) -> Mat9:
    """``a @ b``."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = a
    b0, b1, b2, b3, b4, b5, b6, b7, b8 = b
    return (
        a0 * b0 + a1 * b3 + a2 * b6, a0 * b1 + a1 * b4 + a2 * b7, a0 * b2 + a1 * b5 + a2 * b8,
        a3 * b0 + a4 * b3 + a5 * b6, a3 * b1 + a4 * b4 + a5 * b7, a3 * b2 + a4 * b5 + a5 * b8,
        a6 * b0 + a7 * b3 + a8 * b6, a6 * b1 + a7 * b4 + a8 * b7, a6 * b2 + a7 * b5 + a8 * b8,
    )  # fmt: skip


def transpose(a: Mat9) -> Mat9:
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = a
    return (a0, a3, a6, a1, a4, a7, a2, a5, a8)


def mat_t_mul(a: Mat9, b: Mat9) -> Mat9:
    """``a.T @ b``."""
    return mat_mul(transpose(a), b)


def mat_vec(a: Mat9, v: Vec3) -> Vec3:
    """``a @ v``."""
    x, y, z = v
    return (
        a[0] * x + a[1] * y + a[2] * z,
        a[3] * x + a[4] * y + a[5] * z,
        a[6] * x + a[7] * y + a[8] * z,
    )


def mat_t_vec(a: Mat9, v: Vec3) -> Vec3:
    """``a.T @ v``."""
    x, y, z = v
    return (
        a[0] * x + a[3] * y + a[6] * z,
        a[1] * x + a[4] * y + a[7] * z,
        a[2] * x + a[5] * y + a[8] * z,
    )


def qmul(a: Quat, b: Quat) -> Quat:
    """Hamilton product ``a * b`` (not renormalised)."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return (
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    )


def qconj(q: Quat) -> Quat:
    return (q[0], -q[1], -q[2], -q[3])


def qrot(q: Quat, v: Vec3) -> Vec3:
    """Rotate ``v`` by unit ``q`` (same formula as ``quaternion.rotate``)."""
    w, ux, uy, uz = q
    vx, vy, vz = v
    tx = 2.0 * (uy * vz - uz * vy)
    ty = 2.0 * (uz * vx - ux * vz)
    tz = 2.0 * (ux * vy - uy * vx)
    return (
        vx + w * tx + (uy * tz - uz * ty),
        vy + w * ty + (uz * tx - ux * tz),
        vz + w * tz + (ux * ty - uy * tx),
    )


def qcanonical(q: Quat) -> Quat:
    """Unit and canonical (``w >= 0``; for ``w == 0`` the first non-zero of x, y, z > 0), as
    ``quaternion.canonicalize``; floats (``qcanonical_columns`` for (N,) arrays)."""
    w, x, y, z = q
    n = math.sqrt(w * w + x * x + y * y + z * z)
    sign = w if w != 0.0 else (x if x != 0.0 else (y if y != 0.0 else z))
    if sign < 0.0:
        n = -n
    return (w / n, x / n, y / n, z / n)


def qcanonical_columns(q: Quat) -> Quat:
    """``qcanonical`` with each component an (N,) array."""
    w, x, y, z = q
    sign = w
    if not w.all():  # some w == 0: the first non-zero of x, y, z decides there
        sign = np.where(w != 0.0, w, np.where(x != 0.0, x, np.where(y != 0.0, y, z)))
    n = np.copysign(np.sqrt(w * w + x * x + y * y + z * z), sign)
    return (w / n, x / n, y / n, z / n)
