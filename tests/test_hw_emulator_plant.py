"""The ideal plant's compiled integration (``hardware/emulator/_compiled.py``) is its Python
form's, bit for bit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware.emulator import IdealSource
from twin.hardware.emulator import _compiled as plant
from twin.hardware.emulator.sources import Drive, DriveArrays, DriveKind
from twin.hardware.emulator.testing import random_drive

pytestmark = pytest.mark.skipif(
    plant.kernels() is None,
    reason="the compiled kernels are off (numba absent or TWIN_HARDWARE_COMPILED=0)",
)


def _source(rng: np.random.Generator, limits: bool) -> IdealSource:
    source = IdealSource(
        rng.normal(size=6),
        effort_limits=rng.uniform(0.5, 5.0, 6) if limits else None,
        inertia=rng.uniform(0.01, 0.1, 6),
        damping=rng.uniform(0.0, 1.0, 6),
    )
    for j in range(6):
        drive = random_drive(rng)
        if rng.random() < 0.3 and drive.kind is DriveKind.PD:  # stiff, or without a limit
            drive = replace(drive, kp=drive.kp * 10.0, torque_limit=np.inf)
        source.set_drive(j, drive)
    return source


@given(st.integers(0, 2**32 - 1), st.integers(0, 60), st.booleans())
def test_the_compiled_integration_is_the_python_floats_bit_for_bit(seed, steps, limits):
    a = _source(np.random.default_rng(seed), limits)
    b = _source(np.random.default_rng(seed), limits)
    b._kernel = None
    arrays_a, arrays_b = DriveArrays(a._drives), DriveArrays(b._drives)
    for source, arrays in ((a, arrays_a), (b, arrays_b)):
        source._integrate(arrays, steps, IdealSource.DT_US * 1e-6)
    assert a._state.tobytes() == b._state.tobytes()


def test_a_nan_stays_a_nan_in_both_forms():
    """A diverged plant (nan goal) integrates to nan in both forms, as the array formulation."""
    for kernel in (True, False):
        source = IdealSource(np.zeros(6))
        if not kernel:
            source._kernel = None
        source.set_drive(0, Drive(DriveKind.PD, q_goal=float("nan"), kp=1.0, torque_limit=2.0))
        source.advance_to(10 * IdealSource.DT_US)
        q, qd, tau = source.joint_state()
        assert np.isnan(q[0]) and np.isnan(qd[0]) and np.isnan(tau[0])
        assert np.all(q[1:] == 0.0)
