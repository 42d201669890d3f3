"""Input validation shared by the planner's value types: clear messages, read-only arrays."""

from __future__ import annotations

import math

import numpy as np

from twin.planning.errors import PlanningInputError

#: Tolerance on ``R^T R = I`` and ``det R = 1`` for a pose's rotation block.
ROTATION_TOLERANCE = 1e-5
#: m: bound on every coordinate (positions, points, mesh vertices, goal poses) and every size
#: (edges, radii, lengths) of geometry in the cell base frame. A kilometre holds any cell and
#: keeps the collision kernel's float32 grid maths exact to well under a millimetre; beyond it
#: obstacles were silently dropped (issue 31). Documented in ``docs/formats/planner-geometry.md``.
WORLD_EXTENT_M = 1e3
#: m: bound on geometry carried by the flange (TCP offset, tool elements, carried objects,
#: attachments), in the flange or TCP frame: what the collision grid's workspace padding and the
#: sphere covers (at most 512 spheres a box) can represent is far less; a metre is the most
#: any shipped cell's tool reaches with room to spare.
ATTACHED_EXTENT_M = 1.0
#: m: smallest size (edge, radius, length) accepted; below it a size is a typo, and point-cloud
#: voxel keys (``coordinate / size``) would overflow their integers.
MIN_SIZE_M = 1e-6


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only float copy of ``array``."""
    out = np.array(array, dtype=float)
    out.flags.writeable = False
    return out


def _as_float_array(value: object, what: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError) as e:
        raise PlanningInputError(f"{what}: expected numbers, got {type(value).__name__}") from e


def _bounded(x: np.ndarray, what: str, extent: float | None) -> None:
    """``PlanningInputError`` unless every entry of ``x`` (m) lies within +-``extent``."""
    largest = float(np.max(np.abs(x))) if x.size else 0.0
    if extent is not None and largest > extent:
        raise PlanningInputError(
            f"{what}: coordinates must lie within +-{extent:g} m, got {largest:.6g} m (the "
            "planner's geometry bound, docs/formats/planner-geometry.md)"
        )


def within(x: np.ndarray, what: str, extent: float = WORLD_EXTENT_M) -> None:
    """``PlanningInputError`` unless every coordinate of ``x`` (m) lies within +-``extent``."""
    _bounded(np.asarray(x, dtype=float), what, extent)


def pose(value: object, what: str, *, extent: float | None = WORLD_EXTENT_M) -> np.ndarray:
    """A finite rigid 4x4 homogeneous matrix (rows are matrix rows), read-only; its translation
    (m) within +-``extent`` (None: unbounded)."""
    m = _as_float_array(value, what)
    if m.shape != (4, 4):
        raise PlanningInputError(f"{what}: expected a 4x4 homogeneous matrix, got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise PlanningInputError(f"{what}: the pose contains non-finite values (nan or inf)")
    if not np.allclose(m[3], (0.0, 0.0, 0.0, 1.0), atol=1e-9):
        raise PlanningInputError(f"{what}: the last row must be [0, 0, 0, 1], got {m[3]}")
    r = m[:3, :3]
    if not np.allclose(r.T @ r, np.eye(3), atol=ROTATION_TOLERANCE) or np.linalg.det(r) < 0.0:
        raise PlanningInputError(f"{what}: the upper-left 3x3 block must be a rotation matrix")
    _bounded(m[:3, 3], f"{what} (translation)", extent)
    return frozen(m)


def vector3(
    value: object,
    what: str,
    *,
    positive: bool = False,
    nonzero: bool = False,
    extent: float | None = WORLD_EXTENT_M,
) -> np.ndarray:
    """A finite (3,) vector; ``positive`` (sizes, m) requires every entry in
    [``MIN_SIZE_M``, ``extent``], ``nonzero`` a norm > 0; every entry within +-``extent``."""
    v = _as_float_array(value, what)
    if v.shape != (3,):
        raise PlanningInputError(f"{what}: expected 3 values, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise PlanningInputError(f"{what}: contains non-finite values (nan or inf)")
    if positive and np.any(v < MIN_SIZE_M):
        raise PlanningInputError(
            f"{what}: every dimension must be > 0 m (at least {MIN_SIZE_M:g}), got {v}"
        )
    _bounded(v, what, extent)
    if nonzero and np.linalg.norm(v) <= 1e-12:
        raise PlanningInputError(f"{what}: must be a non-zero vector")
    return frozen(v)


def configuration(value: object, what: str, dof: int | None = None) -> np.ndarray:
    """A finite 1-D joint configuration (rad); of length ``dof`` when given. A read-only float
    array owning its data (as ``frozen`` makes them) is returned as it is."""
    if (
        type(value) is np.ndarray
        and value.dtype == np.float64
        and value.ndim == 1
        and value.size
        and (dof is None or value.size == dof)
        and math.isfinite(np.add.reduce(value))  # nan, inf (or an overflowing sum: full checks)
    ):
        if not value.flags.writeable and value.base is None:  # frozen by us: owns its data
            return value
        out = value.copy()
        out.flags.writeable = False
        return out
    q = _as_float_array(value, what)
    if q.ndim != 1 or q.size == 0:
        raise PlanningInputError(f"{what}: expected a 1-D joint configuration, got shape {q.shape}")
    if dof is not None and q.size != dof:
        raise PlanningInputError(
            f"{what}: expected a configuration of {dof} joint values (rad), got {q.size}"
        )
    if not np.all(np.isfinite(q)):
        raise PlanningInputError(f"{what}: contains non-finite joint values (nan or inf)")
    return frozen(q)


def points(
    value: object, what: str, *, allow_empty: bool = True, extent: float | None = WORLD_EXTENT_M
) -> np.ndarray:
    """Finite points (N, 3) m, every coordinate within +-``extent``."""
    p = _as_float_array(value, what)
    if p.size == 0 and allow_empty:
        return frozen(np.zeros((0, 3)))
    if p.ndim != 2 or p.shape[1] != 3:
        raise PlanningInputError(f"{what}: expected points of shape (N, 3), got {p.shape}")
    if p.shape[0] == 0 and not allow_empty:
        raise PlanningInputError(f"{what}: expected at least one point")
    if not np.all(np.isfinite(p)):
        raise PlanningInputError(f"{what}: contains non-finite coordinates (nan or inf)")
    _bounded(p, what, extent)
    return frozen(p)


def triangles(value: object, what: str, *, extent: float | None = WORLD_EXTENT_M) -> np.ndarray:
    """Finite triangles (T, 3, 3) m: T triangles of 3 vertices of 3 coordinates; T >= 1; every
    coordinate within +-``extent``."""
    t = _as_float_array(value, what)
    if t.ndim != 3 or t.shape[1:] != (3, 3) or t.shape[0] == 0:
        raise PlanningInputError(
            f"{what}: expected triangles of shape (T, 3, 3) with T >= 1, got {t.shape}"
        )
    if not np.all(np.isfinite(t)):
        raise PlanningInputError(f"{what}: contains non-finite coordinates (nan or inf)")
    _bounded(t, what, extent)
    return frozen(t)


def colors(value: object, count: int, what: str) -> np.ndarray:
    """Colours (count, 3) RGB in [0, 1] from (count, 3) RGB or (count, 4) RGBA (alpha ignored)."""
    c = _as_float_array(value, what)
    if c.ndim != 2 or c.shape[1] not in (3, 4):
        raise PlanningInputError(f"{what}: expected colours of shape (N, 4) RGBA, got {c.shape}")
    if c.shape[0] != count:
        raise PlanningInputError(
            f"{what}: got {c.shape[0]} colours for {count} points; the counts must be equal"
        )
    return color_values(c[:, :3], what)


def color_values(c: np.ndarray, what: str) -> np.ndarray:
    """Validated RGB values in [0, 1] (any leading shape)."""
    if not np.all(np.isfinite(c)) or np.any(c < 0.0) or np.any(c > 1.0):
        raise PlanningInputError(f"{what}: colour channels must be finite values in [0, 1]")
    return frozen(c)


def positive_scalar(value: object, what: str) -> float:
    """A finite scalar > 0."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError) as e:
        raise PlanningInputError(f"{what}: expected a number, got {value!r}") from e
    if not np.isfinite(x) or x <= 0.0:
        raise PlanningInputError(f"{what}: expected a finite value > 0, got {value!r}")
    return x


def length(value: object, what: str, *, extent: float = WORLD_EXTENT_M) -> float:
    """A size (m: radius, length) in [``MIN_SIZE_M``, ``extent``]."""
    x = positive_scalar(value, what)
    if not MIN_SIZE_M <= x <= extent:
        raise PlanningInputError(
            f"{what}: expected a size in [{MIN_SIZE_M:g}, {extent:g}] m, got {x:.6g} m (the "
            "planner's geometry bound, docs/formats/planner-geometry.md)"
        )
    return x


def name(value: object, what: str) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise PlanningInputError(f"{what}: expected a non-empty name string, got {value!r}")
    return value
