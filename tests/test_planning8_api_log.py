"""API log (api_log.py, replay.py): record every call as JSON, export, package, replay with zero
differences, and report exactly the calls whose results differ."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from twin.planning import (
    CarriedObject,
    InitialState,
    Obstacle,
    PathRequest,
    PathResult,
    Planner,
    PlannerSettings,
    PlanningInputError,
    ReplaceableTool,
    Tcp,
    ToolBoxElement,
    TransformedBox,
)
from twin.planning.api_log import (
    RecordingPlanner,
    decode,
    encode,
    encode_result,
    package_api_log,
)
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.replay import replay

QUERIES = Path(__file__).resolve().parent.parent / "assets" / "planning"


def _translation(x, y, z):
    m = np.eye(4)
    m[:3, 3] = [x, y, z]
    return m


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """A recorded session on the table scene, exported; returns (planner, log path, results)."""
    planner = RecordingPlanner(Planner(PlannerSettings(seed=3)))
    model = planner.model
    q0 = np.array(model.home_q)
    planner.set_obstacles(obstacles_from_scene("table"))
    planner.set_obstacles([Obstacle.from_sphere("ball", [0.3, 0.3, 0.6], 0.05)])
    cloud = np.random.default_rng(0).uniform([0.4, -0.4, 0.0], [0.5, -0.3, 0.1], (50, 3))
    planner.set_obstacles([Obstacle.from_point_cloud("cloud", cloud, point_radius=0.005)])
    removed = planner.clip_point_cloud_with_box(
        TransformedBox(_translation(0.45, -0.35, 0.0), [0.05, 0.05, 0.2])
    )
    planner.set_replaceable_tool(
        ReplaceableTool.from_box_elements([ToolBoxElement(_translation(0, 0, 0.02), [0.03] * 3)])
    )
    planner.set_tcp(Tcp(_translation(0, 0, 0.13)))
    planner.set_carried_object(CarriedObject.from_box(TransformedBox(np.eye(4), [0.03] * 3)))
    tcp = planner.get_tcp()
    goal_pose = planner.tcp_pose(q0 + [0.5, 0.1, -0.1, 0.0, 0.1, 0.2])
    q_goal = planner.compute_inverse_kinematics(goal_pose, q0)
    first = planner.path(InitialState(q0), PathRequest([q_goal, q0 + [0.9, 0, 0, 0, 0, 0]]))
    second = planner.path(
        InitialState(first),
        PathRequest([q0 + [-0.6, 0.2, 0.0, 0.0, 0.0, 0.0]], goal_prioritization="list_order"),
    )
    with pytest.raises(PlanningInputError):
        planner.path(InitialState(q0), PathRequest([np.zeros(5)]))
    planner.clear_carried_object()
    folder = tmp_path_factory.mktemp("logs")
    path = planner.export_api_log(folder)
    return planner, path, (removed, tcp, q_goal, first, second)


def test_every_call_is_logged_as_json_with_its_result(session):
    planner, path, (removed, tcp, q_goal, first, second) = session
    data = json.loads(path.read_text())  # plain JSON: no pickles
    methods = [c["method"] for c in data["calls"]]
    assert methods == [
        "set_obstacles", "set_obstacles", "set_obstacles", "clip_point_cloud_with_box",
        "set_replaceable_tool", "set_tcp", "set_carried_object", "get_tcp",
        "compute_inverse_kinematics", "path", "path", "path", "clear_carried_object",
    ]  # fmt: skip
    calls = data["calls"]
    assert data["settings"]["seed"] == 3
    assert calls[3]["result"] == removed and removed > 0
    assert np.allclose(calls[8]["result"]["__ndarray__"], q_goal)
    res = calls[9]["result"]
    assert first and res["error"] is None and res["selected_goal_idx"] == first.selected_goal_idx
    assert np.allclose(res["path"], [w.configuration for w in first.path()])
    assert calls[7]["result"] == encode(tcp)
    assert calls[10]["args"][0] == {"__type__": "InitialState", "previous_call": 9}
    assert calls[10]["result"]["selected_goal_idx"] == second.selected_goal_idx
    assert calls[11]["raised"]["type"] == "PlanningInputError"
    assert "6 joint values" in calls[11]["raised"]["message"]
    # Passed-through attributes are not recorded.
    assert planner.tcp_pose is not None and len(planner.calls) == len(calls)


def test_exported_log_replays_with_zero_differences(session):
    _, path, _ = session
    report = replay(path)
    assert report.calls == 13
    assert report, report.differences


def test_replay_reports_every_call_whose_result_differs(session):
    _, path, _ = session
    data = json.loads(path.read_text())
    data["calls"][8]["result"]["__ndarray__"][0] += 1e-3  # an IK result
    data["calls"][9]["result"]["selected_goal_idx"] = 7  # a path result
    data["calls"][3]["result"] += 1  # a clip count
    report = replay(data)
    assert [d.index for d in report.differences] == [3, 8, 9]
    assert report.differences[1].method == "compute_inverse_kinematics"
    assert not report
    assert replay(data, atol=2e-3).differences[1].index == 9  # within tolerance: only 3 and 9


def test_package_bundles_the_cell_and_settings_and_replays_from_it(session):
    _, path, _ = session
    bundle = package_api_log(path)
    assert bundle.name == path.stem + "-resources.zip"
    with zipfile.ZipFile(bundle) as z:
        assert sorted(z.namelist()) == ["cell.zip", "settings.json"]
        assert json.loads(z.read("settings.json"))["seed"] == 3
        with z.open("cell.zip") as f, zipfile.ZipFile(f) as inner:
            assert "twin_arm/robot/twin_arm.urdf" in inner.namelist()
    with pytest.raises(FileExistsError):
        package_api_log(path)
    report = replay(path, resources=bundle)
    assert report and report.calls == 13


def test_codec_round_trips_the_value_types():
    box = TransformedBox(_translation(0.1, 0.2, 0.3), [0.1, 0.2, 0.3])
    tool = ReplaceableTool.from_box_elements([ToolBoxElement(np.eye(4), [0.1, 0.1, 0.1], box)])
    req = PathRequest([np.arange(6) * 0.1], goal_prioritization="list_order", description="x")
    for value in (box, tool, req, Tcp(np.eye(4), [1.0, 0.0, 0.0])):
        text = json.dumps(encode(value))
        again = decode(json.loads(text))
        assert json.dumps(encode(again)) == text


def test_a_result_records_how_far_the_roadmap_build_got_and_replay_pins_it():
    tcp = Tcp(np.eye(4))
    stats = {"roadmap_steps": 7.0, "roadmap_deferred": 1.0, "time_s": 0.01}
    summary = encode_result(PathResult(None, 0, tcp, (), stats))
    assert summary["roadmap_steps"] == 7 and summary["roadmap_deferred"] is True
    done = encode_result(PathResult(None, 0, tcp, (), {"roadmap_steps": 9.0}))
    assert done["roadmap_steps"] == 9 and done["roadmap_deferred"] is False
    assert "roadmap_steps" not in encode_result(PathResult(None, 0, tcp, (), {}))

    class Pinned:  # records what replay pins before each call
        def __init__(self, planner):
            self.planner, self.pins = planner, []

        def __getattr__(self, name):
            return getattr(self.planner, name)

        def pin_roadmap_steps(self, steps):
            self.pins.append(steps)
            self.planner.pin_roadmap_steps(steps)

    recorder = RecordingPlanner(Planner(PlannerSettings(roadmap_nodes=200)))
    recorder.set_obstacles(obstacles_from_scene("shelf"))
    q0 = np.array(recorder.model.home_q)
    recorder.path(InitialState(q0), PathRequest([q0 + [0.3, 0, 0, 0, 0, 0]]))  # straight
    stored = json.loads((QUERIES / "queries_shelf.json").read_text(encoding="utf-8"))
    hard = next(q for q in stored["queries"] if not q["direct"])  # a blocked straight segment
    recorder.path(InitialState(np.array(hard["start"])), PathRequest([np.array(hard["goal"])]))
    steps = [(c["result"] or {}).get("roadmap_steps") for c in recorder.calls]
    assert steps[:2] == [None, None] and steps[2] > 0
    pinned = Pinned(Planner(PlannerSettings(roadmap_nodes=200)))
    report = replay(recorder.log(), planner=pinned)
    assert report, report.differences
    assert pinned.pins == steps  # None for set_obstacles and for a query without the roadmap
