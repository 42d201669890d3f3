"""Fault handling: corrupted bytes on the F/T stream, ports lost and regained mid-run, a servo
hardware error. Real time through the ideal emulators; every wait is on a condition with a
timeout, and the 50 ms disconnection bound is checked on event time stamps."""

from __future__ import annotations

import numpy as np
import pytest
from twin.hardware import DeviceFaultError, DisconnectedError, SerialRobot
from twin.hardware.clock import MonotonicClock
from twin.hardware.drivers.bota_sensor import BotaSensor
from twin.hardware.emulator import BUS, FT, BotaEmulator, EmulatorStack, FaultInjector, IdealSource
from twin.hardware.emulator.sources import RealTimeRunner
from twin.hardware.emulator.testing import emulator_config, wait_until
from twin.hardware.protocols.dynamixel_table import HardwareError
from twin.hardware.transport import LinkState

from twin.kinematics import ArmModel
from twin.robot import Health, JointCommand, RobotState

MODEL = ArmModel.default()
KP = np.array([120.0, 240.0, 120.0, 25.0, 25.0, 10.0])
KD = np.array([6.0, 12.0, 4.0, 0.5, 0.5, 0.2])


def test_bota_stream_keeps_flowing_with_one_percent_corrupted_bytes(tmp_path):
    source = IdealSource(sinc_length=128)  # 400 Hz frames, 2500 us apart
    runner = RealTimeRunner(source, MonotonicClock())
    faults = FaultInjector(seed=11)
    emu = BotaEmulator(source, link_dir=tmp_path, faults=faults, boot_delay_s=0.01)
    try:
        with BotaSensor(emu.port.path, sinc_length=128, boot_timeout_s=1.0) as ft:
            log: list[tuple[int, int]] = []  # (device time, frames the clock shows lost) per frame
            ft.on_sample = lambda r: log.append((r.device_t_us, ft.timestamp_gaps))
            wait_until(lambda: len(log) >= 5, 3.0)
            faults.set(corrupt_rate=0.01)
            wait_until(lambda: emu.frames_damaged >= 40, 20.0)
            faults.set(corrupt_rate=0.0)
            n = len(log)
            wait_until(lambda: len(log) >= n + 5, 3.0)
            assert ft.link.state is LinkState.READY
            assert [e.kind for e in ft.link.events] == ["ready"]  # nothing escaped, no reconnection
            stats = ft.parser_stats
    finally:
        emu.close()
        runner.close()
    (t0, d0), (t1, d1) = log[0], log[-1]
    grid = set(range(t0, t1 + 1, 2500))
    accepted = {t for t, _ in log}
    damaged = {t for t in emu.damaged_t_us if t0 < t < t1}
    assert len(damaged) >= 40 and stats.crc_errors > 0
    assert not accepted & damaged  # no damaged frame was accepted
    assert accepted | damaged == grid  # every other frame arrived: the stream kept flowing
    assert d1 - d0 == len(damaged)  # and every bad frame was counted, from the device clock
    assert stats.dropped_frames <= len(damaged)  # the parser counts only frames it saw fail


def _trajectory(k: int) -> JointCommand:
    t, phase = k * 0.004, np.arange(6) * np.pi / 3  # 0.5 Hz; some joint is always moving
    q = 0.25 * (np.sin(np.pi * t + phase) - np.sin(phase))  # from zero
    qd = 0.25 * np.pi * np.cos(np.pi * t + phase)
    return JointCommand(q_des=q, qd_des=qd, kp=KP, kd=KD)


class Runner:
    """Steps the robot along the trajectory, counting refused writes (the arm holds meanwhile)."""

    def __init__(self, robot: SerialRobot) -> None:
        self.robot, self.k, self.refused = robot, 0, []

    def step(self) -> RobotState:
        try:
            self.robot.write(_trajectory(self.k))
        except (DisconnectedError, DeviceFaultError) as e:
            self.refused.append(e)
        self.robot.step()
        self.k += 1
        return self.robot.read()

    def until(self, predicate, timeout_s: float):
        return wait_until(lambda: predicate(self.step()), timeout_s, interval_s=0.0)


