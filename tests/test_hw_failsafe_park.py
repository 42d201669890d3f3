"""A verified park (issue 13, item 3): ``close()`` leaves every servo torque on in current-based
position mode, read back, through lost status replies; when it cannot, it raises ``ParkError``
naming each servo's final torque and mode, still closes the ports, and stays idempotent.
Lock-step through the ideal emulators, faults through the emulators' fault injection."""

from __future__ import annotations

import numpy as np
import pytest
from hw_rig import TARGET, settled_rig
from twin.hardware import ManualClock, ParkError
from twin.hardware.emulator import BUS
from twin.hardware.protocols.dynamixel_table import HardwareError, OperatingMode, Units, XTable
from twin.hardware.transport import LinkState

from twin.robot import Health

SAFE = (1, int(OperatingMode.CURRENT_BASED_POSITION))


@pytest.fixture(params=["current", "servo"])
def rig(request):
    clock = ManualClock()
    with settled_rig(request.param, clock) as (robot, stack):
        try:
            yield robot, stack, clock
        finally:
            stack.faults[BUS].restore(2)


def _servo_states(stack) -> dict[int, tuple[int, int]]:
    return {
        pid: (s.get(XTable.TORQUE_ENABLE), s.get(XTable.OPERATING_MODE))
        for pid, s in stack.servos.servos.items()
    }


def _holds_after_close(stack, clock, q0) -> float:
    """Advance the physics 1 s with nobody on the bus; the largest joint excursion, rad."""
    excursion = 0.0
    for _ in range(100):
        clock.advance(10_000)
        stack.source.advance_to(clock.now_us())
        excursion = max(excursion, float(np.max(np.abs(stack.source.joint_state()[0] - q0))))
    return excursion


@pytest.mark.parametrize("lost", [1, 2, 3])
def test_close_after_lost_status_replies_leaves_torque_on_in_position_mode(rig, lost):
    robot, stack, clock = rig
    stack.faults[BUS].drop_next(2, lost)  # servo 2's next replies vanish on the wire
    robot.close()  # no exception: verified
    assert stack.faults[BUS].frames_pending_drop(2) == 0  # the faults did strike during close
    assert _servo_states(stack) == dict.fromkeys(stack.servos.servos, SAFE)
    assert all(st.safe for st in robot.park_report.values()) and len(robot.park_report) == 6
    q0 = stack.source.joint_state()[0]
    assert np.all(np.abs(q0 - TARGET) < 0.01)
    assert _holds_after_close(stack, clock, q0) < 0.005  # holding servo-side, not limp
    assert robot.bus.link.state is LinkState.CLOSED
    robot.close()  # idempotent


def test_a_servo_left_in_the_wrong_mode_is_set_up_again_and_read_back(rig):
    robot, stack, _ = rig
    servo = stack.servos.servos[5]
    servo.set(XTable.TORQUE_ENABLE, 0)
    servo.set(XTable.OPERATING_MODE, int(OperatingMode.VELOCITY))  # as another tool left it
    robot.close()
    assert _servo_states(stack) == dict.fromkeys(stack.servos.servos, SAFE)
    assert robot.park_report[5].safe


def test_close_with_a_silent_servo_raises_naming_every_servo(rig):
    robot, stack, _ = rig
    stack.faults[BUS].silence(2)
    with pytest.raises(ParkError) as err:
        robot.close()
    text = str(err.value)
    assert "servo 2: torque no reply, mode no reply" in text
    for pid in (1, 3, 4, 5, 6):  # the others are named with their verified state
        assert f"servo {pid}: torque on, mode CURRENT_BASED_POSITION (5)" in text
    assert not err.value.states[2].safe and err.value.states[1].safe
    assert robot.bus.link.state is LinkState.CLOSED  # the ports are closed all the same
    assert any(e.flag == Health.FAULT and "servo 2" in e.detail for e in robot.health_events)
    robot.close()  # idempotent: nothing more to say


def test_close_with_a_hardware_error_names_the_servo_that_cannot_take_torque(rig):
    robot, stack, _ = rig
    stack.servos.inject_hardware_error(4, HardwareError.OVERHEATING)
    with pytest.raises(ParkError, match=r"servo 4: torque off, mode CURRENT_BASED_POSITION"):
        robot.close()


def test_close_without_the_bus_says_the_arm_was_not_parked(rig):
    robot, stack, _ = rig
    stack.port(BUS).unplug()
    with pytest.raises(
        ParkError, match=r"servo bus is (lost|connecting): the servos were not parked"
    ):
        while robot.bus.ready:  # the reader thread notices the lost port
            robot.step()
        robot.close()
    stack.port(BUS).replug()


@pytest.mark.parametrize("rig", ["current"], indirect=True)
def test_close_of_an_arm_read_beyond_the_servo_range_parks_at_the_last_plausible_reading(rig):
    """A joint spun past the servos' multi-turn range of +-256 revolutions (a servo left on a
    Goal Current in Operating Mode 0, e.g. by another program: this backend's ``current`` mode
    sends its torque as a goal within the range, and its servos' Bus Watchdog stops them when
    nobody is on the bus). Its reading is one no servo can give (issue 31): the park's reading
    is refused as implausible, counted by reason, and never becomes the hold target; the park
    holds the last plausible reading, every servo torque on in current-based position mode,
    read back, and never fails with an argument error."""
    robot, stack, clock = rig
    lim = Units.EXTENDED_POSITION_LIMIT
    q_good = robot.read().q.copy()
    bus = robot.bus
    bus.write(1, XTable.BUS_WATCHDOG, 0)
    bus.write(1, XTable.TORQUE_ENABLE, 0)
    bus.write(1, XTable.OPERATING_MODE, int(OperatingMode.CURRENT))
    bus.write(1, XTable.TORQUE_ENABLE, 1)
    bus.write(1, XTable.GOAL_CURRENT, int(robot.arm.goal_current[0]))  # the effort limit
    beyond = 1.05 * lim / robot.arm.map.ticks_per_rad[0]  # rad
    for _ in range(100):
        if stack.source.joint_state()[0][0] > beyond:
            break
        clock.advance(2_000_000)
        stack.source.advance_to(clock.now_us())
    assert stack.source.joint_state()[0][0] > beyond  # the joint is beyond the servo range
    robot.close()  # verified: no ParkError
    assert robot.diagnostics().implausible_readings.get("tick range", 0) >= 1
    assert _servo_states(stack) == dict.fromkeys(stack.servos.servos, SAFE)  # torque on, mode 5
    want = robot.arm.map.ticks_from_q(q_good)
    goals = [stack.servos.servos[pid].get(XTable.GOAL_POSITION) for pid in robot.arm.ids]
    assert np.all(np.abs(np.array(goals) - want) <= 2)  # the last plausible reading
    assert all(st.safe for st in robot.park_report.values()) and len(robot.park_report) == 6
    assert robot.bus.link.state is LinkState.CLOSED
    robot.close()  # idempotent
