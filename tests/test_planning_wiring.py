"""Planner wiring of the issue-8 modules: touch requests (linear approach at the end, linear
retract at the start of a path leaving a touch), attachments from the cell configuration and
the package exports."""

from __future__ import annotations

import numpy as np
import pytest

import twin.planning as tp
from twin.planning import (
    InitialState,
    Movement,
    Obstacle,
    PathError,
    PathRequest,
    Planner,
    PlannerSettings,
    ReplaceableTool,
    Tcp,
    ToolBoxElement,
    TransformedBox,
)
from twin.planning.motion.linear import CartesianPath, linear_motion

TOL = 0.5e-3
#: Tool: a 3 cm rigid block 2 cm below the flange and a 15 cm compliant cup beyond it; the TCP
#: is the cup's tip, 0.20 m from the flange (the cup is longer than the model's margins).
TIP = 0.20
PRESS = 0.003  # m the cup is pressed into the table at the touch


def _translation(x, y, z):
    m = np.eye(4)
    m[:3, 3] = [x, y, z]
    return m


@pytest.fixture(scope="module")
def scene():
    planner = Planner(PlannerSettings(seed=1))
    model = planner.model
    cup = TransformedBox(_translation(0, 0, 0.03), [0.03, 0.03, 0.15])
    element = ToolBoxElement(_translation(0, 0, 0.02), [0.03, 0.03, 0.03], cup)
    planner.set_replaceable_tool(ReplaceableTool.from_box_elements([element]))
    planner.set_tcp(Tcp(_translation(0, 0, TIP)))
    home = np.array(model.home_q)
    # The touch: the tip 5 cm below its height at home, pressed PRESS m into a table top.
    pose = planner.tcp_pose(home)
    assert pose[:3, 2] @ [0, 0, -1] == pytest.approx(1.0)  # the tool points down at home
    pose[2, 3] -= 0.05
    q_touch = planner.compute_inverse_kinematics(pose, home)
    assert q_touch is not None
    top = pose[2, 3] + PRESS
    table = TransformedBox(_translation(pose[0, 3], pose[1, 3], top - 0.12), [0.3, 0.3, 0.12])
    planner.set_obstacles([Obstacle.from_box("table", table)])
    assert not planner.configurations_free([q_touch])[0]  # rigidly, the touch is blocked
    start = home.copy()
    start[0] = 0.8  # swung sideways, clear of the table
    assert planner.configurations_free([start])[0]
    return planner, start, q_touch


def _assert_straight(planner, q_from, q_to, direction=None):
    """The TCP line from q_from to q_to, followed with the posture kept, is straight (FK)."""
    model, f_T_t = planner.model, planner.get_tcp().transform
    a, b = planner.tcp_pose(q_from), planner.tcp_pose(q_to)
    m = linear_motion(model, q_from, CartesianPath.line(a, b), f_T_t)
    assert m, m.reason
    assert np.allclose(m.configurations[-1], q_to, atol=1e-4)  # same posture
    p = (model.fk(m.configurations, "flange") @ f_T_t)[:, :3, 3]
    u = (b[:3, 3] - a[:3, 3]) / np.linalg.norm(b[:3, 3] - a[:3, 3])
    rel = p - a[:3, 3]
    off_line = rel - np.outer(rel @ u, u)
    assert np.max(np.linalg.norm(off_line, axis=1)) < TOL
    if direction is not None:
        assert u @ direction == pytest.approx(1.0, abs=1e-6)
    return np.linalg.norm(b[:3, 3] - a[:3, 3])


def test_touch_request_ends_with_a_linear_approach_along_the_tool(scene):
    planner, start, q_touch = scene
    result = planner.path(InitialState(start), PathRequest([q_touch], type="touch"))
    assert result, result
    assert result.ends_in_touch
    assert result.selected_goal_idx == 0
    w = result.path()
    assert w[-1].movement is Movement.LINEAR
    assert np.allclose(w[-1].configuration, q_touch)
    assert all(x.movement is Movement.JOINT for x in w[:-1])
    assert planner.configurations_free([w[-2].configuration])[0]  # pre-touch strictly free
    tool_dir = planner.tcp_pose(q_touch)[:3, :3] @ [0, 0, 1]
    length = _assert_straight(planner, w[-2].configuration, q_touch, tool_dir)
    assert length == pytest.approx(0.05, abs=1e-6)


