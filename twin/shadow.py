"""The live twin: a sim twin follows the real arm and reports what its sensors should have read.

While the real arm runs (any ``twin.robot.Robot``), the twin (``open_robot("sim", ...)``; this
module never imports ``sim``) is teleported to every measured joint state and predicts the F/T
sensor and IMU readings (``PyBulletRobot.follow``: rigid-body equations of the tool side, with
accelerations from finite-differenced measured velocities). The caller owns the real arm's cycle:

    with Shadow(real) as shadow:
        for command in commands:
            real.write(command)
            real.step()
            report = shadow.update()  # reads real.read(); one ShadowReport per cycle
            if report.flags & ShadowFlag.CONTACT: ...

Residuals, measured minus predicted: ``wrench_residual`` (6,) N, N m, sensor frame;
``imu_residual`` (6,) [specific force m/s^2, angular rate rad/s], IMU frame. Each sensor sample is
compared with the twin's prediction at the sample's own time stamp (interpolated between cycles),
so sensors that sample off the control grid (hardware) are not penalised for the offset.

Classification (thresholds and time constants in ``ShadowConfig``). The defaults suit a sensor with
noise std up to about 0.1 N / 0.005 N m: the event thresholds are then about 12 standard deviations
(per axis) of the 10 ms low-passed residual, and the twin's own error on a running sim is below
0.1 N. The wrench residual ``r`` is modelled as

    r = o + H theta + u      o: sensor offset (6,); theta = [m, h]: payload change, a point mass
                             m kg at p (sensor frame), h = m p kg m; u: what is left unexplained
    H (6, 4) = [[-s, -(skew(al) + skew(w)^2)], [0, skew(s)]]  (the wrench a point mass exerts)

with ``s`` the sensor origin's specific force, ``w``/``al`` its angular velocity / acceleration
(sensor frame, from the twin). Time scales separate the three kinds of divergence:

- tare: over the first ``tare_s`` of samples the median residual becomes the offset reference (a
  constant offset is not drift; the median ignores a start transient) and its spread (median
  absolute deviation) the noise level; nothing is classified meanwhile (``TARING``).
- event: ``u`` low-passed over ``event_filter_s`` beyond ``event_force_n`` or ``event_torque_nm``
  opens an event, which closes below half of them. ``CONTACT`` is raised while an open event is
  beyond ``contact_force_n`` / ``contact_torque_nm``, or has lasted ``persist_s`` (after
  ``settle_s``) without being a weight: unexpected contact, transient or sustained.
- payload change: an event that persists and that a weight explains (least squares of the event's
  ``u`` on ``H`` over ``persist_s``; misfit RMS, in units of the event thresholds, within
  ``weight_fit_tolerance`` of the tare noise; ``|dm| >= payload_min_kg``) updates ``theta`` and
  closes. The part of ``h`` along gravity, which one orientation cannot observe, comes from a
  weak prior: the payload sits at ``payload_prior_link`` (the TCP). ``PAYLOAD`` is raised while
  ``|m| >= payload_min_kg``; ``payload_mass_kg`` is the estimate relative to the twin's model.
  A step is flagged ``CONTACT`` until it has persisted and been recognised as a weight.
- drift: between events ``o`` tracks ``r - H theta`` with time constant ``offset_filter_s``;
  ``FT_DRIFT`` once it has moved from the reference by ``drift_force_n`` / ``drift_torque_nm``.
  Changes slower than the offset filter are drift (a slowly growing load included); faster ones
  are events. ``IMU_DRIFT`` likewise for the IMU residual, whose offset is tared and tracked on
  quasi-static samples only (every joint slower than ``imu_static_speed_rps``): in motion the
  IMU residual also holds the acceleration inside a control period, which velocities sampled
  once per period cannot show (the simulated IMU differences over one 1 ms physics step), and on
  hardware the IMU's transport latency.

Joint torques: the twin also predicts what the joints must apply for the measured motion (its
rigid-body model, ``twin.dynamics``, with the twin's payload and the recognised payload change),
through a generalized-momentum observer (``twin.dynamics.observer``): ``torque_residual`` (6,)
N m is the external joint torque (a low-pass of time constant ``observer_s``), so a contact shows
there even without an F/T reading; ``predicted_torque`` is measured ``tau`` minus it.
``TORQUE_CONTACT`` (and ``CONTACT``) is raised while any joint's residual is beyond its
``contact_joint_torque_nm``. Unmodelled joint friction shows in the residual too (raise the
thresholds for a geared arm); a payload lighter than the twin's model is not subtracted.

Limits: a weight and a steady force along gravity are told apart only by a later change of
orientation; a payload is assumed rigid and small (its own rotational inertia is neglected).
"""

