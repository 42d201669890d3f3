"""The emulators' part of a free-running cycle (``docs/protocols/dynamixel.md``): the quiet window
around a paced reply, the port thread's timer slack, the fault injector's lock-free fast path,
the cycle's goals in one copy, the paced wait's wake-up, and the timeline handed over while a
reply is paced."""

from __future__ import annotations

import collections
import ctypes
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
import serial
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hw_emulator_cycle import _chain
from twin.hardware.clock import ManualClock
from twin.hardware.config import load_config
from twin.hardware.emulator import BotaEmulator, FaultInjector, IdealSource, PtyPort
from twin.hardware.emulator.faults import dynamixel_status_frames
from twin.hardware.emulator.quiet import QuietWindow
from twin.hardware.emulator.servo_chain import (
    WAKE_LEAD_MAX_S,
    WAKE_QUANTILE,
    WAKE_STEP_S,
    Waker,
    tracked_lead,
)
from twin.hardware.emulator.sources import Drive, DriveKind
from twin.hardware.emulator.testing import random_drive, wait_until
from twin.hardware.protocols import bota
from twin.hardware.protocols.dynamixel_cycle import GoalWriter
from twin.hardware.protocols.dynamixel_table import XTable

_PR_GET_TIMERSLACK = 30


# ----------------------------------------------------------------- the quiet window
def test_the_window_defers_work_while_a_reply_is_due_and_not_otherwise():
    quiet = QuietWindow(before_s=9e-3, after_s=9e-3)  # wide: a preempted test still lands in it
    assert quiet.defer() == 0.0  # nothing announced yet
    quiet.reply_due(time.perf_counter() + 1.0)  # due long after the window's lead
    assert quiet.defer() == 0.0
    quiet.reply_due(time.perf_counter() - 1.0)  # long past
    assert quiet.defer() == 0.0
    due = time.perf_counter() + 1e-3  # within the lead: deferred to after_s past it
    quiet.reply_due(due)
    slept = quiet.defer()
    assert slept > 0.0 and time.perf_counter() >= due + quiet.after_s


def test_a_reply_announced_while_deferring_extends_the_wait():
    """A reply announced while a thread sleeps through the window before it (announced before
    that sleep's end, first + after_s) keeps the thread until after the later one too. Tried
    until the announcing thread ran in time (on a loaded machine it may run late). Both windows
    reach back past now (before_s 9 ms, the later reply 6 ms away): a thread that sees the later
    reply first, announced before it looked, waits for it all the same."""
    quiet = QuietWindow(before_s=9e-3, after_s=2e-3)
    announced: list[float] = []

    def announce(later: float) -> None:
        quiet.reply_due(later)
        announced.append(time.perf_counter())  # after the announcement: never too early

    for _ in range(20):
        announced.clear()
        first = time.perf_counter() + 2e-3
        later = first + 4e-3  # the next reply, in the first window's reach
        quiet.reply_due(first)
        timer = threading.Timer(0.5e-3, announce, (later,))
        timer.start()
        quiet.defer()
        returned = time.perf_counter()
        timer.join()
        if announced[0] < first + quiet.after_s:  # announced while the first sleep lasted
            assert returned >= later + quiet.after_s
            return
    pytest.skip("the announcing thread never ran within the first window (a loaded machine)")


@pytest.mark.parametrize("bad", [(-1e-6, 0.0), (0.0, 0.02)])
def test_a_window_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match="before_s and after_s"):
        QuietWindow(*bad)


def test_the_ft_stream_waits_out_a_reply_that_is_due(tmp_path):
    """A frame whose sample arrives inside the window leaves only after it (the stream's encode
    and write deferred); with no reply announced frames flow as before."""
    source = IdealSource(sinc_length=256)
    quiet = QuietWindow(before_s=9e-3, after_s=5e-3)
    emu = BotaEmulator(source, link_dir=tmp_path, quiet=quiet, boot_delay_s=0.0)
    try:
        with serial.Serial(emu.port.path, 460_800, timeout=1.0) as port:
            port.read_until(b"FW version: 1.3.0\r\n")
            wait_until(lambda: not emu._booting.is_set(), 2.0)
            t_us = source.t_us
            source.advance_to(t_us + 10_000)  # first frames with no window: they flow
            first = len(source.ft_samples_after(t_us))
            assert first > 0
            wait_until(lambda: emu.frames_sent >= first, 2.0)  # all of them
            port.reset_input_buffer()
            sent = emu.frames_sent
            due = time.perf_counter() + 4e-3
            quiet.reply_due(due)
            source.advance_to(t_us + 20_000)  # new samples inside the window
            # the first frames may still be crossing the pty (a loaded machine): skip them
            while True:
                frame = port.read(bota.FRAME_LENGTH)
                arrived = time.perf_counter()
                assert len(frame) == bota.FRAME_LENGTH, "no new frame within the read timeout"
                if bota.decode_frame(frame).timestamp_us > t_us + 10_000:
                    break
            assert arrived >= due + quiet.after_s
            wait_until(lambda: emu.frames_sent > sent, 1.0)  # counted just after its write
    finally:
        emu.close()


