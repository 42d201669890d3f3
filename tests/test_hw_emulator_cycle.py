"""The servo emulator's fast path for the bus cycle (``CycleRequests``, ``FastStatusWriter``,
``ServoChainEmulator._on_cycle``) answers exactly as its parser path: the same values, the same
reply bytes, the same control tables and drives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware.clock import ManualClock
from twin.hardware.config import load_config
from twin.hardware.emulator import IdealSource, ServoChainEmulator
from twin.hardware.protocols import _compiled
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_cycle import (
    CycleRequests,
    FastStatusWriter,
    GoalWriter,
    PresentLayout,
)
from twin.hardware.protocols.dynamixel_table import OperatingMode, Units, XTable

IDS = (1, 2, 3, 4, 5, 6)
INT32 = st.integers(-(2**31), 2**31 - 1)
GOAL_BYTES = len(GoalWriter(XTable.GOAL_POSITION, IDS).encode(np.zeros(6, np.int64)))


def _goal(values) -> bytes:
    return GoalWriter(XTable.GOAL_POSITION, IDS).encode(np.array(values, np.int64))


@given(st.lists(INT32, min_size=6, max_size=6), st.sampled_from(["goal", "read", "both"]))
def test_the_cycle_match_gives_what_the_parser_gives(values, which):
    """Every read of the cycle's instructions is matched to the values the parser decodes from
    it, unless the goal had to be stuffed (then the parser takes it: ``None``)."""
    cycle = CycleRequests(XTable.GOAL_POSITION, IDS)
    goal = _goal(values)
    data = {"goal": goal, "read": cycle.read_request, "both": goal + cycle.read_request}[which]
    packets = dxl.DynamixelStreamParser().feed(data)
    got = cycle.match(data)
    if which != "read" and len(goal) != GOAL_BYTES:  # stuffed: FF FF FD in a value
        assert got is None
        return
    want_goal = None
    if which != "read":
        _, _, items = dxl.parse_sync_write(packets[0].params)
        want_goal = tuple(int.from_bytes(items[pid], "little", signed=True) for pid in IDS)
    assert got == (want_goal, which != "goal")
    assert want_goal is None or list(want_goal) == values


def test_the_cycle_match_refuses_every_damaged_byte_and_anything_else():
    cycle = CycleRequests(XTable.GOAL_POSITION, IDS)
    data = _goal([2048, -5, 7, 1 << 20, 0, 4095]) + cycle.read_request
    for i in range(len(data)):
        damaged = bytearray(data)
        damaged[i] ^= 0x01
        assert cycle.match(bytes(damaged)) is None, i
    assert cycle.match(data[:-1]) is None
    assert cycle.match(data + b"\x00") is None
    assert cycle.match(b"\x00" + data) is None
    other = CycleRequests(XTable.GOAL_POSITION, (1, 2, 3, 4, 5, 7))  # other servos
    assert other.match(data) is None
    assert cycle.match(PresentLayout(IDS, False).request) is None  # a SYNC_READ: the parser's


@pytest.mark.parametrize("compiled", [True, False])
@given(
    st.lists(st.integers(0, 255), min_size=6, max_size=6),
    st.lists(st.binary(min_size=10, max_size=10), min_size=6, max_size=6),
)
def test_the_laid_out_fast_status_is_fast_status_wire_byte_for_byte(compiled, errors, data):
    """The writer's packet (its CRCs compiled or in Python) is ``fast_status_wire``'s, built
    block by block with the compiled CRCs where numba is."""
    from twin.hardware.protocols import dynamixel_packet

    if compiled and _compiled.kernels() is None:
        pytest.skip("the compiled codec is off")
    want = dxl.fast_status_wire(
        dxl.fast_status_length([10] * 6), [(e, pid, d) for e, pid, d in zip(errors, IDS, data)]
    )
    writer = FastStatusWriter(IDS, 10)
    saved = dict(dynamixel_packet._KERNELS)
    if not compiled:
        dynamixel_packet._KERNELS[0] = None  # the Python form of the block CRCs
    try:
        assert writer.encode(list(zip(errors, data))) == want
        assert writer.encode(list(zip(errors, data))) == want  # the buffer is reused
    finally:
        dynamixel_packet._KERNELS.clear()
        dynamixel_packet._KERNELS.update(saved)


def _chain(tmp_path, name: str) -> tuple[ServoChainEmulator, list[bytes]]:
    """A chain on a shared-nothing ManualClock, its servos holding a position (current-based
    position mode, torque on), its replies captured instead of written."""
    config = load_config()
    emu = ServoChainEmulator(
        IdealSource(np.linspace(-0.5, 0.5, 6)),
        config.joint_map(),
        ManualClock(),
        model_numbers=[j.model_number for j in config.joints],
        link_dir=tmp_path,
        name=name,
    )
    sent: list[bytes] = []
    emu.port.write = sent.append
    for s in emu.servos.values():
        s.set(XTable.RETURN_DELAY_TIME, 0)
        s.set(XTable.OPERATING_MODE, int(OperatingMode.CURRENT_BASED_POSITION))
        s.set(XTable.GOAL_CURRENT, 400)
        s.set(XTable.POSITION_P_GAIN, 900)
        s.set(XTable.TORQUE_ENABLE, 1)
        emu._update_drive(s.id)
    return emu, sent


def _state(emu: ServoChainEmulator):
    return (
        [bytes(s.table) for s in emu.servos.values()],
        list(emu.source._drives),
        emu.source.joint_state()[0].tolist(),
        emu.instructions,
    )


def _python(emu: ServoChainEmulator) -> None:
    """The chain's Python forms only: no compiled cycle, plant or status CRCs."""
    emu._kernels = None
    emu._present_status._kernel = None
    emu.source._kernel = None


