"""A stalled host cannot drive the arm (issue 31, item 11): the servos' Bus Watchdog (X-series
control table, address 98) in the emulator, byte for byte through a raw port, and through
``SerialRobot``: armed in ``current`` mode, a host stall stops the servos servo-side, and the
trip is found, cleared and recovered from (``docs/protocols/dynamixel.md``, "Bus Watchdog";
``docs/faults/serial.md``, "Host stall")."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest
import serial
from hypothesis import given, settings
from hypothesis import strategies as st
from twin.hardware import ConfigError, ManualClock, SerialRobot
from twin.hardware.bus_watchdog import watchdog_units
from twin.hardware.config import load_config
from twin.hardware.emulator import EmulatorStack, IdealSource, ServoChainEmulator
from twin.hardware.emulator.servo_chain import EmulatedServo
from twin.hardware.emulator.testing import emulator_config
from twin.hardware.emulator.testing import status_replies as _replies
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import (
    GOAL_REGISTERS,
    OperatingMode,
    StatusError,
    XTable,
)

from twin.kinematics import ArmModel
from twin.robot import Health, JointCommand

MODEL = ArmModel.default()
CONFIG = load_config()
MAP = CONFIG.joint_map()
KP = np.array([120.0, 240.0, 120.0, 25.0, 25.0, 10.0]) / 4
KD = np.array([6.0, 12.0, 4.0, 0.5, 0.5, 0.2]) / 4
PID = 4  # the servo the register tests use (an XM430, direct drive)
UNIT_US = 20_000  # Bus Watchdog: 20 ms a unit


# ----------------------------------------------------------------------------- the emulator
@pytest.fixture()
def chain(tmp_path):
    """The servo chain alone, lock-step (a ``ManualClock``), and a raw port to it."""
    clock = ManualClock()
    source = IdealSource()
    models = [j.model_number for j in CONFIG.joints]
    emu = ServoChainEmulator(source, MAP, clock, model_numbers=models, link_dir=tmp_path)
    port = serial.Serial(emu.port.path, 1_000_000, timeout=0.5)
    yield emu, port, clock
    port.close()
    emu.close()


def _write(port, reg, value: int, pid: int = PID) -> StatusError:
    port.write(dxl.encode_instruction(dxl.write(pid, reg.address, dxl.encode_register(reg, value))))
    return _replies(port, 1)[0].error_code


def _read(port, reg, pid: int = PID) -> int:
    port.write(dxl.encode_instruction(dxl.read(pid, reg.address, reg.size)))
    return dxl.decode_value(_replies(port, 1)[0].params, reg.signed)


def _setup(port, mode: OperatingMode, units: int, pid: int = PID) -> None:
    assert _write(port, XTable.OPERATING_MODE, mode, pid) is StatusError.NONE
    assert _write(port, XTable.TORQUE_ENABLE, 1, pid) is StatusError.NONE
    assert _write(port, XTable.BUS_WATCHDOG, units, pid) is StatusError.NONE


def test_register_is_ram_signed_and_takes_0_to_127(chain):
    _emu, port, _ = chain
    assert _read(port, XTable.BUS_WATCHDOG) == 0  # off by default
    for raw in (b"\x80", b"\xff"):  # 128 and 255 unsigned: -128 and -1, a status only
        port.write(dxl.encode_instruction(dxl.write(PID, XTable.BUS_WATCHDOG.address, raw)))
        assert _replies(port, 1)[0].error_code is StatusError.DATA_RANGE
    assert _write(port, XTable.BUS_WATCHDOG, 127) is StatusError.NONE
    assert _read(port, XTable.BUS_WATCHDOG) == 127
    port.write(dxl.encode_instruction(dxl.reboot(PID)))
    _replies(port, 1)
    assert _read(port, XTable.BUS_WATCHDOG) == 0  # RAM: a reboot clears it


def test_current_mode_trip_zeroes_the_goal_and_refuses_goals_until_cleared(chain):
    emu, port, clock = chain
    _setup(port, OperatingMode.CURRENT, 2)  # 40 ms
    assert _write(port, XTable.GOAL_CURRENT, 200) is StatusError.NONE
    t0 = clock.now_us()
    clock.advance(30_000)
    assert _read(port, XTable.BUS_WATCHDOG) == 2  # 30 ms < 40 ms; this READ starts it again
    clock.advance(100_000)  # nothing on the bus for 100 ms: the trip is at 30 + 40 ms
    assert _read(port, XTable.BUS_WATCHDOG) == -1
    assert emu.watchdog.trips == [(PID, t0 + 70_000)]  # at its deadline, in physics time
    assert _read(port, XTable.GOAL_CURRENT) == 0  # stopped: the joint runs free
    assert _read(port, XTable.TORQUE_ENABLE) == 1
    velocity = _read(port, XTable.PRESENT_VELOCITY)
    clock.advance(100_000)  # coasting down: inertia 0.05, damping 0.5, exp(-1) in 0.1 s
    assert 0 < _read(port, XTable.PRESENT_VELOCITY) < 0.4 * velocity
    # the goals are read-only, and the watchdog is re-armed only after a 0
    assert _write(port, XTable.GOAL_CURRENT, 100) is StatusError.DATA_RANGE
    assert _write(port, XTable.GOAL_POSITION, 2048) is StatusError.DATA_RANGE
    assert _write(port, XTable.BUS_WATCHDOG, 3) is StatusError.DATA_RANGE
    assert _write(port, XTable.BUS_WATCHDOG, 0) is StatusError.NONE
    assert _write(port, XTable.GOAL_CURRENT, 100) is StatusError.NONE
    assert _write(port, XTable.BUS_WATCHDOG, 3) is StatusError.NONE


def test_position_mode_trip_holds_where_the_servo_was(chain):
    _emu, port, clock = chain
    _setup(port, OperatingMode.CURRENT_BASED_POSITION, 1)  # 20 ms
    assert _write(port, XTable.POSITION_P_GAIN, 800) is StatusError.NONE
    assert _write(port, XTable.GOAL_POSITION, 2048 + 600) is StatusError.NONE  # 0.92 rad away
    clock.advance(10_000)
    moving = _read(port, XTable.PRESENT_POSITION)
    assert 2048 < moving < 2048 + 600
    clock.advance(200_000)  # the trip is at 30 ms, on the way
    held = _read(port, XTable.GOAL_POSITION)
    assert _read(port, XTable.BUS_WATCHDOG) == -1
    assert moving < held < 2048 + 600  # Goal Position became the position at the trip
    # the cycle's SYNC_WRITE of goals (no status) is refused too: the servo keeps holding
    goals = {pid: dxl.encode_register(XTable.GOAL_POSITION, 2048 + 600) for pid in MAP.ids}
    port.write(dxl.encode_instruction(dxl.sync_write(XTable.GOAL_POSITION.address, 4, goals)))
    clock.advance(300_000)
    assert _read(port, XTable.GOAL_POSITION) == held
    assert abs(_read(port, XTable.PRESENT_POSITION) - held) <= 2  # held there


def test_no_trip_with_torque_off_or_while_instructions_come(chain):
    emu, port, clock = chain
    assert _write(port, XTable.BUS_WATCHDOG, 1, pid=2) is StatusError.NONE  # torque off
    _setup(port, OperatingMode.VELOCITY, 1)
    for _ in range(20):  # an instruction every 15 ms < 20 ms: never trips
        clock.advance(15_000)
        _read(port, XTable.PRESENT_POSITION, pid=6)  # addressed to another servo: not heard
        port.write(dxl.encode_instruction(dxl.sync_read(XTable.LED.address, 1, [1])))
        _replies(port, 1)  # a broadcast instruction: heard by every servo
    clock.advance(1_000_000)
    assert _read(port, XTable.BUS_WATCHDOG, pid=2) == 1  # torque off: not watching
    assert _read(port, XTable.BUS_WATCHDOG) == -1
    assert [pid for pid, _ in emu.watchdog.trips] == [PID]


@given(
    tripped=st.booleans(),
    value=st.integers(-128, 127),
    goal=st.sampled_from(GOAL_REGISTERS),
    goal_value=st.integers(-885, 885),
)
def test_write_rules_of_the_register_and_the_goals(tripped, value, goal, goal_value):
    """Property (``EmulatedServo.check_write``, no port): 98 takes 0..127 and, once tripped,
    only 0; the Goal registers are refused while tripped, whatever the value."""
    servo = EmulatedServo(1, 1020)
    servo.set(XTable.CURRENT_LIMIT, 1193)
    servo.set(XTable.BUS_WATCHDOG, -1 if tripped else 0)
    expect_ok = value == 0 or (0 < value <= 127 and not tripped)
    code = servo.check_write(
        XTable.BUS_WATCHDOG.address, dxl.encode_register(XTable.BUS_WATCHDOG, value)
    )
    assert code is (StatusError.NONE if expect_ok else StatusError.DATA_RANGE)
    code = servo.check_write(goal.address, dxl.encode_register(goal, goal_value))
    if tripped:
        assert code is StatusError.DATA_RANGE
    else:
        assert code is not StatusError.DATA_RANGE  # (a value beyond its limit: DATA_LIMIT)


@settings(max_examples=25, deadline=None)
@given(
    units=st.integers(1, 5),
    gaps_ms=st.lists(st.integers(1, 150), min_size=1, max_size=6),
)
def test_trips_at_the_first_gap_longer_than_armed(tmp_path_factory, units, gaps_ms):
    """Property: with instructions ``gaps_ms`` apart, the servo trips at the first gap longer
    than ``units`` x 20 ms, at exactly the last instruction's time plus that, and only then."""
    clock = ManualClock()
    emu = ServoChainEmulator(
        IdealSource(), MAP, clock, link_dir=tmp_path_factory.mktemp("wd"), fast_read=False
    )
    port = serial.Serial(emu.port.path, 1_000_000, timeout=0.5)
    try:
        _setup(port, OperatingMode.CURRENT_BASED_POSITION, units)
        last, expected = clock.now_us(), None
        for gap in gaps_ms:
            clock.advance(gap * 1000)
            value = _read(port, XTable.BUS_WATCHDOG)
            if expected is None and gap * 1000 > units * UNIT_US:
                expected = last + units * UNIT_US
            assert value == (units if expected is None else -1)
            last = clock.now_us()
        assert emu.watchdog.trips == ([] if expected is None else [(PID, expected)])
    finally:
        port.close()
        emu.close()


