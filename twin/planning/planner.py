"""``Planner``: the planner API (after Zivid Motion's ``Planner``, ``docs/reference/planner.md``), first part.

Poses are 4x4 matrices in the cell base frame (the arm's base frame), metres and radians.
Input errors raise ``PlanningInputError``; planning failures are ``PathResult`` errors.

Joint limits: everything is planned within the soft limits of the safety layer
(``twin.safety.limits_for``: the URDF limits moved ``SOFT_MARGIN_RAD`` inwards), which clamps any
command beyond them on execution; a path planned to the URDF limits would not be followed. So
goals (and IK solutions) beyond the soft limits are refused (``kinematic_violation``, with the
joint named in ``PathResult.reason``). A start between the soft and the URDF limits (where the
robot may stand, e.g. moved by hand) is accepted: the path's first way-point is the start
clamped into the soft limits (a move of at most the margin), checked free; a start beyond the
URDF limits, or whose move into the soft limits collides, is ``blocked_start`` with the reason.

Conservative model (``checker``, ``margins()``): a configuration that collides is never reported
free. One whose true geometry keeps more than ``margins()["obstacle_*"]`` from every obstacle and
more than ``margins()["self_collision"]`` between checked link pairs is always reported free; in
between it may be reported blocked (the sphere covers' slack, the motion margin and the distance
field's resolution add up to these figures).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import time

import numpy as np

from twin import events, safety
from twin.planning import _validate as v
from twin.planning import cells
from twin.planning.collision import geometry
from twin.planning.collision import spheres as sph
from twin.planning.collision.checker import CollisionChecker
from twin.planning.collision.field import _SQRT3_2, DistanceField
from twin.planning.collision.robot_model import (
    ATTACHMENTS_BODY,
    CARRIED_BODY,
    TOOL_BODY,
    RobotSpheres,
)
from twin.planning.errors import PlanningInputError
from twin.planning.motion import blend, touch
from twin.planning.requests import (
    InitialState,
    Movement,
    PathError,
    PathRequest,
    PathResult,
    PathType,
    Waypoint,
)
from twin.planning.search.budget import Deadline
from twin.planning.search.goals import SearchParameters, plan_to_goals
from twin.planning.search.roadmap import Roadmap, RoadmapBuild, graph_library
from twin.planning.settings import PlannerSettings
from twin.planning.types import (
    CarriedObject,
    Obstacle,
    ObstacleKind,
    ReplaceableTool,
    Tcp,
    TransformedBox,
)

#: Cell size (m) of the sphere cover of carried meshes.
CARRIED_MESH_CELL = 0.02
#: Execution limits of a cell that gives none (``Planner.limits``).
DEFAULT_LIMITS = {
    "touch_approach_distance_m": touch.APPROACH_DISTANCE,
    "touch_retract_distance_m": touch.RETRACT_DISTANCE,
    "velocity_scale": 1.0,
    "acceleration_time_s": 0.25,
}
#: How much beyond the obstacle margin a touch approach may be lengthened to clear its target.
TOUCH_CLEARANCE = 0.01
#: Radius (m) around a touch's approach line inside which obstacle geometry counts as the
#: touch target's own (``Planner._field_without_target``).
TARGET_RADIUS = 0.06
#: Second seed word of the roadmap's generator (apart from every query's).
ROADMAP_STREAM = 0x524F4144


class Planner:
    """Collision-aware joint-space planner for the arm of ``settings.cell_name``.

    ``model``: an ``ArmModel`` to plan for another arm than the shipped one.
    """

    def __init__(self, settings: PlannerSettings | None = None, *, model=None) -> None:
        self.settings = settings or PlannerSettings()
        if model is None:
            if self.settings.cell_name != "twin_arm":
                raise PlanningInputError(
                    f"unknown cell {self.settings.cell_name!r}; expected 'twin_arm' "
                    "or an explicit model="
                )
            from twin.kinematics import ArmModel

            model = ArmModel.default()
        self.model = model
        s = self.settings
        self._robot = RobotSpheres(model, s.max_sphere_radius, s.max_sphere_slack)
        home = np.asarray(model.home_q, dtype=float)
        self._flange_T_urdf_tcp = np.linalg.solve(model.fk(home, "flange"), model.fk(home, "tcp"))
        self._default_tcp = Tcp(self._flange_T_urdf_tcp)
        self._tcp = self._default_tcp
        self._anchor_T_flange = self._robot.anchor_T("flange")
        self._field = self._make_field()
        soft = safety.limits_for(model)
        #: The soft joint limits (n,) rad every path keeps to (module doc).
        self.lower, self.upper = soft.lower, soft.upper
        self._checker = CollisionChecker(
            self._robot, self._field, s.motion_margin, soft.lower, soft.upper
        )
        self._urdf_checker: CollisionChecker | None = None  # the URDF limits: a start's entry
        self._obstacles: dict[str, Obstacle] = {}
        self._patches: dict = {}
        self._carried: CarriedObject | None = None
        self._tool: ReplaceableTool | None = None
        self._attachments: tuple[str, ...] = ()
        # the roadmap over the current obstacles and robot model, built in steps (``_advance``)
        self._build: RoadmapBuild | None = None
        if s.roadmap_nodes:
            graph_library()  # loaded now, not inside a query's time
        self._pinned_steps: int | None = None  # a replay's build progress (``pin_roadmap_steps``)
        try:
            self._cell: cells.Cell | None = cells.load_cell(s.cell_name)
        except cells.CellError:
            if model is None:
                raise
            self._cell = None  # an explicit model without a cell: no attachments

    def _make_field(self) -> DistanceField:
        s = self.settings
        reach = self._robot.reach() + s.motion_margin + s.workspace_padding
        home = np.asarray(self.model.home_q, dtype=float)
        o1 = self.model.fk(home, self._robot.anchors[1])[:3, 3]
        band = s.max_sphere_radius + s.motion_margin + 2.0 * _SQRT3_2 * s.grid_resolution
        return DistanceField(o1 - reach, o1 + reach, s.grid_resolution, band)

    # --------------------------------------------------------------------------- inputs
    @property
    def dof(self) -> int:
        return len(self.model.joint_names)

    def _configuration(self, q: object, what: str) -> np.ndarray:
        return v.configuration(q, what, self.dof)

    # ------------------------------------------------------------------------ kinematics
    def compute_inverse_kinematics(
        self, pose: object, reference_configuration: object
    ) -> np.ndarray | None:
        """Configuration (n,) rad putting the current TCP at ``pose`` (4x4, base frame) with the
        posture of ``reference_configuration`` (n,) rad; None when there is no such solution."""
        base_T_tcp = v.pose(pose, "pose")
        ref = self._configuration(reference_configuration, "reference_configuration")
        flange_T_tcp = self._tcp.transform
        base_T_urdf_tcp = base_T_tcp @ np.linalg.solve(flange_T_tcp, self._flange_T_urdf_tcp)
        q = self.model.ik(base_T_urdf_tcp, ref)
        if q is None:
            return None
        q = np.asarray(q, dtype=float)
        # within the soft limits only (module doc); a joint beyond may have a wrap inside
        for j in np.flatnonzero((q < self.lower) | (q > self.upper)):
            for wrap in (q[j] - 2.0 * math.pi, q[j] + 2.0 * math.pi):
                if self.lower[j] <= wrap <= self.upper[j]:
                    q[j] = wrap
                    break
            else:
                return None
        return q

    def tcp_pose(self, configuration: object) -> np.ndarray:
        """Pose (4x4, base frame) of the current TCP at a configuration (n,) rad."""
        q = self._configuration(configuration, "configuration")
        return self.model.fk(q, "flange") @ self._tcp.transform

    # ------------------------------------------------------------------------ obstacles
    def set_obstacles(self, obstacles: list[Obstacle]) -> None:
        """Add obstacles (cell base frame); an obstacle replaces the one of the same name.
        One call for many obstacles rebuilds the distance field once."""
        obstacles = list(obstacles)
        names = set()
        for o in obstacles:
            if not isinstance(o, Obstacle):
                raise PlanningInputError(
                    f"obstacles: expected Obstacle items, got {type(o).__name__}"
                )
            if o.name in names:
                raise PlanningInputError(
                    f"obstacles: the name {o.name!r} appears twice in one call"
                )
            names.add(o.name)
        for o in obstacles:
            self._obstacles[o.name] = o
            self._patches[o.name] = self._field.patch(o)
        self._rebuild_field()

    def clear_obstacles(self) -> None:
        """Remove every obstacle."""
        self._obstacles.clear()
        self._patches.clear()
        self._rebuild_field()

    def obstacles(self) -> list[Obstacle]:
        """The current obstacles, in the order they were first set."""
        return list(self._obstacles.values())

    def _rebuild_field(self) -> None:
        self._field.rebuild([p for p in self._patches.values() if p is not None])
        self._build = None
        self._urdf_checker = None

    def _refresh_robot(self) -> None:
        """After the robot's collision model changed (tool, carried object, attachments)."""
        self._checker.refresh()
        self._build = None
        self._urdf_checker = None

    def _beyond(self, q: np.ndarray, lower: np.ndarray, upper: np.ndarray, what: str) -> str:
        """Words naming the first joint of ``q`` (n,) rad outside ``lower``/``upper`` (n,) rad
        (``what`` names the limits), or "" when every joint is inside."""
        for name, x, lo, hi in zip(self.model.joint_names, q.tolist(), lower, upper):
            if not lo <= x <= hi:
                return (
                    f"joint {name!r} at {x:.4f} rad is outside its {what} [{lo:.4f}, {hi:.4f}] rad"
                )
        return ""

    def _entry(self, start: np.ndarray) -> tuple[np.ndarray | None, str]:
        """(The start clamped into the soft limits, or None, and the reason) for a start (n,)
        rad outside them (module doc): None when it is beyond the URDF limits or the move from
        it into the soft limits is not free (checked with the URDF limits)."""
        urdf = self._beyond(start, self.model.lower, self.model.upper, "URDF limits")
        if urdf:
            return None, f"start: {urdf}"
        entry = np.clip(start, self.lower, self.upper)
        if self._urdf_checker is None:
            s = self.settings
            self._urdf_checker = CollisionChecker(
                self._robot, self._field, s.motion_margin, self.model.lower, self.model.upper
            )
        if not self._urdf_checker.segment_free(start, entry):
            soft = self._beyond(start, self.lower, self.upper, "soft limits")
            return None, f"start: {soft}, and the move into them collides"
        return entry, ""

    def prepare_roadmap(self, time_limit_s: float | None = None) -> Roadmap | None:
        """Build the roadmap over the current obstacles and collision model (``search.roadmap``)
        ahead of the queries: to completion (``time_limit_s`` None), or for about that many
        seconds (it resumes where it stopped, here or in the next query that needs it). The
        roadmap once built, None while its build is not done or when ``settings.roadmap_nodes``
        is 0. The same planner state builds the same roadmap, however its build was spread."""
        if time_limit_s is not None:
            time_limit_s = v.positive_scalar(time_limit_s, "time_limit_s")
        until = None if time_limit_s is None else Deadline(time_limit_s)
        return self._advance_roadmap(until)

    def roadmap_progress(self) -> tuple[int, bool]:
        """(Steps of the roadmap build done, whether it is done) for the current obstacles and
        collision model: (0, False) before any step and when there is no roadmap."""
        b = self._build
        return (0, False) if b is None else (b.steps, b.done)

    def pin_roadmap_steps(self, steps: int | None) -> None:
        """For a replay (``replay``): the next call that advances the roadmap build takes it to
        exactly ``steps`` steps (fewer if it is done sooner), whatever the clock; None: unpin.
        Cleared after that call."""
        self._pinned_steps = None if steps is None else int(steps)

    def _advance_roadmap(self, until: Deadline | None) -> Roadmap | None:
        """Advance the roadmap build until ``until`` (``search.budget``; None: to the end) or
        to the pinned steps of a replay; the roadmap when done, else None."""
        n = self.settings.roadmap_nodes
        if not n:
            return None
        if self._build is None:
            rng = np.random.default_rng([self.settings.seed, ROADMAP_STREAM])
            self._build = RoadmapBuild(self._checker, rng, n, step=self.settings.rrt_step)
        pinned, self._pinned_steps = self._pinned_steps, None
        try:
            if pinned is not None:
                return self._build.advance(steps=pinned)
            return self._build.advance(until)
        except BaseException:
            # a step that raised (Ctrl-C in a query, a checker's error) leaves a build that
            # cannot resume: the next call starts again, from the same seed (the same roadmap)
            self._build = None
            raise

    def clip_point_cloud_with_box(self, box: TransformedBox) -> int:
        """Remove the points inside ``box`` (base frame) from every point-cloud obstacle.
        Returns the number of points removed."""
        if not isinstance(box, TransformedBox):
            raise PlanningInputError(f"box: expected a TransformedBox, got {type(box).__name__}")
        return self._clip(
            lambda p: geometry.points_inside_box(box.bottom_centered_transform, box.dimensions, p)
        )

    def clip_point_cloud_with_mesh(self, transform: object, mesh: object) -> int:
        """Remove the points inside a closed mesh (triangles (T, 3, 3) m in the frame
        ``transform`` 4x4 base_T_mesh) from every point-cloud obstacle; returns the count."""
        pose = v.pose(transform, "mesh transform")
        tris = v.triangles(mesh, "mesh")
        if not geometry.is_closed_mesh(tris):
            raise PlanningInputError(
                "mesh: the triangles do not form a closed mesh (every edge must be shared by "
                "exactly two triangles); clipping needs an inside"
            )
        world = tris @ pose[:3, :3].T + pose[:3, 3]
        return self._clip(lambda p: geometry.points_inside_closed_mesh(world, p))

    def _clip(self, inside) -> int:
        removed = 0
        for name, o in list(self._obstacles.items()):
            if o.kind is not ObstacleKind.POINT_CLOUD or not len(o.points):
                continue
            mask = inside(o.points)
            if not np.any(mask):
                continue
            removed += int(mask.sum())
            clipped = _without(o, mask)
            self._obstacles[name] = clipped
            self._patches[name] = self._field.patch(clipped)
        if removed:
            self._rebuild_field()
        return removed

    # -------------------------------------------------------------------- tool and TCP
    def set_tcp(self, tcp: Tcp) -> None:
        """Set the tool centre point (``Tcp.transform`` relative to the flange frame)."""
        if not isinstance(tcp, Tcp):
            raise PlanningInputError(f"tcp: expected a Tcp, got {type(tcp).__name__}")
        self._tcp = tcp

    def get_tcp(self) -> Tcp:
        return self._tcp

    def set_carried_object(self, carried_object: CarriedObject) -> None:
        """Attach an object given in the current TCP frame to the robot's collision model."""
        if not isinstance(carried_object, CarriedObject):
            raise PlanningInputError(
                f"carried_object: expected a CarriedObject, got {type(carried_object).__name__}"
            )
        anchor_T_tcp = self._anchor_T_flange @ self._tcp.transform
        if carried_object.box is not None:
            b = carried_object.box
            spheres = self._cover_box(anchor_T_tcp @ b.bottom_centered_transform, b.dimensions)
        else:
            tris = carried_object.triangles_in_tcp()
            tris = tris @ anchor_T_tcp[:3, :3].T + anchor_T_tcp[:3, 3]
            spheres = sph.cover_mesh(tris, min(CARRIED_MESH_CELL, self.settings.max_sphere_radius))
        self._carried = carried_object
        self._robot.set_attached(CARRIED_BODY, spheres)
        self._refresh_robot()

    def clear_carried_object(self) -> None:
        self._carried = None
        self._robot.set_attached(CARRIED_BODY, None)
        self._refresh_robot()

    def set_replaceable_tool(self, replaceable_tool: ReplaceableTool) -> None:
        """Mount a tool of box elements (flange frame); compliant boxes count as rigid here."""
        if not isinstance(replaceable_tool, ReplaceableTool):
            raise PlanningInputError(
                f"replaceable_tool: expected a ReplaceableTool, got {type(replaceable_tool).__name__}"
            )
        covers = [
            self._cover_box(self._anchor_T_flange @ b.bottom_centered_transform, b.dimensions)
            for b in replaceable_tool.boxes_in_flange()
        ]
        self._tool = replaceable_tool
        self._robot.set_attached(TOOL_BODY, sph.SphereSet.concatenate(covers))
        self._refresh_robot()

    def clear_replaceable_tool(self) -> None:
        self._tool = None
        self._robot.set_attached(TOOL_BODY, None)
        self._refresh_robot()

    def set_attachments(self, names: list[str]) -> None:
        """Mount the named attachments of the cell configuration (``cells.load_cell``) on the
        flange, replacing the previous ones; an empty list removes them. Compliant boxes count
        as rigid (also during touch motions). Names not defined in the cell raise
        ``PlanningInputError``."""
        if self._cell is None:
            raise PlanningInputError(
                f"set_attachments: cell {self.settings.cell_name!r} has no configuration; "
                "expected a planner of a cell with attachments"
            )
        elements = self._cell.attachment_elements(names)
        covers = [
            self._cover_box(self._anchor_T_flange @ box.bottom_centered_transform, box.dimensions)
            for e in elements
            for box in e.boxes_in_flange()
        ]
        spheres = sph.SphereSet.concatenate(covers) if covers else None
        self._robot.set_attached(ATTACHMENTS_BODY, spheres)
        self._attachments = tuple(dict.fromkeys(names))
        self._refresh_robot()

    def attachments(self) -> list[str]:
        """The names of the mounted attachments."""
        return list(self._attachments)

    def _cover_box(self, anchor_T_box: np.ndarray, dims: np.ndarray) -> sph.SphereSet:
        s = self.settings
        return sph.cover_bottom_box(anchor_T_box, dims, s.max_sphere_radius, s.max_sphere_slack)

    def limits(self) -> dict[str, float]:
        """The cell's execution limits (``cell.json`` ``limits``; defaults where the cell gives
        none or there is no cell): ``touch_approach_distance_m`` and ``touch_retract_distance_m``
        (m, read by touch requests), ``velocity_scale`` and ``acceleration_time_s`` (s; for
        ``motion.execute.cell_timing``)."""
        given = {} if self._cell is None else self._cell.limits
        out = dict(DEFAULT_LIMITS)
        for key in out:
            if key in given:
                out[key] = v.positive_scalar(given[key], f"cell limit {key}")
        return out

    def _field_without_target(self, q_touch: np.ndarray, distance: float) -> DistanceField:
        """A distance field of the obstacles without the touch target's own geometry: the
        point-cloud points and mesh triangles (by centroid) within ``TARGET_RADIUS`` m of the
        approach line (``distance`` m back from the TCP at ``q_touch`` against the tool
        direction, base frame). A touch's approach line is checked against it, so the object
        touched cannot refuse its own approach; the pre-touch configuration stays checked
        against every obstacle. The field itself when nothing is removed."""
        tcp = self.tcp_pose(q_touch)
        u = tcp[:3, :3] @ (self._tcp.tool_direction / np.linalg.norm(self._tcp.tool_direction))
        a, b = tcp[:3, 3], tcp[:3, 3] - distance * u

        def near(p: np.ndarray) -> np.ndarray:
            t = np.clip((p - a) @ (b - a) / max(float((b - a) @ (b - a)), 1e-12), 0.0, 1.0)
            return np.linalg.norm(p - (a + t[:, None] * (b - a)), axis=1) < TARGET_RADIUS

        patches, changed = [], False
        for name, o in self._obstacles.items():
            patch = self._patches[name]
            if o.kind is ObstacleKind.POINT_CLOUD and len(o.points):
                mask = near(o.points)
            elif o.kind is ObstacleKind.MESH and o.triangles is not None and len(o.triangles):
                mask = near(o.triangles.mean(axis=1))
            else:
                mask = None
            if mask is not None and mask.any():
                changed = True
                patch = self._field.patch(_without(o, mask))
            if patch is not None:
                patches.append(patch)
        if not changed:
            return self._field
        field = self._make_field()
        field.rebuild(patches)
        return field

    def _limit(self, key: str, default: float) -> float:
        return float(self.limits().get(key, default))

    # ------------------------------------------------------------------------ checking
    @property
    def checker(self) -> CollisionChecker:
        """The batched collision checker (configurations (N, n) rad -> free (N,))."""
        return self._checker

    def configurations_free(self, configurations: object) -> np.ndarray:
        """True (N,) where configurations (N, n) rad are inside the limits and collision-free."""
        q = np.atleast_2d(np.asarray(configurations, dtype=float))
        if q.ndim != 2 or q.shape[1] != self.dof or not np.all(np.isfinite(q)):
            raise PlanningInputError(
                f"configurations: expected finite values of shape (N, {self.dof}), got {q.shape}"
            )
        return self._checker.free(q)

    def margins(self) -> dict[str, float]:
        """Distances (m) within which a free configuration may be reported blocked: from
        primitives, point clouds and meshes, and between self-collision pairs; with their parts
        (the largest sphere-cover slack, the motion margin, the field's lookup slack)."""
        h = self.settings.grid_resolution
        m = self.settings.motion_margin
        bodies = self._robot.bodies()
        slack = float(max(b.spheres.slack for b in bodies if b.group > 0))  # moving bodies
        self_slack = float(max(b.spheres.slack for b in bodies))
        lookup = float(_SQRT3_2 * h)
        return {
            "obstacle_primitive": slack + m + lookup,
            "obstacle_point_cloud": slack + m + 2 * lookup,
            "obstacle_mesh": slack + m + 2 * lookup + 0.5 * h,
            "self_collision": 2 * self_slack + m,
            "sphere_slack": slack,
            "motion_margin": m,
            "field_lookup": lookup,
        }

    # --------------------------------------------------------------------------- paths
    def path(self, initial_state: InitialState, request: PathRequest) -> PathResult:
        """Plan from ``initial_state`` to one of ``request.goal_configurations``."""
        result = self._path(initial_state, request)
        if events.listening():  # for a recording: the request and what came of it
            events.publish(
                "planner",
                "path",
                start=initial_state.configuration,
                goals=list(request.goal_configurations),
                type=request.type.value,
                error=None if result.error is None else result.error.value,
                selected_goal=result.selected_goal_idx,
                waypoints=[w.configuration for w in result.waypoints],
                stats=result.stats,
            )
        return result

    def _path(self, initial_state: InitialState, request: PathRequest) -> PathResult:
        if not isinstance(initial_state, InitialState):
            raise PlanningInputError(
                f"initial_state: expected an InitialState, got {type(initial_state).__name__}"
            )
        if not isinstance(request, PathRequest):
            raise PlanningInputError(
                f"request: expected a PathRequest, got {type(request).__name__}"
            )
        start = self._configuration(initial_state.configuration, "start configuration")
        goals = np.array(
            [
                self._configuration(g, f"goal configuration {i}")
                for i, g in enumerate(request.goal_configurations)
            ]
        )
        is_touch = request.type is PathType.TOUCH
        limit, checks = self.settings.query_budget(request.max_planning_time_s)
        if checks is not None:
            deadline: Deadline | None = Deadline.checks(self._checker, checks)
        else:
            deadline = None if limit is None else Deadline(limit)
        t0 = time.perf_counter()
        checks0 = self._checker.checked
        stats: dict[str, float] = {}

        def failed(error: PathError, reason: str = "") -> PathResult:
            stats["time_s"] = time.perf_counter() - t0
            stats["checks"] = float(self._checker.checked - checks0)
            return PathResult(error, None, self._tcp, (), stats, reason=reason)

        compliant = None
        c = request.max_carried_object_compression_distance
        if initial_state.touch:
            compliant = touch.touch_checker(self, c)
        touch_kw = {
            "tool_direction": self._tcp.tool_direction,
            "flange_T_tcp": self._tcp.transform,
        }
        prefix: list[Waypoint] = []
        plan_start = start
        beyond = self._beyond(start, self.lower, self.upper, "soft limits")
        if beyond and initial_state.touch:  # a retract is linear: no joint move before it
            return failed(PathError.BLOCKED_START, f"touch start: {beyond}")
        if beyond:
            entry, why = self._entry(start)
            if entry is None:
                return failed(PathError.BLOCKED_START, why)
            plan_start = entry
            prefix.append(Waypoint(entry, Movement.JOINT))
        if initial_state.touch:
            r = touch.retract(
                self.model,
                start,
                self._checker,
                compliant,
                direction=request.retract_direction,
                distance=self._limit("touch_retract_distance_m", touch.RETRACT_DISTANCE),
                **touch_kw,
            )
            if not r:
                return failed(PathError.BLOCKED_START)
            plan_start = r.configurations[-1]
            prefix.append(Waypoint(plan_start, Movement.LINEAR))
        goal_ids = list(range(len(goals)))
        targets = goals
        if is_touch:
            lower, upper = self._checker.lower, self._checker.upper
            if not np.any(np.all((goals >= lower) & (goals <= upper), axis=1)):
                return failed(PathError.KINEMATIC_VIOLATION, self._goals_beyond(goals))
            d = self._limit("touch_approach_distance_m", touch.APPROACH_DISTANCE)
            m = self.margins()
            longest = d + max(m["obstacle_point_cloud"], m["obstacle_mesh"]) + TOUCH_CLEARANCE
            approaches = [
                touch.clearing_approach(
                    self.model,
                    g,
                    self._checker,
                    touch.touch_checker(self, c, self._field_without_target(g, longest)),
                    distance=d,
                    longest=longest,
                    **touch_kw,
                )
                for g in goals
            ]
            goal_ids = [i for i, a in enumerate(approaches) if a]
            if not goal_ids:
                return failed(PathError.BLOCKED_END)
            targets = np.array([approaches[i].configurations[0] for i in goal_ids])
            stats["approach_distance_m"] = max(approaches[i].distance for i in goal_ids)
        rng = functools.partial(self._query_rng, plan_start, targets, request)
        s = self.settings

        def roadmap() -> Roadmap | None:
            """The roadmap for this query, looked up once: its build (if not done) gets at most
            half of the budget left (``search.roadmap``, "Build in steps"); None while it is not
            done, and the query plans with RRT-Connect alone (``roadmap_deferred``).
            ``roadmap_steps``: the build's steps done after it (a replay pins them)."""
            if consulted:
                return consulted[0]
            b = self._build
            steps0, spent0 = (0, 0.0) if b is None else (b.steps, b.spent_s)
            until = None if deadline is None else deadline.share(0.5)
            consulted.append(self._advance_roadmap(until))
            b = self._build
            if b is not None:
                stats["roadmap_steps"] = float(b.steps)
                if b.steps > steps0:
                    stats["roadmap_build_s"] = b.spent_s - spent0
                if not b.done:
                    stats["roadmap_deferred"] = 1.0
            return consulted[0]

        consulted: list[Roadmap | None] = []
        params = SearchParameters(
            s.rrt_step, s.max_iterations, s.shortcut_rounds, deadline, roadmap
        )
        outcome = plan_to_goals(
            self._checker, plan_start, targets, request.goal_prioritization, rng, params
        )
        stats["iterations"] = float(outcome.iterations)
        stats["roadmap_paths"] = float(outcome.roadmap_paths)
        if outcome.deadline_hit:
            stats["deadline_hit"] = 1.0
            if checks is not None:
                stats["check_budget"] = float(checks)
            else:
                stats["time_limit_s"] = float(limit)  # type: ignore[arg-type]
        if outcome.error is PathError.KINEMATIC_VIOLATION:
            return failed(outcome.error, self._goals_beyond(targets))
        if outcome.error is PathError.BLOCKED_START and beyond:
            return failed(outcome.error, "the start moved into the soft limits is blocked")
        if outcome.error is not None:
            return failed(outcome.error)
        goal_index = goal_ids[outcome.goal_index]  # type: ignore[index]
        waypoints = prefix + [Waypoint(q, Movement.JOINT) for q in outcome.path[1:]]  # type: ignore[index]
        if is_touch:
            waypoints.append(Waypoint(goals[goal_index], Movement.LINEAR))
        if s.compute_blend_radii and len(waypoints) > 1:  # the last way-point gets zero
            waypoints = blend.blend_radii(
                start, waypoints, self._checker, self.model, self._tcp.transform
            )
        points = [start.tolist()] + [w.configuration.tolist() for w in waypoints]
        stats["time_s"] = time.perf_counter() - t0
        stats["checks"] = float(self._checker.checked - checks0)
        stats["path_length"] = sum(math.dist(a, b) for a, b in itertools.pairwise(points))
        return PathResult(None, goal_index, self._tcp, tuple(waypoints), stats, is_touch)

    def _goals_beyond(self, goals: np.ndarray) -> str:
        """Words naming, for each goal (G, n) rad, the first joint beyond the soft limits."""
        words = [self._beyond(g, self.lower, self.upper, "soft limits") for g in goals]
        return "; ".join(f"goal {i}: {w}" for i, w in enumerate(words) if w)

    def _query_rng(
        self, start: np.ndarray, goals: np.ndarray, request: PathRequest
    ) -> np.random.Generator:
        digest = hashlib.blake2b(digest_size=16)
        digest.update(start.tobytes())
        digest.update(goals.tobytes())
        digest.update(request.goal_prioritization.value.encode())
        words = np.frombuffer(digest.digest(), dtype=np.uint32)
        return np.random.default_rng([self.settings.seed, *words.tolist()])

    def __repr__(self) -> str:
        c = self._robot.compiled()
        names = ", ".join(self._obstacles) or "none"
        return (
            f"Planner(cell={self.settings.cell_name!r}, arm={self.model.urdf_path.name!r}, "
            f"obstacles=[{names}], tcp={self._tcp!r}, "
            f"carried_object={self._carried!r}, replaceable_tool={self._tool!r}, "
            f"attachments={list(self._attachments)}, "
            f"spheres={len(c.radii)}, self_pairs={len(c.pair_a)}, "
            f"margin={self.settings.motion_margin} m, seed={self.settings.seed})"
        )


def _without(o: Obstacle, drop: np.ndarray) -> Obstacle:
    """A point-cloud or mesh obstacle without the points or triangles where ``drop`` (N,)."""
    keep = ~drop
    if o.kind is ObstacleKind.POINT_CLOUD:
        colors = None if o.colors is None else v.frozen(o.colors[keep])
        return Obstacle(
            o.name,
            o.kind,
            points=v.frozen(o.points[keep]),
            colors=colors,
            point_radius=o.point_radius,
        )
    return Obstacle(o.name, o.kind, v.frozen(o.triangles[keep]), colors=o.colors)
