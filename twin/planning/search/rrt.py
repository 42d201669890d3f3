"""RRT-Connect (Kuffner and LaValle, 2000) in joint space over a batched segment checker.

*Extend* moves a tree one step of at most ``step`` rad towards a sample; *connect* grows the other
tree straight towards the new node and keeps the free prefix of that segment (split into
``step``-long edges). Here every iteration does this for a few samples at once, so that all their
edges, and then all connection segments, are each checked in one batched call. The trees swap roles
every iteration. A fifth of the samples are drawn around the start or the goal (``ROOT_SHARE``),
the rest uniformly in the limits. Randomness comes only from the generator passed in: a query
replays exactly.
A tree may start from further roots (``seeds``: the roadmap parts a query's ends joined,
``search.goals``); the path then runs between the roots its branches reach.
With the compiled checks (``CollisionChecker.compiled``) the whole loop runs compiled
(``collision._compiled.rrt_chunk``) in chunks of ``CHUNK_ITERATIONS`` iterations, the deadline
looked at between chunks: the same steps without numpy's per-call cost, which was most of a
small iteration.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from twin.planning.collision.checker import CollisionChecker
from twin.planning.search.budget import Deadline, passed

T = TypeVar("T")

#: Dynamic domain (Yershova et al., 2005; VAMP's RRT-Connect defaults): a node whose extension
#: failed only extends towards samples within its radius (rad), first ``DOMAIN_RADIUS``, then
#: shrunk by ``1 - DOMAIN_ALPHA`` per failure (at least ``DOMAIN_MIN``) and grown by
#: ``1 + DOMAIN_ALPHA`` per success. In clutter most uniform samples lie behind obstacles as seen
#: from their nearest node: their extensions fail and cost checks for nothing.
DOMAIN_RADIUS = 4.0
DOMAIN_MIN = 1.0
DOMAIN_ALPHA = 1e-4
BALANCE = True
#: A blocked extension retries this fraction of its length (one more segment check): a tree
#: whose root sits in a pocket, where almost every ``step``-long edge is blocked, still grows
#: (on the UR5 clutter problem, RRT-Connect alone, 120 runs of 3,000 iterations: 8 failed
#: without, 3 with; at step 1.0: 17 and 4). Counted as a failure by the dynamic domain.
RETRY_FRACTION = 0.5
#: Iterations per call of the compiled search (the deadline is checked between calls).
CHUNK_ITERATIONS = 16
#: Samples near the roots: this share of the samples is drawn around the start or the goal
#: (either with even odds; normal, ``ROOT_SIGMA`` rad per joint, clipped to the limits), the
#: rest uniformly in the limits. A root in a pocket (a few per cent of its ``step``-long edges
#: free) extends only towards samples inside its nodes' dynamic domain, and uniform samples in
#: a wide joint box (the UR5's +-2 pi) almost never fall there: on the UR5 clutter problem
#: (22 hard queries, 5 seeds, RRT-Connect alone, 30,000 iterations) uniform sampling left 9 of
#: 110 unsolved and needed more than 3,000 iterations in 17; 20 % at 1.0 rad solved all 110,
#: 5 above 3,000 (shares 0.1-0.3 at 0.45-1.0 rad: 109-110 solved, 8-15 above 3,000).
ROOT_SHARE = 0.2
ROOT_SIGMA = 1.0
#: Tried and not kept (issue 19): when only one tree has ``seeds`` (the other end in a pocket the
#: roadmap does not reach), half of the samples uniform in a box of +-1.5 rad around that end,
#: the rest uniform. On the certified clutter queries it changed 3 of 100 searches per arm
#: (UR5: iterations 921 -> 263, checks +8 %, times unchanged; xArm6: 1,630 -> 786 iterations,
#: checks -16 %), but the hardest xArm6 query (76, its goal in a pocket) went from 23,382 iterations to
#: unsolved at 64,800 (the 10 s limit): the seeded tree extends towards the box's samples too.


class _Tree:
    """Nodes (capacity, n) rad with parent indices and dynamic-domain radii (rad, ``inf``: not
    limited); node 0 is the root, nodes 1 to ``len(seeds)`` the further roots ``seeds`` (S, n)
    rad."""

    def __init__(self, root: np.ndarray, capacity: int, seeds: np.ndarray | None = None) -> None:
        roots = _roots(root, seeds)
        capacity = max(capacity, 2 * len(roots))
        self.nodes = np.empty((capacity, len(root)))
        self.parent = np.full(capacity, -1, dtype=int)
        self.radius = np.full(capacity, np.inf)
        self.nodes[: len(roots)] = roots
        self.size = len(roots)

    def add(self, q: np.ndarray, parent: int) -> int:
        if self.size == len(self.nodes):
            self.nodes = np.concatenate((self.nodes, np.empty_like(self.nodes)))
            self.parent = np.concatenate((self.parent, np.full(len(self.parent), -1)))
            self.radius = np.concatenate((self.radius, np.full(len(self.radius), np.inf)))
        self.nodes[self.size] = q
        self.parent[self.size] = parent
        self.size += 1
        return self.size - 1


def _roots(root: np.ndarray, seeds: np.ndarray | None) -> np.ndarray:
    """The roots (1 + S, n) rad of a tree: ``root`` (n,), then the ``seeds`` (S, n) if any."""
    if seeds is None or not len(seeds):
        return root[None]
    return np.vstack((root, seeds))


@dataclass(frozen=True)
class RrtResult:
    """``path``: (K, n) rad from the root a branch of the start's tree reached to the root a
    branch of the goal's tree reached, or None; ``iterations`` used; ``roots``: those two roots
    (0: the start or the goal itself, k >= 1: seed k - 1 of that tree)."""

    path: np.ndarray | None
    iterations: int
    roots: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class _Query:
    """One search's inputs, shared by the numpy loop and the compiled one (``rrt_connect``)."""

    checker: CollisionChecker
    start: np.ndarray
    goal: np.ndarray
    rng: np.random.Generator
    step: float
    max_iterations: int
    batch: int
    deadline: Deadline | None
    seeds: tuple[np.ndarray | None, np.ndarray | None] = (None, None)

    def past_deadline(self) -> bool:
        return passed(self.deadline)


