"""Domain randomisation of the environments: what is drawn per episode, from which range.

Off by default (``randomize=False``); ``randomize=True`` uses ``DEFAULT_RANDOMIZATION``, or pass a
``Randomization`` with your own ranges. Every draw comes from the environment's
``reset(seed=...)`` generator (after the task's goal and start), so a seed gives the same episode.

| parameter | range (default) | unit | applied through |
|---|---|---|---|
| ``link_mass_scale`` | 0.8 - 1.2 per link | x URDF mass and inertia | ``robot.scale_link_masses`` (sim) |
| ``joint_damping`` | 0.0 - 0.3 per joint | N m s/rad | ``robot.set_joint_dynamics`` (sim) |
| ``joint_friction`` | 0.0 - 0.2 per joint | N m (Coulomb) | ``robot.set_joint_dynamics`` (sim) |
| ``payload_mass`` | 0.0 - 0.5, com within +-2 cm | kg, m (TCP frame) | ``robot.attach_payload`` (sim) |
| ``ft_bias`` / ``ft_noise_std`` | +-(2 N, 0.05 N m) / 0 - (0.3 N, 0.005 N m) | per axis | the state read (Press tares the bias away) |
| ``imu_accel_bias`` / ``_noise_std`` | +-0.1 / 0 - 0.05 | m/s^2 | the state read |
| ``imu_gyro_bias`` / ``_noise_std`` | +-0.01 / 0 - 0.005 | rad/s | the state read |
| ``actuation_latency_periods`` | 0 - 2 control periods (0 - 10 ms) | periods | the env's write |
| ``observation_delay_periods`` | 0 - 2 control periods (0 - 10 ms) | periods | the env's read |

Physical parameters need a backend that can change them (the sim robot's methods above; a real
arm is already what it is): on a robot without those methods they are skipped. Sensor noise and
bias are added to the readings the task sees, on either backend. Latency: the new joint target
is written that many control periods into the policy period (the previous one holds until then).
Delay: the observation is built from the state that many control periods old.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from twin.robot import RobotState


@dataclass(frozen=True)
class Randomization:
    """Ranges of the per-episode draws (module table); ``(lo, hi)`` uniform, ``+-x`` symmetric."""

    link_mass_scale: tuple[float, float] = (0.8, 1.2)
    joint_damping: tuple[float, float] = (0.0, 0.3)
    joint_friction: tuple[float, float] = (0.0, 0.2)
    payload_mass: tuple[float, float] = (0.0, 0.5)
    payload_com_m: float = 0.02
    ft_bias: tuple[float, float] = (2.0, 0.05)  # +- (force N, torque N m) per axis
    ft_noise_std: tuple[float, float] = (0.3, 0.005)  # 0 .. (force N, torque N m)
    imu_accel_bias: float = 0.1
    imu_accel_noise_std: float = 0.05
    imu_gyro_bias: float = 0.01
    imu_gyro_noise_std: float = 0.005
    actuation_latency_periods: tuple[int, int] = (0, 2)
    observation_delay_periods: tuple[int, int] = (0, 2)

    def __post_init__(self) -> None:
        for name in ("link_mass_scale", "joint_damping", "joint_friction", "payload_mass"):
            lo, hi = getattr(self, name)
            if not (np.isfinite(lo) and np.isfinite(hi) and 0.0 <= lo <= hi):
                raise ValueError(f"Randomization.{name} must be (lo, hi) with 0 <= lo <= hi")
        if self.link_mass_scale[0] <= 0.0:
            raise ValueError("Randomization.link_mass_scale must stay > 0")
        for name in ("actuation_latency_periods", "observation_delay_periods"):
            lo, hi = getattr(self, name)
            if not (int(lo) == lo and int(hi) == hi and 0 <= lo <= hi):
                raise ValueError(f"Randomization.{name} must be whole (lo, hi), 0 <= lo <= hi")


DEFAULT_RANDOMIZATION = Randomization()


@dataclass(frozen=True)
class EpisodeDraw:
    """One episode's values: link_mass_scale, joint_damping, joint_friction (6,) each;
    payload_mass kg and payload_com (3,) m; ft_bias, ft_noise_std (6,); imu_bias (6,)
    [accel m/s^2, gyro rad/s], imu_noise_std (6,); latency and delay in control periods."""

    link_mass_scale: np.ndarray
    joint_damping: np.ndarray
    joint_friction: np.ndarray
    payload_mass: float
    payload_com: np.ndarray
    ft_bias: np.ndarray
    ft_noise_std: np.ndarray
    imu_bias: np.ndarray
    imu_noise_std: np.ndarray
    actuation_latency_periods: int
    observation_delay_periods: int


def draw(r: Randomization, rng: np.random.Generator) -> EpisodeDraw:
    """Draw one episode's values from ``r``'s ranges."""
    f_b, t_b = r.ft_bias
    f_n, t_n = r.ft_noise_std
    per_axis = np.array([f_b] * 3 + [t_b] * 3)
    imu_b = np.array([r.imu_accel_bias] * 3 + [r.imu_gyro_bias] * 3)
    imu_n = np.array([r.imu_accel_noise_std] * 3 + [r.imu_gyro_noise_std] * 3)
    return EpisodeDraw(
        link_mass_scale=rng.uniform(*r.link_mass_scale, size=6),
        joint_damping=rng.uniform(*r.joint_damping, size=6),
        joint_friction=rng.uniform(*r.joint_friction, size=6),
        payload_mass=float(rng.uniform(*r.payload_mass)),
        payload_com=rng.uniform(-r.payload_com_m, r.payload_com_m, size=3),
        ft_bias=rng.uniform(-1.0, 1.0, size=6) * per_axis,
        ft_noise_std=rng.uniform(0.0, 1.0, size=6) * np.array([f_n] * 3 + [t_n] * 3),
        imu_bias=rng.uniform(-1.0, 1.0, size=6) * imu_b,
        imu_noise_std=rng.uniform(0.0, 1.0, size=6) * imu_n,
        actuation_latency_periods=int(
            rng.integers(r.actuation_latency_periods[0], r.actuation_latency_periods[1] + 1)
        ),
        observation_delay_periods=int(
            rng.integers(r.observation_delay_periods[0], r.observation_delay_periods[1] + 1)
        ),
    )


def apply_physics(robot, d: EpisodeDraw) -> None:
    """Set the draw's physical parameters on ``robot`` where it has the methods (module doc)."""
    scale = getattr(robot, "scale_link_masses", None)
    if callable(scale):
        scale(d.link_mass_scale)
    dynamics = getattr(robot, "set_joint_dynamics", None)
    if callable(dynamics):
        dynamics(damping=d.joint_damping, friction=d.joint_friction)
    attach, detach = getattr(robot, "attach_payload", None), getattr(robot, "detach_payload", None)
    if callable(attach) and callable(detach):
        if d.payload_mass > 0.0:
            attach(d.payload_mass, d.payload_com)
        else:
            detach()


def perturb(state: RobotState, d: EpisodeDraw, rng: np.random.Generator) -> RobotState:
    """``state`` with the draw's bias and noise added to its F/T and IMU samples (if any)."""
    w, imu = state.wrench, state.imu
    if w is not None:
        noisy = np.asarray(w.wrench, float) + d.ft_bias + d.ft_noise_std * rng.standard_normal(6)
        w = replace(w, wrench=noisy)
    if imu is not None:
        e = d.imu_bias + d.imu_noise_std * rng.standard_normal(6)
        imu = replace(
            imu,
            specific_force=np.asarray(imu.specific_force, float) + e[:3],
            angular_rate=np.asarray(imu.angular_rate, float) + e[3:],
        )
    return replace(state, wrench=w, imu=imu)