@pytest.mark.parametrize("python_fast", [False, True])
@pytest.mark.parametrize("case", ["holding", "torque off", "beyond range", "read only"])
def test_the_fast_path_answers_as_the_parser_path(tmp_path, case, python_fast):
    """The same bytes fed whole (the fast path, compiled where numba is, or its Python form)
    and with a stray byte ahead (the parser path in Python, which skips it) leave both chains
    in the same state with the same replies, cycle after cycle; where the fast path does not
    apply (a servo not holding, a goal beyond the range) it falls back to the parser."""
    fast, fast_sent = _chain(tmp_path, "fast")
    slow, slow_sent = _chain(tmp_path, "slow")
    _python(slow)
    if python_fast:
        _python(fast)
    try:
        if case == "torque off":
            for emu in (fast, slow):
                emu.servos[4].set(XTable.TORQUE_ENABLE, 0)
                emu._update_drive(4)
        read = fast.cycle.read_request
        for k in range(5):
            ticks = [2048 + 37 * k * (j + 1) for j in range(6)]
            if case == "beyond range":
                ticks[2] = Units.EXTENDED_POSITION_LIMIT + 1
            data = read if case == "read only" else _goal(ticks) + read
            for emu in (fast, slow):
                emu.clock.advance(1700)
            fast._on_data(data)
            slow._on_data(b"\x00" + data)  # garbage first: the parser path
            assert fast_sent == slow_sent and len(fast_sent) == k + 1
            assert _state(fast) == _state(slow)
        fell_back = case in ("torque off", "beyond range")
        assert (fast.parser.stats.frames > 0) == fell_back  # the path that was taken
        if case == "holding":
            assert fast.servos[3].get(XTable.GOAL_POSITION) == 2048 + 37 * 4 * 3
    finally:
        fast.close()
        slow.close()


def test_the_timeline_records_the_modelled_wire(tmp_path):
    """With the wire modelled, each instruction's row says when it was received, handled, due
    and written: due is its bytes (and the reply's) at 10 bits a byte after receipt, and the
    reply was written no sooner."""
    import collections

    emu, sent = _chain(tmp_path, "timed")
    try:
        emu.wire_baud = 1_000_000
        emu.timeline = collections.deque()
        emu._on_data(_goal([2048] * 6) + emu.cycle.read_request)
        (g, r) = emu.timeline
        byte_s = 10.0 / emu.wire_baud
        assert g[4] == 0 and g[2] == pytest.approx(g[0] + GOAL_BYTES * byte_s, abs=1e-9)
        reply = PresentLayout(IDS, True).reply_bytes
        n = GOAL_BYTES + len(emu.cycle.read_request) + reply
        assert r[4] == reply == len(sent[0])
        assert r[2] == pytest.approx(r[0] + n * byte_s, abs=1e-9)
        assert r[0] <= r[1] <= r[3] and r[3] >= r[2]
    finally:
        emu.close()
