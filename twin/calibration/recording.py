"""Recorded calibration data: one file format for the twin and the real arm.

A recording is a NumPy ``.npz`` file with

* ``q``: (K, n) float64, rad: the measured joint configuration at each pose (the robot's
  ``RobotState.q``, averaged over the hold);
* ``cam_T_marker``: (K, 4, 4) float64, m: the camera's marker pose at each (NaN where none);
* ``meta``: a JSON string: ``{"format": "twin-calibration/1", "joint_names": [...],
  "mount": "wrist" | "fixed" | "", "note": "..."}``.

The flange poses come from the arm model's FK of ``q`` when the data are used
(``flange_poses``), so the same file serves every estimator in ``twin.calibration``.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

import numpy as np

FORMAT = "twin-calibration/1"


@dataclass(frozen=True)
class Recording:
    """q: (K, n) rad; cam_T_marker: (K, 4, 4) m; joint_names; mount; note."""

    q: np.ndarray
    cam_T_marker: np.ndarray
    joint_names: tuple[str, ...]
    mount: str = ""
    note: str = ""

    def flange_poses(self, model) -> np.ndarray:
        """``base_T_flange`` (K, 4, 4) by the model's FK (joint names must match)."""
        if tuple(model.joint_names) != tuple(self.joint_names):
            raise ValueError(
                f"recording joints {self.joint_names} are not the model's {model.joint_names}"
            )
        return model.fk(self.q, "flange")

    def save(self, path: str | pathlib.Path) -> None:
        meta = {"format": FORMAT, "joint_names": list(self.joint_names), "mount": self.mount}
        meta["note"] = self.note
        np.savez(path, q=self.q, cam_T_marker=self.cam_T_marker, meta=json.dumps(meta))

    @classmethod
    def load(cls, path: str | pathlib.Path) -> Recording:
        """Read a recording; raises ``ValueError`` for another format or bad shapes."""
        with np.load(path, allow_pickle=False) as data:
            try:
                meta = json.loads(str(data["meta"]))
                q, cam = np.array(data["q"], float), np.array(data["cam_T_marker"], float)
            except KeyError as e:
                raise ValueError(f"{path}: not a calibration recording (missing {e})") from e
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        if q.ndim != 2 or cam.shape != (q.shape[0], 4, 4):
            raise ValueError(f"{path}: expected q (K, n) and cam_T_marker (K, 4, 4)")
        return cls(q, cam, tuple(meta["joint_names"]), meta.get("mount", ""), meta.get("note", ""))
