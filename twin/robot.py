"""The robot interface: one abstract ``Robot``, its value types and the shared control law.

Both backends (``sim.PyBulletRobot``, ``hardware.SerialRobot``) implement ``Robot``; everything
above this module (transformers, controller, planner, environments, CLI) is written against it.
Modelled on the read/write cycle of ros2_control's hardware interface:

    state = robot.read()      # consistent snapshot
    robot.write(command)      # validated, held inside the joint limits, kept until replaced
    robot.step()              # one control period (physics substeps, or a real-time wait)

Units are SI; time stamps are integer microseconds ``t_us``; joint arrays are ``(6,)`` in the
order of ``robot.model.joint_names``.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from twin import events
from twin.interrupts import held_signals
from twin.safety import TargetRamp, VelocityEvent, VelocityWatch, limits_for

if TYPE_CHECKING:
    from twin.kinematics.model import ArmModel
    from twin.safety import JointLimits

COMMAND_FIELDS = ("q_des", "qd_des", "tau_ff", "kp", "kd")
_FIELD_ROW = {name: i for i, name in enumerate(COMMAND_FIELDS)}


class Health(enum.IntFlag):
    """Health flags of a ``RobotState``; ``Health.OK`` (0) when all is well."""

    OK = 0
    FT_STALE = enum.auto()  # no new F/T sample within the staleness limit
    IMU_STALE = enum.auto()  # no new IMU sample within the staleness limit
    JOINTS_STALE = enum.auto()  # joint readings older than the staleness limit
    FAULT = enum.auto()  # a device reports an error (servo hardware error, sensor status)
    DISCONNECTED = enum.auto()  # a port is gone; commands are refused until it returns
    WATCHDOG = enum.auto()  # no command within the watchdog time: holding position


#: Health in which a backend holds the arm with its own command (rule 6 steps aside).
_NOT_DRIVEN = (Health.WATCHDOG | Health.DISCONNECTED | Health.JOINTS_STALE).value


class FtStatus(enum.IntFlag):
    """Status bits of a Bota-style F/T sample (``docs/protocols/bota-serial.md``)."""

    OK = 0
    APP_TOO_SLOW = 1 << 0  # the device's application took too long: raise the sinc length
    OVER_RANGE = 1 << 1
    INVALID = 1 << 2  # saturation, short or open circuit
    RAW = 1 << 3  # strain-gauge values instead of forces


@dataclass(frozen=True)
class WrenchSample:
    """One F/T sample.

    wrench: (6,) ``[fx, fy, fz, tx, ty, tz]`` N, N m, in the sensor frame; the wrench the part
    beyond the sensor (tool side) exerts on the sensor. A tool hanging at rest reads its weight.
    """

    t_us: int
    wrench: np.ndarray
    status: FtStatus = FtStatus.OK
    temperature_c: float = 25.0


@dataclass(frozen=True)
class WrenchBatch:
    """The F/T samples a backend received since the previous ``Robot.wrench_samples()`` call.

    samples: oldest first, each as ``RobotState.wrench`` would give it. lost: samples that
    overflowed the backend's bounded queue meanwhile (received, never handed over). rejected:
    samples the backend dropped as implausible meanwhile (never published; e.g. a serial frame
    that passed its CRC with reserved status bits set).
    """

    samples: tuple[WrenchSample, ...]
    lost: int = 0
    rejected: int = 0


@dataclass(frozen=True)
class ImuSample:
    """One IMU sample, IMU frame.

    specific_force: (3,) m/s^2, ``R^T (a - g)`` (reads +9.81 along world up at rest).
    angular_rate: (3,) rad/s.
    orientation: (4,) ``[w, x, y, z]`` world_T_imu rotation, or ``None`` if not provided.
    """

    t_us: int
    specific_force: np.ndarray
    angular_rate: np.ndarray
    orientation: np.ndarray | None = None


@dataclass(frozen=True)
class RobotState:
    """A consistent snapshot of the arm.

    q: (6,) rad, qd: (6,) rad/s, tau: (6,) N m (the effort applied at each joint).
    """

    t_us: int
    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    wrench: WrenchSample | None = None
    imu: ImuSample | None = None
    health: Health = Health.OK


def robot_state(
    t_us: int,
    q: np.ndarray,
    qd: np.ndarray,
    tau: np.ndarray,
    wrench: WrenchSample | None = None,
    imu: ImuSample | None = None,
    health: Health = Health.OK,
) -> RobotState:
    """``RobotState(...)`` at about half the cost, for a backend's ``read`` (a control-cycle hot
    path): the frozen instance's fields are filled directly, with no other difference."""
    state = object.__new__(RobotState)
    fields = state.__dict__
    fields["t_us"], fields["q"], fields["qd"], fields["tau"] = t_us, q, qd, tau
    fields["wrench"], fields["imu"], fields["health"] = wrench, imu, health
    return state


