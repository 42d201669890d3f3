"""The achieved control rate is visible (issue 13, item 7): ``SerialRobot.diagnostics()`` from its
own clock, and one ``ControlRateWarning`` for a run that cannot hold its configured rate."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware import ControlRateWarning, ManualClock, SerialRobot
from twin.hardware.emulator import EmulatorStack, IdealSource
from twin.hardware.emulator.testing import emulator_config

from twin.kinematics import ArmModel
from twin.robot import ControlDiagnostics, JointCommand
from twin.scenario.runner import lock_step_config  # waits no load ends (issue 31, item 12)

MODEL = ArmModel.default()


def _config(**overrides):
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False, **overrides)
    return replace(
        config, ft=replace(config.ft, enabled=False), imu=replace(config.imu, enabled=False)
    )


def test_lock_step_diagnostics_are_exact_and_do_not_warn():
    clock = ManualClock()
    with (
        EmulatorStack(lock_step_config(_config()), IdealSource(), clock=clock) as stack,
        SerialRobot(stack.robot_config(), model=MODEL, clock=clock) as robot,
    ):
        d0 = robot.diagnostics()
        assert d0.cycles == 0 and math.isnan(d0.achieved_rate_hz) and math.isnan(d0.worst_cycle_s)
        robot.write(JointCommand(q_des=np.zeros(6), kp=np.full(6, 5.0), kd=np.full(6, 0.5)))
        with warnings.catch_warnings():
            warnings.simplefilter("error", ControlRateWarning)
            for _ in range(600):  # 2.4 s: two rate windows
                robot.step()
        d = robot.diagnostics()
    assert isinstance(d, ControlDiagnostics)
    assert (d.period_s, d.cycles, d.overruns, d.failed_reads) == (0.004, 600, 0, 0)
    assert d.achieved_rate_hz == pytest.approx(250.0, rel=1e-12) and d.rate_hz == 250.0
    assert d.worst_cycle_s == pytest.approx(0.004)


def test_a_run_below_its_rate_warns_once_and_shows_it():
    """Every servo answers 2 ms late (``reply_delay_s``, one after the other): a sync read of six
    lasts at least 12 ms against a 4 ms period, so the run cannot exceed 83 Hz on any machine.
    The servos answer only plain sync reads, as older firmware does (a FAST_SYNC_READ waits for
    its first servo's delay only)."""
    with EmulatorStack(_config(), IdealSource()) as stack:
        stack.servos.fast_read = False
        with SerialRobot(stack.robot_config(), model=MODEL) as robot:
            stack.servos.reply_delay_s = 0.002
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for _ in range(250):  # >= 3 s of wall time: at least three rate windows
                    robot.step()
            d = robot.diagnostics()
            stack.servos.reply_delay_s = 0.0
    rate_warnings = [w for w in caught if issubclass(w.category, ControlRateWarning)]
    assert len(rate_warnings) == 1, [str(w.message) for w in caught]
    text = str(rate_warnings[0].message)
    assert "configured 250 Hz" in text and "diagnostics()" in text
    assert rate_warnings[0].filename == __file__  # points at the caller's step()
    assert d.cycles == 250 and d.achieved_rate_hz < 84.0
    assert d.overruns >= 250 and d.worst_cycle_s >= 0.012


@given(
    st.lists(st.integers(1, 50_000), min_size=2, max_size=400),
    st.sampled_from([0.001, 0.004, 0.01]),
)
def test_rate_monitor_counts_cycles_over_its_clock(gaps_us, period_s):
    """Cycles end ``gaps_us`` apart after a start at t = 1000 us: the rate is cycles over the
    span, the worst cycle the largest gap, and a closed window warns iff its rate is low."""
    from twin.hardware.clock import RateMonitor

    monitor = RateMonitor(period_s, 0.9, window_s=0.05)
    t, slow = 1000, []
    monitor.start(t)
    for gap in gaps_us:
        t += gap
        slow.append(monitor.end(t))
        monitor.start(t)  # later starts do not move the origin
    assert monitor.cycles == len(gaps_us)
    assert monitor.achieved_rate_hz == pytest.approx(len(gaps_us) / (sum(gaps_us) * 1e-6))
    assert monitor.worst_cycle_s == pytest.approx(max(gaps_us[1:]) * 1e-6)
    for verdict in slow:
        if verdict is not None:
            rate, span_s = verdict
            assert rate < 0.9 / period_s and span_s >= 0.05 - 1e-12


def test_lock_step_with_the_idle_pump_moves_one_period_a_cycle_and_does_not_warn():
    """The lock-step runs of ``twin test --backend hardware``: robot and emulators share a
    ``ManualClock`` and an ``IdlePump`` keeps it moving while nobody steps. Each reply leaves 15 ms
    of wall time late (longer than the pump's idle wait), and the caller pauses once (a planner
    call: the pump moves time meanwhile); still every cycle moves the clock by exactly one period,
    does one write and one read, no overrun is counted and no ``ControlRateWarning`` comes."""
    from twin.hardware.emulator.cli import IdlePump
    from twin.hardware.emulator.testing import wait_until

    clock = ManualClock()
    config = _config(control_mode="current")
    # a lock-step run's patience (twin.sessions): a late reply is not a lost one on a busy machine
    config = replace(config, bus=replace(config.bus, reply_timeout_s=2.0))
    period_us = round(config.control_period_s * 1e6)
    with EmulatorStack(config, IdealSource(), clock=clock) as stack:
        pump = IdlePump(stack, period_us)
        try:
            with SerialRobot(stack.robot_config(), model=MODEL, clock=clock) as robot:
                robot.write(JointCommand(q_des=np.zeros(6), kp=np.full(6, 5.0), kd=np.full(6, 0.5)))
                robot.step()  # the set-up's last sync write (no reply) is counted before t0
                stack.servos.reply_delay_s = 0.015
                with warnings.catch_warnings():
                    warnings.simplefilter("error", ControlRateWarning)
                    for phase in range(2):
                        t0, n0, a0 = clock.now_us(), stack.servos.instructions, pump.advances
                        for _ in range(130):
                            robot.write(robot.command_in_force)
                            robot.step()
                        assert clock.now_us() - t0 == 130 * period_us  # one period a cycle
                        # one write, one read; after the pause (phase 1) the first cycle also
                        # finds the servos' Bus Watchdog tripped (the pause is longer than it is
                        # armed for) and clears it: read, clear, arm, read back, read the joints
                        assert stack.servos.instructions - n0 == 2 * 130 + 5 * phase
                        assert pump.advances == a0  # the pump stood aside
                        if phase == 0:  # the caller pauses: time moves on without cycles
                            wait_until(lambda a0=a0: pump.advances >= a0 + 15, timeout_s=10.0)
                stack.servos.reply_delay_s = 0.0
                d = robot.diagnostics()
        finally:
            pump.close()
    assert (d.cycles, d.overruns, d.failed_reads) == (261, 0, 0)
    assert (d.bus_watchdog.trips, d.bus_watchdog.recoveries) == (1, 1)  # the pause's
    assert d.achieved_rate_hz == pytest.approx(250.0, rel=1e-9)  # the pause is not the loop's
    assert d.worst_cycle_s == pytest.approx(0.004)


def test_rate_monitor_leaves_a_pause_out():
    """A cycle starting more than ``pause_s`` after the previous one ended ends a pause: the
    pause is out of the rate and the worst cycle, and the start says so."""
    from twin.hardware.clock import RateMonitor

    monitor = RateMonitor(0.004, 0.9, window_s=0.1, pause_s=0.05)
    t = 0
    assert monitor.start(t) is False
    for _ in range(10):
        t += 4000
        assert monitor.end(t) is None
        assert monitor.start(t) is False
    assert monitor.start(t + 50_000) is False  # exactly pause_s: still the loop
    t += 200_000
    assert monitor.start(t) is True
    for _ in range(40):  # 0.16 s of cycles after the pause: a full window at 250 Hz
        t += 4000
        assert monitor.end(t) is None
        monitor.start(t)
    assert monitor.cycles == 50 and monitor.pauses == 1
    assert monitor.achieved_rate_hz == pytest.approx(250.0)
    assert monitor.worst_cycle_s == pytest.approx(0.004)
