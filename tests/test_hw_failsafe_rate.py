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

MODEL = ArmModel.default()


def _config(**overrides):
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False, **overrides)
    return replace(
        config, ft=replace(config.ft, enabled=False), imu=replace(config.imu, enabled=False)
    )


def test_lock_step_diagnostics_are_exact_and_do_not_warn():
    clock = ManualClock()
    with (
        EmulatorStack(_config(), IdealSource(), clock=clock) as stack,
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
