"""Planning to several goals: error classification, direct segments first, RRT-Connect, smoothing.

Order of checks (the errors of ``docs/reference/planner.md``): the start outside the limits or blocked ->
``blocked_start``; every goal outside the limits -> ``kinematic_violation``; every goal inside
the limits blocked -> ``blocked_end``; otherwise a path to a free goal, or ``blocked_path``.

Before RRT-Connect, a goal whose straight segment is blocked gets a cheap try with one random via
configuration around the midpoint (``_via_path``).

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
from twin.planning.search.rrt import rrt_connect


@dataclass(frozen=True)
class SearchParameters:
    """rrt_step rad, max_iterations per goal, shortcut_rounds."""

    rrt_step: float
    max_iterations: int
    shortcut_rounds: int


@dataclass(frozen=True)
class Outcome:
    """error or None; goal index; path (K, n) rad from the start to the goal; iterations."""

    error: PathError | None
    goal_index: int | None = None
    path: np.ndarray | None = None
    iterations: int = 0


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
    iterations = 0
    if prioritization is GoalPrioritization.LIST_ORDER:
        for k in candidates:
            if direct[k]:
                return Outcome(None, int(k), np.array([start, goals[k]]), iterations)
            path, used = _connect(checker, start, goals[k], rng, params)
            iterations += used
            if path is not None:
                return Outcome(None, int(k), path, iterations)
        return Outcome(PathError.BLOCKED_PATH, iterations=iterations)

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
        path, used = _connect(checker, start, goals[k], rng, params)
        iterations += used
        if path is not None:
            length = smoothing.path_length(path)
            if best is None or length < best[0]:
                best = (length, int(k), path)
    if best is None:
        return Outcome(PathError.BLOCKED_PATH, iterations=iterations)
    return Outcome(None, best[1], best[2], iterations)


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
) -> tuple[np.ndarray | None, int]:
    rng = lazy.get()
    path = _via_path(checker, start, goal, rng)
    iterations = 0
    if path is None:
        result = rrt_connect(checker, start, goal, rng, params.rrt_step, params.max_iterations)
        if result.path is None:
            return None, result.iterations
        path, iterations = result.path, result.iterations
    path = smoothing.simplify(checker, path, rng, params.shortcut_rounds)
    path[0], path[-1] = start, goal
    return path, iterations


#: Spreads (rad, per joint) of the random via configurations tried before RRT-Connect.
VIA_SPREADS = (0.4, 0.8, 1.6)
VIA_SAMPLES = 24


def _via_path(
    checker: CollisionChecker, start: np.ndarray, goal: np.ndarray, rng: np.random.Generator
) -> np.ndarray | None:
    """A two-segment path ``start -> via -> goal`` through one random via configuration around
    the midpoint, or None: many queries whose straight segment is blocked need only one detour,
    and the two segments of every candidate (the via itself included) are checked together."""
    mid = 0.5 * (start + goal)
    for spread in VIA_SPREADS:
        vias = np.clip(
            mid + rng.normal(0.0, spread, size=(VIA_SAMPLES, len(start))),
            checker.lower,
            checker.upper,
        )
        qa = np.vstack((np.repeat(start[None], len(vias), 0), vias))
        qb = np.vstack((vias, np.repeat(goal[None], len(vias), 0)))
        ok = checker.segments_free(qa, qb)
        both = ok[: len(vias)] & ok[len(vias) :]
        if np.any(both):
            cand = vias[both]
            length = np.linalg.norm(cand - start, axis=1) + np.linalg.norm(goal - cand, axis=1)
            return np.array([start, cand[int(np.argmin(length))], goal])
    return None
