"""Collision-aware motion planning (after the Zivid Motion planner API: ``docs/reference/planner.md``).

    planner = Planner(PlannerSettings(seed=0))
    planner.set_obstacles(obstacles_from_scene("table"))
    result = planner.path(InitialState(q_start), PathRequest([q_goal_a, q_goal_b]))
    if result:
        waypoints = result.path()

Poses are 4x4 matrices in the cell base frame; metres and radians. See ``planner`` for the
conservative collision model and its margins.

API log: wrap a planner to record every call, then export and replay it::

    recording = RecordingPlanner(Planner(PlannerSettings(seed=0)))
    recording.path(...)                      # same API as the planner, recorded
    log_path = recording.export_api_log()    # JSON; package_api_log(log_path) bundles it
    report = replay(log_path)                # truthy when every result is the same

Cells: ``generate``, ``package_cell``, ``install_package``, ``load_cell``. Execution on any
``Robot``: ``prepare``, ``follow``, ``execute``.

Layout, by job (every public name is importable from ``twin.planning`` itself):

- this package: the API (``planner``: ``Planner``; its value types ``types``, ``requests``,
  ``settings``, ``errors``; cells ``cells``; the API log ``api_log`` and ``replay``);
- ``collision/``: the conservative collision model (sphere covers, self-collision matrix,
  distance field, batched kernel, checker; obstacles from scene files);
- ``search/``: RRT-Connect, several goals, shortcutting;
- ``motion/``: linear and touch motions, blend radii, time parameterisation, execution.

Dependencies point down: the API uses motions and search, which use the collision model; the
value types are below all of them.
"""

from twin.planning.api_log import RecordingPlanner, package_api_log
from twin.planning.cells import generate, install_package, load_cell, package_cell
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.errors import PathResultError, PlanningInputError
from twin.planning.motion.execute import execute, follow, prepare
from twin.planning.planner import Planner
from twin.planning.replay import replay
from twin.planning.requests import (
    BlendRadius,
    GoalPrioritization,
    InitialState,
    Movement,
    PathError,
    PathRequest,
    PathResult,
    PathType,
    Profile,
    Waypoint,
)
from twin.planning.settings import PlannerSettings
from twin.planning.types import (
    CarriedObject,
    Obstacle,
    ObstacleKind,
    ReplaceableTool,
    Tcp,
    ToolBoxElement,
    TransformedBox,
)

__all__ = [
    "BlendRadius",
    "CarriedObject",
    "GoalPrioritization",
    "InitialState",
    "Movement",
    "Obstacle",
    "ObstacleKind",
    "PathError",
    "PathRequest",
    "PathResult",
    "PathResultError",
    "PathType",
    "Planner",
    "PlannerSettings",
    "PlanningInputError",
    "Profile",
    "RecordingPlanner",
    "ReplaceableTool",
    "Tcp",
    "ToolBoxElement",
    "TransformedBox",
    "Waypoint",
    "execute",
    "follow",
    "generate",
    "install_package",
    "load_cell",
    "obstacles_from_scene",
    "package_api_log",
    "package_cell",
    "prepare",
    "replay",
]
