"""Execution (execute.py): way-points to trajectory to joint commands on any Robot, tracked on
the sim backend within the documented error."""

from __future__ import annotations

import numpy as np
import pytest
from twin.sim import PyBulletRobot

from twin.dynamics import ArmDynamics
from twin.kinematics import ArmModel
from twin.kinematics.gravity import gravity_torques
from twin.planning.motion.execute import (
    TRACKING_BOUND_RAD,
    ExecutionError,
    default_acceleration_limits,
    dynamics_feedforward,
    follow,
    gravity_feedforward,
    no_feedforward,
    prepare,
)
from twin.planning.motion.linear import CartesianPath
from twin.planning.requests import BlendRadius, Movement, Waypoint
from twin.robot import JointCommand, Robot, RobotState

RTOL = 1e-7


@pytest.fixture(scope="module")
def model():
    return ArmModel.default()


@pytest.fixture(scope="module")
def robot():
    with PyBulletRobot(watchdog_s=None) as r:
        yield r


def gravity_ff(model):
    return lambda q, qd, qdd: gravity_torques(model, q)


def joint_waypoints(q0):
    return [
        Waypoint(q0 + [0.6, 0.3, -0.4, 0.5, 0.3, 0.8], blend_radius=BlendRadius(0.2, 0.2)),
        Waypoint(q0 + [1.0, -0.1, 0.2, -0.3, -0.2, 0.0], blend_radius=BlendRadius(0.15, 0.15)),
        Waypoint(q0 + [0.2, 0.1, 0.0, 0.0, 0.2, -0.5]),
    ]


def assert_commands_within_limits(report, model, dt):
    q = report.commanded[:, 0]
    qd = report.commanded[:, 1]
    vmax = np.asarray(model.velocity_limits)
    amax = default_acceleration_limits(model)
    assert np.all(np.abs(qd) <= vmax * (1 + RTOL))
    assert np.all(np.abs(np.diff(q, axis=0)) / dt <= vmax * (1 + RTOL))
    assert np.all(np.abs(np.diff(qd, axis=0)) / dt <= amax * (1 + RTOL))
    assert np.all(np.abs(np.diff(q, 2, axis=0)) / dt**2 <= amax * (1 + 1e-6))


def test_blended_joint_path_runs_within_the_limits_and_tracks_within_the_bound(model, robot):
    q0 = np.array(model.home_q)
    robot.reset(q0)
    w = joint_waypoints(q0)
    prepared = prepare(model, q0, w)
    report = follow(robot, prepared.trajectory, feedforward=gravity_ff(model))
    dt = robot.control_period_s
    assert_commands_within_limits(report, model, dt)
    # Fully used: some joint reaches its velocity limit somewhere.
    assert np.max(np.abs(report.commanded[:, 1]) / model.velocity_limits) > 0.99
    assert report.max_joint_error_rad < TRACKING_BOUND_RAD
    assert report.max_tcp_error_m < 0.010
    assert report.final_tcp_error_m < 1e-3
    assert report.rms_joint_error_rad < report.max_joint_error_rad
    assert report.duration_s == pytest.approx(prepared.trajectory.duration)
    assert report.elapsed_s == pytest.approx(len(report.times_s) * dt, abs=1e-6)
    # The commands pass within the blend's reach of each blended way-point, not through it.
    q_cmd = report.commanded[:, 0]
    d = np.min(np.linalg.norm(q_cmd - w[0].configuration, axis=1))
    assert 0.0 < d < 0.2


def test_without_feedforward_gravity_makes_tracking_worse(model, robot):
    q0 = np.array(model.home_q)
    w = joint_waypoints(q0)[:1]
    traj = prepare(model, q0, w).trajectory
    robot.reset(q0)
    with_ff = follow(robot, traj, feedforward=gravity_ff(model))
    robot.reset(q0)
    without = follow(robot, traj, feedforward=no_feedforward)
    # Held against gravity by the P term alone the arm sags; the feedforward removes the sag.
    assert without.final_joint_error_rad > 0.005
    assert with_ff.final_joint_error_rad < 1e-3
    assert without.max_joint_error_rad > with_ff.max_joint_error_rad


def test_full_dynamics_feedforward_tracks_better_than_gravity_alone(model, robot):
    q0 = np.array(model.home_q)
    traj = prepare(model, q0, joint_waypoints(q0)).trajectory
    robot.reset(q0)
    gravity = follow(robot, traj, feedforward=gravity_feedforward(model))
    robot.reset(q0)
    full = follow(robot, traj)  # the default: full inverse dynamics of the path
    q, qd, qdd = np.moveaxis(full.commanded, 1, 0)
    np.testing.assert_allclose(
        dynamics_feedforward(model)(q, qd, qdd), ArmDynamics(model).inverse_dynamics(q, qd, qdd)
    )
    # The sim's arm is the URDF's rigid bodies: what is left is the one-period command lag.
    assert full.max_joint_error_rad < 0.5 * gravity.max_joint_error_rad
    assert full.max_tcp_error_m < 0.5 * gravity.max_tcp_error_m
    assert full.rms_joint_error_rad < gravity.rms_joint_error_rad