@pytest.fixture()
def rig(tmp_path):
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False)
    # light joints: every loop well damped with these gains
    source = IdealSource(inertia=0.005, damping=0.05, effort_limits=MODEL.effort_limits)
    with (
        EmulatorStack(config, source, link_dir=tmp_path) as stack,
        SerialRobot(stack.robot_config(), model=MODEL) as robot,
    ):
        yield robot, stack


@pytest.mark.parametrize("port", [FT, BUS])
def test_lost_port_sets_disconnected_within_50ms_holds_and_resumes(rig, port):
    robot, stack = rig
    run = Runner(robot)
    run.until(lambda s: run.k >= 100, 10.0)
    errors = [np.abs(run.step().q - _trajectory(run.k - 1).q_des) for _ in range(60)]
    assert np.max(errors) < 0.05  # tracking (the trajectory is indexed by step: jitter counts)
    assert robot.read().health == Health.OK
    t_unplug = stack.port(port).unplug()
    run.until(lambda s: Health.DISCONNECTED in s.health, 2.0)
    event = next(e for e in robot.health_events if e.flag == Health.DISCONNECTED and e.set)
    assert 0.0 <= event.t_s - t_unplug < 0.050, event
    assert port in event.detail
    # The arm holds (on the servos' last goal if the bus itself is gone): commands are refused
    # with a clear error and the joints stay put while the trajectory moves on.
    for _ in range(50):  # let the motion of the moment decay (0.2 s)
        run.step()
    q_start = stack.source.joint_state()[0]
    n_refused = len(run.refused)
    run.until(lambda s: len(run.refused) >= n_refused + 40, 5.0)
    assert isinstance(run.refused[-1], DisconnectedError) and "disconnected" in str(run.refused[-1])
    q_held = stack.source.joint_state()[0]
    assert np.all(np.abs(q_held - q_start) < 0.01)
    assert np.max(np.abs(q_held - _trajectory(run.k).q_des)) > 0.08  # not following any more
    # The port comes back: reconnection with back-off, start-up again, the run resumes.
    stack.port(port).replug()
    run.until(lambda s: Health.DISCONNECTED not in s.health, 10.0)
    n_refused = len(run.refused)
    for _ in range(150):  # 0.6 s to settle back onto the trajectory
        state = run.step()
    errors = [np.abs(run.step().q - _trajectory(run.k - 1).q_des) for _ in range(60)]
    assert len(run.refused) == n_refused and state.health == Health.OK
    assert np.max(errors) < 0.05  # tracking again
    flags = [(e.flag, e.set) for e in robot.health_events if e.flag == Health.DISCONNECTED]
    assert flags == [(Health.DISCONNECTED, True), (Health.DISCONNECTED, False)]


def test_servo_hardware_error_raises_fault_and_stops_motion(rig):
    robot, stack = rig
    run = Runner(robot)
    run.until(lambda s: run.k >= 60, 10.0)
    stack.servos.inject_hardware_error(2, HardwareError.OVERLOAD)
    run.until(lambda s: Health.FAULT in s.health, 2.0)
    assert robot.faults == {2: HardwareError.OVERLOAD}
    run.step()
    hold = robot.command_in_force.q_des
    n = len(run.refused)
    run.until(lambda s: len(run.refused) >= n + 60, 5.0)
    assert isinstance(run.refused[-1], DeviceFaultError)
    q, qd, _ = stack.source.joint_state()
    others = [0, 2, 3, 4, 5]
    assert np.all(np.abs(q[others] - hold[others]) < 0.02)  # stopped, holding
    assert abs(qd[1]) < 0.05  # the faulted joint has no torque: it coasted to rest
    assert any(
        e.flag == Health.FAULT and e.set and "servo 2" in e.detail for e in robot.health_events
    )
    assert robot.clear_fault()
    assert Health.FAULT not in run.step().health
    n = len(run.refused)
    for _ in range(20):
        run.step()
    assert len(run.refused) == n  # commands accepted again
