"""Scene files: the backend-neutral parser shared by the simulator and the planner.

A scene is a JSON file (format documented in ``assets/scenes/README.md``) listing named, posed
static items: boxes, spheres, cylinders, triangle meshes (OBJ or STL files) and point clouds
(``.npy`` files). Poses are ``world_T_item`` as ``[px, py, pz, qw, qx, qy, qz]`` (m, unit
quaternion); the arm's ``base_link`` sits at the world origin. Relative file names are resolved
against the scene file's folder.

This module never imports a physics engine: ``sim.scene`` turns a ``Scene`` into PyBullet bodies,
the planner turns it into its collision model.

    from twin.scenes import load_scene, SHIPPED_SCENES
    scene = load_scene("bin")          # a shipped scene by name, or a path to a .json file
    for item in scene.items:
        item.name, item.kind, item.pose, item.dims
"""

from __future__ import annotations

import enum
import json
import struct
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from twin.names import closest, quoted
from twin.spatial import quaternion

#: The scenes shipped in ``assets/scenes/`` (names accepted by ``load_scene``, ``twin scenes`` and
#: every ``--scene``): one per ``.json`` file there; ``pick_place`` is the demo's scene.
SHIPPED_SCENES = ("table", "shelf", "bin", "cage", "pick_place")

FORMAT_NAME = "twin-scene"
FORMAT_VERSION = 1
_QUAT_NORM_TOLERANCE = 1e-3  # hand-typed quaternions (0.7071...) are renormalised within this
#: m: every position and size in a scene (item positions, box sizes, radii, lengths, mesh
#: vertices after scaling, point-cloud coordinates) lies within +-EXTENT_M; sizes are at least
#: MIN_SIZE_M. The planner enforces the same bounds on its API (``twin.planning._validate``);
#: ``docs/formats/planner-geometry.md`` says why.
EXTENT_M = 1e3
MIN_SIZE_M = 1e-6


class SceneError(ValueError):
    """Base class of the scene errors: the message says what was wrong and what was expected."""


class SceneFormatError(SceneError):
    """A scene file does not follow the format; the message names the item, field and expectation."""


class UnknownSceneError(SceneError):
    """Neither a shipped scene's name nor an existing scene file; the message names the closest
    shipped scene and lists them."""


class ItemKind(str, enum.Enum):
    """Kinds of scene items and the meaning of ``SceneItem.dims`` for each."""

    BOX = "box"  # dims (3,): full edge lengths sx, sy, sz (m), centred on the item frame
    SPHERE = "sphere"  # dims (1,): radius (m)
    CYLINDER = "cylinder"  # dims (2,): radius, length (m); axis along item z, centred
    MESH = "mesh"  # dims (3,): scale per item axis (unitless); triangles from an OBJ/STL file
    POINT_CLOUD = "point_cloud"  # dims (1,): point radius (m) used for collision


_DIM_FIELDS: dict[ItemKind, tuple[str, ...]] = {
    ItemKind.BOX: ("size",),
    ItemKind.SPHERE: ("radius",),
    ItemKind.CYLINDER: ("radius", "length"),
    ItemKind.MESH: ("scale",),
    ItemKind.POINT_CLOUD: ("point_radius",),
}


@dataclass(frozen=True)
class TriangleMesh:
    """A triangle mesh: vertices (V, 3) float m in the item frame, faces (F, 3) int indices."""

    vertices: np.ndarray
    faces: np.ndarray


@dataclass(frozen=True)
class SceneItem:
    """One static item of a scene.

    pose: (7,) ``[px, py, pz, qw, qx, qy, qz]`` world_T_item (m, canonical unit quaternion).
    dims: per ``ItemKind`` (see there); read-only float array.
    mesh_path: the OBJ/STL file of a mesh item, else ``None``.
    points: (N, 3) m in the item frame for a point cloud, else ``None``.
    colors: (N, 3) RGB in [0, 1] per point if the cloud file has six columns, else ``None``.
    color: (4,) RGBA in [0, 1] for display.
    """

    name: str
    kind: ItemKind
    pose: np.ndarray
    dims: np.ndarray
    mesh_path: Path | None = None
    points: np.ndarray | None = None
    colors: np.ndarray | None = None
    color: tuple[float, float, float, float] = (0.6, 0.6, 0.6, 1.0)

    @property
    def world_T_item(self) -> np.ndarray:
        """(4, 4) homogeneous pose of the item in the world frame."""
        m = np.eye(4)
        m[:3, :3] = quaternion.to_matrix(self.pose[3:])
        m[:3, 3] = self.pose[:3]
        return m

    def mesh(self) -> TriangleMesh:
        """The triangles of a mesh item, scaled by ``dims``, in the item frame (m)."""
        if self.kind is not ItemKind.MESH or self.mesh_path is None:
            raise TypeError(f"item {self.name!r} is a {self.kind.value}, not a mesh")
        try:
            raw = read_mesh(self.mesh_path)
        except (OSError, ValueError, IndexError) as e:  # a SceneFormatError passes as it is
            if isinstance(e, SceneError):
                raise
            raise SceneFormatError(
                f"item {self.name!r}: cannot read mesh {self.mesh_path} ({type(e).__name__}: "
                f"{quoted(str(e))}); expected an OBJ or STL file"
            ) from e
        vertices = raw.vertices * self.dims
        _within_extent(vertices, f"item {self.name!r}: mesh {self.mesh_path.name} scaled")
        return TriangleMesh(vertices, raw.faces)

    def world_points(self) -> np.ndarray:
        """(N, 3) m: a point cloud item's points in the world frame."""
        if self.points is None:
            raise TypeError(f"item {self.name!r} is a {self.kind.value}, not a point cloud")
        m = self.world_T_item
        return self.points @ m[:3, :3].T + m[:3, 3]


