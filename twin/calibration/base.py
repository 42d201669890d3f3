"""Base-frame calibration from point correspondences: the closed-form rigid fit.

Points measured by an external device in its own frame (a tracker, a fixed camera: ``meas``)
and the same points in the robot's base frame (the TCP by FK of the joints) give
``meas_T_base`` by the Kabsch / Umeyama fit (no scale; ``rigid.rigid_fit``). Fewer than three
points, or points on one line, leave the rotation about that line undetermined: the estimate
then comes with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.calibration.rigid import rigid_fit, transform

#: Smallest spread (m, second singular value of the centred points / sqrt(K)) off one line.
MIN_SPREAD_M = 1e-3


@dataclass(frozen=True)
class BaseEstimate:
    """meas_T_base: (4, 4); residuals: (K,) m, distance of each fitted point; rms: m;
    spread: (3,) m, RMS extent of the points along their principal axes; warning: "" unless
    degenerate."""

    meas_T_base: np.ndarray
    residuals: np.ndarray
    rms: float
    spread: np.ndarray
    warning: str


def calibrate_base(points_base: np.ndarray, points_meas: np.ndarray) -> BaseEstimate:
    """``meas_T_base`` from the same points (K, 3) m in the base and the measuring frame."""
    b, m = np.asarray(points_base, float), np.asarray(points_meas, float)
    if b.ndim != 2 or b.shape[1] != 3 or b.shape != m.shape:
        raise ValueError(f"expected two point sets (K, 3) of the same K, got {b.shape}, {m.shape}")
    if not (np.all(np.isfinite(b)) and np.all(np.isfinite(m))):
        raise ValueError("points must be finite")
    if len(b) < 2:
        raise ValueError(f"a rigid fit needs at least 2 points (3 off one line), got {len(b)}")
    t = rigid_fit(b, m)
    residuals = np.linalg.norm(transform(t, b) - m, axis=1)
    spread = np.linalg.svd(b - b.mean(axis=0), compute_uv=False) / np.sqrt(len(b))
    spread = np.pad(spread, (0, 3 - len(spread)))
    warning = ""
    if spread[1] < MIN_SPREAD_M:
        warning = (
            f"degenerate: the points lie on one line (spread {spread[1]:.2g} m off it), so the "
            "rotation about it is undetermined"
        )
    return BaseEstimate(t, residuals, float(np.sqrt(np.mean(residuals**2))), spread, warning)
