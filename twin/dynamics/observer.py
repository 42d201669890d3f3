"""Generalized-momentum observer: the external joint torques from measured ``q, qd, tau``.

With ``p = M(q) qd`` the arm's generalized momentum, ``dp/dt = tau + tau_ext - C qd - g + dM/dt
qd`` (``C^T qd = dM/dt qd - C qd``), so the residual

    r = K (p - p_0 - integral(tau - b + dM/dt qd + r) dt),   b = C(q, qd) qd + g(q)

obeys ``dr/dt = K (tau_ext - r)``: a first-order low-pass (time constant ``1/K``) of the
external torque, with no joint acceleration needed (Luca & Mattone 2003). Discrete form: the
rectangle rule at each update, ``dM/dt`` as the backward difference of ``M`` over the update's
interval. ``r`` (n,) N m is the torque the environment applies at each joint (positive along
the joint axis): ``J^T F`` for a force ``F`` at a point of Jacobian ``J``. Unmodelled friction,
damping or payload show in it too.
"""

from __future__ import annotations

import math

import numpy as np

from twin.dynamics.arm import ArmDynamics

#: Longest interval (us) still integrated; after a longer gap the observer restarts.
MAX_GAP_US = 100_000


class MomentumObserver:
    """The observer of ``dynamics`` (``ArmDynamics``) with time constant ``tau_s`` (s)."""

    def __init__(self, dynamics: ArmDynamics, tau_s: float = 0.01) -> None:
        if not (math.isfinite(tau_s) and tau_s > 0.0):
            raise ValueError(f"observer time constant must be > 0 s, got {tau_s!r}")
        self.dynamics = dynamics
        self.tau_s = float(tau_s)
        self.reset()

    def reset(self) -> None:
        """Forget the history: the next update restarts the integral, ``residual`` zero."""
        n = self.dynamics.n
        self.residual = np.zeros(n)
        self._integral = np.zeros(n)
        self._p0: np.ndarray | None = None
        self._m_prev = np.zeros((n, n))
        self._t_us: int | None = None

    def set_dynamics(self, dynamics: ArmDynamics) -> None:
        """Switch the model (e.g. a newly identified payload) and restart."""
        self.dynamics = dynamics
        self.reset()

    def update(self, t_us: int, q: np.ndarray, qd: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """One measured state: ``q`` (n,) rad, ``qd`` rad/s, ``tau`` N m applied, at ``t_us``.
        Returns the residual (n,) N m (a view: copy to keep it)."""
        dt_us = None if self._t_us is None else t_us - self._t_us
        if dt_us == 0:
            return self.residual  # the same state again
        dyn = self.dynamics
        qd = np.asarray(qd, float)
        m = dyn.mass_matrix(q)
        b = dyn.inverse_dynamics(q, qd, np.zeros_like(qd))
        p = m @ qd
        if dt_us is None or dt_us < 0 or dt_us > MAX_GAP_US:
            self.reset()
            self._p0 = p
        else:
            dt = dt_us * 1e-6
            m_dot = (m - self._m_prev) / dt
            self._integral += (np.asarray(tau, float) - b + m_dot @ qd + self.residual) * dt
            self.residual = (p - self._p0 - self._integral) / self.tau_s
        self._m_prev, self._t_us = m, int(t_us)
        return self.residual
