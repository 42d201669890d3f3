"""Payload compensation for an F/T reading: subtract a known load's weight (and the sensor's
offsets), leaving the contact wrench, in any orientation.

The load (mass kg, centre of mass (3,) m in the physical sensor frame) and offsets come from
``twin.calibration.payload.identify_payload`` run on readings of the same pipeline (so the
offsets include any tare that was in force then). Its weight in the sensor frame, with
``g_s = sensor_R_world g`` (world = robot base, z up):

    weight wrench = [m g_s; c x (m g_s)]
    contact       = reading - offsets - weight wrench
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

GRAVITY = (0.0, 0.0, -9.81)  # m/s^2, world (robot base) frame


@dataclass(frozen=True)
class PayloadCompensation:
    """A load's weight to subtract. mass: kg; com: (3,) m, sensor frame; offsets: (6,) N, N m
    (sensor offsets to subtract as well, default none); gravity: (3,) m/s^2, world frame."""

    mass: float
    com: tuple[float, float, float]
    offsets: tuple[float, ...] = (0.0,) * 6
    gravity: tuple[float, float, float] = field(default=GRAVITY)

    def __post_init__(self) -> None:
        com, off, g = (np.asarray(x, float) for x in (self.com, self.offsets, self.gravity))
        if not (np.isfinite(self.mass) and self.mass >= 0.0):
            raise ValueError(f"payload mass must be a finite number >= 0 kg, got {self.mass!r}")
        for name, x, n in (("com", com, 3), ("offsets", off, 6), ("gravity", g, 3)):
            if x.shape != (n,) or not np.all(np.isfinite(x)):
                raise ValueError(f"payload {name} must be {n} finite numbers, got {x!r}")

    @classmethod
    def from_estimate(cls, estimate, include_offsets: bool = True) -> PayloadCompensation:
        """From a ``twin.calibration.payload.PayloadEstimate`` (refused estimates raise)."""
        if not estimate.ok:
            raise ValueError(f"cannot compensate a refused estimate: {estimate.reason}")
        offsets = np.concatenate((estimate.force_offset, estimate.torque_offset))
        return cls(
            float(estimate.mass),
            tuple(map(float, estimate.com)),
            tuple(map(float, offsets if include_offsets else np.zeros(6))),
        )

    def weight_wrench(self, world_R_sensor: np.ndarray) -> np.ndarray:
        """(6,) N, N m: the load's weight on the sensor (sensor frame) at ``world_R_sensor``."""
        g_s = np.asarray(world_R_sensor, float).T @ np.asarray(self.gravity, float)
        f = self.mass * g_s
        return np.concatenate((f, np.cross(np.asarray(self.com, float), f)))

    def apply(self, wrench: np.ndarray, world_T_sensor: np.ndarray) -> np.ndarray:
        """The contact wrench (6,) N, N m (sensor frame) of a ``wrench`` reading (6,) taken at
        ``world_T_sensor`` (4, 4)."""
        r = np.asarray(world_T_sensor, float)[:3, :3]
        return np.asarray(wrench, float) - np.asarray(self.offsets, float) - self.weight_wrench(r)
