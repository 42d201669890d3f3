"""What a demo run measured, as plain values the figures and the JSON are made from.

Positions are (3,) or (K, 3) m in the world (= arm base) frame; poses (7,)
``[px, py, pz, qw, qx, qy, qz]``; errors in m and rad.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class MovePart:
    """One executed part of a move (``retract``, ``free`` or ``approach``): whether its executed
    joint curve is free in the planner's model, the planned TCP path (K, 3) m (the trajectory at
    the control instants) and the measured one (K, 3) m."""

    name: str
    free: bool
    planned: np.ndarray
    measured: np.ndarray


@dataclass
class MoveRecord:
    """A planned and executed move: ``goal_m`` (3,) m the planner's TCP at the goal,
    ``goal_error_m`` its distance from the measured TCP after settling, planning time (ms),
    way-point count, ``direct_blocked`` (the straight joint segment of the free part would
    collide: the planner went around), its parts and ``final_q`` (6,) rad measured at the end."""

    name: str
    goal_m: np.ndarray
    goal_error_m: float = float("nan")
    planned_ms: float = 0.0
    waypoints: int = 0
    direct_blocked: bool | None = None
    parts: list[MovePart] = field(default_factory=list)
    final_q: np.ndarray | None = None

    @property
    def collision_free(self) -> bool:
        return all(p.free for p in self.parts)

    def figures(self) -> dict:
        return {
            "goal_m": [float(x) for x in self.goal_m],
            "goal_error_m": self.goal_error_m,
            "final_q": None if self.final_q is None else [float(x) for x in self.final_q],
            "collision_free": self.collision_free,
            "parts": {
                p.name: {"collision_free": p.free, "samples": len(p.planned)} for p in self.parts
            },
            "direct_segment_blocked": self.direct_blocked,
            "waypoints": self.waypoints,
            "planning_ms": self.planned_ms,
        }


@dataclass
class PolicyRecord:
    """One reach of the ONNX policy: ``target`` (7,) pose, final errors, TCP path (K, 3) m."""

    target: np.ndarray
    position_error_m: float
    rotation_error_rad: float
    path: np.ndarray

    def figures(self) -> dict:
        return {
            "target": [float(x) for x in self.target],
            "position_error_m": self.position_error_m,
            "rotation_error_rad": self.rotation_error_rad,
        }
