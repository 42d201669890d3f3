"""DYNAMIXEL Protocol 2.0 bus driver: transactions over a ``SerialLink``.

The link's reader thread feeds the stream parser; status packets queue up and a transaction
(one at a time) writes its instruction and waits for the expected replies, in order, within the
reply timeout. Replies that belong to nobody are counted (``stats.stray_packets``); a missing reply
raises ``ReplyTimeoutError``; an ERR code raises ``DeviceStatusError``; the alert bit (a latched
hardware error) is remembered per servo in ``alert_ids``.

The cycle's joint read (``read_present``) is one FAST_SYNC_READ where every servo read supports
it: one aggregate status packet instead of one per servo, so five fewer packet overheads and
reply turnarounds on a six-servo bus. Whether they do is decided at each connection, by the
first reads of a set of servos (``SerialRobot``'s set-up makes them): a fast sync read that
all of them answer turns it on; silence (servos without the fast reads ignore 0x8A, as any
broadcast instruction they do not know) to ``FAST_READ_PROBES`` of them turns it off, and that
set is read with SYNC_READ until the next connection (each silent probe is followed by a
SYNC_READ, so every call returns values). ``fast_read=False`` never tries; ``True`` always uses it.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from twin.hardware.config import ReconnectConfig
from twin.hardware.errors import (
    DeviceStatusError,
    DisconnectedError,
    ProtocolError,
    ReplyLostError,
    ReplyTimeoutError,
    TransportError,
)
from twin.hardware.joint_map import JointMap
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_cycle import PresentLayout, alert_flags
from twin.hardware.protocols.dynamixel_table import (
    BROADCAST_ID,
    HardwareError,
    Instruction,
    OperatingMode,
    Register,
    StatusError,
    XTable,
)
from twin.hardware.protocols.stream import ParserStats
from twin.hardware.transport import LinkedDevice, LinkState, SerialLink

INIT_REPLY_TIMEOUT_S = 0.25  # reply timeout during the connection set-up (on_connect)
#: Unanswered fast sync reads before a set of servos is taken not to have it (more than one, so
#: that a stall of a loaded host at connection time does not cost the fast read for good).
FAST_READ_PROBES = 2
#: Reads of the bytes already waiting once a reply's deadline has passed (``_late_bytes``): a
#: reply that came while a late-waking host did not run is still taken, a babbling device does
#: not hold the wait open.
LATE_LOOKS = 4


@dataclass
class BusStats:
    """transactions: instructions sent; timeouts: replies missing; status_errors: replies with an
    ERR code; stray_packets: replies nobody waited for (late or unexpected); fast_reads:
    FAST_SYNC_READ / FAST_BULK_READ transactions answered; fast_read_refusals: sets of servos
    found not to answer fast sync reads on a connection (their silent probes are not counted as
    timeouts); lost_replies: replies known lost before the timeout (``ReplyLostError``)."""

    transactions: int = 0
    timeouts: int = 0
    status_errors: int = 0
    stray_packets: int = 0
    fast_reads: int = 0
    fast_read_refusals: int = 0
    lost_replies: int = 0


@dataclass(frozen=True)
class PresentValues:
    """Raw register values of one sync read, (n,) integer arrays (views of the reply's bytes),
    in the order of ``ids``."""

    ids: tuple[int, ...]
    current: np.ndarray
    velocity: np.ndarray
    position: np.ndarray
    alert: np.ndarray  # (n,) bool: the servo reports a latched hardware error

    @classmethod
    def _fast(
        cls,
        ids: tuple[int, ...],
        current: np.ndarray,
        velocity: np.ndarray,
        position: np.ndarray,
        alert: np.ndarray,
    ) -> PresentValues:
        """``PresentValues(...)`` for the cycle's hot path: the frozen instance's fields filled
        directly (``tests/test_hw_records.py`` checks that both give equal records)."""
        out = object.__new__(cls)
        out.__dict__.update(
            ids=ids, current=current, velocity=velocity, position=position, alert=alert
        )
        return out


class DynamixelBus(LinkedDevice):
    """The servo bus on one port. ``open()`` connects and runs ``on_connect(bus)``."""

    def __init__(
        self,
        port: str,
        baudrate: int = 1_000_000,
        *,
        name: str = "servo_bus",
        reply_timeout_s: float = 0.02,
        reconnect: ReconnectConfig | None = None,
        on_connect: Callable[[DynamixelBus], None] | None = None,
        fast_read: bool | None = None,
        direct_read: bool = True,
    ) -> None:
        self.reply_timeout_s = reply_timeout_s
        #: None: fast sync read where the servos answer it (module doc); False: never; True: always.
        self.fast_read = fast_read
        #: Per set of servos: True / False once decided, else the silent probes so far.
        self._fast_ok: dict[tuple[int, ...], bool | int] = {}
        #: Every answered instruction's answer taken in full: no late reply can come (``_start``).
        self._settled = False
        #: The last decided read: (ids, ``fast_read`` then, its ``PresentLayout``), or None.
        self._last_read: tuple[tuple[int, ...], bool | None, PresentLayout] | None = None
        self.parser = dxl.DynamixelStreamParser()
        self.stats = BusStats()
        self._user_init = on_connect
        self._cond = threading.Condition()
        self._replies: collections.deque[dxl.StatusPacket] = collections.deque(maxlen=256)
        self._rx_bytes = 0  # bytes received since the current transaction's instruction
        self._damaged = False  # a frame failed its CRC (or decoding) since then
        self._layouts: dict[tuple[tuple[int, ...], bool], PresentLayout] = {}
        self._txn = threading.Lock()
        self._init_thread: int | None = None
        self.alert_ids: set[int] = set()
        self.link = SerialLink(
            name,
            port,
            baudrate,
            self,
            on_connect=self._run_init,
            reconnect=reconnect,
            direct_read=direct_read,  # the servos only answer: the transaction's thread reads
        )

    # ------------------------------------------------------------------ link
    def _run_init(self, link: SerialLink) -> None:
        self._fast_ok.clear()  # decided anew on every connection (a servo may have been swapped)
        self._last_read = None
        self._settled = False
        self._init_thread = threading.get_ident()
        try:
            if self._user_init is not None:
                self._user_init(self)
        finally:
            self._init_thread = None

    def data_received(self, data: bytes) -> None:
        stats = self.parser.stats
        with self._cond:
            dropped = stats.dropped_frames
            for packet in self.parser.feed(data):
                if isinstance(packet, dxl.StatusPacket):
                    self._replies.append(packet)
            self._rx_bytes += len(data)
            if stats.dropped_frames != dropped:
                self._damaged = True
            self._cond.notify_all()

    def _wait_rx(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for reply bytes and parse them (``_cond`` held once, released
        meanwhile). The link reads in this thread (``SerialLink.receive``); a port lost meanwhile
        is seen as ``DisconnectedError`` or, from the link's state, by the caller's loop."""
        if not self.link.direct_read:
            self._cond.wait(timeout_s)
            return
        self._cond.release()
        try:
            data = self.link.receive(timeout_s)
        finally:
            self._cond.acquire()
        if data:
            self.data_received(data)

    def _late_bytes(self, look: int) -> bool:
        """At a reply's deadline (``_cond`` held), look ``look`` (1, 2, ...): read the bytes that
        are already waiting and say whether any came. A host that wakes late (a loaded machine)
        must not take a reply the port already holds for a lost one; a reply still on its way
        is not waited for, and after ``LATE_LOOKS`` looks a device that keeps sending does not
        hold the wait open. A reader-thread link has handed over what it read already: False."""
        if look > LATE_LOOKS or not self.link.direct_read:
            return False
        seen = self._rx_bytes
        self._wait_rx(0.0)
        return self._rx_bytes != seen

    def connection_lost(self, reason: str, exc: BaseException | None) -> None:
        with self._cond:
            self._cond.notify_all()

    @property
    def parser_stats(self) -> ParserStats:
        return self.parser.stats.snapshot()

    # ------------------------------------------------------------------ transactions
    def transact(
        self,
        packet: dxl.InstructionPacket,
        reply_ids: Sequence[int],
        timeout_s: float | None = None,
    ) -> list[dxl.StatusPacket]:
        """Send ``packet`` and return the status packets of ``reply_ids``, in that order."""
        out = self._exchange(packet, reply_ids, timeout_s)
        self._check(out, packet.instruction)
        return out

    def _exchange(
        self,
        packet: dxl.InstructionPacket,
        reply_ids: Sequence[int],
        timeout_s: float | None = None,
        count_timeout: bool = True,
    ) -> list[dxl.StatusPacket]:
        """Send ``packet``; the status packets of ``reply_ids`` in order, not yet checked."""
        return self.exchange_raw(
            dxl.encode_instruction(packet), reply_ids, timeout_s, count_timeout=count_timeout
        )

    def exchange_raw(
        self,
        raw: bytes,
        reply_ids: Sequence[int] = (),
        timeout_s: float | None = None,
        *,
        reply_bytes: int | None = None,
        count_timeout: bool = True,
    ) -> list[dxl.StatusPacket]:
        """Send the instruction's wire bytes ``raw``; the status packets of ``reply_ids`` in
        order, not yet checked. ``reply_bytes``: the answer's size, if known (``_collect``)."""
        with self._txn:
            if (
                not reply_ids and self._init_thread is None
            ):  # the cycle's goal: no reply to wait for
                if raw[4] != BROADCAST_ID:  # a unicast instruction may be answered all the same
                    self._settled = False
                self.link.write(raw)  # (the next replied instruction forgets what came before)
                self.stats.transactions += 1
                return []
            connecting = self._start(raw, bool(reply_ids))
            if not reply_ids:
                return []
            timeout_s = timeout_s or self.reply_timeout_s
            if connecting:  # set-up is not time critical: be patient with a busy machine
                timeout_s = max(timeout_s, INIT_REPLY_TIMEOUT_S)
            return self._collect(reply_ids, timeout_s, count_timeout, reply_bytes)

    def _start(self, raw: bytes, replied: bool = True) -> bool:
        """Begin a transaction (``_txn`` held): forget queued replies (and, before an instruction
        that is ``replied``, read and count any that came late), write ``raw``. Returns whether
        it runs in the connection set-up.

        No reply can be late while the line is ``_settled``: every instruction since the
        connection that has an answer had it taken in full (the cycle's fast read, its exact
        bytes), and the rest were broadcasts, which no servo answers. The look for late bytes
        (a system call) is then left out; after any other answer (a timeout, a lost or damaged
        reply, a set-up transaction) it is made before the next instruction, as always."""
        init = self._init_thread
        connecting = init is not None and init == threading.get_ident()
        settled, self._settled = self._settled, False  # this instruction's answer is pending
        if (
            replied
            and not settled
            and self.link.direct_read
            and self.link.state is not LinkState.CLOSED
        ):
            try:
                late = self.link.receive(0.0)  # a late reply to an earlier instruction
            except DisconnectedError:
                late = b""  # the write below says so
            if late:
                self.data_received(late)
        if self._replies or self._rx_bytes or self._damaged:  # (every byte parsed counts)
            with self._cond:
                self.stats.stray_packets += len(self._replies)
                self._replies.clear()
                self.parser.reset()
                self._rx_bytes, self._damaged = 0, False
        self.link.write(raw, connecting=connecting)
        self.stats.transactions += 1
        return connecting

    def _check(self, out: list[dxl.StatusPacket], instruction: int) -> None:
        """Record each servo's alert bit; ``DeviceStatusError`` for the first ERR code."""
        for p in out:
            (self.alert_ids.add if p.alert else self.alert_ids.discard)(p.id)
            if p.error_code is not StatusError.NONE:
                self.stats.status_errors += 1
                raise DeviceStatusError(
                    f"servo {p.id} answered instruction 0x{instruction:02X} with error "
                    f"{p.error_code.name} (ERR 0x{p.error:02X})",
                    device=f"dxl:{p.id}",
                    code=int(p.error_code),
                )

    def _collect(
        self,
        reply_ids: Sequence[int],
        timeout_s: float,
        count_timeout: bool = True,
        reply_bytes: int | None = None,
    ) -> list[dxl.StatusPacket]:
        """Wait for the replies of ``reply_ids``, in order. A reply known lost ends the wait at
        once (``ReplyLostError``), not at the timeout: a frame that failed its CRC, a later
        servo's reply before this one's, or ``reply_bytes`` bytes received without it."""
        out = []
        deadline = time.monotonic() + timeout_s
        later = tuple(reply_ids)
        looks = 0  # past the deadline
        with self._cond:
            for k, pid in enumerate(reply_ids):
                while True:
                    if self._replies:
                        p = self._replies.popleft()
                        if p.id == pid:
                            out.append(p)
                            break
                        self.stats.stray_packets += 1
                        if p.id in later[k + 1 :]:
                            self._lost(pid, f"servo {p.id} answered before it")
                        continue
                    if self._damaged:
                        self._lost(pid, "a damaged frame (CRC error) arrived in its place")
                    if reply_bytes is not None and self._rx_bytes >= reply_bytes:
                        self._lost(pid, f"{self._rx_bytes} bytes arrived, not its packet")
                    if self.link.state in (LinkState.LOST, LinkState.CLOSED):
                        raise DisconnectedError(
                            f"{self.link.name}: port lost while waiting for servo {pid}"
                        )
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 and not self._late_bytes(looks := looks + 1):
                        self.stats.timeouts += count_timeout
                        raise ReplyTimeoutError(
                            f"{self.link.name}: no status packet from servo {pid} within "
                            f"{timeout_s * 1e3:.1f} ms"
                        )
                    self._wait_rx(remaining)
        return out

    def _cycle_exchange(
        self,
        raw: bytes,
        layout: PresentLayout,
        count_timeout: bool,
        joints: JointMap | None = None,
    ) -> tuple[tuple[np.ndarray, bytes], bool]:
        """The cycle's fast read on a ``direct_read`` link: write ``raw``, read the answer's
        bytes as they come and, when they are exactly the expected packet, decode them at once
        (``PresentLayout.decode_wire``, or with ``joints`` and the compiled codec
        ``decode_joints``: no stream parser, no reply queue). Any other answer goes to the
        stream parser and ``_collect``, in the same transaction, with the same rules (a damaged,
        short or late reply, the timeout). Returns ``((records or joint rows, err), in_joints)``."""
        with self._txn:
            connecting = self._start(raw)
            timeout_s = self.reply_timeout_s
            if connecting:
                timeout_s = max(timeout_s, INIT_REPLY_TIMEOUT_S)
            deadline = time.monotonic() + timeout_s
            want, receive = layout.reply_bytes, self.link.receive
            wire = receive(timeout_s)
            while wire and len(wire) < want:
                # past the deadline, one look at what came while this thread did not run
                more = receive(max(deadline - time.monotonic(), 0.0))
                if not more:
                    break
                wire += more
            if len(wire) == want:
                in_joints = joints is not None and layout.compiled
                decoded = (
                    layout.decode_joints(wire, joints.present_terms)
                    if in_joints
                    else layout.decode_wire(wire)
                )
                if decoded is not None:
                    self.parser.stats.frames += 1
                    self._settled = not connecting  # its answer taken in full (``_start``)
                    return decoded, in_joints
            if wire:
                self.data_received(wire)
            remaining = max(deadline - time.monotonic(), 1e-6)
            replies = self._collect(layout.reply_ids, remaining, count_timeout, layout.reply_bytes)
            return layout.decode(replies), False

    def _lost(self, pid: int, why: str) -> None:
        """Count and raise ``ReplyLostError`` for servo ``pid``'s reply."""
        self.stats.lost_replies += 1
        raise ReplyLostError(f"{self.link.name}: status packet from servo {pid} lost: {why}")

    # ------------------------------------------------------------------ instructions
    def ping(self, pid: int, timeout_s: float | None = None) -> tuple[int, int]:
        """``(model_number, firmware_version)`` of servo ``pid``."""
        (reply,) = self.transact(dxl.ping(pid), [pid], timeout_s)
        return dxl.parse_ping_status(reply)

    def scan(
        self, ids: Sequence[int], timeout_s: float | None = None
    ) -> dict[int, tuple[int, int]]:
        """Ping each id; the ones that answer, with ``(model_number, firmware)``."""
        found = {}
        for pid in ids:
            try:
                found[pid] = self.ping(pid, timeout_s)
            except ReplyTimeoutError:
                continue
        return found

    def read(self, pid: int, reg: Register) -> int:
        return dxl.decode_value(self.read_block(pid, reg.address, reg.size), reg.signed)

    def read_block(self, pid: int, address: int, length: int) -> bytes:
        """``length`` bytes at ``address`` of servo ``pid`` (one READ; a reply of another length
        is a ``TransportError``)."""
        (reply,) = self.transact(dxl.read(pid, address, length), [pid])
        return _exact(reply, length)

    def write(self, pid: int, reg: Register, value: int) -> None:
        """WRITE one register and wait for the servo's status (status return level 2)."""
        self.transact(dxl.write(pid, reg.address, dxl.encode_register(reg, value)), [pid])

    def sync_read(self, address: int, length: int, ids: Sequence[int]) -> list[bytes]:
        """``length`` bytes at ``address`` from each servo, in the order of ``ids``."""
        replies = self.transact(dxl.sync_read(address, length, ids), ids)
        return [_exact(r, length) for r in replies]

    def sync_read_each(
        self, address: int, length: int, ids: Sequence[int]
    ) -> dict[int, dxl.StatusPacket]:
        """One SYNC_READ; the intact replies of ``length`` data bytes by servo id, however many
        were lost (checked as ``transact`` checks). The wait ends when the last servo's reply or
        every byte of the answer is in, or at the reply timeout; nothing is raised for a lost
        reply."""
        ids = tuple(ids)
        with self._txn:
            self._start(dxl.encode_instruction(dxl.sync_read(address, length, ids)))
            got: dict[int, dxl.StatusPacket] = {}
            total = len(ids) * (dxl.MIN_PACKET_LENGTH + 1 + length)
            deadline = time.monotonic() + self.reply_timeout_s
            looks = 0  # past the deadline
            with self._cond:
                while True:
                    while self._replies:
                        p = self._replies.popleft()
                        if p.id in ids and p.id not in got and len(p.params) == length:
                            got[p.id] = p
                        else:
                            self.stats.stray_packets += 1
                    if ids[-1] in got or len(got) == len(ids) or self._rx_bytes >= total:
                        break
                    if self.link.state in (LinkState.LOST, LinkState.CLOSED):
                        raise DisconnectedError(f"{self.link.name}: port lost during a sync read")
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 and not self._late_bytes(looks := looks + 1):
                        break
                    self._wait_rx(remaining)
        self._check(list(got.values()), Instruction.SYNC_READ)
        return got

    def fast_sync_read(self, address: int, length: int, ids: Sequence[int]) -> list[bytes]:
        """As ``sync_read``, in one FAST_SYNC_READ (the servos must support it)."""
        blocks = self._fast(dxl.fast_sync_read(address, length, ids), ids, [length] * len(ids))
        return [b.params for b in blocks]

    def fast_bulk_read(self, items: Sequence[tuple[int, int, int]]) -> list[bytes]:
        """As ``bulk_read``, in one FAST_BULK_READ (the servos must support it)."""
        ids, lengths = [i for i, _, _ in items], [n for _, _, n in items]
        return [b.params for b in self._fast(dxl.fast_bulk_read(items), ids, lengths)]

    def _fast(
        self,
        packet: dxl.InstructionPacket,
        ids: Sequence[int],
        lengths: Sequence[int],
        count_timeout: bool = True,
    ) -> list[dxl.StatusPacket]:
        """One fast read: the aggregate status split into each servo's block, checked."""
        (reply,) = self._exchange(packet, [BROADCAST_ID], count_timeout=count_timeout)
        try:
            blocks = dxl.decode_fast_status(reply, ids, lengths)
        except ProtocolError as e:
            raise TransportError(f"{self.link.name}: bad fast-read status: {e}") from e
        self.stats.fast_reads += 1
        self._check(blocks, packet.instruction)
        return blocks

    def sync_write(self, address: int, length: int, data: Mapping[int, bytes]) -> None:
        self.transact(dxl.sync_write(address, length, data), [])

    def bulk_read(self, items: Sequence[tuple[int, int, int]]) -> list[bytes]:
        replies = self.transact(dxl.bulk_read(items), [i for i, _, _ in items])
        return [_exact(r, n) for r, (_, _, n) in zip(replies, items)]

    def sync_read_register(self, reg: Register, ids: Sequence[int]) -> dict[int, int]:
        values = self.sync_read(reg.address, reg.size, ids)
        return {pid: dxl.decode_value(v, reg.signed) for pid, v in zip(ids, values)}

    def sync_write_register(self, reg: Register, values: Mapping[int, int]) -> None:
        data = {pid: dxl.encode_register(reg, int(v)) for pid, v in values.items()}
        self.sync_write(reg.address, reg.size, data)

    def reboot(self, pid: int) -> None:
        self.transact(dxl.reboot(pid), [pid])

    # ------------------------------------------------------------------ helpers
    def uses_fast_read(self, ids: Sequence[int]) -> bool | None:
        """Whether ``read_present(ids)`` is a FAST_SYNC_READ (None: not decided yet on this
        connection)."""
        if self.fast_read is not None:
            return self.fast_read
        decided = self._fast_ok.get(tuple(ids))
        return decided if isinstance(decided, bool) else None

    def present_layout(self, ids: Sequence[int], fast: bool) -> PresentLayout:
        """The cycle read's packets for ``ids`` (laid out once per set of servos and mode)."""
        key = (tuple(ids), fast)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts.setdefault(key, PresentLayout(*key))
        return layout

    def read_present(self, ids: Sequence[int], ahead: bytes = b"") -> PresentValues:
        """Present Current, Velocity and Position (10 bytes per servo) in one FAST_SYNC_READ or
        SYNC_READ (module doc): ready instruction bytes, the answer decoded in one call.
        ``ahead``: the wire bytes of an instruction without reply (the cycle's goal SYNC_WRITE),
        written in the same ``write`` just before the read's (one system call, as on the wire)."""
        return self._read(tuple(ids), ahead, None)

    def read_joints(self, ids: Sequence[int], joints: JointMap, ahead: bytes = b"") -> JointValues:
        """``read_present`` in joint units through ``joints`` (``JointMap.from_present``): the
        cycle's read. A fast read's intact answer is checked, decoded and converted in one
        compiled call where numba is (``PresentLayout.decode_joints``); every other answer as
        ``read_present`` takes it, then converted."""
        last = self._last_read  # the cycle's read: the servos (the same tuple) and mode of the
        if last is not None and last[0] is ids and last[1] is self.fast_read:  # last one
            return self._read_present(last[2], True, ahead, joints)
        return self._read(tuple(ids), ahead, joints)

    def _read(self, ids: tuple[int, ...], ahead: bytes, joints: JointMap | None):
        fast = self.uses_fast_read(ids)
        if fast is not None:  # decided (until the next connection, or ``fast_read`` is set)
            self._last_read = (ids, self.fast_read, self.present_layout(ids, fast))
        else:  # the first read of these servos on this connection: ask
            if ahead:
                self.exchange_raw(ahead)
                ahead = b""
            try:
                values = self._read_present(self.present_layout(ids, True), False, b"", joints)
            except ReplyLostError:
                pass  # they answered, damaged: undecided; this cycle reads with SYNC_READ
            except ReplyTimeoutError:
                silent = self._fast_ok.get(ids, 0) + 1
                self._fast_ok[ids] = False if silent >= FAST_READ_PROBES else silent
                self.stats.fast_read_refusals += silent >= FAST_READ_PROBES
            else:
                self._fast_ok[ids] = True
                return values
        return self._read_present(self.present_layout(ids, bool(fast)), True, ahead, joints)

    def _read_present(
        self,
        layout: PresentLayout,
        count_timeout: bool = True,
        ahead: bytes = b"",
        joints: JointMap | None = None,
    ) -> PresentValues | JointValues:
        self.stats.transactions += bool(ahead)  # two instructions in one write
        raw = ahead + layout.request if ahead else layout.request
        in_joints = False
        try:
            if layout.fast and self.link.direct_read:
                (records, err), in_joints = self._cycle_exchange(raw, layout, count_timeout, joints)
            else:
                records, err = layout.decode(
                    self.exchange_raw(
                        raw,
                        layout.reply_ids,
                        reply_bytes=layout.reply_bytes,
                        count_timeout=count_timeout,
                    )
                )
        except ProtocolError as e:
            raise TransportError(f"{self.link.name}: bad present-values reply: {e}") from e
        if err != layout.no_errors or self.alert_ids:  # rare: the per-servo bookkeeping
            self._check(
                [dxl.StatusPacket(pid, e) for pid, e in zip(layout.ids, err)],
                layout.instruction.instruction,
            )
            alert = alert_flags(err)
        else:
            alert = _NO_ALERTS.get(len(err))
            if alert is None:
                alert = _NO_ALERTS.setdefault(len(err), _no_alerts(len(err)))
        if layout.fast:
            self.stats.fast_reads += 1
        if joints is not None:
            if not in_joints:
                records = joints.from_present(
                    records["position"], records["velocity"], records["current"]
                )
            return tuple.__new__(JointValues, (records, alert))  # (no Python-level __new__)
        return PresentValues._fast(
            layout.ids, records["current"], records["velocity"], records["position"], alert
        )

    def set_torque(self, ids: Sequence[int], enabled: bool) -> None:
        self.sync_write_register(XTable.TORQUE_ENABLE, {pid: int(enabled) for pid in ids})

    def set_operating_mode(self, ids: Sequence[int], mode: OperatingMode) -> None:
        """Operating Mode is in EEPROM: torque must be off (else the servo answers ACCESS)."""
        for pid in ids:
            self.write(pid, XTable.OPERATING_MODE, int(mode))

    def hardware_errors(self, ids: Sequence[int]) -> dict[int, HardwareError]:
        """Hardware Error Status of each servo (only the non-zero ones)."""
        values = self.sync_read_register(XTable.HARDWARE_ERROR_STATUS, ids)
        return {pid: HardwareError(v) for pid, v in values.items() if v}


class JointValues(NamedTuple):
    """One cycle's read in joint units (``read_joints``): ``rows`` (3, n) read-only float64
    q rad, qd rad/s, tau N m; ``alert`` (n,) bool, a servo reporting a latched hardware error."""

    rows: np.ndarray
    alert: np.ndarray


_NO_ALERTS: dict[int, np.ndarray] = {}  # read-only all-False alert arrays, by servo count


def alerts_clear(alert: np.ndarray) -> bool:
    """Whether no servo of a reading's ``alert`` (n,) bool is set (the shared all-False array of
    an answer without errors is known at once)."""
    return alert is _NO_ALERTS.get(alert.size) or not alert.any()


def _no_alerts(n: int) -> np.ndarray:
    out = np.zeros(n, bool)
    out.flags.writeable = False
    return out


def _exact(reply: dxl.StatusPacket, n: int) -> bytes:
    if len(reply.params) != n:
        raise TransportError(
            f"servo {reply.id} returned {len(reply.params)} data bytes, expected {n}"
        )
    return reply.params
