"""Physics sources behind the device emulators: what the emulated servos move and the sensors read.

One small interface, ``PhysicsSource``: the servos set a per-joint ``Drive`` (limp, a current, or
the servo's position loop) and read the joint state; the F/T and IMU emulators take the sensor
samples. Time advances only through ``advance_to(t_us)``: a ``RealTimeRunner`` calls it from the
wall clock, or (lock-step) the servo emulator calls it before answering a read.

- ``IdealSource``: per joint a rigid inertia with viscous damping, integrated at 0.5 ms; a
  deterministic wrench and a resting IMU.
- ``RobotSource``: wraps any ``twin.robot.Robot`` (``sim.PyBulletRobot``), stepping it with the
  servos' drives as its joint command, and reports its F/T and IMU samples.
"""

from __future__ import annotations

import abc
import bisect
import collections
import enum
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from twin.hardware.emulator import _compiled
from twin.hardware.emulator.ft_device import IdealFtDevice
from twin.hardware.errors import InvalidArgumentError

from twin.robot import FtSensorDevice, ImuSample, JointCommand, Robot, WrenchSample

_HISTORY = 2048
STANDARD_GRAVITY = 9.80665


class DriveKind(enum.Enum):
    LIMP = "limp"  # torque off
    CURRENT = "current"  # a joint torque from the goal current
    PD = "pd"  # the servo's position (or velocity) loop


@dataclass(frozen=True)
class Drive:
    """What one servo does to its joint. torque N m (CURRENT); q_goal rad, qd_goal rad/s, kp N m/rad,
    kd N m s/rad and torque_limit N m (PD): ``clip(kp (q_goal - q) + kd (qd_goal - qd))``."""

    kind: DriveKind = DriveKind.LIMP
    torque: float = 0.0
    q_goal: float = 0.0
    qd_goal: float = 0.0
    kp: float = 0.0
    kd: float = 0.0
    torque_limit: float = math.inf


LIMP = Drive()


def drive_with_goal(fields: dict, q_goal: float) -> Drive:
    """``Drive(**fields)`` with ``q_goal`` rad, filled directly (``Drive`` is frozen and has no
    checks to run, so without its constructor): what a new Goal Position makes of a holding
    servo's drive (``fields``: that drive's ``__dict__``). The cycle's fast paths use it."""
    out = object.__new__(Drive)
    out.__dict__.update(fields, q_goal=q_goal)
    return out


