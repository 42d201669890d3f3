"""``SerialRobot``: the real arm behind ``twin.robot.Robot``, over serial (pyserial).

Devices: the servo bus (``DynamixelBus`` + ``ArmBus``), the Bota F/T sensor (``BotaSensor``, also
the ``ft_device``) and the WitMotion IMU, each with its reader thread and reconnection. One
``step()`` is one bus cycle: goals out (servo-side gains and goal positions, or the torques of
the robot law on the last reading folded into goal positions: ``ArmBus.torque_targets``), a
real-time wait to the next period, then one sync read of present current, velocity and position.
A cycle with no time left to wait (late, or free-running) writes its goals in the same write as
the read's instruction, just ahead of it.

Safety (``docs/faults/serial.md`` has the table): the same ``CommandWatchdog`` as the sim (no
command for ``watchdog_s``: hold the measured position, ``Health.WATCHDOG``); a port that
disappears sets ``Health.DISCONNECTED`` from its reader thread (event in ``health_events``), the
arm holds, and ``write`` raises ``DisconnectedError`` until the link has reconnected (back-off) and
re-initialised; a servo's hardware error (the alert bit) sets ``Health.FAULT``, stops motion
(hold) and ``write`` raises ``DeviceFaultError`` until ``clear_fault()``. Holds carry gravity
torques from the URDF inertials as ``tau_ff``.

Stale readings: a cycle whose joint read failed leaves the reading one period old, so the next
current-mode cycle sends only the command's ``tau_ff`` (nothing computed from that reading);
``stale_fault_cycles`` failed reads in a row latch ``FAULT | JOINTS_STALE``: the servos hold the
last good reading servo-side (``ArmBus.position_hold``, torque on), commands are refused, the bus
is probed every ``PROBE_INTERVAL_S`` (so a cycle lasts a period, not a reply timeout), and
``clear_fault()`` resumes once readings are back. A reading with an impossible value (beyond the
servo's range or the joint limits, a jump, a velocity or current beyond the servo's limits:
``ArmBus.checks``) is a failed read, counted by reason in ``diagnostics()``; nothing holds or
controls on it. ``close()`` parks with the same verified hold and raises ``ParkError`` naming
each servo's final torque and mode, and any goal or gain that did not read back as written. Start-up opens
each device with bounded retries (``[startup]``), then raises ``StartupError`` naming it and its
port. ``diagnostics()`` gives the achieved rate; below ``rate_warning_fraction`` of the configured
rate a ``ControlRateWarning`` is issued once.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from twin.hardware.arm_bus import (
    BUS_FAILURES,
    ArmBus,
    JointReading,
    ServoState,
    ServoTargets,
    retried,
)
from twin.hardware.bus_watchdog import SerialDiagnostics
from twin.hardware.clock import MonotonicClock, RateMonitor
from twin.hardware.config import HardwareConfig, load_config
from twin.hardware.drivers.bota_sensor import BotaSensor
from twin.hardware.drivers.dynamixel_bus import DynamixelBus, alerts_clear
from twin.hardware.drivers.witmotion_imu import WitmotionImu
from twin.hardware.errors import (
    ConfigError,
    ControlRateWarning,
    DeviceFaultError,
    DisconnectedError,
    ParkError,
    StartupError,
    TransportError,
)
from twin.hardware.protocols.dynamixel_table import HardwareError
from twin.hardware.transport import LinkEvent

from twin.kinematics.gravity import gravity_torques
from twin.robot import (
    CommandWatchdog,
    FtSensorDevice,
    FtStatus,
    Health,
    JointCommand,
    Robot,
    RobotState,
    WrenchBatch,
    hold_command,
    joint_torque,
    robot_state,
)


@dataclass(frozen=True)
class HealthEvent:
    """A health flag that changed: ``t_s`` is ``time.monotonic()`` when it was detected."""

    t_s: float
    flag: Health
    set: bool
    detail: str


@dataclass
class RobotStats:
    cycles: int = 0
    overruns: int = 0  # periods missed because a cycle took longer than the period
    bus_errors: int = 0  # cycles whose goals or reading failed (timeouts, status errors)
    failed_reads: int = 0  # cycles whose joint reading failed (the reading stayed as it was)
    feedforward_only: int = 0  # current-mode cycles that sent tau_ff only (stale reading)
    last_errors: list[str] = field(default_factory=list)


#: A cycle whose wait to the period boundary is at most this (us: a late or free-running cycle)
#: writes its goals in one write with the read's instruction, just ahead of it, instead of
#: before the wait: one system call and one wake-up of the bus fewer, the same bytes on the wire.
COMBINE_WAIT_US = 100
#: ``FtStatus.INVALID`` as an int, and ``int.__and__``: the status test of every ``read()`` in C
#: (the flag's own ``&`` runs the enum machinery in Python).
_FT_INVALID, _and = int(FtStatus.INVALID), int.__and__
PROBE_INTERVAL_S = 0.1  # while the stale fault holds: one read attempt per this much time
RATE_WINDOW_S = 1.0  # the achieved rate is checked against the configured one over this window
#: No ``step()`` for longer than this after the previous one: the caller paused (a planner call),
#: the loop was not running; the pause is not the loop's rate, and the schedule restarts after it.
RATE_PAUSE_S = 0.05


@dataclass
class StaleFault:
    """The latched stale-readings fault: why, and whether readings have come back since."""

    detail: str
    readings_back: bool = False
    hold: dict[int, ServoState] = field(default_factory=dict)  # read back after the safe hold


class SerialRobot(Robot):
    """The arm over serial (module doc). ``config``: a ``HardwareConfig`` or a TOML path (default:
    the shipped example). ``clock``: real time by default; a ``ManualClock`` shared with the
    emulators gives a lock-step run."""

    ramps_targets = True  # step() advances the q_des ramp (twin.safety rule 6)

    def __init__(
        self, config: HardwareConfig | str | Path | None = None, *, model=None, clock=None
    ) -> None:
        self.config = config if isinstance(config, HardwareConfig) else load_config(config)
        if model is None:
            from twin.kinematics import ArmModel

            model = ArmModel.default()
        self.model = model
        names = tuple(j.name for j in self.config.joints)
        if names != tuple(model.joint_names):
            raise ConfigError(
                f"{self.config.source}: joints {names} must match the model's {model.joint_names}, in order"
            )
        self.control_period_s = self.config.control_period_s
        self._period_us = round(self.control_period_s * 1e6)
        self._stale_us = round(self.config.stale_after_s * 1e6)
        self._clock = clock if clock is not None else MonotonicClock()
        self._effort = np.asarray(model.effort_limits, float)
        self._hold_kp = np.asarray(self.config.hold_kp, float)
        self._hold_kd = np.asarray(self.config.hold_kd, float)
        self._lock = threading.RLock()
        self._watchdog = CommandWatchdog(self.config.watchdog_s)
        self.health_events: list[HealthEvent] = []
        self.stats = RobotStats()
        self._disconnected: set[str] = set()
        self._faults: dict[int, HardwareError] = {}
        self._watchdog_hold = False
        self._hold_pending = False
        self._cmd: JointCommand | None = None
        self._targets = None
        n = model.n_joints
        self._reading = JointReading(np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n, bool))
        self._joint_t_us: int | None = None
        self._fresh = False  # the reading comes from the latest bus cycle
        self._failed_in_row = 0
        self._stale: StaleFault | None = None
        self._probe_every = max(1, round(PROBE_INTERVAL_S / self.control_period_s))
        self._rate = RateMonitor(
            self.control_period_s, self.config.rate_warning_fraction, RATE_WINDOW_S, RATE_PAUSE_S
        )
        # a clock that marks cycles (a lock-step ``ManualClock``); real time has nothing to mark
        mark = getattr(self._clock, "in_cycle", None)
        self._in_cycle = None if mark is None or type(self._clock) is MonotonicClock else mark
        self._rate_warned = False
        self.park_report: dict[int, ServoState] | None = None
        self._closed = False
        cfg = self.config
        self.bus = DynamixelBus(
            cfg.bus.port,
            cfg.bus.baudrate,
            reply_timeout_s=cfg.bus.reply_timeout_s,
            reconnect=cfg.reconnect,
            on_connect=self._init_servos,
        )
        self.arm = ArmBus(
            self.bus,
            cfg,
            self._effort,
            position_limits=(model.lower, model.upper),
            clock=self._clock,
        )
        self._servo_mode = self.arm.mode == "servo"
        self.ft: BotaSensor | None = None
        self.imu: WitmotionImu | None = None
        if cfg.ft.enabled:
            self.ft = BotaSensor(
                cfg.ft.port,
                cfg.ft.baudrate,
                sinc_length=cfg.ft.sinc_length,
                boot_timeout_s=cfg.ft.boot_timeout_s,
                ack_timeout_s=cfg.ft.ack_timeout_s,
                activation_timeout_s=cfg.ft.activation_timeout_s,
                read_metadata=cfg.ft.read_metadata,
                reconnect=cfg.reconnect,
                clock=self._clock,
            )
        if cfg.imu.enabled:
            self.imu = WitmotionImu(
                cfg.imu.port,
                cfg.imu.baudrate,
                rate_hz=cfg.imu.rate_hz,
                configure=cfg.imu.configure,
                first_sample_timeout_s=cfg.imu.first_sample_timeout_s,
                reconnect=cfg.reconnect,
                clock=self._clock,
            )
        self._deadline_us: int | None = None  # the schedule starts at the first step
        self._no_velocity = np.zeros(n)  # a stale cycle's torque is folded in at rest
        try:
            for dev in self._devices():
                dev.link.listeners.append(self._on_link_event)
                self._open(dev)
        except Exception:
            self._close_ports()
            self._closed = True
            raise

    def _open(self, dev) -> None:
        """Open ``dev`` with bounded retries and back-off (``[startup]``); ``StartupError`` names
        the device and port after the last attempt."""
        cfg = self.config.startup
        delay = cfg.backoff_initial_s
        for k in range(cfg.attempts):
            try:
                dev.open()
                return
            except TransportError as e:
                last = e
            if k + 1 < cfg.attempts:
                time.sleep(delay)
                delay = min(2.0 * delay, cfg.backoff_max_s)
        raise StartupError(
            f"{dev.link.name} on {dev.link.port}: could not be opened and set up in "
            f"{cfg.attempts} attempts (startup.attempts, back-off from "
            f"{cfg.backoff_initial_s} s); last error: {last}"
        ) from last

    def _devices(self):
        return [d for d in (self.bus, self.ft, self.imu) if d is not None]

    # ------------------------------------------------------------------ health
    def _event(self, flag: Health, on: bool, detail: str, t_s: float | None = None) -> None:
        self.health_events.append(
            HealthEvent(time.monotonic() if t_s is None else t_s, flag, on, detail)
        )

    def _on_link_event(self, ev: LinkEvent) -> None:
        with self._lock:
            if ev.kind == "lost":
                if ev.link not in self._disconnected:
                    self._disconnected.add(ev.link)
                    self._hold_pending = True
                    self._event(Health.DISCONNECTED, True, f"{ev.link}: {ev.detail}", ev.t_s)
            elif ev.kind == "ready" and ev.link in self._disconnected:
                self._disconnected.discard(ev.link)
                self._event(Health.DISCONNECTED, False, f"{ev.link}: {ev.detail}", ev.t_s)

    @property
    def health(self) -> Health:
        return self.read().health

    @property
    def command_in_force(self) -> JointCommand | None:
        """The command the servos are executing (the last ``write``, or a hold)."""
        return self._cmd

    @property
    def stale_fault(self) -> StaleFault | None:
        """The latched stale-readings fault (why, whether readings are back, the safe hold's
        read-back per servo), or None."""
        return self._stale

    @property
    def faults(self) -> dict[int, HardwareError]:
        """Latched servo hardware errors by id (empty when healthy)."""
        return dict(self._faults)

    # ------------------------------------------------------------------ holding
    def _hold(self, q: np.ndarray) -> JointCommand:
        hold = hold_command(q, self._cmd, self._hold_kp, self._hold_kd)
        if self.config.hold_gravity_compensation:
            hold = replace(hold, tau_ff=gravity_torques(self.model, q))
        return hold.validated(self.model.joint_names, self._effort)

    def _safe_targets(self, q: np.ndarray) -> ServoTargets:
        """Servo-side registers holding ``q`` (6,) rad with the configured hold gains (gravity
        torques folded in where the joint has a P gain): the park and stale-fault hold."""
        kp, kd = self._hold_kp, self._hold_kd
        tau = gravity_torques(self.model, q) if self.config.hold_gravity_compensation else 0.0
        cmd = JointCommand(
            q_des=np.array(q, float), tau_ff=np.where(kp > 0, tau, 0.0), kp=kp, kd=kd
        )
        return self.arm.servo_targets(
            cmd.validated(self.model.joint_names, self._effort), hold=True
        )

    def _init_servos(self, bus: DynamixelBus) -> None:
        """Run at every (re)connection of the bus: set up the servos and hold where they are
        (servo-side, if the stale fault is latched)."""
        reading, errors = self.arm.initialise(lambda r: self._hold(r.q))
        with self._lock:
            self._set_reading(reading)
            self._fresh, self._failed_in_row = True, 0
            self._cmd = self._hold(reading.q)
            self._targets = (
                self.arm.servo_targets(self._cmd, hold=True) if self.arm.mode == "servo" else None
            )
            if errors:
                self._latch_fault(errors)
            stale = self._stale
        if stale is not None:
            stale.hold = self.arm.position_hold(self._safe_targets(reading.q))

    def _latch_fault(self, errors: dict[int, HardwareError]) -> None:
        new = {pid: e for pid, e in errors.items() if self._faults.get(pid) != e}
        self._faults.update(errors)
        if new:
            text = ", ".join(f"servo {pid}: {e!r}" for pid, e in new.items())
            self._event(Health.FAULT, True, f"hardware error: {text}")
        self._hold_pending = True

    # ------------------------------------------------------------------ Robot API
    def read(self) -> RobotState:
        with self._lock:
            now = self._clock.now_us()
            health = Health.OK
            if self._disconnected:
                health |= Health.DISCONNECTED
            if self._faults:
                health |= Health.FAULT
            if self._watchdog_hold:
                health |= Health.WATCHDOG
            if self._joint_t_us is None or now - self._joint_t_us > self._stale_us:
                health |= Health.JOINTS_STALE
            if self._stale is not None:
                health |= Health.FAULT
                if not self._stale.readings_back:
                    health |= Health.JOINTS_STALE
            wrench = imu = None
            if self.ft is not None:
                latest = self.ft.latest
                wrench = None if latest is None else latest.sample
                if wrench is None or now - wrench.t_us > self._stale_us:
                    health |= Health.FT_STALE
                if wrench is not None and _and(wrench.status, _FT_INVALID):
                    health |= Health.FAULT
                if self.ft.checks.rejected_since(now - self._stale_us):  # implausible frames
                    health |= Health.FAULT
            if self.imu is not None:
                imu = self.imu.latest
                if imu is None or now - imu.t_us > self._stale_us:
                    health |= Health.IMU_STALE
                if self.imu.checks.rejected_since(now - self._stale_us):
                    health |= Health.FAULT
            r = self._reading
            return robot_state(
                now if self._joint_t_us is None else self._joint_t_us,
                r.q,
                r.qd,
                r.tau,
                wrench,
                imu,
                health,
            )

    def _apply(self, command: JointCommand) -> None:
        with self._lock:
            if self._closed:
                raise DisconnectedError("this SerialRobot is closed; create a new one")
            if self._disconnected:
                names = ", ".join(sorted(self._disconnected))
                raise DisconnectedError(
                    f"command refused: {names} disconnected; the arm holds its position until the "
                    "port is back (Health.DISCONNECTED clears)"
                )
            if self._faults:
                raise DeviceFaultError(
                    f"command refused: servo hardware error {self._faults}; motion is stopped until "
                    "clear_fault()",
                    device="servo_bus",
                )
            if self._stale is not None:
                raise DeviceFaultError(
                    f"command refused: joint readings stale ({self._stale.detail}); the servos "
                    "hold the last good reading servo-side until the readings are back "
                    "(JOINTS_STALE clear) and clear_fault() is called",
                    device="servo_bus",
                )
            targets = self.arm.servo_targets(command) if self._servo_mode else None
            self._cmd, self._targets = command, targets
            self._watchdog_hold = self._hold_pending = False
            self._watchdog.feed(self._clock.now_us())

    def step(self) -> None:
        """One control period: goals out, wait for the period boundary, present values in."""
        self._before_step()  # twin.safety rule 6: the q_des ramp and the velocity watch
        mark = self._in_cycle
        if mark is None:
            self._step()
            return
        mark(True)  # a lock-step idle pump leaves the clock to the cycle
        try:
            self._step()
        finally:
            mark(False)

    def _step(self) -> None:
        if self.arm.watchdog.due(self._clock.now_us()):
            self._recover_bus_watchdog()
        with self._lock:
            if self._closed:
                raise DisconnectedError("this SerialRobot is closed; create a new one")
            now = self._clock.now_us()
            if self._rate.start(now):
                self._deadline_us = None  # after a pause the schedule starts again (no overruns)
            stale = self._stale
            if stale is None and (
                self._hold_pending
                or (
                    not self._watchdog_hold
                    and self._cmd is not None
                    and self._watchdog.expired(now)
                )
            ):
                if not self._hold_pending:
                    self._watchdog_hold = True
                    self._event(
                        Health.WATCHDOG, True, "no command within the watchdog time: holding"
                    )
                self._hold_pending = False
                self._cmd = self._hold(self._reading.q)
                self._targets = (
                    self.arm.servo_targets(self._cmd, hold=True)
                    if self.arm.mode == "servo"
                    else None
                )
            cmd, targets, reading, fresh = self._cmd, self._targets, self._reading, self._fresh
        goal = b""
        if self.bus.ready and cmd is not None and stale is None:
            try:
                if targets is not None:
                    goal = self.arm.servo_goal(targets)
                else:
                    qd = reading.qd if fresh else self._no_velocity
                    u = self._torque(cmd, reading, fresh)
                    goal = self.arm.servo_goal(self.arm.torque_targets(u, reading.q, qd))
            except BUS_FAILURES as e:
                self._bus_error(e)
        deadline, now = self._next_deadline()
        probe = stale is None or stale.readings_back or self.stats.cycles % self._probe_every == 0
        if goal and (not probe or deadline - now > COMBINE_WAIT_US):
            goal = self._send_goal(goal)  # before the wait: the servos act on it meanwhile
        self._clock.sleep_until(deadline)
        if self.bus.ready and probe:
            try:
                reading = self.arm.read_state(goal)  # a goal not sent yet goes just ahead
            except BUS_FAILURES as e:
                self._bus_error(e)
                self._read_failed(e)
            else:
                self._read_ok(reading)
        elif goal:
            self._send_goal(goal)
        self.stats.cycles += 1
        self.arm.watchdog.sent(self._clock.now_us())
        self._account_cycle()

    def _recover_bus_watchdog(self) -> None:
        """Look for a Bus Watchdog trip (``bus_watchdog``); after one, hold at the measured
        position until the next ``write()`` (``Health.WATCHDOG``, a ``health_events`` entry)."""
        if self._closed or self._stale is not None or not self.bus.ready:
            return
        try:
            tripped = self.arm.watchdog.recover(self._clock.now_us())
            if tripped:
                reading = retried(self.arm.read_state, self.config.bus.attempts)
        except BUS_FAILURES as e:
            self._bus_error(e)  # looked for again at the next cycle
            return
        if not tripped:
            return
        self._read_ok(reading)
        with self._lock:
            self._hold_pending = self._watchdog_hold = True
            text = self.arm.watchdog.stats.last
            self._event(
                Health.WATCHDOG,
                True,
                f"{text}; holding the measured position until the next write()",
            )

    def _send_goal(self, goal: bytes) -> bytes:
        """Write the cycle's goal SYNC_WRITE now; returns ``b""`` (nothing left to send)."""
        try:
            self.bus.exchange_raw(goal)
        except BUS_FAILURES as e:
            self._bus_error(e)
        return b""

    def _torque(self, cmd: JointCommand, reading: JointReading, fresh: bool) -> np.ndarray:
        """(6,) N m to send in current mode: the law on a reading from the latest cycle, else the
        command's ``tau_ff`` alone (a current from an older reading is never sent)."""
        if fresh:
            return joint_torque(cmd, reading.q, reading.qd, self._effort)
        self.stats.feedforward_only += 1
        return np.clip(cmd.tau_ff, -self._effort, self._effort)

    def _read_ok(self, reading: JointReading) -> None:
        with self._lock:
            self._reading, self._joint_t_us = reading, self._clock.now_us()  # (_set_reading)
            self._fresh, self._failed_in_row = True, 0
            stale = self._stale
            if stale is not None and not stale.readings_back:
                stale.readings_back = True
                self._event(
                    Health.JOINTS_STALE, False, "joint readings are back; clear_fault() resumes"
                )
        if not self._faults and not alerts_clear(reading.alert):
            self._on_alert()

    def _read_failed(self, e: Exception) -> None:
        with self._lock:
            self.stats.failed_reads += 1
            self._fresh = False
            self._failed_in_row += 1
            n = self._failed_in_row
            if self._stale is not None:
                if self._stale.readings_back:
                    self._stale.readings_back = False
                    self._event(Health.JOINTS_STALE, True, f"joint readings lost again: {e}")
                return
            if n < self.config.stale_fault_cycles:
                return
            self._stale = StaleFault(
                f"{n} joint reads in a row failed, last: {type(e).__name__}: {e}"
            )
            q = self._reading.q
            self._cmd = self._hold(q)
        self._enter_safe_hold(q)

    def _enter_safe_hold(self, q: np.ndarray) -> None:
        """The servo-side hold of the stale fault, at the last good reading ``q`` (6,) rad."""
        stale = self._stale
        try:
            targets = self._safe_targets(q)
            stale.hold = self.arm.position_hold(targets)
            unsafe = {pid: st for pid, st in stale.hold.items() if not st.safe}
            how = "servos hold servo-side" + (
                "; not verified: " + _servo_list(unsafe) if unsafe else " (read back)"
            )
            if targets.clamped:
                how += "; " + targets.clamp_text()
        except BUS_FAILURES as err:
            how = f"the safe hold could not be written: {err}"
        self._event(Health.FAULT | Health.JOINTS_STALE, True, f"{stale.detail}; {how}")

    def _account_cycle(self) -> None:
        """Rate bookkeeping at the end of a step; the once-only ``ControlRateWarning``."""
        slow = self._rate.end(self._clock.now_us())
        if slow is None or self._rate_warned:
            return
        self._rate_warned = True
        rate, span_s = slow
        warnings.warn(
            ControlRateWarning(
                f"SerialRobot ran at {rate:.0f} Hz over the last {span_s:.1f} s, below "
                f"{self.config.rate_warning_fraction:.0%} of its configured "
                f"{1.0 / self.control_period_s:.0f} Hz (robot.control_period_s = "
                f"{self.control_period_s} s; {self.stats.overruns} overruns, "
                f"{self.stats.failed_reads} failed reads so far; see diagnostics())"
            ),
            stacklevel=4,
        )

    def diagnostics(self) -> SerialDiagnostics:
        """The achieved rate over the robot's clock (wall time, or a shared ``ManualClock``),
        and the servos' Bus Watchdog (``bus_watchdog``: trips seen and recovered from)."""
        r = self._rate
        return SerialDiagnostics(
            self.control_period_s,
            self.stats.cycles,
            self.stats.overruns,
            r.achieved_rate_hz,
            self.stats.failed_reads,
            r.worst_cycle_s,
            self.arm.checks.counts.report().rejected,
            bus_watchdog=self.arm.watchdog.stats,
        )

    def _next_deadline(self) -> tuple[int, int]:
        """The period boundary to wait for and now (clock us), the schedule moved on by a period.
        A cycle late by more than a period drops the missed periods (counted in
        ``stats.overruns``) and the schedule restarts from now."""
        now = self._clock.now_us()
        if self._deadline_us is None:
            self._deadline_us = now + self._period_us
        elif now > self._deadline_us + self._period_us:
            self.stats.overruns += (now - self._deadline_us) // self._period_us
            self._deadline_us = now + self._period_us
        deadline = self._deadline_us
        self._deadline_us += self._period_us
        return deadline, now

    def _set_reading(self, reading: JointReading) -> None:
        self._reading = reading
        self._joint_t_us = self._clock.now_us()

    def _bus_error(self, e: Exception) -> None:
        self.stats.bus_errors += 1
        self.stats.last_errors = [*self.stats.last_errors[-9:], f"{type(e).__name__}: {e}"]

    def _on_alert(self) -> None:
        try:
            errors = self.arm.hardware_errors()
        except BUS_FAILURES as e:
            self._bus_error(e)
            errors = {}
        if not errors:  # the alert bit without a readable cause: still a fault
            errors = {
                pid: HardwareError.NONE for pid, a in zip(self.arm.ids, self._reading.alert) if a
            }
        with self._lock:
            self._latch_fault(errors)

    def clear_fault(self, timeout_s: float = 2.0) -> bool:
        """Clear the latched faults and hold where the arm is. Servo hardware errors: reboot the
        faulted servos and set them up again. Stale readings: only once a reading succeeds again;
        the servos are set up again in the configured mode. Returns True if no fault remains
        (False: still faulted, see ``faults`` and ``read().health``)."""
        with self._lock:
            faulted = list(self._faults)
            stale = self._stale
        if not faulted and stale is None:
            return True
        if stale is not None:
            try:
                retried(self.arm.read_state, self.config.bus.attempts)
            except BUS_FAILURES:
                return False  # readings are not back: the fault stays, the servos keep holding
        if faulted:
            self.arm.reboot(faulted)
        with self._lock:
            self._stale = None  # re-initialise in the configured mode, not into the hold
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._init_servos(self.bus)
                break
            except BUS_FAILURES:
                if time.monotonic() > deadline:
                    if stale is not None:
                        with self._lock:
                            self._stale = stale
                        self._enter_safe_hold(self._reading.q)
                    raise
                time.sleep(0.05)
        with self._lock:
            if stale is not None:
                self._fresh, self._failed_in_row = True, 0
                self._event(Health.FAULT, False, "stale readings cleared: readings are back")
            if not faulted:
                return True
            remaining = self.arm.hardware_errors()
            if not remaining:
                self._faults.clear()
                self._event(Health.FAULT, False, f"cleared by rebooting servos {faulted}")
            return not remaining

    @property
    def ft_device(self) -> FtSensorDevice | None:
        return self.ft

    def wrench_samples(self) -> WrenchBatch:
        """Every F/T frame the Bota driver accepted since the previous call (its bounded queue)."""
        return WrenchBatch(()) if self.ft is None else self.ft.take_samples()

    def close(self) -> None:
        """Park the servos (holding in current-based position mode, torque on, every value
        written read back), close every port. Raises ``ParkError`` naming each servo's final
        torque and mode (and any goal or gain that read back otherwise) if the arm could not be
        left so (the ports are closed all the same; ``park_report``
        keeps the states). Safe to call twice: the second call does nothing."""
        if self._closed:
            return
        self._closed = True
        problem = ""
        try:
            if self.bus.ready:
                try:
                    q = retried(self.arm.read_state, self.config.bus.attempts).q
                except BUS_FAILURES:
                    q = self._reading.q  # hold the last good reading
                targets = self._safe_targets(q)  # clamped to the servos' range, never refused
                self.park_report = self.arm.position_hold(targets)
                problem = targets.clamp_text()
            else:
                problem = (
                    f"the servo bus is {self.bus.link.state.value}: the servos were not parked"
                )
        except BUS_FAILURES as e:
            problem = f"parking failed: {type(e).__name__}: {e}"
        finally:
            self._close_ports()
        report = self.park_report or {}
        if problem or any(not st.safe for st in report.values()):
            text = (
                "SerialRobot.close(): the arm could not be left in its safe state (every servo "
                f"torque on, current-based position mode): {problem or _servo_list(report)}"
            )
            if problem and report:
                text += f"; {_servo_list(report)}"
            self._event(Health.FAULT, True, text)
            raise ParkError(text, report)

    def _close_ports(self) -> None:
        for dev in self._devices():
            dev.close()


def _servo_list(states: dict[int, ServoState]) -> str:
    return ", ".join(f"servo {pid}: {st}" for pid, st in states.items())