@dataclass(frozen=True)
class Scene:
    """A parsed scene: its name, description, items (in file order) and source file."""

    name: str
    items: tuple[SceneItem, ...]
    description: str = ""
    path: Path | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(item.name for item in self.items)

    def item(self, name: str) -> SceneItem:
        """The item called ``name``; ``KeyError`` listing the known names otherwise."""
        for it in self.items:
            if it.name == name:
                return it
        raise KeyError(f"scene {self.name!r} has no item {name!r}; items: {list(self.names)}")


def scenes_dir() -> Path:
    """The folder of the shipped scenes (``assets/scenes``), found with importlib.resources."""
    return Path(str(resources.files("twin.assets.scenes")))


def scene_path(name: str) -> Path:
    """Path of the shipped scene ``name`` (one of ``SHIPPED_SCENES``)."""
    if name not in SHIPPED_SCENES:
        raise UnknownSceneError(
            f"unknown shipped scene {name!r}{_closest(name)}; expected one of: "
            f"{', '.join(SHIPPED_SCENES)}"
        )
    return scenes_dir() / f"{name}.json"


def scene_file(name: str, relative_to: str | Path | None = None) -> Path | None:
    """The scene file ``name`` stands for: a file shipped in ``scenes_dir()`` by its stem
    (``table``, ``pick_place``, ...), else a ``.json`` file (relative to the folder
    ``relative_to`` when given); None if there is none."""
    shipped = scenes_dir() / f"{name}.json"
    if shipped.is_file():
        return shipped
    path = Path(name) if relative_to is None else Path(relative_to) / name
    return path.resolve() if path.suffix == ".json" and path.is_file() else None


def _closest(name: str) -> str:
    return closest(name, SHIPPED_SCENES)


def load_scene(source: str | Path) -> Scene:
    """Parse a scene: a shipped scene name (``"table"``) or the path of a scene JSON file.

    Raises ``SceneFormatError`` for a malformed file, ``UnknownSceneError`` for a name that is
    not a shipped scene and a path that is not a file.
    """
    if isinstance(source, str) and source in SHIPPED_SCENES:
        path = scene_path(source)
    else:
        path = Path(source)
    if not path.is_file():
        looks_like_path = path.suffix or len(path.parts) > 1
        raise UnknownSceneError(
            f"scene file {str(path)!r} does not exist; expected the path of a scene .json file or "
            f"a shipped scene ({', '.join(SHIPPED_SCENES)})"
            if looks_like_path
            else f"unknown scene {str(source)!r}{_closest(str(source))}; expected a shipped scene "
            f"({', '.join(SHIPPED_SCENES)}) or the path of a scene .json file"
        )
    return parse_scene(read_json(path), base_dir=path.parent, path=path)


