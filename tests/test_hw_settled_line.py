"""``DynamixelBus``'s look for late replies before an instruction (``_start``) is left out only
while no reply can be late: after the cycle's fast read took its exact answer (and broadcasts,
which no servo answers); after a reply that did not come in full, the next instruction looks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from twin.hardware import SerialRobot
from twin.hardware.emulator import BUS, EmulatorStack, IdealSource
from twin.hardware.emulator.testing import emulator_config
from twin.hardware.protocols.dynamixel_table import BROADCAST_ID

from twin.kinematics import ArmModel
from twin.robot import JointCommand

MODEL = ArmModel.default()


@pytest.fixture
def robot(tmp_path):
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False)
    config = replace(
        config, ft=replace(config.ft, enabled=False), imu=replace(config.imu, enabled=False)
    )
    source = IdealSource(effort_limits=MODEL.effort_limits)
    with EmulatorStack(config, source, link_dir=tmp_path) as stack:
        robot = SerialRobot(stack.robot_config(), model=MODEL)
        try:
            yield robot, stack
        finally:
            robot.close()


def _looks(robot) -> list[float]:
    """Record every ``receive`` of the bus's link with a zero timeout (a look for late bytes)."""
    link, seen = robot.bus.link, []
    receive = link.receive

    def spy(timeout_s: float) -> bytes:
        if timeout_s == 0.0:
            seen.append(timeout_s)
        return receive(timeout_s)

    link.receive = spy
    return seen


def test_a_settled_line_is_not_looked_at_and_a_failed_read_unsettles_it(robot):
    robot, stack = robot
    command = JointCommand(q_des=MODEL.home_q, kp=np.full(6, 5.0), kd=np.full(6, 0.5))
    for _ in range(3):
        robot.write(command)
        robot.step()
    assert robot.bus.uses_fast_read(robot.arm.ids) and robot.bus._settled
    looks = _looks(robot)
    settled_cycles = 0
    for _ in range(10):  # goal (a broadcast) and fast read: nothing can be late
        settled, before = robot.bus._settled, len(looks)
        robot.write(command)
        robot.step()
        if settled:  # a cycle that starts settled makes no look (a loaded machine can leave
            settled_cycles += 1  # the odd cycle's answer not taken in full: that one may look)
            assert len(looks) == before
    assert settled_cycles >= 5 and robot.stats.failed_reads == 0
    for _ in range(20):  # settled again a cycle or two after such an odd one
        if robot.bus._settled:
            break
        robot.write(command)
        robot.step()
    assert robot.bus._settled
    timeouts = robot.bus.stats.timeouts
    stack.faults[BUS].delay_next(BROADCAST_ID)  # the next fast read's answer is held back
    robot.write(command)
    robot.step()  # its reply times out; the fallback's reads take the reading
    assert robot.bus.stats.timeouts == timeouts + 1 and not robot.bus._settled
    robot.write(command)
    robot.step()  # a reply is out there: this cycle's instruction looks for it first
    assert len(looks) >= 1
