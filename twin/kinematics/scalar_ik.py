"""Single-pose closed-form IK (all 8 postures) as generated plain-float code.

The batched solver (``analytic_ik.SphericalWristIk.solve``) runs a few hundred numpy calls
whatever N is: about a millisecond for one pose. As ``chain.LinkChain`` does for FK, this module
writes, once per link at first use, a Python function of float arithmetic and ``math`` calls
for one pose, with the arm's constants as literals. It runs the same steps in the same order
as the batched solver (the same subproblems, the same ``vec3`` geometry, the same singular
cases, tolerances, reach and limit tests, wraps into the limits), so its solutions equal the
batch's to a few ulps (the batch's ``rot @ constants`` product and numpy's transcendental
functions may round differently from a scalar sum and ``math``).

The geometry is written by running ``vec3`` on ``_Sym`` values: a ``_Sym`` stands for a local
name of the generated code, and every arithmetic operation on one appends an assignment to
the code; constants (Python floats) fold while writing, so axis-aligned joints cost nothing.
Branches are unrolled: shoulder x elbow x wrist, each block skipped when the reach test of
its subproblem fails (its solutions are then invalid in the batch too).

Generated functions (``source`` keeps their text):

* ``solve(p, ref)``: ``p`` the 16 floats of ``base_T_link`` (4, 4) row-major (m), ``ref``
  the 6 reference angles (rad) -> ``(angles, found, reachable)``: ``angles`` the 6 angles
  (rad) of each valid branch, one flat list in the batch's branch order (``POSTURES``),
  ``found`` the bit mask of the valid branches, ``reachable`` as ``IkBatch.reachable``;
* ``solve_0`` .. ``solve_7``: the same, writing only that branch (``ArmModel.ik``);
* ``branch(q)``: the branch index 0..7 of the posture of configuration ``q`` (6 floats, rad).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from twin.kinematics import vec3 as v3
from twin.kinematics.analytic_ik import (
    LIMIT_TOL,
    POSTURES,
    REACH_TOL,
    SINGULAR_EPS,
    WRAP_ROUND,
    IkBatch,
    IkSolutions,
    SphericalWristIk,
)
from twin.kinematics.validate import ORTHONORMAL_TOL, as_configurations, as_poses

__all__ = ["SinglePoseIk", "flat_pose", "for_link", "reference_list"]

_TWO_PI = 2.0 * math.pi
#: The postures (k, 3) of the valid branches, by the bit mask of those branches.
_POSTURES_OF = [POSTURES[[b for b in range(8) if mask >> b & 1]] for mask in range(256)]
#: The validity (1, 8) of the branches, by the same bit mask.
_VALID_OF = [np.array([[mask >> b & 1 == 1 for b in range(8)]]) for mask in range(256)]
_ALL_INVALID = np.full((1, 8, 6), np.nan)  # IkBatch.q of one pose before the valid rows
_REACHABLE, _UNREACHABLE = np.array([True]), np.array([False])


def _literal(x: float) -> str:
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"kinematic constant {x} is not finite; expected a finite number")
    return repr(x)


_NAME = re.compile(r"\bt\d+\b")
#: Names assigned by a statement: at its start, after ``if ...:`` or ``;``, or augmented.
_ASSIGNED = re.compile(r"(?:^\s*|:\s|;\s)(t\d+)\s*[-+]?=(?!=)")
_DEFINITION = re.compile(r"^(\s*)(t\d+) = (.+)$")
#: Deepest parenthesis nesting written by inlining (CPython's parser allows 200).
_MAX_DEPTH = 60


def _depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


class _Code:
    """The lines of one generated function; ``new`` binds an expression to a fresh local."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self._count = 0

    def emit(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def name(self) -> str:
        self._count += 1
        return f"t{self._count}"

    @staticmethod
    def text(x: object) -> str:
        return x.name if isinstance(x, _Sym) else _literal(x)

    def new(self, fmt: str, *args: object) -> _Sym:
        """A local bound to ``fmt`` with ``args`` (values or constants) filled in."""
        sym = _Sym(self, self.name())
        self.emit(f"{sym.name} = " + fmt.format(*(self.text(a) for a in args)))
        return sym

    def inlined(self) -> list[str]:
        """The lines with every single-use local assigned once replaced by its expression
        (in parentheses, so the same operations round the same way): fewer loads and stores.
        Locals assigned more than once stay, and so does a local whose operands are assigned
        again (a singular case's override) between its definition and its use."""
        lines = list(self.lines)
        assigned: dict[str, int] = {}
        for line in lines:
            for name in _ASSIGNED.findall(line):
                assigned[name] = assigned.get(name, 0) + 1
        uses: dict[str, int] = {}
        for line in lines:
            for name in _NAME.findall(line):
                uses[name] = uses.get(name, 0) + 1
        for i, line in enumerate(lines):
            m = _DEFINITION.match(line) if line is not None else None
            if m is None:
                continue
            name, expr = m.group(2), m.group(3)
            if assigned.get(name) != 1 or uses[name] != 2:  # the definition and one use
                continue
            j = next(
                k
                for k in range(i + 1, len(lines))
                if lines[k] is not None and name in lines[k] and name in _NAME.findall(lines[k])
            )
            operands = set(_NAME.findall(expr))
            if any(  # an operand reassigned between definition and use: keep the local
                operands.intersection(_ASSIGNED.findall(lines[k]))
                for k in range(i + 1, j + 1)
                if lines[k] is not None
            ):
                continue
            if _depth(lines[j]) + _depth(expr) > _MAX_DEPTH:
                continue
            lines[j] = _NAME.sub(
                lambda m, n=name, e=expr: f"({e})" if m[0] == n else m[0], lines[j]
            )
            lines[i] = None
        return [line for line in lines if line is not None]

    def bound(self, x: object) -> _Sym:
        """``x`` as a plain local (one that can be assigned to)."""
        return x if isinstance(x, _Sym) and x.base is None else self.new("{}", x)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.emit(header + ":")
        self.depth += 1
        yield
        self.depth -= 1


class _Sym:
    """A float-valued local of the generated code; arithmetic writes code (see module doc).

    A negation is not written: ``-x`` is a ``_Sym`` named ``-t`` whose ``base`` is ``x``, and
    sums and products take the sign into the operation (``a + -b`` is written ``a - b``),
    exactly as IEEE arithmetic would round it."""

    __slots__ = ("base", "code", "name")

    def __init__(self, code: _Code, name: str, base: _Sym | None = None) -> None:
        self.code, self.name, self.base = code, name, base

    def __neg__(self) -> _Sym:
        return self.base if self.base is not None else _Sym(self.code, "-" + self.name, self)

    def __add__(self, other: object) -> _Sym:
        if isinstance(other, float) and other == 0.0:
            return self
        if isinstance(other, _Sym) and other.base is not None:
            return self - other.base
        if self.base is not None:
            return other - self.base
        return self.code.new("{} + {}", self, other)

    __radd__ = __add__  # IEEE addition is commutative

    def __sub__(self, other: object) -> _Sym:
        if isinstance(other, float) and other == 0.0:
            return self
        if isinstance(other, _Sym) and other.base is not None:
            return self + other.base
        if self.base is not None:
            return -(self.base + other)
        return self.code.new("{} - {}", self, other)

    def __rsub__(self, other: object) -> _Sym:
        if self.base is not None:
            return other + self.base
        return self.code.new("{} - {}", other, self)

    def __mul__(self, other: object) -> object:
        if isinstance(other, float):
            if other == 0.0:
                return 0.0
            if other == 1.0:
                return self
            if other == -1.0:
                return -self
        if self.base is not None:
            return -(self.base * other)
        if isinstance(other, _Sym) and other.base is not None:
            return -(self * other.base)
        return self.code.new("{} * {}", self, other)

    __rmul__ = __mul__  # IEEE multiplication is commutative

    def __truediv__(self, other: object) -> _Sym:
        if self.base is not None:
            return -(self.base / other)
        if isinstance(other, _Sym) and other.base is not None:
            return -(self / other.base)
        return self.code.new("{} / {}", self, other)

    def __rtruediv__(self, other: object) -> _Sym:
        if self.base is not None:
            return -(other / self.base)
        return self.code.new("{} / {}", other, self)


def _atan2(code: _Code, y: object, x: object, h: object) -> _Sym:
    """``vec3.atan2(y, x, h)``: the half-angle formula, reflected where ``x < 0``."""
    q = code.new("2.0 * _atan({} / ({} + abs({})))", y, h, x)
    code.emit(f"if {code.text(x)} < 0.0: {q.name} = _copysign(_pi, {code.text(y)}) - {q.name}")
    return q


def _angle_cos_sin(
    code: _Code, y: object, x: object, free: str | None = None, is_free: str | None = None
) -> tuple[_Sym, _Sym, _Sym]:
    """``analytic_ik._angle_cos_sin``: angle, cosine, sine of ``atan2(y, x)``, or of the
    reference angle ``free`` (an expression) where the condition ``is_free`` holds."""
    h = code.new("_sqrt({0} * {0} + {1} * {1})", x, y)
    if is_free is None:
        return _atan2(code, y, x, h), x / h, y / h
    q, c, s = (_Sym(code, code.name()) for _ in range(3))
    with code.block(f"if {is_free}"):
        code.emit(f"{c.name} = _cos({free}); {s.name} = _sin({free})")
        code.emit(f"{q.name} = _atan2({s.name}, {c.name})")
    with code.block("else"):
        code.emit(f"{q.name} = {_atan2(code, y, x, h).name}")
        code.emit(f"{c.name} = {code.text(x)} / {h.name}; {s.name} = {code.text(y)} / {h.name}")
    return q, c, s


def _clip(code: _Code, x: object, lo: float, hi: float) -> _Sym:
    """``min(max(x, lo), hi)`` of a finite ``x`` (infinite bounds are skipped)."""
    out = code.new("{}", x)
    if math.isfinite(lo):
        code.emit(f"if {out.name} < {_literal(lo)}: {out.name} = {_literal(lo)}")
    if math.isfinite(hi):
        code.emit(f"if {out.name} > {_literal(hi)}: {out.name} = {_literal(hi)}")
    return out


class _Writer:
    """Writes ``solve`` for one solver and link (see the module docstring)."""

    def __init__(self, ik: SphericalWristIk, link: str, only: int | None = None) -> None:
        self.ik = ik
        self.only = only  # write only this branch (the others stay None)
        self.code = _Code()
        self.lower = [float(x) for x in ik.model.lower]
        self.upper = [float(x) for x in ik.model.upper]
        self.ref_clipped: dict[int, _Sym] = {}
        self._write(ik.link_constants(link))

    def _write(self, link_cols: np.ndarray) -> None:
        ik, code = self.ik, self.code
        w1, o1 = ik.wc[0], ik.oc[0]
        p = [[_Sym(code, f"p{4 * r + k}") for k in range(4)] for r in range(3)]
        code.emit(", ".join(f"p{i}" for i in range(16)) + " = p")
        code.emit(", ".join(f"r{j}" for j in range(6)) + " = ref")
        cols = [
            tuple(v3.dot_const(v3.const(link_cols[:, k]), tuple(p[r][:3])) for r in range(3))
            for k in range(3)
        ]
        wv = v3.sub(tuple(p[r][3] + cols[0][r] for r in range(3)), o1)
        for j in range(6):
            lo, hi = self.lower[j], self.upper[j]
            if not (-math.pi <= lo and hi <= math.pi):
                self.ref_clipped[j] = _clip(code, _Sym(code, f"r{j}"), lo, hi)
        code.emit("angles = []; reach = False; found = 0")
        # q1: subproblem 4, shoulder branches.
        a_, b_ = v3.dot_const(ik.e2p, wv), v3.dot_const(ik.n12, wv)
        d_ = ik.d12 - ik.k12 * v3.dot_const(w1, wv)
        rho = code.new("_sqrt({0} * {0} + {1} * {1})", a_, b_)
        eps, t = _literal(SINGULAR_EPS), code.text
        code.emit(f"free1 = {rho.name} < {eps}")
        safe = code.new(f"1.0 if free1 else {rho.name}")
        ratio = d_ / safe
        code.emit(
            f"if (abs({t(d_)}) >= {eps}) if free1 else (abs({ratio.name}) > "
            f"{_literal(1.0 + REACH_TOL)}): return angles, 0, False"
        )
        ca, sa = self._cos_sin_of_acos(ratio)
        cphi, sphi = a_ / safe, b_ / safe
        cc, ss = cphi * ca, sphi * sa
        sc, cs = sphi * ca, cphi * sa
        shoulders = [
            [code.bound(x) for x in cs_] for cs_ in ((cc - ss, sc + cs), (cc + ss, sc - cs))
        ]
        for k, (c1, s1) in enumerate(shoulders):
            code.emit(f"if free1: {c1.name} = _cos(r0 + {_literal(k * math.pi)}); "
                      f"{s1.name} = _sin(r0 + {_literal(k * math.pi)})")  # fmt: skip
        for k, (c1, s1) in enumerate(shoulders):
            if self._wanted(k * 4, 4):
                self._shoulder(k, c1, s1, wv, cols)
        code.emit("return angles, found, reach")

    def _cos_sin_of_acos(self, x: _Sym) -> tuple[_Sym, _Sym]:
        c = _clip(self.code, x, -1.0, 1.0)
        return c, self.code.new("_sqrt((1.0 - {0}) * (1.0 + {0}))", c)

    def _shoulder(self, k: int, c1: _Sym, s1: _Sym, wv: tuple, cols: list) -> None:
        ik, code = self.ik, self.code
        w1, _, w3 = ik.wc[:3]
        o1, o2, _ = ik.oc
        q1 = self._limited(0, _atan2(code, s1, c1, 1.0))
        ms1 = -s1
        d2 = v3.sub(v3.add(o1, v3.rotate(w1, c1, ms1, wv)), o2)
        dw3 = v3.dot_const(w3, d2)
        delta2 = v3.dot(d2, d2) - dw3 * dw3
        lu, lv = ik.len_u3, ik.len_v3
        x3 = (lu * lu + lv * lv - delta2) / (2.0 * lu * lv)
        with code.block(f"if abs({code.text(x3)}) <= {_literal(1.0 + REACH_TOL)}"):
            v1 = v3.rotate(w1, c1, ms1, cols[1])
            u1 = v3.rotate(w1, c1, ms1, cols[2])
            ca, sa = self._cos_sin_of_acos(x3)
            ct, st = float(np.cos(ik.theta0)), float(np.sin(ik.theta0))
            cc, ss, sc, cs = ct * ca, st * sa, st * ca, ct * sa
            for e, (c3, s3) in enumerate(((cc + ss, sc - cs), (cc - ss, sc + cs))):
                if self._wanted(k * 4 + e * 2, 2):
                    self._elbow(k * 4 + e * 2, (q1, c1, s1), (c3, s3), d2, v1, u1)

    def _elbow(self, b: int, shoulder: tuple, elbow: tuple, d2: tuple, v1: tuple, u1: tuple):
        ik, code = self.ik, self.code
        w2, w3 = ik.wc[1:3]
        o2, o3 = ik.oc[1:]
        c3, s3 = elbow
        q3 = self._limited(2, _atan2(code, s3, c3, 1.0))
        x_elbow = v3.rotate(w3, c3, s3, ik.c_o3)
        up = v3.perp(w2, v3.sub(v3.add(o3, x_elbow), o2))
        vp = v3.perp(w2, d2)
        tiny = _literal(SINGULAR_EPS**2)
        is_free = f"{code.text(v3.dot(up, up))} < {tiny} or {code.text(v3.dot(vp, vp))} < {tiny}"
        q2, c2, s2 = _angle_cos_sin(code, *v3.angle_parts(w2, up, vp), "r1", is_free)
        q2 = self._limited(1, q2)
        s3s = ik.sigma * s3
        c23, s23 = c2 * c3 - s2 * s3s, s2 * c3 + c2 * s3s
        ms23 = -s23
        v = v3.rotate(w2, c23, ms23, v1)
        u = v3.rotate(w2, c23, ms23, u1)
        arm = (shoulder[0], q2, q3)
        if ik.orthogonal_wrist:
            self._orthogonal_wrist(b, arm, v, u)
        else:
            self._wrist(b, arm, v, u)

    def _wrist(self, b: int, arm: tuple, v: tuple, u: tuple) -> None:
        """``SphericalWristIk._wrist`` for one shoulder x elbow branch."""
        ik, code = self.ik, self.code
        w4, w5, w6 = ik.wc[3:]
        vp4 = v3.perp(w4, v)
        delta2 = v3.dot(vp4, vp4)
        beta = (ik.k45 * v3.dot_const(w4, v) - ik.k56) / (ik.k45**2 - 1.0)
        gamma2 = delta2 / ik.n45_sq - beta * beta
        with code.block(f"if {code.text(gamma2)} >= {_literal(-REACH_TOL)}"):
            code.emit("reach = True")
            g = code.new("_sqrt({0} if {0} > 0.0 else 0.0)", gamma2)
            is_free = f"{code.text(delta2)} < {_literal(SINGULAR_EPS**2)}"
            for r, gamma in enumerate((-g, g)):
                if not self._wanted(b + r, 1):
                    continue
                cp = tuple(beta * ik.w5p[i] + gamma * ik.n45[i] for i in range(3))
                q4, c4, s4 = _angle_cos_sin(code, *v3.angle_parts(w4, cp, vp4), "r3", is_free)
                c_act = v3.rotate(w4, c4, -s4, v)
                q5, c5, s5 = _angle_cos_sin(code, *v3.angle_parts(w5, ik.w6p, v3.perp(w5, c_act)))
                u6 = v3.rotate(w5, c5, -s5, v3.rotate(w4, c4, -s4, u))
                q6 = self._angle(w6, ik.p6, v3.perp(w6, u6))
                self._leaf(b + r, (*arm, q4, q5, q6))

    def _orthogonal_wrist(self, b: int, arm: tuple, v: tuple, u: tuple) -> None:
        """``SphericalWristIk._orthogonal_wrist`` for one shoulder x elbow branch."""
        ik, code = self.ik, self.code
        w4, w5, w6 = ik.wc[3:]
        code.emit("reach = True")
        vp4 = v3.perp(w4, v)
        delta2 = v3.dot(vp4, vp4)
        is_free = f"{code.text(delta2)} < {_literal(SINGULAR_EPS**2)}"
        q4, c4, s4 = _angle_cos_sin(code, *v3.angle_parts(w4, ik.n45_neg, vp4), "r3", is_free)
        c5 = ik.s46 * v3.dot_const(w4, v)
        s5 = ik.s46 * code.new("_sqrt({})", delta2)
        q5 = _atan2(code, s5, c5, 1.0)
        u6 = v3.rotate(w5, c5, -s5, v3.rotate(w4, c4, -s4, u))
        q6 = self._angle(w6, ik.p6, v3.perp(w6, u6))
        flip4 = code.new(f"{q4.name} if {is_free} else {q4.name} - _copysign(_pi, {q4.name})")
        flip6 = code.new(f"{q6.name} if {is_free} else {q6.name} - _copysign(_pi, {q6.name})")
        self._leaf(b, (*arm, q4, q5, q6))
        self._leaf(b + 1, (*arm, flip4, -q5, flip6))

    def _angle(self, a: tuple, u: tuple, v: tuple) -> _Sym:
        y, x = v3.angle_parts(a, u, v)
        return _atan2(self.code, y, x, self.code.new("_sqrt({0} * {0} + {1} * {1})", x, y))

    def _limited(self, j: int, q: _Sym) -> tuple[_Sym, str]:
        """``SphericalWristIk._wrap_into_limits`` of joint ``j``: (angle, whether it fits)."""
        code = self.code
        lo, hi = self.lower[j], self.upper[j]
        if j in self.ref_clipped:  # the wrap nearest the (clipped) reference
            r = self.ref_clipped[j].name
            two_pi = _literal(_TWO_PI)
            turns = f"_floor(({r} - {q.name}) / {two_pi} + {_literal(WRAP_ROUND)})"
            q = code.new(f"{q.name} + {two_pi} * {turns}")
            if math.isfinite(hi):
                code.emit(f"if {q.name} > {_literal(hi + LIMIT_TOL)}: {q.name} -= {two_pi}")
            if math.isfinite(lo):
                prefix = "el" if math.isfinite(hi) else ""
                code.emit(f"{prefix}if {q.name} < {_literal(lo - LIMIT_TOL)}: {q.name} += {two_pi}")
        fits = code.name()
        lo_t, hi_t = math.isfinite(lo), math.isfinite(hi)
        low = f"{_literal(lo - LIMIT_TOL)} <= " if lo_t else ""
        high = f" <= {_literal(hi + LIMIT_TOL)}" if hi_t else ""
        code.emit(f"{fits} = {low}{q.name}{high}" if lo_t or hi_t else f"{fits} = True")
        if not (lo_t and hi_t):
            return _clip(code, q, lo, hi), fits
        clipped = code.name()  # min(max(q, lo), hi) for a finite q, in one statement
        lo_l, hi_l = _literal(lo), _literal(hi)
        code.emit(
            f"{clipped} = {q.name} if {lo_l} <= {q.name} <= {hi_l} else "
            f"({lo_l} if {q.name} < {lo_l} else {hi_l})"
        )
        return _Sym(code, clipped), fits

    def _wanted(self, first: int, count: int) -> bool:
        """Whether branches ``first .. first + count - 1`` include the one being written."""
        return self.only is None or first <= self.only < first + count

    def _leaf(self, b: int, angles: tuple) -> None:
        """Branch ``b`` is valid if all six angles fit their limits."""
        if not self._wanted(b, 1):
            return
        limited = [a if isinstance(a, tuple) else self._limited(j, a) for j, a in enumerate(angles)]
        fits = " and ".join(f for _, f in limited)
        angles_text = ", ".join(q.name for q, _ in limited)
        self.code.emit(f"if {fits}: angles += ({angles_text}); found += {1 << b}")


def _write_branch(ik: SphericalWristIk) -> list[str]:
    """``branch(q)``: ``SphericalWristIk.posture`` as a branch index (``branch_index``)."""
    code = _Code()
    _, w2, w3, _, w5, w6 = ik.wc
    o1, o2, o3 = ik.oc
    cos = [code.new(f"_cos(q[{j}])") for j in (1, 2, 4)]
    sin = [code.new(f"_sin(q[{j}])") for j in (1, 2, 4)]
    x3 = v3.rotate(w3, cos[1], sin[1], ik.c_o3)
    x2 = v3.rotate(w2, cos[0], sin[0], v3.sub(v3.add(o3, x3), o2))
    shoulder = -v3.dot_const(ik.n12, v3.sub(v3.add(o2, x2), o1))
    elbow = code.new(f"_sin(q[2] - {_literal(ik.q3_stretched)})")
    wrist = v3.dot_const(ik.n54, v3.rotate(w5, cos[2], sin[2], w6))
    t = code.text
    code.emit(
        f"return (0 if {t(shoulder)} >= 0.0 else 4) + (0 if {t(elbow)} >= 0.0 else 2) "
        f"+ (0 if {t(wrist)} >= 0.0 else 1)"
    )
    return code.inlined()


_NAMESPACE = {
    "_sqrt": math.sqrt,
    "_cos": math.cos,
    "_sin": math.sin,
    "_atan": math.atan,
    "_atan2": math.atan2,
    "_floor": math.floor,
    "_copysign": math.copysign,
    "_pi": math.pi,
}


class SinglePoseIk:
    """The generated single-pose IK of one solver and link; see the module docstring."""

    def __init__(self, solver: SphericalWristIk, link: str) -> None:
        self.solver, self.link = solver, link
        functions = {"solve": _Writer(solver, link).code.inlined(), "branch": _write_branch(solver)}
        namespace = self._compile(functions)
        self.solve: Callable[[list[float], list[float]], tuple[tuple, int, bool]] = namespace[
            "solve"
        ]
        self.branch: Callable[[list[float]], int] = namespace["branch"]
        self._solve_branch: list[Callable | None] = [None] * 8  # written on first use

    def _compile(self, functions: dict[str, list[str]]) -> dict:
        """Compile generated bodies ``{name: lines}``; their source is added to ``source``."""
        text = "\n".join(
            f"def {name}({'q' if name == 'branch' else 'p, ref'}):\n" + "\n".join(lines) + "\n"
            for name, lines in functions.items()
        )
        #: The generated source of every function written so far (for inspection).
        self.source = getattr(self, "source", "") + text
        namespace = dict(_NAMESPACE)
        exec(compile(text, f"<SinglePoseIk {self.link!r}>", "exec"), namespace)
        return namespace

    def solve_branch(self, b: int) -> Callable[[list[float], list[float]], tuple]:
        """``solve`` writing only branch ``b`` (0..7), generated on first use."""
        fn = self._solve_branch[b]
        if fn is None:
            lines = _Writer(self.solver, self.link, only=b).code.inlined()
            fn = self._solve_branch[b] = self._compile({f"solve_{b}": lines})[f"solve_{b}"]
        return fn

    def __reduce__(self) -> tuple:
        """Pickle as the recipe (the generated functions are rebuilt, not pickled)."""
        return (SinglePoseIk, (self.solver, self.link))

    def solutions(self, p: list[float], ref: list[float]) -> IkSolutions:
        """``IkBatch.solutions`` of the one pose ``p`` (16 floats, row-major ``base_T_link``)."""
        angles, found, reachable = self.solve(p, ref)
        if found:
            return IkSolutions(np.array(angles).reshape(-1, 6), _POSTURES_OF[found].copy())
        reason = (
            "every solution violates the joint limits"
            if reachable
            else "pose out of reach of the arm"
        )
        return IkSolutions(np.empty((0, 6)), POSTURES[:0].copy(), reason)

    def batch(self, p: list[float], ref: list[float]) -> IkBatch:
        """The ``IkBatch`` (N = 1) of the one pose ``p``, as ``SphericalWristIk.solve``."""
        angles, found, reachable = self.solve(p, ref)
        q = _ALL_INVALID.copy()
        if found:
            q[_VALID_OF[found]] = np.array(angles).reshape(-1, 6)
        reachable_ = _REACHABLE if reachable else _UNREACHABLE
        return IkBatch(q, _VALID_OF[found].copy(), POSTURES, reachable_.copy())

    def nearest(self, p: list[float], ref: list[float]) -> np.ndarray | None:
        """The solution (6,) rad with the posture of ``ref``, or ``None`` (``ArmModel.ik``)."""
        b = self.branch(ref)
        angles = (self._solve_branch[b] or self.solve_branch(b))(p, ref)[0]
        return np.array(angles) if angles else None


def for_link(solver: SphericalWristIk, link: str) -> SinglePoseIk:
    """The generated code of ``solver`` for ``link`` (written on first use, then cached)."""
    code = solver.scalar_code.get(link)
    if code is None:
        code = solver.scalar_code[link] = SinglePoseIk(solver, link)
    return code


def flat_pose(pose: object, name: str = "pose") -> list[float]:
    """The 16 entries (row-major) of one pose (4, 4) ``base_T_link``, checked as
    ``validate.as_poses`` checks (a few microseconds of float code; on any doubt the numpy
    check runs, which raises its ``ValueError``). Other shapes raise ``ValueError``."""
    try:
        arr = np.asarray(pose, dtype=float)
    except (TypeError, ValueError):
        arr = as_poses(pose, name)  # raises with the reason
    if arr.shape != (4, 4):
        arr = as_poses(pose, name)
        raise ValueError(f"{name} must have shape (4, 4), got {arr.shape}; see ik_all_batch")
    f = arr.ravel().tolist()
    if _rigid(f):
        return f
    return as_poses(arr, name).ravel().tolist()


def _rigid(f: list[float]) -> bool:
    """``as_poses``'s test of 16 row-major floats (finite, orthonormal, det +1, last row)."""
    if not math.isfinite(sum(f)) or f[12] != 0.0 or f[13] != 0.0 or f[14] != 0.0 or f[15] != 1.0:
        return False
    a, b, c, _, d, e, g, _, h, i, k, _ = f[:12]  # rotation rows (a, b, c), (d, e, g), (h, i, k)
    tol = ORTHONORMAL_TOL
    if (
        abs(a * a + d * d + h * h - 1.0) > tol
        or abs(a * b + d * e + h * i) > tol
        or abs(a * c + d * g + h * k) > tol
        or abs(b * b + e * e + i * i - 1.0) > tol
        or abs(b * c + e * g + i * k) > tol
        or abs(c * c + g * g + k * k - 1.0) > tol
    ):
        return False
    return a * (e * k - g * i) - b * (d * k - g * h) + c * (d * i - e * h) > 0.0


def reference_list(reference_q: object, default: list[float], n: int) -> list[float]:
    """``reference_q`` (n,) or (1, n) rad as n floats, checked; ``default`` if ``None``."""
    if reference_q is None:
        return default
    ref = as_configurations(reference_q, n, "reference_q")
    if ref.shape == (1, n):
        ref = ref[0]
    if ref.ndim != 1:
        raise ValueError(f"reference_q must have shape ({n},) for one pose, got {ref.shape}")
    return ref.tolist()
