"""The settled arm of the servo fail-safe tests: a ``SerialRobot`` on the ideal emulators (F/T
sensor and IMU off, no gravity), moved to ``TARGET`` and settled for 1 s; lock-step with a
``ManualClock``, real time without."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np
from twin.hardware import ParkError, SerialRobot
from twin.hardware.emulator import EmulatorStack, IdealSource
from twin.hardware.emulator.testing import emulator_config

from twin.kinematics import ArmModel
from twin.robot import Health, JointCommand

MODEL = ArmModel.default()
KP = np.array([120.0, 240.0, 120.0, 25.0, 25.0, 10.0]) / 4  # N m/rad
KD = np.array([6.0, 12.0, 4.0, 0.5, 0.5, 0.2]) / 4  # N m s/rad
TARGET = np.array([0.2, -0.15, 0.1, 0.3, -0.2, 0.4])  # rad


@contextlib.contextmanager
def settled_rig(mode: str, clock=None, *, watchdog_s: float | None = None):
    """``(robot, stack)`` in ``control_mode`` ``mode``, holding ``TARGET`` with health OK; on
    exit the robot is closed (a ``ParkError`` the test wanted is not raised again)."""
    config = emulator_config(
        control_mode=mode, watchdog_s=watchdog_s, hold_gravity_compensation=False
    )
    config = replace(
        config,
        bus=replace(config.bus, reply_timeout_s=0.05),
        ft=replace(config.ft, enabled=False),
        imu=replace(config.imu, enabled=False),
    )
    source = IdealSource(effort_limits=MODEL.effort_limits)
    with EmulatorStack(config, source, clock=clock) as stack:
        robot = SerialRobot(stack.robot_config(), model=MODEL, clock=stack.clock)
        try:
            for _ in range(250):  # move to TARGET and settle (1 s)
                robot.write(JointCommand(q_des=TARGET, kp=KP, kd=KD))
                robot.step()
            assert robot.read().health == Health.OK
            yield robot, stack
        finally:
            with contextlib.suppress(ParkError):
                robot.close()
