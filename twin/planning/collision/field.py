"""A truncated signed-distance field on a regular grid: a LOWER BOUND of the obstacle distance.

Each grid node stores a value ``<=`` the true signed distance (m, negative inside a solid
primitive) from the node to the nearest obstacle, clamped to ``band``. A sphere (centre ``c``,
radius ``r``) is reported free only when ``value(nearest node) - h sqrt(3) / 2 >= r``: the signed
distance is 1-Lipschitz and ``c`` is within ``h sqrt(3) / 2`` of its nearest node, so a free
report is never wrong. Contributions ("patches") are computed per obstacle on the sub-block of
nodes within ``band`` of it and combined with ``min``, so replacing one obstacle recomputes only
that obstacle.

* box, cylinder: exact signed distance at the nodes.
* sphere: not stored as a patch: a sphere is kept as its centre and radius (``SpherePatch``,
  bytes). Up to ``EXACT_SPHERES`` of them are checked EXACTLY (``exact_spheres``: the robot's
  sphere checkers compute centre-to-centre distances, ``clearance`` includes them, no lookup
  slack); more are drawn straight into the grid on every ``rebuild`` (exact signed distance at
  the nodes, in float32 less ``SPHERE_ROUNDING``, which covers float32's rounding). The grid's
  lookup slack ``h sqrt(3) / 2`` (8.7 mm at 1 cm) inflates every drawn sphere and closes the
  narrow gaps of a sphere cage: on VAMP's UR5 cage problem it took the free share of random
  configurations from 8.6 % (exact) to 7.2 % and RRT-Connect needed about 4x the checks
  (``benchmarks/bench_planner_clutter.py``). A stored float32 patch of the
  ``((2 (r + band)) / h)^3`` nodes around a sphere cost about 75 KB and 1 ms a sphere (issue 19).
* point cloud: each point marks its nearest node; the truncated Euclidean distance transform
  ``E`` of the marked nodes (exact up to ``band``, by separable passes over windows of
  ``band / h`` nodes) gives ``E - h sqrt(3) / 2``, a lower bound since a point lies within
  ``h sqrt(3) / 2`` of the node it marked.
* mesh: its surface is sampled at ``h / 2`` (every surface point within ``h / 2`` of a sample)
  and treated as a point cloud, less another ``h / 2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.planning.collision import geometry
from twin.planning.types import Obstacle, ObstacleKind

_SQRT3_2 = 0.5 * np.sqrt(3.0)


#: m subtracted from the float32 sphere distances: far more than their rounding (distances up to
#: a few metres, relative error a few float32 ulps, about 1e-6 m), far less than the field slack.
SPHERE_ROUNDING = 1e-5
#: Up to this many sphere obstacles are checked exactly (not drawn into the grid): the checks
#: then cost (robot spheres x obstacle spheres) distances per configuration.
EXACT_SPHERES = 32
#: m subtracted from exact (float64) sphere distances: covers their rounding many times over.
EXACT_ROUNDING = 1e-9


@dataclass(frozen=True)
class SpherePatch:
    """A sphere obstacle's contribution, drawn on ``rebuild``: centre (3,) m, radius m."""

    center: tuple[float, float, float]
    radius: float


@dataclass(frozen=True)
class Patch:
    """Lower bounds ``values`` (a, b, c) float32 m of one obstacle on nodes from ``start`` (3,)."""

    start: np.ndarray
    values: np.ndarray


