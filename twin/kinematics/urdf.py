"""A small URDF reader (``xml.etree``) for the parts kinematics and planning need.

Reads links (inertial, collision primitives and meshes), joints (origin ``xyz``/``rpy``, axis, limits) and
an optional SRDF-style ``<group_state name="home">`` with the home configuration. Visual
geometry, materials and transmissions are ignored. All values are SI (m, rad, kg, kg m^2).

A file the twin cannot use safely is refused with ``UrdfError`` (a ``ValueError``) naming the
link or joint and what was expected: links and joints must form a tree (one root, one parent
joint per other link, no kinematic cycle); a link's mass must be finite and > 0 kg and its
inertia tensor finite and positive definite; a movable joint needs ``<limit>`` with finite
``effort`` > 0 N m and ``velocity`` > 0 rad/s, and a revolute joint finite ``lower < upper``.

Mesh collision files (``<mesh filename=... scale=...>``) are resolved when the file is parsed
(``resolve_mesh_uri``); the mesh itself is read by the planner's sphere generation.
"""

from __future__ import annotations

import math
import pathlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from twin.spatial import quaternion as quat

#: Joint types with one rotational degree of freedom.
REVOLUTE_TYPES = ("revolute", "continuous")
#: Joint types this reader accepts.
SUPPORTED_JOINT_TYPES = (*REVOLUTE_TYPES, "fixed")
#: Collision primitives exposed to the planner, with the meaning of ``dims``.
PRIMITIVE_DIMS = {
    "box": "(size_x, size_y, size_z) m, full edge lengths, centred on the origin",
    "cylinder": "(radius, length) m, axis along the shape's z, centred on the origin",
    "sphere": "(radius,) m",
    "mesh": "(scale_x, scale_y, scale_z), the mesh file's scale (its vertices are in m)",
}


class UrdfError(ValueError):
    """The URDF is malformed or uses something this reader does not support."""


class CollisionShape(NamedTuple):
    """One collision primitive of a link.

    kind: ``"box"``, ``"cylinder"``, ``"sphere"`` or ``"mesh"`` (see ``PRIMITIVE_DIMS``).
    dims: sizes in m (a mesh: its scale). origin: (4, 4) ``link_T_shape``. The file of a mesh
    is in ``UrdfLink.mesh_files`` at the same index.
    """

    kind: str
    dims: tuple[float, ...]
    origin: np.ndarray


@dataclass(frozen=True, eq=False)
class Inertial:
    """Mass properties of a link.

    mass: kg. com: (3,) m, centre of mass in the link frame.
    inertia: (3, 3) kg m^2 about the centre of mass, expressed in the link frame's axes.
    """

    mass: float
    com: np.ndarray
    inertia: np.ndarray


@dataclass(frozen=True, eq=False)
class UrdfLink:
    """A link; ``mesh_files[i]`` is the resolved file of ``collisions[i]`` when it is a mesh."""

    name: str
    inertial: Inertial | None
    collisions: tuple[CollisionShape, ...]
    mesh_files: tuple[pathlib.Path | None, ...] = ()


@dataclass(frozen=True, eq=False)
class UrdfJoint:
    """A joint: ``parent_T_child(q) = origin @ Rot(axis, q)`` (revolute) or ``origin`` (fixed).

    origin: (4, 4) parent link frame to joint frame. axis: (3,) unit, joint frame.
    lower, upper: rad (``-inf``/``inf`` for continuous). velocity: rad/s. effort: N m.
    """

    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    lower: float
    upper: float
    velocity: float
    effort: float


@dataclass(frozen=True, eq=False)
class UrdfRobot:
    """A parsed URDF: ``links`` by name, ``joints`` in file order, the ``root`` link name and
    the home configuration by joint name (empty if the file has none)."""

    name: str
    links: dict[str, UrdfLink]
    joints: tuple[UrdfJoint, ...]
    root: str
    home: dict[str, float]


