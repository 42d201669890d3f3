"""Scene files (``twin.scenes``) as planner obstacles, in one call.

Boxes, spheres and cylinders become exact primitives; meshes become triangle obstacles in the
cell base frame; a point cloud becomes the centres of the voxels the simulator fills for it
(``sim.scene``: cubes of edge ``2 r`` binned in the item frame, ``r`` the item's point radius),
each with radius ``r sqrt(3)`` (the cube's half-diagonal), so the obstacle covers exactly what the
simulated arm can touch. The arm's base frame is the scene's world frame.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from twin.planning.types import Obstacle, TransformedBox
from twin.scenes import ItemKind, Scene, load_scene


def voxel_centers(points: np.ndarray, point_radius: float) -> np.ndarray:
    """Centres (K, 3) m of the occupied voxels of edge ``2 point_radius`` (item frame)."""
    edge = 2.0 * point_radius
    keys = np.unique(np.floor(np.asarray(points, float) / edge).astype(np.int64), axis=0)
    return (keys + 0.5) * edge


def obstacles_from_scene(scene: Scene | str | Path) -> list[Obstacle]:
    """Obstacles of every item of ``scene`` (a ``Scene``, a shipped scene name or a file path),
    named as the items."""
    if not isinstance(scene, Scene):
        scene = load_scene(scene)
    out = []
    for item in scene.items:
        pose = item.world_T_item
        if item.kind is ItemKind.BOX:
            bottom = pose.copy()
            bottom[:3, 3] -= 0.5 * item.dims[2] * pose[:3, 2]
            out.append(Obstacle.from_box(item.name, TransformedBox(bottom, item.dims)))
        elif item.kind is ItemKind.SPHERE:
            out.append(Obstacle.from_sphere(item.name, pose[:3, 3], item.dims[0]))
        elif item.kind is ItemKind.CYLINDER:
            out.append(Obstacle.from_cylinder(item.name, pose, item.dims[0], item.dims[1]))
        elif item.kind is ItemKind.MESH:
            mesh = item.mesh()
            tris = mesh.vertices[mesh.faces] @ pose[:3, :3].T + pose[:3, 3]
            out.append(Obstacle.from_mesh(item.name, tris))
        else:
            r = float(item.dims[0])
            centers = voxel_centers(item.points, r) @ pose[:3, :3].T + pose[:3, 3]
            out.append(Obstacle.from_point_cloud(item.name, centers, point_radius=r * np.sqrt(3.0)))
    return out