def read_json(path: Path) -> object:
    """The decoded JSON of a scene file; ``SceneFormatError`` naming the file and what was wrong
    (unreadable, not UTF-8, not JSON, nested too deeply) instead of a traceback."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except OSError as e:
        raise SceneFormatError(f"{path}: cannot read the scene file ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise SceneFormatError(
            f"{path}: not UTF-8 text (byte {e.start}); expected a scene .json file"
        ) from e
    except json.JSONDecodeError as e:
        raise SceneFormatError(f"{path}: not valid JSON ({e})") from e
    except RecursionError as e:
        raise SceneFormatError(
            f"{path}: JSON nested too deeply; expected a scene object (format in "
            "assets/scenes/README.md)"
        ) from e


def parse_scene(data: dict, base_dir: Path, path: Path | None = None) -> Scene:
    """Build a ``Scene`` from decoded JSON; files are resolved against ``base_dir``."""
    where = str(path) if path is not None else "scene"
    if not isinstance(data, dict):
        raise SceneFormatError(f"{where}: expected a JSON object at the top level")
    if data.get("format") != FORMAT_NAME or data.get("version") != FORMAT_VERSION:
        raise SceneFormatError(
            f'{where}: expected "format": "{FORMAT_NAME}" and "version": {FORMAT_VERSION}, '
            f"got {data.get('format')!r} version {data.get('version')!r}"
        )
    raw_items = data.get("items")
    if not isinstance(raw_items, list):
        raise SceneFormatError(f'{where}: expected "items": a list of objects')
    items = tuple(_parse_item(raw, i, base_dir, where) for i, raw in enumerate(raw_items))
    names = [it.name for it in items]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SceneFormatError(f"{where}: item names must be unique, repeated: {dupes}")
    name = data.get("name", path.stem if path is not None else "scene")
    return Scene(
        name=str(name), items=items, description=str(data.get("description", "")), path=path
    )


def _parse_item(raw: object, index: int, base_dir: Path, where: str) -> SceneItem:
    if not isinstance(raw, dict):
        raise SceneFormatError(f"{where}: item {index} must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise SceneFormatError(f'{where}: item {index} needs a non-empty string "name"')
    label = f"{where}: item {name!r}"
    try:
        kind = ItemKind(raw.get("kind"))
    except ValueError as e:
        kinds = [k.value for k in ItemKind]
        raise SceneFormatError(
            f'{label}: "kind" is {raw.get("kind")!r}, expected one of {kinds}'
        ) from e
    pose = _pose(raw.get("pose"), label)
    dims = _dims(raw, kind, label)
    color = _floats(raw.get("color", (0.6, 0.6, 0.6, 1.0)), 4, f"{label} color")
    mesh_path = points = colors = None
    if kind in (ItemKind.MESH, ItemKind.POINT_CLOUD):
        file = raw.get("file")
        if not isinstance(file, str):
            raise SceneFormatError(
                f'{label}: a {kind.value} needs "file" (path relative to the scene)'
            )
        file_path = (base_dir / file).resolve()
        if not file_path.is_file():
            raise SceneFormatError(f"{label}: file {file_path} does not exist")
        if kind is ItemKind.MESH:
            if file_path.suffix.lower() not in (".obj", ".stl"):
                raise SceneFormatError(f"{label}: mesh file must be .obj or .stl, got {file}")
            mesh_path = file_path
        else:
            points, colors = _read_cloud(file_path, label)
    return SceneItem(
        name=name,
        kind=kind,
        pose=pose,
        dims=dims,
        mesh_path=mesh_path,
        points=points,
        colors=colors,
        color=tuple(float(c) for c in color),
    )


def _floats(value: object, n: int, label: str) -> np.ndarray:
    ok = isinstance(value, list | tuple) and len(value) == n
    ok = ok and all(isinstance(x, int | float) and not isinstance(x, bool) for x in value)
    arr = np.array(value, dtype=float) if ok else None
    if arr is None or not np.all(np.isfinite(arr)):
        raise SceneFormatError(f"{label}: expected {n} finite numbers, got {quoted(value)}")
    return arr


def _within_extent(values: np.ndarray, label: str) -> None:
    """``SceneFormatError`` unless every entry of ``values`` (m) lies within +-``EXTENT_M``."""
    if values.size and float(np.max(np.abs(values))) > EXTENT_M:
        raise SceneFormatError(
            f"{label}: values must lie within +-{EXTENT_M:g} m, got "
            f"{float(np.max(np.abs(values))):.6g} m (docs/formats/planner-geometry.md)"
        )


def _pose(value: object, label: str) -> np.ndarray:
    pose = _floats(value, 7, f"{label} pose [px, py, pz, qw, qx, qy, qz]")
    _within_extent(pose[:3], f"{label} pose position")
    norm = np.linalg.norm(pose[3:])
    if abs(norm - 1.0) > _QUAT_NORM_TOLERANCE:
        raise SceneFormatError(
            f"{label}: pose quaternion has norm {norm:.6g}, expected a unit quaternion"
        )
    pose[3:] = quaternion.canonicalize(pose[3:] / norm)
    pose.flags.writeable = False
    return pose


def _dims(raw: dict, kind: ItemKind, label: str) -> np.ndarray:
    values: list[float] = []
    for key in _DIM_FIELDS[kind]:
        if key == "scale":
            v = raw.get("scale", 1.0)
            arr = _floats([v] * 3 if isinstance(v, int | float) else v, 3, f"{label} scale")
        elif key == "size":
            arr = _floats(raw.get("size"), 3, f"{label} size [sx, sy, sz] (m)")
        else:
            v = raw.get(key)
            arr = _floats([v], 1, f'{label} "{key}" (m)')
        if np.any(arr < MIN_SIZE_M) or np.any(arr > EXTENT_M):
            raise SceneFormatError(
                f'{label}: "{key}" must be > 0 (at least {MIN_SIZE_M:g}) and at most {EXTENT_M:g}, '
                f"got {arr.tolist()} (docs/formats/planner-geometry.md)"
            )
        values.extend(arr.tolist())
    dims = np.array(values)
    dims.flags.writeable = False
    return dims


def _read_cloud(path: Path, label: str) -> tuple[np.ndarray, np.ndarray | None]:
    if path.suffix.lower() != ".npy":
        raise SceneFormatError(f"{label}: a point cloud file must be .npy, got {path.name}")
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise SceneFormatError(f"{label}: {path.name} is not a readable .npy array ({e})") from e
    if arr.dtype.kind not in "iuf" or arr.ndim != 2 or arr.shape[1] not in (3, 6) or not len(arr):
        raise SceneFormatError(
            f"{label}: {path.name} must hold an (N, 3) or (N, 6) array of numbers, got "
            f"{arr.shape} {arr.dtype}"
        )
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        raise SceneFormatError(f"{label}: {path.name} contains non-finite values")
    _within_extent(arr[:, :3], f"{label}: {path.name} points")
    points = np.ascontiguousarray(arr[:, :3])
    colors = np.ascontiguousarray(arr[:, 3:]) if arr.shape[1] == 6 else None
    for a in (points, colors):
        if a is not None:
            a.flags.writeable = False
    return points, colors


def read_mesh(path: str | Path) -> TriangleMesh:
    """Read a Wavefront OBJ (``v``/``f`` records, polygons fanned) or an STL (ASCII or binary)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".obj":
        return _read_obj(path)
    if suffix == ".stl":
        return _read_stl(path)
    raise ValueError(f"mesh file {path} must end in .obj or .stl")


