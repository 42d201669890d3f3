"""Single-configuration FK and Jacobian of one link, as straight-line float code.

The batched path (``fk.KinematicTree``) carries ``(N, 3, 3)`` stacks through every edge of the
tree: a few hundred microseconds of fixed numpy overhead when ``N = 1``. Control loops, the
Gymnasium environment and numeric IK ask for one configuration at a time, so for each link
this module writes (once, at first use) a Python function of plain float arithmetic for the
path from the root to that link:

    base_T_link(q) = L_0(q_0) L_1(q_1) ... L_{m-1}(q_{m-1}) tail,
    L_i(q_i) = F_i origin_i Rot(axis_i, q_i) = K0_i + cos(q_i) Kc_i + sin(q_i) Ks_i,

with ``F_i`` the fixed joints between the previous revolute joint and this one, ``tail`` those
after the last. ``K0, Kc, Ks`` are constant 3x4 affine blocks (the same constants as the
batched path's ``a0, ac, as_``), so the function only multiplies out the chain; entries that
are exactly zero or one (axis-aligned joints, right-angle origins) are folded away when the
code is written, which leaves a few hundred float operations for a 6R arm. The running product
after ``L_i`` is the child frame of joint ``i``, which gives the Jacobian columns
``[z_i x (p_link - p_i); z_i]`` with ``z_i = R_i axis_i``.

Only float literals (``repr`` of finite numbers) and generated names enter the source, which
``source`` keeps for inspection. Results equal the batched path to rounding (a few ulps; the
tests check ``1e-15``); ``q`` is a list of n floats (rad), already validated by ``ArmModel``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from twin.kinematics.fk import KinematicTree

__all__ = ["LinkChain"]

#: A value while writing the code: a known constant, or a name/product in the generated code.
Value = float | str


class _Writer:
    """Emits assignments, folding constants and dropping terms that are exactly zero."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    @staticmethod
    def literal(x: float) -> str:
        if not math.isfinite(x):
            raise ValueError(f"kinematic constant {x} is not finite; expected a finite number")
        return repr(float(x))

    def mul(self, a: Value, b: Value) -> Value:
        """``a * b`` of two constants or names (an unbound product term)."""
        if isinstance(b, float) and not isinstance(a, float):
            a, b = b, a
        if isinstance(a, float):
            if isinstance(b, float):
                return a * b
            if a == 0.0:
                return 0.0
            if a == 1.0:
                return b
            if a == -1.0:
                return f"-{b}"
            return f"{self.literal(a)} * {b}"
        return f"{a} * {b}"

    @staticmethod
    def neg(a: Value) -> Value:
        """``-a`` of a constant, name or product term."""
        if isinstance(a, float):
            return -a
        return a[1:] if a.startswith("-") else f"-{a}"

    def add(self, terms: list[Value], name: str) -> Value:
        """The sum of constants and product terms, bound to ``name`` unless trivial."""
        const = 0.0
        parts: list[str] = []
        for t in terms:
            if isinstance(t, float):
                const += t
            else:
                parts.append(t)
        if not parts:
            return const
        if const != 0.0:
            parts.append(self.literal(const))
        if len(parts) == 1 and parts[0].isidentifier():
            return parts[0]
        expr = parts[0] + "".join(f" - {p[1:]}" if p[0] == "-" else f" + {p}" for p in parts[1:])
        self.lines.append(f"    {name} = {expr}")
        return name

    def matrix(self, rows: list[list[Value]]) -> str:
        """A new float64 array of ``rows`` (flat list, then reshaped: faster than nesting)."""
        flat = ", ".join(v if isinstance(v, str) else self.literal(v) for row in rows for v in row)
        return f"_array([{flat}], _float).reshape({len(rows)}, {len(rows[0])})"


def _affine(m: np.ndarray) -> list[list[Value]]:
    """The top 3x4 block of a (4, 4) matrix as constants."""
    return [[float(m[r, k]) for k in range(4)] for r in range(3)]


def _compose(w: _Writer, a: list[list[Value]], b: list[list[Value]], tag: str):
    """The 3x4 affine product ``a @ b`` (implicit bottom rows ``[0, 0, 0, 1]``)."""
    out = []
    for r in range(3):
        row = []
        for k in range(4):
            terms = [w.mul(a[r][j], b[j][k]) for j in range(3)]
            if k == 3:
                terms.append(a[r][3])
            row.append(w.add(terms, f"{tag}_{r}{k}"))
        out.append(row)
    return out


