"""The planner API: every call, its results, and bad input rejected with a clear message."""

from __future__ import annotations

import numpy as np
import pytest

from twin.planning import (
    CarriedObject,
    GoalPrioritization,
    InitialState,
    Movement,
    Obstacle,
    PathError,
    PathRequest,
    PathResult,
    PathResultError,
    Planner,
    PlannerSettings,
    PlanningInputError,
    ReplaceableTool,
    Tcp,
    ToolBoxElement,
    TransformedBox,
    Waypoint,
)
from twin.planning.collision import geometry
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.scenes import ItemKind, load_scene

# A stretched-out configuration (TCP far in front of the robot) and its neighbours.
Q_OUT = np.array([0.0, 0.9, 0.9, 0.0, 0.8, 0.0])


def translation(x: float, y: float, z: float) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


@pytest.fixture(scope="module")
def planner() -> Planner:
    return Planner(PlannerSettings(seed=3))


@pytest.fixture
def clean(planner: Planner):
    planner.clear_obstacles()
    planner.clear_carried_object()
    planner.clear_replaceable_tool()
    planner.set_tcp(Tcp(planner._flange_T_urdf_tcp))
    yield planner
    planner.clear_obstacles()
    planner.clear_carried_object()
    planner.clear_replaceable_tool()
    planner.set_tcp(Tcp(planner._flange_T_urdf_tcp))


def box_at(name: str, center: np.ndarray, size: float) -> Obstacle:
    """A cube of edge ``size`` centred on ``center`` (base frame)."""
    return Obstacle.from_box(
        name, TransformedBox(translation(*(center - [0, 0, size / 2])), [size] * 3)
    )


# --------------------------------------------------------------------------- value types
def test_transformed_box_rejects_bad_poses_and_dimensions():
    bad = translation(0, 0, 0)
    bad[0, 3] = np.nan
    with pytest.raises(PlanningInputError, match="non-finite"):
        TransformedBox(bad, [1, 1, 1])
    with pytest.raises(PlanningInputError, match="4x4"):
        TransformedBox(np.eye(3), [1, 1, 1])
    sheared = np.eye(4)
    sheared[0, 1] = 0.5
    with pytest.raises(PlanningInputError, match="rotation"):
        TransformedBox(sheared, [1, 1, 1])
    with pytest.raises(PlanningInputError, match="> 0"):
        TransformedBox(np.eye(4), [1, 0, 1])


def test_tcp_needs_a_nonzero_direction_and_keeps_its_values():
    with pytest.raises(PlanningInputError, match="non-zero"):
        Tcp(np.eye(4), [0, 0, 0])
    tcp = Tcp(translation(0, 0, 0.2), [1, 0, 0])
    assert np.allclose(tcp.transform[:3, 3], [0, 0, 0.2])
    assert np.allclose(tcp.tool_direction, [1, 0, 0])


def test_obstacle_constructors_check_shapes_colours_and_counts():
    tris = geometry.box_triangles(np.array([0.1, 0.1, 0.1]))
    assert len(Obstacle.from_mesh("m", tris).triangles) == 12
    coloured = Obstacle.from_colored_mesh("m", tris, [0.1, 0.2, 0.3, 0.0])
    assert np.allclose(coloured.colors, [[0.1, 0.2, 0.3]])  # alpha ignored
    with pytest.raises(PlanningInputError, match=r"\(T, 3, 3\)"):
        Obstacle.from_mesh("m", np.zeros((4, 3)))
    bad = tris.copy()
    bad[0, 0, 0] = np.inf
    with pytest.raises(PlanningInputError, match="non-finite"):
        Obstacle.from_mesh("m", bad)
    pts = np.zeros((5, 3))
    cloud = Obstacle.from_colored_point_cloud("c", pts, np.full((5, 4), 0.5))
    assert cloud.colors.shape == (5, 3)
    with pytest.raises(PlanningInputError, match="counts must be equal"):
        Obstacle.from_colored_point_cloud("c", pts, np.full((4, 4), 0.5))
    with pytest.raises(PlanningInputError, match=r"\[0, 1\]"):
        Obstacle.from_colored_point_cloud("c", pts, np.full((5, 4), 2.0))
    with pytest.raises(PlanningInputError, match="name"):
        Obstacle.from_point_cloud("", pts)
    with pytest.raises(PlanningInputError, match=r"\(N, 3\)"):
        Obstacle.from_point_cloud("c", np.zeros((5, 2)))


