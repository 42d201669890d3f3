"""``twin plan``: plan a collision-free path in a scene and write it as JSON and pictures.

    twin plan --scene table --goal 0.42,-0.18,0.25 --goal 0,0.3,1.2,0,1.1,0 --out plan/

A goal is 6 numbers (a joint configuration, rad), 3 (a TCP position, m, world, the tool
pointing down as at home) or 7 (a TCP pose ``px,py,pz,qw,qx,qy,qz``). A pose goal stands for
every closed-form IK posture that reaches it. Several goals form one request: the planner picks
the one with the shortest path (``--sequence``: through them in order instead). The start is
home, ``--start`` or (``--backend``) the robot's measured joints.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

import numpy as np

from twin.cli.common import add_backend_options, backend_session
from twin.names import closest
from twin.spatial import batch

DEFAULT_OUT = Path("twin-plan")


#: Tolerance on a pose goal's quaternion norm (hand-typed 0.7071... is renormalised within it).
QUAT_NORM_TOLERANCE = 1e-3


class GoalError(ValueError):
    """A ``--goal`` or ``--start`` that is not 3, 6 or 7 numbers."""


def check_goal(values: np.ndarray, text: str, extent_m: float) -> np.ndarray:
    """A goal's numbers (module doc) checked: a TCP position within +-``extent_m`` m, a pose's
    quaternion ``[w, x, y, z]`` of unit norm (renormalised); ``GoalError`` otherwise."""
    if len(values) == 6:
        return values
    if np.max(np.abs(values[:3])) > extent_m:
        raise GoalError(
            f"--goal {text!r}: the TCP position must lie within +-{extent_m:g} m (the planner's "
            "geometry bound)"
        )
    if len(values) == 7:
        with np.errstate(over="ignore"):
            norm = float(np.linalg.norm(values[3:]))
        if not abs(norm - 1.0) <= QUAT_NORM_TOLERANCE:
            raise GoalError(
                f"--goal {text!r}: the quaternion qw,qx,qy,qz has norm {norm:.6g}; expected a "
                "unit quaternion"
            )
        values = np.concatenate([values[:3], values[3:] / norm])
    return values


def parse_numbers(text: str, counts: tuple[int, ...], what: str) -> np.ndarray:
    """``"a,b,c"`` -> (n,) floats with n in ``counts``; ``GoalError`` naming ``what``."""
    try:
        values = np.array([float(x) for x in text.replace(" ", "").split(",") if x], float)
    except (ValueError, OverflowError):
        raise GoalError(f"{what} {text!r}: expected comma-separated numbers") from None
    if len(values) not in counts or not np.all(np.isfinite(values)):
        raise GoalError(
            f"{what} {text!r}: expected {' or '.join(map(str, counts))} finite numbers, got "
            f"{len(values)}"
        )
    return values


def resolve_scene(name: str) -> Path:
    """A shipped scene by name (``table``, ``pick_place``, ...) or a scene file's path."""
    from twin.scenes import scene_file, scenes_dir

    path = scene_file(name)
    if path is not None:
        return path
    shipped = [p.stem for p in scenes_dir().glob("*.json")]
    raise GoalError(
        f"unknown scene {name!r}{closest(name, shipped)}; expected one of {sorted(shipped)} or a "
        ".json path"
    )


