"""The sim twin as a follower: teleported to measured joint states, it predicts its sensors.

``PyBulletRobot.follow(q, qd, t_us)`` calls ``Follower.predict``: the arm's joints are teleported
to the measured ``q``, ``qd`` (PyBullet recomputes link poses and velocities from them), and the
F/T sensor and IMU readings of an ideal sensor are computed from the rigid-body equations of the
part beyond the sensor joint.

Why not a physics step: PyBullet's joint reaction (what ``sim.ft_sensor`` reads on the running sim)
exists only inside ``stepSimulation``, and it reflects the acceleration of that step. Holding the
follower at the measured state with a PD law for one substep gives the acceleration of the PD law,
not the measured one, so the dynamic part of the wrench would be wrong; a computed-torque step
would need the measured acceleration anyway, plus joint damping and friction compensation, and it
moves the state. Everything beyond ``ft_sensor_joint`` is one rigid body (fixed joints), so the
wrench follows exactly from its inertial data and its motion:

    F = M (g - a_c)                               (world; what the tool side exerts on the sensor)
    wrench = [R^T F, c x R^T F - I al - w x (I w)]  (sensor frame; al, w in the sensor frame)

with M, c (sensor frame) and I (about the centre of mass, sensor axes) combined from PyBullet's
inertials of every link beyond the sensor joint plus the twin's payload (``Payload``: a solid
sphere at its centre), ``R`` = world_R_sensor and ``g`` the engine's gravity (m/s^2). ``a_c`` and
``al`` are backward differences of the velocities (centre-of-mass velocity and angular velocity)
between this call and an earlier one, i.e. the link accelerations from the measured ``qd`` with a
finite-differenced ``qdd``. Over one control period that is the mean acceleration of the period,
which is what the simulated sensor's moving average (sinc window = control period at the defaults)
averages the physics-step reactions over, so on a running sim the prediction matches the sensor
to the change of gravity's direction within a window (``tests/test_shadow_follow.py``). A longer
difference window (``accel_window_s``) trades lag for less noise from quantised velocities
(hardware). The first call after a start or a gap (> ``MAX_GAP_US``) assumes zero acceleration.

IMU (the ``imu`` link): specific force ``R_i^T (a_i - g)`` with ``a_i`` the backward difference of
the IMU origin's velocity, angular rate ``R_i^T w``, orientation world_R_imu ``[w, x, y, z]``.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np
from twin.sim.engine import Engine

from twin.spatial import SE3

#: Longest interval (us) between two calls that is still differenced; beyond it the follower
#: restarts (zero acceleration assumed).
MAX_GAP_US = 100_000
_HISTORY = 64  # velocity snapshots kept for the difference window


@dataclass(frozen=True)
class FollowPrediction:
    """What the twin's ideal sensors read at a followed joint state.

    wrench: (6,) ``[fx, fy, fz, tx, ty, tz]`` N, N m, sensor frame: the wrench the tool side
        exerts on the sensor (``twin.robot.WrenchSample`` convention).
    specific_force: (3,) m/s^2 and angular_rate: (3,) rad/s, IMU frame (``ImuSample``).
    orientation: (4,) ``[w, x, y, z]`` world_R_imu.
    sensor_specific_force: (3,) m/s^2, ``R^T (a_o - g)`` of the sensor frame origin, sensor frame
        (a point mass m at the origin adds ``-m * sensor_specific_force`` to the wrench).
    sensor_angular_velocity: (3,) rad/s, sensor_angular_acceleration: (3,) rad/s^2, sensor frame.
    dynamic: False when the accelerations were assumed zero (first call, after a gap).
    """

    t_us: int
    wrench: np.ndarray
    specific_force: np.ndarray
    angular_rate: np.ndarray
    orientation: np.ndarray
    sensor_specific_force: np.ndarray
    sensor_angular_velocity: np.ndarray
    sensor_angular_acceleration: np.ndarray
    dynamic: bool


@dataclass(frozen=True)
class RigidInertial:
    """A rigid body's mass kg, centre of mass com (3,) m and inertia (3, 3) kg m^2 about the
    centre of mass, both in one frame (here the sensor frame)."""

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    @staticmethod
    def combine(parts: list[tuple[float, np.ndarray, np.ndarray]]) -> RigidInertial:
        """Combine (mass, com (3,), inertia about own com (3, 3)) parts given in one frame."""
        mass = sum(m for m, _, _ in parts)
        com = sum(m * c for m, c, _ in parts) / mass
        inertia = np.zeros((3, 3))
        for m, c, i in parts:
            d = c - com
            inertia += i + m * (d @ d * np.eye(3) - np.outer(d, d))  # parallel axis theorem
        return RigidInertial(float(mass), com, inertia)


class Follower:
    """Teleports ``body``'s ``joints`` and predicts the sensors (module doc).

    sensor_link: the link carried by the F/T sensor joint (its frame is the sensor frame);
    imu_link, payload_link: the IMU link and the link a ``Payload`` is welded to (the TCP).
    """

    def __init__(
        self,
        engine: Engine,
        body: str,
        joints: list[int],
        sensor_link: int,
        imu_link: int,
        payload_link: int,
    ) -> None:
        self._io = engine.follow_io(body, joints, [sensor_link, imu_link])
        self._gravity = np.asarray(engine.gravity, float)
        self._rotation = engine.rotation_matrix
        world_T_sensor = SE3.from_pose7(engine.link_pose(body, sensor_link))
        sensor_T = {
            link: world_T_sensor.inverse() @ SE3.from_pose7(engine.link_pose(body, link))
            for link in _subtree(engine, body, sensor_link)
        }
        self._parts = [_link_part(engine, body, link, t) for link, t in sensor_T.items()]
        self._sensor_T_payload_link = (
            sensor_T[payload_link]
            if payload_link in sensor_T
            else world_T_sensor.inverse() @ SE3.from_pose7(engine.link_pose(body, payload_link))
        )
        self._payload_key: object = ()
        self.inertial = RigidInertial.combine(self._parts)
        self._history: collections.deque[tuple[int, np.ndarray]] = collections.deque(
            maxlen=_HISTORY
        )

    def restart(self) -> None:
        """Forget the velocity history: the next prediction assumes zero acceleration."""
        self._history.clear()

    def _update_payload(self, payload) -> None:
        key = None if payload is None else (payload.mass, payload.com, payload.radius)
        if key == self._payload_key:
            return
        parts = list(self._parts)
        if payload is not None:
            com = self._sensor_T_payload_link.act(np.asarray(payload.com, float))
            sphere = 0.4 * payload.mass * payload.radius**2 * np.eye(3)
            parts.append((payload.mass, com, sphere))
        self.inertial = RigidInertial.combine(parts)
        self._payload_key = key

    def predict(
        self,
        q: np.ndarray,
        qd: np.ndarray,
        t_us: int,
        payload=None,
        accel_window_us: int = 0,
    ) -> FollowPrediction:
        """Teleport to ``q`` (6,) rad, ``qd`` (6,) rad/s measured at ``t_us`` and predict.

        payload: the twin's ``sim.robot.Payload`` (or None), part of the tool side.
        accel_window_us: difference the velocities against the newest snapshot at least this
        much older (default: the previous call).
        """
        self._update_payload(payload)
        self._io.reset_states(
            targetValues=[[v] for v in q.tolist()], targetVelocities=[[v] for v in qd.tolist()]
        )
        s, si = self._io.link_states()
        x = np.array((*s[0], *s[4], *s[6], *s[7], *si[0], *si[4], *si[6]))
        r = np.array(self._rotation(s[5])).reshape(3, 3)  # world_R_sensor
        ri = np.array(self._rotation(si[5])).reshape(3, 3)  # world_R_imu
        w = x[9:12]
        r_o = x[3:6] - x[0:3]  # link com -> sensor origin; the same for the IMU link and origin
        levers = np.stack((r_o, r_o + r @ self.inertial.com, x[15:18] - x[12:15]))
        v_o, v_c, v_i = _cross(w, levers) + (x[6:9], x[6:9], x[18:21])
        snapshot = np.stack((v_o, v_c, v_i, w))  # sensor origin, tool side's com, IMU origin
        acc, dynamic = self._difference(t_us, snapshot, accel_window_us)
        a_o, a_c, a_i, alpha = acc
        g = self._gravity
        rt = r.T
        w_s, alpha_s = rt @ w, rt @ alpha
        inertial = self.inertial
        f_s = inertial.mass * (rt @ (g - a_c))
        lever, gyroscopic = _cross(np.stack((inertial.com, w_s)), (f_s, inertial.inertia @ w_s))
        t_s = lever - inertial.inertia @ alpha_s - gyroscopic
        xyzw = si[5]
        sign = -1.0 if xyzw[3] < 0.0 else 1.0
        orientation = sign * np.array((xyzw[3], xyzw[0], xyzw[1], xyzw[2]))
        return FollowPrediction(
            t_us=int(t_us),
            wrench=np.concatenate((f_s, t_s)),
            specific_force=ri.T @ (a_i - g),
            angular_rate=ri.T @ w,
            orientation=orientation,
            sensor_specific_force=rt @ (a_o - g),
            sensor_angular_velocity=w_s,
            sensor_angular_acceleration=alpha_s,
            dynamic=dynamic,
        )

    def _difference(
        self, t_us: int, snapshot: np.ndarray, window_us: int
    ) -> tuple[np.ndarray, bool]:
        """(4, 3) accelerations [a_o, a_c, a_i, alpha] (world) and whether they were measured."""
        history = self._history
        if history and not (0 < t_us - history[-1][0] <= MAX_GAP_US + window_us):
            history.clear()
        before = None
        for t, v in reversed(history):
            before = (t, v)
            if t_us - t >= window_us:
                break
        history.append((t_us, snapshot))
        if before is None:
            return np.zeros((4, 3)), False
        return (snapshot - before[1]) / ((t_us - before[0]) * 1e-6), True


def _subtree(engine: Engine, body: str, root: int) -> list[int]:
    """``root`` and every link below it (link indices)."""
    infos = engine.joints(body)
    out = [root]
    for info in infos:  # PyBullet lists a parent before its children
        if info.parent_index in out:
            out.append(info.index)
    return out


def _link_part(
    engine: Engine, body: str, link: int, sensor_T_link: SE3
) -> tuple[float, np.ndarray, np.ndarray]:
    inertial = engine.link_inertial(body, link)
    sensor_T_inertial = sensor_T_link @ SE3.from_pose7(inertial.link_T_inertial)
    rot = sensor_T_inertial.rotation.matrix()
    inertia = rot @ np.diag(inertial.inertia_diagonal) @ rot.T
    return inertial.mass, np.asarray(sensor_T_inertial.translation, float), inertia


_NEXT, _PREV = [1, 2, 0], [2, 0, 1]


def _cross(a, b) -> np.ndarray:
    """Row-wise cross products of (..., 3) arrays (``np.cross`` costs ~10x more on a few rows)."""
    a, b = np.asarray(a), np.asarray(b)
    return a[..., _NEXT] * b[..., _PREV] - a[..., _PREV] * b[..., _NEXT]
