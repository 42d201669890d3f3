"""Loading a parsed scene (``twin.scenes``) into the engine as static bodies.

Boxes, spheres and cylinders become primitive shapes; meshes become static concave triangle meshes
(the same triangles the planner reads through ``twin.scenes``); a point cloud becomes one static
triangle mesh of cubes: the points are binned into voxels of edge ``2 r`` (``r`` the item's
``point_radius``) and every occupied voxel is filled by a cube of that edge, so the obstacle covers
every point (inflated by at most one voxel diagonal).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from twin.sim.engine import Engine

from twin.scenes import ItemKind, Scene, load_scene

SCENE_PREFIX = "scene/"

# unit cube corners (index = 4 x + 2 y + z over {-1, +1}) and its 12 outward triangles
_CUBE_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
_CUBE_FACES = np.array(
    [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
     [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]
)  # fmt: skip


def voxel_cubes(points: np.ndarray, point_radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Cubes over the occupied voxels of ``points`` (N, 3) m: vertices (8 K, 3), faces (12 K, 3)."""
    edge = 2.0 * point_radius
    keys = np.unique(np.floor(np.asarray(points, float) / edge).astype(np.int64), axis=0)
    centres = (keys + 0.5) * edge
    vertices = (centres[:, None, :] + point_radius * _CUBE_CORNERS[None]).reshape(-1, 3)
    faces = (_CUBE_FACES[None] + 8 * np.arange(len(keys))[:, None, None]).reshape(-1, 3)
    return vertices, faces


def add_scene(engine: Engine, scene: Scene | str | Path) -> tuple[str, ...]:
    """Create every item of ``scene`` as a static body named ``"scene/<item name>"``.

    ``scene`` is a parsed ``Scene``, a shipped scene name or a scene file path. Returns the body
    names, in file order.
    """
    if not isinstance(scene, Scene):
        scene = load_scene(scene)
    names = []
    for item in scene.items:
        body = SCENE_PREFIX + item.name
        if item.kind is ItemKind.BOX:
            engine.add_static_shape(
                body, "box", item.pose, half_extents=item.dims / 2.0, color=item.color
            )
        elif item.kind is ItemKind.SPHERE:
            engine.add_static_shape(
                body, "sphere", item.pose, radius=item.dims[0], color=item.color
            )
        elif item.kind is ItemKind.CYLINDER:
            engine.add_static_shape(
                body,
                "cylinder",
                item.pose,
                radius=item.dims[0],
                length=item.dims[1],
                color=item.color,
            )
        elif item.kind is ItemKind.MESH:
            mesh = item.mesh()
            engine.add_static_mesh(body, item.pose, mesh.vertices, mesh.faces, color=item.color)
        else:
            vertices, faces = voxel_cubes(item.points, item.dims[0])
            engine.add_static_mesh(body, item.pose, vertices, faces, color=item.color)
        names.append(body)
    return tuple(names)


def remove_scene(engine: Engine, bodies: tuple[str, ...]) -> None:
    """Remove bodies created by ``add_scene``."""
    for body in bodies:
        engine.remove(body)