class DistanceField:
    """Grid over the box ``[lower, upper]`` (3,) m with node spacing ``resolution`` m."""

    def __init__(
        self, lower: np.ndarray, upper: np.ndarray, resolution: float, band: float
    ) -> None:
        self.h = float(resolution)
        self.band = float(band)
        self.origin = np.asarray(lower, dtype=float)
        self.shape = tuple(int(n) for n in np.ceil((np.asarray(upper) - self.origin) / self.h) + 1)
        self._shape_arr = np.array(self.shape)
        self._strides = np.array([self.shape[1] * self.shape[2], self.shape[2], 1])
        self._upper_idx = self._shape_arr - 1
        self._inv_h = 1.0 / self.h
        self._half_node = self.origin - 0.5 * self.h
        self._slack = np.float32(_SQRT3_2 * self.h)
        # One array: node lower bounds less the lookup slack, -inf on the outer layer.
        self._grid = np.empty(self.shape, dtype=np.float32)
        self._flat = self._grid.reshape(-1)
        self.version = 0  # incremented by every rebuild
        self.rebuild([])

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The box (lower (3,), upper (3,)) m within ``band`` of any node: nothing outside it can
        change a node's value."""
        return self.origin - self.band, self.origin + self.h * self._upper_idx + self.band

    # ----------------------------------------------------------------- combination and queries
    def rebuild(self, patches: list[Patch | SpherePatch]) -> None:
        """Set the field to the minimum of ``band`` and every patch (up to ``EXACT_SPHERES``
        sphere patches are kept exact instead: ``exact_spheres``). A point outside the grid is
        clamped onto its outer layer, which holds ``-inf``: reported blocked."""
        grid = self._grid
        grid.fill(np.float32(self.band) - self._slack)
        spheres = []
        self.uniform = True  # every interior node holds ``band - slack`` (``uniform``)
        for p in patches:
            if isinstance(p, SpherePatch):
                spheres.append(p)
                continue
            self.uniform = False
            sl = tuple(slice(s, s + n) for s, n in zip(p.start, p.values.shape))
            np.minimum(grid[sl], p.values - self._slack, out=grid[sl])
        exact = spheres if len(spheres) <= EXACT_SPHERES else []
        self._exact_centers = np.array([p.center for p in exact], dtype=float).reshape(-1, 3)
        self._exact_radii = np.array([p.radius for p in exact], dtype=float)
        self.version += 1
        if spheres and not exact:
            self._draw_spheres(spheres, grid)
            self.uniform = False
        for axis in range(3):
            edge = [slice(None)] * 3
            for end in (0, -1):
                edge[axis] = end
                grid[tuple(edge)] = -np.inf

    def interior_value(self) -> float | None:
        """The value every interior node holds when no obstacle is drawn into the grid (only
        exact spheres, or none), else None: lookups then need no memory access."""
        return float(np.float32(self.band) - self._slack) if self.uniform else None

    def exact_spheres(self) -> tuple[np.ndarray, np.ndarray]:
        """The sphere obstacles checked exactly: centres (K, 3) m and radii (K,) m."""
        return self._exact_centers, self._exact_radii

    def _draw_spheres(self, spheres: list[SpherePatch], grid: np.ndarray) -> None:
        """Lower ``grid`` (this field's shape) to each sphere's signed distance less the lookup
        slack, on the block of nodes within ``band`` of it: per sphere, squared offsets along the
        three axes (float64, from the node coordinates) summed by broadcasting in float32."""
        h = self.h
        centers = np.array([p.center for p in spheres], dtype=float)  # (K, 3)
        radii = np.array([p.radius for p in spheres], dtype=float)
        reach = (radii + self.band)[:, None]
        lo = np.maximum(np.floor((centers - reach - self.origin) / h).astype(int), 0)
        hi = np.minimum(
            np.ceil((centers + reach - self.origin) / h).astype(int) + 1, self._shape_arr
        )
        offset = (radii + float(self._slack) + SPHERE_ROUNDING).astype(np.float32)
        for k in np.flatnonzero(np.all(hi > lo, axis=1)):
            (a0, b0, c0), (a1, b1, c1) = lo[k], hi[k]
            c = centers[k]
            dx = ((self.origin[0] + h * np.arange(a0, a1) - c[0]) ** 2).astype(np.float32)
            dy = ((self.origin[1] + h * np.arange(b0, b1) - c[1]) ** 2).astype(np.float32)
            dz = ((self.origin[2] + h * np.arange(c0, c1) - c[2]) ** 2).astype(np.float32)
            d = dx[:, None, None] + dy[None, :, None]
            d = d + dz[None, None, :]
            np.sqrt(d, out=d)
            d -= offset[k]
            block = grid[a0:a1, b0:b1, c0:c1]
            np.minimum(block, d, out=block)

    @property
    def values(self) -> np.ndarray:
        """Node lower bounds (a, b, c) m of the signed distance (``-inf`` on the outer layer),
        the exactly checked spheres included (drawn here, on a copy)."""
        grid = self._grid.copy()
        if len(self._exact_radii):
            spheres = [SpherePatch(tuple(c), float(r)) for c, r in zip(*self.exact_spheres())]
            self._draw_spheres(spheres, grid)
        return grid + self._slack

    def clearance(self, centers: np.ndarray) -> np.ndarray:
        """Lower bound (...,) m of the signed obstacle distance at points (..., 3); ``-inf`` on
        and outside the grid's outer layer (anything leaving the grid is reported blocked)."""
        # Nearest node: truncate (x - origin) / h + 1/2; below the grid truncation goes to 0,
        # which the clip keeps on the outer layer as well.
        idx = ((centers - self._half_node) * self._inv_h).astype(np.intp)
        np.clip(idx, 0, self._upper_idx, out=idx)
        out = self.at_nodes(idx @ self._strides)
        if not len(self._exact_radii):
            return out
        d = np.linalg.norm(centers[..., None, :] - self._exact_centers, axis=-1)
        d -= self._exact_radii + EXACT_ROUNDING
        return np.minimum(out, d.min(axis=-1))

    def at_nodes(self, flat_index: np.ndarray) -> np.ndarray:
        """The grid's part of ``clearance`` (...,) m (without ``exact_spheres``) at nodes given by
        flat index ``(i * shape[1] + j) * shape[2] + k`` (...,), for callers that find the nearest
        nodes themselves and check the exact spheres themselves (``kernel.SphereKernel``)."""
        return self._flat.take(flat_index)

    # ----------------------------------------------------------------------------- patches
    def patch(self, obstacle: Obstacle) -> Patch | SpherePatch | None:
        """This obstacle's contribution, or None when it lies out of reach of the grid (a
        sphere's is its centre and radius, drawn on ``rebuild``)."""
        kind = obstacle.kind
        if kind is ObstacleKind.POINT_CLOUD:
            return self.points_patch(obstacle.points, obstacle.point_radius)  # type: ignore[arg-type]
        if kind is ObstacleKind.MESH:
            tris = obstacle.triangles  # the part near the grid only (issue 31: a kilometre mesh)
            pts = geometry.sample_triangles_near_box(tris, 0.5 * self.h, *self.bounds)  # type: ignore[arg-type]
            return self.points_patch(pts, 0.5 * self.h)
        pose, dims = obstacle.pose, obstacle.dimensions
        if kind is ObstacleKind.BOX:
            center = pose @ _translation(0.0, 0.0, 0.5 * dims[2])  # type: ignore[index,operator]
            corners = _box_corners(center, 0.5 * dims)  # type: ignore[operator]
            return self._exact_patch(
                corners, lambda p: geometry.box_signed_distance(center, 0.5 * dims, p)
            )
        if kind is ObstacleKind.SPHERE:
            c, r = pose[:3, 3], float(dims[0])  # type: ignore[index]
            if self._block(np.stack((c - r, c + r))) is None:
                return None
            x, y, z = c.tolist()
            return SpherePatch((x, y, z), r)
        if kind is ObstacleKind.CYLINDER:
            r, length = float(dims[0]), float(dims[1])  # type: ignore[index]
            corners = _box_corners(pose, np.array([r, r, 0.5 * length]))  # type: ignore[arg-type]
            return self._exact_patch(
                corners, lambda p: geometry.cylinder_signed_distance(pose, r, length, p)
            )
        raise AssertionError(f"unhandled obstacle kind {kind}")  # pragma: no cover

    def _block(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Node index range [start, stop) covering ``points`` (K, 3) grown by ``band``."""
        lo = np.floor((points.min(axis=0) - self.band - self.origin) / self.h).astype(int)
        hi = np.ceil((points.max(axis=0) + self.band - self.origin) / self.h).astype(int) + 1
        lo, hi = np.maximum(lo, 0), np.minimum(hi, self._shape_arr)
        if np.any(hi <= lo):
            return None
        return lo, hi

    def _node_points(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        axes = [self.origin[i] + self.h * np.arange(lo[i], hi[i]) for i in range(3)]
        return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)

    def _exact_patch(self, corners: np.ndarray, sdf) -> Patch | None:
        block = self._block(corners)
        if block is None:
            return None
        lo, hi = block
        nodes = self._node_points(lo, hi)
        values = sdf(nodes.reshape(-1, 3)).reshape(nodes.shape[:3])
        return Patch(lo, np.minimum(values, self.band).astype(np.float32))

    def points_patch(self, points: np.ndarray, extra_slack: float) -> Patch | None:
        """Patch of points (K, 3) m whose true surface is within ``extra_slack`` m of them."""
        lo, hi = self.bounds  # a point farther out changes no node: skip it (issue 31)
        near = np.all((points >= lo - extra_slack) & (points <= hi + extra_slack), axis=1)
        points = points[near]
        if len(points) == 0:
            return None
        block = self._block(points)
        if block is None:
            return None
        lo, hi = block
        idx = np.rint((points - self.origin) / self.h).astype(np.int64) - lo
        ok = np.all((idx >= 0) & (idx < hi - lo), axis=-1)
        occupied = np.zeros(tuple(hi - lo), dtype=bool)
        occupied[tuple(idx[ok].T)] = True
        window = int(np.ceil(self.band / self.h)) + 1
        d = np.sqrt(_windowed_squared_edt(occupied, window)) * self.h
        values = np.minimum(d - (_SQRT3_2 * self.h + extra_slack), self.band)
        return Patch(lo, values.astype(np.float32))


def _windowed_squared_edt(occupied: np.ndarray, window: int) -> np.ndarray:
    """Squared distance (in node units) to the nearest occupied node, exact where it is at most
    ``window^2``; elsewhere ``>= window^2`` or ``inf`` (separable min-plus passes per axis)."""
    f = np.where(occupied, 0.0, np.inf).astype(np.float32)
    for axis in range(3):
        g = f.copy()
        n = f.shape[axis]
        for k in range(1, min(window, n - 1) + 1):
            kk = np.float32(k * k)
            hi = [slice(None)] * 3
            lo = [slice(None)] * 3
            hi[axis], lo[axis] = slice(k, None), slice(None, n - k)
            hi_t, lo_t = tuple(hi), tuple(lo)
            np.minimum(g[hi_t], f[lo_t] + kk, out=g[hi_t])
            np.minimum(g[lo_t], f[hi_t] + kk, out=g[lo_t])
        f = g
    return f


def _translation(x: float, y: float, z: float) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def _box_corners(center_pose: np.ndarray, half: np.ndarray) -> np.ndarray:
    """The 8 corners (8, 3) of a centred box with half extents (3,) under a pose (4x4)."""
    signs = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1], indexing="ij")).reshape(3, -1).T
    return (signs * half) @ center_pose[:3, :3].T + center_pose[:3, 3]
