"""Inverse dynamics as generated straight-line code, for one state or a batch.

The batched kernels (``rnea``) carry ``(N, n, 3)`` stacks: a few hundred microseconds of fixed
numpy overhead for one state. As ``twin.kinematics.chain`` does for FK, this module writes (once
per ``RigidBodyModel``) the recursive Newton-Euler algorithm in the bodies' own frames as plain
arithmetic, with every constant (joint origins and axes, masses, first moments, inertias) folded
in and the terms that are exactly zero dropped:

    forward   w_i = R_i^T w_{i-1} + z_i qd_i,  wd_i = R_i^T wd_{i-1} + z_i qdd_i
                    + (R_i^T w_{i-1}) x z_i qd_i,
              a_i = R_i^T (a_{i-1} + wd_{i-1} x p_i + w_{i-1} x (w_{i-1} x p_i)),  a_{-1} = -g
    wrench    f_i = m_i a_i + wd_i x h_i + w_i x (w_i x h_i)
              n_i = I_i wd_i + w_i x (I_i w_i) + h_i x a_i
    backward  F_i = f_i + R_{i+1} F_{i+1},  N_i = n_i + R_{i+1} N_{i+1} + p_{i+1} x R_{i+1} F_{i+1}
              tau_i = z_i . N_i

(``R_i(q_i) = K0 + cos q_i Kc + sin q_i Ks`` and ``p_i`` the pose of body ``i`` in body
``i - 1``, ``h = m c`` and ``I`` about the body origin.) The same source runs on Python floats
(one state) and on numpy arrays of N states (batches), compiled twice with the matching
``cos``/``sin``. The mass matrix is the same recursion with no velocity, no gravity and a unit
acceleration of each joint in turn (constants again, so only the non-zero terms remain).
Results equal ``rnea`` (the vectorised reference) to rounding. ``compiled`` turns the same
lines into numba kernels; ``DynamicsCode`` runs those when numba is installed.
"""

from __future__ import annotations

import itertools

import numpy as np

from twin.dynamics.model import RigidBodyModel
from twin.kinematics.chain import _Writer

Value = float | str


class _Code(_Writer):
    """``_Writer`` with fresh names and 3-vector helpers (lists of three values)."""

    def __init__(self) -> None:
        super().__init__()
        self._names = itertools.count()

    def sum(self, terms: list[Value]) -> Value:
        return self.add(terms, f"v{next(self._names)}")

    def vsum(self, *vectors: list[Value]) -> list[Value]:
        return [self.sum([v[i] for v in vectors]) for i in range(3)]

    def scale(self, k: Value, v: list[Value]) -> list[Value]:
        return [self.sum([self.mul(k, x)]) for x in v]

    def cross(self, a: list[Value], b: list[Value]) -> list[Value]:
        return [
            self.sum(
                [
                    self.mul(a[(r + 1) % 3], b[(r + 2) % 3]),
                    self.neg(self.mul(a[(r + 2) % 3], b[(r + 1) % 3])),
                ]
            )
            for r in range(3)
        ]

    def matvec(self, m: list[list[Value]], v: list[Value], transpose: bool = False):
        if transpose:
            return [self.sum([self.mul(m[k][r], v[k]) for k in range(3)]) for r in range(3)]
        return [self.sum([self.mul(m[r][k], v[k]) for k in range(3)]) for r in range(3)]

    def dot(self, a: list[Value], b: list[Value]) -> Value:
        return self.sum([self.mul(a[i], b[i]) for i in range(3)])


def _consts(x: np.ndarray) -> list:
    return [float(v) for v in x] if x.ndim == 1 else [[float(v) for v in row] for row in x]


def _joint_frames(model: RigidBodyModel):
    """Per body: (K0, Kc, Ks) (3, 3) each, with ``parent_R_body = K0 + c Kc + s Ks``, and
    ``parent_p_body`` (3,), the parent being the previous body (the base for the first)."""
    tree = model.arm.tree
    out = []
    previous = tree.link_names[0]
    for link in model.body_links:
        path = tree.path(link)
        start = len(tree.path(previous)) if previous != tree.link_names[0] else 0
        pending = np.eye(4)
        for e in path[start:]:
            origin = np.eye(4)
            origin[:3, :3], origin[:3, 3] = e.origin_r, e.origin_p
            if e.q_index < 0:
                pending = pending @ origin
                continue
            rf, pf = pending[:3, :3], pending[:3, 3]
            out.append((rf @ e.a0, rf @ e.ac, rf @ e.as_, rf @ e.origin_p + pf))
        previous = link
    return out


def _rotations(w: _Code, model: RigidBodyModel) -> list[tuple[list, list]]:
    """Emit each body's ``parent_R_body(q_i)`` once: [(R (3x3 values), p (3 constants))]."""
    out = []
    for i, (k0, kc, ks, p) in enumerate(_joint_frames(model)):
        w.lines.append(f"    c{i} = _cos(q[{i}]); s{i} = _sin(q[{i}])")
        r = [
            [
                w.sum(
                    [
                        float(k0[a, b]),
                        w.mul(float(kc[a, b]), f"c{i}"),
                        w.mul(float(ks[a, b]), f"s{i}"),
                    ]
                )
                for b in range(3)
            ]
            for a in range(3)
        ]
        out.append((r, _consts(p)))
    return out


