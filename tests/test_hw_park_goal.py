"""The park verifies everything it writes (issue 31, item 2): Goal Position, Goal Current and the
Position gains are read back with Torque Enable and Operating Mode; a goal that did not arrive
as sent (a damaged SYNC_WRITE: lost, or with a CRC that still passes, another goal) is written
again, acknowledged, within ``bus.attempts`` tries, else ``ParkError`` names the servo and the
field. The damaged packet comes from the emulators' fault injection (``forged_write``: the
host's write changed on its way into the servo)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hw_rig import TARGET, settled_rig
from twin.hardware import ManualClock, ParkError
from twin.hardware.config import load_config
from twin.hardware.emulator import BUS
from twin.hardware.emulator.faults import forged_write
from twin.hardware.protocols.dynamixel_table import OperatingMode, Register, XTable
from twin.hardware.transport import LinkState

MAP = load_config().joint_map()
SAFE = (1, int(OperatingMode.CURRENT_BASED_POSITION))
#: The Position D, I, P gains as the park writes them: one 6-byte SYNC_WRITE at 80.
GAINS = Register("position_gains", XTable.POSITION_D_GAIN.address, 6, True)


def _ticks(q: float, j: int) -> int:
    return round(q * MAP.direction[j] * MAP.ticks_per_rad[j] + MAP.zero_ticks[j])


def _excursion_after(stack, q0: np.ndarray, seconds: float = 1.0) -> float:
    """Advance the lock-step physics ``seconds`` with nobody on the bus; the largest joint
    excursion from ``q0``, rad."""
    excursion = 0.0
    for _ in range(round(seconds / 0.01)):
        stack.clock.advance(10_000)
        stack.source.advance_to(stack.clock.now_us())
        excursion = max(excursion, float(np.max(np.abs(stack.source.joint_state()[0] - q0))))
    return excursion


def _park_values(stack) -> dict[int, tuple[int, ...]]:
    regs = (XTable.TORQUE_ENABLE, XTable.OPERATING_MODE, XTable.GOAL_POSITION)
    return {pid: tuple(s.get(r) for r in regs) for pid, s in stack.servos.servos.items()}


#: The damaged write (servo 3, joint index 2) and what it would leave: a goal 0.8 rad back
#: towards the power-on position; a Goal Current of 5 units (a limp hold); a P gain of 1.
DAMAGE = {
    "goal_position": (XTable.GOAL_POSITION, lambda: _ticks(TARGET[2] - 0.8, 2)),
    "goal_current": (XTable.GOAL_CURRENT, lambda: 5),
    "gains": (GAINS, lambda: 0 | 0 << 16 | 1 << 32),
}


@pytest.mark.parametrize("reseal", [True, False], ids=["other-goal", "lost"])
@pytest.mark.parametrize("field", list(DAMAGE))
@pytest.mark.parametrize("mode", ["current", "servo"])
def test_a_damaged_park_write_is_read_back_and_written_again(mode, field, reseal):
    reg, value = DAMAGE[field]
    if reg is XTable.GOAL_CURRENT and mode == "servo":
        pytest.skip("a servo-mode park does not rewrite Goal Current (set at connection)")
    with settled_rig(mode, ManualClock()) as (robot, stack):
        faults = stack.faults[BUS]
        faults.rewrite_next_in(forged_write(reg, 3, value(), reseal=reseal))
        q0 = stack.source.joint_state()[0].copy()
        robot.close()  # verified: no ParkError
        assert faults.stats.frames_rewritten == 1 and faults.rewrites_pending == 0
        want = robot.arm.map.ticks_from_q(q0)
        for pid, (torque, mode_reg, goal) in _park_values(stack).items():
            assert (torque, mode_reg) == SAFE
            assert abs(goal - want[pid - 1]) <= 2
        s3 = stack.servos.servos[3]
        assert s3.get(XTable.GOAL_CURRENT) == robot.arm.goal_current[2]
        p_gain = np.rint(robot.config.hold_kp[2] / robot.arm.map.kp_unit[2])
        assert s3.get(XTable.POSITION_P_GAIN) == p_gain and s3.get(XTable.POSITION_I_GAIN) == 0
        assert all(st.safe and not st.wrong for st in robot.park_report.values())
        assert _excursion_after(stack, q0) < 0.05
        assert robot.bus.link.state is LinkState.CLOSED


@pytest.mark.parametrize("mode", ["current", "servo"])
def test_a_goal_that_never_arrives_as_sent_raises_naming_the_servo_and_field(mode):
    with settled_rig(mode, ManualClock()) as (robot, stack):
        wrong = _ticks(TARGET[2] - 0.8, 2)
        stack.faults[BUS].rewrite_next_in(forged_write(XTable.GOAL_POSITION, 3, wrong), n=100)
        with pytest.raises(ParkError) as err:
            robot.close()
        text = str(err.value)
        assert "servo 3: torque on, mode CURRENT_BASED_POSITION (5), goal_position reads" in text
        assert f"goal_position reads {wrong}, wrote" in text
        assert not err.value.states[3].safe
        assert all(err.value.states[pid].safe for pid in (1, 2, 4, 5, 6))
        assert robot.bus.link.state is LinkState.CLOSED


@pytest.mark.parametrize("mode", ["current", "servo"])
def test_in_real_time_a_damaged_goal_moves_no_joint_more_than_0_05_rad(mode):
    """Real time: the physics runs while the park writes, verifies and fixes the goal; a sampler
    watches every joint during the park and 0.5 s after it."""
    with settled_rig(mode) as (robot, stack):
        faults = stack.faults[BUS]
        q0 = stack.source.joint_state()[0].copy()
        faults.rewrite_next_in(forged_write(XTable.GOAL_POSITION, 3, _ticks(TARGET[2] - 0.8, 2)))
        done, worst = threading.Event(), [0.0]

        def sample() -> None:
            while not done.wait(0.001):
                q = stack.source.joint_state()[0]
                worst[0] = max(worst[0], float(np.max(np.abs(q - q0))))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            robot.close()
            done.wait(0.5)
        finally:
            done.set()
            sampler.join(2.0)
        assert faults.stats.frames_rewritten == 1
        assert all(st.safe for st in robot.park_report.values())
        assert worst[0] < 0.05, worst[0]