def test_touch_request_keeps_goal_indices_and_reports_blocked_end(scene):
    planner, start, q_touch = scene
    buried = q_touch.copy()
    buried[1] += 0.3  # the arm pushed deep into the table: no approach
    result = planner.path(
        InitialState(start),
        PathRequest([buried, q_touch], type="touch", goal_prioritization="list_order"),
    )
    assert result and result.selected_goal_idx == 1
    blocked = planner.path(InitialState(start), PathRequest([buried], type="touch"))
    assert blocked.error is PathError.BLOCKED_END


def test_path_from_a_touch_starts_with_a_linear_retract(scene):
    planner, start, q_touch = scene
    up = np.array([0.0, 0.0, 1.0])
    state = InitialState.from_touch(q_touch)
    assert state.touch
    result = planner.path(state, PathRequest([start], retract_direction=up))
    assert result, result
    first = result.path()[0]
    assert first.movement is Movement.LINEAR
    assert _assert_straight(planner, q_touch, first.configuration, up) == pytest.approx(0.05)
    assert np.allclose(result.final_configuration(), start)
    # From a touch result: the retract direction is derived (here: straight back up).
    touched = planner.path(InitialState(start), PathRequest([q_touch], type="touch"))
    after = InitialState(touched)
    assert after.touch
    back = planner.path(after, PathRequest([start]))
    assert back and back.path()[0].movement is Movement.LINEAR
    _assert_straight(planner, q_touch, back.path()[0].configuration)
    # A plain start in contact is blocked.
    assert planner.path(InitialState(q_touch), PathRequest([start])).error is (
        PathError.BLOCKED_START
    )


def test_package_exports():
    from twin.planning.api_log import RecordingPlanner
    from twin.planning.replay import replay

    assert tp.replay is replay and tp.RecordingPlanner is RecordingPlanner
    for name in ("package_api_log", "generate", "package_cell", "install_package", "load_cell"):
        assert callable(getattr(tp, name))
    for name in ("prepare", "follow", "execute"):
        assert callable(getattr(tp, name))


def test_touch_calls_replay_without_differences(scene, tmp_path):
    planner, start, q_touch = scene
    rec = tp.RecordingPlanner(Planner(PlannerSettings(seed=1)))
    rec.set_replaceable_tool(planner._tool)
    rec.set_tcp(planner.get_tcp())
    rec.set_obstacles(planner.obstacles())
    touched = rec.path(InitialState(start), PathRequest([q_touch], type="touch"))
    rec.path(InitialState(touched), PathRequest([start]))
    rec.path(InitialState.from_touch(q_touch), PathRequest([start], retract_direction=[0, 0, 1]))
    report = tp.replay(rec.export_api_log(tmp_path))
    assert report, report


def test_set_attachments_accepts_only_cell_attachments():
    planner = Planner(PlannerSettings())
    home = np.array(planner.model.home_q)
    with pytest.raises(tp.PlanningInputError, match=r"not defined in cell 'twin_arm'.*suction_cup"):
        planner.set_attachments(["gripper"])
    with pytest.raises(tp.PlanningInputError, match="one string"):
        planner.set_attachments("suction_cup")
    # A 2 cm cube 10 cm off the flange axis, beside the camera housing (which reaches 8 cm off
    # the axis, 2-5 cm below the flange): free for the bare arm, blocked with the camera.
    centre = planner.model.fk(home, "flange") @ _translation(0.10, 0.0, 0.035)
    cube = TransformedBox(_translation(*centre[:3, 3]) @ _translation(0, 0, -0.01), [0.02] * 3)
    planner.set_obstacles([Obstacle.from_box("cube", cube)])
    free_bare = planner.configurations_free([home])[0]
    planner.set_attachments(["wrist_camera"])
    assert planner.attachments() == ["wrist_camera"]
    free_camera = planner.configurations_free([home])[0]
    planner.set_attachments([])
    assert planner.configurations_free([home])[0] == free_bare
    assert free_bare and not free_camera
