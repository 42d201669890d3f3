"""The servo-side command path on Python floats (``ArmBus._command_targets``): the ticks of the
array arithmetic and the goal SYNC_WRITE's bytes of ``GoalWriter``, laid out with the targets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from twin.hardware import load_config
from twin.hardware.arm_bus import ArmBus
from twin.hardware.errors import InvalidArgumentError
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_cycle import GoalWriter
from twin.hardware.protocols.dynamixel_packet import decode_packet
from twin.hardware.protocols.dynamixel_table import XTable

from twin.robot import JointCommand
from twin.safety import JointLimits

_CONFIG = load_config()
_MAP = _CONFIG.joint_map()
_NAMES = tuple(j.name for j in _CONFIG.joints)
_EFFORT = np.full(6, 1e3)
#: Wide limits: every command below passes every rule unchanged (``validated``'s float path).
_LIMITS = JointLimits(np.full(6, -1e4), np.full(6, 1e4), np.full(6, 1e3), _EFFORT, margin=0.0)
_EFFORT = _LIMITS.effort  # (the float path needs the limits' own effort array)


def _command(q, qd, tau, kp, kd) -> JointCommand:
    return JointCommand(
        q_des=np.array(q),
        qd_des=np.array(qd),
        tau_ff=np.array(tau),
        kp=np.array(kp),
        kd=np.array(kd),
    )


@given(
    st.lists(st.floats(-3.0, 3.0), min_size=6, max_size=6),
    st.lists(st.floats(-10.0, 10.0), min_size=6, max_size=6),
    st.lists(st.floats(-20.0, 20.0), min_size=6, max_size=6),
    st.lists(st.floats(0.05, 80.0), min_size=6, max_size=6),
    st.lists(st.floats(0.0, 3.0), min_size=6, max_size=6),
)
def test_float_path_gives_the_array_ticks_and_the_goal_writer_bytes(q, qd, tau, kp, kd):
    raw = _command(q, qd, tau, kp, kd)
    checked = raw.validated(_NAMES, _EFFORT, _LIMITS)
    assume(checked.values is not None)  # every rule held: the float path
    p, _ = _MAP.gains_from_kp_kd(checked.kp, checked.kd)
    assume((p > 0).all())  # a joint without P gain takes the general path
    kp_servo = _MAP.kp_kd_from_gains(p, np.zeros_like(p))[0]
    goal = checked.q_des + (checked.tau_ff + checked.kd * checked.qd_des) / kp_servo
    arm = ArmBus(None, _CONFIG, _EFFORT)
    try:
        want = _MAP.ticks_from_q(goal)
    except InvalidArgumentError:
        with pytest.raises(InvalidArgumentError):
            arm.servo_targets(checked)
        return
    got = arm.servo_targets(checked)
    assert got.goal_ticks.dtype == np.int64 and got.goal_ticks.tolist() == want.tolist()
    writer = GoalWriter(XTable.GOAL_POSITION, _MAP.ids)
    assert got.wire == writer.encode(want)
    # the general path (a command validated without limits: no floats) lays out the same bytes
    general = arm.servo_targets(raw.validated(_NAMES, _EFFORT))
    assert general.wire == got.wire and general.goal_ticks.tolist() == want.tolist()
    address, size, data = dxl.parse_sync_write(decode_packet(got.wire).params)
    assert (address, size) == (XTable.GOAL_POSITION.address, XTable.GOAL_POSITION.size)
    values = [dxl.decode_value(data[pid], signed=True) for pid in _MAP.ids]
    assert values == want.tolist()


def test_float_path_refuses_a_goal_beyond_the_servo_range():
    checked = _command(np.full(6, 5000.0), np.zeros(6), np.zeros(6), np.full(6, 5.0), np.zeros(6))
    checked = checked.validated(_NAMES, _EFFORT, _LIMITS)
    assert checked.values is not None
    arm = ArmBus(None, _CONFIG, _EFFORT)
    with pytest.raises(InvalidArgumentError, match="exceed the servo range"):
        arm.servo_targets(checked)


def test_servo_goal_sends_the_targets_wire():
    arm = ArmBus(None, _CONFIG, _EFFORT)
    checked = _command(np.full(6, 0.1), np.zeros(6), np.zeros(6), np.full(6, 5.0), np.full(6, 0.5))
    targets = arm.servo_targets(checked.validated(_NAMES, _EFFORT, _LIMITS))
    arm._gains = (tuple(targets.p_gain.tolist()), tuple(targets.d_gain.tolist()))  # gains sent
    assert arm.servo_goal(targets) is targets.wire
