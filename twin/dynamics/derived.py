"""What follows from inverse dynamics and the mass matrix: bias and gravity torques, the
Coriolis matrix, forward dynamics and the inertial-parameter regressor (all batched: ``q``,
``qd``, ``qdd``, ``tau`` (N, n) in rad, rad/s, rad/s^2, N m; base-frame gravity (3,) m/s^2).

The equations of motion: ``M(q) qdd + C(q, qd) qd + g(q) = tau``. Torques and mass matrices
come from the generated code (``code.code_for(model)``); the regressor from the vectorised
kinematics of ``rnea``.
"""

from __future__ import annotations

import numpy as np

from twin.dynamics.code import code_for
from twin.dynamics.model import GRAVITY, PARAMETER_NAMES, RigidBodyModel
from twin.dynamics.rnea import Frames, _matvec, cross, motion

_NO_GRAVITY = np.zeros(3)


def gravity_torques(model: RigidBodyModel, q: np.ndarray, gravity=GRAVITY) -> np.ndarray:
    """``g(q)`` (N, n) N m: inverse dynamics at rest."""
    zero = np.zeros_like(q)
    return code_for(model).tau_batch(q, zero, zero, gravity)


def coriolis_torques(model: RigidBodyModel, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """``C(q, qd) qd`` (N, n) N m: centrifugal and Coriolis torques."""
    return code_for(model).tau_batch(q, qd, np.zeros_like(q), _NO_GRAVITY)


def coriolis_matrix(model: RigidBodyModel, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """The Christoffel-symbol ``C(q, qd)`` (N, n, n) kg m^2/s, with ``dM/dt - 2 C`` skew.

    The Coriolis torques ``c(q, x) = x^T Gamma(q) x`` are a quadratic form whose symmetric
    bilinear form gives the Christoffel symbols of the first kind, so column ``j`` is
    ``Gamma(qd, e_j) = (c(qd + e_j) - c(qd) - c(e_j)) / 2``: 2n + 1 Coriolis evaluations."""
    n_states, n = q.shape
    eye = np.eye(n)
    x = np.concatenate(
        (qd[:, None, :] + eye[None], np.broadcast_to(eye, (n_states, n, n)), qd[:, None, :]),
        axis=1,
    )  # (N, 2n + 1, n)
    qq = np.repeat(q, 2 * n + 1, axis=0)
    c = coriolis_torques(model, qq, x.reshape(-1, n)).reshape(n_states, 2 * n + 1, n)
    cols = 0.5 * (c[:, :n] - c[:, n : 2 * n] - c[:, 2 * n : 2 * n + 1])  # (N, j, k)
    return np.swapaxes(cols, 1, 2)


def forward_dynamics(
    model: RigidBodyModel, q: np.ndarray, qd: np.ndarray, tau: np.ndarray, gravity=GRAVITY
) -> np.ndarray:
    """Joint accelerations (N, n) rad/s^2 under torques ``tau``: ``M^-1 (tau - C qd - g)``."""
    bias = code_for(model).tau_batch(q, qd, np.zeros_like(q), gravity)
    return np.linalg.solve(code_for(model).mass_batch(q), (tau - bias)[..., None])[..., 0]


def regressor(
    model: RigidBodyModel, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, gravity=GRAVITY
) -> np.ndarray:
    """``Y`` (N, n, 10 n) with ``inverse_dynamics = Y @ model.parameters().ravel()``: the torques
    are linear in each body's ``[m, m c, I_o]`` (``PARAMETER_NAMES``, body frame, ``I_o`` about
    the body origin), the form for identifying them from measured torques."""
    f = Frames(model, q)
    n_states, n = q.shape
    w, wd, a = motion(f, qd, qdd, gravity)
    rt = np.swapaxes(f.rot, -1, -2)
    wb, wdb, ab = _matvec(rt, w), _matvec(rt, wd), _matvec(rt, a)
    k = np.zeros((n_states, n, 6, len(PARAMETER_NAMES)))  # body-frame [f; n] per parameter
    k[..., :3, 0] = ab
    eye = np.eye(3)
    for col in range(3):
        e = np.broadcast_to(eye[col], wb.shape)
        k[..., :3, 1 + col] = cross(wdb, e) + cross(wb, cross(wb, e))
        k[..., 3:, 1 + col] = cross(e, ab)
    for col, (r, s) in enumerate(((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))):
        unit = np.zeros((3, 3))
        unit[r, s] = unit[s, r] = 1.0
        k[..., 3:, 4 + col] = _matvec(unit, wdb) + cross(wb, _matvec(unit, wb))
    fw = np.einsum("nbij,nbjp->nbip", f.rot, k[..., :3, :])
    nw = np.einsum("nbij,nbjp->nbip", f.rot, k[..., 3:, :])
    y = np.zeros((n_states, n, n, len(PARAMETER_NAMES)))
    z, p = f.axis, f.origin
    for j in range(n):
        for i in range(j, n):
            lever = cross(z[:, j], p[:, i] - p[:, j])  # z . (d x f) = f . (z x d)
            y[:, j, i] = np.einsum("na,nap->np", z[:, j], nw[:, i]) + np.einsum(
                "na,nap->np", lever, fw[:, i]
            )
    return y.reshape(n_states, n, n * len(PARAMETER_NAMES))
