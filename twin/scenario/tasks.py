"""The scenario tasks: each runs on any ``Robot`` and returns its metrics (``METRICS``).

A task gets the robot (sim or hardware, through the robot interface only), the scenario, and a
``Plant``: what stands for the physical world around the arm (the sim itself, or the physics
source behind the emulated hardware), through which a scenario attaches its payload or pushes on
the arm. On a real arm there is no plant, and a task that needs one says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from twin.kinematics.gravity import gravity_torques
from twin.planning import InitialState, PathRequest, Planner, PlannerSettings, obstacles_from_scene
from twin.planning.motion.execute import TRACKING_KD, TRACKING_KP, follow, prepare
from twin.robot import JointCommand, Robot
from twin.scenario.format import Scenario
from twin.spatial import SE3, SO3
from twin.spatial import quaternion as quat

#: Metrics measured on the wall clock: they vary with the machine and its load (every other
#: metric of a run on the sim is the same on any machine, bit for bit); bound them loosely, or
#: bound their counted twin (``plan_checks``: the planner's collision checks) instead.
WALL_CLOCK_METRICS = ("plan_time_s",)
#: Task kind -> the metrics it measures (what ``[expect]`` may name).
METRICS: dict[str, tuple[str, ...]] = {
    "plan_execute": (
        "plan_success",
        "plan_time_s",
        "plan_checks",
        "final_tcp_error_m",
        "max_tracking_error_rad",
        "limit_violations",
        "collision_violations",
    ),
    "policy": (
        "success_rate",
        "final_tcp_error_m",
        "final_rotation_error_rad",
        "limit_violations",
    ),
    "ft_weigh": ("tare_ok", "weight_n", "residual_force_n"),
    "shadow_contact": ("contact_detected", "contact_detected_within_s", "false_events"),
    "pick_place": (
        "steps_ok",
        "max_goal_error_m",
        "all_paths_collision_free",
        "policy_max_position_error_m",
        "policy_max_rotation_error_rad",
        "payload_rel_error",
        "imu_gravity_angle_rad",
    ),
}
#: The key under which a task may return, with its metrics, why it failed in one line (the step
#: that failed and its reason); the runner moves it to ``ScenarioResult.cause``.
CAUSE = "cause"
GRAVITY_M_S2 = 9.81
#: After a push ends, the time the live twin may take to release its contact flag (s).
RELEASE_S = 0.2


class StepError(RuntimeError):
    """A task's step raised: the message names the step, then the error (chained)."""


class Plant(Protocol):
    """The world around the arm: a payload at the TCP, an external force on the arm."""

    def attach_payload(self, mass: float, com=(0.0, 0.0, 0.0), radius: float = 0.02) -> None: ...

    def detach_payload(self) -> None: ...

    def set_external_force(self, force: np.ndarray | None, link: str = "tcp") -> None: ...


def hold_command(robot: Robot, q: np.ndarray) -> JointCommand:
    """Hold ``q`` (6,) rad with the tracking gains and gravity feed-forward."""
    return JointCommand(
        q_des=q,
        tau_ff=gravity_torques(robot.model, q),
        kp=np.asarray(TRACKING_KP, dtype=float),
        kd=np.asarray(TRACKING_KD, dtype=float),
    )


def hold(
    robot: Robot, q: np.ndarray, seconds: float, each: Callable[[], None] | None = None
) -> None:
    """Hold ``q`` for ``seconds`` of robot time; ``each()`` after every step."""
    command = hold_command(robot, q)
    for _ in range(max(1, round(seconds / robot.control_period_s))):
        robot.write(command)
        robot.step()
        if each is not None:
            each()


def _limit_violations(robot: Robot, q: np.ndarray) -> int:
    """Samples (rows of ``q`` (K, 6) rad) outside the URDF position limits."""
    m = robot.model
    return int(np.sum(np.any((q < np.asarray(m.lower)) | (q > np.asarray(m.upper)), axis=1)))


def _pose_matrix(pose7) -> np.ndarray:
    return SE3(SO3(np.asarray(pose7[3:], dtype=float)), np.asarray(pose7[:3], dtype=float)).matrix()


