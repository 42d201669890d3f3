"""The serial cycle's hot-path shortcuts against the general code: each record's ``_fast``
constructor (fields filled directly, no ``__init__``) gives the record ``__init__`` gives, field for
field, and takes exactly the record's fields, so that a field added to a record without its
``_fast`` fails here; the cycle's arithmetic on one array or on Python floats gives the values of
the per-quantity conversions."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from twin.hardware import load_config
from twin.hardware.arm_bus import ArmBus, JointReading, ServoTargets
from twin.hardware.drivers.dynamixel_bus import PresentValues
from twin.hardware.errors import InvalidArgumentError

from twin.robot import JointCommand

RECORDS = {
    JointReading: dict(
        q=np.arange(6.0), qd=np.full(6, -0.5), tau=np.linspace(-1, 1, 6), alert=np.zeros(6, bool)
    ),
    ServoTargets: dict(
        goal_ticks=np.arange(6) * 100,
        p_gain=np.full(6, 800),
        d_gain=np.arange(6),
        clamped={3: 1.5e6},
    ),
    PresentValues: dict(
        ids=(1, 2, 3, 4, 5, 6),
        current=np.arange(6, dtype=np.int16),
        velocity=-np.arange(6, dtype=np.int32),
        position=np.arange(6, dtype=np.int32) * 2048,
        alert=np.array([0, 0, 1, 0, 0, 0], bool),
    ),
}


@pytest.mark.parametrize("cls", list(RECORDS), ids=lambda c: c.__name__)
def test_fast_constructor_takes_every_field(cls):
    fields = [f.name for f in dataclasses.fields(cls)]
    params = list(inspect.signature(cls._fast).parameters)
    assert params == fields


@pytest.mark.parametrize("cls", list(RECORDS), ids=lambda c: c.__name__)
def test_fast_constructor_equals_init(cls):
    values = RECORDS[cls]
    fast, slow = cls._fast(**values), cls(**values)
    assert type(fast) is type(slow) is cls
    assert fast.__dict__.keys() == slow.__dict__.keys()
    for f in dataclasses.fields(cls):
        a, b = getattr(fast, f.name), getattr(slow, f.name)
        assert type(a) is type(b), f.name
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), f.name
        else:
            assert a == b, f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.__setattr__(dataclasses.fields(cls)[0].name, None)


def test_command_rows_property():
    cmd = JointCommand(q_des=np.full(6, 0.1), kp=np.full(6, 5.0))
    assert cmd.rows is None
    staging = np.zeros((5, 6))
    assert JointCommand.from_rows(staging).rows is staging
    names = tuple(f"j{k}" for k in range(6))
    checked = cmd.validated(names, np.full(6, 10.0))
    assert checked.rows.shape == (5, 6) and not checked.rows.flags.writeable
    np.testing.assert_array_equal(checked.rows[0], np.full(6, 0.1))
    np.testing.assert_array_equal(checked.rows[3], np.full(6, 5.0))


# ---------------------------------------------------------------- the cycle's fast arithmetic
_MAP = load_config().joint_map()
_NAMES = tuple(j.name for j in load_config().joints)
_ints = st.integers(-(2**31), 2**31 - 1)


@given(
    st.lists(_ints, min_size=6, max_size=6),
    st.lists(_ints, min_size=6, max_size=6),
    st.lists(st.integers(-(2**15), 2**15 - 1), min_size=6, max_size=6),
)
def test_from_present_equals_the_three_conversions(position, velocity, current):
    rows = _MAP.from_present(
        np.array(position, np.int32), np.array(velocity, np.int32), np.array(current, np.int16)
    )
    assert not rows.flags.writeable and rows.shape == (3, 6)
    np.testing.assert_array_equal(rows[0], _MAP.q_from_ticks(position))
    np.testing.assert_array_equal(rows[1], _MAP.qd_from_units(velocity))
    np.testing.assert_array_equal(rows[2], _MAP.tau_from_current(current))


_floats = st.floats(-4.0, 4.0)


@given(
    st.lists(_floats, min_size=6, max_size=6),
    st.lists(st.floats(-10.0, 10.0), min_size=6, max_size=6),
    st.lists(st.floats(-20.0, 20.0), min_size=6, max_size=6),
    st.lists(st.floats(0.05, 80.0), min_size=6, max_size=6),
    st.lists(st.floats(0.0, 3.0), min_size=6, max_size=6),
)
def test_command_targets_on_floats_equal_the_array_path(q, qd, tau, kp, kd):
    """``ArmBus.servo_targets``' Python-float path gives the ticks of the array arithmetic."""
    arm = ArmBus(None, load_config(), np.full(6, 1e3))
    cmd = JointCommand(
        q_des=np.array(q),
        qd_des=np.array(qd),
        tau_ff=np.array(tau),
        kp=np.array(kp),
        kd=np.array(kd),
    ).validated(_NAMES, np.full(6, 1e3))
    p, _ = _MAP.gains_from_kp_kd(cmd.kp, cmd.kd)
    assume((p > 0).all())  # a joint without P gain takes the general path
    kp_servo = _MAP.kp_kd_from_gains(p, np.zeros_like(p))[0]
    goal = cmd.q_des + (cmd.tau_ff + cmd.kd * cmd.qd_des) / kp_servo
    try:
        want = _MAP.ticks_from_q(goal)
    except InvalidArgumentError:
        with pytest.raises(InvalidArgumentError):
            arm.servo_targets(cmd)
        return
    got = arm.servo_targets(cmd)
    assert got.goal_ticks.dtype == want.dtype and np.array_equal(got.goal_ticks, want)
