"""Inverse dynamics (recursive Newton-Euler) and the mass matrix (composite rigid bodies), batched:
the vectorised reference kernels (``ArmDynamics`` runs the generated code of ``codegen``, which
the tests check against these and PyBullet), and the base-frame kinematics the regressor and
the energy use.

Everything runs in the base frame over arrays ``(N, n, 3)`` (configurations x bodies x xyz); the
recursions along the chain are prefix sums, so the bodies are vectorised too:

* forward: ``w_i = w_{i-1} + z_i qd_i``, ``wd_i = wd_{i-1} + z_i qdd_i + w_{i-1} x z_i qd_i``,
  origin acceleration ``a_i = a_{i-1} + wd_{i-1} x d_i + w_{i-1} x (w_{i-1} x d_i)``
  (``d_i = p_i - p_{i-1}``, joint axes ``z_i`` through the body origins ``p_i``), ``a_0 = -g``
  (gravity as an upward acceleration of the base);
* each body's wrench at its origin: ``f = m a + wd x h + w x (w x h)``,
  ``n = I_p wd + w x (I_p w) + h x a`` (``h = m c``, ``I_p`` about the origin, base axes);
* backward: sums from the tip of ``f`` and of the moments about the base origin,
  ``tau_j = z_j . (N_j - p_j x F_j)``.

The mass matrix ``M (N, n, n)`` (kg m^2) is ``M_ij = S_i . (I^c_k S_j)``, ``k = max(i, j)``, with
``S_j = [z_j; p_j x z_j]`` the unit motion of joint ``j`` at the base origin and ``I^c_k`` the
spatial inertia (at the base origin) of bodies ``k..n`` (suffix sums again).
"""

from __future__ import annotations

import numpy as np

from twin.dynamics.model import GRAVITY, RigidBodyModel


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross products of (..., 3) arrays (broadcasting; faster than ``np.cross`` on stacks)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", a, b)


def _matvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.einsum("...ij,...j->...i", m, v)


def _shift(x: np.ndarray) -> np.ndarray:
    """x (N, n, 3) with the chain moved down by one body: row i holds x_{i-1}, row 0 zeros."""
    out = np.zeros_like(x)
    out[:, 1:] = x[:, :-1]
    return out


def _suffix_sum(x: np.ndarray) -> np.ndarray:
    """Sums over bodies i..n along axis 1."""
    return np.flip(np.cumsum(np.flip(x, 1), axis=1), 1)


class Frames:
    """Base-frame kinematics of every body at configurations ``q`` (N, n) rad.

    rot: (N, n, 3, 3) base_R_body; origin: (N, n, 3) m; axis: (N, n, 3) unit joint axes;
    com: (N, n, 3) m, centre of mass relative to the origin; inertia: (N, n, 3, 3) kg m^2 about
    the centre of mass (all base axes).
    """

    def __init__(self, model: RigidBodyModel, q: np.ndarray) -> None:
        frames = model.arm.tree.rotations_translations(q, model.body_links)
        self.rot = np.stack([frames[name][0] for name in model.body_links], axis=1)
        self.origin = np.stack([frames[name][1] for name in model.body_links], axis=1)
        self.axis = _matvec(self.rot, model.axes)
        self.com = _matvec(self.rot, model.com)
        self.inertia = self.rot @ model.inertia @ np.swapaxes(self.rot, -1, -2)
        self.mass = model.mass


def motion(f: Frames, qd: np.ndarray, qdd: np.ndarray, gravity=GRAVITY) -> tuple:
    """The forward pass: angular velocity w (rad/s), angular acceleration wd (rad/s^2) and
    origin acceleration minus gravity a (m/s^2) of every body, (N, n, 3) each, base frame."""
    z, p = f.axis, f.origin
    zqd = z * qd[..., None]
    w = np.cumsum(zqd, axis=1)
    w_prev = _shift(w)
    wd = np.cumsum(z * qdd[..., None] + cross(w_prev, zqd), axis=1)
    d = p - _shift(p)
    d[:, 0] = 0.0
    a = np.cumsum(cross(_shift(wd), d) + cross(w_prev, cross(w_prev, d)), axis=1)
    return w, wd, a - np.asarray(gravity, float)


def inverse_dynamics(
    model: RigidBodyModel,
    q: np.ndarray,
    qd: np.ndarray,
    qdd: np.ndarray,
    gravity: np.ndarray = GRAVITY,
    frames: Frames | None = None,
) -> np.ndarray:
    """Joint torques (N, n) N m for ``q`` (N, n) rad, ``qd`` rad/s, ``qdd`` rad/s^2 under
    ``gravity`` (3,) m/s^2 (base frame); no friction or damping. ``frames``: ``Frames(model, q)``
    if already computed."""
    f = Frames(model, q) if frames is None else frames
    z, p = f.axis, f.origin
    w, wd, a = motion(f, qd, qdd, gravity)
    m = f.mass[:, None]
    c = f.com
    h = m * c
    i_p = f.inertia + f.mass[:, None, None] * (
        _dot(c, c)[..., None, None] * np.eye(3) - c[..., :, None] * c[..., None, :]
    )
    force = m * a + cross(wd, h) + cross(w, cross(w, h))
    moment = _matvec(i_p, wd) + cross(w, _matvec(i_p, w)) + cross(h, a) + cross(p, force)
    big_f = _suffix_sum(force)
    big_n = _suffix_sum(moment)
    return _dot(z, big_n - cross(p, big_f))


def mass_matrix(model: RigidBodyModel, q: np.ndarray, frames: Frames | None = None) -> np.ndarray:
    """Joint-space mass matrices (N, n, n) kg m^2 (module doc) at ``q`` (N, n) rad."""
    f = Frames(model, q) if frames is None else frames
    z, p = f.axis, f.origin
    m = f.mass[None, :, None]
    c = p + f.com  # centres of mass, base frame
    h = m * c
    i_o = f.inertia + f.mass[:, None, None] * (
        _dot(c, c)[..., None, None] * np.eye(3) - c[..., :, None] * c[..., None, :]
    )
    i_c, h_c = _suffix_sum(i_o), _suffix_sum(h)
    m_c = _suffix_sum(np.broadcast_to(m, h.shape))  # (N, n, 3): each row the composite mass
    v = cross(p, z)
    f_ang = _matvec(i_c, z) + cross(h_c, v)
    f_lin = m_c * v - cross(h_c, z)
    # g[i, k] = S_i . (I^c_k S_k): the column of joint k for the rows i <= k.
    g = np.einsum("nia,nka->nik", z, f_ang) + np.einsum("nia,nka->nik", v, f_lin)
    upper = np.triu(g)
    return upper + np.swapaxes(np.triu(g, 1), 1, 2)


def kinetic_energy(model: RigidBodyModel, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """(N,) J: ``qd^T M(q) qd / 2``."""
    return 0.5 * np.einsum("ni,nij,nj->n", qd, mass_matrix(model, q), qd)


def potential_energy(
    model: RigidBodyModel, q: np.ndarray, gravity: np.ndarray = GRAVITY
) -> np.ndarray:
    """(N,) J: ``-sum_i m_i g . c_i`` (zero at the base origin)."""
    f = Frames(model, q)
    c = f.origin + f.com
    return -np.einsum("k,nki,i->n", f.mass, c, np.asarray(gravity, float))
