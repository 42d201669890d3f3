"""Invariants of the equations of motion ``M qdd + C qd + g = tau`` (hypothesis, derandomised)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from twin.dynamics import ArmDynamics

DYN = ArmDynamics.default()
ARM = DYN.arm
unit6 = arrays(np.float64, 6, elements=st.floats(-1.0, 1.0))
configurations = arrays(np.float64, 6, elements=st.floats(0.0, 1.0)).map(
    lambda u: ARM.lower + u * (ARM.upper - ARM.lower)
)
velocities = unit6.map(lambda u: 2.0 * u * ARM.velocity_limits)


@given(configurations)
def test_mass_matrix_is_symmetric_positive_definite(q):
    m = DYN.mass_matrix(q)
    np.testing.assert_array_equal(m, m.T)
    assert np.linalg.eigvalsh(m).min() > 1e-6  # kg m^2; the lightest wrist joint is ~1e-4


def test_mass_matrix_at_a_singular_configuration_stays_positive_definite():
    q = np.zeros(6)  # stretched upright: joints 1, 4 and 6 coaxial
    assert np.linalg.eigvalsh(DYN.mass_matrix(q)).min() > 1e-6


@given(configurations, velocities)
def test_mdot_minus_two_c_is_skew_symmetric(q, qd):
    h = 1e-6  # s: central difference of M along the motion, error O(h^2)
    mdot = (DYN.mass_matrix(q + h * qd) - DYN.mass_matrix(q - h * qd)) / (2.0 * h)
    c = DYN.coriolis_matrix(q, qd)
    np.testing.assert_allclose(c @ qd, DYN.coriolis_torques(q, qd), rtol=0, atol=1e-12)
    n = mdot - 2.0 * c
    scale = max(1.0, float(np.abs(mdot).max()))
    assert abs(qd @ n @ qd) < 1e-7 * scale * (1.0 + qd @ qd)
    np.testing.assert_allclose(n, -n.T, rtol=0, atol=1e-7 * scale)


@given(configurations, velocities, arrays(np.float64, 6, elements=st.floats(-30.0, 30.0)))
def test_forward_dynamics_inverts_inverse_dynamics(q, qd, qdd):
    tau = DYN.inverse_dynamics(q, qd, qdd)
    np.testing.assert_allclose(DYN.forward_dynamics(q, qd, tau), qdd, rtol=0, atol=1e-8)


@given(configurations, velocities, unit6)
def test_the_regressor_is_linear_in_the_inertial_parameters(q, qd, qdd):
    y = DYN.regressor(q, qd, 10.0 * qdd)
    np.testing.assert_allclose(
        y @ DYN.parameters(), DYN.inverse_dynamics(q, qd, 10.0 * qdd), rtol=0, atol=1e-12
    )
    heavy = DYN.with_payload(0.7, (0.01, 0.0, 0.05), np.diag([1e-3, 1e-3, 5e-4]))
    np.testing.assert_allclose(
        y @ heavy.parameters(), heavy.inverse_dynamics(q, qd, 10.0 * qdd), rtol=0, atol=1e-12
    )


def _rk4_energy_drift(dt: float, seconds: float, q0: np.ndarray, qd0: np.ndarray) -> np.ndarray:
    """Torque-free motion of our model (gravity on) by classic Runge-Kutta: |E(T) - E(0)| J."""
    dyn = DYN
    zero = np.zeros_like(q0)

    def f(q, qd):
        return qd, dyn.forward_dynamics(q, qd, zero)

    q, qd = q0.copy(), qd0.copy()
    e0 = dyn.energy(q, qd)
    for _ in range(round(seconds / dt)):
        k1 = f(q, qd)
        k2 = f(q + 0.5 * dt * k1[0], qd + 0.5 * dt * k1[1])
        k3 = f(q + 0.5 * dt * k2[0], qd + 0.5 * dt * k2[1])
        k4 = f(q + dt * k3[0], qd + dt * k3[1])
        q = q + dt / 6.0 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        qd = qd + dt / 6.0 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return np.abs(dyn.energy(q, qd) - e0)


def test_energy_is_conserved_in_a_torque_free_simulation_to_integration_accuracy():
    rng = np.random.default_rng(5)
    q0 = rng.uniform(-1.0, 1.0, (6, 6)) + ARM.home_q
    qd0 = rng.uniform(-1.0, 1.0, (6, 6))
    coarse = _rk4_energy_drift(2e-3, 0.4, q0, qd0)
    fine = _rk4_energy_drift(1e-3, 0.4, q0, qd0)
    scale = np.abs(DYN.energy(q0, qd0)) + 1.0  # J
    assert np.all(fine < 1e-5 * scale), fine
    # RK4's global error is O(dt^4): halving the step cuts the drift by about 16
    ratio = coarse / np.maximum(fine, 1e-15)
    assert np.all(ratio[coarse > 1e-9] > 8.0), ratio