def test_the_stack_shares_one_window_with_every_thread_that_defers(tmp_path):
    from twin.hardware.clock import MonotonicClock
    from twin.hardware.emulator.stack import EmulatorStack

    with EmulatorStack(load_config(), IdealSource(), clock=MonotonicClock()) as stack:
        quiet = stack.quiet
        assert quiet is not None and stack.servos.quiet is quiet
        assert stack.ft.quiet is quiet and stack.imu.quiet is quiet
        assert stack.runner.quiet is quiet
    with EmulatorStack(load_config(), IdealSource(), clock=ManualClock()) as stack:
        assert stack.quiet is None and stack.servos.quiet is None  # lock-step: nothing paced


def test_the_chain_announces_each_paced_reply(tmp_path):
    emu, sent = _chain(tmp_path, "announce")
    try:
        emu.wire_baud = 1_000_000
        emu.quiet = QuietWindow()
        emu.timeline = collections.deque()
        goal = GoalWriter(XTable.GOAL_POSITION, emu.map.ids).encode(np.full(6, 2048, np.int64))
        emu._on_data(goal + emu.cycle.read_request)
        (_g, r) = emu.timeline
        assert emu.quiet.due == r[2] and len(sent) == 1  # the read's reply, when it was due
    finally:
        emu.close()