@dataclass(frozen=True)
class JointCommand:
    """Per-joint command for ``u = tau_ff + kp (q_des - q) + kd (qd_des - qd)``.

    q_des: (6,) rad, qd_des: (6,) rad/s, tau_ff: (6,) N m, kp: (6,) N m/rad, kd: (6,) N m s/rad.
    A command validated against ``JointLimits`` (``Robot.write``) whose law needs the joint-limit
    wall (``twin.safety`` rule 5) carries those limits privately; ``joint_torque`` applies it.
    """

    q_des: np.ndarray
    qd_des: np.ndarray = field(default_factory=lambda: np.zeros(6))
    tau_ff: np.ndarray = field(default_factory=lambda: np.zeros(6))
    kp: np.ndarray = field(default_factory=lambda: np.zeros(6))
    kd: np.ndarray = field(default_factory=lambda: np.zeros(6))

    @classmethod
    def from_rows(cls, rows: np.ndarray) -> JointCommand:
        """A command whose fields are the rows of ``rows``, (5, n) float64 in the order
        ``q_des, qd_des, tau_ff, kp, kd``: writing into ``rows`` changes the command.

        For a caller that sends the same staging array every cycle: ``validated`` then copies
        the five fields in one step. Raises ``ValueError`` for another shape or dtype.
        """
        if not (
            isinstance(rows, np.ndarray)
            and rows.dtype == np.float64
            and rows.ndim == 2
            and rows.shape[0] == len(COMMAND_FIELDS)
        ):
            raise ValueError(
                f"JointCommand.from_rows needs a float64 array of shape (5, n) (rows {COMMAND_FIELDS}), "
                f"got {getattr(rows, 'dtype', type(rows).__name__)} {np.shape(rows)}"
            )
        command = cls(*rows)
        object.__setattr__(command, "_rows", rows)
        return command

    @property
    def rows(self) -> np.ndarray | None:
        """The five fields as one (5, n) float64 array, rows ``q_des, qd_des, tau_ff, kp, kd``
        (a validated command's read-only copy, or ``from_rows``' staging array); None for a
        command built from separate fields."""
        return self.__dict__.get("_rows")

    def __getstate__(self) -> dict[str, object]:
        """Pickles and copies keep the five fields only: they are not tied to a staging array."""
        return {name: getattr(self, name) for name in COMMAND_FIELDS}

    def __getattr__(self, name: str) -> np.ndarray:
        """A field of a validated command: a row of its checked array, made on first use (a
        backend that reads the rows at once, as the sim does, never pays for the five views)."""
        index = _FIELD_ROW.get(name)
        rows = self.__dict__.get("_rows")
        if index is None or rows is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        view = self.__dict__[name] = rows[index]
        return view

    def validated(
        self,
        joint_names: tuple[str, ...],
        effort_limits: np.ndarray,
        limits: JointLimits | None = None,
    ) -> JointCommand:
        """A read-only float copy with shapes checked, bad values refused and ``tau_ff`` clamped;
        with ``limits``, also held inside the joint limits (``twin.safety``, what ``Robot.write``
        does).

        Raises ``ValueError`` naming the field and joint that is wrong (wrong shape, non-finite
        value, negative gain). One pass over Python floats on the fast path (a handful of values,
        where numpy's per-call cost dominates): this runs every control cycle.
        """
        n = len(joint_names)
        rows = self.rows  # set by from_rows: one float64 (5, m) array
        if rows is not None:
            stacked = rows.copy()
        else:
            try:
                stacked = np.array(
                    (self.q_des, self.qd_des, self.tau_ff, self.kp, self.kd), dtype=float
                )
            except (ValueError, TypeError):
                stacked = None
        if stacked is None or stacked.shape != (len(COMMAND_FIELDS), n):
            self._raise_shape_error(n)
        q, qd, tau, kp, kd = stacked.tolist()
        if (
            limits is not None
            and limits.effort is effort_limits
            and limits.holds(q, qd, tau, kp, kd)
        ):
            wall = False  # the common case: every check and every rule holds already
        else:
            values = [*q, *qd, *tau, *kp, *kd]
            wall = self._checked_slow(stacked, values, joint_names, effort_limits, limits)
        stacked.setflags(write=False)
        out = object.__new__(JointCommand)  # frozen: fill the instance dict directly
        fields = out.__dict__
        fields["_rows"] = stacked  # the fields are its rows (``__getattr__``), as from_rows
        if wall:
            fields["_wall"] = limits
        return out

    def _checked_slow(
        self,
        stacked: np.ndarray,
        values: list[float],
        joint_names: tuple[str, ...],
        effort_limits: np.ndarray,
        limits: JointLimits | None,
    ) -> bool:
        """``validated``'s checks one at a time: raise on a bad value, clamp ``tau_ff`` and apply
        the limits in place (``stacked`` and ``values`` alike); True if rule 5 is needed."""
        n = len(joint_names)
        try:
            finite = math.isfinite(math.fsum(values))  # nan or inf anywhere makes the sum so
        except (OverflowError, ValueError):  # inf - inf, or a finite sum that overflows:
            finite = False  # let the slow path find (or not) the bad value
        if not finite or min(values[3 * n :]) < 0.0:
            self._raise_value_error(stacked, joint_names)
        if any(map(operator.gt, map(abs, values[2 * n : 3 * n]), effort_limits.tolist())):
            np.clip(stacked[2], -effort_limits, effort_limits, out=stacked[2])  # tau_ff
            values[2 * n : 3 * n] = stacked[2].tolist()
        return limits is not None and limits.shape(stacked, values)

    def _raise_shape_error(self, n: int) -> None:
        for name in COMMAND_FIELDS:
            shape = np.shape(getattr(self, name))
            if shape != (n,):
                raise ValueError(
                    f"JointCommand.{name} must have shape ({n},), one value per joint, got {shape}"
                )
        for name in COMMAND_FIELDS:
            try:
                np.asarray(getattr(self, name), dtype=float)
            except (ValueError, TypeError) as e:
                raise ValueError(
                    f"JointCommand.{name} must hold numbers, got {getattr(self, name)!r}"
                ) from e
        raise ValueError(f"JointCommand fields must be numeric arrays of shape ({n},)")

    @staticmethod
    def _raise_value_error(stacked: np.ndarray, joint_names: tuple[str, ...]) -> None:
        for i, name in enumerate(COMMAND_FIELDS):
            bad = np.flatnonzero(~np.isfinite(stacked[i]))
            if bad.size:
                j = int(bad[0])
                raise ValueError(
                    f"JointCommand.{name} for joint {joint_names[j]!r} (index {j}) is "
                    f"{stacked[i, j]}; expected a finite number"
                )
            if name in ("kp", "kd") and (stacked[i] < 0.0).any():
                j = int(np.flatnonzero(stacked[i] < 0.0)[0])
                raise ValueError(
                    f"JointCommand.{name} for joint {joint_names[j]!r} is {stacked[i, j]}; "
                    "expected a gain >= 0"
                )


