"""The bus cycle's compiled codec (``twin.hardware.protocols._compiled``, numba) against its
Python forms: the goal SYNC_WRITE byte for byte, the fast read's answer in joint units value for
value (``decode_wire`` + ``JointMap.from_present``: also ``tests/test_hw_cycle.py``), the same
refusal of a damaged byte anywhere; the tick conversion on floats against the array form; a
command's compiled ticks against the Python floats'; the emulator's aggregate status; and the
bus's cycle read with and without the compiled decode."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware import load_config
from twin.hardware.clock import ManualClock
from twin.hardware.drivers.dynamixel_bus import DynamixelBus
from twin.hardware.emulator import IdealSource, ServoChainEmulator
from twin.hardware.errors import InvalidArgumentError
from twin.hardware.protocols import _compiled
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_cycle import GoalWriter, PresentLayout
from twin.hardware.protocols.dynamixel_table import XTable

IDS = [1, 2, 3, 4, 5, 6]
MAP = load_config().joint_map()
pytestmark = pytest.mark.skipif(
    _compiled.kernels() is None,
    reason="the compiled codec is off (numba absent or TWIN_HARDWARE_COMPILED=0)",
)


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


def test_the_bus_reads_the_same_joint_values_with_and_without_the_compiled_codec(tmp_path):
    """Through the servo chain's pseudo-terminal (a plant at rest on a ``ManualClock``, a servo
    with a latched hardware error): ``read_joints`` with the compiled decode and with the Python
    one give the same rows, bit for bit, equal to ``read_present`` then ``JointMap.from_present``,
    and the same alert flags."""
    config = load_config()
    q0 = np.array([0.3, -0.2, 0.1, 0.5, -0.4, 0.25])
    source = IdealSource(q0)
    emu = ServoChainEmulator(source, MAP, ManualClock(), link_dir=tmp_path)
    bus = DynamixelBus(emu.port.path, config.bus.baudrate, reply_timeout_s=1.0, fast_read=True)
    try:
        bus.open()
        emu.inject_hardware_error(4)
        layout = bus.present_layout(IDS, True)
        assert layout.compiled
        compiled = bus.read_joints(IDS, MAP)
        layout._kernel = None  # the same layout, decoded in Python
        python = bus.read_joints(IDS, MAP)
        pv = bus.read_present(IDS)
    finally:
        bus.close()
        emu.close()
    want = MAP.from_present(pv.position, pv.velocity, pv.current)
    assert compiled.rows.tobytes() == python.rows.tobytes() == want.tobytes()
    assert np.all(np.abs(compiled.rows[0] - q0) <= 1.0 / MAP.ticks_per_rad)
    assert (
        compiled.alert.tolist()
        == python.alert.tolist()
        == [False, False, False, True, False, False]
    )
    assert not compiled.rows.flags.writeable


_NAMES = tuple(j.name for j in load_config().joints)


@given(
    st.lists(st.floats(-4.0, 4.0), min_size=6, max_size=6),
    st.lists(st.floats(-10.0, 10.0), min_size=6, max_size=6),
    st.lists(st.floats(-20.0, 20.0), min_size=6, max_size=6),
    st.lists(st.floats(0.05, 80.0), min_size=6, max_size=6),
    st.lists(st.floats(0.0, 3.0), min_size=6, max_size=6),
    st.sampled_from([1.0, 1e3, 1e6]),
)
def test_the_compiled_command_ticks_equal_the_python_floats(q, qd, tau, kp, kd, scale):
    """``ArmBus.servo_targets`` of a command: the compiled ticks and the Python floats' are the
    same ints, and both refuse a goal beyond the servo range (``scale`` pushes some there)."""
    from twin.hardware.arm_bus import ArmBus

    from twin.robot import JointCommand

    compiled, python = (ArmBus(None, load_config(), np.full(6, 1e9)) for _ in range(2))
    python._ticks_kernel = None
    assert compiled._ticks_kernel is not None
    cmd = JointCommand(
        q_des=np.array(q) * scale, qd_des=np.array(qd), tau_ff=np.array(tau), kp=np.array(kp),
        kd=np.array(kd),
    ).validated(_NAMES, np.full(6, 1e9))  # fmt: skip
    try:
        want = python.servo_targets(cmd)
    except InvalidArgumentError as e:  # beyond the range (or no P gain): the same error
        with pytest.raises(InvalidArgumentError) as info:
            compiled.servo_targets(cmd)
        assert str(info.value) == str(e)
        return
    got = compiled.servo_targets(cmd)
    assert got.goal_ticks.dtype == want.goal_ticks.dtype == np.int64
    assert got.goal_ticks.tolist() == want.goal_ticks.tolist()


@given(
    st.lists(st.binary(min_size=0, max_size=12), min_size=1, max_size=8),
    st.lists(st.sampled_from([0, 0x80, 0x84, 0x01]), min_size=8, max_size=8),
)
def test_the_compiled_fast_status_is_the_python_one_byte_for_byte(data, errors):
    """A device's aggregate status (``fast_status_wire``) with the compiled block CRCs is the
    Python form's, byte for byte, and what ``encode_fast_status`` gives."""
    from twin.hardware.protocols import dynamixel_packet

    blocks = [(e, pid, d) for pid, (e, d) in enumerate(zip(errors, data), start=1)]
    length = dxl.fast_status_length([len(d) for d in data])
    compiled = dynamixel_packet.fast_status_wire(length, blocks)
    saved = dict(dynamixel_packet._KERNELS)
    dynamixel_packet._KERNELS[0] = None  # the Python form
    try:
        python = dynamixel_packet.fast_status_wire(length, blocks)
    finally:
        dynamixel_packet._KERNELS.clear()
        dynamixel_packet._KERNELS.update(saved)
    assert (
        compiled
        == python
        == dxl.encode_fast_status([dxl.StatusPacket(pid, e, d) for e, pid, d in blocks])
    )
