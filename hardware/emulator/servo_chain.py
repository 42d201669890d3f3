"""A chain of DYNAMIXEL X-series servos on one pseudo-terminal (Protocol 2.0, byte for byte).

Each servo keeps a control table (``XTable``); instructions are answered as a servo does:
PING (always, unless the id is absent), READ, WRITE, REG_WRITE / ACTION, REBOOT, FACTORY_RESET,
SYNC_READ / BULK_READ (one status packet per listed servo, in list order), FAST_SYNC_READ /
FAST_BULK_READ (one aggregate status packet from 0xFE with each servo's block and CRC, in list
order; a listed id that is absent breaks the chain: the servos before it put out their blocks of
the announced packet and the rest stay silent, as on a real bus), SYNC_WRITE / BULK_WRITE (no
reply). With ``fast_read=False`` the servos are of a firmware without the fast reads: they ignore
0x8A and 0x9A, as any broadcast instruction they do not know. Writes are checked: undefined or read-only addresses and EEPROM writes while torque is
on answer ACCESS, out-of-range values DATA_RANGE / DATA_LIMIT, partial registers DATA_LENGTH. A
latched hardware error sets the alert bit of every status packet and turns the torque off.
Each servo's Bus Watchdog (98) trips as the control table defines it (``WatchdogTimer``, the
deadlines; ``_trip``, the stop; ``docs/protocols/dynamixel.md``, "Bus Watchdog (98)").
``wire_baud`` models the wire at that baud rate (10 bits a byte, half duplex): every instruction
holds it for its bytes, and each reply arrives when its last byte would, so a configuration that
cannot reach its rate on a real bus misses it here too, and six status packets cost what they
would against one. ``EmulatorStack`` turns it on at the bus's baud rate unless
``bus.emulate_wire_time = false``; built alone, the chain has none (a pty has no wire time).
A paced reply waits with a ``Waker`` (one sleep that ends a tracked lead ahead of its time) and
is announced first to the stack's ``QuietWindow`` (``quiet``), whose other threads keep clear of
it (``docs/protocols/dynamixel.md``, "The emulator's part of a free-running cycle").
The bus cycle's own instructions are answered without the parser, in two compiled calls where
numba is (``_on_cycle``; ``docs/protocols/dynamixel.md``, "The cycle in the emulator"), with the
same tables, drives and bytes as the general handlers.

The servos move a ``PhysicsSource``: torque enable, operating mode, goals and gains become a
``Drive`` per joint through the ``JointMap`` (current mode: goal current x torque constant;
position modes: the documented P/D mapping with the goal current or current limit as torque
limit; velocity mode: Velocity P gain). Present values are read from the source, which is first
advanced to ``clock.now_us()`` (so a shared ``ManualClock`` gives a lock-step run).
"""

from __future__ import annotations

import collections
import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from twin.hardware.emulator import _compiled
from twin.hardware.emulator.bus_watchdog import WatchdogTimer
from twin.hardware.emulator.faults import FaultInjector
from twin.hardware.emulator.pty_port import PtyPort
from twin.hardware.emulator.quiet import QuietWindow
from twin.hardware.emulator.sources import (
    LIMP,
    Drive,
    DriveKind,
    PhysicsSource,
    drive_with_goal,
)
from twin.hardware.joint_map import JointMap
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols import dynamixel_packet
from twin.hardware.protocols.dynamixel_cycle import CycleRequests, FastStatusWriter
from twin.hardware.protocols.dynamixel_table import (
    ALERT_BIT,
    BROADCAST_ID,
    BUS_WATCHDOG_MAX,
    BUS_WATCHDOG_TRIPPED,
    EEPROM_END,
    GOAL_REGISTERS,
    MAX_GAIN,
    PRESENT_BLOCK_ADDRESS,
    HardwareError,
    Instruction,
    OperatingMode,
    Register,
    StatusError,
    Units,
    XTable,
)

_REGISTERS = XTable.registers()
_RETURN_DELAY = XTable.RETURN_DELAY_TIME.address  # a one-byte register
_BUS_WATCHDOG = XTable.BUS_WATCHDOG.address  # a one-byte register; 0xFF: tripped (-1)
_PRESENT_BLOCK = struct.Struct("<hii")  # Present Current, Velocity, Position (126..135)
_CURRENT_RANGE = (-(2**15), 2**15 - 1)  # Present Current (int16), Velocity, Position (int32)
_INT32_RANGE = (-(2**31), 2**31 - 1)


#: ``Waker``: the share of sleeps whose wake-up comes later than the lead it keeps (a quantile
#: of the machine's wake-up lateness, tracked), the step (s) by which it tracks it, and its cap.
WAKE_QUANTILE = 0.7
WAKE_STEP_S = 1e-6
WAKE_LEAD_MAX_S = 60e-6


