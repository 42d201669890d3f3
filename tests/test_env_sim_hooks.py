"""The sim's additions the environments use: ``sensors=False`` (or one model), randomisation
setters, markers."""

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


def test_one_sensor_model_alone_reads_as_with_both():
    """``sensors={"ft"}`` / ``{"imu"}``: that model's samples are those of a robot running both
    (no noise configured), the other reads ``None``; the joints are unchanged. (31 F/T samples
    in 30 control periods: one at the first physics step after the reset, then one per 5 ms.)"""
    with (
        sim.PyBulletRobot(seed=2) as both,
        sim.PyBulletRobot(seed=2, sensors=("ft",)) as ft,
        sim.PyBulletRobot(seed=2, sensors="imu") as imu,
    ):
        trajectories = [_trajectory(r, 30) for r in (both, ft, imu)]
        full, ft_only, imu_only = (r.read() for r in (both, ft, imu))
        assert ft_only.imu is None and imu_only.wrench is None
        assert ft_only.wrench.t_us == full.wrench.t_us == 30 * 5000
        np.testing.assert_array_equal(ft_only.wrench.wrench, full.wrench.wrench)
        np.testing.assert_array_equal(imu_only.imu.specific_force, full.imu.specific_force)
        np.testing.assert_array_equal(imu_only.imu.angular_rate, full.imu.angular_rate)
        assert len(ft.wrench_samples().samples) == len(both.wrench_samples().samples) == 31
    np.testing.assert_array_equal(trajectories[0], trajectories[1])
    np.testing.assert_array_equal(trajectories[0], trajectories[2])
    with pytest.raises(
        ValueError, match=r"sensors must be True, False or a collection of \('ft', 'imu'\)"
    ):
        sim.PyBulletRobot(sensors=("ft", "gps"))


def test_press_env_runs_the_ft_model_only():
    import gymnasium as gym

    with gym.make("twin/Press-v0") as env:
        env.reset(seed=0)
        env.step(np.zeros(6, np.float32))
        state = env.unwrapped.robot.read()
        assert state.wrench is not None and state.imu is None


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