from __future__ import annotations

import collections
import enum
import math
from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np

from twin import events
from twin.backends import open_robot
from twin.dynamics import ArmDynamics
from twin.dynamics.observer import MomentumObserver
from twin.robot import FtStatus, Health, Robot, RobotState
from twin.spatial import quaternion

_FORCE, _TORQUE = slice(0, 3), slice(3, 6)
_NAN6 = np.full(6, np.nan)
_NAN6.flags.writeable = False
_UNUSABLE_JOINTS = Health.JOINTS_STALE | Health.DISCONNECTED
_MAD_TO_STD = 1.4826  # standard deviation of a normal distribution per median absolute deviation
#: m/s^2: scales the payload-position prior to the torque its error makes under gravity, so the
#: prior weighs as much as one sample of the event window.
_PRIOR_GRAVITY = 9.81


class ShadowFlag(enum.IntFlag):
    """Flags of a ``ShadowReport``; ``OK`` (0) when the real arm reads as the twin predicts."""

    OK = 0
    TARING = enum.auto()  # learning the offset reference and noise level: nothing classified
    CONTACT = enum.auto()  # unexpected contact: a large or sustained unexplained wrench
    PAYLOAD = enum.auto()  # the payload differs from the twin's (payload_mass_kg)
    FT_DRIFT = enum.auto()  # the F/T offset has drifted from its reference
    IMU_DRIFT = enum.auto()  # the IMU offset has drifted from its reference
    NO_FT = enum.auto()  # no usable F/T sample (missing, stale, INVALID or RAW): residual NaN
    NO_IMU = enum.auto()  # no usable IMU sample: IMU residual NaN
    NOT_TRACKING = enum.auto()  # joint states unusable (stale, disconnected): nothing predicted
    TORQUE_CONTACT = enum.auto()  # the joint-torque residual says contact (F/T not needed)