class Waker:
    """Waits for a paced reply's time: one sleep that ends ``lead_s`` ahead of it, then the
    rest (if the wake-up came early) on the clock. ``lead_s`` tracks the quantile of the
    wake-up lateness below which ``1 - WAKE_QUANTILE`` of wake-ups fall (a stochastic quantile
    estimate: each wake-up moves it by ``WAKE_STEP_S``), so that most replies wake up on time or
    a little late and are written at once, and the few that wake early wait a few microseconds
    on the clock; a
    machine that wakes its threads at once (lateness 0) keeps ``lead_s`` at 0 and never waits on
    the clock. Never returns before ``due``."""

    def __init__(self) -> None:
        self.lead_s = 0.0

    def wait_until(self, due: float) -> None:
        """Return at ``due`` (perf_counter s) or just after it."""
        clock = time.perf_counter
        lead = self.lead_s
        wait = due - clock() - lead
        if wait > 0:
            time.sleep(wait)
            self.lead_s = tracked_lead(lead, clock() - (due - lead))
        while clock() < due:
            pass


def tracked_lead(lead_s: float, late_s: float) -> float:
    """``Waker.lead_s`` after a wake-up ``late_s`` s after the sleep's end: up by
    ``(1 - WAKE_QUANTILE) * WAKE_STEP_S`` if the wake-up came after the reply's time, down by
    ``WAKE_QUANTILE * WAKE_STEP_S`` if before (so that at equilibrium ``WAKE_QUANTILE`` of
    wake-ups come after it), within ``[0, WAKE_LEAD_MAX_S]``."""
    q = WAKE_QUANTILE
    lead_s += WAKE_STEP_S * (1.0 - q) if late_s > lead_s else -WAKE_STEP_S * q
    return min(max(lead_s, 0.0), WAKE_LEAD_MAX_S)


def _rounded(value: float, bounds: tuple[int, int]) -> int:
    """``value`` rounded half to even (as ``np.rint``) into the register's ``bounds`` (a nan,
    from a diverged plant, reads 0)."""
    lo, hi = bounds
    if not lo <= value <= hi:
        return lo if value < lo else hi if value > hi else 0
    r = round(value)
    return hi if r > hi else lo if r < lo else r


_BY_ADDRESS = {r.address: r for r in _REGISTERS}
_GAINS = (
    XTable.POSITION_P_GAIN,
    XTable.POSITION_I_GAIN,
    XTable.POSITION_D_GAIN,
    XTable.VELOCITY_P_GAIN,
    XTable.VELOCITY_I_GAIN,
)
_SYNC_READS = (Instruction.SYNC_READ, Instruction.FAST_SYNC_READ)
_FAST_READS = (Instruction.FAST_SYNC_READ, Instruction.FAST_BULK_READ)
_GROUP_READS = (*_SYNC_READS, *_FAST_READS, Instruction.BULK_READ)
_POSITION_MODES = (
    OperatingMode.POSITION,
    OperatingMode.EXTENDED_POSITION,
    OperatingMode.CURRENT_BASED_POSITION,
)


