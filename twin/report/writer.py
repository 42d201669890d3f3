"""``write_report``: a run's report folder.

out/
  figures.json    every figure (number) of every step, the thresholds, the summary, and
                  what each PNG shows
  joints.png      joint positions against their targets
  tcp_path.png    TCP path against the plan (top and side views, tracking error)
  ft.png          F/T force and torque traces (tared, world-aligned frame)
  imu.png         IMU specific force and angular rate
  snapshot.png    the rendered scene with the planned TCP paths drawn in it (when given)
  trace.npz       the per-cycle trace behind the plots (``TraceRecorder.arrays``)
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from twin.report import figures
from twin.report.camera import Camera
from twin.report.jsonable import plain
from twin.report.records import MoveRecord, PolicyRecord

REPORT_FORMAT = "twin-demo-report"
REPORT_VERSION = 1

PLOTS = {
    "joints.png": "joint positions q (rad) measured against the commanded targets q_des, per joint",
    "tcp_path.png": "planner TCP path (mm, world): plan solid, measured dotted, top and side "
    "views; tracking error |measured - planned| (mm) per control cycle",
    "ft.png": "tared F/T wrench in a world-aligned frame: force (N), torque (N m)",
    "imu.png": "IMU specific force (m/s^2) and angular rate (rad/s), IMU frame",
    "snapshot.png": "the scene rendered by the sim with the planned TCP paths projected into it",
}


def summary(moves: Sequence[MoveRecord], policy: Sequence[PolicyRecord], steps) -> dict:
    """The figures the thresholds apply to (nan where a step did not run)."""
    data = {s.name: s.data for s in steps}
    weigh, imu = data.get("weigh", {}), data.get("imu", {})
    return {
        "max_goal_error_m": max((m.goal_error_m for m in moves), default=math.nan),
        "all_paths_collision_free": bool(moves) and all(m.collision_free for m in moves),
        "policy_max_position_error_m": max((p.position_error_m for p in policy), default=math.nan),
        "policy_max_rotation_error_rad": max(
            (p.rotation_error_rad for p in policy), default=math.nan
        ),
        "payload_rel_error": weigh.get("rel_error", math.nan),
        "imu_gravity_angle_rad": imu.get("gravity_angle_rad", math.nan),
    }


def _window(t: np.ndarray, phase: np.ndarray, names: Sequence[str]) -> tuple[float, float] | None:
    """The time span (s) covering every sample whose phase starts with one of ``names``."""
    hit = np.isin(np.char.partition(phase.astype(str), ":")[:, 0], list(names))
    return (float(t[hit][0]) - 0.2, float(t[hit][-1]) + 0.2) if np.any(hit) else None


def write_report(
    out: str | Path,
    *,
    steps,
    moves: Sequence[MoveRecord],
    policy: Sequence[PolicyRecord],
    trace: dict[str, np.ndarray],
    thresholds: dict[str, float],
    joint_names: Sequence[str],
    snapshot: tuple[np.ndarray, Camera] | None = None,
    plots: bool = True,
) -> dict:
    """Write the report folder ``out`` (module doc); returns the JSON written. ``plots=False``:
    figures.json and trace.npz only (no PNG; ``plots`` in the JSON is then empty)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t, phase = trace["t_s"], trace["phase"]
    files = {}
    if plots and len(t):
        files["joints.png"] = figures.joints(t, trace["q"], trace["q_des"], phase, joint_names)
        weigh = next(
            (st.data for st in steps if st.name == "weigh" and "expected_n" in st.data), None
        )
        marks = [] if weigh is None else [(weigh["expected_n"], 0, "payload weight (Fz)")]
        title = "world-aligned frame, tared at home"
        files["ft.png"] = figures.wrench(
            t, trace["ft_world"], phase, title, marks, _window(t, phase, ("lift", "weigh"))
        )
        files["imu.png"] = figures.imu(t, trace["specific_force"], trace["angular_rate"], phase)
    series = [
        (
            m.name,
            np.concatenate([p.planned for p in m.parts]),
            np.concatenate([p.measured for p in m.parts]),
        )
        for m in moves
        if m.parts
    ]
    reaches = [(f"policy {k + 1} (URDF tcp)", p.path) for k, p in enumerate(policy)]
    targets = np.array([p.target[:3] for p in policy]).reshape(-1, 3)
    if plots and (series or reaches):
        files["tcp_path.png"] = figures.tcp_paths(series, reaches, targets)
    if plots and snapshot is not None and series:
        image, camera = snapshot
        files["snapshot.png"] = figures.snapshot(
            image, camera, [s[:2] for s in series], reaches, targets
        )
    for name, fig in files.items():
        figures.save(fig, out / name)
    np.savez_compressed(out / "trace.npz", **trace)
    report = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "ok": all(s.ok for s in steps),
        "thresholds": thresholds,
        "summary": summary(moves, policy, steps),
        "steps": [{"name": s.name, "ok": s.ok, "figure": s.figure, "data": s.data} for s in steps],
        "moves": [{"name": m.name, **m.figures()} for m in moves],
        "policy": [p.figures() for p in policy],
        "plots": {name: PLOTS[name] for name in files},
        "trace": {"file": "trace.npz", "samples": len(t)},
    }
    report = plain(report)
    (out / "figures.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report
