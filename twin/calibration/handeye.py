"""Hand-eye calibration, ``A X = X B``, for a camera on the wrist and for a fixed camera.

Inputs: flange poses ``F_k = base_T_flange`` (FK of the joints) and the camera's marker poses
``C_k = cam_T_marker`` (K, 4, 4), one pair per robot pose.

* Camera on the wrist, marker fixed: ``F_k X C_k = base_T_marker`` for ``X = flange_T_cam``, so
  ``A = F_j^-1 F_i`` and ``B = C_j C_i^-1`` for every pair ``i < j``.
* Fixed camera, marker on the flange: ``F_k Y = base_T_cam C_k`` for ``Y = flange_T_marker``, so
  ``A = F_j^-1 F_i``, ``B = C_j^-1 C_i``; then ``base_T_cam`` is the mean of ``F_k Y C_k^-1``.

``solve_ax_xb``: rotation by Park & Martin (the rotation vectors obey ``a = R_X b``: an
orthogonal Procrustes fit, ``rigid.kabsch``), then translation by least squares of
``(R_A - I) t_X = R_X t_B - t_A``. Motions whose rotations all share one axis leave the
translation along it (and the rotation about it, with two or fewer distinct axes) undetermined:
the estimate then comes with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.calibration.lsq import solve
from twin.calibration.rigid import axis_spread, invert, kabsch, mean_pose, rotation_angle, rotvec

MIN_AXIS_SPREAD = 0.05  # second singular value of the unit rotation axes: more than one axis
MIN_ROTATION_RAD = 0.05  # relative rotations smaller than this carry no axis


@dataclass(frozen=True)
class HandEyeEstimate:
    """X: (4, 4) the hand-eye transform (``flange_T_cam`` for a wrist camera,
    ``flange_T_marker`` for a fixed one); other: (4, 4) the fixed partner (``base_T_marker``,
    resp. ``base_T_cam``); position_residuals: (K,) m and angle_residuals: (K,) rad between
    each measured ``cam_T_marker`` and the one the estimate predicts; condition: of the
    translation's design; warning: "" unless the motions are degenerate."""

    X: np.ndarray
    other: np.ndarray
    position_residuals: np.ndarray
    angle_residuals: np.ndarray
    condition: float
    warning: str


def solve_ax_xb(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float, str]:
    """``X`` (4, 4) with ``A_k X = X B_k`` for motions (K, 4, 4); returns (X, condition of the
    translation's design, warning)."""
    alpha, beta = rotvec(a[:, :3, :3]), rotvec(b[:, :3, :3])
    r = kabsch(beta, alpha)
    k = len(a)
    design = a[:, :3, :3] - np.eye(3)
    rhs = np.einsum("ij,kj->ki", r, b[:, :3, 3]) - a[:, :3, 3]
    fit = solve(design.reshape(3 * k, 3), rhs.reshape(-1))
    x = np.eye(4)
    x[:3, :3], x[:3, 3] = r, fit.x
    warning = ""
    if axis_spread(alpha, MIN_ROTATION_RAD) < MIN_AXIS_SPREAD:
        warning = (
            "degenerate: every motion rotates about one axis, so the rotation about it and the "
            "translation along it are undetermined (rotate about a second axis)"
        )
    elif fit.degenerate:
        warning = f"degenerate: ill-conditioned motions (condition {fit.condition:.3g})"
    return x, fit.condition, warning


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(n, 1)
    return i, j


def _check(base_T_flange, cam_T_marker) -> tuple[np.ndarray, np.ndarray]:
    f, c = np.asarray(base_T_flange, float), np.asarray(cam_T_marker, float)
    if f.ndim != 3 or f.shape[1:] != (4, 4) or f.shape != c.shape:
        raise ValueError(
            f"expected two pose stacks (K, 4, 4) of the same K, got {f.shape}, {c.shape}"
        )
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(c))):
        raise ValueError("poses must be finite")
    if len(f) < 3:
        raise ValueError(f"hand-eye calibration needs at least 3 poses, got {len(f)}")
    return f, c


def _residuals(measured: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.linalg.norm(measured[:, :3, 3] - predicted[:, :3, 3], axis=1)
    rel = np.einsum("kji,kjl->kil", measured[:, :3, :3], predicted[:, :3, :3])
    return d, rotation_angle(rel)


def hand_eye_wrist(base_T_flange: np.ndarray, cam_T_marker: np.ndarray) -> HandEyeEstimate:
    """Camera on the wrist looking at a fixed marker: ``flange_T_cam`` and ``base_T_marker``."""
    f, c = _check(base_T_flange, cam_T_marker)
    i, j = _pairs(len(f))
    a = invert(f[j]) @ f[i]
    b = c[j] @ invert(c[i])
    x, cond, warning = solve_ax_xb(a, b)
    marker = mean_pose(f @ x @ c)
    predicted = invert(f @ x) @ marker
    d, ang = _residuals(c, predicted)
    return HandEyeEstimate(x, marker, d, ang, cond, warning)


def hand_eye_fixed(base_T_flange: np.ndarray, cam_T_marker: np.ndarray) -> HandEyeEstimate:
    """Fixed camera looking at a marker on the flange: ``flange_T_marker`` and ``base_T_cam``."""
    f, c = _check(base_T_flange, cam_T_marker)
    i, j = _pairs(len(f))
    a = invert(f[j]) @ f[i]
    b = invert(c[j]) @ c[i]
    y, cond, warning = solve_ax_xb(a, b)
    cam = mean_pose(f @ y @ invert(c))
    predicted = invert(cam) @ f @ y
    d, ang = _residuals(c, predicted)
    return HandEyeEstimate(y, cam, d, ang, cond, warning)
