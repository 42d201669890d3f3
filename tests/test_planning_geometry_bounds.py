"""The planner's geometry bounds (docs/formats/planner-geometry.md): beyond them, one clear
``PlanningInputError`` naming the field and the bound; within them, nothing is dropped (issue 31:
a 1e18 m box was silently dropped and a "collision-free" path returned through it)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.planning import (
    CarriedObject,
    Obstacle,
    Planner,
    PlannerSettings,
    PlanningInputError,
    Tcp,
    ToolBoxElement,
    TransformedBox,
    obstacles_from_scene,
)
from twin.planning._validate import ATTACHED_EXTENT_M, WORLD_EXTENT_M
from twin.planning.collision import geometry
from twin.scenes import SceneFormatError, load_scene

FAR = 1.5 * WORLD_EXTENT_M


def at(x: float, y: float, z: float) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


@pytest.fixture(scope="module")
def planner():
    return Planner(PlannerSettings(seed=0))


@pytest.fixture(scope="module")
def goal(planner):
    """A configuration (6,) rad near home and its TCP position (3,) m, base frame."""
    q = np.asarray(planner.model.home_q, dtype=float).copy()
    q[1] += 0.3
    return q, planner.tcp_pose(q)[:3, 3]


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: TransformedBox(np.eye(4), [1e18, 1e18, 1e18]), "box dimensions"),
        (lambda: TransformedBox(at(0, 0, -1e17), [1, 1, 1]), "box transform"),
        (lambda: TransformedBox(np.eye(4), [1e-300, 1, 1]), "box dimensions.*> 0"),
        (lambda: Obstacle.from_sphere("s", [0, 0, 0], 1e19), "sphere radius"),
        (lambda: Obstacle.from_sphere("s", [FAR, 0, 0], 1.0), "sphere centre"),
        (lambda: Obstacle.from_cylinder("c", np.eye(4), 1.0, 1e6), "cylinder length"),
        (lambda: Obstacle.from_cylinder("c", at(0, FAR, 0), 1.0, 1.0), "cylinder pose"),
        (lambda: Obstacle.from_mesh("m", [[[0, 0, 0], [FAR, 0, 0], [0, 1, 0]]]), "mesh"),
        (lambda: Obstacle.from_point_cloud("p", [[0, 0, FAR]]), "point cloud"),
        (lambda: Obstacle.from_point_cloud("p", [[0, 0, 0]], point_radius=1e-300), "point_r"),
        (lambda: Obstacle.from_point_cloud("p", [[0, 0, 0]], point_radius=FAR), "point_r"),
        (lambda: Tcp(at(0, 0, 2.0)), "Tcp transform"),
        (lambda: ToolBoxElement(np.eye(4), [0.1, 0.1, 5.0]), "rigid box dimensions"),
        (lambda: ToolBoxElement(at(3.0, 0, 0), [0.1, 0.1, 0.1]), "tool element transform"),
        (
            lambda: ToolBoxElement(np.eye(4), [0.1] * 3, TransformedBox(at(0, 0, 5), [0.1] * 3)),
            "compliant_box transform",
        ),
        (lambda: CarriedObject.from_box(TransformedBox(np.eye(4), [2, 2, 2])), "carried object"),
        (lambda: CarriedObject.from_mesh(at(0, 0, 1.5), [np.eye(3)]), "carried object transform"),
    ],
)
def test_geometry_beyond_the_bound_is_one_clear_error(build, message):
    with pytest.raises(PlanningInputError, match=message) as err:
        build()
    text = str(err.value)
    assert "\n" not in text
    assert any(bound in text for bound in ("1000", f"{ATTACHED_EXTENT_M:g} m", "> 0", "1e-06"))


def test_a_tool_box_no_sphere_cover_fits_is_an_input_error(planner):
    from twin.planning import ReplaceableTool

    tool = ReplaceableTool.from_box_elements([ToolBoxElement(np.eye(4), [1.0, 1.0, 1.0])])
    with pytest.raises(PlanningInputError, match="cannot cover a box"):
        planner.set_replaceable_tool(tool)
    planner.clear_replaceable_tool()


def test_a_scene_beyond_the_bound_names_file_and_item(tmp_path):
    item = {"name": "floor", "kind": "box", "pose": [0, 0, -1, 1, 0, 0, 0], "size": [1e18] * 3}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"format": "twin-scene", "version": 1, "items": [item]}))
    with pytest.raises(SceneFormatError, match=r"huge\.json: item 'floor'.*at most 1000"):
        load_scene(path)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SceneFormatError, match="nested too deeply"):
        load_scene(path)
    path.write_bytes(b'{"format": "twin-scene", "name": "\xff"}')
    with pytest.raises(SceneFormatError, match="not UTF-8"):
        load_scene(path)


def test_a_scene_at_the_bound_is_a_planner_input_at_the_bound(tmp_path):
    """A scene box of the largest size centred as far out as allowed becomes a planner box
    (bottom-centred, so its transform lies beyond the bound: the bound holds for the centre)."""
    s = WORLD_EXTENT_M
    item = {"name": "floor", "kind": "box", "pose": [0, 0, -s, 1, 0, 0, 0], "size": [s, s, s]}
    path = tmp_path / "floor.json"
    path.write_text(json.dumps({"format": "twin-scene", "version": 1, "items": [item]}))
    (box,) = obstacles_from_scene(path)
    assert box.pose[2, 3] == pytest.approx(-1.5 * s)
    item["pose"][2] = -1.001 * s
    path.write_text(json.dumps({"format": "twin-scene", "version": 1, "items": [item]}))
    with pytest.raises(SceneFormatError, match="within \\+-1000 m"):
        load_scene(path)


def test_a_box_at_the_bound_blocks_what_it_covers(planner, goal):
    """A 1000 m cube whose top face is 5 cm above the goal's TCP: the goal is blocked (the
    1e17 m box of issue 31 did this too; 1e18 m was dropped, and is now refused)."""
    q, p = goal
    s = WORLD_EXTENT_M
    bottom = at(p[0], p[1], p[2] + 0.05 - s)
    planner.set_obstacles([Obstacle.from_box("floor", TransformedBox(bottom, [s, s, s]))])
    assert not planner.configurations_free(q[None])[0]
    planner.clear_obstacles()
    assert planner.configurations_free(q[None])[0]


@pytest.mark.parametrize("kind", ["sphere", "cylinder"])
def test_round_primitives_at_the_bound_block_what_they_cover(planner, goal, kind):
    q, p = goal
    r = WORLD_EXTENT_M
    if kind == "sphere":
        o = Obstacle.from_sphere("big", p - [0.0, 0.0, r - 0.05], r)
    else:
        o = Obstacle.from_cylinder("big", at(*(p - [0.0, 0.0, 0.5 * r - 0.05])), r, r)
    planner.set_obstacles([o])
    assert not planner.configurations_free(q[None])[0]
    planner.clear_obstacles()


@settings(max_examples=25, deadline=None)
@given(
    size=st.floats(1.0, WORLD_EXTENT_M / 2.0),
    corners=st.lists(st.floats(0.2, 1.0), min_size=3, max_size=3),
    turn=st.floats(0.0, 2.0 * np.pi),
)
def test_a_large_mesh_through_the_goal_is_never_dropped(planner, goal, size, corners, turn):
    """A triangle of up to a kilometre whose plane holds the goal's TCP (the point strictly
    inside it): the goal is blocked, and setting it costs no more than a small mesh
    (``triangles_near_box`` samples only the part near the grid)."""
    q, p = goal
    angles = turn + np.array([0.0, 2.0, 4.0]) * np.pi / 3.0
    ring = np.stack([np.cos(angles), np.sin(angles), np.zeros(3)], axis=1)
    tri = p + size * np.asarray(corners)[:, None] * ring
    planner.set_obstacles([Obstacle.from_mesh("sheet", tri[None])])
    assert not planner.configurations_free(q[None])[0]


@settings(max_examples=25, deadline=None)
@given(
    far=st.lists(
        st.tuples(*[st.floats(-WORLD_EXTENT_M, WORLD_EXTENT_M)] * 3), min_size=0, max_size=20
    ),
    radius=st.sampled_from([0.0, 0.005, 0.02]),
)
def test_a_point_cloud_spanning_the_bound_keeps_the_point_at_the_goal(planner, goal, far, radius):
    q, p = goal
    cloud = np.array([*far, tuple(p)], dtype=float)
    planner.set_obstacles([Obstacle.from_point_cloud("cloud", cloud, point_radius=radius)])
    assert not planner.configurations_free(q[None])[0]


def test_triangles_near_box_covers_the_box_part_only():
    """A 2 km triangle split against a 1 m box: every kept piece reaches the box, the pieces
    cover the surface inside it (points sampled there are within the spacing of a sample), and
    there are few of them."""
    tri = np.array([[[-1000.0, -1000.0, 0.0], [1000.0, -1000.0, 0.0], [0.0, 1000.0, 0.0]]])
    lo, hi = np.array([-0.5, -0.5, -0.5]), np.array([0.5, 0.5, 0.5])
    near = geometry.triangles_near_box(tri, lo, hi, 0.32)
    assert 0 < len(near) < 200
    assert np.all((near.max(axis=1) >= lo) & (near.min(axis=1) <= hi))
    samples = geometry.sample_triangles_near_box(tri, 0.005, lo, hi)
    probe = np.random.default_rng(0).uniform(-0.5, 0.5, (40, 3)) * [1, 1, 0]
    d = np.linalg.norm(probe[:, None] - samples[None], axis=-1).min(axis=1)
    assert d.max() <= 0.005
    assert len(geometry.triangles_near_box(tri + [0, 0, 10], lo, hi, 0.32)) == 0


def test_shipped_scenes_are_within_the_bounds():
    for name in ("table", "shelf", "bin", "cage"):
        assert obstacles_from_scene(name)