def parse_obj(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An OBJ file's vertices (V, 3), triangles (F, 3) (vertex indices; polygons fanned from
    their first vertex, negative indices counted from the end) and the object (F,) of each
    triangle: an ``o`` or ``g`` line after faces starts the next object. Raises ``OSError`` or
    ``ValueError`` on a file that cannot be read."""
    vertices: list[list[float]] = []
    faces: list[tuple[int, int, int]] = []
    objects: list[int] = []
    current, started = 0, False
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            vertices.append([float(x) for x in parts[1:4]])
        elif parts[0] in ("o", "g"):
            if started:
                current, started = current + 1, False
        elif parts[0] == "f":
            idx = [int(tok.split("/")[0]) for tok in parts[1:]]
            idx = [i - 1 if i > 0 else len(vertices) + i for i in idx]
            faces.extend((idx[0], idx[k], idx[k + 1]) for k in range(1, len(idx) - 1))
            objects.extend([current] * max(0, len(idx) - 2))
            started = True
    return (
        np.array(vertices, float).reshape(-1, 3),
        np.array(faces, int).reshape(-1, 3),
        np.array(objects, int),
    )


def _read_obj(path: Path) -> TriangleMesh:
    vertices, faces, _ = parse_obj(path)
    return _checked_mesh(vertices, faces, path)


_STL_HEADER_BYTES = 80
_STL_TRIANGLE = np.dtype([("normal", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])


def _read_stl(path: Path) -> TriangleMesh:
    data = path.read_bytes()
    if len(data) >= _STL_HEADER_BYTES + 4:
        (count,) = struct.unpack_from("<I", data, _STL_HEADER_BYTES)
        if len(data) == _STL_HEADER_BYTES + 4 + count * _STL_TRIANGLE.itemsize:
            tris = np.frombuffer(data, _STL_TRIANGLE, count, _STL_HEADER_BYTES + 4)["v"]
            return _indexed(tris.astype(float), path)
    text = data.decode("ascii", errors="strict")
    coords = [
        [float(x) for x in ln.split()[1:4]]
        for ln in text.splitlines()
        if ln.strip().startswith("vertex")
    ]
    return _indexed(np.array(coords, float).reshape(-1, 3, 3), path)


def _indexed(tris: np.ndarray, path: Path) -> TriangleMesh:
    """Weld an (F, 3, 3) triangle soup into shared vertices."""
    vertices, inverse = np.unique(tris.reshape(-1, 3), axis=0, return_inverse=True)
    return _checked_mesh(vertices, inverse.reshape(-1, 3), path)


def _checked_mesh(vertices: np.ndarray, faces: np.ndarray, path: Path) -> TriangleMesh:
    if len(faces) == 0 or faces.min() < 0 or faces.max() >= len(vertices):
        raise SceneFormatError(
            f"{path}: no triangles, or face indices outside the {len(vertices)} vertices"
        )
    vertices.flags.writeable = False
    faces.flags.writeable = False
    return TriangleMesh(vertices, faces)
