"""Gravity torques of the arm from its URDF inertials (pure numpy, no engine): e.g. the ``tau_ff`` of
a hold command (the serial backend holds like the sim does) or a trajectory feed-forward.

One implementation: inverse dynamics at rest (``twin.dynamics``, recursive Newton-Euler with zero
velocity and acceleration)."""

from __future__ import annotations

import functools

import numpy as np

GRAVITY = np.array([0.0, 0.0, -9.81])  # m/s^2, base frame (z up), as the sim's world


def gravity_torques(model, q: np.ndarray, gravity: np.ndarray = GRAVITY) -> np.ndarray:
    """(n,) N m (or (N, n) for ``q`` (N, n) rad) the joints must apply to hold ``q`` against
    ``gravity`` (3,) m/s^2, base frame."""
    return _dynamics(model, tuple(np.asarray(gravity, float).ravel())).gravity_torques(q)


@functools.lru_cache(maxsize=8)
def _dynamics(model, gravity: tuple[float, ...]):
    """The model's dynamics (``twin.dynamics.ArmDynamics``), built once per model and gravity."""
    from twin.dynamics import ArmDynamics

    return ArmDynamics(model, gravity=gravity)
