"""Plausible servo readings (issue 31, item 1): a present-values answer that passes its CRC but
says something no servo can (beyond the tick range or the joint limits, a jump, a velocity or a
current beyond the servo's limits) is refused, counted by reason in ``diagnostics()``, treated
as a failed read and never used as a hold target or a control input. Lock-step through the ideal
emulators; the forged reply through the emulators' fault injection (``forged_present``)."""

from __future__ import annotations

import numpy as np
import pytest
from hw_rig import KD, KP, MODEL, TARGET, settled_rig
from twin.hardware import ManualClock
from twin.hardware.config import load_config
from twin.hardware.drivers.servo_checks import (
    CURRENT_MARGIN,
    JUMP_MARGIN_RAD,
    POSITION_MARGIN_RAD,
    ImplausibleReadingError,
    ServoChecks,
)
from twin.hardware.emulator import BUS
from twin.hardware.emulator.faults import forged_present
from twin.hardware.protocols.dynamixel_table import BROADCAST_ID, Units

from twin.robot import Health, JointCommand

MAP = load_config().joint_map()
WATCHDOG_S = 0.1
PERIOD_US = 4000


def _checks() -> ServoChecks:
    return ServoChecks(MAP, MODEL.lower, MODEL.upper, np.full(6, 200), np.full(6, 1193))


def _rows(q=None, qd=None, tau=None) -> np.ndarray:
    z = np.zeros(6)
    return np.array([z if a is None else a for a in (q, qd, tau)], float)


def test_each_impossible_value_is_refused_and_counted_by_reason():
    checks = _checks()
    checks.check(_rows(TARGET), 0, 100)  # the anchor, read from t = 0 us
    lim = Units.EXTENDED_POSITION_LIMIT
    beyond_ticks = (lim + 1 - MAP.zero_ticks[0]) / MAP.ticks_per_rad[0]
    q_far = TARGET.copy()
    q_far[0] = beyond_ticks
    q_limit = TARGET.copy()
    q_limit[1] = MODEL.upper[1] + POSITION_MARGIN_RAD + 0.01
    qd = np.zeros(6)
    qd[2] = checks.qd_max[2] * 1.01
    tau = np.zeros(6)
    tau[5] = 1193 * CURRENT_MARGIN * MAP.torque_unit[5] * 1.01
    q_jump = TARGET.copy()
    q_jump[3] += checks.qd_max[3] * 4e-3 + JUMP_MARGIN_RAD + 0.01
    cases = [
        (_rows(q_jump), "jump", "servo 4"),  # first: 4 ms after the anchor's read
        (_rows(q_far), "tick range", "servo 1"),
        (_rows(q_limit), "joint limit", "servo 2"),
        (_rows(TARGET, qd=qd), "velocity", "servo 3"),
        (_rows(TARGET, tau=tau), "current", "servo 6"),
    ]
    t = 0
    for rows, reason, servo in cases:
        t += 4000
        with pytest.raises(ImplausibleReadingError, match=servo) as err:
            checks.check(rows, t - 100, t)
        assert err.value.reasons == (reason,)
    report = checks.counts.report()
    assert report.rejected == {r: 1 for _, r, _ in cases} and report.accepted == 1
    # within every bound, and the jump measured from the last accepted reading's read
    ok = TARGET.copy()
    ok[3] += 0.9 * checks.qd_max[3] * (t + 4000) * 1e-6
    checks.check(_rows(ok), t + 3900, t + 4000)
    assert checks.counts.report().accepted == 2


def test_a_nan_and_the_range_edge():
    checks = _checks()
    lim = Units.EXTENDED_POSITION_LIMIT
    edge = (np.full(6, float(lim)) - MAP.zero_ticks) / (MAP.direction * MAP.ticks_per_rad)
    wide = ServoChecks(
        MAP, np.full(6, -np.inf), np.full(6, np.inf), np.full(6, 200), np.full(6, 1193)
    )
    wide.check(_rows(edge), 0, 10)  # exactly at the range's edge: accepted
    with pytest.raises(ImplausibleReadingError):
        checks.check(_rows(np.full(6, np.nan)), 0, 10)