def plan_execute(robot: Robot, scenario: Scenario, plant: Plant | None) -> dict[str, Any]:
    """Plan from the current state to the goals (list order) around the scene and execute."""
    p = scenario.params
    planner = Planner(PlannerSettings(seed=scenario.seed))
    if scenario.scene is not None:
        planner.set_obstacles(obstacles_from_scene(scenario.scene))
    model = robot.model
    q_start = np.asarray(robot.read().q, dtype=float)
    goals = [np.asarray(g, dtype=float) for g in p["goals"]]
    for pose in p["poses"]:
        q = planner.compute_inverse_kinematics(_pose_matrix(pose), q_start)
        if q is not None:
            goals.append(q)
    failed = {name: None for name in METRICS["plan_execute"]}
    if not goals:
        cause = f"plan: none of the {len(p['poses'])} [task] poses has an IK solution"
        return {**failed, "plan_success": False, CAUSE: cause}
    t0 = time.perf_counter()
    result = planner.path(InitialState(q_start), PathRequest(goals))
    plan_time = time.perf_counter() - t0
    if not result:
        cause = f"plan: {result.error.value}" + (f" ({result.reason})" if result.reason else "")
        if result.stats.get("deadline_hit"):
            cause += f" after {result.stats['checks']:.0f} collision checks (the budget)"
        return {
            **failed,
            "plan_success": False,
            "plan_time_s": plan_time,
            "plan_checks": int(result.stats["checks"]),
            CAUSE: cause,
        }
    f_T_t = planner.get_tcp().transform
    prepared = prepare(
        model,
        q_start,
        result.path(),
        f_T_t,
        velocity_scale=p["velocity_scale"],
        acceleration_scale=p["velocity_scale"],
    )
    report = follow(
        robot,
        prepared.trajectory,
        model,
        feedforward=lambda q, qd, qdd: gravity_torques(model, q),
        settle_s=p["settle_s"],
        flange_T_tcp=f_T_t,
    )
    goal = goals[result.selected_goal_idx]
    final = np.asarray(robot.read().q, dtype=float)
    tcp_err = float(np.linalg.norm(planner.tcp_pose(final)[:3, 3] - planner.tcp_pose(goal)[:3, 3]))
    blocked = ~np.asarray(planner.configurations_free(report.measured), dtype=bool)
    return {
        "plan_success": True,
        "plan_time_s": plan_time,
        "plan_checks": int(result.stats["checks"]),
        "final_tcp_error_m": tcp_err,
        "max_tracking_error_rad": float(report.max_joint_error_rad),
        "limit_violations": _limit_violations(robot, report.measured),
        "collision_violations": int(blocked.sum()),
    }


def policy(robot: Robot, scenario: Scenario, plant: Plant | None) -> dict[str, Any]:
    """Run an ONNX policy (a shipped name or a path) through the controller to each target."""
    from twin.control import CommandSource, OnnxRLController, RobotStateAdapter, WorkerMode
    from twin.policies.evaluate import policy_path

    p = scenario.params
    commands = CommandSource()
    controller = OnnxRLController(RobotStateAdapter(robot, articulation="arm"), commands)
    if not controller.create(policy_path(p["policy"])):
        raise ValueError(f"{scenario.path}: [task] policy {p['policy']!r}: {controller.error}")
    errors, angles, measured = [], [], []
    for target in p["targets"]:
        pose = np.asarray(target, dtype=float)
        commands.set_se3_pose("target", pose)
        if not controller.init(enable_data_collection=False, mode=WorkerMode.SYNC):
            raise RuntimeError(f"controller init failed: {controller.error}")
        for _ in range(round(p["duration_s"] / robot.control_period_s)):
            state = robot.read()
            measured.append(state.q)
            if not controller.update(state.t_us):
                raise RuntimeError(f"controller cycle failed: {controller.fault}")
            robot.step()
        tcp = robot.model.fk(robot.read().q, "tcp")
        errors.append(float(np.linalg.norm(tcp[:3, 3] - pose[:3])))
        relative = quat.multiply(quat.conjugate(pose[3:]), quat.from_matrix(tcp[:3, :3]))
        angles.append(
            2.0 * math.atan2(float(np.linalg.norm(relative[1:])), abs(float(relative[0])))
        )
    success = [e < 0.02 and a < 0.1 for e, a in zip(errors, angles)]
    missed = [
        f"target {i}: {e * 1e3:.1f} mm, {a:.3f} rad"
        for i, (e, a, ok) in enumerate(zip(errors, angles, success))
        if not ok
    ]
    return {
        "success_rate": float(np.mean(success)),
        "final_tcp_error_m": max(errors),
        "final_rotation_error_rad": max(angles),
        "limit_violations": _limit_violations(robot, np.array(measured)),
        CAUSE: "missed (within 0.02 m and 0.1 rad): " + "; ".join(missed) if missed else None,
    }


def _need_plant(plant: Plant | None, scenario: Scenario, what: str) -> Plant:
    if plant is None:
        raise ValueError(
            f"{scenario.path}: {what} needs a simulated or emulated plant (the sim backend, or the "
            "hardware backend against the emulators); a real arm's payload is attached by hand"
        )
    return plant


