"""Geometric value types of the planner API: boxes, TCP, obstacles, carried objects and tools.

Poses are 4x4 homogeneous matrices (rows are matrix rows), metres; every constructor validates
its input and raises ``PlanningInputError`` saying what was expected. Instances are immutable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from twin.planning import _validate as v
from twin.planning.collision import geometry
from twin.planning.errors import PlanningInputError


@dataclass(frozen=True, eq=False)
class TransformedBox:
    """A box: ``bottom_centered_transform`` (4x4, from the context's frame to the centre of the
    box's bottom face) and ``dimensions`` (3,) m along the box's x, y, z axes."""

    bottom_centered_transform: np.ndarray
    dimensions: np.ndarray

    def __post_init__(self) -> None:
        m = v.pose(self.bottom_centered_transform, "box transform", extent=None)
        d = v.vector3(self.dimensions, "box dimensions", positive=True)
        # the bound holds for the box's centre, as a scene file gives it (issue 31)
        v.within(m[:3, 3] + 0.5 * d[2] * m[:3, 2], "box transform (the box's centre)")
        object.__setattr__(self, "bottom_centered_transform", m)
        object.__setattr__(self, "dimensions", d)

    def transformed(self, frame_T_context: np.ndarray) -> TransformedBox:
        """The same box with its transform expressed in another frame (4x4 ``frame_T_context``)."""
        return TransformedBox(frame_T_context @ self.bottom_centered_transform, self.dimensions)

    def __repr__(self) -> str:
        t = self.bottom_centered_transform[:3, 3]
        return (
            f"TransformedBox(at={np.round(t, 4).tolist()}, dimensions={self.dimensions.tolist()})"
        )


@dataclass(frozen=True, eq=False)
class Tcp:
    """Tool centre point: ``transform`` (4x4 flange_T_tcp) and ``tool_direction`` (3,), a
    non-zero direction in the TCP frame (used by touch motions)."""

    transform: np.ndarray
    tool_direction: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "transform", v.pose(self.transform, "Tcp transform", extent=v.ATTACHED_EXTENT_M)
        )
        object.__setattr__(
            self,
            "tool_direction",
            v.vector3(self.tool_direction, "Tcp tool_direction", nonzero=True),
        )

    def __repr__(self) -> str:
        t = np.round(self.transform[:3, 3], 4).tolist()
        return f"Tcp(flange_p_tcp={t}, tool_direction={self.tool_direction.tolist()})"


class ObstacleKind(enum.Enum):
    """How an obstacle's geometry is given."""

    MESH = "mesh"
    POINT_CLOUD = "point_cloud"
    BOX = "box"
    SPHERE = "sphere"
    CYLINDER = "cylinder"


@dataclass(frozen=True, eq=False)
class Obstacle:
    """An obstacle in the cell base frame; build it with the ``from_*`` constructors.

    ``triangles`` (T, 3, 3) m for meshes; ``points`` (N, 3) m for point clouds; ``pose`` (4x4)
    and ``dimensions`` for primitives (box: bottom-centred (3,) m; sphere: centre pose and
    ``[radius]``; cylinder: centre pose, axis z, ``[radius, length]``); ``colors`` RGB in [0, 1],
    (N, 3) for a point cloud or (1, 3) for a mesh, or None (alpha is dropped); ``point_radius``
    m: every point of a cloud stands for a ball of this radius (0: bare points).
    """

    name: str
    kind: ObstacleKind
    triangles: np.ndarray | None = None
    points: np.ndarray | None = None
    pose: np.ndarray | None = None
    dimensions: np.ndarray | None = None
    colors: np.ndarray | None = None
    point_radius: float = 0.0

    @classmethod
    def from_mesh(cls, name: str, mesh: object) -> Obstacle:
        """A mesh obstacle from triangles (T, 3, 3) m in the cell base frame (open meshes are
        surfaces; closed ones too: the planner never needs their inside)."""
        return cls(v.name(name, "obstacle name"), ObstacleKind.MESH, v.triangles(mesh, "mesh"))

    @classmethod
    def from_colored_mesh(cls, name: str, mesh: object, color: object) -> Obstacle:
        """A mesh obstacle with one RGBA colour (4,) in [0, 1]; alpha is ignored."""
        c = np.asarray(color, dtype=float)
        if c.shape not in ((3,), (4,)):
            raise PlanningInputError(f"mesh colour: expected RGBA (4,) values, got shape {c.shape}")
        return cls(
            v.name(name, "obstacle name"),
            ObstacleKind.MESH,
            v.triangles(mesh, "mesh"),
            colors=v.color_values(c[:3].reshape(1, 3), "mesh colour"),
        )

    @classmethod
    def from_point_cloud(
        cls, name: str, point_cloud: object, *, point_radius: float = 0.0
    ) -> Obstacle:
        """A point-cloud obstacle from points (N, 3) m in the cell base frame; ``point_radius``
        (an extension, default 0) makes each point a ball."""
        return cls(
            v.name(name, "obstacle name"),
            ObstacleKind.POINT_CLOUD,
            points=v.points(point_cloud, "point cloud"),
            point_radius=_radius(point_radius),
        )

    @classmethod
    def from_colored_point_cloud(
        cls, name: str, point_cloud: object, colors: object, *, point_radius: float = 0.0
    ) -> Obstacle:
        """A point cloud with one RGBA colour per point, (N, 4) in [0, 1]; alpha is ignored."""
        pts = v.points(point_cloud, "point cloud")
        return cls(
            v.name(name, "obstacle name"),
            ObstacleKind.POINT_CLOUD,
            points=pts,
            colors=v.colors(colors, len(pts), "point cloud colours"),
            point_radius=_radius(point_radius),
        )

    @classmethod
    def from_box(cls, name: str, box: TransformedBox) -> Obstacle:
        """A box primitive (an extension of the reference API: exact and faster than a mesh)."""
        if not isinstance(box, TransformedBox):
            raise PlanningInputError(f"box: expected a TransformedBox, got {type(box).__name__}")
        return cls(
            v.name(name, "obstacle name"),
            ObstacleKind.BOX,
            pose=box.bottom_centered_transform,
            dimensions=box.dimensions,
        )

    @classmethod
    def from_sphere(cls, name: str, center: object, radius: float) -> Obstacle:
        """A sphere primitive: centre (3,) m and radius m (extension of the reference API)."""
        pose = np.eye(4)
        pose[:3, 3] = v.vector3(center, "sphere centre")
        return cls(
            v.name(name, "obstacle name"),
            ObstacleKind.SPHERE,
            pose=v.frozen(pose),
            dimensions=v.frozen([v.length(radius, "sphere radius")]),
        )

    @classmethod
    def from_cylinder(cls, name: str, pose: object, radius: float, length: float) -> Obstacle:
        """A capped cylinder: centre pose (4x4, axis along its z), radius and length m."""
        return cls(
            v.name(name, "obstacle name"),
            ObstacleKind.CYLINDER,
            pose=v.pose(pose, "cylinder pose"),
            dimensions=v.frozen(
                [v.length(radius, "cylinder radius"), v.length(length, "cylinder length")]
            ),
        )

    def __repr__(self) -> str:
        if self.kind is ObstacleKind.MESH:
            size = f"{len(self.triangles)} triangles"  # type: ignore[arg-type]
        elif self.kind is ObstacleKind.POINT_CLOUD:
            size = f"{len(self.points)} points"  # type: ignore[arg-type]
        else:
            size = f"dimensions={np.round(self.dimensions, 4).tolist()}"  # type: ignore[arg-type]
        coloured = ", coloured" if self.colors is not None else ""
        return f"Obstacle({self.name!r}, {self.kind.value}, {size}{coloured})"


def _radius(value: object) -> float:
    """A cloud's point radius m: 0 (bare points) or a size within the planner's bounds."""
    try:
        if float(value) == 0.0:  # type: ignore[arg-type]
            return 0.0
    except (TypeError, ValueError, OverflowError):
        pass  # v.length names what was wrong
    return v.length(value, "point_radius (0 for bare points)")


def attached_box(box: object, what: str) -> TransformedBox:
    """``box`` if it is a ``TransformedBox`` within ``ATTACHED_EXTENT_M`` of its frame's origin
    (translation and dimensions, m), else ``PlanningInputError`` naming ``what``."""
    if not isinstance(box, TransformedBox):
        raise PlanningInputError(f"{what}: expected a TransformedBox, got {type(box).__name__}")
    v.pose(box.bottom_centered_transform, f"{what} transform", extent=v.ATTACHED_EXTENT_M)
    v.vector3(box.dimensions, f"{what} dimensions", positive=True, extent=v.ATTACHED_EXTENT_M)
    return box


@dataclass(frozen=True, eq=False)
class CarriedObject:
    """An object held by the robot, in the TCP frame: a box or a mesh (``tcp_T_mesh`` 4x4 and
    triangles (T, 3, 3) m in the mesh frame). Build it with ``from_box`` / ``from_mesh``."""

    box: TransformedBox | None = None
    mesh_transform: np.ndarray | None = None
    triangles: np.ndarray | None = None

    @classmethod
    def from_box(cls, box: TransformedBox) -> CarriedObject:
        return cls(box=attached_box(box, "carried object box"))

    @classmethod
    def from_mesh(cls, transform: object, mesh: object) -> CarriedObject:
        return cls(
            mesh_transform=v.pose(
                transform, "carried object transform", extent=v.ATTACHED_EXTENT_M
            ),
            triangles=v.triangles(mesh, "carried object mesh", extent=v.ATTACHED_EXTENT_M),
        )

    def triangles_in_tcp(self) -> np.ndarray:
        """The object's surface as triangles (T, 3, 3) m in the TCP frame."""
        if self.box is not None:
            local = geometry.box_triangles(self.box.dimensions)
            m = self.box.bottom_centered_transform
        else:
            local, m = self.triangles, self.mesh_transform
        return local @ m[:3, :3].T + m[:3, 3]  # type: ignore[index, operator]

    def __repr__(self) -> str:
        if self.box is not None:
            return f"CarriedObject.from_box({self.box!r})"
        return f"CarriedObject.from_mesh({len(self.triangles)} triangles)"  # type: ignore[arg-type]


@dataclass(frozen=True, eq=False)
class ToolBoxElement:
    """One element of a replaceable tool: ``transform`` (4x4 flange_T_element), the rigid box
    (bottom-centred in the element frame, ``rigid_box_dimensions`` (3,) m) and an optional
    compliant box relative to the element frame (rigid outside touch motions)."""

    transform: np.ndarray
    rigid_box_dimensions: np.ndarray
    compliant_box: TransformedBox | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "transform",
            v.pose(self.transform, "tool element transform", extent=v.ATTACHED_EXTENT_M),
        )
        object.__setattr__(
            self,
            "rigid_box_dimensions",
            v.vector3(
                self.rigid_box_dimensions,
                "rigid box dimensions",
                positive=True,
                extent=v.ATTACHED_EXTENT_M,
            ),
        )
        if self.compliant_box is not None:
            attached_box(self.compliant_box, "compliant_box")

    def boxes_in_flange(self) -> list[TransformedBox]:
        """The rigid box and (if any) the compliant box, in the flange frame."""
        boxes = [TransformedBox(self.transform, self.rigid_box_dimensions)]
        if self.compliant_box is not None:
            boxes.append(self.compliant_box.transformed(self.transform))
        return boxes


@dataclass(frozen=True, eq=False)
class ReplaceableTool:
    """A tool mounted on the flange, made of box elements (flange frame)."""

    elements: tuple[ToolBoxElement, ...]

    @classmethod
    def from_box_elements(cls, tool_elements: list[ToolBoxElement]) -> ReplaceableTool:
        elements = tuple(tool_elements)
        if not elements:
            raise PlanningInputError("tool elements: expected at least one ToolBoxElement")
        for e in elements:
            if not isinstance(e, ToolBoxElement):
                raise PlanningInputError(
                    f"tool elements: expected ToolBoxElement items, got {type(e).__name__}"
                )
        return cls(elements)

    def boxes_in_flange(self) -> list[TransformedBox]:
        return [b for e in self.elements for b in e.boxes_in_flange()]

    def __repr__(self) -> str:
        return f"ReplaceableTool({len(self.elements)} box elements)"
