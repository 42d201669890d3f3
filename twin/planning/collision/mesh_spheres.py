"""Sphere models of mesh collision geometry (URDF ``<mesh>``): conservative and small.

The solid a mesh stands for is taken as PyBullet (and Bullet-based checkers) take it: the convex
hull of an STL file, and of each object (``o``/``g``) of an OBJ file (a convex decomposition, as
V-HACD writes, gives one hull per piece). The hull contains the mesh, so covering it covers every
point of the mesh's surface and of what it encloses.

Rule (``cover_convex``), for one hull ``H`` and ``m`` slabs: ``H`` is cut into ``m`` slabs of
equal thickness across its longest principal axis. A slab ``H ∩ {lo <= a.x <= hi}`` is convex;
its vertices are the hull's vertices inside it and the points where the hull's edges cross its
two planes (``slab_vertices``). Its sphere is centred near the smallest ball around those
vertices (``_enclosing``) with the radius of the farthest vertex from that centre (plus 1e-7 m).
A convex set lies in any ball holding its vertices and the slabs make up ``H``, so every point of
``H`` lies in some sphere. ``m`` (``cover_piece``) is the fewest, up to
``MAX_SPHERES_PER_PIECE``, whose radii are at most ``max_radius`` and whose measured slack (how
far the spheres reach beyond ``H``, against its facet planes) is at most ``max_slack``; else the
fewest within 1 cm of the smallest slack among those within ``max_radius``. Deterministic.

How to bring your own arm: ``docs/reference/planner-arms.md``.

Frames and units: vertices, centres and radii in m, in the frame the mesh is given in (the URDF
shape frame, scale applied).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from pathlib import Path

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from twin.planning.collision.spheres import SphereSet, _fewest_near_best, measured_slack
from twin.scenes import parse_obj

_RADIUS_PAD = 1e-7  # m, rounding allowance added to every radius
#: Sphere count searched per convex piece.
MAX_SPHERES_PER_PIECE = 10


class MeshFileError(ValueError):
    """A collision mesh file cannot be read: the message names the file and what was expected."""


def read_parts(path: str | Path, scale=(1.0, 1.0, 1.0)) -> list[np.ndarray]:
    """The convex pieces of a collision mesh file as vertex arrays (V, 3) m (``scale`` applied):
    one for an STL (ASCII or binary), one per object (``o``/``g``) with faces of an OBJ."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".stl":
        from twin.scenes import SceneError, read_mesh

        try:
            parts = [np.asarray(read_mesh(path).vertices, dtype=float)]
        except (SceneError, UnicodeDecodeError, ValueError) as e:
            raise MeshFileError(f"{path}: not a readable STL file ({e})") from e
    elif suffix == ".obj":
        parts = _obj_parts(path)
    else:
        raise MeshFileError(f"collision mesh {path}: expected an .stl or .obj file")
    return [p * np.asarray(scale, dtype=float) for p in parts]


def _obj_parts(path: Path) -> list[np.ndarray]:
    """Vertices referenced by the faces of each object of an OBJ file (``scenes.parse_obj``)."""
    try:
        v, faces, objects = parse_obj(path)
    except (OSError, ValueError) as e:
        raise MeshFileError(f"{path}: not a readable OBJ file ({e})") from e
    if len(faces) and (faces.min() < 0 or faces.max() >= len(v)):
        raise MeshFileError(f"{path}: a face refers to a vertex beyond the {len(v)} given")
    out = [v[np.unique(faces[objects == k])] for k in np.unique(objects)]
    if not out:
        raise MeshFileError(f"{path}: no faces")
    return out


def hull(points: np.ndarray) -> ConvexHull:
    """Convex hull of points (V, 3) m; a flat or degenerate set is joggled (Qhull ``QJ``)."""
    try:
        return ConvexHull(points)
    except QhullError:
        try:
            return ConvexHull(points, qhull_options="QJ")
        except QhullError as e:
            raise MeshFileError(f"cannot take the convex hull of {len(points)} points: {e}") from e


def hull_triangles(h: ConvexHull) -> np.ndarray:
    """The hull's facets as triangles (F, 3, 3) m."""
    return h.points[h.simplices]


def _inside(h: ConvexHull, points: np.ndarray, pad: float = 0.0) -> np.ndarray:
    """Mask of points strictly inside the hull by ``pad`` m (facet planes ``n.x + d <= 0``)."""
    return _plane_sdf(h, points) < -pad


