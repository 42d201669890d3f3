"""Planner benchmark on arms it was not tuned on, in sphere clutter; and what sphere obstacles cost.

The problem (issue 19): an arm from the table ``ARMS`` (first the UR5 with VAMP's own 40-sphere
collision model, ``assets/arms/ur5_spherized/``), VAMP's 14-sphere cage (``CAGE``) seeded around
its shoulder (joint 1's anchor origin), and queries whose start and goal are free (in the planner's model and
in PyBullet's exact check) but whose straight segment is blocked. Every query is planned twice
(the second plan must equal the first: the replay guarantee) and every returned path is re-checked
densely with PyBullet's exact geometry (``planner_exact.verify_path``, 1 mm / 0.01 rad). The
UR5 runs with ``motion_margin=0.002``, as in the issue: without SRDF disabled pairs two of its
spheres sit 2.5 mm apart in every pose, so the default 1 cm margin blocks every configuration.

Anchors (from the issue, measured there, not re-run here: VAMP's ``vamp-planner`` does not
build on this machine): VAMP (RRT-Connect plus its simplifier, SIMD C++) median 1.6 ms, p95
8.6 ms, 300 of 300 solved; this planner before the work of issue 19: median 200 ms, p95 3.7 s,
24 of 300 failed. Targets: 100 % success, 0 invalid paths, median <= 16 ms, p95 <= 86 ms.

Profile on this problem (cProfile, 8 queries at 300 iterations, shared two-core machine): before,
43 % of the planning time was the small-batch centre product ``M @ R`` in
``kernel.grid_centers`` (a (240, 54) x (54, <= 48) product above OpenBLAS's threading threshold:
threads on a loaded machine), then the sphere-pair gaps, computed twice because every VAMP
sphere is its own URDF body (body-pair culling gathered 236 body bounds and then the same 236
pairs), then RRT-Connect's connect, which checked every ``2 margin / D`` step (4 mm of motion
at ``motion_margin=0.002``) of its segments. Now: the product always runs in column blocks
(no threads), body-pair culling is off when bodies hold about one sphere pair each, and
``free_prefixes`` takes the certified two-round scheme of ``segments_free`` with early exit
(about 2.4x less time per check and a fifth fewer checks).

Why the search needed tens of thousands of checks (measured on 2,000-4,000 random
configurations and 10-16 queries): (1) the field's lookup slack (``h sqrt(3) / 2``, 8.7 mm)
inflated the cage's spheres: free share 7.2 % against 8.6 % for the exact sphere model at the
margin (PyBullet's exact geometry: 8.1 % at margin 0; self-collision alone blocks half); with
exact sphere checks (``field.EXACT_SPHERES``) RRT-Connect alone needed about 4x fewer checks
(median 36,700 -> 8,100) and solved 9 of 10 instead of 6. (2) The margins: 2 mm costs 0.5 points
of free share (8.1 % -> 7.6 %); 0.5 mm solves no more queries and needs 3x the checks (finer
certified steps). (3) RRT-Connect: steps of 0.4 or 1.0 rad (VAMP: 2.0) do worse than 0.6;
VAMP's dynamic domain and tree balancing took 12 -> 15 of 16 queries. (4) Blocked segments
stopped early (one coarse sample in four first) and greedy shortcuts in batches cut a third of
the checks of via paths and smoothing. (5) Some uniform queries are infeasible: the UR5's upper
arm meets its base sphere for joint 2 in about [0.65, 2.5] rad whatever the other joints do
(``separated``); such queries used the whole budget and are no longer drawn. Then: about
23,000 checks a query at about 16 us a check in small numpy batches.

Now (numba installed: ``collision._compiled``): one configuration at a time with early exit
(the exact spheres and sphere pairs compared squared, a square root only where it can matter;
the distance field's lookups skipped when its interior is uniform, as here: only exact spheres,
so no random reads in its 156 MB grid), segments in bisection order inside one call, and
RRT-Connect's whole loop compiled. Measured on 10 queries (CPU time, cProfile, loaded two-core
machine): about 3.2 us a configuration with certified widths and 1.6 us for a verdict alone
(numpy batch of 20,000: 24 us; all on a load of 10-19), median 40 ms CPU a query (full run),
of which about 40 % the blend-radius searches of ``motion.blend`` (segment checks), 25 % the
search, 25 % smoothing, the rest the planner's Python. Left for the targets: fewer checks
(blend radii and smoothing re-check what the search certified) and a vectorised check (VAMP:
eight configurations per SIMD lane set in float32). The 4 of 100 queries still failing use
their 3,000 iterations in 40-200 ms: their start or goal sits in a pocket where almost every
extension fails at once.

Then (issue 19, second round; 40 queries, loaded machine, so counts and same-process ratios):
(1) The collision model is not what refuses VAMP's configurations: on 40,000 random
configurations our verdicts equal the exact sphere model's at the 2 mm margin (8.60 % free,
no configuration either way). (2) The failing queries need 1,300-5,000 iterations (another seed
solves them within 3,000); their start has 0.6-3 % of its 0.6 rad edges free but 7-24 % of its
0.2 rad ones, so a blocked extension now retries its first half (``search.rrt.RETRY_FRACTION``):
RRT-Connect alone, 120 runs of 3,000 iterations, 8 -> 3 failed (at step 1.0: 17 -> 4), for
about a quarter more checks at the median. (3) The check lists, per link group, the exact sphere
obstacles the group's bound comes near, once per configuration (``_compiled.check``): free
configurations 1.7x faster here (same verdicts and widths; the rest is FK and the 236 sphere
pairs, which are the larger part). (4) The time of a query is now the planner's own passes more
than the search: in a cProfile of 40 queries, blend radii (``motion.blend``: fixed samples of
every candidate blend, checked point by point) about 40 %, RRT-Connect about 30 %, smoothing and
roadmap shortcuts 10 %, the one-off roadmap build 10 %. The mesh UR5 (``--arm ur5``, margin
1 cm) needs 1,400-6,000 iterations on its hard queries at about 130 us CPU each (22 checks):
its failures are the budget.

Third round (issue 19; counts and same-run ratios, the machine at a load of 6-8): (1) Blend
radii: ``CollisionChecker.blends_free`` certifies a blend (a quadratic Bezier) in bisection
order with early exit, as segments are, from the joints' speed bound ``max(|2 (c - a)|,
|2 (b - c)|)``; on 252 random UR5 blends the same verdicts as the sampled check of
``motion.curve`` with 15x fewer checks (2,268 against 35,169) and 35x less time. (2) The
failures: restarting the search with a fresh seed stream every 200-800 iterations made them
worse (RRT-Connect alone, 300 runs: 264-291 solved within 30,000 iterations against 295 without
restarts: a tree in a pocket keeps what it grew). What held them back is the dynamic domain in
the UR5's +-2 pi box: a node whose extension failed only takes samples within 4 rad, and
uniform samples almost never fall there; a fifth of the samples around the start or the goal
(``search.rrt.ROOT_SHARE``, 1.0 rad) solved 110 of 110 hard runs (uniform: 101) and the planner
300 of 300 queries over three seeds, at most 3,486 iterations; the default budget is now 20,000
(``PlannerSettings.max_iterations``). (3) The check stops at the width its caller needs
(``_compiled.check``'s ``limit``: a width that covers the gap changes no sample) and the search
checks an edge's new end first, stopping where it is blocked (its other end is a tree node).
Full runs back to back (load about 1): before 96/100, median 32.9 ms, p95 166 ms, p99 326 ms,
5,453 checks a query; after 100/100, 17.5 ms, 207 ms, 381 ms, 3,186 checks. The tail is now the
queries that failed before and the hard ones (1,000-7,000 iterations, 30,000 checks, most of
them RRT-Connect's extensions): cProfile of 100 queries, RRT-Connect about 60 %, smoothing 14 %,
blend radii 13 %, roadmap shortcuts 5 %. Left: a cheaper check (VAMP: eight configurations
at once in float32).

Fourth round (issue 19; the 14 slowest queries of the full run, RRT-Connect alone, 3 seeds,
counts and CPU time, the machine at a load of 5-9): the hard queries' time is the checks (trees
of a few hundred nodes: the nearest-node scans are small), 16.6 checks an iteration: 38 % the
new ends of extensions (88 % of extension edges end blocked), 48 % the bisection of the free
extension edges (12 checks each, full-cost checks of free configurations), 14 % connections.
Batching a segment's bisection samples in float64 structure-of-arrays loops (numba) was no
faster than the scalar check with its early exits (7-10 us against 7-8 us a configuration on
that load). Lazy extensions (the new end and the edge's middle checked as verdicts, the edge
certified only when a connection would use it, a blocked one cut off with its subtree) took
RRT-Connect alone to 8.8 checks an iteration and about half the CPU on those queries, and the
full run's p95 from 140-161 to 102-139 ms side by side; but on the mesh UR5 (``--arm ur5``,
margin 1 cm), whose trees grow to thousands of nodes, blocked lazy edges cut whole subtrees:
its 4 hardest quick queries took 89,000 iterations and 36 s against 68,000 and 24 s, and the
quick run's p95 went from 0.56-0.71 s to 1.45-1.59 s. They are not in the planner (a planner
for every arm may not trade one arm's tail for another's). Kept: a pair's motion bound drops
the joint whose axis runs through the earlier sphere (``kernel._pair_weights``): VAMP's base
sphere sits on joint 1's axis and its pair with the upper arm keeps 2.5 mm in every pose, which
limited the certified width of 35 % of free configurations (median width 0.058 -> 0.082 of a
0.6 rad step); on this problem's full run alone it leaves the figures where they were (median
13.8 ms, p95 199 ms).

Fifth round (issue 19; the 40 queries of the full run that fell through to RRT-Connect, counts,
the machine at a load of 2-3): the roadmap over the cage was the missing piece, not the check.
Its 8 rounds of 1,000 samples found 656-719 free nodes (8 % of the UR5's configurations are
free here) in 73-77 parts, the largest 484 nodes: 42 of 100 queries had both ends joined, but
to different parts, and went to RRT-Connect as if there were no roadmap. Three changes
(``search.roadmap``, ``search.goals``): (1) the nodes asked for are sampled for up to 32 rounds,
and a roadmap whose largest part holds under 85 % of its nodes gets twice the nodes (here 2,000
nodes, the largest part 90 %; 72 queries on the roadmap instead of 54); (2) RRT-Connect's trees
are seeded with the roadmap parts each end joined, so a start in a pocket grows until it meets
any node of the goal's part, and the roadmap's way from that node to the goal is spliced in (on
the query of ``tests/test_planning_clutter.py``'s pocket, 6 seeds: 10,212 iterations against
19,517); (3) parts of at least 5 % of the nodes are bridged to the largest at build time by
RRT-Connect between their nodes (the mesh UR5 keeps two parts of 1,442 and 428 nodes, which
its hard queries' searches joined each time in 2,300-5,500 iterations). Checks a query, same
process, full run: median 2,543 -> 1,906, p95 29,848 -> 5,388, largest 48,420 -> 11,396. The
roadmap is built once per obstacle set before the timed queries, and its build time printed
(about 2 s here: it was inside one of the timed queries before). What the tail is now: the
21 queries RRT-Connect still serves (their ends in pockets that none of the 64 nearest nodes
sees), 30-1,700 iterations and up to 11,400 checks, and the blend radii and smoothing of the
roadmap's longer paths.
Full runs: same period, loaded (main at a load of 3-4, this at 2-3): CPU median 16.8 -> 13.7 ms,
CPU p95 196 -> 43 ms; then a quieter machine: 100/100, median 7.1 ms, p95 23.0 ms, p99 44.2 ms
(roadmap 1.5 s). Of the 100 queries' time (cProfile): blend radii 26 %, smoothing of search
paths 20 %, the roadmap path's shortcuts 15 %, RRT-Connect 12 %, joining the roadmap 9 %.

Certified queries (issue 19): the xArm6 solved 89 of 100 drawn queries because several were
infeasible (an end in a pocket no path reaches). The queries are now read from
``assets/planning/clutter_queries_<arm>.json``: pairs drawn as before (``draw_pair``), each
certified by an independent, longer search whose path PyBullet confirmed free densely, a pair
without a certificate replaced by the next drawn one (``bench_planner_clutter_queries``;
``make_planner_clutter_queries`` writes them and a maintainer re-runs it; the bench refuses a
file made for other parameters, or certifies in-process with ``--certify``). The xArm6's set
replaced 11 of 111 drawn pairs, the UR5's none. Measured on them (full runs, load 1.2-1.9): the UR5 100/100, 0 invalid, median 4.6-5.8 ms, p95
14.5-20.4 ms, p99 27-32 ms; the xArm6 99/100, 0 invalid, median 2.1-2.3 ms, p95 5.5-6.5 ms: its
query 76 (the goal in a pocket that none of its 64 nearest roadmap nodes sees) needs 23,382
RRT-Connect iterations with the planner's seed 0 (3,921 and 7,328 with seeds 1 and 2), beyond
the 20,000 of ``PlannerSettings.max_iterations``.

Sphere obstacles' cost: ``set_obstacles`` time and the memory it allocates (tracemalloc peak and
what stays allocated) against the number of sphere obstacles. Before, a sphere cost about 1 ms
and 75 KB: each obstacle stored its own float32 patch of the distance field, a block of
``((2 (r + band)) / h)^3`` nodes (about 30^3 nodes for a 5 cm sphere with the 10.7 cm band at
1 cm), and the field was rebuilt from those stored patches. Now spheres are kept as their centre
and radius (32 bytes) and drawn straight into the field (``field.DistanceField.rebuild``): the
memory that stays is the grid itself plus bytes per sphere, and the time is one bounded block
per sphere, computed in batches.

    python -m twin.benchmarks.bench_planner_clutter [--quick] [--seed 0] [--arm ur5_spherized]
"""