# ----------------------------------------------------------------------------- the host
def _config(mode: str):
    config = emulator_config(control_mode=mode, watchdog_s=None, hold_gravity_compensation=False)
    return replace(
        config, ft=replace(config.ft, enabled=False), imu=replace(config.imu, enabled=False)
    )


def _moving(k: int) -> JointCommand:
    """A 0.5 Hz sine from zero on every joint (the arm moves at up to 0.9 rad/s)."""
    t, phase = k * 0.004, np.arange(6) * np.pi / 3
    return JointCommand(
        q_des=0.25 * (np.sin(np.pi * t + phase) - np.sin(phase)),
        qd_des=0.25 * np.pi * np.cos(np.pi * t + phase),
        kp=KP,
        kd=KD,
    )


def _armed(stack) -> dict[int, int]:
    return {pid: s.get(XTable.BUS_WATCHDOG) for pid, s in stack.servos.servos.items()}


@pytest.fixture()
def lock_step():
    clock = ManualClock()
    with EmulatorStack(_config("current"), IdealSource(), clock=clock) as stack:
        yield stack, clock


def test_armed_at_the_first_cycle_in_current_mode_and_disarmed_by_the_park(lock_step):
    stack, clock = lock_step
    units = watchdog_units(CONFIG.control_period_s)
    assert units == 1  # five 4 ms periods: 20 ms
    for pid in (1, 5):  # a trip left by an earlier run, and a servo armed by another program
        stack.servos.servos[pid].set(XTable.BUS_WATCHDOG, -1 if pid == 1 else 7)
    with SerialRobot(stack.robot_config(), model=MODEL, clock=clock) as robot:
        assert _armed(stack) == dict.fromkeys(MAP.ids, 0)  # cleared by the set-up
        for k in range(50):
            robot.write(_moving(k))
            robot.step()
        assert _armed(stack) == dict.fromkeys(MAP.ids, units)
        assert robot.read().health == Health.OK
        # the goals are taken: the arm follows the trajectory (within the low gains' lag)
        q = stack.source.joint_state()[0]
        assert np.all(np.sign(q) == np.sign(_moving(49).q_des)) and np.max(np.abs(q)) > 0.1
    assert _armed(stack) == dict.fromkeys(MAP.ids, 0)  # the park holds without the host
    clock.advance(1_000_000)
    stack.source.advance_to(clock.now_us())
    assert stack.servos.watchdog.trips == []


