"""``PyBulletRobot``: the twin's simulated arm behind the ``twin.robot.Robot`` interface.

Physics: the shipped URDF in PyBullet (DIRECT by default, GUI on request), a fixed physics step
``physics_dt`` (1 ms) and ``control_period_s / physics_dt`` physics steps per ``step()`` (5 ms =
5 steps by default). PyBullet's
default velocity motors are disabled (kept only as Coulomb friction of ``joint_friction`` N m) and
the product's own law ``twin.robot.joint_torque`` (``u = tau_ff + kp (q_des - q) + kd (qd_des -
qd)``, clamped to the effort limits) is applied in torque control at every physics step, from the
joint state measured at the end of the previous physics step. Joint damping is the engine's viscous
``joint_damping`` N m s/rad; PyBullet's default link damping is switched off.

Sensors: ``sim.ft_sensor`` on ``ft_sensor_joint`` and ``sim.imu`` on the ``imu`` link, both fed at
every physics step, with one generator seeded from ``seed`` (no global random state), so the same
seed and commands give bit-identical states, in one process or across processes.
``sensors=False`` runs neither model (for learning tasks that observe only the joints): the same
joint trajectory, with ``wrench`` and ``imu`` always ``None`` and less work per physics step;
``sensors={"ft"}`` (or ``{"imu"}``) runs only that one (the other reads ``None``). Leaving a
model out changes nothing in the others' numbers when no sensor noise is configured (with
noise the models draw from the same generator, so the draws shift).

Following: ``follow(q, qd, t_us)`` teleports the arm to a measured joint state and returns what
ideal sensors would read there (``sim.follow``); the live twin (``twin.shadow``) drives it.
``set_external_force`` pushes a link at every physics step (an unmodelled contact for scenarios
and tests).

Commands: ``write`` holds them inside the joint limits (``twin.safety``, as on every backend),
unless ``joint_limits=False``: the raw plant for a device emulator (``RobotSource``), whose commands
are a servo's drives, with PyBullet's hard stops at the URDF limits as the only limit. Until the
first ``write`` the arm holds its initial configuration. Once written, a command
stays in force until replaced; if none arrives for ``watchdog_s`` the arm holds the position
measured at that moment (``Health.WATCHDOG``) until the next ``write``. The hold command keeps the
previous command's gains (or ``hold_kp``/``hold_kd``), lowered where they would be unstable at the
held configuration (``sim.hold``, the wrist singularity), and adds the gravity torques of the held
configuration (PyBullet's inverse dynamics) as ``tau_ff``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
from twin.sim.engine import Engine
from twin.sim.follow import Follower, FollowPrediction
from twin.sim.ft_sensor import FtSensorConfig, FtSensorModel, SimFtDevice, reaction_to_sensor
from twin.sim.hold import stable_gains
from twin.sim.imu import ImuConfig, ImuModel
from twin.sim.scene import add_scene

from twin.kinematics import ArmModel
from twin.robot import (
    CommandWatchdog,
    ControlDiagnostics,
    FtSensorDevice,
    Health,
    JointCommand,
    Robot,
    RobotState,
    WrenchBatch,
    hold_command,
    robot_state,
    torque_law,
)
from twin.scenes import Scene

#: One control period = 5 physics steps of 1 ms: at the default sensor rates (F/T 51200/256 =
#: 200 Hz, IMU 200 Hz) every ``step()`` brings exactly one new sample of each.
DEFAULT_CONTROL_PERIOD_S = 0.005
DEFAULT_PHYSICS_DT_S = 1e-3
ARM = "arm"
PAYLOAD = "payload"
FT_JOINT, IMU_LINK, TCP_LINK = "ft_sensor_joint", "imu", "tcp"
#: Default gains per joint, kp N m/rad and kd N m s/rad: about 0.9 of critical damping for the
#: joint-space inertia at home (0.16, 0.20, 0.094, 0.0067, 0.0074, 0.00028 kg m^2). With gravity
#: feedforward a 0.1 rad step of joint 2 settles to 2 % within 0.3 s, overshoot below 5 %
#: (``tests/test_sim_robot.py::test_step_response``). Used by the hold and watchdog commands,
#: lowered where they would be unstable at the held configuration (``sim.hold``).
HOLD_KP = (150.0, 250.0, 150.0, 25.0, 25.0, 8.0)
HOLD_KD = (9.0, 12.0, 6.5, 0.7, 0.75, 0.08)
_FT_STALE_PERIODS = 3  # F/T sample older than this many sensor periods: Health.FT_STALE
_OK, _WATCHDOG = Health.OK, Health.WATCHDOG  # enum member lookups are slow on Python 3.11


@dataclass(frozen=True)
class Payload:
    """A rigid payload at the TCP: mass kg, com (3,) m in the TCP frame, a solid sphere of
    ``radius`` m for its inertia."""

    mass: float
    com: tuple[float, float, float] = (0.0, 0.0, 0.0)
    radius: float = 0.02

    def __post_init__(self) -> None:
        com = np.asarray(self.com, float)
        if (
            not (np.isfinite(self.mass) and self.mass > 0.0)
            or com.shape != (3,)
            or not np.all(np.isfinite(com))
        ):
            raise ValueError(
                f"a payload needs mass > 0 kg and a finite (3,) com, got {self.mass}, {self.com}"
            )
        if not (np.isfinite(self.radius) and self.radius > 0.0):
            raise ValueError(f"payload radius must be > 0 m, got {self.radius}")


class RobotClosedError(RuntimeError):
    """The robot was used after ``close()``."""


class PyBulletRobot(Robot):
    """The simulated arm (module doc). Joint arrays are (6,) in ``model.joint_names`` order."""

    ramps_targets = True  # step() advances the q_des ramp (twin.safety rule 6)

    def __init__(
        self,
        model: ArmModel | None = None,
        *,
        gui: bool = False,
        physics_dt: float = DEFAULT_PHYSICS_DT_S,
        control_period_s: float = DEFAULT_CONTROL_PERIOD_S,
        seed: int = 0,
        ft: FtSensorConfig = FtSensorConfig(),  # noqa: B008 - frozen dataclass
        imu: ImuConfig = ImuConfig(),  # noqa: B008 - frozen dataclass
        scene: Scene | str | Path | None = None,
        watchdog_s: float | None = 0.5,
        joint_damping: float | np.ndarray | None = None,
        joint_friction: float | np.ndarray | None = None,
        payload: Payload | None = None,
        initial_q: np.ndarray | None = None,
        hold_kp: np.ndarray = HOLD_KP,
        hold_kd: np.ndarray = HOLD_KD,
        joint_limits: bool = True,
        sensors: bool | Collection[str] = True,
    ) -> None:
        self.model = model if model is not None else ArmModel.default()
        self.limits_enforced = bool(joint_limits)
        substeps = round(control_period_s / physics_dt)
        if substeps < 1 or abs(substeps * physics_dt - control_period_s) > 1e-9:
            raise ValueError(
                f"control_period_s ({control_period_s}) must be a whole multiple (>= 1) of "
                f"physics_dt ({physics_dt})"
            )
        self.control_period_s = substeps * physics_dt
        self.physics_dt = physics_dt
        self._substeps = substeps
        self._effort = np.asarray(self.model.effort_limits, float)
        self._hold_kp = _per_joint(hold_kp, "hold_kp")
        self._hold_kd = _per_joint(hold_kd, "hold_kd")
        self._rng = np.random.default_rng(seed)
        self._engine = Engine(gui=gui, physics_dt=physics_dt)
        try:
            self._build(ft, imu, scene, joint_damping, joint_friction)
            self._watchdog_s = watchdog_s
            enabled = _sensor_names(
                sensors
            )  # the step loop feeds the others models that do nothing
            if "ft" not in enabled:
                self._ft, self._ft_device = _NoFtModel(self._ft.period_us), None
            if "imu" not in enabled:
                self._imu = _NoImuModel()
            self.reset(initial_q)
            if payload is not None:
                self.attach_payload(payload.mass, payload.com, payload.radius)
        except Exception:
            self._engine.close()
            raise

    # ------------------------------------------------------------------ setup
    def _build(self, ft, imu, scene, joint_damping, joint_friction) -> None:
        eng = self._engine
        eng.load_urdf(ARM, self.model.urdf_path)
        self._joints = [eng.joint_index(ARM, n) for n in self.model.joint_names]
        ft_joint = eng.joint_index(ARM, FT_JOINT)
        self._state_joints = [*self._joints, ft_joint]  # one getJointStates call per physics step
        self._imu_link = eng.link_index(ARM, IMU_LINK)
        self._tcp_link = eng.link_index(ARM, TCP_LINK)
        infos = eng.joints(ARM)
        damping = (
            [infos[j].damping for j in self._joints]
            if joint_damping is None
            else _per_joint(joint_damping, "joint_damping")
        )
        friction = (
            [infos[j].friction for j in self._joints]
            if joint_friction is None
            else _per_joint(joint_friction, "joint_friction")
        )
        eng.set_joint_dynamics(ARM, self._joints, damping)
        eng.disable_motors(ARM, self._joints, friction)
        eng.enable_ft_sensor(ARM, ft_joint)
        to_sensor = reaction_to_sensor(eng.link_inertial(ARM, ft_joint).link_T_inertial)
        self._ft = FtSensorModel(ft, self.physics_dt, to_sensor, self._rng)
        self._ft_device = SimFtDevice(self._ft, lambda: self._t_us)
        self._imu = ImuModel(imu, self.physics_dt, eng.gravity, self._rng, eng.rotation_matrix)
        self._io = eng.control_io(ARM, self._joints, self._state_joints, self._imu_link)
        self.scene_bodies = add_scene(eng, scene) if scene is not None else ()
        self._n = 0
        self._t_us = 0
        self._dt_us = self.physics_dt * 1e6
        self._payload: Payload | None = None
        self._push = None  # () -> None, applies the external force for one physics step
        self._follower: Follower | None = None
        self._follow_t_us: int | None = None
        self._law = self._law_cmd = None  # torque_law of the command in force (step)

    @property
    def engine(self) -> Engine:
        """The engine wrapper (scenes, queries, rendering)."""
        self._check_open()
        return self._engine

    @property
    def ft_device(self) -> FtSensorDevice | None:
        return self._ft_device

    @property
    def payload(self) -> Payload | None:
        return self._payload

    # ------------------------------------------------------------------ Robot API
    def reset(self, q: np.ndarray | None = None) -> RobotState:
        """Teleport the joints to ``q`` (6,) rad (default ``model.home_q``) at rest and hold there.

        Sensor histories restart: both sensors sample at the next physics step, then on their own
        rate grid. The simulated clock keeps running (time stamps stay monotonic). Returns the
        state (``wrench`` and ``imu`` are ``None`` until the next ``step()``).
        """
        self._check_open()
        q = np.array(self.model.home_q if q is None else q, dtype=float).reshape(-1)
        if q.shape != (6,) or not np.all(np.isfinite(q)):
            raise ValueError(f"reset q must be 6 finite joint angles (rad), got {q}")
        self._engine.reset_joints(ARM, self._joints, q)
        if self._payload is not None:  # re-weld at the new TCP pose
            p = self._payload
            self.attach_payload(p.mass, p.com, p.radius)
        self._sense_joints(self._engine.joint_states(ARM, self._state_joints))
        self._tau = _read_only(np.zeros(6))
        self._ft.restart()
        self._ft.latest = None
        self._imu.restart(self._t_us + 1)
        self._imu.latest = None
        self._watchdog = CommandWatchdog(self._watchdog_s)
        self._forget_ramp()
        self._cmd = self._hold(self._q, None)
        self._holding = False
        self._push = None
        if self._follower is not None:
            self._follower.restart()
        self._follow_t_us = None
        return self.read()

    def read(self) -> RobotState:
        """The state at the end of the last physics step: ``tau`` is the torque applied in it;
        ``wrench``/``imu`` are the sensors' latest samples (``None`` before their first sample)."""
        if not self._engine.is_open:  # (the check inline: a control-cycle hot path)
            self._check_open()
        health = _WATCHDOG if self._holding else _OK
        w = self._ft.latest
        if w is not None and self._t_us - w.t_us > _FT_STALE_PERIODS * self._ft.period_us:
            health |= Health.FT_STALE
        # Read-only arrays made afresh by each physics step (and reset/follow): shared, not copied.
        return robot_state(self._t_us, self._q, self._qd, self._tau, w, self._imu.latest, health)

    def wrench_samples(self) -> WrenchBatch:
        """Every F/T sample of the physics steps since the previous call (several per control
        period when the sensor runs faster than the loop), oldest first."""
        self._check_open()
        return self._ft.take()

    def diagnostics(self) -> ControlDiagnostics:
        """Simulated time never overruns: the achieved rate is the configured one."""
        cycles = self._t_us // round(self.control_period_s * 1e6)
        return ControlDiagnostics(self.control_period_s, cycles, 0, 1.0 / self.control_period_s)

    def _apply(self, command: JointCommand) -> None:
        if not self._engine.is_open:
            self._check_open()
        self._cmd = command
        self._holding = False
        self._watchdog.feed(self._t_us)

    def step(self) -> None:
        """Advance ``control_period_s``: the law, one physics step and the sensors, per substep.

        Per physics step the law runs on Python floats (``torque_law``, compiled once per
        command) and the joint state stays in the engine's tuples: the state's arrays are built
        once, after the last substep."""
        self._check_open()
        self._before_step()  # the q_des ramp and the velocity watch (twin.safety rule 6)
        if not self._holding and self._watchdog.expired(self._t_us):
            self._cmd = self._hold(self._q, self._cmd)
            self._holding = True
        cmd, io, imu = self._cmd, self._io, self._imu
        law = self._law
        if law is None or self._law_cmd is not cmd:
            law = self._law = torque_law(cmd, self._effort)
            self._law_cmd = cmd
        set_torques, physics_step, joint_states, link_state = (
            io.set_torques,
            io.step,
            io.joint_states,
            io.link_state,
        )
        ft_observe, imu_dt_us, imu_observe = self._ft.observe, imu.dt_us, imu.observe
        q, qd = self._q.tolist(), self._qd.tolist()
        n, dt_us, t, push = self._n, self._dt_us, self._t_us, self._push
        for _ in range(self._substeps):
            u = law(q, qd)
            set_torques(forces=u)
            if push is not None:
                push()
            physics_step()
            n += 1
            t = round(n * dt_us)
            s1, s2, s3, s4, s5, s6, sft = joint_states()
            q = (s1[0], s2[0], s3[0], s4[0], s5[0], s6[0])
            qd = (s1[1], s2[1], s3[1], s4[1], s5[1], s6[1])
            ft_observe(t, sft[2])
            if t + imu_dt_us >= imu.next_us:
                imu_observe(t, link_state())
        x = np.array(q + qd)
        tau = np.array(u)
        x.flags.writeable = tau.flags.writeable = False  # the state's arrays: read-only views
        self._q, self._qd, self._tau, self._n, self._t_us = x[:6], x[6:], tau, n, t

    def _sense_joints(self, states: tuple) -> None:
        self._q = _read_only(np.array([s[0] for s in states[:6]]))
        self._qd = _read_only(np.array([s[1] for s in states[:6]]))

    def _hold(self, q: np.ndarray, previous: JointCommand | None) -> JointCommand:
        """Hold ``q``: ``hold_command``'s gains, lowered where they would be unstable at ``q``
        (``sim.hold``: near the wrist singularity), and the gravity torques at ``q`` as
        feedforward."""
        gravity = self._engine.inverse_dynamics(ARM, q, np.zeros(6), np.zeros(6))
        hold = hold_command(q, previous, self._hold_kp, self._hold_kd)
        kp, kd = stable_gains(self._engine.mass_matrix(ARM, q), hold.kp, hold.kd, self.physics_dt)
        return replace(hold, tau_ff=gravity, kp=kp, kd=kd).validated(
            self.model.joint_names, self._effort
        )

    # ------------------------------------------------------------------ follower
    def follow(
        self,
        q: np.ndarray,
        qd: np.ndarray,
        t_us: int | None = None,
        *,
        accel_window_s: float = 0.0,
    ) -> FollowPrediction:
        """Mirror a measured joint state and predict what ideal sensors read there (``sim.follow``).

        q: (6,) rad, qd: (6,) rad/s, measured at ``t_us`` (default: one control period after the
        previous call). The joints are teleported (no physics step; the simulated clock and the
        sensor models do not advance); accelerations are backward differences against the
        previous call, or the newest one at least ``accel_window_s`` older. Returns the predicted
        wrench (sensor frame), IMU reading and the sensor frame's motion. Call ``reset`` before
        stepping physics again (it re-welds a payload, which does not follow teleports).
        """
        self._check_open()
        q = _joint_vector(q, "q (rad)")
        qd = _joint_vector(qd, "qd (rad/s)")
        if t_us is None:
            period_us = round(self.control_period_s * 1e6)
            t_us = 0 if self._follow_t_us is None else self._follow_t_us + period_us
        if not (np.isfinite(accel_window_s) and accel_window_s >= 0.0):
            raise ValueError(f"accel_window_s must be >= 0 s, got {accel_window_s}")
        if self._follower is None:
            eng = self._engine
            self._follower = Follower(
                eng,
                ARM,
                self._joints,
                eng.joint_index(ARM, FT_JOINT),
                self._imu_link,
                self._tcp_link,
            )
        prediction = self._follower.predict(
            q, qd, int(t_us), self._payload, round(accel_window_s * 1e6)
        )
        self._q, self._qd, self._follow_t_us = (
            _read_only(q.copy()),
            _read_only(qd.copy()),
            int(t_us),
        )
        return prediction

    def set_external_force(self, force: np.ndarray | None, link: str = TCP_LINK) -> None:
        """Push ``link`` with ``force`` (3,) N, world frame, through its centre of mass at every
        physics step from now on (an unmodelled contact); ``None`` (or ``reset``) removes it."""
        self._check_open()
        if force is None:
            self._push = None
            return
        f = np.asarray(force, float)
        if f.shape != (3,) or not np.all(np.isfinite(f)):
            raise ValueError(f"external force must be 3 finite numbers (N, world), got {force}")
        index = self._engine.link_index(ARM, link)
        self._push = partial(self._engine.apply_external_force, ARM, index, f.tolist())

    # ------------------------------------------------------------------ payload
    def attach_payload(self, mass: float, com=(0.0, 0.0, 0.0), radius: float = 0.02) -> None:
        """Weld a payload of ``mass`` kg with centre of mass ``com`` (3,) m in the TCP frame to the
        TCP (replacing any previous one). It has no collision geometry."""
        self._check_open()
        payload = Payload(float(mass), tuple(float(c) for c in np.asarray(com, float)), radius)
        self.detach_payload()
        self._engine.attach_point_mass(
            PAYLOAD, ARM, self._tcp_link, payload.mass, payload.com, payload.radius
        )
        self._payload = payload

    def detach_payload(self) -> None:
        """Remove the payload; no-op without one."""
        self._check_open()
        self._engine.detach(PAYLOAD)
        self._payload = None

    # ------------------------------------------------------------------ randomisation
    def set_joint_dynamics(
        self,
        damping: float | np.ndarray | None = None,
        friction: float | np.ndarray | None = None,
    ) -> None:
        """Viscous damping (N m s/rad) and Coulomb friction (N m) of the joints, one value or
        (6,); ``None`` leaves that one as it is (domain randomisation, ``twin.env``)."""
        self._check_open()
        if damping is not None:
            self._engine.set_joint_dynamics(ARM, self._joints, _per_joint(damping, "damping"))
        if friction is not None:
            self._engine.disable_motors(ARM, self._joints, _per_joint(friction, "friction"))

    def scale_link_masses(self, scale: float | np.ndarray) -> None:
        """Set each moving link's mass and inertia to ``scale`` (one value or (6,), > 0) times
        the URDF's (not compounding: ``1.0`` restores them)."""
        self._check_open()
        s = np.broadcast_to(np.asarray(scale, float), (6,))
        if not np.all(np.isfinite(s) & (s > 0.0)):
            raise ValueError(f"link mass scales must be > 0 (one value or 6), got {scale}")
        nominal = getattr(self, "_nominal_inertials", None)
        if nominal is None:
            nominal = [self._engine.link_inertial(ARM, j) for j in self._joints]
            self._nominal_inertials = nominal
        for j, k, inertial in zip(self._joints, s, nominal):
            self._engine.set_link_mass(ARM, j, inertial.mass * k, inertial.inertia_diagonal * k)

    def set_marker(self, name: str, pose: np.ndarray, radius: float = 0.02, color=None) -> None:
        """Draw (or move) a visual-only sphere ``name`` at ``pose`` (7,) world, e.g. a goal."""
        self._check_open()
        options = {} if color is None else {"color": tuple(color)}
        self._engine.set_marker(f"marker:{name}", pose, radius=radius, **options)

    # ------------------------------------------------------------------ misc
    def render(
        self, width: int = 320, height: int = 240, eye=(1.2, -1.2, 0.9), target=(0.0, 0.0, 0.35)
    ) -> np.ndarray:
        """An RGB image (height, width, 3) uint8 of the scene (TinyRenderer)."""
        return self.engine.render(width, height, eye, target)

    def close(self) -> None:
        """Disconnect the engine; safe to call twice."""
        self._engine.close()

    @property
    def closed(self) -> bool:
        return not self._engine.is_open

    def _check_open(self) -> None:
        if not self._engine.is_open:
            raise RobotClosedError("this PyBulletRobot is closed; create a new one")

    def __enter__(self) -> PyBulletRobot:
        return self


