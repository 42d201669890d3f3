"""A simulated camera for calibration on the twin: marker poses computed from the robot's state
through the arm model (never from the simulator), with configurable noise.

Mounts: ``"wrist"`` (the camera at ``flange_T_cam``, the marker fixed at ``base_T_marker``) or
``"fixed"`` (the camera at ``base_T_cam``, the marker on the flange at ``flange_T_marker``).
``observe(state)`` returns ``cam_T_marker`` (4, 4) with noise: the position plus a normal
``N(0, position_std_m^2)`` per axis, the rotation times ``exp(N(0, rotation_std_rad^2))`` per
axis (a small random rotation in the marker frame), from the camera's own seeded generator.
On hardware a real detector (e.g. an ArUco board) takes its place: any callable of the
``RobotState`` returning ``cam_T_marker``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from twin.calibration.rigid import invert
from twin.robot import RobotState
from twin.spatial import quaternion as quat

MOUNTS = ("wrist", "fixed")


@dataclass(frozen=True)
class CameraNoise:
    """position_std_m: m per axis; rotation_std_rad: rad per axis (both >= 0)."""

    position_std_m: float = 0.0
    rotation_std_rad: float = 0.0

    def __post_init__(self) -> None:
        for name in ("position_std_m", "rotation_std_rad"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0.0):
                raise ValueError(f"CameraNoise.{name} must be a finite number >= 0, got {v!r}")


class SimulatedCamera:
    """Marker observations of a camera on ``mount`` (module doc).

    camera: (4, 4) ``flange_T_cam`` (wrist) or ``base_T_cam`` (fixed); marker: (4, 4)
    ``base_T_marker`` (wrist) or ``flange_T_marker`` (fixed); model: the ``ArmModel``."""

    def __init__(
        self,
        model,
        mount: str,
        camera: np.ndarray,
        marker: np.ndarray,
        noise: CameraNoise = CameraNoise(),
        seed: int = 0,
    ) -> None:
        if mount not in MOUNTS:
            raise ValueError(f"mount must be one of {MOUNTS}, got {mount!r}")
        self.model, self.mount, self.noise = model, mount, noise
        self.camera = np.array(camera, float)
        self.marker = np.array(marker, float)
        self._rng = np.random.default_rng(seed)

    def true_cam_T_marker(self, q: np.ndarray) -> np.ndarray:
        """The noise-free ``cam_T_marker`` (4, 4) at joints ``q`` (n,) rad."""
        flange = self.model.fk(q, "flange")
        if self.mount == "wrist":
            return invert(flange @ self.camera) @ self.marker
        return invert(self.camera) @ flange @ self.marker

    def observe(self, state: RobotState) -> np.ndarray:
        """A noisy ``cam_T_marker`` (4, 4) at the robot's measured joints."""
        out = self.true_cam_T_marker(np.asarray(state.q, float))
        n = self.noise
        out[:3, 3] += self._rng.normal(0.0, n.position_std_m, 3) if n.position_std_m else 0.0
        if n.rotation_std_rad:
            wobble = quat.to_matrix(quat.exp(self._rng.normal(0.0, n.rotation_std_rad, 3)))
            out[:3, :3] = out[:3, :3] @ wobble
        return out