def test_servo_mode_leaves_it_off():
    clock = ManualClock()
    with (
        EmulatorStack(_config("servo"), IdealSource(), clock=clock) as stack,
        SerialRobot(stack.robot_config(), model=MODEL, clock=clock) as robot,
    ):
        for k in range(20):
            robot.write(_moving(k))
            robot.step()
        assert _armed(stack) == dict.fromkeys(MAP.ids, 0)
        assert robot.diagnostics().bus_watchdog.armed_s == 0.0


def test_lock_step_stall_trips_and_is_recovered_with_a_hold(lock_step):
    """The stall in robot time (exact on any machine): 0.5 s with nobody on the bus."""
    stack, clock = lock_step
    with SerialRobot(stack.robot_config(), model=MODEL, clock=clock) as robot:
        for k in range(150):
            robot.write(_moving(k))
            robot.step()
        q0 = stack.source.joint_state()[0]
        t0 = clock.now_us()
        excursion = 0.0
        for _ in range(100):  # 0.5 s in 5 ms steps: the host sends nothing
            clock.advance(5_000)
            stack.source.advance_to(clock.now_us())
            excursion = max(excursion, float(np.max(np.abs(stack.source.joint_state()[0] - q0))))
        assert excursion < 0.05, (excursion, stack.servos.watchdog.trips, robot.diagnostics())
        trips = stack.servos.watchdog.trips
        assert sorted(pid for pid, _ in trips) == list(MAP.ids)
        assert all(t == t0 + 20_000 for _, t in trips)  # 20 ms after the last cycle's read
        robot.step()  # finds the trip, clears and re-arms it, holds the measured position
        d = robot.diagnostics().bus_watchdog
        assert (d.trips, d.recoveries, d.armed_s) == (1, 1, 0.02)
        assert "tripped" in d.last and "silent 500 ms" in d.last and "armed again" in d.last
        assert _armed(stack) == dict.fromkeys(MAP.ids, 1)
        assert Health.WATCHDOG in robot.read().health
        event = robot.health_events[-1]
        assert event.flag == Health.WATCHDOG and event.set and "tripped" in event.detail
        q_hold = robot.read().q
        for _ in range(50):
            robot.step()  # the hold: nothing moves
        assert robot.read().q == pytest.approx(q_hold, abs=2e-3)
        robot.write(_moving(150))  # the next write takes over
        robot.step()
        assert robot.read().health == Health.OK


