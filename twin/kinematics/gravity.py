"""Gravity torques of the arm from its URDF inertials (pure numpy, no engine): e.g. the ``tau_ff`` of
a hold command (the serial backend holds like the sim does) or a trajectory feed-forward."""

from __future__ import annotations

import numpy as np

GRAVITY = np.array([0.0, 0.0, -9.81])  # m/s^2, base frame (z up), as the sim's world


def gravity_torques(model, q: np.ndarray, gravity: np.ndarray = GRAVITY) -> np.ndarray:
    """(n,) N m (or (N, n) for ``q`` (N, n) rad) the joints must apply to hold ``q`` against
    ``gravity`` (3,) m/s^2, base frame.

    For revolute joint ``j`` with axis ``z_j`` through ``o_j`` (its child link's frame, base
    frame): ``tau_j = -z_j . sum_L (c_L - o_j) x (m_L g)`` over the links ``L`` beyond it, ``c_L``
    their centres of mass (the same as ``-sum_L m_L Jv_com_L^T g``).
    """
    q = np.asarray(q, float)
    q2 = np.atleast_2d(q)
    tree = model.tree
    frames = tree.rotations_translations(q2)
    n = q2.shape[0]
    g = np.asarray(gravity, float)
    tau = np.zeros((n, model.n_joints))
    axes = _axes(model)
    for link in model.link_names:
        inertial = model.link_inertial(link)
        if inertial is None or inertial.mass <= 0.0:
            continue
        r, p = frames[link]
        com = p + r @ np.asarray(inertial.com, float)  # (N, 3)
        force = inertial.mass * g
        for j in tree.path_joints(link):
            child, axis = axes[j]
            rj, pj = frames[child]
            z = rj @ axis
            tau[:, j] -= np.einsum("ni,ni->n", z, np.cross(com - pj, force))
    return tau[0] if q.ndim == 1 else tau


def _axes(model) -> dict[int, tuple[str, np.ndarray]]:
    """Joint index -> (child link, axis in the child frame)."""
    by_name = {j.name: j for j in model.robot.joints}
    return {
        k: (by_name[name].child, np.asarray(by_name[name].axis, float))
        for k, name in enumerate(model.joint_names)
    }