def joint_torque(
    command: JointCommand, q: np.ndarray, qd: np.ndarray, effort_limits: np.ndarray
) -> np.ndarray:
    """The control law of both backends, clamped: (6,) N m.

    ``u = tau_ff + kp (q_des - q) + kd (qd_des - qd)``, clipped to ``+-effort_limits``, and to
    the joint-limit wall for a command that needs it (``twin.safety`` rule 5). q: (6,) rad,
    qd: (6,) rad/s, measured.
    """
    u = command.tau_ff + command.kp * (command.q_des - q) + command.kd * (command.qd_des - qd)
    u = np.clip(u, -effort_limits, effort_limits)
    wall = command.__dict__.get("_wall")
    return u if wall is None else wall.wall(command.kp, command.kd, u, q, qd)


def torque_law(
    command: JointCommand, effort_limits: np.ndarray
) -> Callable[[Sequence[float], Sequence[float]], list[float]]:
    """``joint_torque`` of one command as a call on Python floats, for a loop that evaluates
    the law of the same command many times (the sim's physics steps).

    ``law(q, qd)`` with q (n,) rad and qd (n,) rad/s as sequences of floats returns the n
    torques (N m) as a list, bit for bit what ``joint_torque`` gives (the same operations in
    the same order, with no numpy call per evaluation). A command that needs the joint-limit
    wall (rule 5) goes through ``joint_torque`` itself.
    """
    if "_wall" in command.__dict__:

        def walled(q: Sequence[float], qd: Sequence[float]) -> list[float]:
            return joint_torque(command, np.array(q), np.array(qd), effort_limits).tolist()

        return walled
    rows = command.rows  # a validated command's fields are rows of one array
    if rows is not None:
        q_des, qd_des, tau_ff, kp, kd = rows.tolist()
    else:
        q_des, qd_des, tau_ff, kp, kd = (
            np.asarray(getattr(command, f), float).tolist() for f in COMMAND_FIELDS
        )
    effort = np.asarray(effort_limits, float)
    terms = tuple(zip(tau_ff, kp, q_des, kd, qd_des, (-effort).tolist(), effort.tolist()))

    def law(q: Sequence[float], qd: Sequence[float]) -> list[float]:
        return [
            min(max(t + p * (a - x) + d * (b - v), lo), hi)
            for (t, p, a, d, b, lo, hi), x, v in zip(terms, q, qd)
        ]

    return law