def test_path_request_validation_and_enum_strings():
    with pytest.raises(PlanningInputError, match="at least one goal"):
        PathRequest([])
    with pytest.raises(PlanningInputError, match="non-finite"):
        PathRequest([[0, 0, 0, np.nan, 0, 0]])
    with pytest.raises(PlanningInputError, match="list of configurations"):
        PathRequest(np.zeros(6))
    req = PathRequest([np.zeros(6)], goal_prioritization="list_order", description="x")
    assert req.goal_prioritization is GoalPrioritization.LIST_ORDER
    assert PathRequest([np.zeros(6)]).goal_prioritization is GoalPrioritization.SHORTEST_PATH
    with pytest.raises(PlanningInputError, match="'list_order'"):
        PathRequest([np.zeros(6)], goal_prioritization="first")


def test_failed_path_result_and_initial_state():
    tcp = Tcp(np.eye(4))
    failed = PathResult(PathError.BLOCKED_PATH, None, tcp)
    assert not failed and failed.path() == []
    with pytest.raises(PathResultError, match="blocked_path"):
        failed.final_configuration()
    with pytest.raises(PlanningInputError, match="failed"):
        InitialState(failed)
    ok = PathResult(None, 0, tcp, (Waypoint(np.ones(6)),))
    assert ok and np.array_equal(InitialState(ok).configuration, np.ones(6))
    assert ok.path()[0].movement is Movement.JOINT


def test_replaceable_tool_needs_elements():
    with pytest.raises(PlanningInputError, match="at least one"):
        ReplaceableTool.from_box_elements([])
    elem = ToolBoxElement(
        np.eye(4), [0.05, 0.05, 0.1], TransformedBox(translation(0, 0, 0.1), [0.03] * 3)
    )
    boxes = ReplaceableTool.from_box_elements([elem]).boxes_in_flange()
    assert len(boxes) == 2 and np.allclose(boxes[1].bottom_centered_transform[:3, 3], [0, 0, 0.1])


# ------------------------------------------------------------------------------- kinematics
def test_inverse_kinematics_keeps_the_posture_and_honours_the_tcp(clean: Planner):
    model = clean.model
    rng = np.random.default_rng(0)
    for q in rng.uniform(0.8 * model.lower, 0.8 * model.upper, size=(20, 6)):
        pose = clean.tcp_pose(q)
        sol = clean.compute_inverse_kinematics(pose, q)
        assert sol is not None
        assert np.allclose(clean.tcp_pose(sol), pose, atol=1e-6)
        assert np.array_equal(model.posture(sol), model.posture(q))
    clean.set_tcp(Tcp(translation(0.02, 0.0, 0.2), [0, 0, 1]))
    pose = clean.tcp_pose(Q_OUT)
    sol = clean.compute_inverse_kinematics(pose, Q_OUT)
    assert sol is not None and np.allclose(clean.tcp_pose(sol), pose, atol=1e-6)
    assert clean.compute_inverse_kinematics(translation(5.0, 0, 0), Q_OUT) is None
    bad = pose.copy()
    bad[1, 3] = np.nan
    with pytest.raises(PlanningInputError, match="non-finite"):
        clean.compute_inverse_kinematics(bad, Q_OUT)
    with pytest.raises(PlanningInputError, match="6 joint values"):
        clean.compute_inverse_kinematics(pose, Q_OUT[:5])


def test_tcp_round_trip_and_type_check(clean: Planner):
    tcp = Tcp(translation(0, 0, 0.3), [0, 1, 0])
    clean.set_tcp(tcp)
    assert clean.get_tcp() is tcp
    with pytest.raises(PlanningInputError, match="Tcp"):
        clean.set_tcp(np.eye(4))


# --------------------------------------------------------------------------------- obstacles
def test_obstacles_are_unique_by_name_and_replaced(clean: Planner):
    tip = clean.tcp_pose(Q_OUT)[:3, 3]
    assert clean.configurations_free(Q_OUT)[0]
    clean.set_obstacles([box_at("block", tip, 0.1)])
    assert not clean.configurations_free(Q_OUT)[0]
    clean.set_obstacles([box_at("block", tip + [0, 0, 2.0], 0.1)])  # same name: replaced
    assert clean.configurations_free(Q_OUT)[0]
    assert [o.name for o in clean.obstacles()] == ["block"]
    with pytest.raises(PlanningInputError, match="twice"):
        clean.set_obstacles([box_at("a", tip, 0.1), box_at("a", tip, 0.1)])
    clean.set_obstacles([box_at("other", tip, 0.1)])
    assert not clean.configurations_free(Q_OUT)[0]
    clean.clear_obstacles()
    assert clean.configurations_free(Q_OUT)[0] and clean.obstacles() == []


