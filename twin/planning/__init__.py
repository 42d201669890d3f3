"""Collision-aware motion planning (after the reference's ``Zivid::Motion`` planner API).

    planner = Planner(PlannerSettings(seed=0))
    planner.set_obstacles(obstacles_from_scene("table"))
    result = planner.path(InitialState(q_start), PathRequest([q_goal_a, q_goal_b]))
    if result:
        waypoints = result.path()

Poses are 4x4 matrices in the cell base frame; metres and radians. See ``planner`` for the
conservative collision model and its margins.
"""

from twin.planning.errors import PathResultError, PlanningInputError
from twin.planning.planner import Planner
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
from twin.planning.scene_obstacles import obstacles_from_scene
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
    "ReplaceableTool",
    "Tcp",
    "ToolBoxElement",
    "TransformedBox",
    "Waypoint",
    "obstacles_from_scene",
]
