"""Planner settings: the cell, the profile, the seed and the collision-model and search knobs."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

from twin.planning.errors import PlanningInputError
from twin.planning.requests import Profile, _enum, time_limit


@dataclass(frozen=True)
class PlannerSettings:
    """Settings of a ``Planner``.

    cell_name: the cell (``"twin_arm"``: the shipped arm). profile: testing or production.
    seed: base seed; each ``path`` call derives its generator from it and the query, so the same
    query on the same planner state replays exactly.
    grid_resolution m, motion_margin m (sphere inflation; segments are checked so no sphere moves
    more than twice this between checks), max_sphere_radius m and max_sphere_slack m (sphere
    covers), workspace_padding m (room for tools and carried objects beyond the arm's reach).
    rrt_step rad, max_iterations (per goal), shortcut_rounds: search and smoothing. The
    iteration budget is large (the UR5 clutter problem of ``bench_planner_clutter``, 100 queries
    on each of two seeds, needed at most 7,073 iterations; the old 3,000 failed 4 in 100): the
    time limit is what bounds a query. It is not unbounded, so that an unreachable goal costs
    seconds, not the whole limit (the UR5: 0.56 s at 3,000, 4.5 s at 20,000, 35 s at 100,000,
    loaded machine), and with ``list_order`` the goals after it are still tried.
    compute_blend_radii: give ``path`` results the largest verified-free blend radii
    (``blend.blend_radii``); set it False to skip those extra collision checks (measured on the
    stored benchmark queries: about +0 % median and +10 % mean plan time).
    max_planning_time_s: the time limit (s) of every ``path`` query (a request may set its own;
    None: no limit); a search it stops returns ``blocked_path`` (``search.goals``). Its verdict
    depends on the machine's speed and load.
    max_planning_checks: the budget of every ``path`` query in collision checks (configurations
    checked, the roadmap build steps it runs included; None: the time limit applies): when set,
    it replaces the time limit (the request's too), and a query gives the same result on any
    machine at any load (``search.budget``). ``counted_budgets`` sets it for every planner in a
    block (the scenario runner's regression runs).
    roadmap_nodes: free configurations of the roadmap over the static obstacles
    (``search.roadmap``; built in steps by the queries that need a search after the obstacles or
    the robot's collision model changed, each within its time limit, or ahead by
    ``Planner.prepare_roadmap``; twice as many while its largest connected part holds under
    ``roadmap.GROW_SHARE`` of them); 0: no roadmap.
    """

    cell_name: str = "twin_arm"
    profile: Profile = Profile.TESTING
    seed: int = 0
    grid_resolution: float = 0.01
    motion_margin: float = 0.01
    max_sphere_radius: float = 0.08
    max_sphere_slack: float = 0.025
    workspace_padding: float = 0.25
    rrt_step: float = 0.6
    max_iterations: int = 20_000
    shortcut_rounds: int = 4
    compute_blend_radii: bool = True
    max_planning_time_s: float | None = 10.0
    max_planning_checks: int | None = None
    roadmap_nodes: int = 1000

    def __post_init__(self) -> None:
        object.__setattr__(self, "profile", _enum(Profile, self.profile, "profile"))
        t = self.max_planning_time_s
        if t is not None:
            object.__setattr__(self, "max_planning_time_s", time_limit(t, "max_planning_time_s"))
        n = self.roadmap_nodes
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise PlanningInputError(f"roadmap_nodes: expected an integer >= 0, got {n!r}")
        c = self.max_planning_checks
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 1):
            raise PlanningInputError(
                f"max_planning_checks: expected an integer >= 1 or None, got {c!r}"
            )

    def query_budget(self, time_limit_s: float | None = None) -> tuple[float | None, int | None]:
        """(Time limit s, check budget) of one query whose request asks ``time_limit_s`` (None:
        the settings'): the check budget of ``counted_budgets`` or of the settings when there is
        one (the time limit is then None), else the time limit."""
        checks = _COUNTED.get() or self.max_planning_checks
        if checks is not None:
            return None, checks
        return time_limit_s or self.max_planning_time_s, None


#: The check budget of a query in ``counted_budgets``: measured on the shipped arm's demo, the
#: planner checks about 270,000 configurations a second on an idle machine of ours, so this is
#: about the wall-clock default of 10 s there, and it is the same on any machine at any load.
COUNTED_CHECKS = 3_000_000

_COUNTED: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "twin_planning_counted_checks", default=None
)


@contextlib.contextmanager
def counted_budgets(checks: int = COUNTED_CHECKS) -> Iterator[None]:
    """In this block (this thread or task), every planner query's budget is ``checks``
    collision checks instead of a time limit (``PlannerSettings.max_planning_checks``): a
    regression run's plans, and so its verdict, do not depend on the machine's load."""
    if isinstance(checks, bool) or not isinstance(checks, int) or checks < 1:
        raise PlanningInputError(f"checks: expected an integer >= 1, got {checks!r}")
    token = _COUNTED.set(checks)
    try:
        yield
    finally:
        _COUNTED.reset(token)