def test_one_call_for_many_obstacles_rebuilds_the_field_once(clean: Planner, monkeypatch):
    calls = []
    original = clean._field.rebuild
    monkeypatch.setattr(clean._field, "rebuild", lambda p: (calls.append(1), original(p)))
    clean.set_obstacles([box_at(f"b{i}", np.array([0.5, 0.1 * i, 0.05]), 0.05) for i in range(5)])
    assert len(calls) == 1


def test_point_cloud_clipping_with_a_box_and_a_closed_mesh(clean: Planner):
    tip = clean.tcp_pose(Q_OUT)[:3, 3]
    rng = np.random.default_rng(1)
    pts = tip + rng.uniform(-0.04, 0.04, size=(400, 3))
    clean.set_obstacles(
        [Obstacle.from_colored_point_cloud("cloud", pts, rng.uniform(size=(400, 4)))]
    )
    assert not clean.configurations_free(Q_OUT)[0]
    half = TransformedBox(translation(*(tip - [0, 0, 0.05])), [0.1, 0.1, 0.05])  # lower half
    expected = int(
        geometry.points_inside_box(half.bottom_centered_transform, half.dimensions, pts).sum()
    )
    assert clean.clip_point_cloud_with_box(half) == expected > 0
    cloud = clean.obstacles()[0]
    assert len(cloud.points) == len(cloud.colors) == 400 - expected
    open_mesh = geometry.box_triangles(np.array([0.2, 0.2, 0.2]))[:-1]
    with pytest.raises(PlanningInputError, match="closed mesh"):
        clean.clip_point_cloud_with_mesh(translation(*(tip - [0, 0, 0.1])), open_mesh)
    cube = geometry.box_triangles(np.array([0.2, 0.2, 0.2]))
    assert (
        clean.clip_point_cloud_with_mesh(translation(*(tip - [0, 0, 0.1])), cube) == 400 - expected
    )
    assert clean.configurations_free(Q_OUT)[0]


def test_carried_object_and_tool_extend_the_robot(clean: Planner):
    pose = clean.tcp_pose(Q_OUT)
    ahead = pose[:3, 3] + 0.25 * pose[:3, 2]  # 25 cm along the tool direction
    clean.set_obstacles([box_at("post", ahead, 0.1)])
    assert clean.configurations_free(Q_OUT)[0]
    long_box = TransformedBox(np.eye(4), [0.04, 0.04, 0.3])  # along the tool direction
    clean.set_carried_object(CarriedObject.from_box(long_box))
    assert not clean.configurations_free(Q_OUT)[0]
    clean.clear_carried_object()
    assert clean.configurations_free(Q_OUT)[0]
    mesh = geometry.box_triangles(np.array([0.04, 0.04, 0.3]))
    clean.set_carried_object(CarriedObject.from_mesh(np.eye(4), mesh))
    assert not clean.configurations_free(Q_OUT)[0]
    clean.clear_carried_object()
    element = ToolBoxElement(np.eye(4), [0.05, 0.05, 0.45])  # from the flange, past the TCP
    clean.set_replaceable_tool(ReplaceableTool.from_box_elements([element]))
    assert not clean.configurations_free(Q_OUT)[0]
    clean.clear_replaceable_tool()
    assert clean.configurations_free(Q_OUT)[0]
    with pytest.raises(PlanningInputError, match="CarriedObject"):
        clean.set_carried_object(long_box)


def test_repr_names_the_state(clean: Planner):
    clean.set_obstacles([box_at("crate", np.array([0.5, 0, 0.05]), 0.05)])
    text = repr(clean)
    assert "twin_arm" in text and "crate" in text and "spheres=" in text


def test_obstacles_from_scene_cover_every_item():
    for name in ("table", "shelf", "bin", "cage"):
        scene = load_scene(name)
        obstacles = obstacles_from_scene(name)
        assert [o.name for o in obstacles] == list(scene.names)
        for item, obstacle in zip(scene.items, obstacles):
            if item.kind is ItemKind.BOX:
                centre = obstacle.pose @ np.array([0, 0, item.dims[2] / 2, 1])
                assert np.allclose(centre[:3], item.pose[:3])
            if item.kind is ItemKind.POINT_CLOUD:
                r = item.dims[0]
                assert obstacle.point_radius == pytest.approx(r * np.sqrt(3))
                world = item.world_points()
                d = np.linalg.norm(world[:, None] - obstacle.points[None], axis=-1).min(axis=1)
                assert np.all(d <= r * np.sqrt(3) + 1e-9)  # every point inside a voxel sphere