from __future__ import annotations

import argparse
import contextlib
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
from twin.assets import arms
from twin.benchmarks import bench_planner_clutter_queries as certified
from twin.benchmarks._report import emit_json, print_table
from twin.benchmarks.planner_exact import ExactChecker, time_and_verify

from twin.kinematics import ArmModel
from twin.planning import Planner, PlannerSettings
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.types import Obstacle
from twin.scenes import ItemKind, Scene, SceneItem

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "arms"

#: The issue's anchors (measured there): VAMP, and this planner before the work.
VAMP = {"median_ms": 1.6, "p95_ms": 8.6, "solved": "300/300"}
BEFORE = {"median_ms": 200.0, "p95_ms": 3700.0, "solved": "276/300"}
TARGET = {"median_ms": 16.0, "p95_ms": 86.0}

#: VAMP's sphere cage (``scripts/sphere_cage_example.py``: centres m relative to the Panda's base,
#: whose shoulder is 0.333 m above it; radius 0.2 m), moved to the arm's shoulder and jittered by
#: up to ``CAGE_JITTER`` m per axis (seeded), as VAMP's benchmark jitters it.
CAGE = np.array(
    [
        [0.55, 0, 0.25],
        [0.35, 0.35, 0.25],
        [0, 0.55, 0.25],
        [-0.55, 0, 0.25],
        [-0.35, -0.35, 0.25],
        [0, -0.55, 0.25],
        [0.35, -0.35, 0.25],
        [0.35, 0.35, 0.8],
        [0, 0.55, 0.8],
        [-0.35, 0.35, 0.8],
        [-0.55, 0, 0.8],
        [-0.35, -0.35, 0.8],
        [0, -0.55, 0.8],
        [0.35, -0.35, 0.8],
    ]
) - [0.0, 0.0, 0.333]
CAGE_RADIUS = 0.2
CAGE_JITTER = 0.01
OBSTACLES = len(CAGE)
QUERIES, QUICK_QUERIES = 100, 10
SPHERE_COUNTS, QUICK_SPHERE_COUNTS = (10, 100, 1_000, 10_000), (10, 100, 1_000)
#: The stored-patch anchor is measured up to this many spheres (10,000 of them need about 1 GB).
STORED_ANCHOR_MAX = 1_000


