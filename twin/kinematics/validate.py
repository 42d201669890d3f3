"""Input checks shared by the kinematics API: shapes, finiteness, rigid transforms.

Each raises ``ValueError`` saying what was wrong and what was expected.
"""

from __future__ import annotations

import math

import numpy as np

#: Largest ``|R^T R - I|`` entry accepted for the rotation block of a pose.
ORTHONORMAL_TOL = 1e-6


def as_configurations(q: object, n: int, name: str = "q") -> np.ndarray:
    """``q`` as a float array of shape (n,) or (N, n) rad, finite."""
    try:
        arr = np.array(q, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be an array of joint angles (rad), got {q!r}") from e
    if arr.ndim not in (1, 2) or arr.shape[-1] != n:
        raise ValueError(f"{name} must have shape ({n},) or (N, {n}) rad, got {arr.shape}")
    # One configuration: a check on n Python floats costs less than numpy's ufunc + reduction.
    finite = all(map(math.isfinite, arr.tolist())) if arr.ndim == 1 else np.isfinite(arr).all()
    if not finite:
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name} has a non-finite value at index {tuple(bad)}; expected finite")
    return arr


def as_poses(pose: object, name: str = "pose") -> np.ndarray:
    """``pose`` as a float array (4, 4) or (N, 4, 4): finite, rigid (orthonormal rotation with
    determinant +1, last row ``[0, 0, 0, 1]``)."""
    try:
        arr = np.array(pose, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a (4, 4) homogeneous matrix, got {pose!r}") from e
    if arr.ndim not in (2, 3) or arr.shape[-2:] != (4, 4):
        raise ValueError(f"{name} must have shape (4, 4) or (N, 4, 4), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} has non-finite entries; expected a finite rigid transform")
    flat = arr.reshape(-1, 4, 4)
    cols = np.ascontiguousarray(flat[:, :3, :3].transpose(1, 2, 0))  # (row, column, M)
    ortho_err = np.zeros(flat.shape[0])
    for i in range(3):
        for j in range(i, 3):
            gram = cols[0, i] * cols[0, j] + cols[1, i] * cols[1, j] + cols[2, i] * cols[2, j]
            ortho_err = np.maximum(ortho_err, np.abs(gram - (1.0 if i == j else 0.0)))
    (a, b, c), (d, e, f), (g, h, k) = cols
    det = a * (e * k - f * h) - b * (d * k - f * g) + c * (d * h - e * g)
    bottom_bad = np.any(flat[:, 3, :3] != 0.0, axis=1) | (flat[:, 3, 3] != 1.0)
    bad = (ortho_err > ORTHONORMAL_TOL) | (det <= 0.0) | bottom_bad
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} (index {i}) is not a rigid transform: |R^T R - I| = "
            f"{ortho_err[i]:.3g} (tolerance {ORTHONORMAL_TOL}), det R = {det[i]:.6g}, "
            f"last row {flat[i, 3].tolist()} (expected [0, 0, 0, 1])"
        )
    return arr
