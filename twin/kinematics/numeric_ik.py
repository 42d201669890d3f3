"""Numeric IK by damped least squares, for any serial chain (no closed form needed).

Each iteration solves ``(J J^T + lambda^2 I) y = e``, ``dq = J^T y`` with the geometric Jacobian
``J`` (6, n) and the pose error ``e = [p_target - p; log(R_target R^T)]`` (m, rad, base frame).
The damping ``lambda^2 = damping^2 min(1, |e|)`` keeps steps bounded near singularities and
vanishes near the solution (fast final convergence). Steps are capped at ``max_step_rad`` and
the configuration is clipped into the joint limits after every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from twin.spatial import quaternion as quat

if TYPE_CHECKING:
    from twin.kinematics.arm_data import ArmData


@dataclass(frozen=True, eq=False)
class NumericIkResult:
    """``q`` (n,) rad or ``None``; final ``position_error`` m and ``rotation_error`` rad;
    ``iterations`` used; ``reason`` is empty on success."""

    q: np.ndarray | None
    position_error: float
    rotation_error: float
    iterations: int
    reason: str = ""


def solve(
    model: ArmData,
    pose: np.ndarray,
    q0: np.ndarray,
    link: str = "tcp",
    max_iterations: int = 200,
    position_tol: float = 1e-10,
    rotation_tol: float = 1e-10,
    damping: float = 0.05,
    max_step_rad: float = 0.5,
) -> NumericIkResult:
    """Damped least squares from ``q0`` (n,) rad to ``pose`` (4, 4) ``base_T_link``."""
    lo, hi = model.lower, model.upper
    q = np.clip(np.asarray(q0, dtype=float), lo, hi)
    target_r = pose[:3, :3]
    target_p = pose[:3, 3]
    err_p = err_r = np.inf
    chain = model.chain(link)  # one configuration per iteration: the generated code
    for it in range(max_iterations + 1):
        pose_now, jac = chain.pose_jacobian(q.tolist())
        e_p = target_p - pose_now[:3, 3]
        e_r = quat.log(quat.from_matrix(target_r @ pose_now[:3, :3].T))
        err_p, err_r = float(np.linalg.norm(e_p)), float(np.linalg.norm(e_r))
        if err_p <= position_tol and err_r <= rotation_tol:
            return NumericIkResult(q, err_p, err_r, it)
        if it == max_iterations:
            break
        e = np.concatenate((e_p, e_r))
        lam2 = damping**2 * min(1.0, float(np.linalg.norm(e)))
        dq = jac.T @ np.linalg.solve(jac @ jac.T + lam2 * np.eye(6), e)
        biggest = float(np.max(np.abs(dq)))
        if biggest > max_step_rad:
            dq *= max_step_rad / biggest
        q = np.clip(q + dq, lo, hi)
    return NumericIkResult(
        None,
        err_p,
        err_r,
        max_iterations,
        f"no convergence in {max_iterations} iterations (left {err_p:.3g} m, {err_r:.3g} rad)",
    )