class EmulatedServo:
    """One servo's control table (little-endian bytes; ``table``: a writable buffer of
    ``XTable.SIZE`` bytes to keep it in, e.g. a row of the chain's tables) and its pending
    REG_WRITE."""

    def __init__(
        self, pid: int, model_number: int, firmware: int = 46, table: memoryview | None = None
    ) -> None:
        self.model_number, self.firmware = model_number, firmware
        self.table = bytearray(XTable.SIZE) if table is None else table
        self.factory_reset(keep_id=False)
        self.set(XTable.ID, pid)
        self.pending: tuple[int, bytes] | None = None
        #: While the servo holds a position servo-side: what a new Goal Position alone changes
        #: (the chain's fast path for the cycle's SYNC_WRITE); None otherwise.
        self.goal_drive: tuple | None = None
        self.goal_fields: dict = {}  # the holding drive's fields (``Drive``), with goal_drive

    @property
    def id(self) -> int:
        return self.table[XTable.ID.address]

    def get(self, reg: Register) -> int:
        return dxl.decode_value(self.table[reg.address : reg.end], reg.signed)

    def set(self, reg: Register, value: int) -> None:
        self.table[reg.address : reg.end] = dxl.encode_register(reg, int(value))

    def factory_reset(self, keep_id: bool = True, keep_baud: bool = False) -> None:
        pid, baud = self.table[XTable.ID.address], self.table[XTable.BAUD_RATE.address]
        for reg in _REGISTERS:
            self.set(reg, reg.default)
        self.set(XTable.MODEL_NUMBER, self.model_number)
        self.set(XTable.FIRMWARE_VERSION, self.firmware)
        if keep_id:
            self.table[XTable.ID.address] = pid
        if keep_baud:
            self.table[XTable.BAUD_RATE.address] = baud

    def reboot(self) -> None:
        """RAM (address >= 64) back to defaults, the hardware error cleared; EEPROM kept."""
        for reg in _REGISTERS:
            if not reg.eeprom:
                self.set(reg, reg.default)
        self.pending = None

    @property
    def hw_error(self) -> int:
        return self.table[XTable.HARDWARE_ERROR_STATUS.address]

    def err(self, code: StatusError = StatusError.NONE) -> int:
        return int(code) | (ALERT_BIT if self.hw_error else 0)

    def check_write(self, address: int, data: bytes) -> StatusError:
        """Whether ``data`` may be written at ``address`` (the value checks included)."""
        end = address + len(data)
        a = address
        regs = []
        while a < end:
            reg = _BY_ADDRESS.get(a)
            if reg is None or not reg.writable:
                return StatusError.ACCESS
            if reg.end > end:
                return StatusError.DATA_LENGTH
            if reg.eeprom and self.get(XTable.TORQUE_ENABLE):
                return StatusError.ACCESS
            regs.append((reg, dxl.decode_register(reg, data, offset=address)))
            a = reg.end
        for reg, value in regs:
            code = self._check_value(reg, value, regs)
            if code is not StatusError.NONE:
                return code
        return StatusError.NONE

    def _check_value(self, reg: Register, value: int, regs) -> StatusError:
        tripped = self.get(XTable.BUS_WATCHDOG) == BUS_WATCHDOG_TRIPPED
        if reg in GOAL_REGISTERS and tripped:
            return StatusError.DATA_RANGE  # read-only until the host writes 0 to Bus Watchdog
        if reg is XTable.BUS_WATCHDOG and not (
            value == 0 or (0 < value <= BUS_WATCHDOG_MAX and not tripped)
        ):
            return StatusError.DATA_RANGE  # 0..127; a trip is cleared with 0 before re-arming
        new = {r.name: v for r, v in regs}
        mode = new.get("operating_mode", self.get(XTable.OPERATING_MODE))
        if reg is XTable.OPERATING_MODE and value not in OperatingMode._value2member_map_:
            return StatusError.DATA_RANGE
        if reg is XTable.TORQUE_ENABLE:
            if value not in (0, 1):
                return StatusError.DATA_RANGE
            if value and self.hw_error:
                return StatusError.RESULT_FAIL
        if reg in _GAINS and value > MAX_GAIN:
            return StatusError.DATA_RANGE
        if reg is XTable.GOAL_CURRENT and abs(value) > self.get(XTable.CURRENT_LIMIT):
            return StatusError.DATA_LIMIT
        if reg is XTable.GOAL_POSITION:
            if mode == OperatingMode.POSITION:
                lo, hi = self.get(XTable.MIN_POSITION_LIMIT), self.get(XTable.MAX_POSITION_LIMIT)
            else:
                lo, hi = -Units.EXTENDED_POSITION_LIMIT, Units.EXTENDED_POSITION_LIMIT
            if not lo <= value <= hi:
                return StatusError.DATA_LIMIT
        return StatusError.NONE