class LinkChain:
    """Generated single-configuration kinematics of ``link``; see the module docstring.

    ``q``: a list of n floats, rad, finite (not checked here). Both return new arrays:

    * ``pose(q)`` -> ``base_T_link`` (4, 4);
    * ``pose_jacobian(q)`` -> ``(base_T_link, J)``, ``J`` (6, n) the geometric Jacobian
      ``[v; w]`` of the link origin in the base frame, as ``KinematicTree.jacobian``.
    """

    def __init__(self, tree: KinematicTree, link: str) -> None:
        self.link = link
        self._tree = tree
        self._n = tree.n_joints
        self._joints: dict[int, tuple[list[Value], list[Value]]] = {}  # q index -> (z, p)
        self._pose_w = _Writer()  # the chain product
        self._jac_w = _Writer()  # Jacobian columns (after the pose)
        frame = self._chain(tree.path(link))
        pose = self._pose_w.matrix([*frame, [0.0, 0.0, 0.0, 1.0]])
        jac = self._pose_w.matrix(self._jacobian_rows(self._columns(frame)))
        body, extra = "\n".join(self._pose_w.lines), "\n".join(self._jac_w.lines)
        #: The generated source of both functions (for inspection).
        self.source = (
            f"def pose(q):\n{body}\n    return {pose}\n\n"
            f"def pose_jacobian(q):\n{body}\n{extra}\n    return {pose}, {jac}\n"
        )
        namespace = {"_cos": math.cos, "_sin": math.sin, "_array": np.array, "_float": np.float64}
        exec(compile(self.source, f"<LinkChain {link!r}>", "exec"), namespace)
        self.pose: Callable[[list[float]], np.ndarray] = namespace["pose"]
        self.pose_jacobian: Callable[[list[float]], tuple[np.ndarray, np.ndarray]] = namespace[
            "pose_jacobian"
        ]

    def __reduce__(self) -> tuple:
        """Pickle as the recipe (the generated functions are rebuilt, not pickled)."""
        return (LinkChain, (self._tree, self.link))

    def _chain(self, path: tuple) -> list[list[Value]]:
        """Write the product of the path's factors; returns the link frame (3x4 values) and
        records each revolute joint's axis and origin (base frame) in ``self._joints``."""
        w, wj = self._pose_w, self._jac_w
        frame: list[list[Value]] = _affine(np.eye(4))
        pending = np.eye(4)  # fixed joints since the last revolute one
        for i, e in enumerate(path):
            origin = np.eye(4)
            origin[:3, :3], origin[:3, 3] = e.origin_r, e.origin_p
            if e.q_index < 0:
                pending = pending @ origin
                continue
            k0, kc, ks = np.eye(4), np.zeros((4, 4)), np.zeros((4, 4))
            k0[:3, :3], k0[:3, 3], kc[:3, :3], ks[:3, :3] = e.a0, e.origin_p, e.ac, e.as_
            k0, kc, ks = (_affine(pending @ x) for x in (k0, kc, ks))
            pending = np.eye(4)
            c, s = f"c{i}", f"s{i}"
            w.lines.append(f"    {c} = _cos(q[{e.q_index}]); {s} = _sin(q[{e.q_index}])")
            factor = [
                [
                    w.add([k0[r][k], w.mul(kc[r][k], c), w.mul(ks[r][k], s)], f"f{i}_{r}{k}")
                    for k in range(4)
                ]
                for r in range(3)
            ]
            frame = _compose(w, frame, factor, f"t{i}")  # the child frame of joint i
            axis = [float(x) for x in e.axis]
            z = [
                wj.add([wj.mul(frame[r][j], axis[j]) for j in range(3)], f"z{i}_{r}")
                for r in range(3)
            ]
            self._joints[e.q_index] = (z, [frame[r][3] for r in range(3)])
        if not np.array_equal(pending, np.eye(4)):
            frame = _compose(w, frame, _affine(pending), "e")
        return frame

    def _columns(self, frame: list[list[Value]]) -> dict[int, tuple[list[Value], list[Value]]]:
        """q index -> (linear (3,), angular (3,)) Jacobian column values, base frame."""
        wj = self._jac_w
        columns = {}
        for qi, (z, p) in self._joints.items():
            d = [wj.add([frame[r][3], wj.neg(p[r])], f"d{qi}_{r}") for r in range(3)]
            lin = []
            for r in range(3):  # (z x d)_r = z_{r+1} d_{r+2} - z_{r+2} d_{r+1}
                a, b = (r + 1) % 3, (r + 2) % 3
                lin.append(wj.add([wj.mul(z[a], d[b]), wj.neg(wj.mul(z[b], d[a]))], f"v{qi}_{r}"))
            columns[qi] = (lin, z)
        return columns

    def _jacobian_rows(self, columns: dict) -> list[list[Value]]:
        rows: list[list[Value]] = [[0.0] * self._n for _ in range(6)]
        for qi, (lin, ang) in columns.items():
            for r in range(3):
                rows[r][qi], rows[3 + r][qi] = lin[r], ang[r]
        return rows