def load_ur5_spherized() -> tuple[ArmModel, PlannerSettings]:
    """The UR5 with VAMP's sphere model; ``motion_margin=0.002`` (the module doc)."""
    model = ArmModel.from_urdf(ASSETS / "ur5_spherized" / "ur5_spherized.urdf")
    return model, PlannerSettings(cell_name="ur5_spherized", motion_margin=0.002)


def load_ur5_mesh() -> tuple[ArmModel, PlannerSettings]:
    """The UR5 (with a Robotiq gripper) from its STL meshes, VAMP's SRDF plus two always-close
    pairs (``assets/arms/ur5/``); sphere covers generated from the meshes."""
    return arms.ur5_mesh_model(), PlannerSettings(cell_name="ur5", **arms.FOREIGN_ARM_SETTINGS)


def load_xarm6() -> tuple[ArmModel, PlannerSettings]:
    """pybullet_data's xArm6 (V-HACD OBJ pieces), no SRDF, flange and tcp on ``link6``."""
    return arms.xarm6_model(), PlannerSettings(cell_name="xarm6", **arms.FOREIGN_ARM_SETTINGS)


#: Arm name -> loader of (model, planner settings). The first entry is the default.
ARMS: dict[str, Callable[[], tuple[ArmModel, PlannerSettings]]] = {
    "ur5_spherized": load_ur5_spherized,
    "ur5": load_ur5_mesh,
    "xarm6": load_xarm6,
}


