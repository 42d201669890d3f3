"""``JointCommand.validated``'s float path: the rows it checked kept as Python floats
(``values``), the read-only array made from them on first use, the same command as the
array path's; anything else takes the general path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from twin.kinematics import ArmModel
from twin.robot import COMMAND_FIELDS, JointCommand, joint_torque, torque_law
from twin.safety import limits_for

MODEL = ArmModel.default()
LIMITS = limits_for(MODEL)
NAMES, EFFORT = MODEL.joint_names, MODEL.effort_limits


def _inside(draw_unit: list[float]) -> np.ndarray:
    """Joint positions inside the soft limits, from unit values in [0, 1]."""
    u = np.array(draw_unit)
    return LIMITS.lower + u * (LIMITS.upper - LIMITS.lower)


units = st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6)


@given(units, st.booleans())
def test_float_path_equals_the_array_path(u, staged):
    q = _inside(u)
    fields = dict(
        q_des=q, qd_des=np.zeros(6), tau_ff=np.zeros(6), kp=np.full(6, 50.0), kd=np.ones(6)
    )
    if staged:
        command = JointCommand.from_rows(np.array([fields[f] for f in COMMAND_FIELDS]))
    else:
        command = JointCommand(**fields)
    fast = command.validated(NAMES, EFFORT, LIMITS)
    general = JointCommand(**fields).validated(NAMES, EFFORT)  # no limits: the array path
    assert fast.values is not None and general.values is None
    assert [list(v) for v in fast.values] == fast.rows.tolist() == general.rows.tolist()
    assert all(type(x) is float for row in fast.values for x in row)
    assert not fast.rows.flags.writeable and fast.rows is fast.rows  # made once
    for name in COMMAND_FIELDS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(general, name))
    x, v = MODEL.home_q, np.full(6, 0.1)
    law = torque_law(fast, EFFORT)
    assert law(x.tolist(), v.tolist()) == joint_torque(general, x, v, EFFORT).tolist()


def test_a_command_the_rules_change_keeps_no_floats():
    q = LIMITS.upper + 0.5  # beyond the soft limit: clamped
    command = JointCommand(q_des=q, kp=np.full(6, 50.0), kd=np.ones(6))
    checked = command.validated(NAMES, EFFORT, LIMITS)
    assert checked.values is None
    np.testing.assert_array_equal(checked.q_des, LIMITS.upper)


@pytest.mark.parametrize(
    "q_des",
    [
        pytest.param(np.zeros(6, np.float32), id="float32"),
        pytest.param(np.zeros(6, int), id="int"),
        pytest.param([0.0] * 6, id="list"),
        pytest.param(np.zeros((6, 1)), id="column"),
    ],
)
def test_other_field_types_take_the_general_path(q_des):
    command = JointCommand(q_des=q_des, kp=np.full(6, 50.0), kd=np.ones(6))
    if np.shape(q_des) != (6,):
        with pytest.raises(ValueError, match="q_des must have shape"):
            command.validated(NAMES, EFFORT, LIMITS)
        return
    checked = command.validated(NAMES, EFFORT, LIMITS)
    assert checked.q_des.dtype == np.float64 and checked.q_des.tolist() == [0.0] * 6


def test_a_non_finite_value_is_still_refused():
    q = np.zeros(6)
    q[2] = np.nan
    with pytest.raises(ValueError, match="q_des for joint"):
        JointCommand(q_des=q, kp=np.full(6, 50.0), kd=np.ones(6)).validated(NAMES, EFFORT, LIMITS)
