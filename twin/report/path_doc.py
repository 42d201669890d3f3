"""A planned path as a document: JSON (``path_document``) and pictures (``write_path``).

Configurations are (6,) rad in the model's joint order; positions (3,) m in the world (= arm
base) frame; times s. The sampled trajectory is the executed joint curve (blends included),
time-parameterised at the model's velocity and acceleration limits (``twin.planning.motion.execute``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from twin.planning.motion.execute import prepare
from twin.report import figures
from twin.report.camera import Camera
from twin.report.jsonable import plain

PATH_FORMAT = "twin-path"
PATH_VERSION = 1
#: Spacing (s) of the trajectory samples written to the JSON.
SAMPLE_PERIOD_S = 0.02


def path_document(planner, start: np.ndarray, goals: Sequence[dict], result, scene: str) -> dict:
    """The JSON document of ``result`` (a ``PathResult``) planned from ``start`` (6,) rad to
    ``goals`` (each a dict: ``kind`` "joints" or "pose", ``value``, ``configurations`` (M, 6)
    rad the planner was given for it)."""
    doc = {
        "format": PATH_FORMAT,
        "version": PATH_VERSION,
        "scene": scene,
        "joint_names": list(planner.model.joint_names),
        "start": start,
        "goals": list(goals),
        "ok": bool(result),
        "error": None if result else result.error.value,
        "stats": dict(result.stats),
    }
    if not result:
        return plain(doc)
    doc["selected_goal_index"] = result.selected_goal_idx
    doc["waypoints"] = [
        {
            "configuration": w.configuration,
            "movement": w.movement.value,
            "blend_radius": [w.blend_radius.entry, w.blend_radius.exit],
            "tcp": planner.tcp_pose(w.configuration)[:3, 3],
        }
        for w in result.path()
    ]
    f_T_t = planner.get_tcp().transform
    trajectory = prepare(planner.model, start, result.path(), f_T_t).trajectory
    t = trajectory.sample_times(SAMPLE_PERIOD_S)
    q = trajectory.sample(t)[0]
    doc["trajectory"] = {
        "duration_s": trajectory.duration,
        "t_s": t,
        "q": q,
        "tcp": (planner.model.fk(q, "flange") @ f_T_t)[:, :3, 3],
        "collision_free": bool(np.all(planner.configurations_free(q))),
    }
    return plain(doc)


def write_path(
    out: str | Path, doc: dict, snapshot: tuple[np.ndarray, Camera] | None = None
) -> list[Path]:
    """Write ``path.json``, and for a planned path ``plan.png`` (TCP path views and the joint
    positions along it) and, with ``snapshot``, ``scene.png`` (the path drawn in the rendered
    scene). Returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "path.json"]
    written[0].write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if not doc["ok"]:
        return written
    tcp = np.array(doc["trajectory"]["tcp"])
    goals = np.array([w["tcp"] for w in doc["waypoints"]])
    title = f"Planned TCP path, scene {doc['scene']} ({len(doc['waypoints'])} way-points)"
    written.append(
        figures.save(
            figures.tcp_paths([("plan", tcp, None)], (), goals[-1:], title, targets_label="goal"),
            out / "plan.png",
        )
    )
    q = np.array(doc["trajectory"]["q"])
    written.append(figures.save(figures.joint_path(q, doc["joint_names"]), out / "plan_joints.png"))
    if snapshot is not None:
        image, camera = snapshot
        fig = figures.snapshot(
            image, camera, [("plan", tcp)], (), goals[-1:], title, targets_label="goal"
        )
        written.append(figures.save(fig, out / "scene.png"))
    return written
