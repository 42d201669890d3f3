"""Exception classes of the planner: input errors are exceptions; planning failures are results."""

from __future__ import annotations


class PlanningInputError(ValueError):
    """An argument of a planner call is malformed (shape, finiteness, closed mesh, counts...)."""


class PathResultError(RuntimeError):
    """A failed ``PathResult`` was used where a successful one is required."""