def rrt_connect(
    checker: CollisionChecker,
    start: np.ndarray,
    goal: np.ndarray,
    rng: np.random.Generator,
    step: float,
    max_iterations: int,
    batch: int = 4,
    deadline: Deadline | None = None,
    seeds: tuple[np.ndarray | None, np.ndarray | None] = (None, None),
) -> RrtResult:
    """Path from ``start`` to ``goal`` (n,) rad (both free), or None within ``max_iterations``.

    Each iteration draws ``batch`` samples: the active tree extends towards all of them (their
    edges checked in one batch; a blocked edge retries its first ``RETRY_FRACTION``), then the
    other tree tries to connect to every new node (the free prefixes of those segments checked
    in one batch); then the trees swap roles.
    ``deadline`` (``search.budget``): stop once it has passed (fewer than ``max_iterations``).
    ``seeds``: further roots (S, n) rad of the start's and of the goal's tree, or None: free
    configurations that the caller knows how to join to the start or to the goal (the roadmap
    parts each end reaches, ``goals``); the path then runs between the roots its branches reach
    (``RrtResult.roots``).
    """
    return run_steps(
        rrt_connect_steps(checker, start, goal, rng, step, max_iterations, batch, deadline, seeds)
    )


def rrt_connect_steps(
    checker: CollisionChecker,
    start: np.ndarray,
    goal: np.ndarray,
    rng: np.random.Generator,
    step: float,
    max_iterations: int,
    batch: int = 4,
    deadline: Deadline | None = None,
    seeds: tuple[np.ndarray | None, np.ndarray | None] = (None, None),
) -> Generator[None, None, RrtResult]:
    """``rrt_connect`` as a generator of steps (``CHUNK_ITERATIONS`` iterations each) returning
    its result: for a caller that spreads the search over time (the roadmap build's bridges)."""
    query = _Query(checker, start, goal, rng, step, max_iterations, batch, deadline, seeds)
    if BALANCE and checker.compiled:
        return (yield from _rrt_compiled(query))
    return (yield from _rrt_numpy(query))