@dataclass(frozen=True)
class ShadowConfig:
    """Thresholds and time constants of the classification (module doc); norms are taken over the
    force (N) and torque (N m) parts of a wrench separately."""

    tare_s: float = 0.5  # s of samples for the offset references (0: references are zero)
    event_filter_s: float = 0.01  # s, time constant of the low-passed unexplained residual
    event_force_n: float = 0.6  # N: opens an event (closes below half)
    event_torque_nm: float = 0.06  # N m: opens an event (closes below half)
    contact_force_n: float = 2.0  # N: an event beyond it is a contact at once
    contact_torque_nm: float = 0.2  # N m: an event beyond it is a contact at once
    settle_s: float = 0.05  # s after an event's onset left out of its weight fit (transients)
    persist_s: float = 0.3  # s of event window before it is judged weight or sustained contact
    weight_fit_tolerance: float = 0.5  # misfit RMS allowed beyond noise, in event-threshold units
    payload_min_kg: float = 0.05  # kg: smallest payload change reported
    offset_filter_s: float = 1.0  # s, time constant of the offset (drift) trackers
    drift_force_n: float = 0.5  # N of offset drift that raises FT_DRIFT
    drift_torque_nm: float = 0.05  # N m of offset drift that raises FT_DRIFT
    imu_drift_accel_mps2: float = 0.3  # m/s^2 of accelerometer drift that raises IMU_DRIFT
    imu_drift_gyro_rps: float = 0.02  # rad/s of gyro drift that raises IMU_DRIFT
    imu_static_speed_rps: float = 0.02  # rad/s: every joint slower => a quasi-static IMU sample
    accel_window_s: float = 0.0  # s: the twin differences velocities over at least this long
    #: (0: one cycle, as the sim's F/T window; 0.02 for quantised servo velocities on hardware)
    payload_prior_link: str = "tcp"  # where a payload sits along gravity (unobservable part)
    observer_s: float = 0.01  # s, time constant of the momentum observer (torque residual)
    #: N m per joint: a torque residual beyond it is a contact (about 3x the sim's worst in motion)
    contact_joint_torque_nm: tuple[float, ...] = (0.6, 0.6, 0.6, 0.3, 0.3, 0.15)

    def __post_init__(self) -> None:
        limits = np.asarray(self.contact_joint_torque_nm, float)
        if limits.ndim != 1 or not np.all(np.isfinite(limits) & (limits > 0.0)):
            raise ValueError(
                "ShadowConfig.contact_joint_torque_nm must be one finite number > 0 per joint, "
                f"got {self.contact_joint_torque_nm!r}"
            )
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("payload_prior_link", "contact_joint_torque_nm"):
                continue
            zero_ok = f.name in ("tare_s", "settle_s", "accel_window_s")
            if not (math.isfinite(value) and (value >= 0.0 if zero_ok else value > 0.0)):
                raise ValueError(
                    f"ShadowConfig.{f.name} must be a finite number "
                    f"{'>= 0' if zero_ok else '> 0'}, got {value!r}"
                )
        if (
            self.contact_force_n < self.event_force_n
            or self.contact_torque_nm < self.event_torque_nm
        ):
            raise ValueError("ShadowConfig: contact thresholds must be >= the event thresholds")


@dataclass(frozen=True)
class ShadowReport:
    """One cycle of the live twin. Arrays are read-only; NaN where there was nothing to compare.

    t_us: time stamp of the real arm's state.
    wrench_residual: (6,) measured - predicted F/T reading, N, N m, sensor frame.
    imu_residual: (6,) measured - predicted [specific force m/s^2, angular rate rad/s], IMU frame.
    flags: ``ShadowFlag``.
    payload_mass_kg: estimated payload beyond the twin's model, kg (0 when they agree).
    payload_com: (3,) m, its centre of mass in the sensor frame (NaN without a payload).
    contact_wrench: (6,) N, N m, sensor frame: the low-passed unexplained residual (the contact
        wrench while ``CONTACT``).
    ft_offset: (6,) N, N m and imu_offset: (6,) m/s^2, rad/s: drift of the tracked offsets from
        their tare references.
    predicted_wrench: (6,) N, N m, sensor frame: what the twin's ideal sensor reads.
    torque_residual: (6,) N m, the external joint torques (momentum observer).
    predicted_torque: (6,) N m, the joint torques the twin's model needs for the measured motion.
    """

    t_us: int
    wrench_residual: np.ndarray
    imu_residual: np.ndarray
    flags: ShadowFlag
    payload_mass_kg: float
    payload_com: np.ndarray
    contact_wrench: np.ndarray
    ft_offset: np.ndarray
    imu_offset: np.ndarray
    predicted_wrench: np.ndarray
    torque_residual: np.ndarray
    predicted_torque: np.ndarray


class Prediction(Protocol):
    """What a following twin returns (``sim.follow.FollowPrediction``)."""

    wrench: np.ndarray
    specific_force: np.ndarray
    angular_rate: np.ndarray
    sensor_specific_force: np.ndarray
    sensor_angular_velocity: np.ndarray
    sensor_angular_acceleration: np.ndarray


class _Predicted:
    """A prediction interpolated to a sensor sample's time stamp (the ``Prediction`` fields)."""

    FIELDS = (
        ("wrench", 6),
        ("specific_force", 3),
        ("angular_rate", 3),
        ("sensor_specific_force", 3),
        ("sensor_angular_velocity", 3),
        ("sensor_angular_acceleration", 3),
    )

    def __init__(self, packed: np.ndarray) -> None:
        i = 0
        for name, n in self.FIELDS:
            setattr(self, name, packed[i : i + n])
            i += n

    @classmethod
    def pack(cls, prediction: Prediction) -> np.ndarray:
        return np.concatenate([getattr(prediction, name) for name, _ in cls.FIELDS])