class _NoFtModel:
    """The F/T model of a robot made without ``"ft"`` in ``sensors``: takes nothing, has no
    sample."""

    latest = None

    def __init__(self, period_us: float) -> None:
        self.period_us = period_us

    def observe(self, t_us: int, reaction) -> None:
        pass

    def restart(self) -> None:
        pass


class _NoImuModel:
    """The IMU model of a robot made without ``"imu"`` in ``sensors``: never due, has no
    sample."""

    latest = None
    dt_us = 0
    next_us = float("inf")

    def restart(self, t_us: int) -> None:
        pass

    def observe(self, t_us: int, link_state) -> None:
        pass


#: The sensor models a robot can run (``sensors=``).
SENSOR_NAMES = ("ft", "imu")


def _sensor_names(sensors: bool | Collection[str]) -> frozenset[str]:
    if sensors is True or sensors is False:
        return frozenset(SENSOR_NAMES if sensors else ())
    names = frozenset([sensors] if isinstance(sensors, str) else sensors)
    if not names <= set(SENSOR_NAMES):
        raise ValueError(
            f"sensors must be True, False or a collection of {SENSOR_NAMES}, got {sensors!r}"
        )
    return names


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _joint_vector(value, name: str) -> np.ndarray:
    arr = np.array(value, dtype=float).reshape(-1)
    if arr.shape != (6,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be 6 finite numbers (one per joint), got {value}")
    return arr


def _per_joint(value, name: str) -> np.ndarray:
    arr = np.broadcast_to(np.asarray(value, float), (6,)).copy()
    if not np.all(np.isfinite(arr)) or np.any(arr < 0.0):
        raise ValueError(f"{name} must be one value >= 0 or 6 of them (one per joint), got {value}")
    return arr
