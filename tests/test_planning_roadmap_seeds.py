"""The roadmap over the static obstacles in clutter: grown while it is poorly connected (a function
of the scene and the planner's seed only), and RRT-Connect's trees seeded with the roadmap parts
a query's ends join (``search.goals``): a start in a pocket meets any node of the goal's part."""

from __future__ import annotations

import numpy as np
import pytest
from test_planning_clutter import POCKET_GOAL, POCKET_START
from twin.benchmarks.bench_planner_clutter import clutter_scene, load_ur5_spherized
from twin.benchmarks.planner_exact import ExactChecker, verify_path

from twin.planning import InitialState, PathRequest, Planner, PlannerSettings
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.planner import ROADMAP_STREAM
from twin.planning.search import roadmap as rm
from twin.planning.search import rrt


@pytest.fixture(scope="module")
def ur5():
    """The UR5 clutter planner of ``bench_planner_clutter`` (seed 0), its scene and roadmap,
    built in slices of 50 ms (``prepare_roadmap(time_limit_s=...)``, as queries build it)."""
    model, settings = load_ur5_spherized()
    planner = Planner(settings, model=model)
    scene = clutter_scene(planner.checker.robot.origin_1(), np.random.default_rng([0, 19]))
    planner.set_obstacles(obstacles_from_scene(scene))
    roadmap = None
    while roadmap is None:
        roadmap = planner.prepare_roadmap(time_limit_s=0.05)
    return planner, scene, roadmap


def _largest_share(roadmap: rm.Roadmap) -> float:
    return float(np.bincount(roadmap.component).max() / len(roadmap.nodes))


def test_a_poorly_connected_roadmap_grows_to_twice_its_nodes(ur5):
    planner, _, roadmap = ur5
    asked = planner.settings.roadmap_nodes
    assert len(roadmap.nodes) == min(rm.GROW_LIMIT * asked, rm.TABLE_NODES) == 2 * asked
    assert planner.checker.free(roadmap.nodes).all()
    a = np.array([i for i, adj in enumerate(roadmap.adjacency) for j, _ in adj if i < j])
    b = np.array([j for i, adj in enumerate(roadmap.adjacency) for j, _ in adj if i < j])
    assert len(a) == roadmap.edges
    assert planner.checker.segments_free(roadmap.nodes[a], roadmap.nodes[b]).all()
    assert _largest_share(roadmap) >= rm.GROW_SHARE
    # what the growth is for: the first 1,000 nodes alone keep a smaller largest part
    rng = np.random.default_rng([planner.settings.seed, ROADMAP_STREAM])
    again = rm.RoadmapBuild(
        planner.checker, rng, asked
    ).finish()  # in one go; the fixture's in slices
    assert np.array_equal(again.nodes, roadmap.nodes)  # the same planner state, the same map
    assert again.adjacency == roadmap.adjacency
    assert np.array_equal(again._dist, roadmap._dist)
    assert np.array_equal(again._pred, roadmap._pred)
    assert planner.roadmap_progress()[0] > 20  # the steps of a build spread over slices
    small = rm.Roadmap(roadmap.nodes[:asked], *_edges_within(roadmap, asked), 0.0)
    assert _largest_share(small) < rm.GROW_SHARE


