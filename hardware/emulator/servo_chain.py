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
``wire_baud`` (off by default: a pty has no wire time) makes each reply arrive when its last
byte would at that baud rate, so a benchmark sees what six status packets cost against one.

The servos move a ``PhysicsSource``: torque enable, operating mode, goals and gains become a
``Drive`` per joint through the ``JointMap`` (current mode: goal current x torque constant;
position modes: the documented P/D mapping with the goal current or current limit as torque
limit; velocity mode: Velocity P gain). Present values are read from the source, which is first
advanced to ``clock.now_us()`` (so a shared ``ManualClock`` gives a lock-step run).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from twin.hardware.emulator.faults import FaultInjector
from twin.hardware.emulator.pty_port import PtyPort
from twin.hardware.emulator.sources import LIMP, Drive, DriveKind, PhysicsSource
from twin.hardware.joint_map import JointMap
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import (
    ALERT_BIT,
    BROADCAST_ID,
    EEPROM_END,
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
_PRESENT_BLOCK = struct.Struct("<hii")  # Present Current, Velocity, Position (126..135)
_PRESENT_MIN = np.array([[-(2**15)], [-(2**31)], [-(2**31)]])
_PRESENT_MAX = np.array([[2**15 - 1], [2**31 - 1], [2**31 - 1]])
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
    """One servo's control table (little-endian bytes) and its pending REG_WRITE."""

    def __init__(self, pid: int, model_number: int, firmware: int = 46) -> None:
        self.model_number, self.firmware = model_number, firmware
        self.table = bytearray(XTable.SIZE)
        self.factory_reset(keep_id=False)
        self.set(XTable.ID, pid)
        self.pending: tuple[int, bytes] | None = None

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
    ) -> None:
        self.source, self.map, self.clock = source, joint_map, clock
        self.fast_read = fast_read
        self._faults = faults
        models = model_numbers or [XTable.MODEL_NUMBER.default] * joint_map.n
        self.servos = {pid: EmulatedServo(pid, m) for pid, m in zip(joint_map.ids, models)}
        self.joint_of = {pid: j for j, pid in enumerate(joint_map.ids)}
        self.parser = dxl.DynamixelStreamParser()
        self.reply_delay_s = 0.0
        #: Baud rate whose wire time the replies take (None: they leave at once, as on a pty).
        self.wire_baud: int | None = None
        self._received_at, self._instruction_bytes = 0.0, 0
        self.instructions = 0
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

    # ----------------------------------------------------------------- physics link
    def _refresh(self) -> None:
        """Advance the physics to now and copy the joint state into the present registers."""
        self.source.advance_to(self.clock.now_us())
        q, qd, tau = self.source.joint_state()
        m = self.map
        ticks = np.rint(m.zero_ticks + m.direction * q * m.ticks_per_rad)
        raw = np.stack((m.current_from_tau(tau), m.units_from_qd(qd), ticks))
        raw = np.minimum(np.maximum(raw, _PRESENT_MIN), _PRESENT_MAX).astype(np.int64)
        cur, vel, ticks = raw.tolist()
        for pid, s in self.servos.items():
            j = self.joint_of[pid]
            _PRESENT_BLOCK.pack_into(s.table, PRESENT_BLOCK_ADDRESS, cur[j], vel[j], ticks[j])
            s.table[XTable.MOVING.address] = vel[j] != 0

    def _update_drive(self, pid: int) -> None:
        s, j, m = self.servos[pid], self.joint_of[pid], self.map
        mode = s.get(XTable.OPERATING_MODE)
        unit = m.torque_unit[j]
        limit = s.get(XTable.CURRENT_LIMIT) * unit
        if not s.get(XTable.TORQUE_ENABLE) or s.hw_error:
            drive = LIMP
        elif mode == OperatingMode.CURRENT:
            cur = np.clip(
                s.get(XTable.GOAL_CURRENT),
                -s.get(XTable.CURRENT_LIMIT),
                s.get(XTable.CURRENT_LIMIT),
            )
            drive = Drive(DriveKind.CURRENT, torque=m.direction[j] * cur * unit)
        elif mode in _POSITION_MODES:
            if mode == OperatingMode.CURRENT_BASED_POSITION:
                limit = min(limit, abs(s.get(XTable.GOAL_CURRENT)) * unit)
            kp, kd = m.kp_kd_from_gains(
                [s.get(XTable.POSITION_P_GAIN)] * m.n, [s.get(XTable.POSITION_D_GAIN)] * m.n
            )
            q_goal = m.q_from_ticks(np.full(m.n, s.get(XTable.GOAL_POSITION)))[j]
            drive = Drive(DriveKind.PD, q_goal=q_goal, kp=kp[j], kd=kd[j], torque_limit=limit)
        elif mode == OperatingMode.VELOCITY:
            kv = s.get(XTable.VELOCITY_P_GAIN) / 128.0 * unit / m.velocity_unit[j]
            qd_goal = m.direction[j] * s.get(XTable.GOAL_VELOCITY) * m.velocity_unit[j]
            drive = Drive(DriveKind.PD, qd_goal=qd_goal, kd=kv, torque_limit=limit)
        else:  # PWM mode is not emulated: the joint is left limp
            drive = LIMP
        self.source.set_drive(j, drive)

    # ----------------------------------------------------------------- protocol
    def _on_data(self, data: bytes) -> None:
        for packet in self.parser.feed(data):
            if isinstance(packet, dxl.InstructionPacket):
                self._received_at = time.perf_counter()
                self._instruction_bytes = dxl.MIN_PACKET_LENGTH + len(packet.params)
                with self._lock:
                    self.instructions += 1
                    replies = self._handle(packet)
                self._send(replies)

    def _send(self, replies: list[tuple[EmulatedServo, bytes]]) -> None:
        """Each reply (wire bytes) leaves after its servo's return delay (and any injected delay);
        replies without a delay leave in one write (the same bytes on the wire, fewer thread
        switches). A fast read's aggregate packet waits for its first servo's delay only. With
        ``wire_baud`` set, a reply arrives when its last byte would (10 bits a byte), after the
        instruction's own bytes and the replies before it."""
        if self.wire_baud:
            return self._send_paced(replies)
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

    def _send_paced(self, replies: list[tuple[EmulatedServo, bytes]]) -> None:
        byte_s = 10.0 / self.wire_baud
        due = self._received_at + self._instruction_bytes * byte_s
        for servo, raw in replies:
            delay = self.reply_delay_s + servo.get(XTable.RETURN_DELAY_TIME) * Units.RETURN_DELAY_S
            due = max(due, time.perf_counter()) + delay + len(raw) * byte_s
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            self.port.write(raw)

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
                for i, a, d in items:
                    if i in self.servos:
                        self._write(self.servos[i], a, d)
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
        for pid, address, length in items:
            s = self.servos.get(pid)
            if s is None or (self._faults is not None and self._faults.take_frame_drop(pid)):
                break  # an absent or silent servo breaks the chain: the rest never answer
            if address + length > XTable.SIZE or length == 0:
                blocks.append(dxl.StatusPacket(pid, s.err(StatusError.ACCESS), bytes(length)))
            else:
                blocks.append(self._read(s, address, length))
        if not blocks:
            return []
        length = dxl.fast_status_length([n for _, _, n in items])
        return [(self.servos[items[0][0]], dxl.encode_fast_status(blocks, length))]

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

    def _rekey(self, old: int, s: EmulatedServo) -> None:
        """An ID write: the servo answers to its new id (its joint stays the same)."""
        self.servos.pop(old)
        self.servos[s.id] = s
        self.joint_of[s.id] = self.joint_of.pop(old)
