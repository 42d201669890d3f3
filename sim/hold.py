"""Hold gains that are stable at the held configuration, for the sim's explicit control law.

The law ``u = tau_ff + kp (q_des - q) - kd qd`` is applied for one physics step of ``dt`` from
the state measured at the end of the previous one (PyBullet integrates semi-implicit Euler).
For one mode of inertia ``m`` that discrete loop is stable only while ``a + b / 2 < 2`` with
``a = dt kd / m`` and ``b = dt^2 kp / m``; for the arm the modes are those of ``M(q)^-1 K``.
Gains tuned at home (``HOLD_KP``/``HOLD_KD``) break that bound near the wrist singularity: as
``q5 -> 0`` the axes of joints 4 and 6 line up and the mode turning them against each other
moves almost no inertia (joint 4's effective inertia ``1 / (M^-1)_44`` falls from 6.7e-3 to
2.5e-4 kg m^2), so ``dt lambda_max(M^-1 Kd)`` grows from 0.56 (home) to 3.1 (q5 = 0) and the hold
oscillates at the sampling limit. ``stable_gains`` lowers the gains of the joints that carry
such a mode until both ``dt lambda_max(M^-1 Kd)`` and ``dt^2 lambda_max(M^-1 Kp)`` are at most
``STEP_BOUND`` (the sum then stays below 1.5 of the bound 2); that mode is over-damped (damping
ratio ~4 at q5 = 0), so it stays well damped with the lowered gain.
"""

from __future__ import annotations

import numpy as np

#: Largest ``dt lambda_max(M^-1 Kd)`` and ``dt^2 lambda_max(M^-1 Kp)`` a hold keeps.
STEP_BOUND = 1.0
_MAX_HALVINGS = 60


def stable_gains(
    mass_matrix: np.ndarray, kp: np.ndarray, kd: np.ndarray, dt: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(kp, kd)`` (n,) N m/rad and N m s/rad, lowered where needed so that the explicit loop
    at ``mass_matrix`` (n, n) kg m^2 with physics step ``dt`` s is stable (module doc); gains
    already within the bound are returned unchanged."""
    m_inv = np.linalg.inv(mass_matrix)
    return _bounded(m_inv, kp, dt * dt), _bounded(m_inv, kd, dt)


def _bounded(m_inv: np.ndarray, gains: np.ndarray, scale: float) -> np.ndarray:
    """``gains`` with ``scale * lambda_max(M^-1 K) <= STEP_BOUND``: the joint taking the largest
    part of the offending mode is halved until it holds."""
    k = np.array(gains, dtype=float)
    for _ in range(_MAX_HALVINGS):
        root = np.sqrt(k)
        sym = root[:, None] * m_inv * root[None, :]  # similar to M^-1 K, symmetric
        values, vectors = np.linalg.eigh(sym)
        if scale * values[-1] <= STEP_BOUND:
            return k
        j = int(np.argmax(np.abs(vectors[:, -1])))
        k[j] *= 0.5
    return k
