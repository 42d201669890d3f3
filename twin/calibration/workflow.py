"""The calibration workflow on any robot: visit configurations, hold, observe, record.

``record(robot, configurations, observe)`` moves through ``configurations`` (``collect``),
holds each, and stores the measured joints with ``observe(state)`` (a camera's
``cam_T_marker``; ``camera.SimulatedCamera.observe`` on the twin, a real detector on the arm)
as a ``recording.Recording``; the estimators then run on the recording. ``pivot_configurations``
gives the joint configurations that put a tool tip on a fixed point in several orientations.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from twin.calibration.collect import hold_and_read, move_to
from twin.calibration.recording import Recording
from twin.dynamics import ArmDynamics
from twin.robot import Robot, RobotState
from twin.spatial import quaternion as quat


def record(
    robot: Robot,
    configurations: np.ndarray,
    observe: Callable[[RobotState], np.ndarray] | None = None,
    *,
    hold_s: float = 0.2,
    mount: str = "",
    dynamics: ArmDynamics | None = None,
) -> Recording:
    """Visit each configuration (K, n) rad, hold ``hold_s`` and record the averaged joints and
    one ``observe`` of the settled state (NaN without ``observe``)."""
    dyn = ArmDynamics(robot.model) if dynamics is None else dynamics
    qs, seen = [], []
    for q in np.asarray(configurations, float):
        move_to(robot, q, dyn)
        qs.append(hold_and_read(robot, q, hold_s, dyn).q)
        seen.append(observe(robot.read()) if observe is not None else np.full((4, 4), np.nan))
    return Recording(np.array(qs), np.array(seen), tuple(robot.model.joint_names), mount)


def pivot_configurations(
    model,
    flange_p_tip: np.ndarray,
    pivot: np.ndarray,
    tilts: np.ndarray,
    reference_q: np.ndarray,
    touch_std_m: float = 0.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Joint configurations (K, n) rad holding the tip at ``flange_p_tip`` (3,) m (flange frame)
    on ``pivot`` (3,) m (base frame), the flange turned by each of ``tilts`` (K, 3) rotation
    vectors (rad, base frame) from its orientation at ``reference_q``; each target misses the
    point by a normal ``touch_std_m`` per axis (how well a tip is put on a divot). Raises
    ``ValueError`` if a pose cannot be reached in the reference's posture."""
    rng = np.random.default_rng(0) if rng is None else rng
    base_r = model.fk(reference_q, "flange")[:3, :3]
    out = []
    for tilt in np.asarray(tilts, float):
        r = quat.to_matrix(quat.exp(tilt)) @ base_r
        target = np.eye(4)
        target[:3, :3] = r
        miss = rng.normal(0.0, touch_std_m, 3) if touch_std_m else 0.0
        target[:3, 3] = np.asarray(pivot, float) + miss - r @ np.asarray(flange_p_tip, float)
        q = model.ik(target, reference_q, link="flange")
        if q is None:
            raise ValueError(f"tilt {tilt} rad: the pivot pose is out of reach")
        out.append(q)
    return np.array(out)
