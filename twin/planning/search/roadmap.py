"""A roadmap (probabilistic roadmap, Kavraki et al. 1996) of free configurations and free edges
over the static obstacles, reused by every query until the obstacles or the robot's collision
model change.

Build (``RoadmapBuild``; ``finish()`` builds in one go): uniform samples in the joint limits (rad) from a generator seeded by
the planner's seed only, so the same planner state builds the same roadmap; the free ones
(``nodes`` (N, n) rad) are joined to their ``neighbours`` nearest (joint-space L2) and every such
edge is checked once, in batches (``CollisionChecker.segments_free``); only free edges are kept.
A roadmap whose largest connected part holds less than ``GROW_SHARE`` of its nodes gets twice
the nodes (more samples from the same generator, the edges of the new nearest-neighbour graph
checked where not yet): still a function of the obstacles, the model and the seed only.

Build in steps (``RoadmapBuild``): the build is a generator of steps of tens of milliseconds (a
round of samples, a batch of ``EDGE_BATCH`` edges, a chunk of a bridge's RRT-Connect, a chunk of
the shortest-path table) holding its state (generator, samples, edges checked) between them, so
it can stop after any step and resume later: the planner gives it at most half of a query's
budget left (time, or collision checks: ``search.budget``), and a query whose build is not done
plans with RRT-Connect alone; the next query resumes it. No step's work depends on the clock, so the roadmap is the same however the steps
were spread; a replay reproduces a query by taking the build to the steps the log recorded.

Query (``Roadmap.path``): start and goal are joined to their nearest nodes (one batched check
of the nearest ``CONNECT_FIRST``, then of up to ``CONNECT`` and ``CONNECT_LAST`` for an end
joined to none: on the stored shelf queries the nearest of 1,000 nodes is about 1.4 rad away
and a few ends join none of their nearest 16; nodes sampled near the obstacles (Gaussian
sampling) did not help there, and 2,000 nodes no more than the last round), then the shortest
roadmap path is read from the table of shortest paths between all nodes that the build computes
(Dijkstra from every node, ``scipy.sparse.csgraph``: about a third of the build's time): the least
start cost + table length + goal cost over the joined nodes. On the stored shelf queries the A*
search it replaces (heuristic: the straight-line distance to the goal) expanded up to 900 of the
1,000 nodes in Python, a sixth of the slowest queries' time; roadmaps of more than
``TABLE_NODES`` nodes still use it. The result depends only on the
roadmap, start and goal (no random numbers, no state carried between queries), so a query
replays exactly. None when start or goal joins no node, when they join different connected parts
of the roadmap, or when the deadline passes (``deadline_hit`` then says so); then what each end
joined (``RoadmapPath.ends``) gives the search its trees' seeds (``Roadmap.seeds``: the parts
joined) and, once it has reached one, the roadmap's way between that seed and the end
(``Roadmap.through``).

Smoothing (``shortcut``): a roadmap path is already the shortest on the graph, so it needs no
random shortcuts: every shortcut between two of its way-points is checked in one batch and the
shortest way through the free ones is kept, then the same between points along the remaining
segments (a few checker calls where the general smoothing of
an RRT path makes dozens; measured on the stored shelf and cage queries, that smoothing was
most of the tail's time).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from twin.planning.collision.checker import CollisionChecker
from twin.planning.search.budget import Deadline, passed
from twin.planning.search.rrt import rrt_connect_steps, run_steps

#: Free nodes of a roadmap, edges per node to their nearest neighbours, and the nodes a query's
#: start and goal are joined to.
NODES = 1000
NEIGHBOURS = 10
CONNECT = 16
CONNECT_FIRST = 6
CONNECT_LAST = 64
#: Rounds of samples drawn to find ``NODES`` free ones (a cluttered cell may be mostly blocked:
#: the UR5 clutter problem of ``bench_planner_clutter`` has 8 % of its configurations free).
SAMPLE_ROUNDS = 32
#: A roadmap whose largest connected part holds less than this share of its nodes gets twice
#: the nodes, up to ``GROW_LIMIT`` times the nodes asked for (and ``TABLE_NODES``). On the UR5
#: clutter problem 1,000 nodes fall into 86 parts, the largest 78 % of them; 2,000 into parts
#: the largest of which holds 90 %, and a query's ends join one part twice as often.
GROW_SHARE = 0.85
GROW_LIMIT = 2
#: Parts of at least this share of the nodes are bridged to the largest part by RRT-Connect
#: between their nodes (``_bridged``), at most ``BRIDGE_ITERATIONS`` iterations of ``step``
#: (the planner's ``rrt_step``). The mesh UR5 of ``bench_planner_clutter`` keeps two parts of
#: 1,442 and 428 of its 2,000 nodes, which its queries' searches joined in 2,300-5,500
#: iterations; bridged once with the roadmap, such queries are roadmap queries.
BRIDGE_SHARE = 0.05
BRIDGE_ITERATIONS = 5000
BRIDGE_STEP = 0.6
#: Up to this many nodes beyond ``TABLE_NODES`` that bridges may add (the table still built).
BRIDGE_NODES = 200
#: Edge keys ``a * NODE_KEY + b`` (``a < b`` node indices).
NODE_KEY = 1 << 32
#: Segments checked per batch (one build step) while building: it bounds the checker's working
#: memory and a step's time (tens of milliseconds).
EDGE_BATCH = 512
#: Source nodes of the shortest-path table computed per build step.
TABLE_CHUNK = 128
#: Nodes whose nearest neighbours are found per build step.
KNN_ROWS = 256
#: A* pops between two looks at the clock.
CLOCK_EVERY = 128
#: Up to this many nodes (plus ``BRIDGE_NODES``), the shortest paths between all of them are
#: computed with the roadmap (a table of N x N lengths and predecessors: 12 MB at 1,000 nodes,
#: 48 MB at 2,000, the grown roadmaps' size); larger ones use A* (and give no ``seeds``).
TABLE_NODES = 2000


@dataclass(frozen=True)
class Ends:
    """What a query's start and goal join on a roadmap: their distances ``d`` (2, N) rad to every
    node, and the nodes ``start_nodes`` and ``goal_nodes`` (indices) joined to each by a free
    segment."""

    d: np.ndarray
    start_nodes: np.ndarray
    goal_nodes: np.ndarray


@dataclass(frozen=True)
class RoadmapPath:
    """``path`` (K, n) rad from start to goal or None; ``deadline_hit`` when the clock stopped
    the search; ``ends``: what start and goal joined (None when the roadmap is empty)."""

    path: np.ndarray | None
    deadline_hit: bool = False
    ends: Ends | None = None


class Roadmap:
    """Free ``nodes`` (N, n) rad, free edges ``a``-``b`` as adjacency lists (neighbour, length
    rad) and the connected part ``component`` (N,) of every node; ``build_s``: seconds the build
    took (the sum of its steps, however they were spread over queries), the shortest-path table
    included; ``table``: that table (``_table_steps``) when the build computed it, else it is
    computed here for roadmaps of up to ``TABLE_NODES`` (+ ``BRIDGE_NODES``) nodes."""

    def __init__(
        self,
        nodes: np.ndarray,
        a: np.ndarray,
        b: np.ndarray,
        build_s: float = 0.0,
        table: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.nodes = nodes
        n = len(nodes)
        length = _lengths(nodes, a, b)
        adj: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        for i, j, w in zip(a.tolist(), b.tolist(), length.tolist()):
            adj[i].append((j, w))
            adj[j].append((i, w))
        self.adjacency = adj
        self.a, self.b = a, b
        self.edges = len(a)
        self.component = _components(n, a, b)
        self._rows = nodes.tolist()
        if table is None and _wants_table(n, len(a)):
            table = run_steps(_table_steps(nodes, a, b))
        self._dist, self._pred = (None, None) if table is None else table
        self.build_s = build_s

    def path(
        self,
        checker: CollisionChecker,
        start: np.ndarray,
        goal: np.ndarray,
        deadline: Deadline | None = None,
        connect: int = CONNECT,
    ) -> RoadmapPath:
        """Shortest roadmap path start -> goal (both (n,) rad, free), or None (module doc)."""
        n = len(self.nodes)
        if n == 0:
            return RoadmapPath(None)
        ends = np.stack((start, goal))
        d = np.linalg.norm(self.nodes[None] - ends[:, None], axis=2)  # (2, N)
        order = _nearest(d, min(n, max(connect, CONNECT_LAST)))
        s_nodes, g_nodes = self._joined(checker, start, goal, order, n, connect)
        joined = Ends(d, s_nodes, g_nodes)
        if not len(s_nodes) or not len(g_nodes):
            return RoadmapPath(None, ends=joined)
        s_parts, g_parts = self.component[s_nodes].tolist(), self.component[g_nodes].tolist()
        shared = set(s_parts) & set(g_parts)  # a few dozen nodes: sets, not numpy calls
        if not shared:
            return RoadmapPath(None, ends=joined)
        s_nodes = s_nodes[[c in shared for c in s_parts]]
        g_nodes = g_nodes[[c in shared for c in g_parts]]
        if self._dist is not None:
            return RoadmapPath(
                np.vstack((start, self.nodes[self._table_path(d, s_nodes, g_nodes)], goal))
            )
        s_cost = {int(i): float(d[0, i]) for i in s_nodes}
        g_cost = {int(i): float(d[1, i]) for i in g_nodes}
        found = self._astar(goal.tolist(), s_cost, g_cost, deadline)
        if found is None or isinstance(found, bool):
            return RoadmapPath(None, bool(found))
        return RoadmapPath(np.vstack((start, self.nodes[found], goal)))

    def seeds(self, ends: Ends) -> tuple[np.ndarray, np.ndarray]:
        """Node indices of the connected parts that the start and that the goal joined (``ends``):
        configurations a search from either end may grow from (``search.rrt``'s ``seeds``), as
        the roadmap joins them to that end (``through``). Empty without the table of shortest
        paths (roadmaps of more than ``TABLE_NODES`` nodes)."""
        out = []
        for joined in (ends.start_nodes, ends.goal_nodes):
            if self._dist is None or not len(joined):
                out.append(np.zeros(0, dtype=int))
            else:
                out.append(np.flatnonzero(np.isin(self.component, self.component[joined])))
        return out[0], out[1]

    def through(self, ends: Ends, side: int, node: int) -> np.ndarray:
        """The roadmap's way-points (K, n) rad between the query's end ``side`` (0: the start, 1:
        the goal; not included) and ``node``, one of that end's ``seeds`` (included), in the
        order start to goal: the shortest over the nodes that end joined."""
        joined = ends.start_nodes if side == 0 else ends.goal_nodes
        joined = joined[self.component[joined] == self.component[node]]
        d = np.zeros_like(ends.d)
        d[side] = ends.d[side]
        at = np.array([node])
        if side == 0:
            return self.nodes[self._table_path(d, joined, at)]
        return self.nodes[self._table_path(d, at, joined)]

    def _joined(self, checker, start, goal, order, n, connect):
        """Nodes joined to start and to goal by free segments: the nearest ``CONNECT_FIRST`` of
        each first, then up to ``connect`` and ``CONNECT_LAST`` for an end that has none yet
        (one batch per round)."""
        s_nodes = g_nodes = np.zeros(0, dtype=int)
        lo = 0
        rounds = sorted(
            {min(CONNECT_FIRST, n), min(connect, n), min(max(connect, CONNECT_LAST), n)}
        )
        for hi in rounds:
            need_s, need_g = not len(s_nodes), not len(g_nodes)
            near_s = order[0, lo:hi] if need_s else order[0, :0]
            near_g = order[1, lo:hi] if need_g else order[1, :0]
            qa = np.concatenate((np.repeat(start[None], len(near_s), 0), self.nodes[near_g]))
            qb = np.concatenate((self.nodes[near_s], np.repeat(goal[None], len(near_g), 0)))
            if len(qa):
                ok = checker.segments_free(qa, qb)
                if need_s:
                    s_nodes = near_s[ok[: len(near_s)]]
                if need_g:
                    g_nodes = near_g[ok[len(near_s) :]]
            if len(s_nodes) and len(g_nodes):
                break
            lo = hi
        return s_nodes, g_nodes

    def _table_path(self, d: np.ndarray, s_nodes: np.ndarray, g_nodes: np.ndarray) -> list[int]:
        """Node indices of the shortest path start -> goal through the table: the least
        ``d[0, s] + dist[s, g] + d[1, g]`` over the joined nodes (``d`` (2, N) rad: the ends'
        distances to every node; all of ``s_nodes`` and ``g_nodes`` in one connected part)."""
        total = d[0][s_nodes][:, None] + self._dist[np.ix_(s_nodes, g_nodes)] + d[1][g_nodes]
        k = int(np.argmin(total))
        s, j = int(s_nodes[k // len(g_nodes)]), int(g_nodes[k % len(g_nodes)])
        out = [j]
        pred = self._pred[s]
        while j != s:
            j = int(pred[j])
            out.append(j)
        return out[::-1]

    def _astar(
        self,
        goal: list[float],
        s_cost: dict[int, float],
        g_cost: dict[int, float],
        deadline: Deadline | None,
    ) -> list[int] | bool | None:
        """Node indices of the shortest path from the start's nodes (costs ``s_cost``) to the
        goal through one of ``g_cost``'s; None when there is none, True when the deadline hit."""
        rows, adj = self._rows, self.adjacency
        dist = math.dist
        h = {}

        def heuristic(i: int) -> float:
            v = h.get(i)
            if v is None:
                v = h[i] = dist(rows[i], goal)
            return v

        best = dict(s_cost)
        parent: dict[int, int] = {i: -1 for i in s_cost}
        heap = [(c + heuristic(i), c, i) for i, c in s_cost.items()]
        heapq.heapify(heap)
        goal_node = -2  # the goal's pseudo-node
        goal_cost = math.inf
        goal_parent = -1
        pops = 0
        while heap:
            _, g, i = heapq.heappop(heap)
            if i == goal_node:
                out = [goal_parent]
                while parent[out[-1]] >= 0:
                    out.append(parent[out[-1]])
                return out[::-1]
            if g > best[i]:
                continue
            pops += 1
            if deadline is not None and pops % CLOCK_EVERY == 0 and deadline.passed():
                return True
            c = g_cost.get(i)
            if c is not None and g + c < goal_cost:
                goal_cost, goal_parent = g + c, i
                heapq.heappush(heap, (goal_cost, goal_cost, goal_node))
            for j, w in adj[i]:
                gj = g + w
                if gj < best.get(j, math.inf):
                    best[j] = gj
                    parent[j] = i
                    heapq.heappush(heap, (gj + heuristic(j), gj, j))
        return None


class RoadmapBuild:
    """A roadmap build that advances in steps of tens of milliseconds and can stop between any
    two (module doc: "Build in steps"). It holds the build's state: its generator ``rng``, the
    samples drawn and the edges checked so far, as a generator of steps. ``steps``: the steps
    done; ``spent_s``: seconds spent in them; ``roadmap``: the result once done. The roadmap
    is the same however the steps were spread (each step's work depends only on the ones before
    it, never on the clock)."""

    def __init__(
        self,
        checker: CollisionChecker,
        rng: np.random.Generator,
        nodes: int = NODES,
        neighbours: int = NEIGHBOURS,
        step: float = BRIDGE_STEP,
    ) -> None:
        self._steps = _build_steps(checker, rng, nodes, neighbours, step)
        self.steps = 0
        self.spent_s = 0.0
        self.roadmap: Roadmap | None = None

    @property
    def done(self) -> bool:
        return self.roadmap is not None

    def advance(self, until: Deadline | None = None, steps: int | None = None) -> Roadmap | None:
        """Run steps until the build is done, or until ``until`` (``search.budget``: a time
        limit or a check budget, looked at before every step: a step may end past it) or, for a replay, until ``steps``
        steps are done in all. The roadmap, or None while the build is not done."""
        while self.roadmap is None:
            if passed(until):
                break
            if steps is not None and self.steps >= steps:
                break
            self._step()
        return self.roadmap

    def finish(self) -> Roadmap:
        """Run the remaining steps; the roadmap."""
        while self.roadmap is None:
            self._step()
        return self.roadmap

    def _step(self) -> None:
        """One step. A step that raised (an interrupt, a checker's error) closed the build's
        generator: the build cannot resume, and every later step raises ``RuntimeError`` (the
        planner then starts a new build: ``Planner._advance_roadmap``)."""
        t0 = time.perf_counter()
        try:
            next(self._steps)
        except StopIteration as stop:
            if stop.value is None:
                raise RuntimeError(
                    "this roadmap build was stopped by an error in an earlier step and cannot "
                    "resume; start a new RoadmapBuild"
                ) from None
            self.roadmap = stop.value
        self.steps += 1
        self.spent_s += time.perf_counter() - t0
        if self.roadmap is not None:
            self.roadmap.build_s = self.spent_s


def _build_steps(
    checker: CollisionChecker,
    rng: np.random.Generator,
    nodes: int,
    neighbours: int,
    step: float,
) -> Generator[None, None, Roadmap]:
    """The steps of ``RoadmapBuild`` (a generator returning the roadmap): sample ``nodes`` free
    configurations (fewer when the cell is that blocked), keep the free edges to each node's
    ``neighbours`` nearest; while the largest connected part holds less than ``GROW_SHARE`` of
    the nodes, twice the nodes (up to ``GROW_LIMIT`` times ``nodes`` and ``TABLE_NODES``): the
    new ones drawn from the same generator, the edges of the new nearest-neighbour graph
    checked where not checked before; then every part of at least ``BRIDGE_SHARE`` of the
    nodes is bridged to the largest where RRT-Connect between them (``step`` rad,
    ``BRIDGE_ITERATIONS``) finds a way (``_bridged``); then the shortest-path table. A step
    ends after each round of samples, each ``KNN_ROWS`` nodes' nearest neighbours, each batch of
    ``EDGE_BATCH`` edges, each chunk of a bridge's search and each ``TABLE_CHUNK`` rows of the
    table."""
    q = yield from _free_samples(checker, rng, nodes, np.zeros((0, len(checker.lower))))
    checked: dict[int, bool] = {}
    while True:
        a, b = yield from _knn_edges(q, neighbours)
        key = a * NODE_KEY + b
        keep = np.zeros(len(a), dtype=bool)
        known = np.array([checked.get(k) is not None for k in key.tolist()], dtype=bool)
        keep[known] = [checked[k] for k in key[known].tolist()]
        todo = np.flatnonzero(~known)
        for lo in range(0, len(todo), EDGE_BATCH):
            rows = todo[lo : lo + EDGE_BATCH]
            keep[rows] = checker.segments_free(q[a[rows]], q[b[rows]])
            checked.update(zip(key[rows].tolist(), keep[rows].tolist()))
            yield
        free_a = np.array([k // NODE_KEY for k, v in checked.items() if v], dtype=int)
        free_b = np.array([k % NODE_KEY for k, v in checked.items() if v], dtype=int)
        grow = min(GROW_LIMIT * nodes, TABLE_NODES)
        if len(q) < nodes or 2 * len(q) > grow:
            break
        parts = np.bincount(_components(len(q), free_a, free_b))
        if parts.max() >= GROW_SHARE * len(q):
            break
        q = yield from _free_samples(checker, rng, 2 * len(q), q)
    order = np.lexsort((free_b, free_a))  # the edges in one order whatever the dict's
    a, b = free_a[order], free_b[order]
    if len(q) >= nodes:
        q, a, b = yield from _bridged(checker, rng, q, a, b, step)
    table = None
    if _wants_table(len(q), len(a)):
        table = yield from _table_steps(q, a, b)
    return Roadmap(q, a, b, table=table)


def graph_library():
    """``scipy.sparse.csr_matrix`` and ``scipy.sparse.csgraph.shortest_path``, imported on first
    use: importing the planner does not load scipy (0.2-0.3 s, more on a loaded machine). A
    ``Planner`` with a roadmap loads it when it is made, so that no query's build step pays it."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    return csr_matrix, shortest_path


def _wants_table(n: int, edges: int) -> bool:
    """Whether a roadmap of ``n`` nodes and ``edges`` edges gets the shortest-path table."""
    return edges > 0 and n <= TABLE_NODES + BRIDGE_NODES


def _lengths(nodes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Lengths (E,) rad of the edges ``a``-``b`` between ``nodes`` (N, n) rad."""
    return np.linalg.norm(nodes[a] - nodes[b], axis=1) if len(a) else np.zeros(0)


def _table_steps(
    nodes: np.ndarray, a: np.ndarray, b: np.ndarray
) -> Generator[None, None, tuple[np.ndarray, np.ndarray]]:
    """The shortest-path table (lengths (N, N) rad, predecessors (N, N)) between all nodes of
    the graph ``a``-``b`` (Dijkstra from every node, ``scipy.sparse.csgraph``), ``TABLE_CHUNK``
    source nodes a step (each row depends on its source only: the same table in any chunks)."""
    csr_matrix, shortest_path = graph_library()
    n = len(nodes)
    length = _lengths(nodes, a, b)
    graph = csr_matrix(
        (np.concatenate((length, length)), (np.concatenate((a, b)), np.concatenate((b, a)))),
        shape=(n, n),
    )
    dist, pred = np.empty((n, n)), np.empty((n, n), dtype=np.int32)
    for lo in range(0, n, TABLE_CHUNK):
        rows = np.arange(lo, min(n, lo + TABLE_CHUNK))
        dist[rows], pred[rows] = shortest_path(
            graph, method="D", directed=True, return_predecessors=True, indices=rows
        )
        if lo + TABLE_CHUNK < n:
            yield
    return dist, pred


def shortcut(checker: CollisionChecker, path: np.ndarray) -> np.ndarray:
    """A shorter polyline from ``path[0]`` to ``path[-1]`` (way-points (K, n) rad, consecutive
    ones joined by free segments), in two passes of ``_shortcut_pass``: first between the
    way-points, then between points at every ``1 / DENSITY`` of the remaining segments. Ends
    kept exactly."""
    path = _shortcut_pass(checker, path, 1, len(path))
    return _shortcut_pass(checker, path, DENSITY, 1)


#: Points per segment between which ``shortcut``'s second pass looks for shortcuts (2: the
#: midpoints; measured on the stored shelf and cage queries against 3: p95 about -20 %, path
#: length +1.2 %, the blends cutting the corners that the finer pass cut).
DENSITY = 2


def _shortcut_pass(
    checker: CollisionChecker, path: np.ndarray, density: int, reach: int
) -> np.ndarray:
    """The shortest way from the first to the last point through the path's own segments and
    the free straight shortcuts between its points (``density`` per segment, way-points
    included), all checked in one ``segments_free`` batch; dynamic programming over the points
    in order (L2 lengths). Collinear points (on one segment) and repeats are dropped."""
    if len(path) < 3:
        return path
    f = np.arange(density) / density
    dense = path[:-1, None] + f[:, None] * (path[1:] - path[:-1])[:, None]
    points = np.vstack((dense.reshape(-1, path.shape[1]), path[-1:]))
    k = len(points)
    i, j = np.triu_indices(k, 2)
    seg_i = i // density
    # on the next segment after point i's (shortcuts across more than one corner: ``reach``)
    other = (j > (seg_i + 1) * density) & (j <= (seg_i + 1 + reach) * density)
    i, j = i[other], j[other]
    ok = checker.segments_free(points[i], points[j])
    # dynamic programming in Python floats (a few dozen points; numpy calls per point cost more)
    length = np.linalg.norm(points[None] - points[:, None], axis=2).tolist()  # [a][b]
    into: list[list[int]] = [[] for _ in range(k)]  # per point b, the points a < b joined to it
    for a in range(k):  # along one segment: free, and no shorter than the chord
        for b in range(a + 1, min(k, (a // density + 1) * density + 1)):
            into[b].append(a)
    for a, b in zip(i[ok].tolist(), j[ok].tolist()):
        into[b].append(a)
    best = [0.0] * k
    parent = [0] * k
    for b in range(1, k):
        top, arg = math.inf, 0
        for a in sorted(into[b]):  # the first of equal costs wins (as argmin)
            cost = best[a] + length[a][b]
            if cost < top:
                top, arg = cost, a
        best[b], parent[b] = top, arg
    out = [k - 1]
    while out[-1] != 0:
        out.append(parent[out[-1]])
    return points[out[::-1]].copy()


def _nearest(d: np.ndarray, count: int) -> np.ndarray:
    """Per row of distances ``d`` (R, N), the indices (R, count) of its ``count`` smallest,
    nearest first, ties by index: the first ``count`` of a stable argsort (a partition first:
    a query reads at most ``CONNECT_LAST`` of the nodes)."""
    if count >= d.shape[1]:
        return np.argsort(d, axis=1, kind="stable")
    kth = np.partition(d, count - 1, axis=1)[:, count - 1 : count]  # (R, 1)
    out = np.empty((len(d), count), dtype=np.intp)
    for r in range(len(d)):
        near = np.flatnonzero(d[r] <= kth[r])  # ascending indices, ties at the k-th included
        out[r] = near[np.argsort(d[r, near], kind="stable")[:count]]
    return out


def _bridged(
    checker: CollisionChecker,
    rng: np.random.Generator,
    q: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    step: float,
) -> Generator[None, None, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Nodes (N', n) rad and free edges ``a``, ``b`` of a roadmap with its parts of at least
    ``BRIDGE_SHARE`` of the nodes, largest first, joined to the largest where RRT-Connect
    between the two parts' nodes (both trees seeded with them, ``search.rrt``) finds a path in
    ``BRIDGE_ITERATIONS``: that path's way-points become nodes, its edges (checked by the
    search) edges. At most ``BRIDGE_NODES`` nodes are added. A generator of steps (the
    searches' chunks) returning them."""
    part = _components(len(q), a, b)
    labels, sizes = np.unique(part, return_counts=True)
    ranked = labels[np.lexsort((labels, -sizes))]
    big = [int(c) for c, k in zip(labels, sizes) if k >= BRIDGE_SHARE * len(q)]
    big = [c for c in ranked.tolist() if c in big]
    rows, extra_a, extra_b, added = [q], [a], [b], 0
    for other in big[1:]:
        main_nodes = np.flatnonzero(part == big[0])
        far = np.flatnonzero(part == other)
        found = yield from rrt_connect_steps(
            checker, q[main_nodes[0]], q[far[0]], rng, step, BRIDGE_ITERATIONS,
            seeds=(q[main_nodes[1:]], q[far[1:]]),
        )  # fmt: skip
        if found.path is None or added + len(found.path) - 2 > BRIDGE_NODES:
            continue
        ends = (main_nodes[found.roots[0]], far[found.roots[1]])
        inner = found.path[1:-1]
        index = np.concatenate(([ends[0]], len(q) + added + np.arange(len(inner)), [ends[1]]))
        rows.append(inner)
        extra_a.append(np.minimum(index[:-1], index[1:]))
        extra_b.append(np.maximum(index[:-1], index[1:]))
        added += len(inner)
        part[part == other] = big[0]
    return np.concatenate(rows), np.concatenate(extra_a), np.concatenate(extra_b)


def _free_samples(
    checker: CollisionChecker, rng: np.random.Generator, count: int, have: np.ndarray
) -> Generator[None, None, np.ndarray]:
    """``have`` (H, n) rad and then free uniform samples in the limits up to ``count`` rows
    (fewer after ``SAMPLE_ROUNDS`` rounds of ``count`` samples); a step a round."""
    lower, upper = checker.lower, checker.upper
    found = [have]
    total = len(have)
    for _ in range(SAMPLE_ROUNDS):
        if total >= count:
            break
        q = rng.uniform(lower, upper, size=(count, len(lower)))
        free = q[checker.free(q)]
        found.append(free)
        total += len(free)
        yield
    return np.concatenate(found)[:count]


def _knn_edges(q: np.ndarray, k: int) -> Generator[None, None, tuple[np.ndarray, np.ndarray]]:
    """Edges (a, b) with a < b, each node joined to its ``k`` nearest (L2), without repeats; a
    step per ``KNN_ROWS`` nodes (the distances of 2,000 nodes at once took 100-200 ms)."""
    n = len(q)
    if n < 2:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    k = min(k, n - 1)
    sq = np.einsum("ij,ij->i", q, q)
    near = np.empty((n, k), dtype=np.intp)
    for lo in range(0, n, KNN_ROWS):
        rows = np.arange(lo, min(n, lo + KNN_ROWS))
        d = sq[rows, None] - 2.0 * q[rows] @ q.T + sq[None]
        d[np.arange(len(rows)), rows] = np.inf
        near[rows] = np.argpartition(d, k - 1, axis=1)[:, :k]
        yield
    a = np.repeat(np.arange(n), k)
    b = near.ravel()
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    pairs = np.unique(lo * n + hi)
    return pairs // n, pairs % n


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected-part label (N,) of every node (union-find with path halving)."""
    root = list(range(n))

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for i, j in zip(a.tolist(), b.tolist()):
        ri, rj = find(i), find(j)
        if ri != rj:
            root[max(ri, rj)] = min(ri, rj)
    return np.array([find(i) for i in range(n)], dtype=int)