@pytest.fixture(params=["current", "servo"])
def rig(request):
    clock = ManualClock()
    with settled_rig(request.param, clock, watchdog_s=WATCHDOG_S) as (robot, stack):
        yield robot, stack, clock


def _ticks(q: float, j: int) -> int:
    return round(q * MAP.direction[j] * MAP.ticks_per_rad[j] + MAP.zero_ticks[j])


#: One forged reply each (raw register values of servo 1, joint index 0), and the reason it is
#: refused for: q1 = 915,055 rad and qd1 = 6.4e6 rad/s as the attack found, a jump, a current.
FORGERIES = {
    "tick range": {"position": _ticks(915_055.0, 0)},
    "joint limit": {"position": _ticks(float(MODEL.upper[0]) + 1.0, 0)},
    "jump": {"position": _ticks(float(TARGET[0]) + 0.4, 0)},
    "velocity": {"velocity": round(6.4e6 / MAP.velocity_unit[0])},
    "current": {"current": 32767},
}


@pytest.mark.parametrize("reason", list(FORGERIES))
def test_a_forged_reply_just_before_the_watchdog_hold_is_never_its_target(rig, reason):
    """The attack of issue 31: one present-values answer re-sealed with a valid CRC arrives in
    the cycle before the watchdog fires. Refused, counted, a failed read; the hold is at the
    last plausible reading, and no joint moves more than 0.05 rad over the next 2 s."""
    robot, stack, clock = rig
    faults = stack.faults[BUS]
    q0 = stack.source.joint_state()[0].copy()
    # no command from here: the watchdog takes its hold at the start of the first cycle after
    # WATCHDOG_S, from the reading of the cycle before, which is the one forged
    while not robot._watchdog.expired(clock.now_us() + PERIOD_US):
        robot.step()
    assert Health.WATCHDOG not in robot.read().health
    failed = robot.diagnostics().failed_reads
    faults.rewrite_next(BROADCAST_ID, forged_present(1, **FORGERIES[reason]))
    travel = 0.0
    for _ in range(500):  # 2 s
        robot.step()
        travel = max(travel, float(np.max(np.abs(stack.source.joint_state()[0] - q0))))
    assert faults.rewrites_pending == 0 and faults.stats.frames_rewritten == 1
    assert Health.WATCHDOG in robot.read().health
    assert np.all(np.abs(robot.command_in_force.q_des - q0) < 0.01)  # the hold's target
    diag = robot.diagnostics()
    assert diag.implausible_readings == {reason: 1}
    assert diag.failed_reads == failed + 1
    assert robot.stale_fault is None  # one refused reading is one failed read
    assert travel < 0.05, travel
    assert np.all(np.abs(robot.read().q - q0) < 0.05)


@pytest.mark.parametrize("rig", ["current"], indirect=True)
def test_a_servo_that_keeps_saying_the_impossible_latches_the_stale_fault(rig):
    """Every answer forged: after ``stale_fault_cycles`` refused readings the stale fault holds
    the last plausible reading servo-side; the arm does not move."""
    robot, stack, _ = rig
    faults = stack.faults[BUS]
    q0 = stack.source.joint_state()[0].copy()
    n = robot.config.stale_fault_cycles
    for _ in range(n):
        faults.rewrite_next(BROADCAST_ID, forged_present(1, velocity=2**31 - 1))
        robot.write(JointCommand(q_des=TARGET, kp=KP, kd=KD))
        robot.step()
    assert robot.stale_fault is not None
    assert "ImplausibleReadingError" in robot.stale_fault.detail
    assert robot.diagnostics().implausible_readings == {"velocity": n}
    for _ in range(250):
        robot.step()
    assert np.all(np.abs(stack.source.joint_state()[0] - q0) < 0.05)