def _sphere_item(name: str, center: np.ndarray, radius: float) -> SceneItem:
    pose = np.array([*center, 1.0, 0.0, 0.0, 0.0])
    return SceneItem(name, ItemKind.SPHERE, pose, np.array([radius]))


def clutter_scene(shoulder: np.ndarray, rng: np.random.Generator) -> Scene:
    """The 14 spheres of ``CAGE`` around the shoulder (3,) m (base frame), jittered."""
    centers = shoulder + CAGE + rng.uniform(-CAGE_JITTER, CAGE_JITTER, size=CAGE.shape)
    items = tuple(_sphere_item(f"sphere_{i}", c, CAGE_RADIUS) for i, c in enumerate(centers))
    return Scene("clutter", items)


def separated(planner: Planner, start: np.ndarray, goal: np.ndarray, q1_steps: int = 36) -> bool:
    """Whether start and goal (n,) rad lie on two sides of a band of joint 2 that the spheres of
    the first two groups (poses set by joints 1 and 2 alone) block for every joint 1 (sampled:
    ``q1_steps`` values of joint 1, joint 2 every 0.01 rad between the two): no path exists in
    the planner's model. On the UR5 the upper arm meets the base sphere for joint 2 in about
    [0.65, 2.5] rad, whatever the other joints do: uniform queries across that band are
    infeasible (for VAMP's model too, which checks the same sphere pairs)."""
    kernel, c = planner.checker._kernel, planner.checker._spheres()
    group, radii = c.group[kernel.order], c.radii[kernel.order]
    pa, pb = kernel.pair_a, kernel.pair_b
    sel = (group[pa] <= 2) & (group[pb] <= 2)
    if not sel.any():
        return False
    pa, pb = pa[sel], pb[sel]
    q2 = np.linspace(start[1], goal[1], max(2, int(abs(goal[1] - start[1]) / 0.01) + 1))
    q1 = np.linspace(planner.model.lower[0], planner.model.upper[0], q1_steps)
    q = np.zeros((len(q2) * len(q1), len(start)))
    q[:, 0] = np.tile(q1, len(q2))
    q[:, 1] = np.repeat(q2, len(q1))
    x = kernel.centers(q)
    gap = np.linalg.norm(x[:, pa] - x[:, pb], axis=-1) - radii[pa] - radii[pb]
    blocked = (gap.min(axis=1) < planner.checker.margin).reshape(len(q2), len(q1))
    return bool(blocked.all(axis=1).any())


