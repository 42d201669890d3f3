"""``ArmBus``: the six servos of the arm on a ``DynamixelBus``, in joint units.

Connection-time set-up (``initialise``), one sync read of present values per cycle
(``read_state``), and the per-cycle goals of the two control modes:

- servo-side (``servo``, Operating Mode 5, current-based position): ``kp``/``kd`` become Position
  P/D gains through ``JointMap`` (rewritten only when they change), and ``tau_ff + kd qd_des`` is
  folded into the goal position: ``q_goal = q_des + (tau_ff + kd qd_des) / kp_servo``, so the servo
  applies ``kp (q_des - q) + tau_ff + kd qd_des - kd qd``, the robot law. Goal Current (the mode's
  current limit) is the joint's effort limit.
- host-side (``current``, Operating Mode 0): the law is computed by the caller and sent as Goal
  Current.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from twin.hardware.config import HardwareConfig
from twin.hardware.drivers.dynamixel_bus import DynamixelBus
from twin.hardware.errors import DeviceStatusError, InvalidArgumentError
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import (
    GAIN_BLOCK_ADDRESS,
    GAIN_BLOCK_LENGTH,
    HardwareError,
    OperatingMode,
    XTable,
)

from twin.robot import JointCommand, joint_torque

MODE_REGISTER = {"servo": OperatingMode.CURRENT_BASED_POSITION, "current": OperatingMode.CURRENT}
_SETUP_BLOCK = (
    XTable.RETURN_DELAY_TIME.address,
    XTable.OPERATING_MODE.end - XTable.RETURN_DELAY_TIME.address,
)


@dataclass(frozen=True)
class JointReading:
    """One sync read in joint units: q (n,) rad, qd (n,) rad/s, tau (n,) N m, alert (n,) bool."""

    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    alert: np.ndarray


@dataclass(frozen=True)
class ServoTargets:
    """Register values of one servo-side command: goal ticks, Position P and D gains, (n,) each."""

    goal_ticks: np.ndarray
    p_gain: np.ndarray
    d_gain: np.ndarray


class ArmBus:
    """The arm's servos on ``bus`` (module doc)."""

    def __init__(
        self, bus: DynamixelBus, config: HardwareConfig, effort_limits: np.ndarray
    ) -> None:
        self.bus, self.config = bus, config
        self.map = config.joint_map()
        self.ids = list(self.map.ids)
        self.mode = config.control_mode
        self.effort = np.asarray(effort_limits, float)
        self.current_limit = np.array([j.current_limit for j in config.joints])
        # Goal Current in servo mode: the torque limit, the effort limit where the servo allows it.
        self.goal_current = np.minimum(
            np.rint(self.effort / self.map.torque_unit), self.current_limit
        ).astype(int)
        self._gains: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        self._gain_cache: tuple | None = None

    # ------------------------------------------------------------------ set-up
    def initialise(
        self, hold: Callable[[JointReading], JointCommand]
    ) -> tuple[JointReading, dict[int, HardwareError]]:
        """Identify the servos and bring them to the configured mode, holding where they are.

        EEPROM settings (return delay, operating mode, current limit) are written only where they
        differ (with torque off on those servos only), so a reconnection does not drop the arm.
        ``hold(reading)`` is the command to hold with. Returns the reading and the servos' latched
        hardware errors (their torque stays off).
        """
        bus, ids = self.bus, self.ids
        for j, pid in enumerate(ids):
            model, _fw = bus.ping(pid)
            want = self.config.joints[j].model_number
            if model != want:
                raise DeviceStatusError(
                    f"servo {pid} ({self.config.joints[j].name}) is model {model}, the config says {want}",
                    device=f"dxl:{pid}",
                )
        bus.sync_write_register(XTable.STATUS_RETURN_LEVEL, dict.fromkeys(ids, 2))
        errors = bus.hardware_errors(ids)
        setup = bus.sync_read(*_SETUP_BLOCK, ids)
        limits = bus.sync_read_register(XTable.CURRENT_LIMIT, ids)
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
                bus.write(pid, XTable.TORQUE_ENABLE, 0)
                for reg, value in changes.items():
                    bus.write(pid, reg, value)
        reading = self.read_state()
        self._gains = None
        command = hold(reading)
        if self.mode == "servo":
            self.send_servo(self.servo_targets(command))
            bus.sync_write_register(XTable.GOAL_CURRENT, dict(zip(ids, self.goal_current.tolist())))
        else:
            self.send_current(
                self.current_for(joint_torque(command, reading.q, reading.qd, self.effort))
            )
        healthy = [pid for pid in ids if pid not in errors]
        if healthy:
            bus.set_torque(healthy, True)
        return reading, errors

    # ------------------------------------------------------------------ cycle
    def read_state(self) -> JointReading:
        """One sync read in joint units (read-only arrays, shared with every ``RobotState``)."""
        pv = self.bus.read_present(self.ids)
        m = self.map
        arrays = (
            m.q_from_ticks(pv.position),
            m.qd_from_units(pv.velocity),
            m.tau_from_current(pv.current),
            pv.alert,
        )
        for a in arrays:
            a.flags.writeable = False
        return JointReading(*arrays)

    def servo_targets(self, cmd: JointCommand) -> ServoTargets:
        """Register values for ``cmd`` in servo-side mode; ``InvalidArgumentError`` if a gain is out
        of the servo's range or a joint with ``kp = 0`` asks for feed-forward."""
        m = self.map
        key = (cmd.kp.tobytes(), cmd.kd.tobytes())
        if self._gain_cache is not None and self._gain_cache[0] == key:
            p, d, kp_servo = self._gain_cache[1]  # a stream of commands rarely changes its gains
        else:
            p, d = m.gains_from_kp_kd(cmd.kp, cmd.kd)
            kp_servo = m.kp_kd_from_gains(p, np.zeros_like(p))[0]
            self._gain_cache = (key, (p, d, kp_servo))
        ff = cmd.tau_ff + cmd.kd * cmd.qd_des
        no_p = p == 0
        bad = np.flatnonzero(no_p & (np.abs(ff) > 1e-12))
        if bad.size:
            j = int(bad[0])
            raise InvalidArgumentError(
                f"servo-side control folds tau_ff + kd*qd_des into the goal position, which needs kp > 0; "
                f"joint {self.config.joints[j].name} has kp {cmd.kp[j]} (P gain 0) and feed-forward {ff[j]:.4g} N m. "
                "Use a kp > 0 or control_mode = 'current'"
            )
        q_goal = cmd.q_des + np.where(no_p, 0.0, ff / np.where(no_p, 1.0, kp_servo))
        return ServoTargets(m.ticks_from_q(q_goal), p, d)

    def send_servo(self, targets: ServoTargets) -> None:
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
        self.bus.sync_write_register(
            XTable.GOAL_POSITION, dict(zip(self.ids, targets.goal_ticks.tolist()))
        )

    def current_for(self, u: np.ndarray) -> np.ndarray:
        """(n,) Goal Current units for joint torques ``u`` (n,) N m, within the current limits."""
        return np.clip(self.map.current_from_tau(u), -self.current_limit, self.current_limit)

    def send_current(self, units) -> None:
        self.bus.sync_write_register(
            XTable.GOAL_CURRENT, dict(zip(self.ids, np.asarray(units).tolist()))
        )

    # ------------------------------------------------------------------ faults
    def hardware_errors(self) -> dict[int, HardwareError]:
        return self.bus.hardware_errors(self.ids)

    def reboot(self, ids) -> None:
        for pid in ids:
            self.bus.reboot(pid)

    def park(self) -> None:
        """Leave every servo holding its present position in current-based position mode (safe
        without the host: used by ``close``)."""
        reading = self.read_state()
        if self.mode != "servo":
            self.bus.set_torque(self.ids, False)
            for pid in self.ids:
                self.bus.write(
                    pid, XTable.OPERATING_MODE, int(OperatingMode.CURRENT_BASED_POSITION)
                )
            self.bus.sync_write_register(
                XTable.GOAL_CURRENT, dict(zip(self.ids, self.goal_current.tolist()))
            )
            self._gains = None
            self.send_servo(
                ServoTargets(
                    self.map.ticks_from_q(reading.q),
                    *self.map.gains_from_kp_kd(
                        np.asarray(self.config.hold_kp), np.asarray(self.config.hold_kd)
                    ),
                )
            )
            healthy = [pid for j, pid in enumerate(self.ids) if not reading.alert[j]]
            self.bus.set_torque(healthy, True)
        else:
            self.bus.sync_write_register(
                XTable.GOAL_POSITION, dict(zip(self.ids, self.map.ticks_from_q(reading.q).tolist()))
            )