def constant_inertials(model: RigidBodyModel) -> list[tuple[Value, list, list]]:
    """Per body ``(m, h (3), I_o (3x3))`` as constants (folded into the code)."""
    return [
        (b.mass, _consts(b.mass * b.com), _consts(b.inertia_about(np.zeros(3))))
        for b in model.inertials
    ]


def symbolic_inertials(n: int, name: str = "P") -> list[tuple[Value, list, list]]:
    """Per body ``(m, h, I_o)`` as names ``{name}{i}_{k}``, k in ``PARAMETER_NAMES`` order (the
    code then takes the parameters as inputs: one code for every payload)."""
    out = []
    for i in range(n):
        m, hx, hy, hz, ixx, ixy, ixz, iyy, iyz, izz = (f"{name}{i}_{k}" for k in range(10))
        out.append((m, [hx, hy, hz], [[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]]))
    return out


def _rnea(
    w: _Code, model: RigidBodyModel, frames, qd: list, qdd: list, g: list, inertials: list
) -> list[Value]:
    """Emit the recursion (module doc) for joint rates ``qd``, ``qdd``, gravity ``g`` and body
    ``inertials`` (``constant_inertials`` or ``symbolic_inertials``) given as values (names or
    constants: zeros fold away); returns the n torque values."""
    n = model.n
    zero3: list[Value] = [0.0, 0.0, 0.0]
    w_prev, wd_prev = zero3, zero3
    a_prev: list[Value] = [w.neg(x) for x in g]
    forces, moments = [], []
    for i, (r, p) in enumerate(frames):
        z = _consts(model.axes[i])
        wp = w.matvec(r, w_prev, transpose=True)
        zqd = w.scale(qd[i], z)
        omega = w.vsum(wp, zqd)
        alpha = w.vsum(w.matvec(r, wd_prev, transpose=True), w.scale(qdd[i], z), w.cross(wp, zqd))
        acc_parent = w.vsum(a_prev, w.cross(wd_prev, p), w.cross(w_prev, w.cross(w_prev, p)))
        acc = w.matvec(r, acc_parent, transpose=True)
        m, h, inertia = inertials[i]
        forces.append(w.vsum(w.scale(m, acc), w.cross(alpha, h), w.cross(omega, w.cross(omega, h))))
        moments.append(
            w.vsum(
                w.matvec(inertia, alpha), w.cross(omega, w.matvec(inertia, omega)), w.cross(h, acc)
            )
        )
        w_prev, wd_prev, a_prev = omega, alpha, acc
    taus: list[Value] = [0.0] * n
    big_f, big_n = forces[-1], moments[-1]
    for i in range(n - 1, -1, -1):
        if i < n - 1:
            r, p = frames[i + 1]
            rf = w.matvec(r, big_f)
            big_n = w.vsum(moments[i], w.matvec(r, big_n), w.cross(p, rf))
            big_f = w.vsum(forces[i], rf)
        taus[i] = w.dot(_consts(model.axes[i]), big_n)
    return taus


def _listing(w: _Code, values: list[Value]) -> list[str]:
    return [v if isinstance(v, str) else w.literal(v) for v in values]


def tau_body(model: RigidBodyModel, inertials: list) -> tuple[list[str], list[str]]:
    """The lines (4-space indented) of inverse dynamics in the names ``q[i]``, ``qd[i]``,
    ``qdd[i]``, ``g0, g1, g2`` (and those of ``inertials``), and the n torque expressions."""
    n = model.n
    w = _Code()
    frames = _rotations(w, model)
    symbolic = lambda name: [f"{name}[{i}]" for i in range(n)]  # noqa: E731
    taus = _rnea(w, model, frames, symbolic("qd"), symbolic("qdd"), ["g0", "g1", "g2"], inertials)
    return w.lines, _listing(w, taus)


def mass_body(model: RigidBodyModel, inertials: list) -> tuple[list[str], list[str]]:
    """The lines of the mass matrix in the names ``q[i]`` (and those of ``inertials``), and its
    n * n entries row by row (column j: a unit acceleration of joint j, no velocity, no
    gravity; the upper triangle mirrored)."""
    n = model.n
    m = _Code()
    frames = _rotations(m, model)
    entries: list[list[Value]] = [[0.0] * n for _ in range(n)]
    for j in range(n):
        unit = [1.0 if k == j else 0.0 for k in range(n)]
        col = _rnea(m, model, frames, [0.0] * n, unit, [0.0] * 3, inertials)
        for i in range(j + 1):
            entries[i][j] = entries[j][i] = col[i]
    flat = [entries[i][j] for i in range(n) for j in range(n)]
    return m.lines, _listing(m, flat)


def source(model: RigidBodyModel) -> str:
    """The generated ``tau(q, qd, qdd, g0, g1, g2)`` and ``mass(q)`` (module doc)."""
    consts = constant_inertials(model)
    lines, taus = tau_body(model, consts)
    tau_src = "\n".join(lines) + f"\n    return _out([{', '.join(taus)}])\n"
    lines, flat = mass_body(model, consts)
    mass_src = "\n".join(lines) + f"\n    return _square([{', '.join(flat)}])\n"
    return f"def tau(q, qd, qdd, g0, g1, g2):\n{tau_src}\n\ndef mass(q):\n{mass_src}"