def test_linear_waypoint_is_commanded_straight_and_tracked(model, robot):
    q0 = np.array(model.home_q)
    start = model.fk(q0)
    goal = start.copy()
    goal[:3, 3] += [0.05, 0.12, -0.06]
    q1 = model.ik(goal, q0)
    robot.reset(q0)
    prepared = prepare(model, q0, [Waypoint(q1, Movement.LINEAR)])
    report = follow(robot, prepared.trajectory, feedforward=gravity_ff(model))
    assert_commands_within_limits(report, model, robot.control_period_s)
    line = CartesianPath.line(start, goal)
    commanded_tcp = model.fk(report.commanded[:, 0])[:, :3, 3]
    assert np.max(line.distance(commanded_tcp)) < 0.5e-3
    assert np.max(line.distance(model.fk(report.measured)[:, :3, 3])) < 3e-3
    assert report.final_tcp_error_m < 1e-3


def test_execution_refuses_to_start_away_from_the_path(model, robot):
    q0 = np.array(model.home_q)
    robot.reset(q0 + 0.1)
    traj = prepare(model, q0, joint_waypoints(q0)[:1]).trajectory
    with pytest.raises(ExecutionError, match="from the trajectory's start"):
        follow(robot, traj)


class IdealRobot(Robot):
    """A robot that reaches each command's q_des exactly one period later (any Robot works)."""

    def __init__(self, model, q):
        self.model, self.control_period_s = model, 0.01
        self.q, self.t_us, self.cmd = np.array(q, float), 0, None
        self.commands = 0

    def read(self):
        z = np.zeros(6)
        return RobotState(self.t_us, self.q.copy(), z, z)

    def _apply(self, command: JointCommand):
        self.cmd = command
        self.commands += 1

    def step(self):
        self.q = np.array(self.cmd.q_des)
        self.t_us += 10_000


def test_follow_works_on_any_robot_and_measures_a_one_period_lag(model):
    q0 = np.array(model.home_q)
    traj = prepare(model, q0, joint_waypoints(q0)[:1]).trajectory
    robot = IdealRobot(model, q0)
    report = follow(robot, traj, settle_s=0.05)
    assert robot.commands == len(report.times_s)
    # Error = one period of motion at most: |qd| dt <= vmax dt.
    assert report.max_joint_error_rad <= np.max(model.velocity_limits) * 0.01 * (1 + 1e-9)
    assert report.max_joint_error_rad > 0.0
    assert report.final_joint_error_rad == 0.0


def test_free_motion_then_touch_approach_stops_at_the_junction_and_descends_straight(model, robot):
    """The shape of a touch path: a blended joint motion to the pre-touch configuration, then a
    linear way-point 5 cm down along the tool."""
    q0 = np.array(model.home_q)
    q_pre = q0 + [0.4, 0.1, -0.1, 0.0, 0.1, 0.3]
    pre = model.fk(q_pre)
    touch = pre.copy()
    touch[:3, 3] += 0.05 * pre[:3, 2]  # along the TCP's z (the tool direction)
    q_touch = model.ik(touch, q_pre)
    w = [
        Waypoint(q0 + [0.2, 0.2, 0.0, 0.0, 0.0, 0.0], blend_radius=BlendRadius(0.1, 0.1)),
        Waypoint(q_pre, blend_radius=BlendRadius(0.1, 0.1)),  # ignored: joint in, linear out
        Waypoint(q_touch, Movement.LINEAR),
    ]
    prepared = prepare(model, q0, w)
    assert len(prepared.linear) == 1
    robot.reset(q0)
    report = follow(robot, prepared.trajectory, feedforward=gravity_ff(model))
    assert_commands_within_limits(report, model, robot.control_period_s)
    q_cmd, qd_cmd = report.commanded[:, 0], report.commanded[:, 1]
    k = int(np.argmin(np.linalg.norm(q_cmd - q_pre, axis=1)))
    assert np.linalg.norm(q_cmd[k] - q_pre) < 0.02  # passes (close to) the pre-touch config
    t = np.linspace(0.0, prepared.trajectory.duration, 20001)
    qf, qdf, _ = prepared.trajectory.sample(t)
    j = int(np.argmin(np.linalg.norm(qf - q_pre, axis=1)))
    assert np.linalg.norm(qf[j] - q_pre) < 1e-6 and np.linalg.norm(qdf[j]) < 1e-3  # a stop
    after = model.fk(qf[j:])[:, :3, 3]
    line = CartesianPath.line(pre, touch)
    assert np.max(line.distance(after)) < 0.5e-3
    assert report.final_tcp_error_m < 1e-3
    assert np.linalg.norm(qd_cmd[-1]) == 0.0
