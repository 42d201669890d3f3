"""The servo-side command path on Python floats (``ArmBus._command_targets``): the ticks of the
array arithmetic and the goal SYNC_WRITE's bytes of ``GoalWriter``, laid out with the targets."""

from __future__ import annotations

import numpy as np
import pytest
from twin.hardware import load_config
from twin.hardware.arm_bus import ArmBus
from twin.hardware.errors import InvalidArgumentError
from twin.hardware.protocols import dynamixel as dxl
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


def test_the_goal_wire_parses_as_the_goal_sync_write():
    arm = ArmBus(None, _CONFIG, _EFFORT)
    q = np.linspace(-1.0, 1.0, 6)
    checked = _command(q, np.zeros(6), np.zeros(6), np.full(6, 5.0), np.full(6, 0.5))
    got = arm.servo_targets(checked.validated(_NAMES, _EFFORT, _LIMITS))
    address, size, data = dxl.parse_sync_write(decode_packet(got.wire).params)
    assert (address, size) == (XTable.GOAL_POSITION.address, XTable.GOAL_POSITION.size)
    values = [dxl.decode_value(data[pid], signed=True) for pid in _MAP.ids]
    assert values == got.goal_ticks.tolist() == _MAP.ticks_from_q(q).tolist()


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
