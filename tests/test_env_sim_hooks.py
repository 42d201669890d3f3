"""The sim's additions the environments use: ``sensors=False``, randomisation setters, markers."""

from __future__ import annotations

import numpy as np
import pytest

from twin.robot import JointCommand

sim = pytest.importorskip("twin.sim")


def _trajectory(robot, n: int = 60) -> np.ndarray:
    q0 = robot.read().q
    cmd = JointCommand(q_des=q0 + 0.2, kp=np.full(6, 40.0), kd=np.full(6, 2.0))
    out = []
    for _ in range(n):
        robot.write(cmd)
        robot.step()
        out.append(np.concatenate((robot.read().q, robot.read().qd)))
    return np.array(out)


def test_sensorless_robot_has_the_same_joint_trajectory_and_no_samples():
    with sim.PyBulletRobot(seed=1) as full, sim.PyBulletRobot(seed=1, sensors=False) as bare:
        a, b = _trajectory(full), _trajectory(bare)
        assert full.read().wrench is not None and full.read().imu is not None
        assert bare.read().wrench is None and bare.read().imu is None
        assert bare.read().t_us == full.read().t_us == 60 * 5000
    np.testing.assert_array_equal(a, b)  # bit for bit


def test_joint_dynamics_and_mass_scales_change_the_motion_and_are_validated():
    with sim.PyBulletRobot(seed=0) as nominal, sim.PyBulletRobot(seed=0) as changed:
        changed.set_joint_dynamics(damping=0.3, friction=np.full(6, 0.2))
        changed.scale_link_masses(np.full(6, 1.2))
        a, b = _trajectory(nominal), _trajectory(changed)
        assert np.abs(a - b).max() > 1e-3
        with pytest.raises(ValueError, match="damping must be one value >= 0"):
            changed.set_joint_dynamics(damping=-1.0)
        with pytest.raises(ValueError, match="link mass scales must be > 0"):
            changed.scale_link_masses(0.0)


def test_marker_is_visual_only_and_moves():
    with sim.PyBulletRobot(seed=0) as robot:
        tcp = robot.model.fk(robot.read().q, link="tcp")[:3, 3]
        pose = np.array([*tcp, 1.0, 0.0, 0.0, 0.0])
        robot.set_marker("goal", pose + np.array([0.0, 0.1, 0, 0, 0, 0, 0]))
        robot.set_marker("goal", pose)  # moved onto the TCP: a collision shape would push it
        assert [b for b in robot.engine.bodies if b.startswith("marker:")] == ["marker:goal"]
        before = _trajectory(robot, 20)
    with sim.PyBulletRobot(seed=0) as plain:
        np.testing.assert_array_equal(before, _trajectory(plain, 20))  # it pushes nothing
