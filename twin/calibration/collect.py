"""Collecting calibration data on any ``twin.robot.Robot`` (the sim or the serial arm).

``move_to`` drives the arm to a configuration (a joint-space motion time-parameterised by
``twin.planning.motion.execute`` with full inverse-dynamics feedforward, then a hold); ``hold_and_read``
keeps holding it and gathers what the robot reports: the joint states and every new F/T and IMU
sample. Nothing here knows the backend: the same calls record the data on hardware (check that
the motions are free of obstacles there: they are joint-space moves without collision checks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.dynamics import ArmDynamics
from twin.planning.motion.execute import (
    TRACKING_KD,
    TRACKING_KP,
    dynamics_feedforward,
    follow,
    prepare,
)
from twin.planning.requests import Waypoint
from twin.robot import JointCommand, Robot


@dataclass(frozen=True)
class StaticSample:
    """Averages over a hold at one configuration.

    q: (n,) rad; wrench: (6,) N, N m, sensor frame (NaN without F/T samples);
    specific_force: (3,) m/s^2, IMU frame (NaN without IMU samples);
    samples: number of distinct F/T samples averaged.
    """

    q: np.ndarray
    wrench: np.ndarray
    specific_force: np.ndarray
    samples: int


def move_to(robot: Robot, q: np.ndarray, dynamics: ArmDynamics | None = None, scale: float = 0.5):
    """Move to ``q`` (n,) rad at ``scale`` of the velocity and acceleration limits; returns the
    ``ExecutionReport``."""
    model = robot.model
    dyn = ArmDynamics(model) if dynamics is None else dynamics
    start = np.asarray(robot.read().q, float)
    prepared = prepare(
        model,
        start,
        [Waypoint(np.asarray(q, float))],
        velocity_scale=scale,
        acceleration_scale=scale,
    )
    return follow(robot, prepared.trajectory, model, feedforward=dynamics_feedforward(model, dyn))


def hold_and_read(
    robot: Robot,
    q: np.ndarray,
    seconds: float,
    dynamics: ArmDynamics | None = None,
    settle_s: float = 0.3,
) -> StaticSample:
    """Hold ``q`` (gravity feedforward and the tracking gains) for ``settle_s``, then for
    ``seconds`` more, averaging the joint states and the new F/T and IMU samples of the second
    part."""
    model = robot.model
    dyn = ArmDynamics(model) if dynamics is None else dynamics
    q = np.asarray(q, float)
    hold = JointCommand(
        q,
        np.zeros(model.n_joints),
        dyn.gravity_torques(q),
        np.array(TRACKING_KP),
        np.array(TRACKING_KD),
    )
    qs, wrenches, imus = [], {}, {}
    for _ in range(round(settle_s / robot.control_period_s)):
        robot.write(hold)
        robot.step()
    for _ in range(max(1, round(seconds / robot.control_period_s))):
        robot.write(hold)
        robot.step()
        state = robot.read()
        qs.append(state.q)
        if state.wrench is not None:
            wrenches[state.wrench.t_us] = np.asarray(state.wrench.wrench, float)
        if state.imu is not None:
            imus[state.imu.t_us] = np.asarray(state.imu.specific_force, float)
    nan = np.full(6, np.nan)
    return StaticSample(
        q=np.mean(qs, axis=0),
        wrench=np.mean(list(wrenches.values()), axis=0) if wrenches else nan,
        specific_force=np.mean(list(imus.values()), axis=0) if imus else nan[:3],
        samples=len(wrenches),
    )
