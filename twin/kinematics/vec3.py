"""Structure-of-arrays 3-vectors for the vectorised closed-form IK.

A vector is a tuple ``(x, y, z)`` of arrays (any common broadcastable shape) or floats. Keeping
components apart makes every operation a few elementwise ufunc calls with no small-matrix
products; a constant axis is a tuple of floats, and its zero components cost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Vec = tuple  # (x, y, z): arrays or floats


def const(v: np.ndarray) -> Vec:
    """A constant vector (3,) as a tuple of Python floats."""
    return tuple(float(x) for x in v)


def split(a: np.ndarray) -> Vec:
    """Components of an array (..., 3)."""
    return (a[..., 0], a[..., 1], a[..., 2])


def expand(v: Vec) -> Vec:
    """Every component with a new axis before the last (a branch axis to broadcast over)."""
    return tuple(x[..., None, :] if isinstance(x, np.ndarray) else x for x in v)


def _lin(terms: Sequence[tuple[float, object]]) -> object:
    """Sum of ``coef * value`` skipping zero coefficients and constant zero values."""
    out: object = 0.0
    for coef, value in terms:
        if coef == 0.0 or (isinstance(value, float) and value == 0.0):
            continue
        scaled = value if coef == 1.0 else -value if coef == -1.0 else coef * value
        out = scaled if isinstance(out, float) and out == 0.0 else out + scaled
    return out


def sub(u: Vec, v: Vec) -> Vec:
    return (u[0] - v[0], u[1] - v[1], u[2] - v[2])


def add(u: Vec, v: Vec) -> Vec:
    return (u[0] + v[0], u[1] + v[1], u[2] + v[2])


def dot_const(a: Vec, v: Vec) -> object:
    """``a . v`` for a constant ``a``."""
    return _lin(((a[0], v[0]), (a[1], v[1]), (a[2], v[2])))


def dot(u: Vec, v: Vec) -> object:
    """``u . v``; constant zero components (floats) cost nothing."""
    return _lin(((1.0, _mul(u[0], v[0])), (1.0, _mul(u[1], v[1])), (1.0, _mul(u[2], v[2]))))


def cross_const(a: Vec, v: Vec) -> Vec:
    """``a x v`` for a constant ``a``."""
    return (
        _lin(((a[1], v[2]), (-a[2], v[1]))),
        _lin(((a[2], v[0]), (-a[0], v[2]))),
        _lin(((a[0], v[1]), (-a[1], v[0]))),
    )


def triple_const(a: Vec, u: Vec, v: Vec) -> object:
    """``a . (u x v)`` for a constant ``a``."""
    return dot_const(a, cross(u, v, (a[0] != 0.0, a[1] != 0.0, a[2] != 0.0)))


def cross(u: Vec, v: Vec, needed: tuple[bool, bool, bool] = (True, True, True)) -> Vec:
    """``u x v``; components not ``needed`` are 0.0; constant zero components are skipped."""

    def term(a: object, b: object, c: object, d: object) -> object:
        return _lin(((1.0, _mul(a, b)), (-1.0, _mul(c, d))))

    return tuple(
        term(u[(i + 1) % 3], v[(i + 2) % 3], u[(i + 2) % 3], v[(i + 1) % 3]) if needed[i] else 0.0
        for i in range(3)
    )


def _mul(a: object, b: object) -> object:
    """``a * b``, but exactly 0.0 (no array op) when either is a constant zero."""
    if (isinstance(a, float) and a == 0.0) or (isinstance(b, float) and b == 0.0):
        return 0.0
    return a * b


def _coordinate_axis(a: Vec) -> int | None:
    """Index ``i`` if the constant unit vector ``a`` is ``+-e_i``, else ``None``."""
    nonzero = [i for i in range(3) if a[i] != 0.0]
    return nonzero[0] if len(nonzero) == 1 and abs(a[nonzero[0]]) == 1.0 else None


def perp(a: Vec, v: Vec) -> Vec:
    """Component of ``v`` normal to the constant unit vector ``a``."""
    i = _coordinate_axis(a)
    if i is not None:
        return tuple(0.0 if k == i else v[k] for k in range(3))
    d = dot_const(a, v)
    return tuple(vi - ai * d if ai != 0.0 else vi for ai, vi in zip(a, v))


def rotate(a: Vec, cos: np.ndarray, sin: np.ndarray, v: Vec) -> Vec:
    """Rotate ``v`` about the constant unit axis ``a`` by the angle with ``cos``, ``sin``
    (Rodrigues: ``v cos + (a x v) sin + a (a . v)(1 - cos)``)."""
    i = _coordinate_axis(a)
    if i is not None:  # a plane rotation of the two other components
        j, k = (i + 1) % 3, (i + 2) % 3
        s = sin if a[i] > 0.0 else -sin
        out3: list[object] = [v[i], 0.0, 0.0]
        out3[1] = _lin(((1.0, _mul(v[j], cos)), (-1.0, _mul(v[k], s))))
        out3[2] = _lin(((1.0, _mul(v[j], s)), (1.0, _mul(v[k], cos))))
        result = [0.0, 0.0, 0.0]
        result[i], result[j], result[k] = out3
        return tuple(result)
    d = dot_const(a, v) * (1.0 - cos)
    ax = cross_const(a, v)
    out = []
    for i in range(3):
        term = v[i] * cos
        if not (isinstance(ax[i], float) and ax[i] == 0.0):
            term = term + ax[i] * sin
        if a[i] != 0.0:
            term = term + (d if a[i] == 1.0 else a[i] * d)
        out.append(term)
    return tuple(out)


def angle_parts(a: Vec, u: Vec, v: Vec) -> tuple[object, object]:
    """``(a . (u x v), u . v)``: ``|u||v|`` times the sine and cosine of the angle about ``a``
    from ``u`` to ``v``."""
    return triple_const(a, u, v), dot(u, v)


def angle(a: Vec, u: Vec, v: Vec) -> np.ndarray:
    """Angle (rad) about the constant unit axis ``a`` taking ``u`` to ``v``, both normal to
    ``a``: ``atan2(a . (u x v), u . v)``."""
    y, x = angle_parts(a, u, v)
    return atan2(y, x, np.sqrt(x * x + y * y))


def atan2(y: np.ndarray, x: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``arctan2(y, x)`` given ``h = hypot(x, y)``, about twice as fast as ``np.arctan2`` here:
    the angle of ``(|x|, y)`` by the half-angle formula ``2 atan(y / (h + |x|))`` (well
    conditioned: ``h + |x| >= h``), reflected to ``sign(y) pi - angle`` where ``x < 0``."""
    half = 2.0 * np.arctan(y / (h + np.abs(x)))
    return np.where(x < 0.0, np.copysign(np.pi, y) - half, half)
