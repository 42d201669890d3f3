"""Start-up tolerates line noise (issue 13, item 5): with 0.2 % of the bytes of every port
corrupted, ``SerialRobot()`` opens 8 times out of 8 (the issue saw 6 of 8 fail on one lost
reply); a device that never answers gives one ``StartupError`` naming it and its port, after the
configured attempts. Real time through the ideal emulators."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from twin.hardware import SerialRobot, StartupError
from twin.hardware.config import StartupConfig
from twin.hardware.emulator import BUS, FT, IMU, EmulatorStack, IdealSource
from twin.hardware.emulator.testing import emulator_config, wait_until

from twin.kinematics import ArmModel
from twin.robot import Health

MODEL = ArmModel.default()


def _healthy_after_a_step(robot):
    robot.step()
    state = robot.read()
    return state if state.health == Health.OK else None


def test_eight_of_eight_opens_succeed_with_corrupted_bytes_on_every_port(tmp_path):
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False)
    with EmulatorStack(
        config, IdealSource(effort_limits=MODEL.effort_limits), link_dir=tmp_path, seed=3
    ) as stack:
        for name in (BUS, FT, IMU):
            stack.faults[name].set(corrupt_rate=0.002)
        opened, damaged = 0, []
        for _ in range(8):
            before = stack.faults[BUS].stats.writes_affected
            robot = SerialRobot(stack.robot_config(), model=MODEL)
            try:
                damaged.append(stack.faults[BUS].stats.writes_affected - before)
                state = wait_until(lambda r=robot: _healthy_after_a_step(r), 5.0)
                assert np.all(np.isfinite(state.q)) and state.wrench is not None
                opened += 1
            finally:
                robot.close()
    assert opened == 8
    # Replies were damaged during several of the opens, and those opens succeeded: the retries
    # did work (how many bytes an open exchanges, and so how many are hit, varies with timing).
    assert sum(1 for d in damaged if d) >= 2, damaged


def test_a_silent_servo_at_start_up_is_one_error_naming_the_device_and_port(tmp_path):
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False)
    config = replace(
        config,
        ft=replace(config.ft, enabled=False),
        imu=replace(config.imu, enabled=False),
        startup=StartupConfig(attempts=2, backoff_initial_s=0.01, backoff_max_s=0.02),
        bus=replace(config.bus, attempts=2),
    )
    with EmulatorStack(
        config, IdealSource(effort_limits=MODEL.effort_limits), link_dir=tmp_path
    ) as stack:
        stack.faults[BUS].silence(4)
        pings = stack.servos.instructions
        with pytest.raises(StartupError) as err:
            SerialRobot(stack.robot_config(), model=MODEL)
        text = str(err.value)
        assert text.startswith(f"servo_bus on {stack.ports[BUS]}: ")
        assert "2 attempts" in text and "servo 4" in text
        # bounded: 2 opens, each pinging servos 1-3 once and servo 4 twice, then giving up
        assert stack.servos.instructions - pings == 2 * (3 + 2)
        stack.faults[BUS].restore(4)
        with SerialRobot(stack.robot_config(), model=MODEL) as robot:  # the port was released
            robot.step()
            assert Health.JOINTS_STALE not in robot.read().health