class CommandWatchdog:
    """Tracks the time of the last command; ``expired`` once ``timeout_s`` passes without one."""

    def __init__(self, timeout_s: float | None) -> None:
        if timeout_s is not None and not (np.isfinite(timeout_s) and timeout_s > 0.0):
            raise ValueError(
                f"watchdog timeout must be a positive number of seconds, got {timeout_s}"
            )
        self.timeout_us = None if timeout_s is None else round(timeout_s * 1e6)
        self._last_us: int | None = None

    def feed(self, t_us: int) -> None:
        self._last_us = t_us

    @property
    def last_us(self) -> int | None:
        """When the last command arrived (``feed``), or None before the first."""
        return self._last_us

    def expired(self, t_us: int) -> bool:
        if self.timeout_us is None or self._last_us is None:
            return False
        return t_us - self._last_us > self.timeout_us


def hold_command(
    q: np.ndarray, previous: JointCommand | None, kp: np.ndarray, kd: np.ndarray
) -> JointCommand:
    """A command that holds joint positions ``q`` (6,) rad with zero velocity.

    Per joint, the previous command's gains where it had stiffness (``kp > 0``), else the hold
    gains ``kp``/``kd`` (6,): a joint the previous command drove in torque or velocity control
    is held too, never left limp.
    """
    kp, kd = np.asarray(kp, float), np.asarray(kd, float)
    if previous is not None:
        stiff = previous.kp > 0.0
        kp, kd = np.where(stiff, previous.kp, kp), np.where(stiff, previous.kd, kd)
    return JointCommand(q_des=np.array(q, dtype=float), kp=kp, kd=kd)


