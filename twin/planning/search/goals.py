"""Planning to several goals: error classification, direct segments first, RRT-Connect, smoothing.

Order of checks (the errors of ``docs/reference/planner.md``): the start outside the limits or blocked ->
``blocked_start``; every goal outside the limits -> ``kinematic_violation``; every goal inside
the limits blocked -> ``blocked_end``; otherwise a path to a free goal, or ``blocked_path``.

A goal whose straight segment is blocked gets a cheap try with one random via configuration
around the midpoint (``_via_path``), then the roadmap over the static obstacles (``roadmap``,
when the planner gives one), then RRT-Connect, its trees seeded with the roadmap parts that
the start and the goal joined (``_search``): a start in a pocket, which no roadmap node sees,
grows until it meets any node of the goal's part rather than the goal's own tree (on the UR5
clutter problem of ``bench_planner_clutter``: the checks of the slowest queries about a
quarter).

Budget: ``SearchParameters.deadline`` (a ``search.budget.Deadline``: a time limit, or a number
of collision checks) is looked at between goals, inside the roadmap search and in every
RRT-Connect iteration; a search it stops returns ``blocked_path`` with ``Outcome.deadline_hit``
set (the work done beyond the deadline is one iteration or one roadmap batch). Without a
deadline, or with a check budget, every query replays exactly on any machine; with a time
limit, a query that finishes in time replays exactly (its random numbers do not depend on the
clock), and a query the deadline stopped records the iterations it used.

Goal selection: ``list_order`` returns the first goal in the list that the planner connects;
``shortest_path`` the goal with the shortest smoothed joint-space path (L2, rad). A goal whose
straight-line distance already exceeds the best path found is skipped: no path to it can be
shorter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from twin.planning.collision.checker import CollisionChecker
from twin.planning.requests import GoalPrioritization, PathError
from twin.planning.search import smoothing
from twin.planning.search.budget import Deadline, passed
from twin.planning.search.roadmap import Ends, Roadmap, shortcut
from twin.planning.search.rrt import rrt_connect


@dataclass(frozen=True)
class SearchParameters:
    """rrt_step rad, max_iterations per goal, shortcut_rounds; ``deadline`` (the whole query's
    budget, the roadmap build steps it runs included) or None;
    ``roadmap``: called when a goal needs more than a via configuration, returns the planner's
    roadmap, or None (none, or its build not done within this query's share of the time)."""

    rrt_step: float
    max_iterations: int
    shortcut_rounds: int
    deadline: Deadline | None = None
    roadmap: Callable[[], Roadmap | None] | None = None

    def past_deadline(self) -> bool:
        return passed(self.deadline)


@dataclass(frozen=True)
class Outcome:
    """error or None; goal index; path (K, n) rad from the start to the goal; iterations;
    ``deadline_hit`` when the time limit stopped a search; ``roadmap_paths`` found on the
    roadmap."""

    error: PathError | None
    goal_index: int | None = None
    path: np.ndarray | None = None
    iterations: int = 0
    deadline_hit: bool = False
    roadmap_paths: int = 0


def plan_to_goals(
    checker: CollisionChecker,
    start: np.ndarray,
    goals: np.ndarray,
    prioritization: GoalPrioritization,
    rng_factory: Callable[[], np.random.Generator],
    params: SearchParameters,
) -> Outcome:
    """Plan from ``start`` (n,) to one of ``goals`` (G, n) rad; ``rng_factory`` is called once,
    only when a goal needs a search (the common easy query, one goal whose straight segment is
    free, draws no random number and returns at once: the one place that rule lives)."""
    rng = _Lazy(rng_factory)
    in_limits = checker.within_limits(goals)
    if in_limits.all():  # the common case: no index bookkeeping
        start_free, free, direct = checker.star(start, goals)
        if not start_free:
            return Outcome(PathError.BLOCKED_START)
    else:
        inside = in_limits.nonzero()[0]
        start_free, inside_free, inside_direct = checker.star(start, goals[inside])
        if not start_free:
            return Outcome(PathError.BLOCKED_START)
        if not len(inside):
            return Outcome(PathError.KINEMATIC_VIOLATION)
        free = np.zeros(len(goals), dtype=bool)
        direct = np.zeros(len(goals), dtype=bool)
        free[inside], direct[inside] = inside_free, inside_direct
    if len(goals) == 1 and direct[0]:  # the common easy query: one goal, straight segment
        return Outcome(None, 0, np.array([start, goals[0]]), 0)
    candidates = free.nonzero()[0]
    if not len(candidates):
        return Outcome(PathError.BLOCKED_END)
    tally = _Tally()
    if prioritization is GoalPrioritization.LIST_ORDER:
        for k in candidates:
            if direct[k]:
                return tally.outcome(None, int(k), np.array([start, goals[k]]))
            if params.past_deadline():
                tally.deadline_hit = True
                break
            path = _connect(checker, start, goals[k], rng, params, tally)
            if path is not None:
                return tally.outcome(None, int(k), path)
        return tally.outcome(PathError.BLOCKED_PATH)

    best: tuple[float, int, np.ndarray] | None = None
    for k in direct.nonzero()[0]:
        d = goals[k] - start
        length = math.sqrt(d @ d)
        if best is None or length < best[0]:
            best = (length, int(k), np.array([start, goals[k]]))
    rest = [k for k in candidates if not direct[k]]
    rest.sort(key=lambda k: float(np.linalg.norm(goals[k] - start)))
    for k in rest:
        if best is not None and np.linalg.norm(goals[k] - start) >= best[0]:
            break
        if params.past_deadline():  # keep the best path found so far
            tally.deadline_hit = True
            break
        path = _connect(checker, start, goals[k], rng, params, tally)
        if path is not None:
            length = smoothing.path_length(path)
            if best is None or length < best[0]:
                best = (length, int(k), path)
    if best is None:
        return tally.outcome(PathError.BLOCKED_PATH)
    return tally.outcome(None, best[1], best[2])


class _Tally:
    """What the searches of one query used: RRT iterations, roadmap paths, the deadline."""

    def __init__(self) -> None:
        self.iterations = 0
        self.roadmap_paths = 0
        self.deadline_hit = False

    def outcome(self, error, goal_index=None, path=None) -> Outcome:
        return Outcome(
            error, goal_index, path, self.iterations, self.deadline_hit, self.roadmap_paths
        )


class _Lazy:
    """The generator of a factory, made on first use."""

    def __init__(self, factory: Callable[[], np.random.Generator]) -> None:
        self._factory = factory
        self._rng: np.random.Generator | None = None

    def get(self) -> np.random.Generator:
        if self._rng is None:
            self._rng = self._factory()
        return self._rng


def _connect(
    checker: CollisionChecker,
    start: np.ndarray,
    goal: np.ndarray,
    lazy: _Lazy,
    params: SearchParameters,
    tally: _Tally,
) -> np.ndarray | None:
    """A smoothed path start -> goal: a via configuration near the midpoint, else the roadmap
    (when there is one), else a via configuration farther out, else RRT-Connect."""
    rng = lazy.get()
    roadmap = None if params.roadmap is None else params.roadmap()
    ends = None
    if roadmap is None:
        path = _via_path(checker, start, goal, rng)
    else:  # one batch of the nearest vias only: the roadmap is the cheaper next try
        path = _via_path(checker, start, goal, rng, VIA_SPREADS[:1], batches=1)
    if path is None and roadmap is not None:
        found = roadmap.path(checker, start, goal, params.deadline)
        tally.deadline_hit |= found.deadline_hit
        path, ends = found.path, found.ends
        tally.roadmap_paths += path is not None
        if path is not None:  # the shortest on the graph: only its shortcuts (``roadmap``)
            path = shortcut(checker, path)
            if len(path) == 3:
                path = smoothing.pull_via(checker, path)
            path[0], path[-1] = start, goal
            return path
        if not found.deadline_hit:
            path = _via_path(checker, start, goal, rng, VIA_SPREADS[1:])
    if path is None:
        if tally.deadline_hit or params.past_deadline():
            tally.deadline_hit = True
            return None
        path = _search(checker, start, goal, rng, params, tally, roadmap, ends)
        if path is None:
            return None
    path = smoothing.simplify(checker, path, rng, params.shortcut_rounds)
    path[0], path[-1] = start, goal
    return path


def _search(
    checker: CollisionChecker,
    start: np.ndarray,
    goal: np.ndarray,
    rng: np.random.Generator,
    params: SearchParameters,
    tally: _Tally,
    roadmap: Roadmap | None,
    ends: Ends | None,
) -> np.ndarray | None:
    """RRT-Connect from ``start`` to ``goal`` (n,) rad, its trees seeded with the roadmap parts
    each end joined (``ends``; ``Roadmap.seeds``): a start in a pocket that no roadmap node sees
    grows until it meets any node of the goal's part, not only the goal's own tree. The path
    (K, n) rad, the roadmap's way-points to the roots reached included, or None."""
    seeds = roots = (None, None)
    if roadmap is not None and ends is not None:
        seeds = roadmap.seeds(ends)
        roots = (roadmap.nodes[seeds[0]], roadmap.nodes[seeds[1]])
    result = rrt_connect(
        checker,
        start,
        goal,
        rng,
        params.rrt_step,
        params.max_iterations,
        deadline=params.deadline,
        seeds=roots,
    )
    tally.iterations += result.iterations
    if result.path is None:
        tally.deadline_hit |= result.iterations < params.max_iterations
        return None
    parts = [result.path]
    r_s, r_g = result.roots
    if r_s > 0:  # the start's tree grew from a roadmap node: the roadmap's way there first
        parts.insert(0, np.vstack((start, roadmap.through(ends, 0, int(seeds[0][r_s - 1]))[:-1])))
    if r_g > 0:
        parts.append(np.vstack((roadmap.through(ends, 1, int(seeds[1][r_g - 1]))[1:], goal)))
    return np.vstack(parts)


#: Spreads (rad, per joint) of the random via configurations tried before RRT-Connect.
VIA_SPREADS = (0.4, 0.8, 1.6)
VIA_SAMPLES = 24
#: Via candidates whose segments are checked in one batch.
VIA_BATCH = 6


def _via_path(
    checker: CollisionChecker,
    start: np.ndarray,
    goal: np.ndarray,
    rng: np.random.Generator,
    spreads: tuple[float, ...] = VIA_SPREADS,
    batches: int | None = None,
) -> np.ndarray | None:
    """A two-segment path ``start -> via -> goal`` through one random via configuration around
    the midpoint, or None: many queries whose straight segment is blocked need only one detour.
    The vias of a spread are checked first (one batch), then the two segments of the free ones,
    shortest detour first, ``VIA_BATCH`` candidates a batch; the shortest free one of the first
    batch with one wins; ``batches``: at most that many batches a spread."""
    mid = 0.5 * (start + goal)
    for spread in spreads:
        vias = np.clip(
            mid + rng.normal(0.0, spread, size=(VIA_SAMPLES, len(start))),
            checker.lower,
            checker.upper,
        )
        vias = vias[checker.free(vias)]
        length = np.linalg.norm(vias - start, axis=1) + np.linalg.norm(goal - vias, axis=1)
        vias = vias[np.argsort(length, kind="stable")]
        if batches is not None:
            vias = vias[: batches * VIA_BATCH]
        for lo in range(0, len(vias), VIA_BATCH):
            cand = vias[lo : lo + VIA_BATCH]
            k = len(cand)
            qa = np.vstack((np.repeat(start[None], k, 0), cand))
            qb = np.vstack((cand, np.repeat(goal[None], k, 0)))
            ok = checker.segments_free(qa, qb)
            both = ok[:k] & ok[k:]
            if np.any(both):
                return np.array([start, cand[int(np.argmax(both))], goal])
    return None
