"""``SerialRobot``: the real arm behind ``twin.robot.Robot``, over serial (pyserial).

Devices: the servo bus (``DynamixelBus`` + ``ArmBus``), the Bota F/T sensor (``BotaSensor``, also
the ``ft_device``) and the WitMotion IMU, each with its reader thread and reconnection. One
``step()`` is one bus cycle: goals out (servo-side gains and goal positions, or host-side goal
currents from the robot law and the last reading), a real-time wait to the next period, then one
sync read of present current, velocity and position.

Safety: the same ``CommandWatchdog`` as the sim (no command for ``watchdog_s``: hold the measured
position, ``Health.WATCHDOG``); a port that disappears sets ``Health.DISCONNECTED`` from its reader
thread (event in ``health_events``), the arm holds, and ``write`` raises ``DisconnectedError`` until
the link has reconnected (back-off) and re-initialised; a servo's hardware error (the alert bit)
sets ``Health.FAULT``, stops motion (hold) and ``write`` raises ``DeviceFaultError`` until
``clear_fault()``. Holds carry gravity torques from the URDF inertials as ``tau_ff``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from twin.hardware.arm_bus import ArmBus, JointReading
from twin.hardware.clock import MonotonicClock
from twin.hardware.config import HardwareConfig, load_config
from twin.hardware.drivers.bota_sensor import BotaSensor
from twin.hardware.drivers.dynamixel_bus import DynamixelBus
from twin.hardware.drivers.witmotion_imu import WitmotionImu
from twin.hardware.errors import (
    ConfigError,
    DeviceFaultError,
    DeviceStatusError,
    DisconnectedError,
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
    last_errors: list[str] = field(default_factory=list)


class SerialRobot(Robot):
    """The arm over serial (module doc). ``config``: a ``HardwareConfig`` or a TOML path (default:
    the shipped example). ``clock``: real time by default; a ``ManualClock`` shared with the
    emulators gives a lock-step run."""

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
        self._closed = False
        cfg = self.config
        self.bus = DynamixelBus(
            cfg.bus.port,
            cfg.bus.baudrate,
            reply_timeout_s=cfg.bus.reply_timeout_s,
            reconnect=cfg.reconnect,
            on_connect=self._init_servos,
        )
        self.arm = ArmBus(self.bus, cfg, self._effort)
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
        try:
            for dev in self._devices():
                dev.link.listeners.append(self._on_link_event)
                dev.open()
        except Exception:
            self.close()
            raise
        self._deadline_us: int | None = None  # the schedule starts at the first step

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
    def faults(self) -> dict[int, HardwareError]:
        """Latched servo hardware errors by id (empty when healthy)."""
        return dict(self._faults)

    # ------------------------------------------------------------------ holding
    def _hold(self, q: np.ndarray) -> JointCommand:
        hold = hold_command(q, self._cmd, self._hold_kp, self._hold_kd)
        if self.config.hold_gravity_compensation:
            hold = replace(hold, tau_ff=gravity_torques(self.model, q))
        return hold.validated(self.model.joint_names, self._effort)

    def _init_servos(self, bus: DynamixelBus) -> None:
        """Run at every (re)connection of the bus: set up the servos and hold where they are."""
        reading, errors = self.arm.initialise(lambda r: self._hold(r.q))
        with self._lock:
            self._set_reading(reading)
            self._cmd = self._hold(reading.q)
            self._targets = self.arm.servo_targets(self._cmd) if self.arm.mode == "servo" else None
            if errors:
                self._latch_fault(errors)

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
            wrench = imu = None
            if self.ft is not None:
                latest = self.ft.latest
                wrench = None if latest is None else latest.sample
                if wrench is None or now - wrench.t_us > self._stale_us:
                    health |= Health.FT_STALE
                if wrench is not None and wrench.status & FtStatus.INVALID:
                    health |= Health.FAULT
            if self.imu is not None:
                imu = self.imu.latest
                if imu is None or now - imu.t_us > self._stale_us:
                    health |= Health.IMU_STALE
            r = self._reading
            return RobotState(
                t_us=now if self._joint_t_us is None else self._joint_t_us,
                q=r.q,
                qd=r.qd,
                tau=r.tau,
                wrench=wrench,
                imu=imu,
                health=health,
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
            targets = self.arm.servo_targets(command) if self.arm.mode == "servo" else None
            self._cmd, self._targets = command, targets
            self._watchdog_hold = self._hold_pending = False
            self._watchdog.feed(self._clock.now_us())

    def step(self) -> None:
        """One control period: goals out, wait for the period boundary, present values in."""
        with self._lock:
            if self._closed:
                raise DisconnectedError("this SerialRobot is closed; create a new one")
            now = self._clock.now_us()
            if self._hold_pending or (
                not self._watchdog_hold and self._cmd is not None and self._watchdog.expired(now)
            ):
                if not self._hold_pending:
                    self._watchdog_hold = True
                    self._event(
                        Health.WATCHDOG, True, "no command within the watchdog time: holding"
                    )
                self._hold_pending = False
                self._cmd = self._hold(self._reading.q)
                self._targets = (
                    self.arm.servo_targets(self._cmd) if self.arm.mode == "servo" else None
                )
            cmd, targets, reading = self._cmd, self._targets, self._reading
        if self.bus.ready and cmd is not None:
            try:
                if targets is not None:
                    self.arm.send_servo(targets)
                else:
                    self.arm.send_current(
                        self.arm.current_for(joint_torque(cmd, reading.q, reading.qd, self._effort))
                    )
            except (TransportError, DeviceStatusError) as e:
                self._bus_error(e)
        self._wait_period()
        if self.bus.ready:
            try:
                reading = self.arm.read_state()
            except (TransportError, DeviceStatusError) as e:
                self._bus_error(e)
            else:
                with self._lock:
                    self._set_reading(reading)
                if reading.alert.any() and not self._faults:
                    self._on_alert()
        self.stats.cycles += 1

    def _wait_period(self) -> None:
        """Sleep to the next period boundary. A cycle late by more than a period drops the missed
        periods (counted in ``stats.overruns``) and the schedule restarts from now."""
        now = self._clock.now_us()
        if self._deadline_us is None:
            self._deadline_us = now + self._period_us
        elif now > self._deadline_us + self._period_us:
            self.stats.overruns += (now - self._deadline_us) // self._period_us
            self._deadline_us = now + self._period_us
        self._clock.sleep_until(self._deadline_us)
        self._deadline_us += self._period_us

    def _set_reading(self, reading: JointReading) -> None:
        self._reading = reading
        self._joint_t_us = self._clock.now_us()

    def _bus_error(self, e: Exception) -> None:
        self.stats.bus_errors += 1
        self.stats.last_errors = [*self.stats.last_errors[-9:], f"{type(e).__name__}: {e}"]

    def _on_alert(self) -> None:
        try:
            errors = self.arm.hardware_errors()
        except (TransportError, DeviceStatusError) as e:
            self._bus_error(e)
            errors = {}
        if not errors:  # the alert bit without a readable cause: still a fault
            errors = {
                pid: HardwareError.NONE for pid, a in zip(self.arm.ids, self._reading.alert) if a
            }
        with self._lock:
            self._latch_fault(errors)

    def clear_fault(self, timeout_s: float = 2.0) -> bool:
        """Reboot the faulted servos, set them up again and hold. Returns True if no hardware error
        remains (False: still faulted, see ``faults``)."""
        with self._lock:
            faulted = list(self._faults)
        if not faulted:
            return True
        self.arm.reboot(faulted)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._init_servos(self.bus)
                break
            except (TransportError, DeviceStatusError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        with self._lock:
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
        """Park the servos (holding in current-based position mode), close every port. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.bus.ready:
                self.arm.park()
        except (TransportError, DeviceStatusError):
            pass
        finally:
            for dev in self._devices():
                dev.close()
