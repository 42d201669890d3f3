"""Geometry kernels for the collision model: meshes, boxes, cylinders, point-triangle distances.

Every array is in metres. Triangles are ``(T, 3, 3)``: T triangles of three vertices ``(x, y, z)``.
Boxes are bottom-centred as in the reference API: the box frame's origin is the centre of the
bottom face and the box spans ``[-dx/2, dx/2] x [-dy/2, dy/2] x [0, dz]`` in that frame.
"""

from __future__ import annotations

import numpy as np

#: Vertices closer than this are merged when deciding whether a mesh is closed (m).
WELD_TOLERANCE = 1e-7
_CHUNK = 1 << 20  # elements per vectorised block (memory bound for the (P, T) kernels)


def is_closed_mesh(triangles: np.ndarray) -> bool:
    """True when every edge of the welded mesh is shared by exactly two triangles (watertight).

    triangles: (T, 3, 3) m. Degenerate triangles (repeated vertex) make the mesh not closed.
    """
    tris = np.asarray(triangles, dtype=float)
    keys = np.round(tris.reshape(-1, 3) / WELD_TOLERANCE).astype(np.int64)
    _, ids = np.unique(keys, axis=0, return_inverse=True)
    ids = ids.reshape(-1, 3)
    if (
        np.any(ids[:, 0] == ids[:, 1])
        or np.any(ids[:, 1] == ids[:, 2])
        or np.any(ids[:, 0] == ids[:, 2])
    ):
        return False
    edges = np.concatenate((ids[:, [0, 1]], ids[:, [1, 2]], ids[:, [2, 0]]))
    edges.sort(axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return bool(np.all(counts == 2))


def winding_numbers(triangles: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Generalised winding numbers (P,) of points (P, 3) w.r.t. a mesh (T, 3, 3).

    About +-1 inside a closed mesh and 0 outside (the sign follows the triangles' orientation);
    computed from the solid angle of each triangle (Van Oosterom and Strackee).
    """
    tris = np.asarray(triangles, dtype=float)
    pts = np.asarray(points, dtype=float)
    out = np.zeros(len(pts))
    step = max(1, _CHUNK // max(1, len(tris)))
    for s in range(0, len(pts), step):
        v = tris[None, :, :, :] - pts[s : s + step, None, None, :]  # (p, T, 3, 3)
        n = np.linalg.norm(v, axis=-1)
        a, b, c = v[..., 0, :], v[..., 1, :], v[..., 2, :]
        la, lb, lc = n[..., 0], n[..., 1], n[..., 2]
        det = np.einsum("ptk,ptk->pt", a, np.cross(b, c))
        den = (
            la * lb * lc
            + np.einsum("ptk,ptk->pt", a, b) * lc
            + np.einsum("ptk,ptk->pt", b, c) * la
            + np.einsum("ptk,ptk->pt", c, a) * lb
        )
        out[s : s + step] = np.sum(2.0 * np.arctan2(det, den), axis=1) / (4.0 * np.pi)
    return out


def points_inside_closed_mesh(triangles: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Boolean mask (P,) of points strictly inside a closed mesh (either orientation)."""
    return np.abs(winding_numbers(triangles, points)) > 0.5


def points_inside_box(
    base_T_box: np.ndarray, dimensions: np.ndarray, points: np.ndarray
) -> np.ndarray:
    """Boolean mask (P,) of points (P, 3) inside a bottom-centred box (pose 4x4, dims (3,))."""
    m = np.asarray(base_T_box, dtype=float)
    local = (np.asarray(points, dtype=float) - m[:3, 3]) @ m[:3, :3]
    half = 0.5 * np.asarray(dimensions, dtype=float)
    return (
        (np.abs(local[:, 0]) <= half[0])
        & (np.abs(local[:, 1]) <= half[1])
        & (local[:, 2] >= 0.0)
        & (local[:, 2] <= 2.0 * half[2])
    )


def box_signed_distance(
    base_T_center: np.ndarray, half_extents: np.ndarray, points: np.ndarray
) -> np.ndarray:
    """Exact signed distance (P,) m of points (P, 3) to a centred box (negative inside)."""
    m = np.asarray(base_T_center, dtype=float)
    local = np.abs((np.asarray(points, dtype=float) - m[:3, 3]) @ m[:3, :3]) - half_extents
    outside = np.linalg.norm(np.maximum(local, 0.0), axis=-1)
    inside = np.minimum(np.max(local, axis=-1), 0.0)
    return outside + inside


def cylinder_signed_distance(
    base_T_center: np.ndarray, radius: float, length: float, points: np.ndarray
) -> np.ndarray:
    """Exact signed distance (P,) m to a capped cylinder centred on its frame, axis along z."""
    m = np.asarray(base_T_center, dtype=float)
    local = (np.asarray(points, dtype=float) - m[:3, 3]) @ m[:3, :3]
    d = np.stack(
        (np.hypot(local[:, 0], local[:, 1]) - radius, np.abs(local[:, 2]) - 0.5 * length), axis=-1
    )
    return np.linalg.norm(np.maximum(d, 0.0), axis=-1) + np.minimum(np.max(d, axis=-1), 0.0)


def point_triangle_distances(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Exact distance (P,) m from each point (P, 3) to the nearest of the triangles (T, 3, 3).

    Closest point on a triangle by Voronoi regions (Ericson, Real-Time Collision Detection 5.1.5),
    evaluated for every point-triangle pair in blocks.
    """
    pts = np.asarray(points, dtype=float)
    tris = np.asarray(triangles, dtype=float)
    out = np.empty(len(pts))
    step = max(1, _CHUNK // max(1, len(tris)))
    for s in range(0, len(pts), step):
        p = pts[s : s + step, None, :]
        closest = _closest_on_triangles(p, tris[None, :, 0], tris[None, :, 1], tris[None, :, 2])
        out[s : s + step] = np.min(np.linalg.norm(closest - p, axis=-1), axis=1)
    return out


def _closest_on_triangles(p, a, b, c):
    """Closest points (P, T, 3) on triangles (1, T, 3) x3 to points (P, 1, 3)."""
    ab, ac, ap = b - a, c - a, p - a
    d1 = np.sum(ab * ap, -1)
    d2 = np.sum(ac * ap, -1)
    bp = p - b
    d3 = np.sum(ab * bp, -1)
    d4 = np.sum(ac * bp, -1)
    cp = p - c
    d5 = np.sum(ab * cp, -1)
    d6 = np.sum(ac * cp, -1)
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = va + vb + vc
        v_in = np.where(denom != 0.0, vb / denom, 0.0)
        w_in = np.where(denom != 0.0, vc / denom, 0.0)
        t_ab = np.clip(np.where(d1 - d3 != 0.0, d1 / (d1 - d3), 0.0), 0.0, 1.0)
        t_ac = np.clip(np.where(d2 - d6 != 0.0, d2 / (d2 - d6), 0.0), 0.0, 1.0)
        e43, e56 = d4 - d3, d5 - d6
        t_bc = np.clip(np.where(e43 + e56 != 0.0, e43 / (e43 + e56), 0.0), 0.0, 1.0)
    shape = np.broadcast_shapes(p.shape, a.shape)
    res = a + v_in[..., None] * ab + w_in[..., None] * ac
    res = np.broadcast_to(res, shape).copy()
    # Edge regions, then vertex regions (later assignments take precedence).
    m = (va <= 0.0) & (d4 - d3 >= 0.0) & (d5 - d6 >= 0.0)
    res[m] = np.broadcast_to(b + t_bc[..., None] * (c - b), shape)[m]
    m = (vb <= 0.0) & (d2 >= 0.0) & (d6 <= 0.0)
    res[m] = np.broadcast_to(a + t_ac[..., None] * ac, shape)[m]
    m = (vc <= 0.0) & (d1 >= 0.0) & (d3 <= 0.0)
    res[m] = np.broadcast_to(a + t_ab[..., None] * ab, shape)[m]
    m = (d6 >= 0.0) & (d5 <= d6)
    res[m] = np.broadcast_to(c, shape)[m]
    m = (d3 >= 0.0) & (d4 <= d3)
    res[m] = np.broadcast_to(b, shape)[m]
    m = (d1 <= 0.0) & (d2 <= 0.0)
    res[m] = np.broadcast_to(a, shape)[m]
    return res


#: Triangles are split until no edge is longer than this many sample spacings (``near_box``).
_SPLIT_SPACINGS = 64


def triangles_near_box(
    triangles: np.ndarray, lower: np.ndarray, upper: np.ndarray, max_edge: float
) -> np.ndarray:
    """The parts (K, 3, 3) m of triangles (T, 3, 3) m that can reach the box [lower, upper]
    (3,) m: a triangle with an edge longer than ``max_edge`` is split into four (at its edges'
    midpoints) until none is, and a (sub-)triangle whose bounding box misses the box is dropped.
    The kept triangles cover every point of the input inside the box; their count grows with the
    box's area over ``max_edge^2``, not with the input's area (a kilometre triangle is cheap)."""
    tris = np.asarray(triangles, dtype=float).reshape(-1, 3, 3)
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    kept = [np.zeros((0, 3, 3))]
    while len(tris):
        tris = tris[np.all((tris.max(axis=1) >= lo) & (tris.min(axis=1) <= hi), axis=1)]
        edges = np.linalg.norm(tris - np.roll(tris, 1, axis=1), axis=-1).max(axis=1)
        big = edges > max_edge
        kept.append(tris[~big])
        a, b, c = tris[big, 0], tris[big, 1], tris[big, 2]
        ab, bc, ca = 0.5 * (a + b), 0.5 * (b + c), 0.5 * (c + a)
        tris = np.stack(
            [np.stack(t, axis=1) for t in ((a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca))]
        ).reshape(-1, 3, 3)
    return np.concatenate(kept)


def sample_triangles_near_box(
    triangles: np.ndarray, spacing: float, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    """``sample_triangles`` of the parts of ``triangles`` that can reach the box [lower, upper]
    (``triangles_near_box``): points (K, 3) m, none for a mesh wholly outside the box."""
    near = triangles_near_box(triangles, lower, upper, _SPLIT_SPACINGS * spacing)
    return sample_triangles(near, spacing) if len(near) else np.zeros((0, 3))


def sample_triangles(triangles: np.ndarray, spacing: float) -> np.ndarray:
    """Points (K, 3) on the triangles such that every surface point is within ``spacing`` of one.

    Each triangle is split into ``n^2`` similar sub-triangles whose longest edge is at most
    ``spacing``; their vertices are returned. A point of a sub-triangle is within its longest
    edge of one of its vertices.
    """
    tris = np.asarray(triangles, dtype=float)
    edges = np.linalg.norm(tris - np.roll(tris, 1, axis=1), axis=-1).max(axis=1)
    ns = np.maximum(1, np.ceil(edges / spacing).astype(int))
    out = []
    for n in np.unique(ns):
        group = tris[ns == n]
        i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        keep = i + j <= n
        u = (i[keep] / n)[:, None]
        v = (j[keep] / n)[:, None]
        a, b, c = group[:, None, 0], group[:, None, 1], group[:, None, 2]
        out.append((a + u * (b - a) + v * (c - a)).reshape(-1, 3))
    return np.concatenate(out)


def box_triangles(dimensions: np.ndarray) -> np.ndarray:
    """The 12 outward-oriented triangles (12, 3, 3) of a bottom-centred box of ``dimensions``."""
    dx, dy, dz = 0.5 * dimensions[0], 0.5 * dimensions[1], dimensions[2]
    v = np.array([[x, y, z] for z in (0.0, dz) for y in (-dy, dy) for x in (-dx, dx)], dtype=float)
    faces = [
        (0, 2, 3), (0, 3, 1), (4, 5, 7), (4, 7, 6), (0, 1, 5), (0, 5, 4),
        (2, 6, 7), (2, 7, 3), (0, 4, 6), (0, 6, 2), (1, 3, 7), (1, 7, 5),
    ]  # fmt: skip
    return v[np.array(faces)]
