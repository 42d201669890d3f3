"""The bus cycle's compiled codec (``twin.hardware.protocols._compiled``, numba) against its
Python forms: the goal SYNC_WRITE byte for byte, the fast read's answer in joint units value for
value (``decode_wire`` + ``JointMap.from_present``), the same refusals of any damaged, short or
long answer; the tick conversion on floats against the array form; and the cycle itself with the
compiled codec switched off (``TWIN_HARDWARE_COMPILED=0``) giving the same reading."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware import load_config
from twin.hardware.errors import InvalidArgumentError
from twin.hardware.protocols import _compiled
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_cycle import GoalWriter, PresentLayout
from twin.hardware.protocols.dynamixel_table import XTable

IDS = [1, 2, 3, 4, 5, 6]
MAP = load_config().joint_map()
pytestmark = pytest.mark.skipif(_compiled.kernels() is None, reason="numba is not installed")


def _python_writer(reg) -> GoalWriter:
    writer = GoalWriter(reg, IDS)
    writer._kernel = None  # the Python form
    return writer


@given(
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=6, max_size=6),
    st.sampled_from([0, 1, 5]),
)
def test_the_compiled_goal_write_is_the_python_one_byte_for_byte(values, stuffed_at):
    values = np.array(values, np.int64)
    if stuffed_at:  # the header pattern inside a record: both go through the codec's stuffing
        values[stuffed_at] = 0xFDFFFF
    compiled, python = GoalWriter(XTable.GOAL_POSITION, IDS), _python_writer(XTable.GOAL_POSITION)
    assert compiled._kernel is not None
    assert compiled.encode(values) == python.encode(values)
    current = np.clip(values, -(2**15), 2**15 - 1)
    assert GoalWriter(XTable.GOAL_CURRENT, IDS).encode(current) == _python_writer(
        XTable.GOAL_CURRENT
    ).encode(current)


def test_the_compiled_goal_write_refuses_a_value_that_does_not_fit():
    with pytest.raises(InvalidArgumentError, match=r"goal_current .* do not fit"):
        GoalWriter(XTable.GOAL_CURRENT, IDS).encode(np.array([0, 0, 40000, 0, 0, 0], np.int64))


@given(
    st.lists(st.binary(min_size=10, max_size=10), min_size=6, max_size=6),
    st.lists(st.sampled_from([0, 0x80, 0x84, 0x01]), min_size=6, max_size=6),
    st.integers(0, 91),
    st.integers(1, 255),
)
def test_the_compiled_present_decode_equals_the_python_decode_and_conversion(
    data, errors, position, flip
):
    """``decode_joints`` gives, bit for bit, ``decode_wire`` then ``JointMap.from_present``, the
    same ERR bytes, and ``None`` wherever ``decode_wire`` gives ``None`` (any byte changed, one
    short, one too many)."""
    layout = PresentLayout(IDS, fast=True)
    assert layout.compiled
    blocks = [dxl.StatusPacket(pid, e, d) for pid, e, d in zip(IDS, errors, data)]
    raw = dxl.encode_fast_status(blocks)
    got = layout.decode_joints(raw, MAP.present_terms)
    want = layout.decode_wire(raw)
    if want is None:  # a value with the stuffing pattern in it: the stream parser's case
        assert got is None
        return
    records, err = want
    rows = MAP.from_present(records["position"], records["velocity"], records["current"])
    assert got[1] == err == bytes(errors)
    assert got[0].dtype == rows.dtype and got[0].shape == (3, 6) and not got[0].flags.writeable
    assert got[0].tobytes() == rows.tobytes()  # bit for bit (nan-safe)
    damaged = bytearray(raw)
    damaged[position] ^= flip
    assert (layout.decode_joints(bytes(damaged), MAP.present_terms) is None) == (
        layout.decode_wire(bytes(damaged)) is None
    )
    assert layout.decode_joints(raw[:-1], MAP.present_terms) is None
    assert layout.decode_joints(raw + b"\0", MAP.present_terms) is None


def test_a_damaged_answer_is_refused_at_every_byte():
    layout = PresentLayout(IDS, fast=True)
    raw = dxl.encode_fast_status([dxl.StatusPacket(p, 0, bytes(range(p, p + 10))) for p in IDS])
    assert layout.decode_joints(raw, MAP.present_terms) is not None
    for k in range(len(raw)):
        damaged = bytearray(raw)
        damaged[k] ^= 0x10
        assert layout.decode_joints(bytes(damaged), MAP.present_terms) is None, k
    assert not PresentLayout(IDS, fast=False).compiled  # plain reads: never the compiled path


_GOALS = st.one_of(st.floats(-3000.0, 3000.0), st.sampled_from([np.nan, np.inf, -np.inf, 0.5]))


@given(st.lists(_GOALS, min_size=6, max_size=6))
def test_ticks_on_floats_equal_the_array_form(q):
    try:
        want = MAP.ticks_from_q(np.array(q))
    except InvalidArgumentError:
        with pytest.raises(InvalidArgumentError):
            MAP.ticks_from_floats(q)
        return
    got = MAP.ticks_from_floats(q)
    assert all(type(t) is int for t in got) and got == want.tolist()


_CYCLE = """
from dataclasses import replace
import numpy as np
from twin.hardware import SerialRobot
from twin.hardware.emulator import IdealSource
from twin.hardware.emulator.stack import EmulatorStack
from twin.hardware.emulator.testing import emulator_config
from twin.hardware.clock import ManualClock
from twin.kinematics import ArmModel
from twin.robot import JointCommand

model = ArmModel.default()
config = emulator_config(hold_gravity_compensation=False, watchdog_s=None, stale_after_s=1.0)
config = replace(config, bus=replace(config.bus, reply_timeout_s=2.0))
clock = ManualClock()
source = IdealSource(model.home_q, effort_limits=model.effort_limits, sinc_length=config.ft.sinc_length)
with EmulatorStack(config, source, clock=clock) as stack:
    with stack.clock_running(4000):
        robot = SerialRobot(stack.robot_config(), model=model, clock=clock)
    with robot:
        cmd = JointCommand(q_des=model.home_q + 0.05, kp=np.full(6, 5.0), kd=np.full(6, 0.5))
        out = []
        for _ in range(20):
            robot.write(cmd)
            robot.step()
            s = robot.read()
            out.append(np.concatenate([s.q, s.qd, s.tau]))
        print(robot.bus.stats.fast_reads, np.array(out).tobytes().hex())
"""


def test_the_lock_step_cycle_reads_the_same_with_and_without_the_compiled_codec():
    """The same lock-step run (``ManualClock``: the emulator's physics advances only with the
    robot's cycles) reads bit-identical joint states with the compiled codec and without it."""
    runs = []
    for flag in ("1", "0"):
        env = {**os.environ, _compiled.VARIABLE: flag}
        out = subprocess.run(
            [sys.executable, "-c", _CYCLE], env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr
        runs.append(out.stdout.split())
    (fast_a, states_a), (fast_b, states_b) = runs
    assert int(fast_a) >= 20 and int(fast_b) >= 20  # the fast read's path both times
    assert states_a == states_b
