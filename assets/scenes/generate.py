"""Regenerate the shipped meshes and point clouds of ``assets/scenes`` (deterministic, seeded).

    python -m assets.scenes.generate

Writes ``bin.obj`` (open-top bin), ``wedge.stl`` (binary STL prism) and ``bin_objects.npy``
(an (N, 6) float32 point cloud [x, y, z, r, g, b] of objects lying in the bin, in the bin frame).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 7
BIN_OUTER_M = (0.30, 0.40, 0.15)  # x, y, z; origin at the centre of the bottom face
BIN_WALL_M = 0.01
WEDGE_M = (0.12, 0.08, 0.06)  # length (x), width (y), height (z) of the wedge


def box_triangles(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An axis-aligned box from corner ``lo`` to ``hi`` (3,): 8 vertices, 12 outward triangles."""
    v = np.array(
        [[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    )
    f = np.array(
        [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
         [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]
    )  # fmt: skip
    return v, f


def bin_mesh() -> tuple[np.ndarray, np.ndarray]:
    """Open-top bin: a floor and four walls (five boxes in one mesh)."""
    hx, hy, h, w = BIN_OUTER_M[0] / 2, BIN_OUTER_M[1] / 2, BIN_OUTER_M[2], BIN_WALL_M
    parts = [
        ((-hx, -hy, 0.0), (hx, hy, w)),  # floor
        ((-hx, -hy, 0.0), (-hx + w, hy, h)),  # walls
        ((hx - w, -hy, 0.0), (hx, hy, h)),
        ((-hx, -hy, 0.0), (hx, -hy + w, h)),
        ((-hx, hy - w, 0.0), (hx, hy, h)),
    ]
    verts, faces = [], []
    for lo, hi in parts:
        v, f = box_triangles(np.array(lo), np.array(hi))
        faces.append(f + len(verts))
        verts.extend(v)
    return np.array(verts), np.concatenate(faces)


def write_obj(path: Path, vertices: np.ndarray, faces: np.ndarray, comment: str) -> None:
    lines = [f"# {comment}", *(f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in vertices)]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def wedge_mesh() -> tuple[np.ndarray, np.ndarray]:
    """A wedge (right-triangle prism): the ramp rises along +x; origin at the bottom centre."""
    lx, wy, hz = WEDGE_M
    x0, x1, y0, y1 = -lx / 2, lx / 2, -wy / 2, wy / 2
    v = np.array([[x0, y0, 0], [x1, y0, 0], [x1, y0, hz], [x0, y1, 0], [x1, y1, 0], [x1, y1, hz]])
    f = np.array(
        [[0, 2, 1], [3, 4, 5], [0, 1, 4], [0, 4, 3], [1, 2, 5], [1, 5, 4], [0, 3, 5], [0, 5, 2]]
    )
    return v, f


def write_binary_stl(path: Path, vertices: np.ndarray, faces: np.ndarray, header: str) -> None:
    tris = vertices[faces]
    normals = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    out = bytearray(header.encode("ascii")[:80].ljust(80, b" "))
    out += struct.pack("<I", len(faces))
    for n, t in zip(normals, tris):
        out += struct.pack("<12fH", *n, *t.reshape(-1), 0)
    path.write_bytes(bytes(out))


def bin_objects(rng: np.random.Generator, points_per_object: int = 500) -> np.ndarray:
    """Surface points of six objects resting on the bin floor: (N, 6) [x, y, z, r, g, b]."""
    floor = BIN_WALL_M
    hx, hy = BIN_OUTER_M[0] / 2 - BIN_WALL_M, BIN_OUTER_M[1] / 2 - BIN_WALL_M
    clouds = []
    centres = [
        (-0.07, -0.11),
        (0.06, -0.10),
        (-0.06, 0.02),
        (0.07, 0.04),
        (-0.05, 0.13),
        (0.06, 0.13),
    ]
    for i, (cx, cy) in enumerate(centres):
        colour = rng.uniform(0.2, 0.9, 3)
        if i % 2 == 0:  # a ball
            r = rng.uniform(0.025, 0.04)
            d = rng.normal(size=(points_per_object, 3))
            p = d / np.linalg.norm(d, axis=1, keepdims=True) * r + (cx, cy, floor + r)
        else:  # an upright block with a random yaw
            size = rng.uniform((0.04, 0.04, 0.03), (0.07, 0.07, 0.08))
            u = rng.uniform(-0.5, 0.5, (points_per_object, 3))
            axis = rng.integers(0, 3, points_per_object)
            u[np.arange(points_per_object), axis] = (
                np.sign(u[np.arange(points_per_object), axis]) * 0.5
            )
            p = u * size
            yaw = rng.uniform(0, np.pi)
            c, s = np.cos(yaw), np.sin(yaw)
            p = p @ np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]]) + (cx, cy, floor + size[2] / 2)
        p[:, 0] = np.clip(p[:, 0], -hx, hx)
        p[:, 1] = np.clip(p[:, 1], -hy, hy)
        clouds.append(np.hstack([p, np.tile(colour, (len(p), 1))]))
    return np.vstack(clouds).astype(np.float32)


def main() -> None:
    rng = np.random.default_rng(SEED)
    write_obj(
        HERE / "bin.obj",
        *bin_mesh(),
        "open-top bin 0.30 x 0.40 x 0.15 m, origin at the bottom centre",
    )
    write_binary_stl(HERE / "wedge.stl", *wedge_mesh(), "wedge 0.12 x 0.08 x 0.06 m, twin scenes")
    np.save(HERE / "bin_objects.npy", bin_objects(rng))


if __name__ == "__main__":
    main()
