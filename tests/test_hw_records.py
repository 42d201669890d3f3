"""The frozen records of the serial cycle's hot path: each ``_fast`` constructor (fields filled
directly, no ``__init__``) gives the record ``__init__`` gives, field for field, and takes exactly
the record's fields, so that a field added to a record without its ``_fast`` fails here."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from twin.hardware.arm_bus import JointReading, ServoTargets
from twin.hardware.drivers.dynamixel_bus import PresentValues

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