def run_steps(steps: Generator[None, None, T]) -> T:
    """Run a generator of steps to its end; its return value."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


def _rrt_numpy(query: _Query) -> Generator[None, None, RrtResult]:
    """``rrt_connect`` in numpy batches."""
    checker, step = query.checker, query.step
    trees = [_Tree(query.start, 256, query.seeds[0]), _Tree(query.goal, 256, query.seeds[1])]
    active = 0  # index of the tree that extends
    for it in range(1, query.max_iterations + 1):
        if query.past_deadline():
            return RrtResult(None, it - 1)
        a, b = trees[active], trees[1 - active]
        targets = _samples(query, 1)[0]
        new_nodes = _extend_many(checker, a, targets, step)
        if new_nodes:
            hit = _connect_many(checker, b, a, new_nodes, step)
            if hit is not None:
                i_a, i_b = hit
                i_s, i_g = (i_a, i_b) if active == 0 else (i_b, i_a)
                return _joined(
                    trees[0].nodes, trees[0].parent, i_s, trees[1].nodes, trees[1].parent, i_g, it
                )
        if BALANCE:  # VAMP's rule: swap unless the other tree has grown twice as large
            a, b = trees[active].size, trees[1 - active].size
            if abs(a - b) / a < 1.0:
                active = 1 - active
        else:
            active = 1 - active
        if it % CHUNK_ITERATIONS == 0:
            yield
    return RrtResult(None, query.max_iterations)


def _rrt_compiled(query: _Query) -> Generator[None, None, RrtResult]:
    """``rrt_connect`` compiled (``CollisionChecker.rrt_chunk``): the same steps, in chunks of
    ``CHUNK_ITERATIONS`` iterations (samples drawn a chunk at a time, in the same order)."""
    checker, step, batch = query.checker, query.step, query.batch
    max_iterations = query.max_iterations
    n = len(query.start)
    lower, upper = checker.lower, checker.upper
    # Nodes one iteration can add: ``batch`` extensions, each connection at most the joint
    # box's diagonal in ``step``-long pieces.
    per_iteration = batch * (2 + int(np.ceil(float(np.linalg.norm(upper - lower)) / step)))
    roots = [_roots(query.start, query.seeds[0]), _roots(query.goal, query.seeds[1])]
    cap = max(256, 2 * max(len(r) for r in roots))
    nodes = np.empty((2, cap, n))
    parent = np.full((2, cap), -1, dtype=np.int64)
    radius = np.full((2, cap), np.inf)
    nodes[0, : len(roots[0])], nodes[1, : len(roots[1])] = roots
    size = np.array([len(r) for r in roots], dtype=np.int64)
    state = np.zeros(5, dtype=np.int64)  # active, found, start-tree node, goal-tree node, its
    domain = np.array([DOMAIN_RADIUS, DOMAIN_MIN, DOMAIN_ALPHA, RETRY_FRACTION])
    done = 0
    while done < max_iterations:
        if query.past_deadline():
            return RrtResult(None, done)
        k = min(CHUNK_ITERATIONS, max_iterations - done)
        need = int(size.max()) + k * per_iteration
        if need > cap:
            cap = max(2 * cap, need)
            grown = (
                np.empty((2, cap, n)),
                np.full((2, cap), -1, np.int64),
                np.full((2, cap), np.inf),
            )
            for new, old in zip(grown, (nodes, parent, radius)):
                new[:, : old.shape[1]] = old
            nodes, parent, radius = grown
        samples = _samples(query, k)
        checker.rrt_chunk(nodes, parent, radius, size, state, samples, step, domain)
        done = int(state[4])
        if state[1]:
            i_s, i_g = int(state[2]), int(state[3])
            return _joined(nodes[0], parent[0], i_s, nodes[1], parent[1], i_g, done)
        yield
    return RrtResult(None, max_iterations)


def _samples(query: _Query, k: int) -> np.ndarray:
    """Samples (k, batch, n) rad of ``k`` iterations: uniform in the limits, ``ROOT_SHARE`` of
    them around the start or the goal instead (``ROOT_SIGMA``)."""
    rng, lower, upper = query.rng, query.checker.lower, query.checker.upper
    shape = (k, query.batch, len(query.start))
    out = rng.uniform(lower, upper, size=shape)
    u = rng.random(shape[:2])  # below ROOT_SHARE / 2: the start; below ROOT_SHARE: the goal
    near = np.flatnonzero(u < ROOT_SHARE)
    if len(near):
        flat = out.reshape(-1, shape[2])
        roots = np.where((u.flat[near] < 0.5 * ROOT_SHARE)[:, None], query.start, query.goal)
        roots += rng.normal(0.0, ROOT_SIGMA, size=roots.shape)
        flat[near] = np.clip(roots, lower, upper, out=roots)
    return out


def _branch(nodes: np.ndarray, parent: np.ndarray, i: int) -> tuple[list[np.ndarray], int]:
    """Configurations from node ``i`` up to its root (parent -1) of a tree in arrays; the root's
    index."""
    out = []
    while True:
        out.append(nodes[i].copy())
        if parent[i] < 0:
            return out, i
        i = int(parent[i])


def _joined(nodes_s, parent_s, i_s: int, nodes_g, parent_g, i_g: int, iterations: int):
    """The ``RrtResult`` of a connection between node ``i_s`` of the start's tree (``nodes_s``,
    ``parent_s``) and node ``i_g`` of the goal's: the two branches, root to root (the
    connection's node is in both)."""
    to_start, r_s = _branch(nodes_s, parent_s, i_s)
    to_goal, r_g = _branch(nodes_g, parent_g, i_g)
    return RrtResult(np.array(to_start[::-1] + to_goal[1:]), iterations, (r_s, r_g))


