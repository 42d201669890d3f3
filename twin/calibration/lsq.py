"""Linear least squares with the diagnostics every calibration reports.

``solve(a, b)`` returns the estimate with its residuals, the rank and the condition number of
the design matrix after scaling each column to unit norm (so the figure does not depend on the
units of the unknowns), and a ``degenerate`` verdict: rank-deficient, or condition beyond
``max_condition``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Condition number (column-scaled) beyond which a design counts as degenerate.
MAX_CONDITION = 1e4


@dataclass(frozen=True)
class LsqFit:
    """x: (p,) estimate; residuals: (m,) ``a x - b``; rms: their RMS; condition: of the
    column-scaled ``a`` (inf when rank-deficient); rank: its numerical rank; covariance:
    (p, p) of ``x`` for unit-variance residuals (scale by the noise variance)."""

    x: np.ndarray
    residuals: np.ndarray
    rms: float
    condition: float
    rank: int
    covariance: np.ndarray
    degenerate: bool


def solve(a: np.ndarray, b: np.ndarray, max_condition: float = MAX_CONDITION) -> LsqFit:
    """Least squares of ``a`` (m, p) ``x = b`` (m,) with its diagnostics (module doc)."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    norms = np.linalg.norm(a, axis=0)
    scale = np.where(norms == 0.0, 1.0, norms)
    scaled = a / scale
    u, s, vt = np.linalg.svd(scaled, full_matrices=False)
    tol = s[0] * max(a.shape) * np.finfo(float).eps if s.size else 0.0
    keep = s > tol
    rank = int(np.sum(keep))
    full = rank == a.shape[1] and a.shape[0] >= a.shape[1]
    condition = float(s[0] / s[-1]) if full else float("inf")
    # minimum-norm solution (of the scaled unknowns) over the kept singular directions
    x = (vt[keep].T @ ((u[:, keep].T @ b) / s[keep])) / scale
    residuals = a @ x - b
    if full:
        covariance = ((vt.T / s**2) @ vt) / np.outer(scale, scale)
    else:
        covariance = np.full((a.shape[1], a.shape[1]), np.inf)
    return LsqFit(
        x=x,
        residuals=residuals,
        rms=float(np.sqrt(np.mean(residuals**2))) if residuals.size else 0.0,
        condition=condition,
        rank=rank,
        covariance=covariance,
        degenerate=not full or condition > max_condition,
    )