@dataclass(frozen=True)
class ControlDiagnostics:
    """How well a backend keeps its control period (``Robot.diagnostics()``).

    period_s: the configured control period, s. cycles: ``step()`` calls so far. overruns:
    periods missed because a cycle took longer than the period (always 0 in sim, where time is
    simulated). achieved_rate_hz: cycles per second of the backend's own clock (wall time on
    hardware, simulated time in sim), from the start of the first ``step()`` to the end of the
    last. failed_reads: cycles whose joint reading failed (always 0 in sim). worst_cycle_s: the
    longest time between the ends of two consecutive ``step()`` calls, s (nan before two).
    """

    period_s: float
    cycles: int
    overruns: int
    achieved_rate_hz: float
    failed_reads: int = 0
    worst_cycle_s: float = math.nan
    implausible_readings: dict[str, int] = field(default_factory=dict)  # refused, by reason

    @property
    def rate_hz(self) -> float:
        """The configured rate, Hz."""
        return 1.0 / self.period_s


class FtSensorDevice(abc.ABC):
    """Device-level settings of a Bota-style F/T sensor, the same on both backends.

    The device speaks the sensor's ASCII configuration commands (``docs/protocols/bota-serial.md``):
    ``C`` config mode, ``f,<sinc>,<chop>,<fast>,<fir_disable>`` filter and rate,
    ``b,<six offsets>`` offsets, ``m<row>,<six values>`` calibration rows, ``R`` run mode.
    """

    @abc.abstractmethod
    def command(self, text: str, timeout_s: float = 1.0) -> str:
        """Send one configuration command; returns the device's reply (e.g. ``r,0,f,0``)."""

    @property
    @abc.abstractmethod
    def sinc_length(self) -> int:
        """The current sinc filter length; the output rate is ``51200 / sinc_length`` Hz."""

    @property
    def rate_hz(self) -> float:
        return 51200.0 / self.sinc_length


