"""``ArmBus``: the six servos of the arm on a ``DynamixelBus``, in joint units.

Connection-time set-up (``initialise``), one sync read of present values per cycle
(``read_state``), and the per-cycle goals of the two control modes:

- servo-side (``servo``, Operating Mode 5, current-based position): ``kp``/``kd`` become Position
  P/D gains through ``JointMap`` (rewritten only when they change), and ``tau_ff + kd qd_des`` is
  folded into the goal position: ``q_goal = q_des + (tau_ff + kd qd_des) / kp_servo``, so the servo
  applies ``kp (q_des - q) + tau_ff + kd qd_des - kd qd``, the robot law. Goal Current (the mode's
  current limit) is the joint's effort limit.
- host-side (``current``): the law is computed by the caller each cycle and sent through the same
  Operating Mode 5 against fixed servo gains (the hold gains): ``q_goal = q + (u + kd_h qd) /
  kp_h`` at the cycle's reading ``q``, ``qd``, so the servo applies ``u`` there and
  ``u - kp_h (q(t) - q) - kd_h (qd(t) - qd)`` until the next goal (``torque_targets``). Not
  Operating Mode 0: a host that stops sending leaves a mode-0 servo on its last Goal Current, and
  its Bus Watchdog's stop there is a free-running joint; in mode 5 the stop holds the position
  (``twin.hardware.bus_watchdog``; ``docs/protocols/dynamixel.md``, "Bus Watchdog").

Line noise: every set-up transaction is tried ``bus.attempts`` times (a lost reply is retried); a
cycle's read that loses a reply (known at once: ``ReplyLostError``) falls back to one SYNC_READ
that keeps every intact reply, then one READ per servo still missing (``CYCLE_READ_TRIES`` each),
so one damaged reply costs a round trip or two, not the reading. Every reading passes the
plausibility checks (``checks``: ``drivers/servo_checks.py``) or is refused as a failed read.
``position_hold`` leaves the servos holding servo-side (Operating Mode 5, torque on), everything
it wrote (torque, mode, gains, Goal Current, Goal Position) read back and, where it disagrees,
rewritten with acknowledged writes (``park`` and the stale fault use it; ``docs/faults/serial.md``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
from twin.hardware.bus_watchdog import BusWatchdog, watchdog_units
from twin.hardware.clock import MonotonicClock
from twin.hardware.config import HardwareConfig
from twin.hardware.drivers.dynamixel_bus import DynamixelBus
from twin.hardware.drivers.servo_checks import ServoChecks
from twin.hardware.errors import (
    ConfigError,
    DeviceStatusError,
    DisconnectedError,
    InvalidArgumentError,
    ProtocolError,
    TransportError,
)
from twin.hardware.protocols import _compiled
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_cycle import GoalWriter
from twin.hardware.protocols.dynamixel_table import (
    GAIN_BLOCK_ADDRESS,
    GAIN_BLOCK_LENGTH,
    PRESENT_BLOCK_ADDRESS,
    PRESENT_BLOCK_LENGTH,
    HardwareError,
    OperatingMode,
    StatusError,
    Units,
    XTable,
)

from twin.robot import JointCommand, joint_torque

MODE_REGISTER = {
    "servo": OperatingMode.CURRENT_BASED_POSITION,
    "current": OperatingMode.CURRENT_BASED_POSITION,  # the law's torque as a goal (module doc)
}
_SETUP_BLOCK = (
    XTable.RETURN_DELAY_TIME.address,
    XTable.OPERATING_MODE.end - XTable.RETURN_DELAY_TIME.address,
)


_MODE_READ = (XTable.OPERATING_MODE.address, XTable.OPERATING_MODE.size)
#: The other blocks a hold writes, read back to verify it: the Position D, I, P gains (80..85)
#: and Goal Current .. Goal Position (102..119). Each read's length differs from every other
#: verification read's (2, 1, 6, 18 bytes), so a late reply to one is refused by the next.
_HOLD_BLOCKS = (
    (GAIN_BLOCK_ADDRESS, GAIN_BLOCK_LENGTH),
    (XTable.GOAL_CURRENT.address, XTable.GOAL_POSITION.end - XTable.GOAL_CURRENT.address),
)
#: Current Limit .. Velocity Limit (38..47), the limits the plausibility checks take, and one
#: byte more: 11 bytes, so that a late reply to a read of the 10-byte present block is refused
#: for its length, never taken for the limits (which would rewrite them, torque off).
_LIMIT_BLOCK = (
    XTable.CURRENT_LIMIT.address,
    XTable.VELOCITY_LIMIT.end + 1 - XTable.CURRENT_LIMIT.address,
)

T = TypeVar("T")

#: Tries of each servo's READ when a cycle's sync read lost a reply: at 0.2 % corrupted bytes a
#: cycle then fails about once in 500 (three in a row: about 1e-8), and a silent servo's cycle
#: lasts three reply timeouts.
CYCLE_READ_TRIES = 2
SAFE_MODE = OperatingMode.CURRENT_BASED_POSITION  # the mode every park and safe hold leaves
#: The data bytes of a PING's status packet: model number (2 bytes), firmware version (1)
#: (``docs/protocols/dynamixel.md``); a reply of another length answers another request.
PING_STATUS_LENGTH = 3
#: A flush after a reply that was not the PING's reads until the line is quiet this long (s),
#: for at most ``FLUSH_MAX_S`` (s).
FLUSH_QUIET_S = 0.02
FLUSH_MAX_S = 0.5
#: What a bus transaction raises when the servo or the line failed (not a programming error).
BUS_FAILURES = (TransportError, DeviceStatusError, ProtocolError)


def retried(fn: Callable[[], T], attempts: int) -> T:
    """``fn()``, tried up to ``attempts`` times while the failure is a lost or garbled reply
    (``ReplyTimeoutError``, a reply of the wrong length or shape, e.g. a late reply to an earlier
    instruction taken for this one, or the servo's CRC status for a damaged instruction). A lost
    port or any other status error is raised at once."""
    for k in range(attempts):
        try:
            return fn()
        except DisconnectedError:
            raise
        except BUS_FAILURES as e:
            if isinstance(e, DeviceStatusError) and e.code != StatusError.CRC:
                raise
            if k == attempts - 1:
                raise
    raise ValueError(f"attempts must be >= 1, got {attempts}")


@dataclass(frozen=True)
class ServoState:
    """A servo's Torque Enable and Operating Mode as read back (``None``: it did not answer), and
    ``wrong``: each other register the hold wrote that read back otherwise, or not at all (e.g.
    ``goal_position reads 2290, wrote 2282``)."""

    torque: int | None
    mode: int | None
    wrong: tuple[str, ...] = ()

    @property
    def safe(self) -> bool:
        """Holding servo-side as written: torque on, current-based position mode, every goal and
        gain read back as written."""
        return self.torque == 1 and self.mode == SAFE_MODE and not self.wrong

    @property
    def silent(self) -> bool:
        """Neither Torque Enable nor Operating Mode answered."""
        return self.torque is None and self.mode is None

    def __str__(self) -> str:
        mode = "no reply" if self.mode is None else _mode_name(self.mode)
        torque = "no reply" if self.torque is None else ("on" if self.torque else "off")
        return f"torque {torque}, mode {mode}" + "".join(f", {w}" for w in self.wrong)


def _present_row(reply: dxl.StatusPacket) -> tuple[int, int, int, bool]:
    """Present Position, Velocity, Current (raw) and the alert bit of one servo's reply."""
    return (
        *(
            dxl.decode_register(reg, reply.params, offset=PRESENT_BLOCK_ADDRESS)
            for reg in (XTable.PRESENT_POSITION, XTable.PRESENT_VELOCITY, XTable.PRESENT_CURRENT)
        ),
        bool(reply.alert),
    )


def _mode_name(mode: int) -> str:
    try:
        return f"{OperatingMode(mode).name} ({mode})"
    except ValueError:
        return str(mode)


@dataclass(frozen=True)
class JointReading:
    """One sync read in joint units: q (n,) rad, qd (n,) rad/s, tau (n,) N m, alert (n,) bool."""

    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    alert: np.ndarray

    @classmethod
    def _fast(
        cls, q: np.ndarray, qd: np.ndarray, tau: np.ndarray, alert: np.ndarray
    ) -> JointReading:
        """``JointReading(q, qd, tau, alert)`` for the cycle's hot path: the frozen instance's
        fields filled directly (its ``__init__`` costs more than the rest of the record's work;
        ``tests/test_hw_records.py`` checks that both give equal records, field for field)."""
        out = object.__new__(cls)
        out.__dict__.update(q=q, qd=qd, tau=tau, alert=alert)
        return out


@dataclass(frozen=True)
class ServoTargets:
    """Register values of one servo-side command: goal ticks, Position P and D gains, (n,) each.
    ``clamped``: servo id -> the goal (ticks) a hold asked for beyond the servo's multi-turn range,
    for the servos whose goal was clamped to the range's edge (empty for a command)."""

    goal_ticks: np.ndarray
    p_gain: np.ndarray
    d_gain: np.ndarray
    clamped: dict[int, float] = field(default_factory=dict)

    @classmethod
    def _fast(
        cls, goal_ticks: np.ndarray, p_gain: np.ndarray, d_gain: np.ndarray, clamped: dict
    ) -> ServoTargets:
        """``ServoTargets(goal_ticks, p_gain, d_gain, clamped)`` filled directly (as
        ``JointReading._fast``)."""
        out = object.__new__(cls)
        out.__dict__.update(goal_ticks=goal_ticks, p_gain=p_gain, d_gain=d_gain, clamped=clamped)
        return out

    def clamp_text(self) -> str:
        """Why each clamped servo does not hold where it was asked, or ``""``."""
        lim = Units.EXTENDED_POSITION_LIMIT
        return ", ".join(
            f"servo {pid}: hold goal {wanted:.0f} ticks is beyond the servo range +-{lim}, "
            "held at the range's edge"
            for pid, wanted in self.clamped.items()
        )


_NO_CLAMP: dict[int, float] = {}  # a command's targets: nothing clamped (never written to)


class ArmBus:
    """The arm's servos on ``bus`` (module doc)."""

    def __init__(
        self,
        bus: DynamixelBus,
        config: HardwareConfig,
        effort_limits: np.ndarray,
        *,
        position_limits: tuple[np.ndarray, np.ndarray] | None = None,
        clock=None,
    ) -> None:
        """``position_limits``: (lower, upper) (n,) rad, the URDF's (default: none);
        ``clock``: host time of the plausibility checks' jump bound (default: real time)."""
        self.bus, self.config = bus, config
        self.map = config.joint_map()
        self.ids = list(self.map.ids)
        self._ids_t = tuple(self.ids)  # the same tuple every cycle (the bus's read memo)
        self.mode = config.control_mode
        self.effort = np.asarray(effort_limits, float)
        self.current_limit = np.array([j.current_limit for j in config.joints])
        n = len(self.ids)
        lower, upper = position_limits or (np.full(n, -np.inf), np.full(n, np.inf))
        self._now_us = (clock or MonotonicClock()).now_us
        #: Plausibility of every reading (``servo_checks``); the Velocity Limit registers are
        #: read at connection (the X series' default until then).
        self.checks = ServoChecks(
            self.map,
            lower,
            upper,
            np.full(n, XTable.VELOCITY_LIMIT.default),
            self.current_limit,
            tuple(j.name for j in config.joints),
        )
        # Goal Current (Operating Mode 5): the torque limit, the effort limit where the servo allows.
        self.goal_current = np.minimum(
            np.rint(self.effort / self.map.torque_unit), self.current_limit
        ).astype(int)
        self._gains: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        self._sent_gains: tuple[np.ndarray, np.ndarray] | None = None  # the arrays last sent
        self._gain_cache: tuple | None = None
        kernels = _compiled.kernels()
        self._ticks_kernel = None if kernels is None else kernels.command_ticks
        self._goal_writer = GoalWriter(XTable.GOAL_POSITION, self.ids)
        period = config.control_period_s  # armed where the host closes the loop
        units = watchdog_units(period) if self.mode == "current" else 0
        self.watchdog = BusWatchdog(bus, self.ids, units, period, config.bus.attempts)
        #: (5, n) staging rows of ``torque_targets`` (q, qd, u, hold kp, hold kd)
        self._torque_rows = np.zeros((5, len(self.ids)))
        self._torque_rows[3:] = config.hold_kp, config.hold_kd
        if self.mode == "current":
            self._check_torque_gains()

    # ------------------------------------------------------------------ set-up
    def initialise(
        self, hold: Callable[[JointReading], JointCommand]
    ) -> tuple[JointReading, dict[int, HardwareError]]:
        """Identify the servos and bring them to the configured mode, holding where they are.

        Each servo is identified by PING first (``_identify``: a late reply to another request is
        flushed, not taken for the model number).
        EEPROM settings (return delay, operating mode, current limit) are written only where they
        differ (with torque off on those servos only), so a reconnection does not drop the arm.
        ``hold(reading)`` is the command to hold with. Returns the reading and the servos' latched
        hardware errors (their torque stays off).
        """
        bus, ids, tries = self.bus, self.ids, self.config.bus.attempts
        for j, pid in enumerate(ids):
            self._identify(j, pid)
        bus.sync_write_register(XTable.STATUS_RETURN_LEVEL, dict.fromkeys(ids, 2))
        self.watchdog.clear()  # a trip left by an earlier run would refuse the goals below
        errors = retried(lambda: bus.hardware_errors(ids), tries)
        setup = retried(lambda: bus.sync_read(*_SETUP_BLOCK, ids), tries)
        limit_block = retried(lambda: bus.sync_read(*_LIMIT_BLOCK, ids), tries)
        limits = {
            pid: dxl.decode_register(XTable.CURRENT_LIMIT, b, offset=_LIMIT_BLOCK[0])
            for pid, b in zip(ids, limit_block)
        }
        velocity_limits = [
            dxl.decode_register(XTable.VELOCITY_LIMIT, b, offset=_LIMIT_BLOCK[0])
            for b in limit_block
        ]
        delay = self.config.bus.return_delay_time_us // 2
        mode = int(MODE_REGISTER[self.mode])
        for j, pid in enumerate(ids):
            want = {
                XTable.RETURN_DELAY_TIME: delay,
                XTable.OPERATING_MODE: mode,
                XTable.CURRENT_LIMIT: int(self.current_limit[j]),
            }
            have = {
                XTable.RETURN_DELAY_TIME: setup[j][0],
                XTable.OPERATING_MODE: setup[j][2],
                XTable.CURRENT_LIMIT: limits[pid],
            }
            changes = {reg: v for reg, v in want.items() if have[reg] != v}
            if changes:
                self._write(pid, XTable.TORQUE_ENABLE, 0)
                for reg, value in changes.items():
                    self._write(pid, reg, value)
        self.checks.set_limits(
            [v if v > 0 else XTable.VELOCITY_LIMIT.default for v in velocity_limits],
            self.current_limit,
        )
        self.checks.reset()  # no jump is measured across a connection
        reading = retried(self.read_state, tries)
        self._gains = self._sent_gains = None
        command = hold(reading)
        if self.mode == "servo":
            targets = self.servo_targets(command, hold=True)
        else:
            u = joint_torque(command, reading.q, reading.qd, self.effort)
            targets = self.torque_targets(u, reading.q, reading.qd, hold=True)
        self.send_servo(targets)
        bus.sync_write_register(XTable.GOAL_CURRENT, dict(zip(ids, self.goal_current.tolist())))
        healthy = [pid for pid in ids if pid not in errors]
        if healthy:
            bus.set_torque(healthy, True)
        self.watchdog.start()  # armed at the first cycle
        return reading, errors

    def _identify(self, j: int, pid: int) -> None:
        """PING servo ``pid`` (joint ``j``) until its answer gives the configured model number.

        A status packet does not say which instruction it answers, so a late reply to an earlier
        request (a loaded servo or host, or a previous session's read still on the line) can come
        in the PING's place. Up to ``bus.attempts`` PINGs: a lost or damaged reply (as
        ``retried``), one with other than the PING's three data bytes, or a model number the PING
        before did not also give is flushed (``_flush``) and the PING sent again. A model number
        two answers in a row agree on (a late reply does not repeat), or the last answer's, is
        the mismatch: ``DeviceStatusError`` naming the servo, its model and the configured one.
        """
        want = self.config.joints[j].model_number
        tries, seen = self.config.bus.attempts, None
        for k in range(tries):
            last = k == tries - 1
            try:
                (reply,) = self.bus.transact(dxl.ping(pid), [pid])
            except DisconnectedError:
                raise
            except BUS_FAILURES as e:
                if last or (isinstance(e, DeviceStatusError) and e.code != StatusError.CRC):
                    raise
                seen = None
                self._flush()
                continue
            if len(reply.params) != PING_STATUS_LENGTH:  # another request's reply
                if last:
                    raise ProtocolError(
                        f"servo {pid}: the answer to PING has {len(reply.params)} data bytes, "
                        f"expected {PING_STATUS_LENGTH} (model number, firmware version)"
                    )
                seen = None
                self._flush()
                continue
            model, _fw = dxl.parse_ping_status(reply)
            if model == want:
                return
            if model == seen or last:
                raise DeviceStatusError(
                    f"servo {pid} ({self.config.joints[j].name}) is model {model}, the config says {want}",
                    device=f"dxl:{pid}",
                )
            seen = model
            self._flush()

    def _flush(self) -> None:
        """Drop what the servos are still sending (late replies): read until the line has been
        quiet for ``FLUSH_QUIET_S``, for at most ``FLUSH_MAX_S``; the next transaction counts
        what was read as stray packets (``BusStats.stray_packets``)."""
        link = self.bus.link
        if not link.direct_read:  # the reader thread queues them; the next transaction drops them
            return
        deadline = time.monotonic() + FLUSH_MAX_S
        while (left := deadline - time.monotonic()) > 0:
            data = link.receive(min(FLUSH_QUIET_S, left))
            if not data:
                return
            self.bus.data_received(data)

    # ------------------------------------------------------------------ cycle
    def read_state(self, goal: bytes = b"") -> JointReading:
        """One sync read in joint units (read-only arrays, shared with every ``RobotState``;
        ``DynamixelBus.read_joints``: decoded, checked and converted in one compiled call where
        numba is). A lost or garbled reply falls back to one SYNC_READ and one READ per servo
        still missing, ``CYCLE_READ_TRIES`` each (module doc); ``ReplyTimeoutError`` names the
        servo that still did not answer. ``goal``: a goal SYNC_WRITE's bytes (``servo_goal``)
        that go out in the same write as the read's instruction, just ahead of it (a
        free-running or late cycle). ``ImplausibleReadingError`` (a ``ProtocolError``) for a
        reading with an impossible value (``checks``: ``servo_checks``)."""
        t0 = self._now_us()
        try:
            rows, alert = self.bus.read_joints(self._ids_t, self.map, goal)
        except DisconnectedError:
            raise
        except TransportError:
            raw = self._read_fallback()
            rows = self.map.from_present(*raw[:3])  # read-only rows of one array
            alert = np.asarray(raw[3], bool)
            alert.flags.writeable = False
        self.checks.check(rows, t0, self._now_us())
        q, qd, tau = rows
        return JointReading._fast(q, qd, tau, alert)

    def _read_fallback(self) -> tuple[np.ndarray, ...]:
        """After a lost reply: one SYNC_READ keeps every intact reply, then one READ per servo
        still missing (``CYCLE_READ_TRIES`` each). Raw (position, velocity, current, alert)."""
        try:
            got = self.bus.sync_read_each(PRESENT_BLOCK_ADDRESS, PRESENT_BLOCK_LENGTH, self.ids)
        except DisconnectedError:
            raise
        except TransportError:
            got = {}
        rows = [
            _present_row(got[pid])
            if pid in got
            else retried(lambda pid=pid: self._present(pid), CYCLE_READ_TRIES)
            for pid in self.ids
        ]
        return tuple(np.array(col) for col in zip(*rows))

    def _present(self, pid: int) -> tuple[int, int, int, bool]:
        """Present Position, Velocity, Current (raw) and the alert bit of one servo (one READ)."""
        (reply,) = self.bus.transact(
            dxl.read(pid, PRESENT_BLOCK_ADDRESS, PRESENT_BLOCK_LENGTH), [pid]
        )
        if len(reply.params) != PRESENT_BLOCK_LENGTH:
            raise TransportError(
                f"servo {pid} returned {len(reply.params)} data bytes, expected {PRESENT_BLOCK_LENGTH}"
            )
        return _present_row(reply)

    def servo_targets(self, cmd: JointCommand, *, hold: bool = False) -> ServoTargets:
        """Register values for ``cmd`` in servo-side mode; ``InvalidArgumentError`` if a gain is out
        of the servo's range, a joint with ``kp = 0`` asks for feed-forward, or (a command, not a
        ``hold``) a goal is beyond the servo's range. A ``hold`` (the arm's own reading: a park,
        a safe hold) is never refused for its goal: it is clamped to the range (``clamped``)."""
        m = self.map
        rows = cmd.rows  # a validated command: its (5, n) rows in one array
        if rows is None or rows.shape != (5, len(self.ids)):
            rows = np.array((cmd.q_des, cmd.qd_des, cmd.tau_ff, cmd.kp, cmd.kd), float)
        key = rows[3:].tobytes()  # kp, kd
        cache = self._gain_cache
        if cache is not None and cache[0] == key:
            p, d, kp_div, kp_list, no_p = cache[1]  # commands rarely change their gains
        else:
            p, d = m.gains_from_kp_kd(rows[3], rows[4])
            kp_servo = m.kp_kd_from_gains(p, np.zeros_like(p))[0]
            no_p = p == 0
            kp_div = np.where(no_p, np.inf, kp_servo)  # a joint without P gets no feed-forward
            no_p = no_p if no_p.any() else None
            kp_list = kp_div.tolist()
            self._gain_cache = (key, (p, d, kp_div, kp_list, no_p))
        if no_p is None and not hold:  # the cycle's command: compiled, or on Python floats
            kernel = self._ticks_kernel  # (rows: a C-ordered copy, as every array passed to it)
            if kernel is not None:
                ticks = np.empty(len(self.ids), np.int64)
                if kernel(rows, kp_div, m.tick_terms, ticks) == 0:
                    return ServoTargets._fast(ticks, p, d, _NO_CLAMP)
            return self._command_targets(rows, p, d, kp_list)  # (which raises for a bad goal)
        ff = cmd.tau_ff + cmd.kd * cmd.qd_des
        if no_p is not None:
            bad = np.flatnonzero(no_p & (np.abs(ff) > 1e-12))
            if bad.size:
                j = int(bad[0])
                raise InvalidArgumentError(
                    f"servo-side control folds tau_ff + kd*qd_des into the goal position, which needs kp > 0; "
                    f"joint {self.config.joints[j].name} has kp {cmd.kp[j]} (P gain 0) and feed-forward {ff[j]:.4g} N m. "
                    "Use a kp > 0 or control_mode = 'current'"
                )
        goal = cmd.q_des + ff / kp_div
        if not hold:
            return ServoTargets(m.ticks_from_q(goal), p, d)
        ticks, wanted = m.ticks_clamped(goal)
        beyond = np.flatnonzero(~(np.abs(wanted) <= Units.EXTENDED_POSITION_LIMIT))
        clamped = {self.ids[j]: float(wanted[j]) for j in beyond}
        return ServoTargets(ticks, p, d, clamped)

    def _command_targets(
        self, rows: np.ndarray, p: np.ndarray, d: np.ndarray, kp_div: list[float]
    ) -> ServoTargets:
        """``servo_targets`` of a command's ``rows`` (5, n) whose joints all have a P gain: the
        general path's operations in the same order on Python floats (six joints, where numpy's
        per-call cost would dominate; IEEE doubles either way, so the same ticks), the ticks by
        ``JointMap.ticks_from_floats`` (which refuses a goal beyond the servo's range), and a
        ``ServoTargets._fast``."""
        q, qd, tau, _, kd = rows.tolist()
        goal = [a + (c + e * b) / div for a, b, c, e, div in zip(q, qd, tau, kd, kp_div)]
        ticks = self.map.ticks_from_floats(goal)
        return ServoTargets._fast(np.array(ticks, np.int64), p, d, _NO_CLAMP)

    def send_servo(self, targets: ServoTargets) -> None:
        """The cycle's goals in servo-side mode: one SYNC_WRITE of Goal Position (laid out once),
        and the gains first when they changed."""
        self.bus.exchange_raw(self.servo_goal(targets))

    def servo_goal(self, targets: ServoTargets) -> bytes:
        """The wire bytes of the Goal Position SYNC_WRITE of ``targets``, to send (``send_servo``,
        or ahead of the cycle's read: ``read_state(goal)``); the gains are written first, at
        once, when they changed."""
        sent = self._sent_gains
        if sent is None or not (targets.p_gain is sent[0] and targets.d_gain is sent[1]):
            gains = (tuple(targets.p_gain.tolist()), tuple(targets.d_gain.tolist()))
            if gains != self._gains:
                data = {
                    pid: dxl.encode_register(XTable.POSITION_D_GAIN, d)
                    + dxl.encode_register(XTable.POSITION_I_GAIN, 0)
                    + dxl.encode_register(XTable.POSITION_P_GAIN, p)
                    for pid, p, d in zip(self.ids, *gains)
                }
                self.bus.sync_write(GAIN_BLOCK_ADDRESS, GAIN_BLOCK_LENGTH, data)
                self._gains = gains
            self._sent_gains = (targets.p_gain, targets.d_gain)
        return self._goal_writer.encode(targets.goal_ticks, checked=True)

    def _check_torque_gains(self) -> None:
        """``current`` mode needs a Position P gain on every servo to send a torque through:
        ``ConfigError`` naming the joints whose ``robot.hold_kp`` rounds to P = 0."""
        p, _ = self.map.gains_from_kp_kd(*self._torque_rows[3:])
        zero = [self.config.joints[j].name for j in np.flatnonzero(p == 0)]
        if zero:
            raise ConfigError(
                f"{self.config.source}: control_mode = 'current' sends each joint's torque as a "
                "goal position against the servo's Position P gain, robot.hold_kp; it rounds to "
                f"P = 0 on {', '.join(zero)} (expected at least "
                f"{', '.join(f'{u / 2:.3g}' for u in self.map.kp_unit[p == 0])} N m/rad)"
            )

    def torque_targets(
        self, u: np.ndarray, q: np.ndarray, qd: np.ndarray, *, hold: bool = False
    ) -> ServoTargets:
        """Register values with which the servos apply the joint torques ``u`` (n,) N m at the
        reading ``q`` (n,) rad, ``qd`` (n,) rad/s (``current`` mode, module doc): the hold gains
        as Position P/D, ``u + kd_h qd`` folded into the goal (``servo_targets``; a ``hold``
        goal beyond the servo range is clamped, not refused)."""
        rows = self._torque_rows
        rows[0], rows[1], rows[2] = q, qd, u
        command = JointCommand.from_rows(rows)
        try:
            return self.servo_targets(command, hold=hold)
        except InvalidArgumentError:  # a goal beyond the servo range: towards its edge
            return self.servo_targets(command, hold=True)

    # ------------------------------------------------------------------ faults
    def hardware_errors(self) -> dict[int, HardwareError]:
        return self.bus.hardware_errors(self.ids)

    def reboot(self, ids) -> None:
        for pid in ids:
            self.bus.reboot(pid)

    def _write(self, pid: int, reg, value: int) -> None:
        """An acknowledged WRITE, tried ``bus.attempts`` times (``retried``)."""
        retried(lambda: self.bus.write(pid, reg, int(value)), self.config.bus.attempts)

    def _read_back(self, pid: int, address: int, length: int) -> bytes | None:
        """``length`` bytes at ``address`` of servo ``pid``, tried ``bus.attempts`` times, or
        None where it did not answer."""
        try:
            return retried(
                lambda: self.bus.read_block(pid, address, length), self.config.bus.attempts
            )
        except BUS_FAILURES:
            return None

    def servo_state(self, pid: int, want: dict | None = None) -> ServoState:
        """Torque Enable and Operating Mode of servo ``pid`` read back (``None`` where it did not
        answer within ``bus.attempts`` tries). Torque Enable is read with the LED after it (two
        bytes), so that a late reply to one of the two READs (a loaded host's timeout) has the
        wrong length for the other and is refused, not taken for its value. ``want``: register
        -> value the servo should hold (``_hold_values``), read back too (``ServoState.wrong``)."""
        torque = self._read_back(pid, XTable.TORQUE_ENABLE.address, 2)
        mode = self._read_back(pid, *_MODE_READ)
        wrong = []
        if want and (torque, mode) != (None, None):  # (a silent servo is not asked again)
            for address, length in _HOLD_BLOCKS:
                regs = [r for r in want if address <= r.address < address + length]
                data = self._read_back(pid, address, length) if regs else b""
                for reg in regs:
                    if data is None:
                        wrong.append(f"{reg.name} no reply")
                        continue
                    have = dxl.decode_register(reg, data, offset=address)
                    if have != want[reg]:
                        wrong.append(f"{reg.name} reads {have}, wrote {want[reg]}")
        return ServoState(
            None if torque is None else torque[0], None if mode is None else mode[0], tuple(wrong)
        )

    def _hold_values(self, j: int, targets: ServoTargets, goal_current: int) -> dict:
        """Register -> value of joint ``j``'s servo-side hold, besides torque and mode."""
        return {
            XTable.GOAL_CURRENT: int(goal_current),
            XTable.POSITION_D_GAIN: int(targets.d_gain[j]),
            XTable.POSITION_I_GAIN: 0,
            XTable.POSITION_P_GAIN: int(targets.p_gain[j]),
            XTable.GOAL_POSITION: int(targets.goal_ticks[j]),
        }

    def position_hold(self, targets: ServoTargets) -> dict[int, ServoState]:
        """Leave every servo holding ``targets`` servo-side: Operating Mode 5, torque on, every
        value it writes verified.

        One pass of sync writes first (a current-mode arm is limp only while it runs): torque off
        (current mode only: Operating Mode is EEPROM), mode, Goal Current (the effort limit),
        gains, goal position; then one SYNC_READ of Goal Position, and an acknowledged write of
        each goal that did not arrive as sent (a damaged SYNC_WRITE, unacknowledged, can be lost
        or, with a CRC that still passes, give another goal), before torque on. Then each servo's
        Torque Enable, Operating Mode, gains, Goal Current and Goal Position are read back; a
        servo that disagrees is set up again with acknowledged writes (all of them if torque or
        mode is wrong, else the registers that are) and read back (one with a value unread is
        only read again), up to ``bus.attempts`` rounds. Returns each servo's final state
        (``ServoState.safe``); a servo with a latched hardware error cannot take torque and stays
        unsafe.
        """
        bus, ids = self.bus, self.ids
        self.watchdog.disarm()  # this hold is to last without the host
        goal_current = dict(zip(ids, self.goal_current.tolist()))
        if self.mode != "servo":
            bus.set_torque(ids, False)
            bus.sync_write_register(XTable.OPERATING_MODE, dict.fromkeys(ids, int(SAFE_MODE)))
            bus.sync_write_register(XTable.GOAL_CURRENT, goal_current)
        self._gains = self._sent_gains = None
        self.send_servo(targets)
        self._goals_as_sent(targets)
        bus.set_torque(ids, True)
        out = {}
        for j, pid in enumerate(ids):
            want = self._hold_values(j, targets, goal_current[pid])
            state = self.servo_state(pid, want)
            for _ in range(self.config.bus.attempts):
                if state.safe or state.silent:  # held, or not answering
                    break
                if None not in (state.torque, state.mode):  # known and wrong: set it up again
                    with contextlib.suppress(*BUS_FAILURES):  # read back below
                        if state.torque == 1 and state.mode == SAFE_MODE:
                            self._rewrite(pid, want, state.wrong)
                        else:
                            self._hold_one(pid, want)
                state = self.servo_state(pid, want)
            out[pid] = state
        return out

    def _goals_as_sent(self, targets: ServoTargets) -> None:
        """One SYNC_READ of Goal Position; an acknowledged write of each intact reply's goal that
        differs from ``targets`` (a servo that did not answer is left to the read-back)."""
        reg = XTable.GOAL_POSITION
        with contextlib.suppress(*BUS_FAILURES):
            got = self.bus.sync_read_each(reg.address, reg.size, self.ids)
            for j, pid in enumerate(self.ids):
                reply = got.get(pid)
                goal = int(targets.goal_ticks[j])
                if (
                    reply is not None
                    and dxl.decode_register(reg, reply.params, reg.address) != goal
                ):
                    with contextlib.suppress(*BUS_FAILURES):
                        self._write(pid, reg, goal)

    def _rewrite(self, pid: int, want: dict, wrong: tuple[str, ...]) -> None:
        """Acknowledged writes of the registers of ``want`` named in ``wrong`` (torque stays on)."""
        for reg, value in want.items():
            if any(w.startswith(f"{reg.name} ") for w in wrong):
                self._write(pid, reg, value)

    def _hold_one(self, pid: int, want: dict) -> None:
        """Acknowledged writes of one servo's safe hold: torque off, mode, ``want`` (goals and
        gains), torque on."""
        self._write(pid, XTable.TORQUE_ENABLE, 0)
        self._write(pid, XTable.OPERATING_MODE, int(SAFE_MODE))
        for reg, value in want.items():
            self._write(pid, reg, value)
        self._write(pid, XTable.TORQUE_ENABLE, 1)
