"""The live twin on ``SerialRobot`` through the sim-backed device emulators, lock-step with a
``ManualClock`` (set up as in ``tests/test_hw_hil.py``): every reading crossed the DYNAMIXEL, Bota
and WitMotion codecs, so the residuals are the wire's quantisation and nothing is flagged."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from twin.hardware import ManualClock, SerialRobot
from twin.hardware.emulator import EmulatorStack, make_sim_source
from twin.hardware.emulator.testing import emulator_config
from twin.hardware.protocols import witmotion as wit

from twin.kinematics.gravity import gravity_torques
from twin.robot import JointCommand
from twin.shadow import Shadow, ShadowConfig, ShadowFlag

pytest.importorskip("twin.sim.robot")

PERIOD_US = 4000
N_REST, N_MOVE, N_HOLD = 140, 200, 80  # 0.56 s at rest (the tare), 0.8 s of motion, 0.32 s hold
KP = np.array([120.0, 240.0, 120.0, 25.0, 25.0, 10.0])
KD = np.array([6.0, 12.0, 4.0, 0.5, 0.5, 0.2])
DELTA = np.array([0.4, -0.3, 0.3, 0.5, -0.4, 0.6])
#: quantised servo velocities (0.229 rpm steps): difference them over 20 ms, not one 4 ms cycle
HARDWARE = ShadowConfig(accel_window_s=0.02)
TOOL_WEIGHT_N = 3.5  # sensor half, IMU and tool: 0.352 kg
TOOL_LEVER_M = 0.1


@pytest.fixture(scope="module")
def run():
    config = emulator_config(watchdog_s=None, stale_after_s=1.0)
    config = replace(config, bus=replace(config.bus, reply_timeout_s=2.0))
    clock = ManualClock()
    with EmulatorStack(config, make_sim_source(seed=3), clock=clock) as stack:
        with stack.clock_running(PERIOD_US):
            robot = SerialRobot(stack.robot_config(), clock=clock)
        with robot, Shadow(robot, config=HARDWARE) as shadow:
            model = robot.model
            s = np.clip((np.arange(N_REST + N_MOVE + N_HOLD) - N_REST) / N_MOVE, 0.0, 1.0)
            q = model.home_q + (10 * s**3 - 15 * s**4 + 6 * s**5)[:, None] * DELTA
            reports = []
            for qk in q:  # quintic, rest to rest
                robot.write(JointCommand(q_des=qk, tau_ff=gravity_torques(model, qk), kp=KP, kd=KD))
                robot.step()
                reports.append(shadow.update())
    tick = 1.0 / config.joint_map().ticks_per_rad
    return reports, float(np.sum(tick))


def test_nothing_is_flagged_on_the_serial_arm(run):
    reports, _ = run
    flags = np.array([int(r.flags) for r in reports])
    taring = int(np.sum(flags == ShadowFlag.TARING))  # 0.5 s of 200 Hz F/T samples
    assert abs(taring * PERIOD_US * 1e-6 - HARDWARE.tare_s) <= 2 * PERIOD_US * 1e-6
    assert np.all(flags[:taring] == ShadowFlag.TARING)
    assert np.all(flags[taring:] == ShadowFlag.OK)
    assert abs(reports[-1].payload_mass_kg) == 0.0


def test_at_rest_the_residuals_are_the_wire_quantisation(run):
    reports, ticks = run
    # before the motion (after the first 0.24 s: the servos take over from their own hold at
    # the first command, a transient the gyro sees once in a while); after the hold settled
    rest, held = reports[60:N_REST], reports[-40:]
    wrench = np.abs([r.wrench_residual for r in rest + held]).max(axis=0)
    # a tick per joint tilts the tool's weight by at most the sum of the ticks (rad)
    assert wrench[:3].max() <= TOOL_WEIGHT_N * ticks, wrench
    assert wrench[3:].max() <= TOOL_WEIGHT_N * TOOL_LEVER_M * ticks, wrench
    # the IMU before the motion (after it, motion below one velocity step may remain: the gyro
    # sees it, the servo's quantised velocity does not)
    imu = np.abs([r.imu_residual for r in rest]).max(axis=0)
    assert imu[:3].max() <= wit.ACCEL_SCALE / 2 + 9.81 * ticks + 1e-9, imu
    assert imu[3:].max() <= wit.GYRO_SCALE / 2 + 1e-9, imu


def test_in_motion_the_wrench_residual_stays_below_the_event_thresholds(run):
    reports, _ = run
    moving = reports[N_REST : N_REST + N_MOVE]
    wrench = np.abs([r.wrench_residual for r in moving]).max(axis=0)
    assert wrench[:3].max() < 0.3 and wrench[3:].max() < 0.02, wrench
    unexplained = np.abs([r.contact_wrench for r in moving]).max(axis=0)
    assert np.linalg.norm(unexplained[:3]) < 0.5 * HARDWARE.event_force_n
    assert np.linalg.norm(reports[-1].ft_offset[:3]) < 0.02
