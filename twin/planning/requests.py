"""Request and result types of ``Planner.path``: initial state, request, way-points, result.

Configurations are joint angles (rad) in the order of the arm model's joints. Enumerations
accept their string values too (``PathRequest(goal_prioritization="list_order")``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.planning import _validate as v
from twin.planning.errors import PathResultError, PlanningInputError
from twin.planning.types import Tcp


class PathType(enum.Enum):
    """Motion type: ``free`` (free space) or ``touch`` (ends with a linear approach along the
    TCP's tool direction; contact allowed for compliant boxes and the carried object)."""

    FREE = "free"
    TOUCH = "touch"


class GoalPrioritization(enum.Enum):
    """Which reachable goal is selected: the first in the list, or the shortest path."""

    LIST_ORDER = "list_order"
    SHORTEST_PATH = "shortest_path"


class Movement(enum.Enum):
    """How the robot moves to a way-point: straight in joint space or in Cartesian space."""

    JOINT = "joint"
    LINEAR = "linear"


class PathError(enum.Enum):
    """Why no path was found (``PathResult::Error`` in ``docs/reference/planner.md``)."""

    BLOCKED_START = "blocked_start"  # the start configuration is blocked (or outside the limits)
    BLOCKED_END = "blocked_end"  # every goal inside the joint limits is blocked
    BLOCKED_PATH = "blocked_path"  # start and a goal free, but no collision-free path found
    KINEMATIC_VIOLATION = "kinematic_violation"  # every goal is outside the joint limits


class Profile(enum.Enum):
    """Cell profile (the next issue uses it for generated cell data)."""

    TESTING = "testing"
    PRODUCTION = "production"


def _enum(cls: type[enum.Enum], value: object, what: str) -> Any:
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError as e:
        allowed = ", ".join(repr(m.value) for m in cls)
        raise PlanningInputError(f"{what}: expected one of {allowed}, got {value!r}") from e


def time_limit(value: object, what: str) -> float:
    """A time limit (s): a finite number > 0, else ``PlanningInputError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise PlanningInputError(f"{what}: expected a number of seconds, got {value!r}")
    if not (np.isfinite(value) and value > 0.0):
        raise PlanningInputError(f"{what}: expected a finite value > 0 s, got {value}")
    return float(value)


@dataclass(frozen=True)
class BlendRadius:
    """Blend radius at a way-point: ``entry`` and ``exit`` (m for linear segments, joint-space
    L2 norm in rad for joint segments); zero means no blending."""

    entry: float = 0.0
    exit: float = 0.0


@dataclass(frozen=True, eq=False)
class Waypoint:
    """A way-point of a path: ``configuration`` (6,) rad, ``movement`` and ``blend_radius``."""

    configuration: np.ndarray
    movement: Movement = Movement.JOINT
    blend_radius: BlendRadius = field(default_factory=BlendRadius)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "configuration", v.configuration(self.configuration, "way-point configuration")
        )
        object.__setattr__(self, "movement", _enum(Movement, self.movement, "movement"))

    def __repr__(self) -> str:
        q = np.round(self.configuration, 4).tolist()
        return f"Waypoint({q}, {self.movement.value})"


@dataclass(frozen=True, eq=False)
class PathRequest:
    """A path request: ``goal_configurations`` (list of (6,) rad, at least one), the motion
    ``type``, the ``goal_prioritization`` (default shortest path, as in the reference), an
    optional ``description``, ``retract_direction`` (3,) cell base frame (the direction of the
    retract when the path starts from a touch; None: derived from the geometry around the tool)
    and ``max_carried_object_compression_distance`` m (how far the carried object may be
    compressed during touch approaches and retracts; None: 0); ``max_planning_time_s`` s, the
    time limit of this query (None: the planner's ``PlannerSettings.max_planning_time_s``)."""

    goal_configurations: tuple[np.ndarray, ...]
    type: PathType = PathType.FREE
    goal_prioritization: GoalPrioritization = GoalPrioritization.SHORTEST_PATH
    description: str | None = None
    retract_direction: np.ndarray | None = None
    max_carried_object_compression_distance: float | None = None
    max_planning_time_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_planning_time_s is not None:
            t = time_limit(self.max_planning_time_s, "max_planning_time_s")
            object.__setattr__(self, "max_planning_time_s", t)
        goals = self.goal_configurations
        if isinstance(goals, np.ndarray) and goals.ndim == 1:
            raise PlanningInputError(
                "goal_configurations: expected a list of configurations, got one configuration"
            )
        goals = tuple(v.configuration(g, f"goal configuration {i}") for i, g in enumerate(goals))
        if not goals:
            raise PlanningInputError("goal_configurations: expected at least one goal, got none")
        object.__setattr__(self, "goal_configurations", goals)
        object.__setattr__(self, "type", _enum(PathType, self.type, "type"))
        object.__setattr__(
            self,
            "goal_prioritization",
            _enum(GoalPrioritization, self.goal_prioritization, "goal_prioritization"),
        )
        if self.description is not None and not isinstance(self.description, str):
            raise PlanningInputError(f"description: expected a string, got {self.description!r}")
        if self.retract_direction is not None:
            d = v.vector3(self.retract_direction, "retract_direction", nonzero=True)
            object.__setattr__(self, "retract_direction", d)
        c = self.max_carried_object_compression_distance
        if c is not None:
            if isinstance(c, bool) or not isinstance(c, (int, float, np.floating, np.integer)):
                raise PlanningInputError(
                    f"max_carried_object_compression_distance: expected a number (m), got {c!r}"
                )
            if not np.isfinite(c) or c < 0.0:
                raise PlanningInputError(
                    f"max_carried_object_compression_distance: expected a value >= 0 m, got {c}"
                )
            object.__setattr__(self, "max_carried_object_compression_distance", float(c))


@dataclass(frozen=True, eq=False)
class PathResult:
    """The result of ``Planner.path``: truthy on success.

    ``error`` is None on success; ``selected_goal_idx`` indexes the request's goals (None on
    failure); ``tcp`` is the TCP at planning time; ``waypoints`` excludes the start and ends at the
    selected goal; ``stats`` holds diagnostics (collision checks, iterations, ``time_s``: the
    query's whole time, the steps of the roadmap build it ran included, ``roadmap_build_s`` of
    it; ``roadmap_steps``: the build's steps done after it, ``roadmap_deferred``: 1.0 when the
    build was not done and the query planned with RRT-Connect alone);
    ``ends_in_touch`` is True for a touch request's result (a path from it starts with a retract);
    ``reason``: on some failures, what was wrong in words (e.g. which joint is beyond its limit).
    """

    error: PathError | None
    selected_goal_idx: int | None
    tcp: Tcp
    waypoints: tuple[Waypoint, ...] = ()
    stats: dict[str, float] = field(default_factory=dict)
    ends_in_touch: bool = False
    reason: str = ""

    def path(self) -> list[Waypoint]:
        """The way-points, excluding the start and ending at the selected goal ([] on failure)."""
        return list(self.waypoints)

    def final_configuration(self) -> np.ndarray:
        """The selected goal (6,) rad; raises ``PathResultError`` when planning failed."""
        if self.error is not None or not self.waypoints:
            raise PathResultError(
                f"final_configuration() needs a successful PathResult, this one failed with "
                f"{self.error.value if self.error else 'no way-points'}"
            )
        return self.waypoints[-1].configuration

    def __bool__(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        if self.error is not None:
            why = f", reason={self.reason!r}" if self.reason else ""
            return f"PathResult(error={self.error.value}{why})"
        return (
            f"PathResult(ok, selected_goal_idx={self.selected_goal_idx}, "
            f"{len(self.waypoints)} way-points)"
        )


class InitialState:
    """Where a path starts: a configuration (6,) rad, or a previous successful ``PathResult``
    (the path then starts at its final configuration).

    ``touch`` is True when the robot starts in a touch (``from_touch``, or a previous result
    that ``ends_in_touch``): the path then starts with a linear retract.
    """

    def __init__(self, start: object) -> None:
        self.touch = False
        if isinstance(start, PathResult):
            if not start:
                raise PlanningInputError(
                    "InitialState: the previous PathResult failed "
                    f"({start.error.value}); expected a successful one"  # type: ignore[union-attr]
                )
            self.previous: PathResult | None = start
            self.configuration = start.final_configuration()
            self.touch = bool(start.ends_in_touch)
        else:
            self.previous = None
            self.configuration = v.configuration(start, "start configuration")

    @classmethod
    def from_touch(cls, configuration: object) -> InitialState:
        """A start in a touch at ``configuration`` (6,) rad: the path starts with a retract."""
        state = cls(configuration)
        state.touch = True
        return state

    def __repr__(self) -> str:
        src = "previous result" if self.previous is not None else "configuration"
        touch = ", touch" if self.touch else ""
        return f"InitialState({src}: {np.round(self.configuration, 4).tolist()}{touch})"