class Robot(abc.ABC):
    """A six-axis arm: read a state, write a command, step one control period."""

    #: The kinematic model (from the shipped URDF), joint names and limits.
    model: ArmModel
    #: Control period in seconds: the time one ``step()`` advances.
    control_period_s: float
    #: Whether ``write`` holds commands inside the joint limits (``twin.safety``). Always on for
    #: a robot a user drives; off only for a sim used as a device emulator's plant (raw physics).
    limits_enforced: bool = True
    #: Whether this backend's ``step`` calls ``_before_step`` (rule 6 of ``twin.safety``: the
    #: ``q_des`` ramp and the velocity watch). Only then does ``write`` limit the target's rate.
    ramps_targets: bool = False

    @abc.abstractmethod
    def read(self) -> RobotState:
        """A consistent snapshot of joints and the latest sensor samples."""

    def write(self, command: JointCommand) -> None:
        """Validate ``command``, hold it inside the joint limits and keep it in force until the
        next ``write``.

        The limits (``twin.safety``, the same on every backend): ``q_des`` clamped to the URDF
        limits moved 0.02 rad inwards, ``qd_des`` and ``tau_ff`` to the velocity and effort
        limits, a feed-forward that would push a joint past a limit cut; on a backend with
        ``ramps_targets``, ``q_des`` also moves at most one period's step at the velocity limits
        and, on an under-damped joint, no faster than the law can hold to them (rule 6: the
        rest of a farther ``q_des`` follows at each ``step()``). Raises ``ValueError`` (naming
        joint and field) for a wrong shape or a non-finite value; the previous command then
        stays in force.
        """
        model = self.model
        limits = limits_for(model) if self.limits_enforced else None
        checked = command.validated(model.joint_names, model.effort_limits, limits)
        if limits is None or not self.ramps_targets:
            self._apply(checked)
            return
        ramp = self._rate_rules()[0]
        saved = ramp.ref, ramp.target, ramp.fresh
        now = ramp.limit(checked, self._joint_reading)
        try:
            self._apply(now)
        except BaseException:
            ramp.ref, ramp.target, ramp.fresh = saved  # refused: the previous command stays
            raise
        ramp.accept(now, checked)

    def _joint_reading(self) -> tuple[list[float], list[float]]:
        """The latest ``(q, qd)`` (n,) rad, rad/s, as lists (rule 6's arithmetic)."""
        state = self.read()
        return state.q.tolist(), state.qd.tolist()

    def _rate_rules(self) -> tuple[TargetRamp, VelocityWatch]:
        """This robot's ramp of ``q_des`` and velocity watch (``twin.safety`` rule 6)."""
        rules = self.__dict__.get("_speed_rules")
        if rules is None:
            model = self.model
            limits = limits_for(model)
            rules = self.__dict__["_speed_rules"] = (
                TargetRamp(model, limits, self.control_period_s),
                VelocityWatch(limits, model.joint_names),
            )
        return rules

    def _before_step(self) -> None:
        """Rule 6 at the start of each ``step()`` of a backend with ``ramps_targets``: check the
        measured joint speeds (a velocity-limit event per excursion, ``twin.events``), then move
        a ramped ``q_des`` one period on. A ramp step the backend refuses (a fault, a lost port:
        it holds the arm itself) ends the ramp; the next command starts from the measured
        position."""
        if not self.limits_enforced:
            return
        ramp, watch = self._rate_rules()
        state = self.read()
        qd = state.qd.tolist()
        for event in watch.check(state.t_us, state.q.tolist(), qd):
            events.publish("safety", "velocity_limit", **dataclasses.asdict(event))
        if state.health.value & _NOT_DRIVEN:  # the backend holds the arm itself (int: cheap)
            ramp.forget()
            return
        now = ramp.advance(state.q.tolist(), qd)
        if now is None:
            return
        dog = getattr(self, "_watchdog", None)  # the backends' CommandWatchdog, if any
        fed = dog.last_us if isinstance(dog, CommandWatchdog) else None
        try:
            self._apply(now)
        except Exception:  # the backend refused it and holds: its own health says why
            ramp.forget()
            return
        finally:
            if fed is not None:  # a ramp step is not a command: the watchdog counts on
                dog.feed(fed)
        ramp.ref = now.rows[0].tolist()

    def velocity_events(self) -> tuple[VelocityEvent, ...]:
        """Every velocity-limit excursion measured so far (``twin.safety.VelocityWatch``)."""
        rules = self.__dict__.get("_speed_rules")
        return () if rules is None else tuple(rules[1].events)

    def _forget_ramp(self) -> None:
        """The next command ramps from the measured position (a backend's reset, reconnection)."""
        rules = self.__dict__.get("_speed_rules")
        if rules is not None:
            rules[0].forget()
            rules[1].restart()

    @abc.abstractmethod
    def _apply(self, command: JointCommand) -> None:
        """Take a validated command into force."""

    @abc.abstractmethod
    def step(self) -> None:
        """Advance one control period (physics substeps in sim; a real-time wait on hardware)."""

    @property
    def ft_device(self) -> FtSensorDevice | None:
        """The F/T sensor's device-level settings, or ``None`` if there is no sensor."""
        return None

    def wrench_samples(self) -> WrenchBatch:
        """Every F/T sample received since the previous call, oldest first (``WrenchBatch``).

        The sensor may run faster than the control loop (800 Hz against 250 Hz): ``read()`` gives
        only the latest sample, this gives all of them, for logging. Backends keep a bounded
        queue and count what overflows it in ``lost``. This default, for a backend without a
        queue, hands over the latest sample of ``read()`` when it is new.
        """
        sample = self.read().wrench
        if sample is None or sample.t_us == getattr(self, "_wrench_handed_t_us", None):
            return WrenchBatch(())
        self._wrench_handed_t_us = sample.t_us
        return WrenchBatch((sample,))

    def diagnostics(self) -> ControlDiagnostics:
        """The control rate this backend has achieved so far, with its overruns.

        Backends override it; this default says only that nothing was measured (nan rate).
        """
        return ControlDiagnostics(self.control_period_s, 0, 0, math.nan)

    def close(self) -> None:  # noqa: B027 - optional override
        """Release resources; safe to call twice."""

    def __enter__(self) -> Robot:
        return self

    def __exit__(self, *exc: object) -> None:
        with held_signals():  # a close (the arm's park) is never cut short by a signal
            self.close()