# ----------------------------------------------------------------- timer slack
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_TIMERSLACK is Linux's")
def test_the_port_thread_sleeps_with_a_fine_timer_slack(tmp_path):
    """The thread that paces the replies (the port's, which runs ``on_data``) has a timer slack
    of 1 us (1000 ns), not the default 50 us."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    seen: list[int] = []
    port = PtyPort("slack", lambda _data: seen.append(prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0)))
    try:
        with serial.Serial(port.path, 1_000_000, timeout=1.0) as client:
            client.write(b"x")
            wait_until(lambda: seen, 2.0)
        assert seen[0] == 1000
    finally:
        port.close()


# ----------------------------------------------------------------- faults, lock-free
def _port_with(faults: FaultInjector, tmp_path):
    port = PtyPort("faulty", lambda _data: None, link_dir=tmp_path, faults=faults)
    client = serial.Serial(port.path, 1_000_000, timeout=1.0)
    wait_until(lambda: port.client_connected, 2.0)
    return port, client


def test_a_fault_armed_from_another_thread_is_injected(tmp_path):
    faults = FaultInjector(seed=3, split=dynamixel_status_frames)
    port, client = _port_with(faults, tmp_path)
    try:
        data = bytes(range(64))
        assert not faults.armed
        assert port.write(data) == (True, False) and client.read(64) == data
        arm = threading.Thread(target=faults.set, kwargs={"corrupt_rate": 1.0})
        arm.start()
        arm.join()
        assert faults.armed
        result = port.write(data)
        got = client.read(64)
        assert result.damaged and len(got) == 64 and all(a != b for a, b in zip(got, data))
        assert faults.stats.bytes_corrupted == 64
        faults.set(corrupt_rate=0.0)
        assert not faults.armed and port.write(data) == (True, False) and client.read(64) == data
        assert port.writes == 3  # every write counted by the port, armed or not
    finally:
        client.close()
        port.close()


def test_a_frame_drop_armed_from_another_thread_drops_and_then_disarms(tmp_path):
    from twin.hardware.protocols import dynamixel as dxl

    faults = FaultInjector(split=dynamixel_status_frames)
    port, client = _port_with(faults, tmp_path)
    try:
        status = dxl.encode_status(dxl.StatusPacket(3, 0, b"\x01\x02"))
        arm = threading.Thread(target=faults.drop_next, args=(3, 1))
        arm.start()
        arm.join()
        assert faults.armed
        assert port.write(status).damaged and not faults.armed  # the one frame, then clear
        assert port.write(status) == (True, False)
        assert client.read(len(status)) == status and faults.stats.frames_dropped == 1
        assert client.in_waiting == 0
    finally:
        client.close()
        port.close()


# ----------------------------------------------------------------- goals in one copy
def _holding(rng) -> list[Drive]:
    return [
        replace(random_drive(rng), kind=DriveKind.PD, kp=float(rng.uniform(1, 50)))
        for _ in range(6)
    ]


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_goal_positions_in_one_copy_are_the_goal_drives(seed, arrays_built):
    """``set_goal_positions`` leaves each joint the drive ``set_goals`` would (its drive with the
    new goal), and the plant integrates the same state bit for bit."""
    rng = np.random.default_rng(seed)
    drives, q_goal = _holding(rng), rng.normal(0.0, 1.0, 6)
    a = IdealSource(rng.normal(0, 0.3, 6))
    b = IdealSource(a.joint_state()[0])
    for source in (a, b):
        for j, d in enumerate(drives):
            source.set_drive(j, d)
        if arrays_built:
            source.advance_to(1000)
    goals = q_goal.copy()
    a.set_goal_positions(goals)
    goals[:] = np.nan  # taken in a copy: the caller's array is its own again
    b.set_goals([(j, replace(d, q_goal=float(q))) for j, (d, q) in enumerate(zip(drives, q_goal))])
    for source in (a, b):
        source.advance_to(5000)
    assert a._state.tobytes() == b._state.tobytes()
    assert [a.drive(j) for j in range(6)] == [replace(d, q_goal=q) for d, q in zip(drives, q_goal)]


def test_a_drive_set_after_goal_positions_keeps_the_other_joints_goals():
    source = IdealSource()
    held = Drive(DriveKind.PD, kp=10.0, kd=0.5, torque_limit=2.0)
    for j in range(6):
        source.set_drive(j, held)
    source.set_goal_positions(np.arange(6.0))
    source.set_drive(2, Drive())  # limp joint 2
    assert [source.drive(j).q_goal for j in (0, 1, 3, 4, 5)] == [0.0, 1.0, 3.0, 4.0, 5.0]
    assert source.drive(2) == Drive()


# ----------------------------------------------------------------- timeline handover
def test_a_timeline_handed_over_while_a_reply_is_paced_is_not_an_error(tmp_path):
    """The benchmark's ``trace 0`` takes the timeline (sets it to None) from another thread; a
    reply paced meanwhile is recorded in the timeline it started with."""
    emu, sent = _chain(tmp_path, "handover")
    try:
        emu.wire_baud = 1_000_000
        rows: collections.deque = collections.deque()
        emu.timeline = rows

        def write_and_hand_over(raw: bytes) -> None:
            sent.append(raw)
            emu.timeline = None  # handed over between the check and the append

        emu.port.write = write_and_hand_over
        emu._on_data(emu.cycle.read_request)
        assert len(sent) == 1 and len(rows) == 1 and rows[0][4] == len(sent[0])
    finally:
        emu.close()


# ----------------------------------------------------------------- the wake-up
def test_a_paced_wait_never_ends_before_its_time():
    """Whatever lead the waker has learnt, ``wait_until`` returns at or after ``due``."""
    waker = Waker()
    rng = np.random.default_rng(7)
    for wait_s in rng.uniform(0.0, 400e-6, 300):
        due = time.perf_counter() + wait_s
        waker.wait_until(due)
        assert time.perf_counter() >= due
        assert 0.0 <= waker.lead_s <= WAKE_LEAD_MAX_S


@given(st.lists(st.floats(0.0, 1e-3), min_size=1, max_size=400))
def test_the_lead_stays_in_range_and_follows_the_lateness(lates):
    lead = 0.0
    for late in lates:
        new = tracked_lead(lead, late)
        assert 0.0 <= new <= WAKE_LEAD_MAX_S
        assert new >= lead if late > lead else new <= lead
        lead = new


def test_the_lead_settles_at_the_quantile_of_the_lateness():
    """Against a lateness spread evenly over 0..50 us the lead settles where WAKE_QUANTILE of
    the wake-ups come after it (within a few steps)."""
    rng = np.random.default_rng(1)
    lead = 0.0
    for late in rng.uniform(0.0, 50e-6, 20_000):
        lead = tracked_lead(lead, late)
    assert lead == pytest.approx((1.0 - WAKE_QUANTILE) * 50e-6, abs=5 * WAKE_STEP_S)