def ft_weigh(robot: Robot, scenario: Scenario, plant: Plant | None) -> dict[str, Any]:
    """Tare the F/T service in a world-aligned frame, attach the payload, read its weight."""
    from twin.sensors import FtSensorService

    p = scenario.params
    q = np.asarray(robot.read().q, dtype=float)
    with FtSensorService(robot) as ft:
        ft.connect()
        ft.export_frame("world_aligned", 0, 0, 0, 0, 0, 0, world=True)
        hold(robot, q, p["settle_s"], ft.update)
        tare = ft.tare(duration=p["tare_s"], step=lambda: hold(robot, q, robot.control_period_s))
        residual = float(np.linalg.norm(ft.frame("world_aligned").force))
        if scenario.payload is not None:
            mass, com = scenario.payload
            _need_plant(plant, scenario, "[payload]").attach_payload(mass, np.asarray(com))
        hold(robot, q, p["settle_s"], ft.update)
        forces = []
        hold(
            robot,
            q,
            p["weigh_s"],
            lambda: (ft.update(), forces.append(ft.frame("world_aligned").force)),
        )
    return {
        CAUSE: None if tare.ok else f"tare: {tare.reason}",
        "tare_ok": bool(tare.ok),
        "weight_n": float(-np.mean(np.array(forces)[:, 2])),
        "residual_force_n": residual,
    }


def shadow_contact(robot: Robot, scenario: Scenario, plant: Plant | None) -> dict[str, Any]:
    """Hold still while the live twin follows; push on the arm for a while (a zero force for a
    clean run); report when the twin flagged the contact and any other event."""
    from twin.shadow import Shadow, ShadowFlag

    p = scenario.params
    force = np.asarray(p["contact_force_n"], dtype=float)
    pushing = bool(np.any(force))
    world = _need_plant(plant, scenario, "a contact") if pushing else plant
    q = np.asarray(robot.read().q, dtype=float)
    command = hold_command(robot, q)
    start, end = p["contact_at_s"], p["contact_at_s"] + p["contact_for_s"]
    detected_at, false_events = None, 0
    contact_flags = ShadowFlag.CONTACT | ShadowFlag.TORQUE_CONTACT
    with Shadow(robot) as shadow:
        for k in range(round(p["duration_s"] / robot.control_period_s)):
            t = k * robot.control_period_s
            if pushing and abs(t - start) < 1e-9:
                world.set_external_force(force)
            if pushing and abs(t - end) < 1e-9:
                world.set_external_force(None)
            robot.write(command)
            robot.step()
            flags = shadow.update(robot.read()).flags
            contact = bool(flags & contact_flags)
            # Events only: a missing or stale sample (NO_FT, NO_IMU, NOT_TRACKING) is not one.
            others = flags & (ShadowFlag.PAYLOAD | ShadowFlag.FT_DRIFT | ShadowFlag.IMU_DRIFT)
            in_window = pushing and start <= t < end + RELEASE_S
            if contact and in_window and detected_at is None:
                detected_at = t - start
            if (contact and not in_window) or others:
                false_events += 1
        if pushing:
            world.set_external_force(None)
    return {
        "contact_detected": detected_at is not None,
        "contact_detected_within_s": detected_at,
        "false_events": false_events,
    }


def pick_place(robot: Robot, scenario: Scenario, plant: Plant | None) -> dict[str, Any]:
    """The demo's sequence (``twin.demo``) as a scenario: a touch pick from the bin and a touch
    place on the shelf with a carried box around the scene's obstacles, the reach policy to
    targets, weighing the object, the IMU at rest; its figures are the metrics."""
    import json
    import pathlib
    import tempfile

    from twin.demo import STEP_NAMES, PayloadGripper, run_demo

    gripper = None if plant is None else PayloadGripper(plant)
    ended: list[str] = []  # the steps that ended, in order (the demo's closing line of each)

    def note(line: str) -> None:
        if not line.startswith("[..]"):
            ended.append(line)

    with tempfile.TemporaryDirectory() as out:
        try:
            # the report's figures only: no PNG is drawn into a folder that is deleted unread
            steps = run_demo(
                None,
                seed=scenario.seed,
                out=out,
                robot=robot,
                gripper=gripper,
                plots=False,
                print_fn=note,
            )
        except Exception as e:
            step = STEP_NAMES[min(len(ended), len(STEP_NAMES) - 1)]
            raise StepError(f"step {step!r} raised {type(e).__name__}: {e}") from e
        summary = json.loads((pathlib.Path(out) / "figures.json").read_text())["summary"]
    failed = next((s for s in steps if not s.ok), None)
    cause = None if failed is None else f"step {failed.name!r} failed: {failed.figure}"
    if failed is None and len(steps) < len(STEP_NAMES):
        cause = f"the demo stopped after step {steps[-1].name!r}" if steps else "no step ran"
    return {
        "steps_ok": int(sum(bool(s.ok) for s in steps)),
        **{k: summary.get(k) for k in METRICS["pick_place"][1:]},
        CAUSE: cause,
    }


#: Task kind -> its runner.
TASKS: dict[str, Callable[[Robot, Scenario, Plant | None], dict[str, Any]]] = {
    "plan_execute": plan_execute,
    "policy": policy,
    "ft_weigh": ft_weigh,
    "shadow_contact": shadow_contact,
    "pick_place": pick_place,
}