def transform_from_xyz_rpy(xyz: np.ndarray, rpy: np.ndarray) -> np.ndarray:
    """(4, 4) transform of a URDF ``<origin>``: translation ``xyz`` m, fixed-axis roll-pitch-yaw
    ``rpy`` rad (``R = Rz(yaw) Ry(pitch) Rx(roll)``)."""
    out = np.eye(4)
    out[:3, :3] = quat.to_matrix(quat.from_rpy(rpy[0], rpy[1], rpy[2]))
    out[:3, 3] = xyz
    return out


def parse_urdf(path: str | pathlib.Path) -> UrdfRobot:
    """Parse the URDF file at ``path``. Raises ``UrdfError`` saying what is wrong where."""
    path = pathlib.Path(path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise UrdfError(f"cannot read URDF {path}: {e}") from e
    if root.tag != "robot":
        raise UrdfError(f"{path}: root element is <{root.tag}>, expected <robot>")
    links = {}
    for el in root.findall("link"):
        link = _parse_link(el, path)
        if link.name in links:
            raise UrdfError(f"{path}: link {link.name!r} is defined twice")
        links[link.name] = link
    joints = tuple(_parse_joint(el, links) for el in root.findall("joint"))
    children = [j.child for j in joints]
    duplicated = {c for c in children if children.count(c) > 1}
    if duplicated:
        raise UrdfError(f"{path}: links {sorted(duplicated)} have more than one parent joint")
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        cycle = _cycle(joints, set(links))
        hint = f"; kinematic cycle through joints {cycle}" if cycle else ""
        raise UrdfError(f"{path}: expected exactly one root link, found {roots}{hint}")
    cycle = _cycle(joints, set(links) - _reachable(joints, roots[0]))
    if cycle:
        raise UrdfError(
            f"{path}: kinematic cycle through joints {cycle}: each leads back to a link before "
            "it; expected a tree (every link but the root the child of one joint)"
        )
    return UrdfRobot(
        name=root.get("name", ""), links=links, joints=joints, root=roots[0], home=_home(root)
    )


def _reachable(joints: tuple[UrdfJoint, ...], root: str) -> set[str]:
    """The links reachable from ``root`` through parent-to-child joints."""
    children: dict[str, list[str]] = {}
    for j in joints:
        children.setdefault(j.parent, []).append(j.child)
    seen, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def _cycle(joints: tuple[UrdfJoint, ...], candidates: set[str]) -> list[str]:
    """The joint names of one cycle among the links ``candidates`` (each has at most one parent
    joint here), in order; empty if there is none."""
    parent_joint = {j.child: j for j in joints}
    for start in sorted(candidates):
        path: list[UrdfJoint] = []
        visited: dict[str, int] = {}
        link = start
        while link in parent_joint and link not in visited:
            visited[link] = len(path)
            path.append(parent_joint[link])
            link = parent_joint[link].parent
        if link in visited:
            return [j.name for j in reversed(path[visited[link] :])]
    return []


def _floats(text: str | None, count: int, default: tuple[float, ...], what: str) -> np.ndarray:
    if text is None:
        return np.array(default, dtype=float)
    try:
        values = np.array([float(v) for v in text.split()], dtype=float)
    except ValueError as e:
        raise UrdfError(f"{what}: {text!r} is not a list of numbers") from e
    if values.shape != (count,) or not np.all(np.isfinite(values)):
        raise UrdfError(f"{what}: expected {count} finite numbers, got {text!r}")
    return values


def _attr(el: ET.Element, name: str, what: str, default: float | None = None) -> float:
    text = el.get(name)
    if text is None:
        if default is None:
            raise UrdfError(f"{what}: missing attribute {name!r}")
        return default
    try:
        value = float(text)
    except ValueError as e:
        raise UrdfError(f"{what}: attribute {name}={text!r} is not a number") from e
    if math.isnan(value):
        raise UrdfError(f"{what}: attribute {name} is NaN")
    return value


def _origin(el: ET.Element | None, what: str) -> np.ndarray:
    if el is None:
        return np.eye(4)
    xyz = _floats(el.get("xyz"), 3, (0.0, 0.0, 0.0), f"{what} origin xyz")
    rpy = _floats(el.get("rpy"), 3, (0.0, 0.0, 0.0), f"{what} origin rpy")
    return transform_from_xyz_rpy(xyz, rpy)


def _parse_link(el: ET.Element, urdf_path: pathlib.Path) -> UrdfLink:
    name = el.get("name")
    if not name:
        raise UrdfError("a <link> has no name")
    what = f"link {name!r}"
    inertial = None
    inertial_el = el.find("inertial")
    if inertial_el is not None:
        origin = _origin(inertial_el.find("origin"), f"{what} inertial")
        mass_el = inertial_el.find("mass")
        if mass_el is None:
            raise UrdfError(f"{what}: <inertial> without <mass>")
        mass = _attr(mass_el, "value", f"{what} mass")
        if not (math.isfinite(mass) and mass > 0.0):
            raise UrdfError(f"{what}: mass is {mass} kg; expected a finite mass > 0")
        inertia_el = inertial_el.find("inertia")
        if inertia_el is None:
            raise UrdfError(f"{what}: <inertial> without <inertia>")
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        ixx, ixy, ixz, iyy, iyz, izz = (_attr(inertia_el, k, f"{what} inertia", 0.0) for k in keys)
        tensor = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        if not np.all(np.isfinite(tensor)) or np.linalg.eigvalsh(tensor)[0] <= 0.0:
            raise UrdfError(
                f"{what}: inertia (ixx, ixy, ixz, iyy, iyz, izz) = "
                f"{(ixx, ixy, ixz, iyy, iyz, izz)} kg m^2 is not positive definite; expected a "
                "finite tensor with positive principal moments"
            )
        rot = origin[:3, :3]
        inertial = Inertial(mass=mass, com=origin[:3, 3].copy(), inertia=rot @ tensor @ rot.T)
    shapes, files = [], []
    for i, col in enumerate(el.findall("collision")):
        shape, file = _parse_collision(col, f"{what} collision {i}", urdf_path)
        shapes.append(shape)
        files.append(file)
    return UrdfLink(name=name, inertial=inertial, collisions=tuple(shapes), mesh_files=tuple(files))


def resolve_mesh_uri(uri: str, urdf_path: pathlib.Path, what: str = "mesh") -> pathlib.Path:
    """The file a URDF mesh ``filename`` names, for the URDF at ``urdf_path``.

    ``package://<pkg>/<rest>``: the first of ``D/<pkg>/<rest>`` that exists, for ``D`` the
    URDF's folder and then each of its parents (a ROS package folder beside or above the URDF,
    as in ``<pkg>/urdf/robot.urdf`` with ``<pkg>/meshes/...``). ``file://<path>`` and plain
    paths: absolute, or relative to the URDF's folder. Raises ``UrdfError`` naming the file
    and the places looked in when none exists.
    """
    folder = pathlib.Path(urdf_path).resolve().parent
    if uri.startswith("package://"):
        rest = uri[len("package://") :].lstrip("/")
        tried = [d / rest for d in (folder, *folder.parents)]
    else:
        plain = pathlib.Path(uri[len("file://") :] if uri.startswith("file://") else uri)
        tried = [plain if plain.is_absolute() else folder / plain]
    for candidate in tried:
        if candidate.is_file():
            return candidate
    shown = ", ".join(str(t) for t in tried[:3]) + (", ..." if len(tried) > 3 else "")
    raise UrdfError(f"{what}: mesh file {uri!r} not found; looked for {shown}")


def _parse_collision(
    el: ET.Element, what: str, urdf_path: pathlib.Path
) -> tuple[CollisionShape, pathlib.Path | None]:
    origin = _origin(el.find("origin"), what)
    geometry = el.find("geometry")
    if geometry is None or len(geometry) != 1:
        raise UrdfError(f"{what}: expected one shape inside <geometry>")
    shape = geometry[0]
    if shape.tag == "box":
        dims = tuple(_floats(shape.get("size"), 3, (), f"{what} box size"))
    elif shape.tag == "cylinder":
        dims = (_attr(shape, "radius", what), _attr(shape, "length", what))
    elif shape.tag == "sphere":
        dims = (_attr(shape, "radius", what),)
    elif shape.tag == "mesh":
        uri = shape.get("filename")
        if not uri:
            raise UrdfError(f"{what}: <mesh> without a filename")
        dims = tuple(_floats(shape.get("scale"), 3, (1.0, 1.0, 1.0), f"{what} mesh scale"))
        if min(dims) <= 0.0:
            raise UrdfError(f"{what}: mesh scale must be positive, got {dims}")
        file = resolve_mesh_uri(uri, urdf_path, what)
        return CollisionShape("mesh", tuple(float(d) for d in dims), origin), file
    else:
        raise UrdfError(
            f"{what}: <{shape.tag}> collision geometry is not supported; "
            f"expected one of {sorted(PRIMITIVE_DIMS)}"
        )
    if min(dims) <= 0.0:
        raise UrdfError(f"{what}: {shape.tag} sizes must be positive, got {dims}")
    return CollisionShape(shape.tag, tuple(float(d) for d in dims), origin), None


def _parse_joint(el: ET.Element, links: dict[str, UrdfLink]) -> UrdfJoint:
    name = el.get("name")
    if not name:
        raise UrdfError("a <joint> has no name")
    what = f"joint {name!r}"
    jtype = el.get("type", "")
    if jtype not in SUPPORTED_JOINT_TYPES:
        raise UrdfError(f"{what}: type {jtype!r} not supported; expected {SUPPORTED_JOINT_TYPES}")
    ends = {}
    for tag in ("parent", "child"):
        sub = el.find(tag)
        link = None if sub is None else sub.get("link")
        if link not in links:
            raise UrdfError(f"{what}: <{tag}> names unknown link {link!r}")
        ends[tag] = link
    axis_el = el.find("axis")
    axis = _floats(
        None if axis_el is None else axis_el.get("xyz"), 3, (1.0, 0.0, 0.0), f"{what} axis"
    )
    norm = float(np.linalg.norm(axis))
    if norm == 0.0:
        raise UrdfError(f"{what}: axis is the zero vector")
    lower, upper, velocity, effort = -math.inf, math.inf, math.inf, math.inf
    limit = el.find("limit")
    if jtype in REVOLUTE_TYPES and limit is None:
        raise UrdfError(
            f"{what}: a {jtype} joint needs <limit effort=... velocity=...> (N m, rad/s): the "
            "control law clamps to the effort limit and commands to the velocity limit"
        )
    if jtype == "revolute":
        lower = _attr(limit, "lower", what, 0.0)
        upper = _attr(limit, "upper", what, 0.0)
        if not (math.isfinite(lower) and math.isfinite(upper)):
            raise UrdfError(
                f"{what}: limit lower={lower}, upper={upper} rad; expected finite limits "
                "(a joint without position limits is type 'continuous')"
            )
        if not lower < upper:
            raise UrdfError(f"{what}: limit lower={lower} must be below upper={upper}")
    if jtype in REVOLUTE_TYPES:
        for key, unit in (("velocity", "rad/s"), ("effort", "N m")):
            value = _attr(limit, key, f"{what} <limit>")
            if not (math.isfinite(value) and value > 0.0):
                raise UrdfError(
                    f"{what}: limit {key}={value} {unit}; expected a finite {key} limit > 0"
                )
        velocity = _attr(limit, "velocity", what)
        effort = _attr(limit, "effort", what)
    return UrdfJoint(
        name=name,
        type=jtype,
        parent=ends["parent"],
        child=ends["child"],
        origin=_origin(el.find("origin"), what),
        axis=axis / norm,
        lower=lower,
        upper=upper,
        velocity=velocity,
        effort=effort,
    )


def _home(root: ET.Element) -> dict[str, float]:
    for state in root.findall("group_state"):
        if state.get("name") == "home":
            return {
                j.get("name", ""): _attr(j, "value", "group_state 'home'")
                for j in state.findall("joint")
            }
    return {}