class PhysicsSource(abc.ABC):
    """Joint physics and sensor samples for the emulators (module doc). Thread safe: every method
    takes ``lock``; ``changed`` is notified after each advance that brought a sensor sample,
    ``ft_changed`` / ``imu_changed`` after one that brought a sample of theirs."""

    n_joints = 6

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.ft_changed = threading.Condition(self.lock)  # a new F/T sample
        self.imu_changed = threading.Condition(self.lock)  # a new IMU sample
        self.t_us = 0
        self._drive_list = [LIMP] * self.n_joints
        #: (n,) rad: the goals of the last ``set_goal_positions`` not yet in ``_drive_list``
        #: (None: none pending); ``_drives`` folds them in when the drives are asked for.
        self._pending_q: np.ndarray | None = None
        self._ft: collections.deque[WrenchSample] = collections.deque(maxlen=_HISTORY)
        self._imu: collections.deque[ImuSample] = collections.deque(maxlen=_HISTORY)
        #: ``(t_us, callback)``: an advance past ``t_us`` stops there and calls ``callback(t_us)``
        #: first (``set_alarm``); None: none set.
        self._alarm: tuple[int, Callable[[int], None]] | None = None

    @property
    @abc.abstractmethod
    def ft_device(self) -> FtSensorDevice:
        """The F/T sensor's configuration command interface (call it with ``lock`` held)."""

    @abc.abstractmethod
    def _advance(self, t_us: int) -> None:
        """Integrate up to ``t_us`` (lock held); append new sensor samples."""

    @abc.abstractmethod
    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of ``(q, qd, tau)``, (6,) each: rad, rad/s, N m."""

    def joint_lists(self) -> tuple[list[float], list[float], list[float]]:
        """``joint_state`` as Python lists ``(q, qd, tau)``."""
        q, qd, tau = self.joint_state()
        return q.tolist(), qd.tolist(), tau.tolist()

    def state_rows(self) -> np.ndarray:
        """``joint_state`` as one (3, n) float64 array (a copy): rows q, qd, tau."""
        return np.array(self.joint_state(), float)

    def advance_to(self, t_us: int) -> None:
        """Integrate to ``t_us``; the sensor emulators waiting are woken only when a new sample
        of theirs arrived (``ft_changed``, ``imu_changed``; ``changed`` for either). An alarm
        due on the way (``set_alarm``) integrates to its time first and runs there."""
        with self.changed:
            if t_us > self.t_us:
                n_ft, n_imu = self._ft_count, self._imu_count
                while (alarm := self._alarm) is not None and alarm[0] <= t_us:
                    self._alarm = None
                    if alarm[0] > self.t_us:
                        self._advance(int(alarm[0]))
                    alarm[1](max(alarm[0], self.t_us))  # may set drives, and a later alarm
                if t_us > self.t_us:
                    self._advance(int(t_us))
                ft, imu = n_ft != self._ft_count, n_imu != self._imu_count
                if ft:
                    self.ft_changed.notify_all()
                if imu:
                    self.imu_changed.notify_all()
                if ft or imu:
                    self.changed.notify_all()

    @property
    def _ft_count(self) -> int:
        return self._ft[-1].t_us if self._ft else -1

    @property
    def _imu_count(self) -> int:
        return self._imu[-1].t_us if self._imu else -1

    @property
    def _drives(self) -> list[Drive]:
        """Every joint's ``Drive`` (joint order), the pending goals of ``set_goal_positions``
        folded in (call it with ``lock`` held)."""
        q = self._pending_q
        if q is not None:
            self._pending_q = None
            self._drive_list = [
                drive_with_goal(d.__dict__, g)
                for d, g in zip(self._drive_list, q.tolist(), strict=True)
            ]
        return self._drive_list

    def set_alarm(self, t_us: int, callback: Callable[[int], None]) -> None:
        """Call ``callback(t)`` (lock held) when an advance reaches ``t_us``, with the physics
        integrated to ``t_us`` (as near as the source's step allows; ``t`` is ``t_us``, or the
        source's time if that is already later; an alarm it sets must be later than ``t``): a
        servo-side event due at a time of its own (the servos' Bus Watchdog), exact in physics
        time however late the thread that advances it runs. Replaces the alarm set before."""
        with self.lock:
            self._alarm = (int(t_us), callback)

    def set_drive(self, joint: int, drive: Drive) -> None:
        with self.lock:
            self._drives[joint] = drive

    def set_goal_positions(self, q_goal: np.ndarray) -> None:
        """A cycle's new goals ``q_goal`` (n,) rad, joint order, for joints that all hold a
        position (a PD drive each, which keeps all but its goal): taken in one copy, the
        joints' ``Drive`` objects built only when they are asked for (``drive``)."""
        with self.lock:
            self._pending_q = np.array(q_goal, float)

    def set_goal(self, joint: int, drive: Drive) -> None:
        """``set_drive`` for a ``drive`` that differs from the joint's current one in ``q_goal``
        only (a servo's new Goal Position: the cycle's fast path)."""
        self.set_drive(joint, drive)

    def set_goals(self, goals: list[tuple[int, Drive]]) -> None:
        """``set_goal`` of each ``(joint, drive)``, under the lock once (a cycle's goals)."""
        with self.lock:
            for joint, drive in goals:
                self.set_goal(joint, drive)

    def drive(self, joint: int) -> Drive:
        with self.lock:
            return self._drives[joint]

    def ft_samples_after(self, t_us: int) -> list[WrenchSample]:
        """F/T samples newer than ``t_us``, oldest first."""
        with self.lock:
            out = []
            for s in reversed(self._ft):
                if s.t_us <= t_us:
                    break
                out.append(s)
            return out[::-1]

    def latest_ft_t_us(self) -> int:
        with self.lock:
            return self._ft[-1].t_us if self._ft else -1

    def imu_sample_at(self, t_us: int) -> ImuSample | None:
        """The latest IMU sample at or before ``t_us`` (sample and hold), or ``None``."""
        with self.lock:
            history = self._imu
            if history and history[-1].t_us <= t_us:  # the common case: the newest
                return history[-1]
            times = [s.t_us for s in history]
            k = bisect.bisect_right(times, t_us)
            return history[k - 1] if k else None

    def close(self) -> None:  # noqa: B027 - optional override
        """Release resources; safe to call twice."""


class DriveArrays:
    """The drives of all joints as arrays, for a vectorised torque: ``(n,)`` each, the rows of
    one (6, n) float64 array ``rows`` (torque, kp, kd, q_goal, qd_goal, limit: the compiled
    plant's ``drives``)."""

    def __init__(self, drives: list[Drive]) -> None:
        current = np.array([d.kind is DriveKind.CURRENT for d in drives])
        pd = np.array([d.kind is DriveKind.PD for d in drives])
        self.rows = np.empty((6, len(drives)))
        self.torque, self.kp, self.kd, self.q_goal, self.qd_goal, self.limit = self.rows
        self.torque[:] = np.where(current, [d.torque for d in drives], 0.0)
        self.kp[:] = np.where(pd, [d.kp for d in drives], 0.0)
        self.kd[:] = np.where(pd, [d.kd for d in drives], 0.0)
        self.q_goal[:] = [d.q_goal for d in drives]
        self.qd_goal[:] = [d.qd_goal for d in drives]
        self.limit[:] = np.where(pd, [d.torque_limit for d in drives], np.inf)

    def torques(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """(n,) N m: the current drives' torque plus the clipped PD loops at state ``q``, ``qd``."""
        u = self.kp * (self.q_goal - q) + self.kd * (self.qd_goal - qd)
        return self.torque + np.minimum(np.maximum(u, -self.limit), self.limit)


def _clip(x: float, limit: float) -> float:
    """``np.minimum(np.maximum(x, -limit), limit)`` on floats (a nan stays a nan)."""
    if x != x:
        return x
    return limit if x > limit else -limit if x < -limit else x


class IdealSource(PhysicsSource):
    """Six independent joints ``inertia * qdd = tau - damping * qd`` (no gravity), clamped to
    ``effort_limits``; F/T ``wrench0 + amplitude * sin(2 pi t / period)`` through an
    ``IdealFtDevice``; an IMU at rest (specific force +g along z, zero rate, identity)."""

    DT_US = 500
    MAX_STEPS_PER_ADVANCE = 4000  # beyond 2 s behind, time jumps (the state is held)

    def __init__(
        self,
        initial_q: np.ndarray | None = None,
        *,
        inertia: float | np.ndarray = 0.05,
        damping: float | np.ndarray = 0.5,
        effort_limits: np.ndarray | None = None,
        sinc_length: int = 256,
        imu_rate_hz: float = 200.0,
        wrench0: tuple[float, ...] = (0.5, -0.25, 9.81, 0.02, -0.01, 0.0),
        amplitude: tuple[float, ...] = (0.2, 0.1, 0.3, 0.01, 0.01, 0.005),
        wave_period_s: float = 2.0,
    ) -> None:
        super().__init__()
        n = self.n_joints
        self._state = np.zeros((3, n))  # q rad, qd rad/s, tau N m (the compiled plant's state)
        self._q, self._qd, self._tau = self._state
        if initial_q is not None:
            self._q[:] = np.array(initial_q, float).reshape(n)
        self._plant = np.empty((3, n))  # effort limit N m, damping, inertia (its plant)
        self._effort, self._damping, self._inertia = self._plant
        self._inertia[:] = np.broadcast_to(np.asarray(inertia, float), (n,))
        self._damping[:] = np.broadcast_to(np.asarray(damping, float), (n,))
        self._effort[:] = np.inf if effort_limits is None else np.asarray(effort_limits, float)
        kernels = _compiled.kernels()
        self._kernel = None if kernels is None else kernels.integrate
        if np.any(self._inertia <= 0) or np.any(self._damping < 0):
            raise InvalidArgumentError("inertia must be > 0 and damping >= 0 per joint")
        self._device = IdealFtDevice(sinc_length)
        self._ft_restarts = self._device.restarts
        self._ft_next_k = 1
        self._ft_origin_us = 0
        self._imu_period_us = round(1e6 / imu_rate_hz)
        self._imu_next_us = self._imu_period_us
        self._w0 = np.asarray(wrench0, float)
        self._amp = np.asarray(amplitude, float)
        self._omega = 2.0 * math.pi / wave_period_s
        self._arrays: DriveArrays | None = None

    @property
    def ft_device(self) -> IdealFtDevice:
        return self._device

    def set_drive(self, joint: int, drive: Drive) -> None:
        with self.lock:
            old, self._drives[joint] = self._drives[joint], drive
            arrays = self._arrays
            if arrays is not None and replace(old, q_goal=drive.q_goal) == drive:
                arrays.q_goal[joint] = drive.q_goal  # a new goal only: the arrays stay
            else:
                self._arrays = None

    def set_goal(self, joint: int, drive: Drive) -> None:
        with self.lock:
            self._drives[joint] = drive
            if self._arrays is not None:
                self._arrays.q_goal[joint] = drive.q_goal

    def set_goals(self, goals: list[tuple[int, Drive]]) -> None:
        with self.lock:
            drives, arrays = self._drives, self._arrays
            for joint, drive in goals:
                drives[joint] = drive
                if arrays is not None:
                    arrays.q_goal[joint] = drive.q_goal

    def set_goal_positions(self, q_goal: np.ndarray) -> None:
        with self.lock:
            arrays = self._arrays
            if arrays is None:
                self._pending_q = np.array(q_goal, float)
            else:  # the arrays' goal row is the one copy, and the pending goals
                arrays.q_goal[:] = q_goal
                self._pending_q = arrays.q_goal

    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with self.lock:
            return self._q.copy(), self._qd.copy(), self._tau.copy()

    def joint_lists(self) -> tuple[list[float], list[float], list[float]]:
        with self.lock:
            return self._state.tolist()

    def state_rows(self) -> np.ndarray:
        with self.lock:
            return self._state.copy()

    def true_wrench(self, t_us: int) -> np.ndarray:
        """The wrench (6,) N, N m the ideal sensor measures at ``t_us``, before device settings."""
        return self._w0 + self._amp * math.sin(self._omega * t_us * 1e-6)

    def _advance(self, t_us: int) -> None:
        dev = self._device
        if dev.restarts != self._ft_restarts:  # R, I or #: a new output grid from now
            self._ft_restarts = dev.restarts
            self._ft_origin_us, self._ft_next_k = self.t_us, 1
        steps = (t_us - self.t_us) // self.DT_US
        dt = self.DT_US * 1e-6
        arrays = self._arrays
        if arrays is None:
            arrays = self._arrays = DriveArrays(self._drives)
        steps = min(steps, self.MAX_STEPS_PER_ADVANCE)
        if steps > 0:
            self._integrate(arrays, steps, dt)
        self.t_us = t_us
        self._sample_ft(t_us)
        while self._imu_next_us <= t_us:
            self._imu.append(
                ImuSample(
                    t_us=self._imu_next_us,
                    specific_force=np.array([0.0, 0.0, STANDARD_GRAVITY]),
                    angular_rate=np.zeros(3),
                    orientation=np.array([1.0, 0.0, 0.0, 0.0]),
                )
            )
            self._imu_next_us += self._imu_period_us

    def _integrate(self, arrays: DriveArrays, steps: int, dt: float) -> None:
        """``steps`` semi-implicit Euler steps of ``dt`` s: compiled where numba is
        (``_compiled.integrate``), else ``_integrate_floats``; the same state either way."""
        if self._kernel is not None:
            self._kernel(self._state, arrays.rows, self._plant, steps, dt)
        else:
            self._integrate_floats(arrays, steps, dt)

    def _integrate_floats(self, arrays: DriveArrays, steps: int, dt: float) -> None:
        """``_integrate`` on Python floats: per joint the same float64 operations, in the same
        order, as ``DriveArrays.torques`` and the clamp to the effort limits would do on arrays
        (bit for bit the same state): six joints, a few steps a read, where numpy's per-call
        cost is all the cost."""
        q, qd, tau = self._q.tolist(), self._qd.tolist(), self._tau.tolist()
        joints = list(
            zip(
                *(
                    a.tolist()
                    for a in (
                        arrays.kp,
                        arrays.kd,
                        arrays.q_goal,
                        arrays.qd_goal,
                        arrays.torque,
                        arrays.limit,
                        self._effort,
                        self._damping,
                        self._inertia,
                    )
                )
            )
        )
        for j, (kp, kd, q_goal, qd_goal, torque, limit, effort, damping, inertia) in enumerate(
            joints
        ):
            qj, qdj, tj = q[j], qd[j], tau[j]
            for _ in range(steps):
                u = kp * (q_goal - qj) + kd * (qd_goal - qdj)
                tj = torque + _clip(u, limit)
                tj = _clip(tj, effort)
                qdj += dt * (tj - damping * qdj) / inertia
                qj += dt * qdj
            q[j], qd[j], tau[j] = qj, qdj, tj
        self._state[:] = q, qd, tau

    def _sample_ft(self, t_us: int) -> None:
        dev = self._device
        if not dev.streaming:
            return
        period_us = dev.sinc_length * 1e6 / 51200.0
        ts = self._ft_origin_us + round(self._ft_next_k * period_us)
        if ts > t_us:  # the common case: no sample due yet
            return
        status = dev.status_bits()
        while ts <= t_us:
            self._ft.append(WrenchSample(ts, dev.output(self.true_wrench(ts)), status, 30.0))
            self._ft_next_k += 1
            ts = self._ft_origin_us + round(self._ft_next_k * period_us)


class RobotSource(PhysicsSource):
    """Wraps a ``Robot`` (e.g. ``sim.PyBulletRobot`` with ``control_period_s`` = its physics step,
    so every sensor sample is seen). Until a servo first leaves the limp drive the robot keeps its
    own initial hold (the arm rests as on its stand); afterwards the drives are its command."""

    def __init__(self, robot: Robot) -> None:
        super().__init__()
        self.robot = robot
        self._period_us = round(robot.control_period_s * 1e6)
        self._engaged = False
        self._state = robot.read()
        self.t_us = int(self._state.t_us)
        self._effort = np.asarray(robot.model.effort_limits, float)
        self._record(self._state)

    @property
    def ft_device(self) -> FtSensorDevice:
        return self.robot.ft_device

    def set_drive(self, joint: int, drive: Drive) -> None:
        with self.lock:
            self._drives[joint] = drive
            self._engaged = self._engaged or drive.kind is not DriveKind.LIMP

    def joint_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with self.lock:
            s = self._state
            return np.array(s.q), np.array(s.qd), np.array(s.tau)

    def _command(self) -> JointCommand:
        n = self.n_joints
        q_des, qd_des, tau, kp, kd = (np.zeros(n) for _ in range(5))
        for j, d in enumerate(self._drives):
            if d.kind is DriveKind.CURRENT:
                tau[j] = d.torque
            elif d.kind is DriveKind.PD:
                q_des[j], qd_des[j], kp[j], kd[j] = d.q_goal, d.qd_goal, d.kp, d.kd
        return JointCommand(q_des=q_des, qd_des=qd_des, tau_ff=tau, kp=kp, kd=kd)

    def _advance(self, t_us: int) -> None:
        robot = self.robot
        while self.t_us + self._period_us <= t_us:
            if self._engaged:
                robot.write(self._command())
            robot.step()
            self._state = robot.read()
            self.t_us = int(self._state.t_us)
            self._record(self._state)

    def _record(self, state) -> None:
        w, imu = state.wrench, state.imu
        if w is not None and (not self._ft or w.t_us > self._ft[-1].t_us):
            self._ft.append(w)
        if imu is not None and (not self._imu or imu.t_us > self._imu[-1].t_us):
            self._imu.append(imu)

    def close(self) -> None:
        self.robot.close()


class RealTimeRunner:
    """Advances a source to ``clock.now_us()`` every ``tick_s`` in a background thread (the servo
    emulator also advances it before every read, so joint readings are never older than that).
    ``quiet``: a ``QuietWindow`` whose windows a tick waits out (the servo chain's paced
    replies)."""

    def __init__(self, source: PhysicsSource, clock, tick_s: float = 0.002, *, quiet=None) -> None:
        self.source, self.clock, self.tick_s = source, clock, tick_s
        self.quiet = quiet
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="emu-physics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # a plain sleep (not ``Event.wait``, whose timed wait runs a page of Python every tick):
        # ``close`` waits for the tick in progress, a few milliseconds at most
        stop, sleep, tick, source, clock, quiet = (
            self._stop,
            time.sleep,
            self.tick_s,
            self.source,
            self.clock,
            self.quiet,
        )
        while not stop.is_set():
            sleep(tick)
            if quiet is not None:
                quiet.defer()
            if not stop.is_set():
                source.advance_to(clock.now_us())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def make_sim_source(seed: int = 0, **kwargs) -> RobotSource:
    """A ``RobotSource`` around the sim (``open_robot("sim", ...)``: through the robot interface,
    so the serial backend's package does not import the simulator's) stepping one physics step
    (1 ms) per period, without its own watchdog; ``kwargs`` go to the sim's constructor."""
    from twin.backends import open_robot

    kwargs.setdefault("physics_dt", 1e-3)
    kwargs.setdefault("control_period_s", kwargs["physics_dt"])
    kwargs.setdefault("watchdog_s", None)
    kwargs.setdefault("joint_limits", False)  # the plant: limits are the serial side's to enforce
    return RobotSource(open_robot("sim", seed=seed, **kwargs))