def _edges_within(roadmap: rm.Roadmap, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The roadmap's edges between its first ``count`` nodes."""
    pairs = [(i, j) for i, adj in enumerate(roadmap.adjacency[:count]) for j, _ in adj]
    pairs = [(i, j) for i, j in pairs if i < j < count]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def test_a_well_connected_roadmap_keeps_the_nodes_asked_for():
    planner = Planner(PlannerSettings(seed=0))  # our arm, no obstacles
    roadmap = planner.prepare_roadmap()
    assert len(roadmap.nodes) == planner.settings.roadmap_nodes
    assert _largest_share(roadmap) >= rm.GROW_SHARE


def test_seeded_trees_take_a_pocket_start_to_the_goals_roadmap_part(ur5):
    planner, _, roadmap = ur5
    chk, step = planner.checker, planner.settings.rrt_step
    start, goal = np.array(POCKET_START), np.array(POCKET_GOAL)
    found = roadmap.path(chk, start, goal)
    assert found.path is None and found.ends is not None
    seeds = roadmap.seeds(found.ends)
    goal_part = roadmap.component[found.ends.goal_nodes]
    assert np.isin(roadmap.component[seeds[1]], goal_part).all() and len(seeds[1]) > 1000
    plain, seeded = [], []
    for seed in range(6):
        r = rrt.rrt_connect(chk, start, goal, np.random.default_rng(seed), step, 20000)
        plain.append(r.iterations)
        s = rrt.rrt_connect(
            chk,
            start,
            goal,
            np.random.default_rng(seed),
            step,
            20000,
            seeds=(roadmap.nodes[seeds[0]], roadmap.nodes[seeds[1]]),
        )
        assert s.path is not None
        roots = [start, goal]
        for side, root in enumerate(s.roots):
            if root > 0:
                roots[side] = roadmap.nodes[seeds[side][root - 1]]
        assert np.array_equal(s.path[0], roots[0]) and np.array_equal(s.path[-1], roots[1])
        assert chk.segments_free(s.path[:-1], s.path[1:]).all()
        way = roadmap.through(found.ends, 1, int(seeds[1][s.roots[1] - 1]))
        assert np.array_equal(way[0], roots[1])  # from the seed reached towards the goal
        assert chk.segments_free(way, np.vstack((way[1:], goal))).all()
        seeded.append(s.iterations)
    # iterations on seeds 0-5: plain 11053, 1447, 3117, 1753, 838, 1309; seeded 4144, 567,
    # 1695, 1000, 2055, 751
    assert sum(seeded) < 0.6 * sum(plain), (plain, seeded)


def test_pocket_plans_are_valid_exactly_and_replay(ur5):
    planner, scene, _ = ur5
    start, goal = np.array(POCKET_START), np.array(POCKET_GOAL)
    first = planner.path(InitialState(start), PathRequest([goal]))
    again = planner.path(InitialState(start), PathRequest([goal]))
    assert first, first.error
    assert first.stats["iterations"] > 0 and first.stats["roadmap_paths"] == 0
    path = np.vstack([start, *[w.configuration for w in first.path()]])
    assert np.array_equal(path[-1], goal)
    assert np.array_equal(path, np.vstack([start, *[w.configuration for w in again.path()]]))
    pairs = planner.model.disabled_collision_pairs
    with ExactChecker(planner.model.urdf_path, scene, disabled_pairs=pairs) as exact:
        assert not verify_path(exact, path, planner.checker.travel)


def test_bridges_join_a_large_part_to_the_largest_by_free_edges():
    # our arm, no obstacles: every part joinable
    planner = Planner(PlannerSettings(seed=0, roadmap_nodes=300))
    chk = planner.checker
    q = planner.prepare_roadmap().nodes
    a, b = rm.run_steps(rm._knn_edges(q, rm.NEIGHBOURS))
    # two parts cut apart: edges only within the first 200 and within the last 100 nodes
    within = (a < 200) == (b < 200)
    a, b = a[within], b[within]
    a, b = a[chk.segments_free(q[a], q[b])], b[chk.segments_free(q[a], q[b])]
    assert len(np.unique(rm._components(len(q), a, b)[[0, 299]])) == 2
    nodes, a2, b2 = rm.run_steps(rm._bridged(chk, np.random.default_rng(0), q, a, b, 0.6))
    assert np.array_equal(nodes[: len(q)], q) and len(nodes) - len(q) <= rm.BRIDGE_NODES
    assert np.array_equal(a2[: len(a)], a) and np.array_equal(b2[: len(b)], b)
    assert np.all(a2 <= b2) and chk.segments_free(nodes[a2], nodes[b2]).all()
    part = rm._components(len(nodes), a2, b2)
    assert part[0] == part[299]  # the two parts joined
    again = rm.run_steps(rm._bridged(chk, np.random.default_rng(0), q, a, b, 0.6))
    assert all(np.array_equal(x, y) for x, y in zip(again, (nodes, a2, b2)))