def test_lock_step_stall_on_the_gravity_loaded_sim_plant():
    """The same stall on the PyBullet arm under gravity (the emulators' sim source): the trip's
    hold has no gravity folded in, so the joints sag by about gravity / hold kp (joint 3: 2.8
    N m / 120 N m/rad = 0.023 rad) on top of the stop; still under 0.05 rad."""
    pytest.importorskip("twin.sim.robot")
    from twin.hardware.emulator import make_sim_source

    from twin.kinematics.gravity import gravity_torques

    config = replace(_config("current"), hold_gravity_compensation=True)
    config = replace(config, bus=replace(config.bus, reply_timeout_s=2.0))  # a slow sim step
    clock = ManualClock()
    with EmulatorStack(config, make_sim_source(seed=3), clock=clock) as stack:
        with stack.clock_running(4000):
            robot = SerialRobot(stack.robot_config(), clock=clock)
        with robot:
            q_start = robot.read().q.copy()
            for k in range(250):
                cmd = _moving(k)
                q_des = q_start + cmd.q_des
                tau = gravity_torques(robot.model, q_des)
                robot.write(replace(cmd, q_des=q_des, tau_ff=tau, kp=2 * KP, kd=2 * KD))
                robot.step()
            q0, excursion = stack.source.joint_state()[0], 0.0
            assert np.max(np.abs(stack.source.joint_state()[1])) > 0.3  # moving
            for _ in range(100):
                clock.advance(5_000)
                stack.source.advance_to(clock.now_us())
                excursion = max(
                    excursion, float(np.max(np.abs(stack.source.joint_state()[0] - q0)))
                )
            assert excursion < 0.05, excursion
            robot.step()
            assert robot.diagnostics().bus_watchdog.recoveries == 1


