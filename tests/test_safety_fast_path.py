"""``Robot.write``'s one-pass check (``JointLimits.holds``) against the rule-by-rule path: the
same validated command, the same refusals, whichever path a command takes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from twin.kinematics import ArmModel
from twin.robot import JointCommand
from twin.safety import limits_for

MODEL = ArmModel.default()
LIMITS = limits_for(MODEL)
NAMES = MODEL.joint_names
EFFORT = MODEL.effort_limits

# values around and beyond the limits, with the special floats the checks must refuse or pass on
_VALUE = st.one_of(
    st.floats(-5.0, 5.0),
    st.sampled_from([0.0, -0.0, 1e9, -1e9, 1e13, 1e308, math.inf, -math.inf, math.nan]),
)
_GAIN = st.one_of(st.floats(0.0, 500.0), st.sampled_from([0.0, -1.0, 1e12, 1e308, math.inf]))


def _both(command: JointCommand):
    """(fast-path result, rule-by-rule result): an effort array that is not the limits' own
    takes the rule-by-rule path with the same values."""
    out = []
    for effort in (EFFORT, EFFORT.copy()):
        try:
            out.append(command.validated(NAMES, effort, LIMITS))
        except ValueError as e:
            out.append(str(e))
    return out


def test_the_limits_take_the_models_effort_array_itself():
    assert LIMITS.effort is EFFORT  # what lets Robot.write take the one-pass check


@given(
    st.lists(_VALUE, min_size=6, max_size=6),
    st.lists(st.floats(-3.0, 3.0), min_size=6, max_size=6),
    st.lists(st.floats(-50.0, 50.0), min_size=6, max_size=6),
    st.lists(_GAIN, min_size=6, max_size=6),
    st.lists(_GAIN, min_size=6, max_size=6),
)
def test_one_pass_and_rule_by_rule_give_the_same_command(q, qd, tau, kp, kd):
    rows = np.array([q, qd, tau, kp, kd], dtype=float)
    fast, slow = _both(JointCommand.from_rows(rows))
    if isinstance(slow, str):
        assert fast == slow  # the same refusal, naming the same field and joint
        return
    for name in ("q_des", "qd_des", "tau_ff", "kp", "kd"):
        a, b = getattr(fast, name), getattr(slow, name)
        np.testing.assert_array_equal(a, b)
        assert not a.flags.writeable
    assert ("_wall" in fast.__dict__) == ("_wall" in slow.__dict__)


def test_a_command_inside_every_limit_passes_unchanged_in_one_pass():
    rows = np.zeros((5, 6))
    rows[0] = MODEL.home_q
    rows[2] = 0.5
    rows[3], rows[4] = 100.0, 5.0
    q, qd, tau, kp, kd = rows.tolist()
    assert LIMITS.holds(q, qd, tau, kp, kd)
    out = JointCommand.from_rows(rows).validated(NAMES, EFFORT, LIMITS)
    np.testing.assert_array_equal(out.q_des, MODEL.home_q)
    assert "_wall" not in out.__dict__


@pytest.mark.parametrize(
    "row, joint, value",
    [
        (0, 0, LIMITS.upper[0] + 1e-9),  # just past the soft limit
        (1, 2, MODEL.velocity_limits[2] * 1.0001),
        (2, 4, EFFORT[4] * 1.0001),
        (3, 1, 0.0),  # no stiffness: the wall rule
        (4, 3, -1e-12),  # a negative gain
        (3, 5, math.inf),
        (0, 5, math.nan),
        (2, 0, 50.0),  # the rest point q_des + tau_ff / kp beyond the limit
    ],
)
def test_the_one_pass_check_declines_every_edge(row, joint, value):
    rows = np.zeros((5, 6))
    rows[3], rows[4] = 100.0, 5.0
    rows[0] = LIMITS.upper - 0.1 if row == 2 else np.zeros(6)
    rows[row, joint] = value
    assert not LIMITS.holds(*rows.tolist())
