"""The collision model is conservative: no configuration that PyBullet's exact check finds
colliding is ever reported free (5,000 random configurations per scene here; the 100,000 run is
in ``benchmarks/bench_planner.py``), with a carried object and a tool too."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from planner_exact import ExactChecker

from twin.planning import (
    CarriedObject,
    Planner,
    ReplaceableTool,
    ToolBoxElement,
    TransformedBox,
)
from twin.planning.collision.scene_obstacles import obstacles_from_scene

SAMPLES = 5_000


@pytest.fixture(scope="module")
def planner() -> Planner:
    return Planner()


@pytest.mark.parametrize("scene", ["table", "shelf", "bin", "cage"])
def test_no_colliding_configuration_is_reported_free(planner: Planner, scene: str):
    model = planner.model
    planner.clear_obstacles()
    planner.set_obstacles(obstacles_from_scene(scene))
    q = np.random.default_rng(sum(map(ord, scene))).uniform(model.lower, model.upper, (SAMPLES, 6))
    free = planner.configurations_free(q)
    with ExactChecker(model.urdf_path, scene) as exact:
        colliding = exact.colliding_many(q)
    assert colliding.sum() > 0.1 * SAMPLES  # the scene matters
    assert not np.any(free & colliding)
    blocked_share = np.sum(~free & ~colliding) / np.sum(~colliding)
    assert blocked_share < 0.5  # conservative, not useless (printed by the benchmark)


def test_configurations_clear_of_obstacles_by_the_margin_are_reported_free(planner: Planner):
    # Among configurations the model finds free of self-collision (no obstacles), those whose
    # moving links keep the documented margin from every obstacle (exactly) are reported free.
    model = planner.model
    planner.clear_obstacles()
    q = np.random.default_rng(3).uniform(model.lower, model.upper, (1_500, 6))
    q = q[planner.configurations_free(q)]
    planner.set_obstacles(obstacles_from_scene("table"))
    margin = planner.margins()["obstacle_mesh"]  # the largest of the table's obstacle kinds
    free = planner.configurations_free(q)
    with ExactChecker(model.urdf_path, "table") as exact:
        clear = np.array([not exact.closer_than(x, margin, 0.0) for x in q])
    assert clear.sum() > 0.2 * len(q)
    assert np.all(free[clear])


def test_carried_object_and_tool_are_conservative(planner: Planner):
    model = planner.model
    planner.clear_obstacles()
    planner.set_obstacles(obstacles_from_scene("table"))
    tool_box = (np.eye(4), np.array([0.09, 0.03, 0.06]))  # a gripper body on the flange
    carried = (np.eye(4), np.array([0.08, 0.06, 0.12]))  # a box held at the TCP
    planner.set_replaceable_tool(
        ReplaceableTool.from_box_elements([ToolBoxElement(tool_box[0], tool_box[1])])
    )
    planner.set_carried_object(CarriedObject.from_box(TransformedBox(*carried)))
    try:
        q = np.random.default_rng(11).uniform(model.lower, model.upper, (2_000, 6))
        free = planner.configurations_free(q)
        with ExactChecker(model.urdf_path, "table") as exact:
            exact.attach_box(*tool_box)
            exact.attach_box(planner.get_tcp().transform @ carried[0], carried[1])
            colliding = exact.colliding_many(q)
        assert colliding.sum() > 0.1 * len(q)
        assert not np.any(free & colliding)
    finally:
        planner.clear_carried_object()
        planner.clear_replaceable_tool()