def test_host_stall_in_current_mode_moves_no_joint_more_than_0_05_rad():
    """Issue 31, "Must show": a 0.5 s sleep in the control thread between ``step()`` calls, in
    real time, the arm moving at up to 0.9 rad/s: no joint moves more than 0.05 rad (0.46 rad
    before, Operating Mode 0 without the watchdog), and the diagnostics show the trip and the
    recovery."""
    with (
        EmulatorStack(_config("current"), IdealSource()) as stack,
        SerialRobot(stack.robot_config(), model=MODEL) as robot,
    ):
        for k in range(150):
            robot.write(_moving(k))
            robot.step()
        trips_before = robot.diagnostics().bus_watchdog.trips  # a loaded machine may add some
        q0, t0 = stack.source.joint_state()[0], stack.clock.now_us()
        excursion, end = 0.0, time.monotonic() + 0.5
        while time.monotonic() < end:  # the stall: the control thread sleeps, sampling the plant
            time.sleep(0.005)
            excursion = max(excursion, float(np.max(np.abs(stack.source.joint_state()[0] - q0))))
        assert excursion < 0.05, excursion
        # every servo stopped servo-side (in the stall, or before it if a loaded machine's
        # late cycle tripped it and the host has not looked yet: it holds either way)
        assert _armed(stack) == dict.fromkeys(MAP.ids, -1)
        assert all(t < t0 + 100_000 for _, t in stack.servos.watchdog.trips)
        for _ in range(25):  # the first step recovers (a later one if a loaded bus lost a reply)
            robot.step()
            if robot.diagnostics().bus_watchdog.recoveries > trips_before:
                break
        d = robot.diagnostics().bus_watchdog
        assert d.trips == d.recoveries == trips_before + 1
        # (armed again and read back; on a loaded machine the cycle after may trip it again)
        assert "tripped" in d.last and "armed again" in d.last
        assert any(e.flag == Health.WATCHDOG and "tripped" in e.detail for e in robot.health_events)


def test_current_mode_refuses_a_hold_gain_that_cannot_carry_a_torque():
    config = replace(_config("current"), hold_kp=(120.0, 240.0, 0.0, 25.0, 25.0, 0.01))
    with pytest.raises(ConfigError) as err:
        SerialRobot(config, model=MODEL)
    text = str(err.value)
    assert "robot.hold_kp" in text and "P = 0 on joint_3, joint_6" in text
    assert "expected at least 0.0535, 0.0122 N m/rad" in text