class _History:
    """The twin's recent predictions, so that each sensor sample is compared with the prediction
    at its own time stamp (linear interpolation; clamped to the oldest / newest kept)."""

    def __init__(self, size: int = 32) -> None:
        self._t: collections.deque[int] = collections.deque(maxlen=size)
        self._x: collections.deque[np.ndarray] = collections.deque(maxlen=size)

    def add(self, t_us: int, prediction: Prediction) -> None:
        if self._t and t_us <= self._t[-1]:
            self._t.clear()
            self._x.clear()
        self._t.append(t_us)
        self._x.append(_Predicted.pack(prediction))

    def at(self, t_us: int) -> _Predicted:
        t, x = self._t, self._x
        if t_us >= t[-1]:
            return _Predicted(x[-1])
        for k in range(len(t) - 2, -1, -1):
            if t[k] <= t_us:
                f = (t_us - t[k]) / (t[k + 1] - t[k])
                return _Predicted(x[k] + f * (x[k + 1] - x[k]))
        return _Predicted(x[0])


class _Filter:
    """First-order low-pass with time constant ``tau_s`` on irregular time stamps (us)."""

    def __init__(self, tau_s: float, n: int) -> None:
        self.tau_us = tau_s * 1e6
        self.value = np.zeros(n)

    def update(self, x: np.ndarray, dt_us: float) -> np.ndarray:
        self.value += (1.0 - math.exp(-dt_us / self.tau_us)) * (x - self.value)
        return self.value


class _Offset:
    """A slowly tracked offset of a residual (n,): the reference is the median of the first
    ``tare_s`` of samples (robust to a start transient), with a robust spread (``noise``, std per
    axis from the median absolute deviation); then a low-pass of time constant ``tau_s`` tracks
    it. ``tare_s`` 0: reference and noise zero from the start."""

    def __init__(self, n: int, tare_s: float, tau_s: float) -> None:
        self._tare_us = tare_s * 1e6
        self._filter = _Filter(tau_s, n)
        self._samples: list[np.ndarray] = []
        self._seen_us = 0.0
        self.noise = np.zeros(n)
        self.reference: np.ndarray | None = np.zeros(n) if tare_s == 0.0 else None

    @property
    def value(self) -> np.ndarray:
        return self._filter.value

    @property
    def drift(self) -> np.ndarray:
        """(n,) value - reference (zeros while taring)."""
        return np.zeros_like(self.value) if self.reference is None else self.value - self.reference

    def add(self, x: np.ndarray, dt_us: float) -> None:
        if self.reference is not None:
            self._filter.update(x, dt_us)
            return
        self._samples.append(x)
        self._seen_us += dt_us
        if self._seen_us >= self._tare_us:
            samples = np.array(self._samples)
            median = np.median(samples, axis=0)
            self.noise = _MAD_TO_STD * np.median(np.abs(samples - median), axis=0)
            self.reference, self._filter.value = median, median.copy()
            self._samples = []


class _Event:
    """An open event: weighted normal equations of its window for a weight change [dm, dh]."""

    def __init__(self, onset_us: int) -> None:
        self.onset_us = onset_us
        self.contact = False  # beyond the contact thresholds at the last sample
        self.sustained = False  # persisted without being a weight
        self.restart(None)

    def restart(self, t_us: int | None) -> None:
        self.window_us = t_us
        self.a, self.y, self.total, self.count = np.zeros((4, 4)), np.zeros(4), 0.0, 0

    def add(self, t_us: int, weighted_h: np.ndarray, weighted_u: np.ndarray) -> None:
        if self.window_us is None:
            self.window_us = t_us
        self.a += weighted_h.T @ weighted_h
        self.y += weighted_h.T @ weighted_u
        self.total += float(weighted_u @ weighted_u)
        self.count += 1