class ServoChainEmulator:
    """The servo chain on its own pseudo-terminal (module doc). ``ids`` in joint order."""

    def __init__(
        self,
        source: PhysicsSource,
        joint_map: JointMap,
        clock,
        *,
        model_numbers: Sequence[int] | None = None,
        name: str = "servo_bus",
        link_dir: Path | None = None,
        faults: FaultInjector | None = None,
        fast_read: bool = True,
        wire_baud: int | None = None,
        quiet: QuietWindow | None = None,
    ) -> None:
        self.source, self.map, self.clock = source, joint_map, clock
        #: Told when each paced reply is due, so that the stack's other threads keep clear of it.
        self.quiet = quiet
        self.fast_read = fast_read
        self._faults = faults
        models = model_numbers or [XTable.MODEL_NUMBER.default] * joint_map.n
        n = joint_map.n
        #: Every servo's control table, one row each in joint order (the compiled kernels'
        #: view; ``EmulatedServo.table`` is its row).
        self.tables = np.zeros((n, XTable.SIZE), np.uint8)
        self._by_joint = [
            EmulatedServo(pid, m, table=memoryview(self.tables[j]))
            for j, (pid, m) in enumerate(zip(joint_map.ids, models))
        ]
        self.servos = {s.id: s for s in self._by_joint}
        self.joint_of = {pid: j for j, pid in enumerate(joint_map.ids)}
        m = joint_map
        self._joint_units = list(
            zip(
                *(
                    a.tolist()
                    for a in (
                        m.direction,
                        m.zero_ticks,
                        m.ticks_per_rad,
                        m.torque_unit,
                        m.kp_unit,
                        m.kd_unit,
                        m.velocity_unit,
                    )
                )
            )
        )
        self.parser = dxl.DynamixelStreamParser()
        #: The bus cycle's instructions, recognised without the parser (``_on_cycle``).
        self.cycle = CycleRequests(XTable.GOAL_POSITION, joint_map.ids)
        self._present_items = [
            (pid, PRESENT_BLOCK_ADDRESS, _PRESENT_BLOCK.size) for pid in joint_map.ids
        ]
        self._present_status = FastStatusWriter(joint_map.ids, _PRESENT_BLOCK.size)
        self._kernels = _compiled.kernels()
        head = self.cycle.goal_head + bytes(joint_map.ids) + self.cycle.read_request
        self._expect = np.frombuffer(head, np.uint8).copy()  # cycle_goals' expected bytes
        #: Per joint: holds a position (its servo answering to its configured id), goal range
        #: lo, hi (ticks), direction, zero ticks, ticks per rad (``cycle_goals``).
        self._goal_consts = np.zeros((6, n))
        self._q_goals = np.zeros(n)
        self._ids_intact = True  # every servo answers to its configured id (``_rekey``)
        self._present_terms = np.array(
            [m.direction, m.zero_ticks, m.ticks_per_rad, m.torque_unit, m.velocity_unit], float
        )
        dynamixel_packet.load_compiled()  # before the port opens: no answer waits for the load
        self.reply_delay_s = 0.0
        #: Baud rate whose wire time instructions and replies take (None: replies leave at once,
        #: as a pty has no wire time).
        self.wire_baud = wire_baud
        self._wire_free = 0.0  # perf_counter s when the modelled wire is next free
        self._waker = Waker()
        #: A deque to record the timeline of each wire-timed instruction into (None: off):
        #: ``(received, handled, due, written, reply bytes, handling CPU, pacing CPU)``, times in
        #: perf_counter s, CPU in s of this thread (from the read of the bytes to the reply's
        #: wait, and the wait and the write).
        self.timeline: collections.deque | None = None
        self._cpu_mark = 0.0
        self.instructions = 0
        #: The servos' Bus Watchdog deadlines (``watchdog.trips``: each trip, ``(id, t_us)``).
        self.watchdog = WatchdogTimer(
            source, self.servos, lambda: self.port.input_waiting(), self._trip
        )
        self._lock = threading.Lock()
        self._refresh()
        for s in self.servos.values():
            s.set(XTable.GOAL_POSITION, s.get(XTable.PRESENT_POSITION))
        self.port = PtyPort(name, self._on_data, link_dir=link_dir, faults=faults)

    def close(self) -> None:
        self.port.close()

    # ----------------------------------------------------------------- faults
    def inject_hardware_error(
        self, pid: int, error: HardwareError = HardwareError.OVERLOAD
    ) -> None:
        """Latch a hardware error in servo ``pid``: torque off, alert bit in every status."""
        with self._lock:
            s = self.servos[pid]
            s.set(XTable.HARDWARE_ERROR_STATUS, s.hw_error | int(error))
            s.set(XTable.TORQUE_ENABLE, 0)
            self._update_drive(pid)

    # ----------------------------------------------------------------- bus watchdog
    def _trip(self, s: EmulatedServo, t_us: int) -> None:
        """Servo ``s``'s Bus Watchdog trips: it stops (position modes: Goal Position becomes
        Present Position, held with its gains; current, velocity and PWM modes: the mode's goal
        becomes 0), Bus Watchdog reads -1 and the goals are read-only."""
        mode = s.get(XTable.OPERATING_MODE)
        if mode in _POSITION_MODES:
            j = self.joint_of[s.id]
            direction, zero, tpr = self._joint_units[j][:3]
            q = float(self.source.joint_state()[0][j])
            lo, hi = (
                (s.get(XTable.MIN_POSITION_LIMIT), s.get(XTable.MAX_POSITION_LIMIT))
                if mode == OperatingMode.POSITION
                else (-Units.EXTENDED_POSITION_LIMIT, Units.EXTENDED_POSITION_LIMIT)
            )
            s.set(XTable.GOAL_POSITION, min(max(round(zero + direction * q * tpr), lo), hi))
        else:
            goal = {
                OperatingMode.CURRENT: XTable.GOAL_CURRENT,
                OperatingMode.VELOCITY: XTable.GOAL_VELOCITY,
                OperatingMode.PWM: XTable.GOAL_PWM,
            }.get(mode)
            if goal is not None:
                s.set(goal, 0)
        s.set(XTable.BUS_WATCHDOG, BUS_WATCHDOG_TRIPPED)
        self._update_drive(s.id)

    # ----------------------------------------------------------------- physics link
    def _refresh(self) -> None:
        """Advance the physics to now and copy the joint state into the present registers (the
        ``JointMap`` conversions, rounded half to even as ``np.rint``, on Python floats: six
        joints, where numpy's per-call cost would dominate)."""
        self.source.advance_to(self.clock.now_us())
        if self._kernels is not None:
            w = self._present_status
            state = self.source.state_rows()
            self._kernels.present_wire(state, self._present_terms, self.tables, w.array, w.ends, 0)
            return
        q, qd, tau = self.source.joint_lists()
        units, joint_of, moving = self._joint_units, self.joint_of, XTable.MOVING.address
        (c_lo, c_hi), (i_lo, i_hi) = _CURRENT_RANGE, _INT32_RANGE
        for pid, s in self.servos.items():
            j = joint_of[pid]
            direction, zero, tpr, unit, _, _, vel_unit = units[j]
            c = direction * tau[j] / unit
            v = direction * qd[j] / vel_unit
            t = zero + direction * q[j] * tpr
            # in range (the common case) a value rounds into the range: ``_rounded`` otherwise
            cur = round(c) if c_lo <= c <= c_hi else _rounded(c, _CURRENT_RANGE)
            vel = round(v) if i_lo <= v <= i_hi else _rounded(v, _INT32_RANGE)
            ticks = round(t) if i_lo <= t <= i_hi else _rounded(t, _INT32_RANGE)
            _PRESENT_BLOCK.pack_into(s.table, PRESENT_BLOCK_ADDRESS, cur, vel, ticks)
            s.table[moving] = vel != 0

    def _update_drive(self, pid: int) -> None:
        """The drive of servo ``pid``'s joint from its registers, in Python floats (the same
        operations as ``JointMap``'s, on one joint: this runs for every goal a cycle writes)."""
        s, j = self.servos[pid], self.joint_of[pid]
        direction, zero, tpr, unit, kp_unit, kd_unit, vel_unit = self._joint_units[j]
        get = s.get
        tripped = s.table[_BUS_WATCHDOG] == 0xFF  # Bus Watchdog -1: the goals are read-only
        self.watchdog.update(s)
        s.goal_drive = None
        self._goal_consts[0, j] = 0.0  # not holding (set again below where it does)
        mode = get(XTable.OPERATING_MODE)
        current_limit = get(XTable.CURRENT_LIMIT)
        limit = current_limit * unit
        if not get(XTable.TORQUE_ENABLE) or s.hw_error:
            drive = LIMP
        elif mode == OperatingMode.CURRENT:
            cur = min(max(get(XTable.GOAL_CURRENT), -current_limit), current_limit)
            drive = Drive(DriveKind.CURRENT, torque=direction * cur * unit)
        elif mode in _POSITION_MODES:
            if mode == OperatingMode.CURRENT_BASED_POSITION:
                limit = min(limit, abs(get(XTable.GOAL_CURRENT)) * unit)
            kp = float(get(XTable.POSITION_P_GAIN)) * kp_unit
            kd = float(get(XTable.POSITION_D_GAIN)) * kd_unit
            if mode == OperatingMode.POSITION:
                lo, hi = get(XTable.MIN_POSITION_LIMIT), get(XTable.MAX_POSITION_LIMIT)
            else:
                lo, hi = -Units.EXTENDED_POSITION_LIMIT, Units.EXTENDED_POSITION_LIMIT
            if not tripped:  # the cycle's fast paths only for a servo whose goals are writable
                s.goal_drive = (j, direction, zero, tpr, lo, hi)
                if s.id == self.map.ids[j]:
                    self._goal_consts[:, j] = (1.0, lo, hi, direction, zero, tpr)
            drive = Drive(
                DriveKind.PD,
                q_goal=direction * (float(get(XTable.GOAL_POSITION)) - zero) / tpr,
                kp=kp,
                kd=kd,
                torque_limit=limit,
            )
            s.goal_fields = dict(drive.__dict__)  # what a new goal alone keeps (_write_goal)
        elif mode == OperatingMode.VELOCITY:
            kv = get(XTable.VELOCITY_P_GAIN) / 128.0 * unit / vel_unit
            qd_goal = direction * get(XTable.GOAL_VELOCITY) * vel_unit
            drive = Drive(DriveKind.PD, qd_goal=qd_goal, kd=kv, torque_limit=limit)
        else:  # PWM mode is not emulated: the joint is left limp
            drive = LIMP
        self.source.set_drive(j, drive)

    # ----------------------------------------------------------------- protocol
    def _on_data(self, data: bytes) -> None:
        watchdog = self.watchdog
        watchdog.received(self.clock.now_us())  # when the servos heard it
        try:
            self._on_bytes(data)
        finally:
            watchdog.done()

    def _on_bytes(self, data: bytes) -> None:
        now = time.perf_counter()
        if self.timeline is not None:
            self._cpu_mark = time.thread_time()
        if self.fast_read and not self.parser.pending:
            if self._kernels is not None:
                if self._on_cycle_compiled(now, data):
                    return
            else:
                cycle = self.cycle.match(data)
                if cycle is not None and self._on_cycle(now, *cycle):
                    return
        for packet in self.parser.feed(data):
            if isinstance(packet, dxl.InstructionPacket):
                with self._lock:
                    self.instructions += 1
                    replies = self._handle(packet)
                    self.watchdog.heard(packet.id)
                self._reply(now, dxl.MIN_PACKET_LENGTH + len(packet.params), replies)

    def _on_cycle(self, now: float, goals: tuple[int, ...] | None, read: bool) -> bool:
        """The bus cycle's instructions (``CycleRequests.match``: the goal SYNC_WRITE's values
        in joint order, whether the FAST_SYNC_READ of the present block follows) answered as
        ``_handle`` answers their packets, without building them. False, with nothing done,
        where a goal does not take the fast path (``_write_goals``): the parser takes them."""
        with self._lock:
            if goals is not None:
                if not self._write_goals(goals):
                    return False
                self.instructions += 1
            if read:
                self.instructions += 1
                self._refresh()
                replies = self._present_reply()
            self.watchdog.heard(BROADCAST_ID)
        if goals is not None:
            self._reply(now, self.cycle.goal_bytes, [])
        if read:
            self._reply(now, len(self.cycle.read_request), replies)
        return True

    def _on_cycle_compiled(self, now: float, data: bytes) -> bool:
        """``_on_cycle`` in two compiled calls (``_compiled.cycle_goals``, ``present_wire``):
        the same tables, drives and reply bytes."""
        kernels = self._kernels
        with self._lock:
            flags = kernels.cycle_goals(
                data, self._expect, self._goal_consts, self.tables, self._q_goals
            )
            if flags < 0:
                return False
            if flags & 1:
                self.instructions += 1
                self.source.set_goal_positions(self._q_goals)  # every servo holds (flags)
            if flags & 2:
                self.instructions += 1
                replies = self._present_reply_compiled()
            self.watchdog.heard(BROADCAST_ID)
        if flags & 1:
            self._reply(now, self.cycle.goal_bytes, [])
        if flags & 2:
            self._reply(now, len(self.cycle.read_request), replies)
        return True

    def _present_reply_compiled(self) -> list[tuple[EmulatedServo, bytes]]:
        """``_refresh`` and ``_present_reply`` in one compiled call (``present_wire``), where
        every servo answers to its configured id and no frame drop is pending."""
        faults = self._faults
        if (faults is not None and faults.drops_frames) or not self._ids_intact:
            self._refresh()
            return self._fast_reply(self._present_items)
        source = self.source
        source.advance_to(self.clock.now_us())
        writer = self._present_status
        self._kernels.present_wire(
            source.state_rows(), self._present_terms, self.tables, writer.array, writer.ends, 1
        )
        return [(self._by_joint[0], writer.wire())]

    def _reply(self, received: float, n_bytes: int, replies) -> None:
        """Send the ``replies`` to an instruction of ``n_bytes`` received at ``received``
        (perf_counter s): paced on the modelled wire, or at once."""
        if not self.wire_baud:
            self._send(replies)
            return
        timeline = self.timeline  # read once: another thread may hand it over meanwhile
        timed = timeline is not None
        handled, cpu = (time.perf_counter(), time.thread_time()) if timed else (0.0, 0.0)
        due, written = self._send_paced(received, n_bytes, replies)
        if timed:
            n_reply = sum(len(raw) for _, raw in replies)
            done = time.thread_time()
            handling, pacing = cpu - self._cpu_mark, done - cpu
            self._cpu_mark = done
            timeline.append((received, handled, due, written, n_reply, handling, pacing))

    def _send(self, replies: list[tuple[EmulatedServo, bytes]]) -> None:
        """Each reply (wire bytes) leaves after its servo's return delay (and any injected delay);
        replies without a delay leave in one write (the same bytes on the wire, fewer thread
        switches). A fast read's aggregate packet waits for its first servo's delay only."""
        batch = bytearray()
        for servo, raw in replies:
            delay = self.reply_delay_s + servo.get(XTable.RETURN_DELAY_TIME) * Units.RETURN_DELAY_S
            if delay > 0:
                if batch:
                    self.port.write(bytes(batch))
                    batch.clear()
                time.sleep(delay)
            batch += raw
        if batch:
            self.port.write(bytes(batch))

    def _send_paced(
        self, received: float, n_bytes: int, replies: list[tuple[EmulatedServo, bytes]]
    ) -> tuple[float, float]:
        """The wire at ``wire_baud`` (10 bits a byte, half duplex): the instruction of
        ``n_bytes`` takes the wire from when it was received (``received``, perf_counter s) or
        when the wire is free, whichever is later; each reply follows after its return delay and
        is written when its last byte would arrive. An instruction without replies (a sync write)
        still holds the wire for its bytes, so the read after it waits for them. Returns when the
        last reply was due and when it was written (perf_counter s)."""
        byte_s = 10.0 / self.wire_baud
        due = max(self._wire_free, received) + n_bytes * byte_s
        quiet = self.quiet
        for servo, raw in replies:
            delay = self.reply_delay_s + servo.table[_RETURN_DELAY] * Units.RETURN_DELAY_S
            due += delay + len(raw) * byte_s
            if quiet is not None:
                quiet.reply_due(due)
            self._waker.wait_until(due)
            self.port.write(raw)
        self._wire_free = due
        return due, time.perf_counter()

    def _targets(self, pid: int) -> list[EmulatedServo]:
        if pid == BROADCAST_ID:
            return [self.servos[i] for i in sorted(self.servos)]
        return [self.servos[pid]] if pid in self.servos else []

    def _handle(self, pkt: dxl.InstructionPacket) -> list[tuple[EmulatedServo, bytes]]:
        inst, params, unicast = pkt.instruction, pkt.params, pkt.id != BROADCAST_ID
        try:
            if inst == Instruction.PING:
                return [
                    (
                        s,
                        dxl.encode_status(
                            dxl.ping_status(s.id, s.model_number, s.firmware, s.err())
                        ),
                    )
                    for s in self._targets(pkt.id)
                ]
            fast = inst in _FAST_READS
            if inst in _GROUP_READS and (self.fast_read or not fast):
                if inst in _SYNC_READS:
                    addr, length, ids = dxl.parse_sync_read(params)
                    items = [(i, addr, length) for i in ids]
                else:
                    items = dxl.parse_bulk_read(params)
                self._refresh()
                if fast:
                    return self._fast_reply(items)
                return [
                    (self.servos[i], dxl.encode_status(self._read(self.servos[i], a, n)))
                    for i, a, n in items
                    if i in self.servos
                ]
            if inst in (Instruction.SYNC_WRITE, Instruction.BULK_WRITE):
                if inst == Instruction.SYNC_WRITE:
                    addr, _, data = dxl.parse_sync_write(params)
                    items = [(i, addr, d) for i, d in data.items()]
                else:
                    items = dxl.parse_bulk_write(params)
                goal = XTable.GOAL_POSITION
                for i, a, d in items:
                    s = self.servos.get(i)
                    if s is not None and not (a == goal.address and self._write_goal(s, d)):
                        self._write(s, a, d)
                return []
        except dxl.ProtocolError:
            return []  # malformed broadcast: nobody answers
        replies = []
        for s in self._targets(pkt.id):
            reply = self._unicast(s, inst, params)
            level = s.get(XTable.STATUS_RETURN_LEVEL)
            wanted = (
                inst == Instruction.PING or (inst == Instruction.READ and level >= 1) or level >= 2
            )
            if reply is not None and unicast and wanted:
                replies.append((s, dxl.encode_status(reply)))
        return replies

    def _fast_reply(self, items: list[tuple[int, int, int]]) -> list[tuple[EmulatedServo, bytes]]:
        """The aggregate status of a fast read of ``(id, address, length)`` items (module doc):
        a block is always ``length`` data bytes, zeros with ACCESS for a range it cannot read."""
        blocks = []
        servos, faults = self.servos, self._faults
        drops = faults is not None and faults.drops_frames
        for pid, address, length in items:
            s = servos.get(pid)
            if s is None or (drops and faults.take_frame_drop(pid)):
                break  # an absent or silent servo breaks the chain: the rest never answer
            if address + length > XTable.SIZE or length == 0:
                blocks.append((s.err(StatusError.ACCESS), pid, bytes(length)))
            else:
                blocks.append((s.err(), pid, s.table[address : address + length]))
        if not blocks:
            return []
        length = dxl.fast_status_length([n for _, _, n in items])
        return [(servos[items[0][0]], dxl.fast_status_wire(length, blocks))]

    def _present_reply(self) -> list[tuple[EmulatedServo, bytes]]:
        """``_fast_reply`` of the cycle's read (the present block of every servo, in joint
        order) from the packet laid out once (``FastStatusWriter``); ``_fast_reply`` itself where
        a servo is absent or a frame drop is pending."""
        servos = self.servos
        faults = self._faults
        if faults is not None and faults.drops_frames:
            return self._fast_reply(self._present_items)
        blocks, first = [], None
        a, b = PRESENT_BLOCK_ADDRESS, PRESENT_BLOCK_ADDRESS + _PRESENT_BLOCK.size
        for pid in self.map.ids:
            s = servos.get(pid)
            if s is None:
                return self._fast_reply(self._present_items)
            first = first or s
            blocks.append((s.err(), s.table[a:b]))
        return [(first, self._present_status.encode(blocks))]

    def _unicast(self, s: EmulatedServo, inst: int, params: bytes) -> dxl.StatusPacket | None:
        try:
            if inst == Instruction.READ:
                self._refresh()
                return self._read(s, *dxl.parse_read(params))
            if inst in (Instruction.WRITE, Instruction.REG_WRITE):
                addr, data = dxl.parse_write(params)
                code = s.check_write(addr, data)
                if code is StatusError.NONE:
                    if inst == Instruction.WRITE:
                        self._write(s, addr, data)
                    else:
                        s.pending = (addr, data)
                return dxl.StatusPacket(s.id, s.err(code))
            if inst == Instruction.ACTION:
                if s.pending is not None:
                    self._write(s, *s.pending)
                    s.pending = None
                return None  # ACTION is never answered
            if inst == Instruction.REBOOT:
                reply = dxl.StatusPacket(s.id, s.err())
                s.reboot()
                self._refresh()
                s.set(XTable.GOAL_POSITION, s.get(XTable.PRESENT_POSITION))
                self._update_drive(s.id)
                return reply
            if inst == Instruction.FACTORY_RESET:
                if not params or params[0] not in (0xFF, 0x01, 0x02):
                    return dxl.StatusPacket(s.id, s.err(StatusError.DATA_RANGE))
                reply = dxl.StatusPacket(s.id, s.err())
                pid = s.id
                s.factory_reset(keep_id=params[0] != 0xFF, keep_baud=params[0] == 0x02)
                if s.id != pid:
                    self._rekey(pid, s)
                self._update_drive(s.id)
                return reply
        except dxl.ProtocolError:
            return dxl.StatusPacket(s.id, s.err(StatusError.DATA_LENGTH))
        return dxl.StatusPacket(s.id, s.err(StatusError.INSTRUCTION))

    def _read(self, s: EmulatedServo, address: int, length: int) -> dxl.StatusPacket:
        if address + length > XTable.SIZE or length == 0:
            return dxl.StatusPacket(s.id, s.err(StatusError.ACCESS))
        return dxl.StatusPacket(s.id, s.err(), bytes(s.table[address : address + length]))

    def _write(self, s: EmulatedServo, address: int, data: bytes) -> StatusError:
        code = s.check_write(address, data)
        if code is not StatusError.NONE:
            return code
        pid = s.id
        s.table[address : address + len(data)] = data
        if address < EEPROM_END and s.id != pid:
            self._rekey(pid, s)
        self._update_drive(s.id)
        return StatusError.NONE

    def _write_goal(self, s: EmulatedServo, data: bytes) -> bool:
        """A Goal Position alone for a servo holding a position (``goal_drive``): the same
        check, table write and drive as ``_write``, without walking the registers. False (nothing
        done) where that does not apply."""
        if s.goal_drive is None or len(data) != 4:
            return False
        goal = self._goal(s, int.from_bytes(data, "little", signed=True))
        if goal is None:
            return False  # _write answers DATA_LIMIT (unheard: a sync write has no status)
        self.source.set_goal(*goal)  # the drive _update_drive set, with a new goal
        return True

    def _write_goals(self, values: tuple[int, ...]) -> bool:
        """The cycle's Goal Position ``values`` (joint order), each servo's as ``_write_goal``
        writes it, the drives set under the source's lock once. False (nothing done) unless
        every servo holds a position and every value is within its range."""
        servos, goals = self.servos, []
        for pid, value in zip(self.map.ids, values):
            s = servos.get(pid)
            goal = None if s is None or s.goal_drive is None else self._goal(s, value, False)
            if goal is None:
                return False
            goals.append(goal)
        address = XTable.GOAL_POSITION.address
        for pid, value in zip(self.map.ids, values):
            servos[pid].table[address : address + 4] = value.to_bytes(4, "little", signed=True)
        self.source.set_goals(goals)
        return True

    def _goal(self, s: EmulatedServo, value: int, write: bool = True) -> tuple[int, Drive] | None:
        """``(joint, drive)`` of Goal Position ``value`` for servo ``s`` holding a position
        (``goal_drive``; the register written unless not ``write``), or None if the value is
        beyond its range."""
        j, direction, zero, tpr, lo, hi = s.goal_drive
        if not lo <= value <= hi:
            return None
        if write:
            address = XTable.GOAL_POSITION.address
            s.table[address : address + 4] = value.to_bytes(4, "little", signed=True)
        return j, drive_with_goal(s.goal_fields, direction * (float(value) - zero) / tpr)

    def _rekey(self, old: int, s: EmulatedServo) -> None:
        """An ID write: the servo answers to its new id (its joint stays the same)."""
        self.servos.pop(old)
        self.servos[s.id] = s
        self.joint_of[s.id] = self.joint_of.pop(old)
        self._ids_intact = all(
            self.servos.get(p) is t for p, t in zip(self.map.ids, self._by_joint)
        )
