"""``twin run``: an ONNX policy through the controller (``twin.control``), on either backend.

    twin run --policy reach --target 0.40 0.10 0.30 --target 0.35 -0.15 0.25
    twin run --policy my_policy.onnx --targets steps.json --backend hardware --config arm.toml

The controller runs the policy at its own rate (the ``update_rate`` of its metadata) while the
robot steps at its control period, as ``policies/evaluate.py`` does: every period
``controller.update(t_us)`` then ``robot.step()``. The run is a sequence of steps, each holding
its commands for ``duration_s``:

- ``--target X Y Z [QW QX QY QZ]`` (repeatable): one step setting the policy's SE(3) pose command
  to that TCP pose (m, base = world frame; without a quaternion, the TCP orientation at the start);
- ``--targets FILE``: a JSON list of steps (or ``{"steps": [...]}``), each an object with an
  optional ``"duration_s"`` and commands keyed ``"<kind>.<name>"`` (kinds: ``policy_commands.COMMAND_KINDS``;
  e.g. ``"se3_pose.target": [x, y, z, qw, qx, qy, qz]``, ``"float.speed": 0.3``,
  ``"joint_pos.goal": [6 rad]``) or ``"target"`` as for ``--target``;
- ``--command KIND.NAME=V[,V...]`` (repeatable): a command held for the whole run.

After each step it prints tracking figures: for a pose command the TCP's final position and
rotation errors, the largest over the last ``SETTLE_WINDOW_S`` and the first time within
``--tolerance-mm`` / ``--tolerance-rad`` (the reach policy card's 20 mm and 0.1 rad); for a joint
command the largest final joint error. ``--collect FILE.csv`` writes every model input and output;
``--record FILE.mcap`` records the run (``twin.record``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import pathlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from twin.cli.common import UsageError, add_backend_options, open_robot_from_args

#: Tracking figures: the largest error over the last part of a step (s).
SETTLE_WINDOW_S = 0.5
DEFAULT_STEP_S = 4.0


@dataclass
class Step:
    """Commands (``"<kind>.<name>"`` or ``"target"`` -> value) held for ``duration_s``."""

    commands: dict[str, object]
    duration_s: float
    label: str = ""


@dataclass
class StepReport:
    """Tracking figures of one step: pose errors (m, rad) and times (s), joint errors (rad)."""

    label: str
    final_position_m: float = float("nan")
    final_rotation_rad: float = float("nan")
    settle_position_m: float = float("nan")
    settle_rotation_rad: float = float("nan")
    time_to_tolerance_s: float | None = None
    final_joint_rad: float = float("nan")
    failed_cycles: int = 0
    notes: list[str] = field(default_factory=list)


def load_steps(path: pathlib.Path, default_s: float) -> list[Step]:
    """The steps of a ``--targets`` JSON file (module doc)."""
    from twin.cli.policy_commands import step_duration

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, nested too deeply
        raise UsageError(f"--targets {path}: not valid JSON ({str(e)[:120] or 'too deep'})") from e
    raw = data.get("steps") if isinstance(data, dict) else data
    if not isinstance(raw, list) or not raw:
        raise UsageError(
            f'--targets {path}: expected a non-empty JSON list of steps (or {{"steps": [...]}})'
        )
    steps = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise UsageError(f"--targets {path}: step {i} must be an object, got {item!r}")
        item = dict(item)
        duration = item.pop("duration_s", default_s)
        duration = step_duration(duration, f"--targets {path}: step {i} duration_s")
        if not item:
            raise UsageError(f"--targets {path}: step {i} has no commands")
        steps.append(Step(item, float(duration), f"{i}"))
    return steps


def _target_pose(value: object, start_quat: np.ndarray, where: str) -> np.ndarray:
    """(7,) pose from 3 numbers (orientation ``start_quat``) or 7 (``[px..qz]``)."""
    arr = np.asarray(value, dtype=float).reshape(-1) if isinstance(value, list | tuple) else None
    if arr is None or arr.shape not in ((3,), (7,)) or not np.all(np.isfinite(arr)):
        raise UsageError(
            f"{where}: expected a TCP position [x, y, z] m or a pose [x, y, z, qw, qx, qy, qz], "
            f"got {value!r}"
        )
    return arr if arr.shape == (7,) else np.concatenate([arr, start_quat])


def _steps(args: argparse.Namespace) -> list[Step]:
    from twin.cli.policy_commands import step_duration

    steps = []
    step_duration(args.duration, "--duration")
    for i, t in enumerate(args.target or []):
        _target_pose(t, np.array([1.0, 0.0, 0.0, 0.0]), f"--target {' '.join(map(str, t))}")
        steps.append(Step({"target": list(t)}, args.duration, f"{i}"))
    if args.targets is not None:
        steps += load_steps(args.targets, args.duration)
    if not steps:
        raise UsageError(
            "no targets: give --target X Y Z [QW QX QY QZ] (repeatable) or --targets FILE"
        )
    return steps


def run_steps(robot, controller, commands, steps, args) -> list[StepReport]:
    """Drive ``robot`` with ``controller`` through ``steps``; returns their tracking figures."""
    from twin.env.core import tcp_pose7
    from twin.env.tasks import pose_error

    model = robot.model
    period_s = robot.control_period_s
    per_policy = max(1, round(1.0 / (controller.context().update_rate * period_s)))
    start_quat = tcp_pose7(model, robot.read().q)[3:]
    pose_names = commands.required["se3_pose"]
    reports = []
    for step in steps:
        values = dict(step.commands)
        if "target" in values:
            if len(pose_names) != 1:
                raise UsageError(
                    f"a target is the policy's SE(3) pose command, but it reads "
                    f"{len(pose_names)} ({pose_names}); use --command se3_pose.NAME=... or "
                    "se3_pose.NAME keys"
                )
            values[f"se3_pose.{pose_names[0]}"] = values.pop("target")
        for key, value in values.items():
            if key.startswith("se3_pose."):
                value = _target_pose(value, start_quat, f"step {step.label} {key}")
            commands.set(key, value)
        target = next((np.asarray(v) for k, v in values.items() if k.startswith("se3_pose.")), None)
        if target is not None and target.shape == (3,):
            target = np.concatenate([target, start_quat])
        joint_goal = next((v for k, v in values.items() if k.startswith("joint_pos.")), None)
        report = StepReport(step.label)
        n = max(1, round(step.duration_s / period_s))
        settle_from = n - round(SETTLE_WINDOW_S / period_s)
        worst = [0.0, 0.0]
        for k in range(n):
            if not controller.update(robot.read().t_us):
                report.failed_cycles += 1
                if controller.fault and controller.fault not in report.notes:
                    report.notes.append(controller.fault)
            robot.step()
            if target is None or ((k + 1) % per_policy and k + 1 != n):
                continue
            d, ang = pose_error(tcp_pose7(model, robot.read().q), target)
            if report.time_to_tolerance_s is None and (
                d <= args.tolerance_mm * 1e-3 and ang <= args.tolerance_rad
            ):
                report.time_to_tolerance_s = (k + 1) * period_s
            if k >= settle_from:
                worst = [max(worst[0], d), max(worst[1], ang)]
            report.final_position_m, report.final_rotation_rad = d, ang
        report.settle_position_m, report.settle_rotation_rad = worst
        if joint_goal is not None:
            q = robot.read().q
            goal = np.asarray(joint_goal, float).reshape(-1)
            if goal.shape == q.shape:
                report.final_joint_rad = float(np.max(np.abs(q - goal)))
        reports.append(report)
        print_report(report, target, args)
    return reports


def _fmt(x: float, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if x != x else f"{x * scale:.{digits}f}"


def print_report(report: StepReport, target: np.ndarray | None, args) -> None:
    where = "" if target is None else " target [" + ", ".join(f"{v:+.3f}" for v in target[:3]) + "]"
    reached = (
        "never" if report.time_to_tolerance_s is None else f"{report.time_to_tolerance_s:.2f} s"
    )
    line = f"step {report.label}:{where}"
    if target is not None:
        line += (
            f" final {_fmt(report.final_position_m, 1e3)} mm {_fmt(report.final_rotation_rad, 1, 3)} rad;"
            f" last {SETTLE_WINDOW_S} s max {_fmt(report.settle_position_m, 1e3)} mm"
            f" {_fmt(report.settle_rotation_rad, 1, 3)} rad; within {args.tolerance_mm:g} mm and"
            f" {args.tolerance_rad:g} rad: {reached}"
        )
    if report.final_joint_rad == report.final_joint_rad:
        line += f" final joint error {report.final_joint_rad:.4f} rad"
    if report.failed_cycles:
        line += f"; {report.failed_cycles} failed cycles ({'; '.join(report.notes)})"
    print(line, flush=True)


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """Silence ``logger`` and its children during the block."""
    log = logging.getLogger(logger)
    before = log.level
    log.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        log.setLevel(before)


def run_policy(args: argparse.Namespace) -> int:
    """``twin run``; exit 1 if a pose target was not within tolerance at the end of its step."""
    from twin.cli.policy_commands import PolicyCommands, parse_command
    from twin.control import (
        CsvDataCollection,
        OnnxRLController,
        OnnxRuntime,
        RobotStateAdapter,
        WorkerMode,
    )
    from twin.policies.evaluate import policy_path
    from twin.safety import velocity_events_seen, velocity_summary

    path = policy_path(args.policy)
    OnnxRuntime().initialize(path)  # a file that is no ONNX model is refused before the robot opens
    steps = _steps(args)
    commands = PolicyCommands()
    for text in args.held_commands or []:
        parse_command(text)  # checked before the robot is opened
    collection = CsvDataCollection(args.collect) if args.collect is not None else None
    with open_robot_from_args(args, seed=args.seed, scene=args.scene) as robot:
        controller = OnnxRLController(
            RobotStateAdapter(robot, articulation=args.articulation), commands, collection
        )
        with _quiet("twin.control"):  # its failure is raised here, not logged as well
            if not controller.create(path):
                raise controller.error
            if not controller.init(
                enable_data_collection=collection is not None, mode=WorkerMode.SYNC
            ):
                raise controller.error
        for text in args.held_commands or []:
            commands.set(*parse_command(text))
        rate = controller.context().update_rate
        print(
            f"policy {path.name} at {rate:g} Hz on a robot stepping at "
            f"{1.0 / robot.control_period_s:g} Hz; reads commands "
            + ", ".join(f"{k}.{n}" for k, names in commands.required.items() for n in names),
            flush=True,
        )
        try:
            with velocity_events_seen() as too_fast:
                reports = run_steps(robot, controller, commands, steps, args)
        finally:
            controller.close()
            if collection is not None:
                collection.close()
        diag = robot.diagnostics()
    measured = (
        f"{diag.cycles} cycles at {diag.achieved_rate_hz:.1f} Hz achieved, {diag.overruns} overruns"
        if diag.cycles
        else "the backend reports no rate measurement"
    )
    print(
        f"control at {diag.rate_hz:g} Hz configured: {measured}"
        + (f"; collected {args.collect}" if collection is not None else "")
    )
    print(velocity_summary(too_fast))
    missed = [
        r.label
        for r in reports
        if r.final_position_m == r.final_position_m
        and not (
            r.final_position_m <= args.tolerance_mm * 1e-3
            and r.final_rotation_rad <= args.tolerance_rad
        )
    ]
    if missed:
        print(f"not within tolerance at the end: steps {missed}")
    return 1 if missed else 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run an ONNX policy through the controller to targets, print tracking figures",
        description=__doc__.split("\n\n")[0].rstrip(".") + ". The policy runs at its own rate; "
        "each step holds its commands for its duration and prints how well the TCP (or the "
        "joints) tracked them.",
    )
    parser.add_argument(
        "--policy", default="reach", help="an .onnx file or a shipped policy name (default: reach)"
    )
    parser.add_argument(
        "--target",
        nargs="+",
        type=float,
        action="append",
        metavar="V",
        help="a step to the TCP position X Y Z m (or pose X Y Z QW QX QY QZ); repeatable",
    )
    parser.add_argument(
        "--targets", type=pathlib.Path, default=None, metavar="FILE", help="JSON file of steps"
    )
    parser.add_argument(
        "--command",
        action="append",
        dest="held_commands",
        metavar="KIND.NAME=V[,V...]",
        help="a command held for the whole run, e.g. float.speed=0.3; repeatable",
    )
    parser.add_argument(
        "--duration", type=float, default=DEFAULT_STEP_S, help="seconds per step (default 4)"
    )
    parser.add_argument("--tolerance-mm", type=float, default=20.0)
    parser.add_argument("--tolerance-rad", type=float, default=0.1)
    parser.add_argument("--articulation", default="arm", help="the policy's articulation name")
    parser.add_argument(
        "--collect",
        type=pathlib.Path,
        default=None,
        metavar="FILE.csv",
        help="the controller's data collection (policy inputs and outputs) as CSV",
    )
    parser.add_argument("--seed", type=int, default=0, help="sim seed")
    parser.add_argument("--scene", default=None, help="sim scene (a shipped name or a file)")
    add_backend_options(parser)
    parser.set_defaults(func=run_policy)
