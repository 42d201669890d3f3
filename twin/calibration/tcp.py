"""TCP calibration by pivoting: the tool tip held on one fixed point in four or more flange
orientations.

With ``base_T_flange_k = [R_k, p_k]`` the measured flange poses (FK of the joints), the tip
offset ``t`` (3,) m (flange frame) and the pivot ``P`` (3,) m (base frame) satisfy
``R_k t + p_k = P``: linear least squares in ``[t, P]`` (``lsq.solve``). Rotations that all
share one axis leave the tip's component along that axis undetermined (rank 5): the estimate is
then the minimum-norm one, with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.calibration.lsq import solve
from twin.calibration.rigid import axis_spread, rotvec

#: Smallest spread of the relative rotation axes (second singular value) that counts as
#: "about more than one axis", and the smallest relative rotation (rad) that counts at all.
MIN_AXIS_SPREAD = 0.05
MIN_ROTATION_RAD = 0.05


@dataclass(frozen=True)
class TcpEstimate:
    """flange_p_tcp: (3,) m, flange frame; pivot: (3,) m, base frame; residuals: (K,) m, the
    distance of each pose's tip from the pivot; rms: m; condition: of the column-scaled
    design; std: (6,) standard errors of ``[t, P]`` from the residuals; unit_covariance: (6, 6)
    of ``[t, P]`` per unit variance (m^2) of the tip's placement on the point (scale by the
    placement noise's variance for the expected error); warning: "" unless degenerate."""

    flange_p_tcp: np.ndarray
    pivot: np.ndarray
    residuals: np.ndarray
    rms: float
    condition: float
    std: np.ndarray
    unit_covariance: np.ndarray
    warning: str

    @property
    def flange_T_tcp(self) -> np.ndarray:
        """(4, 4): the tip as a TCP with the flange's orientation."""
        out = np.eye(4)
        out[:3, 3] = self.flange_p_tcp
        return out


def calibrate_tcp(base_T_flange: np.ndarray) -> TcpEstimate:
    """Pivot calibration (module doc) from flange poses (K, 4, 4), K >= 4."""
    t = np.asarray(base_T_flange, float)
    if t.ndim != 3 or t.shape[1:] != (4, 4) or not np.all(np.isfinite(t)):
        raise ValueError(f"base_T_flange must be finite poses (K, 4, 4), got {t.shape}")
    k = t.shape[0]
    if k < 4:
        raise ValueError(f"pivot calibration needs at least 4 poses, got {k}")
    a = np.zeros((k, 3, 6))
    a[:, :, :3] = t[:, :3, :3]
    a[:, :, 3:] = -np.eye(3)
    fit = solve(a.reshape(3 * k, 6), -t[:, :3, 3].reshape(-1))
    relative = rotvec(np.einsum("ji,kjl->kil", t[0, :3, :3], t[1:, :3, :3]))
    warnings = []
    if axis_spread(relative, MIN_ROTATION_RAD) < MIN_AXIS_SPREAD:
        warnings.append(
            "degenerate: every rotation is about one axis, so the tip along it is undetermined "
            "(tilt the tool about a second axis)"
        )
    elif fit.degenerate:
        warnings.append(f"degenerate: ill-conditioned poses (condition {fit.condition:.3g})")
    tip, pivot = fit.x[:3], fit.x[3:]
    residuals = np.linalg.norm(fit.residuals.reshape(k, 3), axis=1)
    dof = max(3 * k - 6, 1)
    std = np.sqrt(np.abs(np.diag(fit.covariance)) * float(fit.residuals @ fit.residuals) / dof)
    return TcpEstimate(
        tip,
        pivot,
        residuals,
        float(np.sqrt(np.mean(residuals**2))),
        fit.condition,
        std,
        fit.covariance,
        "; ".join(warnings),
    )
