"""Sphere covers of solid shapes: every point of the shape lies inside at least one sphere.

Each cover returns ``SphereSet(centers (K, 3) m, radii (K,) m, slack m)`` in the frame the shape
is given in; ``slack`` bounds how far the union of spheres reaches beyond the shape (the part of
the documented conservative margin that comes from the sphere approximation).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from twin.planning.collision import geometry
from twin.planning.errors import PlanningInputError
from twin.spatial import batch

_SLACK_TOLERANCE = 0.01  # m, see _fewest_near_best
_SEARCH = 14  # sub-divisions tried per box axis beyond the fewest the radius bound allows


@dataclass(frozen=True)
class SphereSet:
    """Spheres ``centers`` (K, 3) m and ``radii`` (K,) m in one frame; ``slack`` m (see module)."""

    centers: np.ndarray
    radii: np.ndarray
    slack: float

    @staticmethod
    def empty() -> SphereSet:
        return SphereSet(np.zeros((0, 3)), np.zeros(0), 0.0)

    def transformed(self, frame_T_shape: np.ndarray) -> SphereSet:
        """The same spheres expressed in the frame of ``frame_T_shape`` (4x4)."""
        return SphereSet(
            batch.transform_points(frame_T_shape, self.centers), self.radii.copy(), self.slack
        )

    @staticmethod
    def concatenate(sets: list[SphereSet]) -> SphereSet:
        if not sets:
            return SphereSet.empty()
        return SphereSet(
            np.concatenate([s.centers for s in sets]).reshape(-1, 3),
            np.concatenate([s.radii for s in sets]),
            max(s.slack for s in sets),
        )


def cover_sphere(radius: float, center: np.ndarray | None = None) -> SphereSet:
    """A sphere covers itself exactly."""
    c = np.zeros((1, 3)) if center is None else np.asarray(center, dtype=float).reshape(1, 3)
    return SphereSet(c, np.array([float(radius)]), 0.0)


def _directions(count: int = 200) -> np.ndarray:
    """Unit vectors (count, 3) spread over the sphere (Fibonacci lattice)."""
    i = np.arange(count) + 0.5
    z = 1.0 - 2.0 * i / count
    phi = np.pi * (1.0 + 5.0**0.5) * i
    rho = np.sqrt(1.0 - z * z)
    return np.stack((rho * np.cos(phi), rho * np.sin(phi), z), axis=-1)


_DIRS = np.concatenate((_directions(), np.eye(3), -np.eye(3)))


def measured_slack(centers: np.ndarray, radii: np.ndarray, sdf) -> float:
    """How far (m) the spheres reach beyond a shape, from its exact signed distance ``sdf``
    evaluated on points of every sphere's surface (a documentation figure, not a bound)."""
    pts = centers[:, None, :] + radii[:, None, None] * _DIRS[None]
    return max(0.0, float(np.max(sdf(pts.reshape(-1, 3)))))


def _box_sdf(half: np.ndarray):
    return lambda p: geometry.box_signed_distance(np.eye(4), half, p)


def cover_centered_box(
    half_extents: np.ndarray, max_radius: float, max_slack: float, max_count: int = 512
) -> SphereSet:
    """Cover a box centred on the origin: the circumscribed spheres of an ``n0 x n1 x n2`` grid
    of sub-boxes (every point of a sub-box is inside its sphere).

    The grid with the fewest spheres whose radius is at most ``max_radius`` and whose measured
    slack is at most ``max_slack`` is chosen; when none within ``max_count`` spheres qualifies,
    the one with the smallest slack.
    """
    return _cover_box_cached(
        tuple(float(h) for h in half_extents), max_radius, max_slack, max_count
    )


@functools.lru_cache(maxsize=256)
def _cover_box_cached(
    half_extents: tuple, max_radius: float, max_slack: float, max_count: int
) -> SphereSet:
    size = 2.0 * np.asarray(half_extents, dtype=float)
    first = [max(1, int(np.ceil(s / (2.0 * max_radius)))) for s in size]
    options = sorted(
        (n[0] * n[1] * n[2], n)
        for n in itertools.product(*(range(f, f + _SEARCH) for f in first))
        if n[0] * n[1] * n[2] <= max_count
    )
    tried: list[SphereSet] = []
    for _, n in options:
        cover = _grid_cover(size, n)
        if cover.radii[0] > max_radius + 1e-12:
            continue
        if cover.slack <= max_slack:
            return cover
        tried.append(cover)
    if not tried:
        raise PlanningInputError(
            f"cannot cover a box of size {size} m with at most {max_count} spheres of radius <= "
            f"{max_radius} m; expected a smaller box (or a larger max_sphere_radius)"
        )
    return _fewest_near_best(tried)


def _fewest_near_best(covers: list[SphereSet]) -> SphereSet:
    """When no cover meets the slack target: the fewest spheres within 1 cm of the best slack."""
    best = min(c.slack for c in covers)
    near = [c for c in covers if c.slack <= best + _SLACK_TOLERANCE]
    return min(near, key=lambda c: (len(c.radii), c.slack))


