"""``twin demo``: one pass through the product on any backend (the sim by default).

1. open the arm through the sim-to-real switch (``open_robot``) with the table scene;
2. tare the F/T sensor service and read it in a world-aligned exported frame;
3. plan a collision-free path to a pose over the table (closed-form IK, several goals) and
   execute it with time parameterisation and gravity feed-forward;
4. attach a 0.5 kg payload (sim only) and read its weight through the F/T service;
5. plan back home.

Everything here goes through the robot interface; only ``open_robot`` names the backend.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from twin.backends import open_robot
from twin.kinematics.gravity import GRAVITY, gravity_torques
from twin.planning import InitialState, PathRequest, Planner, PlannerSettings, obstacles_from_scene
from twin.planning.motion.execute import TRACKING_KD, TRACKING_KP, execute
from twin.robot import JointCommand, Robot
from twin.sensors import FtSensorService
from twin.spatial import SE3, SO3

SCENE = "table"
#: The demo's target: tool pointing down, this far (m) in front of and above the base.
TARGET_POSITION_M = np.array([0.42, -0.18, 0.25])
PAYLOAD_KG = 0.5


@dataclass
class DemoStep:
    name: str
    figure: str
    ok: bool


def _move(robot: Robot, planner: Planner, q_goals: list[np.ndarray], model) -> tuple[str, bool]:
    """Plan from the measured configuration to the nearest of ``q_goals`` and execute it."""
    q0 = robot.read().q
    t0 = time.perf_counter()
    result = planner.path(InitialState(q0), PathRequest(q_goals))
    plan_ms = (time.perf_counter() - t0) * 1e3
    if not result:
        return f"planning failed: {result.error.value}", False
    _, report = execute(
        robot, result.path(), model, feedforward=lambda q, qd, qdd: gravity_torques(model, q)
    )
    figure = (
        f"{len(result.path())} way-points planned in {plan_ms:.0f} ms; executed in "
        f"{report.duration_s:.2f} s, max TCP error {report.max_tcp_error_m * 1e3:.1f} mm, "
        f"final {report.final_tcp_error_m * 1e3:.2f} mm"
    )
    return figure, report.final_tcp_error_m < 2e-3


def run_demo(
    backend: str = "sim", seed: int = 0, print_fn: Callable[[str], None] = print, **options
) -> list[DemoStep]:
    """Run the demo; returns its steps (name, figure, ok). ``options`` go to ``open_robot``."""
    steps: list[DemoStep] = []

    def record(name: str, figure: str, ok: bool) -> None:
        steps.append(DemoStep(name, figure, ok))
        print_fn(f"[{'ok' if ok else 'FAIL'}] {name}: {figure}")

    if backend == "sim":
        options.setdefault("scene", SCENE)
        options.setdefault("seed", seed)
    with open_robot(backend, **options) as robot:
        model = robot.model
        state = robot.read()
        record(
            "open", f"{backend} backend, {len(model.joint_names)} joints, t = {state.t_us} us", True
        )

        planner = Planner(PlannerSettings(seed=seed))
        planner.set_obstacles(obstacles_from_scene(SCENE))
        home = np.asarray(model.home_q, dtype=float)

        ft = FtSensorService(robot)
        ft.connect()
        ft.export_frame("world_aligned", 0, 0, 0, 0, 0, 0, world=True)
        ft.tare(duration=0.5)
        ft.update()
        rest = ft.frame("world_aligned").force
        record("tare", f"F/T after tare |f| = {np.linalg.norm(rest):.3f} N", True)

        tool_down = SO3.from_rpy(np.pi, 0.0, 0.0)
        target = SE3(tool_down, TARGET_POSITION_M).matrix()
        goals = list(model.ik_all(target).configurations)
        if not goals:
            record("ik", "the target pose has no IK solution", False)
            return steps
        record("ik", f"{len(goals)} postures reach the target pose", True)
        figure, ok = _move(robot, planner, goals, model)
        record("plan and execute to target", figure, ok)

        if backend == "sim":
            robot.attach_payload(PAYLOAD_KG, np.zeros(3))
            q = robot.read().q
            for _ in range(100):  # 0.5 s holding the pose with the payload's weight
                robot.write(_hold(q, model))
                robot.step()
                ft.update()
            fz = ft.frame("world_aligned").force[2]
            expected = PAYLOAD_KG * GRAVITY[2]
            record(
                "payload",
                f"{PAYLOAD_KG} kg attached: world Fz {fz:+.2f} N (weight {expected:+.2f} N)",
                abs(fz - expected) < 0.05 * abs(expected),
            )
            robot.detach_payload()

        figure, ok = _move(robot, planner, [home], model)
        record("plan and execute home", figure, ok)
        ft.disconnect()
    return steps


def _hold(q: np.ndarray, model) -> JointCommand:
    """Hold ``q`` (6,) rad with the tracking gains and gravity feed-forward."""
    return JointCommand(
        q_des=q,
        tau_ff=gravity_torques(model, q),
        kp=np.asarray(TRACKING_KP),
        kd=np.asarray(TRACKING_KD),
    )
