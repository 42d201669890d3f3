"""An IMU model on the ``imu`` link: specific force and angular rate in the IMU frame.

    specific_force (3,) m/s^2 = R^T (a - g) + accel_bias + noise     (+9.81 along world up at rest)
    angular_rate   (3,) rad/s = R^T w + gyro_bias + noise
    orientation    (4,) [w, x, y, z] world_T_imu rotation (if ``ImuConfig.orientation``)

``R`` is world_R_imu, ``g`` the engine's gravity (m/s^2, world), ``w`` the link's angular velocity
(world). ``a`` is the acceleration of the IMU frame origin, a backward finite difference of its
velocity over one physics step, ``(v_k - v_{k-1}) / physics_dt``, taken at each sample instant;
the velocity of the frame origin is PyBullet's centre-of-mass velocity moved to the origin
(``v + w x (p_origin - p_com)``). Samples come at ``rate_hz`` (200 Hz default) on the first
physics step at or after each nominal instant and are held in between. Noise is Gaussian from the
run's seeded generator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from twin.robot import ImuSample


@dataclass(frozen=True)
class ImuConfig:
    """IMU settings; the defaults are an ideal 200 Hz IMU that also reports its orientation.

    accel_noise_std m/s^2 and gyro_noise_std rad/s per axis; accel_bias (3,) m/s^2 and
    gyro_bias (3,) rad/s in the IMU frame.
    """

    rate_hz: float = 200.0
    accel_noise_std: float = 0.0
    gyro_noise_std: float = 0.0
    accel_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)
    gyro_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)
    orientation: bool = True

    def __post_init__(self) -> None:
        if not (np.isfinite(self.rate_hz) and 0.0 < self.rate_hz <= 1e4):
            raise ValueError(f"ImuConfig.rate_hz must be in (0, 10000] Hz, got {self.rate_hz}")
        if not (self.accel_noise_std >= 0.0 and self.gyro_noise_std >= 0.0):
            raise ValueError("ImuConfig noise standard deviations must be >= 0")
        for name in ("accel_bias", "gyro_bias"):
            arr = np.asarray(getattr(self, name), float)
            if arr.shape != (3,) or not np.all(np.isfinite(arr)):
                raise ValueError(
                    f"ImuConfig.{name} must be 3 finite numbers, got {getattr(self, name)}"
                )


class ImuModel:
    """Sampled IMU readings from the link state (module doc).

    The robot calls ``wants(t_us)`` each physics step; when it is true it passes the link state to
    ``observe`` (the step before a sample instant and the step of it).
    """

    def __init__(
        self,
        config: ImuConfig,
        physics_dt: float,
        gravity: Sequence[float],
        rng: np.random.Generator,
        rotation_matrix: Callable[[Sequence[float]], Sequence[float]],
    ) -> None:
        """gravity: (3,) m/s^2 world; rotation_matrix: ``[x, y, z, w]`` -> 9 floats row-major
        (``Engine.rotation_matrix``)."""
        self.config = config
        self.physics_dt = physics_dt
        self.dt_us = round(physics_dt * 1e6)
        self._gravity = tuple(float(g) for g in gravity)
        self._rng = rng
        self._rotation_matrix = rotation_matrix
        self._has_noise = config.accel_noise_std > 0.0 or config.gyro_noise_std > 0.0
        self._noise_std = np.repeat([config.accel_noise_std, config.gyro_noise_std], 3)
        self._ab = tuple(float(b) for b in config.accel_bias)
        self._gb = tuple(float(b) for b in config.gyro_bias)
        self._period_us = 1e6 / config.rate_hz
        self._k = 0
        self.next_us = 0
        self._prev: tuple[int, np.ndarray] | None = None
        self.latest: ImuSample | None = None

    def restart(self, t_us: int) -> None:
        """Forget the velocity history (after a teleport); sample at the first physics step at or
        after ``t_us``, then on the ``rate_hz`` grid again."""
        self._prev = None
        self.next_us = t_us

    def wants(self, t_us: int) -> bool:
        return t_us + self.dt_us >= self.next_us

    def observe(self, t_us: int, link_state: tuple) -> None:
        """Take one physics step's link state (``Engine.link_state`` layout); scalar maths, as it
        runs at the physics rate."""
        (cx, cy, cz), (ox, oy, oz), xyzw = link_state[0], link_state[4], link_state[5]
        (vx, vy, vz), (wx, wy, wz) = link_state[6], link_state[7]
        rx, ry, rz = ox - cx, oy - cy, oz - cz  # com -> frame origin; v_origin = v_com + w x r
        v = (vx + wy * rz - wz * ry, vy + wz * rx - wx * rz, vz + wx * ry - wy * rx)
        prev, self._prev = self._prev, (t_us, v)
        if t_us < self.next_us:
            return
        if prev is not None and abs(t_us - prev[0] - self.dt_us) <= 1:
            pv, dt = prev[1], self.physics_dt
            a = ((v[0] - pv[0]) / dt, (v[1] - pv[1]) / dt, (v[2] - pv[2]) / dt)
        else:
            a = (0.0, 0.0, 0.0)  # no history yet (start, after a reset): at rest by assumption
        r = self._rotation_matrix(xyzw)  # world_R_imu, 9 floats row-major
        (gx, gy, gz), (bx, by, bz), (hx, hy, hz) = self._gravity, self._ab, self._gb
        sx, sy, sz = a[0] - gx, a[1] - gy, a[2] - gz  # R^T (a - g): columns of the row-major R
        x, y, z, w = xyzw
        if w < 0.0:
            x, y, z, w = -x, -y, -z, -w
        out = np.array((
            r[0] * sx + r[3] * sy + r[6] * sz + bx,
            r[1] * sx + r[4] * sy + r[7] * sz + by,
            r[2] * sx + r[5] * sy + r[8] * sz + bz,
            r[0] * wx + r[3] * wy + r[6] * wz + hx,
            r[1] * wx + r[4] * wy + r[7] * wz + hy,
            r[2] * wx + r[5] * wy + r[8] * wz + hz,
            w, x, y, z,
        ))  # fmt: skip
        c = self.config
        if self._has_noise:
            out[:6] += self._noise_std * self._rng.standard_normal(6)
        out.flags.writeable = False  # the views below inherit read-only
        self.latest = ImuSample(t_us, out[0:3], out[3:6], out[6:10] if c.orientation else None)
        self._k = max(self._k + 1, math.floor(t_us / self._period_us + 1e-9) + 1)
        self.next_us = round(self._k * self._period_us)
