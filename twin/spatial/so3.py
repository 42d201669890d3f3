"""SO3 and SE3 value types for single rotations and rigid transforms.

An ``SO3`` stores one canonical unit quaternion ``[w, x, y, z]`` (``w >= 0``); every product
renormalises. An ``SE3`` is an ``SO3`` plus a translation ``(3,)`` m. Read ``a_T_b`` as the pose
of frame b expressed in frame a, so ``a_T_c = a_T_b @ b_T_c``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from twin.spatial import quaternion as quat


def _vector(values: Iterable[float], length: int, what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.shape != (length,):
        raise ValueError(f"{what} must have shape ({length},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be finite, got {arr}")
    return arr


class SO3:
    """A rotation, stored as a canonical unit quaternion ``[w, x, y, z]``."""

    __slots__ = ("_q",)

    def __init__(self, wxyz: Iterable[float] = (1.0, 0.0, 0.0, 0.0)) -> None:
        self._q = quat.canonicalize(_vector(wxyz, 4, "quaternion [w, x, y, z]"))

    @classmethod
    def _trusted(cls, q: np.ndarray) -> SO3:
        obj = cls.__new__(cls)
        obj._q = q
        return obj

    @classmethod
    def identity(cls) -> SO3:
        return cls._trusted(np.array([1.0, 0.0, 0.0, 0.0]))

    @classmethod
    def from_matrix(cls, matrix: np.ndarray) -> SO3:
        """From a rotation matrix (3, 3); it must be orthonormal to 1e-6 with determinant +1."""
        m = np.asarray(matrix, dtype=float)
        if m.shape != (3, 3) or not np.all(np.isfinite(m)):
            raise ValueError(f"rotation matrix must be a finite (3, 3) array, got {m.shape}")
        if np.abs(m @ m.T - np.eye(3)).max() > 1e-6 or np.linalg.det(m) < 0.0:
            raise ValueError("rotation matrix must be orthonormal with determinant +1")
        return cls._trusted(quat.from_matrix(m))

    @classmethod
    def exp(cls, rotvec: Iterable[float]) -> SO3:
        """From a rotation vector (3,) rad (axis times angle)."""
        return cls._trusted(quat.exp(_vector(rotvec, 3, "rotation vector")))

    @classmethod
    def from_rpy(cls, roll: float, pitch: float, yaw: float) -> SO3:
        """From Z-Y-X Euler angles rad: ``R = Rz(yaw) Ry(pitch) Rx(roll)``. Import only."""
        _vector((roll, pitch, yaw), 3, "roll, pitch, yaw")
        return cls._trusted(quat.from_rpy(roll, pitch, yaw))

    @classmethod
    def from_axis_angle(cls, axis: Iterable[float], angle: float) -> SO3:
        """From a unit-or-not axis (3,) and an angle rad."""
        a = _vector(axis, 3, "axis")
        n = np.linalg.norm(a)
        if n == 0.0:
            raise ValueError("axis must be non-zero")
        return cls.exp(a / n * float(angle))

    @property
    def wxyz(self) -> np.ndarray:
        """The quaternion (4,) ``[w, x, y, z]``, canonical and unit (a copy)."""
        return self._q.copy()

    def matrix(self) -> np.ndarray:
        """Rotation matrix (3, 3)."""
        return quat.to_matrix(self._q)

    def log(self) -> np.ndarray:
        """Rotation vector (3,) rad, angle in [0, pi]."""
        return quat.log(self._q)

    def rpy(self) -> np.ndarray:
        """Z-Y-X Euler angles ``[roll, pitch, yaw]`` rad. Export only."""
        return quat.matrix_to_rpy(self.matrix())

    def inverse(self) -> SO3:
        return SO3._trusted(quat.conjugate(self._q))

    def angle_to(self, other: SO3) -> float:
        """Angle rad in [0, pi] between this rotation and ``other``: ``2 atan2(|v|, |w|)``."""
        return float(quat.angle_between(self._q, other._q))

    def act(self, points: np.ndarray) -> np.ndarray:
        """Rotate points or vectors (3,) or (N, 3)."""
        return quat.rotate(self._q, np.asarray(points, dtype=float))

    def __matmul__(self, other: SO3) -> SO3:
        """Hamilton product, renormalised and canonical (plain floats: no array overhead)."""
        if not isinstance(other, SO3):
            return NotImplemented
        w1, x1, y1, z1 = self._q.tolist()
        w2, x2, y2, z2 = other._q.tolist()
        w = w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2
        x = w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2
        y = w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2
        z = w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2
        q = np.array((w, x, y, z))
        if w <= 0.0:  # rare: let the kernel settle the sign (and the w == 0 tie-break)
            return SO3._trusted(quat.canonicalize(q))
        return SO3._trusted(q / math.sqrt(w * w + x * x + y * y + z * z))

    __mul__ = __matmul__

    def __repr__(self) -> str:
        w, x, y, z = self._q
        return f"SO3(wxyz=[{w:.6g}, {x:.6g}, {y:.6g}, {z:.6g}])"


class SE3:
    """A rigid transform: rotation ``SO3`` and translation (3,) m."""

    __slots__ = ("rotation", "translation")

    def __init__(
        self, rotation: SO3 | None = None, translation: Iterable[float] = (0.0, 0.0, 0.0)
    ) -> None:
        self.rotation = rotation if rotation is not None else SO3.identity()
        self.translation = _vector(translation, 3, "translation")

    @classmethod
    def identity(cls) -> SE3:
        return cls()

    @classmethod
    def from_translation(cls, translation: Iterable[float]) -> SE3:
        return cls(SO3.identity(), translation)

    @classmethod
    def from_matrix(cls, matrix: np.ndarray) -> SE3:
        """From a homogeneous matrix (4, 4) whose last row is ``[0, 0, 0, 1]``."""
        m = np.asarray(matrix, dtype=float)
        if m.shape != (4, 4):
            raise ValueError(f"homogeneous matrix must have shape (4, 4), got {m.shape}")
        if not np.allclose(m[3], [0.0, 0.0, 0.0, 1.0]):
            raise ValueError(f"last row of a homogeneous matrix must be [0, 0, 0, 1], got {m[3]}")
        return cls(SO3.from_matrix(m[:3, :3]), m[:3, 3])

    @classmethod
    def from_pose7(cls, pose: Iterable[float]) -> SE3:
        """From ``[px, py, pz, qw, qx, qy, qz]`` (7,); the quaternion is normalised."""
        p = _vector(pose, 7, "pose [px, py, pz, qw, qx, qy, qz]")
        return cls(SO3(p[3:]), p[:3])

    def matrix(self) -> np.ndarray:
        """Homogeneous matrix (4, 4)."""
        m = np.eye(4)
        m[:3, :3] = self.rotation.matrix()
        m[:3, 3] = self.translation
        return m

    def pose7(self) -> np.ndarray:
        """``[px, py, pz, qw, qx, qy, qz]`` (7,), quaternion canonical."""
        return np.concatenate((self.translation, self.rotation.wxyz))

    def inverse(self) -> SE3:
        r_inv = self.rotation.inverse()
        return SE3(r_inv, -r_inv.act(self.translation))

    def act(self, points: np.ndarray) -> np.ndarray:
        """Transform points (3,) or (N, 3) m from the child frame into the parent frame."""
        return self.rotation.act(points) + self.translation

    def __matmul__(self, other: SE3) -> SE3:
        if not isinstance(other, SE3):
            return NotImplemented
        return SE3(
            self.rotation @ other.rotation, self.rotation.act(other.translation) + self.translation
        )

    __mul__ = __matmul__

    def __repr__(self) -> str:
        t = self.translation
        return f"SE3(t=[{t[0]:.6g}, {t[1]:.6g}, {t[2]:.6g}], {self.rotation!r})"