@contextlib.contextmanager
def clutter_problem(arm: str, seed: int):
    """The problem of ``arm`` (``ARMS``) and ``seed``: ``(planner, scene, rng, exact,
    construct_s)``: the planner over the cage (``clutter_scene``, jittered by ``rng``, the
    generator ``[seed, certified.CAGE_STREAM]``, which then draws the queries), PyBullet's exact
    checker of the same scene (open while the block runs) and the planner's construction time
    (s)."""
    model, settings = ARMS[arm]()
    t0 = time.perf_counter()
    planner = Planner(settings, model=model)
    construct_s = time.perf_counter() - t0
    rng = np.random.default_rng([seed, certified.CAGE_STREAM])
    scene = clutter_scene(planner.checker.robot.origin_1(), rng)
    planner.set_obstacles(obstacles_from_scene(scene))
    with ExactChecker(
        model.urdf_path, scene, disabled_pairs=model.disabled_collision_pairs
    ) as exact:
        yield planner, scene, rng, exact, construct_s


def draw_pair(
    planner: Planner, exact: ExactChecker, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The next (start, goal) pair (n,) rad drawn uniformly in the joint limits: both free
    (model and exact), their segment blocked, not ``separated`` (a cheap filter of pairs no
    path joins, each of which would cost the certifier its whole search)."""
    model = planner.model
    while True:
        q = rng.uniform(model.lower, model.upper, size=(2, model.n_joints))
        if not planner.configurations_free(q).all() or exact.colliding_many(q).any():
            continue
        if planner.checker.segment_free(q[0], q[1]) or separated(planner, q[0], q[1]):
            continue
        return q[0], q[1]


def make_queries(
    planner: Planner, exact: ExactChecker, rng: np.random.Generator, count: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` pairs of ``draw_pair`` (not certified: ``make_planner_clutter_queries``)."""
    return [draw_pair(planner, exact, rng) for _ in range(count)]


def _sphere_obstacles(planner: Planner, count: int, rng: np.random.Generator) -> list[Obstacle]:
    """``count`` spheres (radius 5 mm to 5 cm) 0.2 to 0.9 m from the shoulder."""
    d = rng.normal(size=(count, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    centers = planner.checker.robot.origin_1() + d * rng.uniform(0.2, 0.9, size=(count, 1))
    radii = rng.uniform(0.005, 0.05, size=count)
    return [
        Obstacle.from_sphere(f"s{i}", c, float(r)) for i, (c, r) in enumerate(zip(centers, radii))
    ]


def _measured(fn: Callable[[], object]) -> tuple[float, int, int, object]:
    """(time s, tracemalloc peak bytes, bytes still allocated, result) of ``fn()``."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - t0
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak - base, kept - base, out


def _stored_patches(field, obstacles: list[Obstacle]) -> list:
    """The anchor, in the same run: every sphere as a stored float32 patch of its exact signed
    distance on its block of nodes (what ``field.patch`` returned before), then one rebuild."""
    patches = []
    for o in obstacles:
        c, r = o.pose[:3, 3], float(o.dimensions[0])
        corners = np.stack((c - r, c + r))
        p = field._exact_patch(corners, lambda x, c=c, r=r: np.linalg.norm(x - c, axis=-1) - r)
        if p is not None:
            patches.append(p)
    field.rebuild(patches)
    return patches


def sphere_obstacle_cost(planner: Planner, counts, rng: np.random.Generator) -> list[dict]:
    """``set_obstacles`` time (s) and tracemalloc memory (bytes) of ``count`` sphere obstacles
    from an empty planner, beside the stored patches of before (same obstacles, same field)."""
    out = []
    for count in counts:
        obstacles = _sphere_obstacles(planner, count, rng)
        planner.clear_obstacles()
        t, peak, kept, _ = _measured(lambda o=obstacles: planner.set_obstacles(o))
        planner.clear_obstacles()
        row = {"count": count, "time_s": t, "peak_bytes": peak, "kept_bytes": kept}
        if count <= STORED_ANCHOR_MAX:
            t, peak, kept, patches = _measured(
                lambda o=obstacles: _stored_patches(planner._field, o)
            )
            row.update(before_time_s=t, before_peak_bytes=peak, before_kept_bytes=kept)
            del patches
        out.append(row)
    planner.clear_obstacles()
    return out


def _ms(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q) * 1e3) if len(x) else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a run of a few seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arm", choices=list(ARMS), default=next(iter(ARMS)))
    parser.add_argument(
        "--certify",
        action="store_true",
        help="draw and certify the queries in this run (minutes) instead of reading the stored "
        "set (assets/planning/clutter_queries_<arm>.json)",
    )
    args = parser.parse_args()

    with clutter_problem(args.arm, args.seed) as (planner, scene, rng, exact, construct_s):
        settings = planner.settings
        count = QUICK_QUERIES if args.quick else QUERIES
        if args.certify:
            stored = certified.certify(
                planner, exact, lambda: draw_pair(planner, exact, rng), count
            )
        else:
            try:
                stored = certified.load(args.arm, args.seed, planner, scene, count)
            except certified.StaleQueries as e:
                raise SystemExit(f"bench_planner_clutter: {e}") from None
        queries = certified.pairs(stored)
        replaced = sum(q["replaced_before"] for q in stored)
        t0 = time.perf_counter()
        roadmap = planner.prepare_roadmap()  # once per obstacle set, before the timed queries
        roadmap_s = time.perf_counter() - t0
        r = time_and_verify(planner, exact, queries)
    roadmap_nodes = 0 if roadmap is None else len(roadmap.nodes)
    times, n = r["times"], len(queries)
    solved = int(r["ok"].sum())
    med, p95, p99 = _ms(times, 50), _ms(times, 95), _ms(times, 99)
    cpu_med, cpu_p95 = _ms(r["cpu"], 50), _ms(r["cpu"], 95)
    print_table(
        f"{args.arm}: {OBSTACLES} sphere obstacles around the shoulder, {n} blocked-segment "
        f"queries (certified feasible; {replaced} drawn pairs without a certificate replaced), "
        f"motion_margin={settings.motion_margin} m (planner built in {construct_s:.2f} s; "
        f"roadmap of {roadmap_nodes} nodes over the obstacles built in {roadmap_s:.2f} s, once, "
        "before the timed queries)",
        [
            "planner",
            "solved",
            "invalid paths",
            "median ms",
            "p95 ms",
            "p99 ms",
            "CPU median/p95 ms",
            "checks/query",
        ],
        [
            [
                "twin (this run)",
                f"{solved}/{n}",
                r["colliding"],
                med,
                p95,
                p99,
                f"{cpu_med:.1f} / {cpu_p95:.1f}",
                float(np.median(r["checks"])),
            ],
            [
                "twin before (issue)",
                BEFORE["solved"],
                "-",
                BEFORE["median_ms"],
                BEFORE["p95_ms"],
                "-",
                "-",
                28000,
            ],
            ["VAMP (issue)", VAMP["solved"], "0", VAMP["median_ms"], VAMP["p95_ms"], "-", "-", "-"],
            ["target", f"{n}/{n}", 0, TARGET["median_ms"], TARGET["p95_ms"], "-", "-", "-"],
        ],
    )
    counts = QUICK_SPHERE_COUNTS if args.quick else SPHERE_COUNTS
    cost = sphere_obstacle_cost(planner, counts, np.random.default_rng([args.seed, 7]))
    print_table(
        "set_obstacles with sphere obstacles (tracemalloc): now, and the stored patches of before "
        "(same spheres, same run)",
        [
            "spheres",
            "time ms",
            "us/sphere",
            "peak KB",
            "kept B/sphere",
            "before ms",
            "before kept B/sphere",
        ],
        [
            [
                c["count"],
                c["time_s"] * 1e3,
                c["time_s"] * 1e6 / c["count"],
                c["peak_bytes"] / 1024,
                c["kept_bytes"] / c["count"],
                c.get("before_time_s", float("nan")) * 1e3,
                c.get("before_kept_bytes", float("nan")) / c["count"],
            ]
            for c in cost
        ],
    )
    emit_json(
        "bench_planner_clutter",
        {
            "arm": args.arm,
            "queries": n,
            "replaced_queries": replaced,
            "solved": solved,
            "success": solved / n,
            "invalid_paths": r["colliding"],
            "replay_mismatches": r["mismatches"],
            "median_ms": med,
            "p95_ms": p95,
            "p99_ms": p99,
            "cpu_median_ms": cpu_med,
            "cpu_p95_ms": cpu_p95,
            "compiled_checks": planner.checker.compiled,
            "roadmap_build_s": roadmap_s,
            "roadmap_nodes": roadmap_nodes,
            "median_checks": float(np.median(r["checks"])),
            "median_over_vamp": med / VAMP["median_ms"],
            "p95_over_vamp": p95 / VAMP["p95_ms"],
            "median_over_before": med / BEFORE["median_ms"],
            "p95_over_before": p95 / BEFORE["p95_ms"],
            "sphere_obstacles": {
                str(c["count"]): {
                    "time_ms": c["time_s"] * 1e3,
                    "kept_bytes_per_sphere": c["kept_bytes"] / c["count"],
                    "peak_kb": c["peak_bytes"] / 1024,
                    "before_time_ms": c.get("before_time_s", float("nan")) * 1e3,
                    "before_kept_bytes_per_sphere": c.get("before_kept_bytes", float("nan"))
                    / c["count"],
                }
                for c in cost
            },
        },
    )


if __name__ == "__main__":
    main()