def _nearest_many(tree: _Tree, targets: np.ndarray) -> np.ndarray:
    nodes = tree.nodes[: tree.size]
    d = (
        np.einsum("ij,ij->i", targets, targets)[:, None]
        - 2.0 * targets @ nodes.T
        + np.einsum("ij,ij->i", nodes, nodes)[None]
    )
    return np.argmin(d, axis=1)


def _extend_many(
    checker: CollisionChecker, tree: _Tree, targets: np.ndarray, step: float
) -> list[int]:
    """Extend ``tree`` one step towards each target; indices of the nodes added."""
    near = _nearest_many(tree, targets)
    q_near = tree.nodes[near]
    d = targets - q_near
    dist = np.linalg.norm(d, axis=1)
    radius = tree.radius[near]
    keep = (dist > 1e-9) & (dist <= radius)  # dynamic domain: samples within reach only
    scale = np.where(dist > step, step / np.maximum(dist, 1e-12), 1.0)
    q_new = q_near + d * scale[:, None]
    if not np.any(keep):
        return []
    ok = np.zeros(len(targets), dtype=bool)
    ok[keep] = checker.segments_free(q_near[keep], q_new[keep])
    retry = keep & ~ok
    part = np.zeros(len(targets), dtype=bool)
    if np.any(retry):  # blocked edges: the first ``RETRY_FRACTION`` of them
        q_new[retry] = q_near[retry] + RETRY_FRACTION * (q_new[retry] - q_near[retry])
        part[retry] = checker.segments_free(q_near[retry], q_new[retry])
    for i in np.flatnonzero(keep):  # in order: a node may be the nearest of several samples
        j = near[i]
        r = tree.radius[j]
        if ok[i]:
            if r < np.inf:
                tree.radius[j] = r * (1.0 + DOMAIN_ALPHA)
        else:
            tree.radius[j] = (
                DOMAIN_RADIUS if r == np.inf else max(r * (1.0 - DOMAIN_ALPHA), DOMAIN_MIN)
            )
    return [tree.add(q_new[i].copy(), int(near[i])) for i in np.flatnonzero(ok | part)]


def _connect_many(
    checker: CollisionChecker, tree: _Tree, other: _Tree, new_nodes: list[int], step: float
) -> tuple[int, int] | None:
    """Grow ``tree`` straight towards each new node of ``other`` (free prefix, split into
    ``step``-long edges); (node of ``other``, node of ``tree``) of the first connection."""
    targets = other.nodes[new_nodes]
    near = _nearest_many(tree, targets)
    q_near = tree.nodes[near].copy()
    t = checker.free_prefixes(q_near, targets)
    hit = None
    for i, (frac, j) in enumerate(zip(t, near)):
        dist = float(np.linalg.norm(targets[i] - q_near[i]))
        if frac <= 0.0 or dist < 1e-12:
            continue
        pieces = max(1, int(np.ceil(frac * dist / step)))
        parent = int(j)
        for k in range(1, pieces + 1):
            last = frac >= 1.0 and k == pieces
            q = (
                targets[i].copy()
                if last
                else q_near[i] + (frac * k / pieces) * (targets[i] - q_near[i])
            )
            parent = tree.add(q, parent)
        if frac >= 1.0 and hit is None:
            hit = (new_nodes[i], parent)
    return hit