def goal_configurations(model, values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The configurations (M, 6) rad a goal stands for (module doc); M = 0 if out of reach."""
    if len(values) == 6:
        return values[None]
    pose = model.fk(np.asarray(model.home_q, dtype=float)).copy()  # tool down, as at home
    pose[:3, 3] = values[:3]
    if len(values) == 7:
        pose = batch.matrices_from_pose7(values)
    return np.array(model.ik_all(pose, reference).configurations).reshape(-1, 6)


def _start(args: argparse.Namespace, home: np.ndarray) -> np.ndarray:
    if args.start is not None:
        return parse_numbers(args.start, (6,), "--start")
    if args.backend is None and not args.emulate:
        return home
    from twin.backends import open_robot

    with backend_session(args) as options, open_robot(**options) as robot:
        return np.array(robot.read().q, dtype=float)


def _recording(args: argparse.Namespace, scene: Path):
    """The planner's requests and results recorded to ``--record`` (``twin.record``), or
    nothing without the option."""
    if getattr(args, "record", None) is None:
        return contextlib.nullcontext()
    from twin.record import LayerRecording, versions

    metadata = {"command": "plan", "scene": str(scene), "seed": args.seed, "versions": versions()}
    return LayerRecording(args.record, metadata)


def run_plan(args: argparse.Namespace) -> int:
    """``twin plan``: exit 0 with a path, 1 when planning failed (reason printed), 2 bad input."""
    from twin.planning import (
        InitialState,
        PathRequest,
        Planner,
        PlannerSettings,
        PlanningInputError,
        obstacles_from_scene,
    )
    from twin.planning._validate import WORLD_EXTENT_M
    from twin.report.path_doc import path_document, write_path
    from twin.report.snapshot import render_snapshot
    from twin.scenes import SceneError

    try:
        scene = resolve_scene(args.scene)
        goal_values = [
            check_goal(parse_numbers(g, (3, 6, 7), "--goal"), g, WORLD_EXTENT_M) for g in args.goal
        ]
        planner = Planner(PlannerSettings(seed=args.seed))
        planner.set_obstacles(obstacles_from_scene(scene))
        start = _start(args, np.asarray(planner.model.home_q, dtype=float))
    except (GoalError, SceneError, PlanningInputError) as e:
        print(f"twin plan: error: {e}", file=sys.stderr)
        return 2
    goals = []
    for text, values in zip(args.goal, goal_values):
        configurations = goal_configurations(planner.model, values, start)
        kind = "joints" if len(values) == 6 else "pose"
        goals.append(
            {"text": text, "kind": kind, "value": values, "configurations": configurations}
        )
    if not all(len(g["configurations"]) for g in goals):
        bad = [g["text"] for g in goals if not len(g["configurations"])]
        print(f"twin plan: no IK solution for goal(s) {bad}", file=sys.stderr)
        return 1
    requests = [np.concatenate([g["configurations"] for g in goals])]
    if args.sequence:
        requests = [g["configurations"] for g in goals]
    q, waypoints, stats, result = start, [], {}, None
    with _recording(args, scene):  # --record: every request and its result, as /events
        for configurations in requests:
            result = planner.path(InitialState(q), PathRequest(list(configurations)))
            if not result:
                break
            waypoints += result.path()
            stats = {k: stats.get(k, 0.0) + v for k, v in result.stats.items()}
            q = result.final_configuration()
    if result and args.sequence:  # one result through every goal, in order
        result = type(result)(None, len(goals) - 1, result.tcp, tuple(waypoints), stats)
    doc = path_document(planner, start, goals, result, scene.stem)
    snapshot = render_snapshot(scene, q) if result and args.render else None
    files = write_path(args.out, doc, snapshot)
    if not result:
        print(f"twin plan: planning failed: {doc['error']}; wrote {files[0]}")
        return 1
    traj = doc["trajectory"]
    print(
        f"planned {len(doc['waypoints'])} way-points to goal {doc['selected_goal_index']} in "
        f"{doc['stats'].get('time_s', 0.0) * 1e3:.0f} ms; {traj['duration_s']:.2f} s at the "
        f"joint limits; {'collision-free' if traj['collision_free'] else 'BLOCKED'}"
    )
    print("wrote " + ", ".join(str(f) for f in files))
    return 0 if traj["collision_free"] else 1


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan a collision-free path to pose or joint goals in a scene; JSON and pictures",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scene", required=True, help="shipped scene name or scene .json path")
    parser.add_argument(
        "--goal",
        action="append",
        required=True,
        help="6 joint values (rad), 3 TCP position values (m) or 7 pose values; repeatable "
        "(a first value below zero: --goal=-0.1,...)",
    )
    parser.add_argument("--start", default=None, help="6 joint values (rad); default home")
    parser.add_argument(
        "--sequence", action="store_true", help="plan through the goals in order (not: pick one)"
    )
    add_backend_options(parser)  # with --backend (or --emulate): start from its measured joints
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder for path.json and the pictures (default ./{DEFAULT_OUT}/)",
    )
    parser.add_argument(
        "--no-render",
        dest="render",
        action="store_false",
        help="no scene.png (the scene rendered by the sim)",
    )
    parser.set_defaults(func=run_plan)