# ------------------------------------------------------------------------------------- paths
def test_free_path_excludes_the_start_and_ends_at_the_goal(clean: Planner):
    goal = Q_OUT + [0.8, -0.3, 0.2, 0.5, -0.4, 1.0]
    result = clean.path(InitialState(Q_OUT), PathRequest([goal], description="simple"))
    assert result and result.selected_goal_idx == 0 and result.tcp is clean.get_tcp()
    assert np.array_equal(result.final_configuration(), goal)
    assert not np.array_equal(result.path()[0].configuration, Q_OUT)
    again = clean.path(InitialState(result), PathRequest([Q_OUT]))
    assert again and np.array_equal(again.final_configuration(), Q_OUT)


def test_path_errors_as_the_reference_defines_them(clean: Planner):
    tip = clean.tcp_pose(Q_OUT)[:3, 3]
    far = Q_OUT + [1.5, 0, 0, 0, 0, 0]
    outside = clean.model.upper + 0.1
    clean.set_obstacles([box_at("block", tip, 0.1)])
    assert clean.path(InitialState(Q_OUT), PathRequest([far])).error is PathError.BLOCKED_START
    clean.clear_obstacles()
    r = clean.path(InitialState(far), PathRequest([outside, outside]))
    assert r.error is PathError.KINEMATIC_VIOLATION and r.selected_goal_idx is None
    clean.set_obstacles([box_at("block", tip, 0.1)])
    r = clean.path(InitialState(far), PathRequest([outside, Q_OUT]))
    assert r.error is PathError.BLOCKED_END and r.path() == []


def test_blocked_path_when_start_and_goal_are_not_connected():
    # A wall on the +x half-plane (y = 0) from 10 cm off the base axis: joint 1 cannot carry the
    # arm across it, and cannot go round the back (its limits stop short of +-pi).
    planner = Planner(PlannerSettings(seed=0, max_iterations=20))
    wall = TransformedBox(translation(0.6, 0, -1.0), [1.0, 0.04, 2.5])
    planner.set_obstacles([Obstacle.from_box("wall", wall)])
    left, right = Q_OUT + [-1.5, 0, 0, 0, 0, 0], Q_OUT + [1.5, 0, 0, 0, 0, 0]
    assert planner.configurations_free(np.array([left, right])).all()
    result = planner.path(InitialState(left), PathRequest([right]))
    assert result.error is PathError.BLOCKED_PATH and result.selected_goal_idx is None


def test_goal_prioritization(clean: Planner):
    near = Q_OUT + [0.3, 0, 0, 0, 0, 0]
    far = Q_OUT + [-1.0, 0, 0, 0, 0, 0.5]
    listed = clean.path(
        InitialState(Q_OUT), PathRequest([far, near], goal_prioritization="list_order")
    )
    assert listed.selected_goal_idx == 0
    shortest = clean.path(InitialState(Q_OUT), PathRequest([far, near]))
    assert shortest.selected_goal_idx == 1
    tip = clean.tcp_pose(far)[:3, 3]
    clean.set_obstacles([box_at("at_far", tip, 0.1)])
    listed = clean.path(
        InitialState(Q_OUT), PathRequest([far, near], goal_prioritization="list_order")
    )
    assert listed.selected_goal_idx == 1  # the first goal is blocked


def test_path_input_errors(clean: Planner):
    with pytest.raises(PlanningInputError, match="6 joint values"):
        clean.path(InitialState(Q_OUT[:5]), PathRequest([Q_OUT]))
    with pytest.raises(PlanningInputError, match="goal configuration 1"):
        clean.path(InitialState(Q_OUT), PathRequest([Q_OUT, Q_OUT[:4]]))
    with pytest.raises(PlanningInputError, match="non-finite"):
        InitialState([0, 0, np.nan, 0, 0, 0])
    with pytest.raises(PlanningInputError, match="PathRequest"):
        clean.path(InitialState(Q_OUT), [Q_OUT])
    with pytest.raises(PlanningInputError, match="retract_direction"):
        PathRequest([Q_OUT], type="touch", retract_direction=[0, 0, 0])
    with pytest.raises(PlanningInputError, match="compression_distance"):
        PathRequest([Q_OUT], type="touch", max_carried_object_compression_distance=-0.01)
