"""Shipped scenes in the simulator: static bodies, a collision-free home, reachable free space."""

from __future__ import annotations

import numpy as np
import pytest
from twin.sim import PyBulletRobot
from twin.sim.engine import Engine
from twin.sim.scene import add_scene, voxel_cubes

from twin.scenes import SHIPPED_SCENES, load_scene

HOME_CLEARANCE_M = 0.05  # every moving link at home is at least this far from every item
FREE_FRACTION = 0.5  # of uniformly random joint configurations, collision-free with the scene


def scene_distance(robot: PyBulletRobot, links: list[int]) -> float:
    eng = robot.engine
    return min(eng.closest_distance("arm", b, 0.2, links_a=links) for b in robot.scene_bodies)


@pytest.fixture(scope="module", params=SHIPPED_SCENES)
def scene_robot(request):
    with PyBulletRobot(scene=request.param) as robot:
        robot.scene_name = request.param
        yield robot


def moving_links(robot: PyBulletRobot) -> list[int]:
    return [info.index for info in robot.engine.joints("arm")]  # every link but the base


def test_every_item_becomes_a_static_body(scene_robot):
    scene = load_scene(scene_robot.scene_name)
    assert scene_robot.scene_bodies == tuple("scene/" + n for n in scene.names)
    for body in scene_robot.scene_bodies:
        assert len(scene_robot.engine.body_ids(body)) >= 1


def test_home_is_collision_free_with_clearance(scene_robot):
    scene_robot.reset()
    assert scene_distance(scene_robot, moving_links(scene_robot)) >= HOME_CLEARANCE_M
    assert scene_distance(scene_robot, [-1]) >= 0.0  # the base plate rests on, not in, the table


def test_plenty_of_collision_free_configurations(scene_robot):
    model, rng = scene_robot.model, np.random.default_rng(2)
    links = moving_links(scene_robot)
    free = 0
    for q in rng.uniform(model.lower, model.upper, (100, 6)):
        scene_robot.reset(q)
        free += scene_distance(scene_robot, links) > 0.0
    scene_robot.reset()
    assert free / 100 >= FREE_FRACTION


def test_tool_down_workspace_in_front_of_the_arm_is_reachable(scene_robot):
    """A grid of tool-down TCP positions in front of the arm: most have a collision-free IK."""
    model = scene_robot.model
    down = model.fk(model.home_q)[:3, :3]
    ok = total = 0
    for x in (0.25, 0.35, 0.45):
        for y in (-0.2, 0.0, 0.2):
            for z in (0.2, 0.3):
                pose = np.eye(4)
                pose[:3, :3], pose[:3, 3] = down, (x, y, z)
                q = model.ik(pose, model.home_q)
                total += 1
                if q is not None:
                    scene_robot.reset(q)
                    ok += scene_distance(scene_robot, moving_links(scene_robot)) > 0.01
    scene_robot.reset()
    assert ok / total >= 0.75


def test_a_colliding_configuration_is_detected(scene_robot):
    q = scene_robot.model.home_q.copy()
    q[1] = 1.9  # shoulder far forward: the arm dives into the table / floor
    q[2] = 1.5
    scene_robot.reset(q)
    assert scene_distance(scene_robot, moving_links(scene_robot)) < 0.0
    scene_robot.reset()


def test_point_cloud_voxels_cover_every_point():
    cloud = load_scene("bin").item("bin_objects")
    r = cloud.dims[0]
    vertices, faces = voxel_cubes(cloud.points, r)
    centres = vertices.reshape(-1, 8, 3).mean(1)
    # every point lies inside some cube (edge 2 r)
    d = np.abs(cloud.points[:, None, :] - centres[None, :, :]).max(-1).min(1)
    assert np.all(d <= r + 1e-12)
    assert len(centres) < len(cloud.points)  # binning reduces the count
    assert faces.shape == (12 * len(centres), 3)
    with Engine() as eng:
        names = add_scene(eng, load_scene("bin"))
        assert "scene/bin_objects" in names
        assert len(eng.body_ids("scene/bin_objects")) >= 1