def _plane_sdf(h: ConvexHull, points: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Signed distance (P,) m to the hull by its facet planes: exact inside and across a facet,
    a lower bound beyond edges and corners."""
    out = np.empty(len(points))
    for s in range(0, len(points), chunk):
        p = points[s : s + chunk]
        out[s : s + chunk] = np.max(p @ h.equations[:, :3].T + h.equations[:, 3], axis=1)
    return out


def _principal_axis(h: ConvexHull) -> np.ndarray:
    """Unit vector (3,): the hull vertices' longest principal axis."""
    v = h.points[h.vertices]
    return np.linalg.svd(v - v.mean(axis=0), full_matrices=False)[2][0]


def _edges(h: ConvexHull) -> np.ndarray:
    """The hull's edges as vertex index pairs (E, 2)."""
    s = h.simplices
    e = np.sort(np.concatenate((s[:, [0, 1]], s[:, [1, 2]], s[:, [0, 2]])), axis=1)
    return np.unique(e, axis=0)


def slab_vertices(
    h: ConvexHull, axis: np.ndarray, lo: float, hi: float, edges: np.ndarray | None = None
) -> np.ndarray:
    """Vertices (V, 3) m of the convex slab ``H ∩ {lo <= axis.x <= hi}``: the hull's vertices
    inside it and the points where the hull's edges cross its two planes."""
    p = h.points
    t = p @ axis
    inside = h.vertices[(t[h.vertices] >= lo) & (t[h.vertices] <= hi)]
    out = [p[inside]]
    e = _edges(h) if edges is None else edges
    ta, tb = t[e[:, 0]], t[e[:, 1]]
    for plane in (lo, hi):
        cross = (np.minimum(ta, tb) < plane) & (np.maximum(ta, tb) > plane)
        a, b = p[e[cross, 0]], p[e[cross, 1]]
        f = ((plane - ta[cross]) / (tb[cross] - ta[cross]))[:, None]
        out.append(a + f * (b - a))
    return np.concatenate(out)


def _enclosing(points: np.ndarray, iterations: int = 64) -> np.ndarray:
    """Centre (3,) of a near-smallest ball around points (V, 3) (Badoiu-Clarkson iteration:
    step towards the farthest point by ``1 / (i + 1)``)."""
    with contextlib.suppress(QhullError):
        points = points[ConvexHull(points).vertices]  # the ball around them holds all
    c = 0.5 * (points.min(axis=0) + points.max(axis=0))
    for i in range(1, iterations + 1):
        far = points[np.argmax(np.sum((points - c) ** 2, axis=1))]
        c = c + (far - c) / (i + 1)
    return c


def cover_convex(h: ConvexHull, count: int) -> SphereSet:
    """``count`` spheres covering the convex hull ``h``, one per slab of equal thickness along
    its longest principal axis (see the module doc), with their measured slack (m)."""
    axis = _principal_axis(h)
    t = h.points[h.vertices] @ axis
    planes = np.linspace(t.min(), t.max(), count + 1)
    edges = _edges(h)
    centers, radii = [], []
    for lo, hi in itertools.pairwise(planes):
        v = slab_vertices(h, axis, lo, hi, edges)
        if len(v) == 0:
            continue
        c = _enclosing(v)
        centers.append(c)
        radii.append(float(np.max(np.linalg.norm(v - c, axis=1))) + _RADIUS_PAD)
    centers, radii = np.array(centers), np.array(radii)
    return SphereSet(
        centers, radii, measured_slack(centers, radii, functools.partial(_plane_sdf, h))
    )


def cover_piece(
    points: np.ndarray, max_radius: float, max_slack: float, max_count: int = MAX_SPHERES_PER_PIECE
) -> SphereSet:
    """The fewest slabs covering the convex hull of ``points`` (V, 3) m whose radii are at most
    ``max_radius`` and slack at most ``max_slack`` (m); when no count up to ``max_count`` meets
    both, of those within ``max_radius`` the fewest within 1 cm of the smallest slack
    (``spheres._fewest_near_best``). Raises ``ValueError`` when none is within ``max_radius``."""
    h = hull(np.asarray(points, dtype=float))
    tried = []
    for count in range(1, max_count + 1):
        cover = cover_convex(h, count)
        if float(cover.radii.max()) > max_radius:
            continue
        if cover.slack <= max_slack:
            return cover
        tried.append(cover)
    if not tried:
        size = np.round(h.max_bound - h.min_bound, 3).tolist()
        raise ValueError(
            f"cannot cover a convex mesh piece of extent {size} m with at most {max_count} "
            f"spheres of radius <= {max_radius} m; expected a larger max_sphere_radius"
        )
    return _fewest_near_best(tried)


@functools.lru_cache(maxsize=128)
def cover_mesh_file(
    path: Path, scale: tuple[float, float, float], max_radius: float, max_slack: float
) -> SphereSet:
    """Cover (mesh frame, m) of every convex piece of a collision mesh file (``read_parts``)."""
    return SphereSet.concatenate(
        [cover_piece(p, max_radius, max_slack) for p in read_parts(path, scale)]
    )


def piece_hulls(path: Path, scale=(1.0, 1.0, 1.0)) -> list[ConvexHull]:
    """The convex hulls of a collision mesh file's pieces (mesh frame, m)."""
    return [hull(p) for p in read_parts(path, scale)]


def volume_overshoot(cover: SphereSet, hulls: list[ConvexHull], samples: int = 200_000) -> float:
    """``vol(union of spheres) / vol(union of hulls) - 1``, estimated with a fixed-seed uniform
    sample of the spheres' bounding box (a documentation figure)."""
    lo = np.min(cover.centers - cover.radii[:, None], axis=0)
    hi = np.max(cover.centers + cover.radii[:, None], axis=0)
    p = np.random.default_rng(0).uniform(lo, hi, size=(samples, 3))
    in_spheres = np.zeros(samples, dtype=bool)
    for c, r in zip(cover.centers, cover.radii):
        in_spheres |= np.sum((p - c) ** 2, axis=1) <= r * r
    in_hulls = np.zeros(samples, dtype=bool)
    for h in hulls:
        in_hulls |= _inside(h, p)
    return float(in_spheres.sum() / max(1, in_hulls.sum()) - 1.0)
