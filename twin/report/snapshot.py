"""``render_snapshot``: the scene rendered by the sim with the arm at a configuration.

It goes through the sim-to-real switch (``open_robot("sim", scene=..., initial_q=...)``) and the
robot's ``render``, so this works the same whichever backend the run itself used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from twin.report.camera import Camera

#: In front of the arm, to its right, looking down at the workspace (bin and shelf alike).
DEFAULT_CAMERA = Camera(eye=(1.25, -0.55, 0.75), target=(0.25, 0.0, 0.12), width=640, height=480)


def render_snapshot(
    scene: str | Path, q: np.ndarray, camera: Camera = DEFAULT_CAMERA, seed: int = 0
) -> tuple[np.ndarray, Camera] | None:
    """The image (H, W, 3) uint8 of ``scene`` with the arm at ``q`` (6,) rad, and ``camera``;
    None when the sim backend cannot render."""
    from twin.backends import open_robot

    with open_robot("sim", scene=scene, seed=seed, initial_q=np.asarray(q, float)) as sim:
        render = getattr(sim, "render", None)
        return None if render is None else (render(**camera.render_kwargs()), camera)
