"""Payload identification from static F/T samples: mass, centre of mass and the sensor's offsets.

At rest the load beyond the sensor (tool and payload: mass ``m``, centre of mass ``c`` in the
sensor frame) exerts its weight on the sensor, so a reading in the sensor frame is

    f = m g_s + f_0,     t = c x (m g_s) + t_0 = -skew(g_s) h + t_0,     h = m c,

with ``g_s = sensor_R_base g`` the gravity vector in the sensor frame (m/s^2; from FK of the
measured joints, or from an IMU at rest: ``g_s = -sensor_R_imu specific_force``) and ``f_0``,
``t_0`` the sensor's offsets (N, N m). That is linear in ``[m, h, f_0, t_0]`` (10 unknowns):
least squares over the poses (``lsq.solve``). The design is only well posed when gravity takes
directions in the sensor frame not all on one straight line (three or more distinct directions:
from two, the centre of mass along their difference is unobservable); its condition number is reported and a degenerate set (e.g. rotations about the vertical
only, which leave ``g_s`` unchanged) is refused with a reason.

``RECOMMENDED_POSES`` is a shipped set of eight configurations of the shipped arm (condition
about 1.3) that points gravity along +-x, +-y, +-z of the sensor and in between.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.calibration.lsq import LsqFit, solve
from twin.dynamics.model import GRAVITY, BodyInertial
from twin.spatial import quaternion

#: Largest column-scaled condition number accepted for a pose set.
MAX_POSE_CONDITION = 100.0
#: Joint configurations (8, 6) rad of the shipped arm for payload identification: the wrist
#: (joints 4-6) turns the sensor so that gravity points along each of its axes.
RECOMMENDED_POSES = np.array(
    [
        [0.0, 0.349, 1.571, 0.0, 1.222, 0.0],  # home: tool down (gravity +z of the sensor)
        [0.0, 0.3, 0.5, 0.0, -0.8, 0.0],  # tool up, wrist bent (not the singular upright)
        [0.0, 0.349, 1.571, 0.0, -0.349, 0.0],  # tool horizontal (gravity +x)
        [0.0, 0.349, 1.571, 0.0, -0.349, 1.571],  # ... turned: gravity -y
        [0.0, 0.349, 1.571, 0.0, -0.349, -1.571],  # gravity +y
        [0.0, 0.349, 1.571, 0.0, -0.349, 3.1416],  # gravity -x
        [0.0, 0.349, 1.571, 0.785, 0.4, 0.785],  # oblique
        [0.0, 0.349, 1.571, -0.785, 0.6, -2.356],  # oblique, the other side
    ]
)


@dataclass(frozen=True)
class PayloadEstimate:
    """The load beyond the sensor (sensor frame) and the sensor's offsets, or a refusal.

    ok: False when the pose set is degenerate (``reason`` says why; the numbers are NaN).
    mass: kg; com: (3,) m; force_offset: (3,) N; torque_offset: (3,) N m.
    residual_rms: (2,) RMS misfit of the forces (N) and torques (N m).
    condition: column-scaled condition number of the pose set's design.
    std: (10,) standard errors of ``[m, h (3), f_0 (3), t_0 (3)]`` from the residuals.
    """

    ok: bool
    reason: str
    mass: float
    com: np.ndarray
    force_offset: np.ndarray
    torque_offset: np.ndarray
    residual_rms: np.ndarray
    condition: float
    std: np.ndarray
    poses: int

    def minus(self, known: BodyInertial) -> BodyInertial:
        """The payload alone: this load minus a ``known`` part (e.g. the tool, ``tool_load``),
        both in the sensor frame. The inertia is not identified (zeros)."""
        m = self.mass - known.mass
        if not m > 0.0:
            raise ValueError(
                f"the estimate ({self.mass:.4g} kg) is not heavier than the known part"
            )
        com = (self.mass * self.com - known.mass * known.com) / m
        return BodyInertial(float(m), com, np.zeros((3, 3)))


def gravity_in_sensor(base_R_sensor: np.ndarray, gravity: np.ndarray = GRAVITY) -> np.ndarray:
    """(K, 3) m/s^2: gravity in the sensor frame of rotations (K, 3, 3) ``base_R_sensor``."""
    r = np.asarray(base_R_sensor, float)
    return np.einsum("kji,j->ki", r, np.asarray(gravity, float))


def gravity_from_imu(specific_force: np.ndarray, sensor_R_imu: np.ndarray) -> np.ndarray:
    """(K, 3) m/s^2: gravity in the sensor frame from an IMU at rest (``specific_force`` (K, 3)
    m/s^2, IMU frame, reads ``-g``) mounted at ``sensor_R_imu`` (3, 3)."""
    return -np.einsum("ij,kj->ki", np.asarray(sensor_R_imu, float), specific_force)


def design(gravity_s: np.ndarray) -> np.ndarray:
    """(6K, 10) rows of the readings per ``[m, h, f_0, t_0]`` for gravity (K, 3) sensor frame."""
    g = np.asarray(gravity_s, float)
    k = g.shape[0]
    a = np.zeros((k, 6, 10))
    a[:, :3, 0] = g
    a[:, :3, 4:7] = np.eye(3)
    a[:, 3:, 1:4] = -quaternion.skew(g)
    a[:, 3:, 7:10] = np.eye(3)
    return a.reshape(6 * k, 10)


def pose_set_condition(gravity_s: np.ndarray) -> float:
    """Column-scaled condition number of a pose set (gravity (K, 3) in the sensor frame)."""
    return solve(design(gravity_s), np.zeros(6 * len(gravity_s))).condition


def identify_payload(
    wrenches: np.ndarray, gravity_s: np.ndarray, max_condition: float = MAX_POSE_CONDITION
) -> PayloadEstimate:
    """Least-squares load and offsets (module doc) from static readings ``wrenches`` (K, 6)
    ``[fx, fy, fz, tx, ty, tz]`` N, N m (sensor frame; averaged per pose) and ``gravity_s``
    (K, 3) m/s^2 (gravity in the sensor frame at each). Refuses (``ok`` False) a degenerate
    pose set."""
    w = np.asarray(wrenches, float)
    g = np.asarray(gravity_s, float)
    if w.ndim != 2 or w.shape[1] != 6 or g.shape != (w.shape[0], 3):
        raise ValueError(
            f"expected wrenches (K, 6) and gravity (K, 3) of the same K, got {w.shape}, {g.shape}"
        )
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(g))):
        raise ValueError("wrenches and gravity must be finite")
    k = w.shape[0]
    if k < 3:
        return _refused(f"{k} poses: at least 3 with different sensor orientations are needed", k)
    fit = solve(design(g), w.reshape(-1), max_condition)
    if fit.degenerate:
        return _refused(_why(g, fit), k, fit.condition)
    x = fit.x
    res = fit.residuals.reshape(k, 6)
    rms = np.sqrt(np.mean(res[:, :3] ** 2)), np.sqrt(np.mean(res[:, 3:] ** 2))
    dof = max(6 * k - 10, 1)
    std = np.sqrt(np.diag(fit.covariance) * float(fit.residuals @ fit.residuals) / dof)
    mass = float(x[0])
    return PayloadEstimate(
        ok=True,
        reason="",
        mass=mass,
        com=x[1:4] / mass if mass != 0.0 else np.full(3, np.nan),
        force_offset=x[4:7],
        torque_offset=x[7:10],
        residual_rms=np.array(rms),
        condition=fit.condition,
        std=std,
        poses=k,
    )


def tool_load(model, sensor_link: str = "ft_sensor") -> BodyInertial:
    """The model's load beyond the sensor: every link fixed at or beyond ``sensor_link``, merged
    into one body in the sensor frame (what an unloaded sensor weighs)."""
    zero = np.zeros(model.n_joints)
    sensor_T_base = np.linalg.inv(model.fk(zero, sensor_link))
    index = model.tree.index[sensor_link]
    total = BodyInertial(0.0, np.zeros(3), np.zeros((3, 3)))
    for link in model.link_names:
        beyond = link == sensor_link or any(e.link == index for e in model.tree.path(link))
        inertial = model.link_inertial(link)
        if not beyond or inertial is None or inertial.mass <= 0.0:
            continue
        part = BodyInertial(inertial.mass, np.asarray(inertial.com, float), inertial.inertia)
        total = total + part.moved(sensor_T_base @ model.fk(zero, link))
    return total


def _why(g: np.ndarray, fit: LsqFit) -> str:
    directions = g / np.linalg.norm(g, axis=1, keepdims=True)
    spread = np.linalg.svd(directions - directions.mean(axis=0), compute_uv=False)
    if spread[0] < 1e-3:
        what = "gravity has the same direction in the sensor frame at every pose"
    elif spread[1] < 1e-3:
        what = "gravity directions in the sensor frame lie on one line (two directions only)"
    else:
        what = "the gravity directions in the sensor frame are too close together"
    return (
        f"degenerate pose set: {what} (condition {fit.condition:.3g}, rank {fit.rank} of 10); "
        "turn the sensor about a horizontal axis too (see RECOMMENDED_POSES)"
    )


def _refused(reason: str, k: int, condition: float = float("inf")) -> PayloadEstimate:
    nan3 = np.full(3, np.nan)
    return PayloadEstimate(
        False,
        reason,
        float("nan"),
        nan3,
        nan3,
        nan3,
        np.full(2, np.nan),
        condition,
        np.full(10, np.nan),
        k,
    )