def _grid_cover(size: np.ndarray, n: tuple[int, int, int]) -> SphereSet:
    sub = size / np.array(n)
    axes = [(np.arange(k) + 0.5) * sub[i] - 0.5 * size[i] for i, k in enumerate(n)]
    centers = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    radii = np.full(len(centers), 0.5 * float(np.linalg.norm(sub)))
    corner = centers[-1:]  # by symmetry a corner sphere reaches farthest beyond the box
    return SphereSet(centers, radii, measured_slack(corner, radii[-1:], _box_sdf(0.5 * size)))


#: Disc coverings of the unit disc: (centres (k, 2), radius). 1 disc; 3 discs of radius
#: sqrt(3)/2; 4 discs of radius 1/sqrt(2) over the quadrants; 7 discs of radius 1/2.
def _ring(count: int, distance: float, phase: float = 0.0) -> np.ndarray:
    a = phase + 2.0 * np.pi * np.arange(count) / count
    return distance * np.stack((np.cos(a), np.sin(a)), axis=-1)


_DISC_COVERS = (
    (np.zeros((1, 2)), 1.0),
    (_ring(3, 0.5), 0.5 * np.sqrt(3.0)),
    (_ring(4, np.sqrt(0.5), 0.25 * np.pi), np.sqrt(0.5)),
    (np.vstack((np.zeros((1, 2)), _ring(6, 0.5 * np.sqrt(3.0)))), 0.5),
)


@functools.lru_cache(maxsize=256)
def cover_cylinder(
    radius: float, length: float, max_radius: float, max_slack: float, max_count: int = 256
) -> SphereSet:
    """Cover a capped cylinder centred on the origin, axis along z.

    ``m`` slabs of thickness ``s = length / m``; each slab's disc is covered by one of the disc
    coverings (radius ``rho * radius``) and every covering disc becomes the sphere through its
    slab's rim, radius ``sqrt((rho radius)^2 + (s / 2)^2)``. The fewest spheres meeting
    ``max_radius`` and ``max_slack`` (measured) are chosen, else the smallest slack.
    """
    sdf = lambda p: geometry.cylinder_signed_distance(np.eye(4), radius, length, p)  # noqa: E731
    tried: list[SphereSet] = []
    options = []
    for disc_centers, rho in _DISC_COVERS:
        for m in range(1, 65):
            count = len(disc_centers) * m
            if count <= max_count:
                options.append((count, m, disc_centers, rho))
    options.sort(key=lambda o: o[0])
    for _, m, disc_centers, rho in options:
        s = length / m
        r = float(np.hypot(rho * radius, 0.5 * s))
        if r > max_radius:
            continue
        z = (np.arange(m) + 0.5) * s - 0.5 * length
        xy = np.repeat(disc_centers * radius, m, axis=0)
        centers = np.column_stack((xy, np.tile(z, len(disc_centers))))
        radii = np.full(len(centers), r)
        top = centers[:, 2] == z[-1]  # by symmetry the end slab reaches farthest
        cover = SphereSet(centers, radii, measured_slack(centers[top], radii[top], sdf))
        if cover.slack <= max_slack:
            return cover
        tried.append(cover)
    if not tried:
        raise ValueError(f"cannot cover a cylinder of radius {radius} with spheres <= {max_radius}")
    return _fewest_near_best(tried)


def cover_bottom_box(
    frame_T_box: np.ndarray, dimensions: np.ndarray, max_radius: float, max_slack: float
) -> SphereSet:
    """Cover a bottom-centred box (pose 4x4 in some frame, dimensions (3,)) in that frame."""
    dims = np.asarray(dimensions, dtype=float)
    centred = cover_centered_box(0.5 * dims, max_radius, max_slack)
    shift = np.eye(4)
    shift[2, 3] = 0.5 * dims[2]
    return centred.transformed(np.asarray(frame_T_box, dtype=float) @ shift)


def cover_mesh(triangles: np.ndarray, cell: float) -> SphereSet:
    """Cover a mesh (T, 3, 3) m (its surface; its inside too when it is closed) with cell spheres.

    A cell of side ``cell`` over the mesh's bounding box is kept when its centre is inside the
    closed mesh or within the cell's half-diagonal ``h = cell * sqrt(3) / 2`` of the surface, and
    gets the sphere of radius ``h`` around its centre. Any point of the solid lies in some cell; if
    that cell's centre is outside, the segment between them crosses the surface within ``h`` of the
    centre, so the cell is kept. Slack: ``2 h`` (a kept centre is within ``h`` of the solid).
    """
    tris = np.asarray(triangles, dtype=float)
    lo, hi = tris.reshape(-1, 3).min(axis=0), tris.reshape(-1, 3).max(axis=0)
    counts = np.maximum(1, np.ceil((hi - lo) / cell).astype(int))
    axes = [lo[i] + (np.arange(counts[i]) + 0.5) * cell for i in range(3)]
    centers = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    h = 0.5 * np.sqrt(3.0) * cell
    keep = geometry.point_triangle_distances(centers, tris) <= h
    if geometry.is_closed_mesh(tris):
        keep |= geometry.points_inside_closed_mesh(tris, centers)
    kept = centers[keep]
    return SphereSet(kept, np.full(len(kept), h), 2.0 * h)
