"""``twin plan`` as a subprocess: pose and joint goals, several at once, around the scene's
obstacles; the path as JSON (checked against the planner's model) and pictures."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from test_demo import assert_png_not_blank

from twin.kinematics import ArmModel
from twin.planning import Planner, PlannerSettings, obstacles_from_scene
from twin.scenes import scenes_dir

MODEL = ArmModel.default()
#: Over the bin of ``pick_place`` (tool down); from home the straight joint segment to it hits
#: the bin, so the planner has to go around.
OVER_BIN = (0.385, 0.325, 0.16)
JOINT_GOAL = (0.0, 0.3, 1.2, 0.0, 1.1, 0.0)


def _plan(tmp_path, *args):
    out = tmp_path / "plan"
    proc = subprocess.run(
        [sys.executable, "-m", "twin", "plan", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, out


def _arg(values) -> str:
    return ",".join(str(v) for v in values)


@pytest.fixture(scope="module")
def planner():
    p = Planner(PlannerSettings(seed=0))
    p.set_obstacles(obstacles_from_scene(scenes_dir() / "pick_place.json"))
    return p


@pytest.fixture(scope="module")
def two_goals(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plan")
    return _plan(tmp, "--scene", "pick_place", "--goal", _arg(OVER_BIN), "--goal", _arg(JOINT_GOAL))


def test_plans_to_the_nearer_of_a_pose_and_a_joint_goal(two_goals, planner):
    proc, out = two_goals
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((out / "path.json").read_text())
    assert doc["ok"] and doc["scene"] == "pick_place"
    assert [g["kind"] for g in doc["goals"]] == ["pose", "joints"]
    candidates = np.concatenate([np.array(g["configurations"]) for g in doc["goals"]])
    assert len(candidates) > 2  # the pose goal stands for every IK posture, plus the joint goal
    end = np.array(doc["waypoints"][-1]["configuration"])
    assert end == pytest.approx(candidates[doc["selected_goal_index"]], abs=1e-12)
    if doc["selected_goal_index"] < len(doc["goals"][0]["configurations"]):
        assert MODEL.fk(end)[:3, 3] == pytest.approx(OVER_BIN, abs=1e-6)
    q = np.array(doc["trajectory"]["q"])
    assert q[0] == pytest.approx(MODEL.home_q, abs=1e-12)
    assert q[-1] == pytest.approx(end, abs=1e-9)
    assert doc["trajectory"]["collision_free"] and np.all(planner.configurations_free(q))
    tcp = np.array(doc["trajectory"]["tcp"])
    assert tcp == pytest.approx(MODEL.fk(q)[:, :3, 3], abs=1e-9)  # the default TCP: the URDF's
    for name in ("plan.png", "plan_joints.png", "scene.png"):
        assert_png_not_blank(out / name)


def test_goes_around_the_bin(tmp_path, planner):
    proc, out = _plan(tmp_path, "--scene", "pick_place", "--goal", _arg(OVER_BIN), "--no-render")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((out / "path.json").read_text())
    end = np.array(doc["waypoints"][-1]["configuration"])
    assert not planner.checker.segment_free(np.array(MODEL.home_q), end)  # straight: blocked
    assert len(doc["waypoints"]) >= 2 and doc["trajectory"]["collision_free"]
    assert not (out / "scene.png").exists()


def test_sequence_visits_the_goals_in_order(tmp_path):
    proc, out = _plan(
        tmp_path, "--scene", "table", "--goal", _arg(JOINT_GOAL), "--goal", _arg(MODEL.home_q),
        "--sequence", "--no-render",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((out / "path.json").read_text())
    stops = [w["configuration"] for w in doc["waypoints"] if w["blend_radius"] == [0.0, 0.0]]
    assert np.any(np.all(np.abs(np.array(stops) - JOINT_GOAL) < 1e-12, axis=1))  # the first
    q = np.array(doc["trajectory"]["q"])  # 20 ms samples: one lands near the stop at the first
    assert np.min(np.linalg.norm(q - np.array(JOINT_GOAL), axis=1)) < 1e-3
    assert q[-1] == pytest.approx(MODEL.home_q, abs=1e-9)  # and it ends at the second


def test_a_goal_inside_an_obstacle_fails_with_the_reason(tmp_path):
    # The TCP inside the shelf board: every posture is blocked.
    proc, out = _plan(tmp_path, "--scene", "pick_place", "--goal", "0.34,-0.28,0.11", "--no-render")
    assert proc.returncode == 1
    assert "planning failed: blocked_end" in proc.stdout
    doc = json.loads((out / "path.json").read_text())
    assert not doc["ok"] and doc["error"] == "blocked_end" and not (out / "plan.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scene", "pick_plce", "--goal", "0.4,0,0.3"], "did you mean 'pick_place'?"),
        (["--scene", "table", "--goal", "0.4,0"], "expected 3 or 6 or 7 finite numbers, got 2"),
        (["--scene", "table", "--goal", "a,b,c"], "expected comma-separated numbers"),
        (["--scene", "table", "--goal", "0.4,0,0.3", "--start", "0,0"], "--start '0,0'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc, _ = _plan(tmp_path, *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr
