"""The cell's ``limits`` are read (touch approach and retract distances, execution timing), and a
touch target's own geometry (a point cloud's points) does not block its approach."""

from __future__ import annotations

import json

import numpy as np
import pytest

from twin.kinematics import ArmModel
from twin.planning import (
    InitialState,
    Movement,
    PathRequest,
    Planner,
    PlannerSettings,
    PlanningInputError,
)
from twin.planning.cells import ENV_CELLS_DIR, load_cell
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.motion.execute import cell_timing, prepare


def _cell(tmp_path, monkeypatch, **limits) -> Planner:
    """A planner of a user cell ``limited``: the shipped cell with ``limits`` changed."""
    config = json.loads(json.dumps(load_cell("twin_arm", tmp_path / "none").config))
    config["name"] = "limited"
    config["limits"].update(limits)
    (tmp_path / "cells" / "limited").mkdir(parents=True)
    (tmp_path / "cells" / "limited" / "cell.json").write_text(json.dumps(config))
    monkeypatch.setenv(ENV_CELLS_DIR, str(tmp_path / "cells"))
    return Planner(PlannerSettings("limited"), model=ArmModel.default())


def _touch_down(planner: Planner, point) -> np.ndarray:
    """A touch configuration: the default TCP at ``point`` (m, base frame), tool pointing down."""
    home = np.asarray(planner.model.home_q, dtype=float)
    pose = planner.tcp_pose(home)
    pose[:3, 3] = point
    q = planner.compute_inverse_kinematics(pose, home)
    assert q is not None
    return q


def _approach_length(planner: Planner, result) -> float:
    """TCP distance (m) from the last joint way-point (the pre-touch) to the touch."""
    waypoints = result.path()
    assert waypoints[-1].movement is Movement.LINEAR
    pre, touch = waypoints[-2].configuration, waypoints[-1].configuration
    return float(np.linalg.norm(planner.tcp_pose(pre)[:3, 3] - planner.tcp_pose(touch)[:3, 3]))


@pytest.mark.parametrize("distance", [0.08, 0.12])
def test_the_touch_approach_follows_the_cell(tmp_path, monkeypatch, distance):
    planner = _cell(tmp_path, monkeypatch, touch_approach_distance_m=distance)
    assert planner.limits()["touch_approach_distance_m"] == distance
    q = _touch_down(planner, [0.35, 0.0, 0.15])  # in free space
    home = np.asarray(planner.model.home_q, dtype=float)
    result = planner.path(InitialState(home), PathRequest([q], type="touch"))
    assert result, result.error
    assert _approach_length(planner, result) == pytest.approx(distance, abs=1e-4)
    assert result.stats["approach_distance_m"] == pytest.approx(distance)


def test_the_retract_follows_the_cell(tmp_path, monkeypatch):
    planner = _cell(tmp_path, monkeypatch, touch_retract_distance_m=0.09)
    q = _touch_down(planner, [0.35, 0.0, 0.15])
    goal = np.asarray(planner.model.home_q, dtype=float)
    result = planner.path(
        InitialState.from_touch(q), PathRequest([goal], retract_direction=[0, 0, 1])
    )
    assert result, result.error
    first = result.path()[0]
    assert first.movement is Movement.LINEAR
    rise = planner.tcp_pose(first.configuration)[2, 3] - planner.tcp_pose(q)[2, 3]
    assert rise == pytest.approx(0.09, abs=1e-4)


def test_the_shipped_cell_keeps_five_centimetres():
    limits = Planner().limits()
    assert limits["touch_approach_distance_m"] == 0.05
    assert limits["touch_retract_distance_m"] == 0.05
    assert limits["velocity_scale"] == 1.0 and limits["acceleration_time_s"] == 0.25


def test_a_bad_limit_names_itself(tmp_path, monkeypatch):
    planner = _cell(tmp_path, monkeypatch, touch_approach_distance_m=-1)
    with pytest.raises(PlanningInputError, match="touch_approach_distance_m"):
        planner.limits()


def test_execution_timing_follows_the_cell(tmp_path, monkeypatch):
    planner = _cell(tmp_path, monkeypatch, velocity_scale=0.5, acceleration_time_s=0.5)
    model = planner.model
    timing = cell_timing(model, planner.limits())
    assert timing["velocity_scale"] == 0.5
    vmax = np.asarray(model.velocity_limits, dtype=float)
    assert np.allclose(timing["acceleration_limits"], vmax / 0.5)
    home = np.asarray(model.home_q, dtype=float)
    goal = home + np.array([0.8, -0.3, 0.4, 0.5, 0.3, 1.0])
    result = planner.path(InitialState(home), PathRequest([goal]))
    assert result
    slow = prepare(model, home, result.path(), **timing)
    full = prepare(model, home, result.path())
    qd = np.abs(slow.trajectory.sample(np.linspace(0, slow.trajectory.duration, 400))[1])
    assert np.all(qd <= 0.5 * vmax + 1e-6)
    assert slow.trajectory.duration > 1.5 * full.trajectory.duration


def test_a_touch_onto_a_point_cloud_object_is_not_refused_by_its_own_points():
    """The bin scene's object at (0.45, 0.20, 0.039): its points lie within the point-cloud
    margin (5.1 cm) of the pre-touch configuration 5 cm above it."""
    planner = Planner()
    planner.set_obstacles(obstacles_from_scene("bin"))
    point = [0.45, 0.20, 0.039]
    q = _touch_down(planner, point)
    assert not planner.configurations_free([q])[0]  # the object's own points block the tool
    home = np.asarray(planner.model.home_q, dtype=float)
    result = planner.path(InitialState(home), PathRequest([q], type="touch"))
    assert result, result.error
    assert np.allclose(result.final_configuration(), q)
    # Lengthened only as far as needed to clear the target: between the cell's 5 cm and the
    # margin plus 1 cm beyond it.
    length = _approach_length(planner, result)
    assert 0.05 < length <= 0.05 + planner.margins()["obstacle_mesh"] + 0.01 + 1e-6
    pre = result.path()[-2].configuration
    assert planner.configurations_free([pre])[0]  # the pre-touch is checked against everything
