"""``Camera``: where the report's snapshot is rendered from, and how world points land in it.

The sim renders with a look-at camera (z up) and a vertical field of view of ``fov_deg`` (the
renderer's default, 60 degrees), near and far planes 0.02 and 10 m (``PyBulletRobot.render``).
``project`` applies the same pinhole model, so a path drawn over the image sits on the scene.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UP = np.array([0.0, 0.0, 1.0])


@dataclass(frozen=True)
class Camera:
    """``eye`` and ``target`` (3,) m, world frame; image ``width`` x ``height`` pixels."""

    eye: tuple[float, float, float]
    target: tuple[float, float, float]
    width: int = 640
    height: int = 480
    fov_deg: float = 60.0

    def render_kwargs(self) -> dict:
        """The arguments of ``render(width, height, eye, target)``."""
        return {"width": self.width, "height": self.height, "eye": self.eye, "target": self.target}

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pixel coordinates (K, 2) ``[column, row]`` (row 0 at the top) of world points
        (K, 3) m, and (K,) whether each is in front of the camera."""
        p = np.atleast_2d(np.asarray(points, dtype=float)) - np.asarray(self.eye, dtype=float)
        forward = np.asarray(self.target, dtype=float) - np.asarray(self.eye, dtype=float)
        forward /= np.linalg.norm(forward)
        side = np.cross(forward, UP)
        if np.linalg.norm(side) < 1e-9:
            raise ValueError("camera: the view direction must not be vertical (up is world z)")
        side /= np.linalg.norm(side)
        up = np.cross(side, forward)
        depth = p @ forward
        focal = 1.0 / np.tan(np.radians(self.fov_deg) / 2.0)
        aspect = self.width / self.height
        with np.errstate(divide="ignore", invalid="ignore"):
            x_ndc = (p @ side) * focal / aspect / depth
            y_ndc = (p @ up) * focal / depth
        pixels = np.stack(
            ((x_ndc + 1.0) * 0.5 * self.width, (1.0 - y_ndc) * 0.5 * self.height), axis=1
        )
        return pixels, depth > 0.0