def payload_regressor(prediction: Prediction) -> np.ndarray:
    """(6, 4) wrench (sensor frame) that a point mass exerts per [m kg, h = m p kg m] (module doc)."""
    s = prediction.sensor_specific_force
    k_s, k_al, k_w = quaternion.skew(
        np.stack((s, prediction.sensor_angular_acceleration, prediction.sensor_angular_velocity))
    )
    h = np.zeros((6, 4))
    h[_FORCE, 0] = -s
    h[_FORCE, 1:] = -(k_al + k_w @ k_w)
    h[_TORQUE, 1:] = k_s
    return h


class Shadow:
    """The live twin of ``real`` (module doc).

    twin: a sim robot with ``follow`` (default: ``open_robot("sim", model=real.model,
    watchdog_s=None, **sim_options)``, closed with the shadow; pass ``payload=`` or ``ft=`` there
    to give the twin a known tool load).
    """

    def __init__(
        self,
        real: Robot,
        *,
        config: ShadowConfig | None = None,
        twin: Robot | None = None,
        **sim_options: Any,
    ) -> None:
        self.real = real
        self.config = config if config is not None else ShadowConfig()
        self._owns_twin = twin is None
        if twin is None:
            twin = open_robot("sim", model=real.model, watchdog_s=None, **sim_options)
        if not callable(getattr(twin, "follow", None)):
            raise TypeError(
                "the twin must be a sim robot with follow(q, qd, t_us) "
                f"(open_robot('sim', ...)), got {type(twin).__name__}"
            )
        self.twin = twin
        model = real.model
        sensor = model.fk(model.home_q, link="ft_sensor")
        prior = model.fk(model.home_q, link=self.config.payload_prior_link)
        self._prior_p = (np.linalg.inv(sensor) @ prior)[:3, 3]
        c = self.config
        self._weights = np.repeat([1.0 / c.event_force_n, 1.0 / c.event_torque_nm], 3)
        limits = np.asarray(c.contact_joint_torque_nm, float)
        if limits.shape != (model.n_joints,):
            raise ValueError(
                f"ShadowConfig.contact_joint_torque_nm: expected {model.n_joints} values, "
                f"got {limits.shape[0]}"
            )
        self._torque_limits = limits
        self._dynamics = _twin_dynamics(model, twin)
        self._observer = MomentumObserver(self._dynamics, c.observer_s)
        self.reset()

    def reset(self) -> None:
        """Forget everything learned (offsets, payload, events); the next cycles tare again."""
        c = self.config
        self._offset = _Offset(6, c.tare_s, c.offset_filter_s)
        self._imu_offset = _Offset(6, c.tare_s, c.offset_filter_s)
        self._theta = np.zeros(4)
        self._history = _History()
        self._unexplained = _Filter(c.event_filter_s, 6)
        self._event: _Event | None = None
        self._last_ft_us: int | None = None
        self._last_imu_us: int | None = None
        self._observer.set_dynamics(self._dynamics)
        self._torque = _NAN6

    def set_payload(self, mass_kg: float, com: np.ndarray) -> None:
        """Tell the twin of a payload beyond its model, e.g. identified by
        ``twin.calibration.payload`` (``PayloadEstimate.minus(tool_load(model))``): ``mass_kg``
        kg at ``com`` (3,) m, sensor frame. Both residuals then expect it."""
        com = np.asarray(com, float)
        if not (math.isfinite(mass_kg) and com.shape == (3,) and np.all(np.isfinite(com))):
            raise ValueError(f"expected a finite mass (kg) and com (3,) m, got {mass_kg}, {com}")
        self._theta = np.concatenate(([mass_kg], mass_kg * com))
        self._observer.set_dynamics(self._payload_dynamics())

    # ------------------------------------------------------------------ the cycle
    def update(self, state: RobotState | None = None) -> ShadowReport:
        """Follow one measured state (default ``real.read()``) and classify; one report."""
        state = self.real.read() if state is None else state
        c = self.config
        flags = ShadowFlag.OK
        if state.health & _UNUSABLE_JOINTS:
            self._observer.reset()
            self._torque = _NAN6
            return self._report(state.t_us, _NAN6, _NAN6, _NAN6, ShadowFlag.NOT_TRACKING)
        pred = self.twin.follow(state.q, state.qd, state.t_us, accel_window_s=c.accel_window_s)
        self._history.add(state.t_us, pred)
        wrench = state.wrench
        if (
            wrench is None
            or state.health & Health.FT_STALE
            or wrench.status & (FtStatus.INVALID | FtStatus.RAW)
        ):
            residual = _NAN6
            flags |= ShadowFlag.NO_FT
        else:
            at_sample = self._history.at(wrench.t_us)
            residual = np.asarray(wrench.wrench, float) - at_sample.wrench
            if wrench.t_us != self._last_ft_us:
                dt = 0 if self._last_ft_us is None else wrench.t_us - self._last_ft_us
                self._last_ft_us = wrench.t_us
                self._classify(wrench.t_us, dt, residual, at_sample)
        imu_residual = self._imu(state)
        if imu_residual is _NAN6:
            flags |= ShadowFlag.NO_IMU
        self._torque = self._observer.update(state.t_us, state.q, state.qd, state.tau).copy()
        self._tau = np.asarray(state.tau, float)
        if np.any(np.abs(self._torque) > self._torque_limits):
            flags |= ShadowFlag.TORQUE_CONTACT | ShadowFlag.CONTACT
        return self._report(state.t_us, residual, imu_residual, pred.wrench, flags)

    def _classify(self, t_us: int, dt_us: int, r: np.ndarray, pred: Prediction) -> None:
        c = self.config
        h = payload_regressor(pred) if self._theta.any() or self._event is not None else None
        explained = r if h is None else r - h @ self._theta
        if self._offset.reference is None:
            self._offset.add(explained, dt_us)  # a payload set before the tare is not offset
            return
        u = explained - self._offset.value
        ef = self._unexplained.update(u, dt_us) if dt_us else self._unexplained.value
        force, torque = float(np.linalg.norm(ef[_FORCE])), float(np.linalg.norm(ef[_TORQUE]))
        event = self._event
        if event is None:
            if force > c.event_force_n or torque > c.event_torque_nm:
                self._event = event = _Event(t_us)
                h = payload_regressor(pred) if h is None else h
            else:
                self._offset.add(explained, dt_us)
                return
        if force <= 0.5 * c.event_force_n and torque <= 0.5 * c.event_torque_nm:
            self._event = None  # over: a transient
            return
        event.contact = force > c.contact_force_n or torque > c.contact_torque_nm
        if t_us - event.onset_us < c.settle_s * 1e6:
            return
        w = self._weights[:, None]
        event.add(t_us, w * h, self._weights * u)
        if t_us - event.window_us >= c.persist_s * 1e6:
            delta = self._fit_weight(event)
            if delta is not None:
                self._theta += delta
                self._observer.set_dynamics(self._payload_dynamics())
                self._unexplained.value[:] = 0.0
                self._event = None
            else:
                event.sustained = True
                event.restart(None)

    def _fit_weight(self, event: _Event) -> np.ndarray | None:
        """The weight change [dm, dh] that explains the event's window, or None if none does."""
        c = self.config
        prior = np.hstack((-self._prior_p[:, None], np.eye(3))) * (
            _PRIOR_GRAVITY / c.event_torque_nm
        )
        delta = np.linalg.solve(event.a + prior.T @ prior, event.y)
        misfit = event.total - 2.0 * delta @ event.y + delta @ event.a @ delta
        noise = float((self._offset.noise * self._weights) @ (self._offset.noise * self._weights))
        fits = misfit / event.count <= noise + c.weight_fit_tolerance**2
        return delta if fits and abs(delta[0]) >= c.payload_min_kg else None

    def _payload_dynamics(self) -> ArmDynamics:
        """The twin's dynamics plus the recognised payload change (a point mass at the fitted
        centre of mass, sensor frame); a lighter payload than the twin's is not subtracted."""
        m = float(self._theta[0])
        if m < self.config.payload_min_kg:
            return self._dynamics
        return self._dynamics.with_payload(m, self._theta[1:] / m, link="ft_sensor")

    def _imu(self, state: RobotState) -> np.ndarray:
        """IMU residual (6,); its offset is tracked on quasi-static samples only (module doc)."""
        imu = state.imu
        if imu is None or state.health & Health.IMU_STALE:
            return _NAN6
        pred = self._history.at(imu.t_us)
        residual = np.concatenate(
            (
                np.asarray(imu.specific_force, float) - pred.specific_force,
                np.asarray(imu.angular_rate, float) - pred.angular_rate,
            )
        )
        if imu.t_us != self._last_imu_us:
            dt = 0 if self._last_imu_us is None else imu.t_us - self._last_imu_us
            self._last_imu_us = imu.t_us
            if float(np.max(np.abs(state.qd))) <= self.config.imu_static_speed_rps:
                self._imu_offset.add(residual, dt)
        return residual

    # ------------------------------------------------------------------ the report
    def _report(
        self,
        t_us: int,
        residual: np.ndarray,
        imu_residual: np.ndarray,
        predicted: np.ndarray,
        flags: ShadowFlag,
    ) -> ShadowReport:
        c = self.config
        m = float(self._theta[0])
        has_payload = abs(m) >= c.payload_min_kg
        drift = self._offset.drift
        imu_drift = self._imu_offset.drift
        if self._offset.reference is None:
            flags |= ShadowFlag.TARING
        event = self._event
        if event is not None and (event.contact or event.sustained):
            flags |= ShadowFlag.CONTACT
        if has_payload:
            flags |= ShadowFlag.PAYLOAD
        if (
            np.linalg.norm(drift[_FORCE]) > c.drift_force_n
            or np.linalg.norm(drift[_TORQUE]) > c.drift_torque_nm
        ):
            flags |= ShadowFlag.FT_DRIFT
        if (
            np.linalg.norm(imu_drift[:3]) > c.imu_drift_accel_mps2
            or np.linalg.norm(imu_drift[3:]) > c.imu_drift_gyro_rps
        ):
            flags |= ShadowFlag.IMU_DRIFT
        com = self._theta[1:] / m if has_payload else np.full(3, np.nan)
        report = ShadowReport(
            t_us=int(t_us),
            wrench_residual=_frozen(residual),
            imu_residual=_frozen(imu_residual),
            flags=flags,
            payload_mass_kg=m,
            payload_com=_frozen(com),
            contact_wrench=_frozen(self._unexplained.value),
            ft_offset=_frozen(drift),
            imu_offset=_frozen(imu_drift),
            predicted_wrench=_frozen(predicted),
            torque_residual=_frozen(self._torque),
            predicted_torque=_frozen(_NAN6 if self._torque is _NAN6 else self._tau - self._torque),
        )
        if events.listening():  # for a recording: residuals and flags of every cycle
            events.publish(
                "shadow",
                "report",
                flags=int(flags),
                names=str(flags),
                wrench_residual=residual,
                imu_residual=imu_residual,
                torque_residual=self._torque,
                payload_mass_kg=m,
            )
        return report

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Close the twin if the shadow opened it; safe to call twice."""
        if self._owns_twin:
            self.twin.close()

    def __enter__(self) -> Shadow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _twin_dynamics(model, twin: Robot) -> ArmDynamics:
    """Rigid-body dynamics of the arm with the twin's payload (``sim.Payload`` at the TCP: a
    solid sphere), if it has one."""
    dyn = ArmDynamics(model)
    payload = getattr(twin, "payload", None)
    if payload is None:
        return dyn
    sphere = 0.4 * payload.mass * payload.radius**2 * np.eye(3)
    return dyn.with_payload(payload.mass, payload.com, sphere, link="tcp")


def _frozen(x: np.ndarray) -> np.ndarray:
    out = np.array(x, dtype=float)
    out.flags.writeable = False
    return out
