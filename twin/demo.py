"""``twin demo``: what the twin is for, in one run on any backend (the sim by default).

On the ``pick_place`` scene (a bin of objects to the arm's left, a shelf board to its right):

1. ``open``: the arm through the sim-to-real switch (``open_robot``);
2. ``tare``: zero the F/T sensor service at home (tool in free air, pointing down as at every
   pick and place pose, so the tool's own weight cancels there);
3. ``pick``: a touch motion from home onto the top of an object in the bin (suction-cup tool,
   free path planned around the bin, straight final approach along the tool), executed with
   time parameterisation and gravity feed-forward;
4. ``lift``: grasp (the gripper takes the object's weight), the object becomes the planner's
   carried box, and the planned retract lifts it straight out;
5. ``weigh``: the object's weight in a world-aligned frame of the F/T service;
6. ``place``: the rest of the planned path, around the bin and onto the shelf board (a touch
   with the carried box), and release;
7. ``policy``: plan to the policy's start, then the shipped ONNX reach policy
   (``policies/reach.onnx``) drives the arm through the controller to a few targets;
8. ``home``: plan back home;
9. ``imu``: the IMU at rest against the gravity direction the arm's kinematics predicts.

Every move reports its goal error (the planner's TCP, m) and whether the executed joint curve is
free in the planner's collision model (``twin.planning.motion.curve.curve_free``: strictly for free
segments, compliantly for touch approaches and retracts, ``twin.planning.motion.touch``). With ``out``
the run writes a report folder (``twin.report``). Everything here goes through the robot
interface; only ``open_robot`` names the backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from twin.backends import open_robot
from twin.control import CommandSource, OnnxRLController, RobotStateAdapter, WorkerMode
from twin.env.core import tcp_pose7
from twin.env.tasks import REACH_MIN_TCP_Z_M as MIN_TCP_Z_M
from twin.env.tasks import REACH_POS_TOL_M, REACH_ROT_TOL_RAD, START_Q, pose_error
from twin.kinematics.gravity import GRAVITY, gravity_torques
from twin.planning import (
    CarriedObject,
    InitialState,
    Movement,
    PathRequest,
    Planner,
    PlannerSettings,
    ReplaceableTool,
    Tcp,
    ToolBoxElement,
    TransformedBox,
    obstacles_from_scene,
)
from twin.planning.motion.curve import curve_free
from twin.planning.motion.execute import TRACKING_KD, TRACKING_KP, follow, prepare
from twin.planning.motion.touch import touch_checker
from twin.policies.evaluate import policy_path
from twin.report import MovePart, MoveRecord, PolicyRecord, TraceRecorder, write_report
from twin.report.snapshot import render_snapshot
from twin.robot import JointCommand, Robot
from twin.safety import velocity_events_seen, velocity_summary
from twin.scenes import scenes_dir
from twin.sensors import FtSensorService
from twin.spatial.quaternion import skew

#: The demo's scene (``assets/scenes/pick_place.json``): loaded by the sim and the planner alike.
SCENE = scenes_dir() / "pick_place.json"
#: Suction-cup tool: a 1 cm rigid block at the URDF TCP and a compliant cup of this length (m);
#: the planner's TCP is the cup's tip.
CUP_M = 0.06
#: The picked object below the cup (m): a carried box bottom-centred at the cup tip.
CARRIED_BOX_M = (0.04, 0.04, 0.06)
PAYLOAD_KG = 0.15
#: How far (m) the carried box may be compressed in touch motions (> the planner's margin).
COMPRESSION_M = 0.055
#: The pick: the top of the tallest object in the bin (x, y, z m; cup tip just into it) and the
#: region of the bin's point cloud that leaves the cloud with it (centre, full size m).
PICK_M = (0.385, 0.325, 0.086)
PICK_REGION_M = ((0.385, 0.325, 0.0), (0.12, 0.12, 0.11))
#: The place: the shelf board's top centre (x, y, z m); the box is pressed this far (m) onto it.
PLACE_M = (0.34, -0.28, 0.12)
PRESS_M = 0.002
#: Velocity and acceleration scale of the touch approaches and retracts.
TOUCH_SPEED = 0.15
#: Policy: how many targets, how long (s) the controller has for each, and the joint-space
#: half-widths (rad) around the policy's start from which target configurations are drawn.
POLICY_TARGETS = 3
POLICY_TIME_S = 4.0
POLICY_HALF_WIDTH_RAD = np.array([0.6, 0.25, 0.3, 0.6, 0.4, 0.6])
#: At most this share of the controller's cycles may fail (a stale reading on a busy machine).
MAX_FAILED_CYCLES = 0.02
#: The shipped policy the demo runs (``policies/reach.onnx``, card ``policies/reach.md``).
POLICY = "reach"
IMU_LINK = "imu"
#: The F/T service's exported frame the demo reads: world-aligned axes at the sensor.
WORLD_FRAME = "world_aligned"
#: The steps, in order (``run_demo`` returns one ``DemoStep`` each, fewer if one fails).
STEP_NAMES = ("open", "tare", "pick", "lift", "weigh", "place", "policy", "home", "imu")
#: After a part's trajectory (and ``follow``'s settling), hold its end until the TCP is this
#: close (m) to it, for at most ``SETTLE_MAX_S`` (a busy real-time loop may lag).
SETTLE_TOL_M = 0.5e-3
SETTLE_MAX_S = 1.0
#: The trace's world-aligned F/T wrench is taken every this many control cycles (the service's
#: update is the costliest part of a cycle; the tare itself updates the service every cycle).
FT_TRACE_EVERY = 4
TARE_S = 0.5
WEIGH_S = 0.5
#: The demo's own thresholds (the report's JSON carries them).
THRESHOLDS = {
    "goal_error_m": 1e-3,
    "payload_rel_error": 0.05,
    # policies/reach.md: success is the TCP within 2 cm and 0.1 rad (the Reach task's tolerances)
    "policy_position_error_m": REACH_POS_TOL_M,
    "policy_rotation_error_rad": REACH_ROT_TOL_RAD,
    "imu_gravity_angle_rad": 0.02,
}


@dataclass
class DemoStep:
    """One step: ``name``, a one-line ``figure``, ``ok`` and its numbers (``data``, SI units)."""

    name: str
    figure: str
    ok: bool
    data: dict = field(default_factory=dict)


class Gripper(Protocol):
    """What holds the picked object: ``grasp`` takes ``mass_kg`` with its centre of mass
    ``com_m`` (3,) m in the URDF TCP frame; ``release`` lets go."""

    def grasp(self, mass_kg: float, com_m: np.ndarray) -> None: ...

    def release(self) -> None: ...


class PayloadGripper:
    """A gripper realised by a body that can carry a payload (``attach_payload`` /
    ``detach_payload``: the simulated arm, or the sim behind the hardware emulators), holding
    ``lock`` (e.g. the emulators' physics lock) while it changes the payload."""

    def __init__(self, body, lock=None) -> None:
        self.body = body
        self.lock = lock if lock is not None else contextlib.nullcontext()

    def grasp(self, mass_kg: float, com_m: np.ndarray) -> None:
        with self.lock:
            self.body.attach_payload(mass_kg, com_m)

    def release(self) -> None:
        with self.lock:
            self.body.detach_payload()


def _translation(x: float, y: float, z: float) -> np.ndarray:
    m = np.eye(4)
    m[:3, 3] = [x, y, z]
    return m


def make_planner(seed: int) -> Planner:
    """The demo's planner: the scene's obstacles, the suction-cup tool and its TCP."""
    planner = Planner(PlannerSettings(seed=seed))
    model = planner.model
    planner.set_obstacles(obstacles_from_scene(SCENE))
    home = np.asarray(model.home_q, dtype=float)
    f_T_urdf_tcp = np.linalg.solve(model.fk(home, "flange"), model.fk(home))
    cup = TransformedBox(_translation(0, 0, 0.01), [0.03, 0.03, CUP_M])
    block = ToolBoxElement(f_T_urdf_tcp @ _translation(0, 0, -0.01), [0.03, 0.03, 0.01], cup)
    planner.set_replaceable_tool(ReplaceableTool.from_box_elements([block]))
    planner.set_tcp(Tcp(f_T_urdf_tcp @ _translation(0, 0, CUP_M)))
    return planner


def payload_feedforward(model, mass_kg: float = 0.0, com_m: np.ndarray | None = None):
    """``(q, qd, qdd) -> tau`` (K, 6) N m: the arm's gravity torques plus those of a point mass
    ``mass_kg`` at ``com_m`` (3,) m in the URDF TCP frame (``tau = J_com^T m g_up``)."""
    com = np.zeros(3) if com_m is None else np.asarray(com_m, dtype=float)

    def ff(q, qd, qdd):
        tau = gravity_torques(model, q)
        if mass_kg:
            t, jac = model.fk(q), model.jacobian(q)  # (K, 4, 4), (K, 6, 6) [v; w]
            r = np.atleast_3d(t[..., :3, :3] @ com)[..., 0]  # (K, 3) TCP -> com, world
            j_com = jac[..., :3, :] - skew(r) @ jac[..., 3:, :]
            tau = tau - mass_kg * np.einsum("...ij,i->...j", j_com, GRAVITY)
        return tau

    return ff


class _Run:
    """One demo run: the recording robot, the planner, the F/T service and what was measured."""

    def __init__(self, robot: TraceRecorder, planner: Planner, ft: FtSensorService, seed: int):
        self.robot, self.planner, self.ft = robot, planner, ft
        self.model = planner.model
        self.rng = np.random.default_rng(seed)
        self.moves: list[MoveRecord] = []
        self.policy: list[PolicyRecord] = []
        self.ff = payload_feedforward(self.model)
        self.carrying = False
        self.pick_result = self.place_result = None  # PathResults the next steps start from
        self.place_parts: list[tuple[str, list, float]] = []  # the place after the lift
        self.place_q: np.ndarray | None = None  # (6,) rad where the object was put down
        #: (6,) rad where the planned path of the next part starts (the plan's start, then the
        #: end of each part): the planned curve is checked from there, not from the measured
        #: configuration, so the verdict is the plan's (an encoder tick off a path that runs
        #: along the model's margin must not flip it).
        self.planned_from: np.ndarray | None = None
        #: Called with one line as each motion starts (``run_demo``'s ``print_fn``).
        self.say: Callable[[str], None] = lambda line: None

    def plan(self, name: str, start, goals, **request):
        """Plan from ``start`` (a configuration or a touch ``PathResult``); None + reason."""
        result = self.planner.path(InitialState(start), PathRequest(goals, **request))
        q = start.final_configuration() if hasattr(start, "final_configuration") else start
        self.planned_from = np.array(q, dtype=float)
        return result, (None if result else f"{name}: planning failed: {result.error.value}")

    def move(self, name: str, result, touch_start: bool, touch_end: bool) -> MoveRecord:
        """Execute ``result`` from the measured configuration: a leading linear retract and a
        final linear approach (touches) at ``TOUCH_SPEED``, the free part at full speed."""
        record = MoveRecord(name, self.planner.tcp_pose(result.final_configuration())[:3, 3])
        record.planned_ms = float(result.stats.get("time_s", 0.0)) * 1e3
        record.waypoints = len(result.path())
        for part, waypoints, scale in _parts(result.path(), touch_start, touch_end):
            self.execute(record, part, waypoints, scale)
        self.moves.append(record)
        return record

    def execute(self, record: MoveRecord, part: str, waypoints, scale: float) -> None:
        """Prepare and follow one part from the measured configuration; check its executed
        curve in the planner's model; append it to ``record`` and update the goal error."""
        planner, model, robot = self.planner, self.model, self.robot
        q0 = robot.read().q
        f_T_t = planner.get_tcp().transform
        prepared = prepare(
            model, q0, waypoints, f_T_t, velocity_scale=scale, acceleration_scale=scale
        )
        if part == "free":
            checker = planner.checker
            record.direct_blocked = not checker.segment_free(q0, waypoints[-1].configuration)
        else:  # touch approach / retract: contact allowed for the cup and the carried box
            checker = touch_checker(planner, COMPRESSION_M if self.carrying else None)
        planned = prepared
        if self.planned_from is not None:  # the plan's own curve (see ``planned_from``)
            planned = prepare(
                model, self.planned_from, waypoints, f_T_t, velocity_scale=scale,
                acceleration_scale=scale,
            )  # fmt: skip
        free = curve_free(planned.curve, checker)
        self.planned_from = np.array(waypoints[-1].configuration, dtype=float)
        robot.phase = f"{record.name}:{part}"
        self.say(f"[..] {record.name}: moving ({part}, {prepared.trajectory.duration:.1f} s)")
        report = follow(robot, prepared.trajectory, model, feedforward=self.ff, flange_T_tcp=f_T_t)
        q_plan = prepared.trajectory.sample(report.times_s)[0]
        record.parts.append(
            MovePart(part, free, self.tcp_points(q_plan), self.tcp_points(report.measured))
        )
        end = self.tcp_points(prepared.trajectory.end)[0]
        settled = lambda q: np.linalg.norm(self.tcp_points(q)[0] - end) < SETTLE_TOL_M  # noqa: E731
        self.hold(SETTLE_MAX_S, robot.phase, prepared.trajectory.end, until=settled)
        record.final_q = np.array(robot.read().q, dtype=float)
        error = self.tcp_points(record.final_q)[0] - record.goal_m
        record.goal_error_m = float(np.linalg.norm(error))

    def tcp_points(self, q: np.ndarray) -> np.ndarray:
        """The planner's TCP positions (K, 3) m, world, of configurations (K, 6) or (6,) rad."""
        f_T_t = self.planner.get_tcp().transform
        return (self.model.fk(np.atleast_2d(q), "flange") @ f_T_t)[:, :3, 3]

    def hold_command(self, q: np.ndarray) -> JointCommand:
        """Hold ``q`` (6,) rad with the tracking gains and the current feed-forward."""
        q = np.array(q, dtype=float)
        tau = self.ff(q[None], None, None)[0]
        return JointCommand(q_des=q, tau_ff=tau, kp=np.array(TRACKING_KP), kd=np.array(TRACKING_KD))

    def hold(self, seconds: float, phase: str, q=None, until=None) -> None:
        """Hold ``q`` (6,) rad (default: the measured configuration) for ``seconds``, or until
        ``until(q_measured)`` is true."""
        robot = self.robot
        robot.phase = phase
        cmd = self.hold_command(robot.read().q if q is None else q)
        for _ in range(round(seconds / robot.control_period_s)):
            if until is not None and until(robot.read().q):
                return
            robot.write(cmd)
            robot.step()

    def world_force(self) -> np.ndarray:
        """The latest tared force (3,) N of the F/T service's world-aligned frame."""
        state = self.ft.frame(WORLD_FRAME)
        return np.full(3, np.nan) if state is None or state.force is None else state.force


def _parts(path: list, touch_start: bool, touch_end: bool) -> list[tuple[str, list, float]]:
    """Split way-points into (part, way-points, speed scale): a leading linear retract (from a
    touch), the free part, a final linear approach (into a touch)."""
    rest, parts, approach = list(path), [], None
    if touch_start and rest and rest[0].movement is Movement.LINEAR:
        parts.append(("retract", [rest.pop(0)], TOUCH_SPEED))
    if touch_end and rest and rest[-1].movement is Movement.LINEAR:
        approach = rest.pop()
    if rest:
        parts.append(("free", rest, 1.0))
    if approach is not None:
        parts.append(("approach", [approach], TOUCH_SPEED))
    return parts


def run_demo(
    backend: str | None = "sim",
    seed: int = 0,
    out: str | Path | None = None,
    progress: bool = False,
    print_fn: Callable[[str], None] | None = None,
    gripper: Gripper | None = None,
    robot: Robot | None = None,
    plots: bool = True,
    steps: list[DemoStep] | None = None,
    **options,
) -> list[DemoStep]:
    """Run the demo (module doc); returns its steps (name, figure, ok, data).

    ``out``: a folder for the report (``twin.report.write_report``; None: no report).
    ``plots``: False writes the report's figures.json and trace.npz without its PNGs (and renders
    no snapshot), for a caller that only reads the figures.
    ``progress``: show a progress bar (``rich``). ``print_fn``: called with one line just before
    each motion starts (``[..] pick: moving (free, 1.8 s)``) and one as each step ends (``[ok]
    pick: <figure>``).
    ``gripper``: what holds the picked object (default: the robot itself when it can carry a
    payload, as the simulated arm can; otherwise none, and the weighing step is skipped).
    ``robot``: an open robot to run on (whoever opened it closes it); by default the demo opens
    one with ``open_robot(backend, **options)`` (the sim gets the scene and ``seed``).
    ``steps``: the list to append each step to as it ends (returned): a caller that reports
    them also when the demo raises (a full disk under its recording) passes its own.
    """
    steps = [] if steps is None else steps
    bar = _progress_bar(progress)
    task = bar.add_task(STEP_NAMES[0], total=len(STEP_NAMES)) if bar is not None else None

    def record(name: str, figure: str, ok: bool, **data) -> None:
        if too_fast:  # a joint measured beyond its velocity limit + margin during this step
            figure, ok = f"{figure}; {velocity_summary(too_fast)}", False
            data["velocity_events"] = list(too_fast)
            too_fast.clear()
        steps.append(DemoStep(name, figure, ok, data))
        if print_fn is not None:
            print_fn(f"[{'ok' if ok else 'FAIL'}] {name}: {figure}")
        if bar is not None:  # the bar names the step under way
            upcoming = STEP_NAMES[min(len(steps), len(STEP_NAMES) - 1)]
            bar.update(
                task, advance=1, description="report" if len(steps) == len(STEP_NAMES) else upcoming
            )

    sim_options = {"scene": SCENE, "seed": seed}  # what the sim simulates (ignored on hardware)
    with contextlib.ExitStack() as stack:
        too_fast = stack.enter_context(velocity_events_seen())
        if bar is not None:
            stack.enter_context(bar)
        if robot is None:
            robot = stack.enter_context(open_robot(backend, sim_options=sim_options, **options))
        if gripper is None and hasattr(robot, "attach_payload"):
            gripper = PayloadGripper(robot)
        run = _open(robot, seed, record)
        if print_fn is not None:
            run.say = print_fn
        stack.callback(run.ft.disconnect)
        for step in (_tare, _pick, _lift, _weigh, _place, _policy, _home, _imu):
            if not step(run, record, gripper):
                break
        if out is not None:
            write_report(
                out,
                steps=steps,
                moves=run.moves,
                policy=run.policy,
                trace=run.robot.arrays(),
                thresholds=THRESHOLDS,
                joint_names=run.model.joint_names,
                snapshot=render_snapshot(
                    SCENE, run.robot.read().q if run.place_q is None else run.place_q, seed=seed
                )
                if plots
                else None,
                plots=plots,
            )
    return steps


def _open(robot: Robot, seed: int, record) -> _Run:
    """Wrap ``robot`` in a recorder, connect the F/T service (world-aligned frame), plan ahead."""
    recorder = TraceRecorder(robot)
    ft = FtSensorService(recorder)
    ft.connect()
    ft.export_frame(WORLD_FRAME, 0, 0, 0, 0, 0, 0, world=True)
    run = _Run(recorder, make_planner(seed), ft, seed)

    def world_wrench(state):
        ft.update(state)
        w = ft.frame(WORLD_FRAME)
        return None if w is None or w.force is None else np.concatenate((w.force, w.torque))

    recorder.add_channel("ft_world", 6, world_wrench, every=FT_TRACE_EVERY)
    state = robot.read()
    q_home = np.asarray(run.model.home_q, dtype=float)
    gap = float(np.max(np.abs(state.q - q_home)))
    record(
        "open",
        f"{len(run.model.joint_names)} joints at t = {state.t_us} us, {gap:.4f} rad from home; "
        f"scene {SCENE.stem}",
        True,
        home_offset_rad=gap,
        control_period_s=robot.control_period_s,
    )
    return run


def _move_figure(m: MoveRecord) -> str:
    around = "around obstacles" if m.direct_blocked else "direct"
    return (
        f"{m.waypoints} way-points ({around}) in {m.planned_ms:.0f} ms; goal error "
        f"{m.goal_error_m * 1e3:.2f} mm; {'collision-free' if m.collision_free else 'BLOCKED'}"
    )


def _move_ok(m: MoveRecord) -> bool:
    return m.goal_error_m < THRESHOLDS["goal_error_m"] and m.collision_free


def _touch_goal(run: _Run, position) -> np.ndarray | None:
    """The configuration (6,) rad with the planner's TCP at ``position`` (3,) m, tool down,
    in the posture of home (None: out of reach)."""
    home = np.asarray(run.model.home_q, dtype=float)
    pose = run.planner.tcp_pose(home).copy()
    pose[:3, 3] = position
    return run.planner.compute_inverse_kinematics(pose, home)


def _pick(run: _Run, record, gripper) -> bool:
    q_pick = _touch_goal(run, PICK_M)
    if q_pick is None:
        record("pick", "the pick pose has no IK solution", False)
        return False
    result, error = run.plan("pick", run.robot.read().q, [q_pick], type="touch")
    if error:
        record("pick", error, False)
        return False
    run.pick_result = result
    m = run.move("pick", result, touch_start=False, touch_end=True)
    record("pick", _move_figure(m), _move_ok(m), **m.figures())
    return _move_ok(m)


def _tare(run: _Run, record, gripper) -> bool:
    robot = run.robot
    robot.phase = "tare"
    cmd = run.hold_command(robot.read().q)

    def step() -> None:  # hold still while the service averages
        robot.write(cmd)
        robot.step()

    result = run.ft.tare(duration=TARE_S, step=step)
    if not result.ok:
        record("tare", result.reason, False)
        return False
    removed = float(np.linalg.norm(result.offset[:3]))
    record(
        "tare",
        f"{result.duration_s:.2f} s at home ({result.samples} samples): offset "
        f"|f| {removed:.3f} N, |t| {np.linalg.norm(result.offset[3:]):.3f} N m (tool) removed",
        True,
        samples=int(result.samples),
        offset=result.offset.tolist(),
    )
    return True


def _lift(run: _Run, record, gripper) -> bool:
    com = np.array([0.0, 0.0, CUP_M + 0.5 * CARRIED_BOX_M[2]])  # URDF TCP frame
    if gripper is not None:
        gripper.grasp(PAYLOAD_KG, com)
        run.ff = payload_feedforward(run.model, PAYLOAD_KG, com)
    centre, size = PICK_REGION_M
    clipped = run.planner.clip_point_cloud_with_box(TransformedBox(_translation(*centre), size))
    run.planner.set_carried_object(CarriedObject.from_box(TransformedBox(np.eye(4), CARRIED_BOX_M)))
    run.carrying = True
    q_place = _touch_goal(run, np.add(PLACE_M, (0.0, 0.0, CARRIED_BOX_M[2] - PRESS_M)))
    if q_place is None:
        record("lift", "the place pose has no IK solution", False)
        return False
    result, error = run.plan(
        "place", run.pick_result, [q_place], type="touch",
        max_carried_object_compression_distance=COMPRESSION_M,
    )  # fmt: skip
    if error:
        record("lift", error, False)
        return False
    parts = _parts(result.path(), touch_start=True, touch_end=True)
    run.place_result, run.place_parts = result, parts[1:]
    m = MoveRecord("lift", run.planner.tcp_pose(parts[0][1][-1].configuration)[:3, 3])
    m.planned_ms, m.waypoints = float(result.stats.get("time_s", 0.0)) * 1e3, 1
    run.execute(m, *parts[0])
    run.moves.append(m)
    record(
        "lift",
        f"{'grasped' if gripper is not None else 'no gripper, planned as if holding'} "
        f"{PAYLOAD_KG} kg ({clipped} cloud points left with it), retract "
        f"{m.goal_error_m * 1e3:.2f} mm from its end; place planned in {m.planned_ms:.0f} ms",
        _move_ok(m),
        clipped_points=clipped,
        **m.figures(),
    )
    return _move_ok(m)


def _weigh(run: _Run, record, gripper) -> bool:
    if gripper is None:
        record("weigh", "skipped: no gripper holds the object on this backend", True, skipped=True)
        return True
    run.hold(WEIGH_S, "weigh")
    fz = float(run.world_force()[2])
    expected = PAYLOAD_KG * GRAVITY[2]
    rel = abs(fz - expected) / abs(expected)
    ok = rel < THRESHOLDS["payload_rel_error"]
    record(
        "weigh",
        f"world Fz {fz:+.3f} N for {PAYLOAD_KG} kg (weight {expected:+.3f} N, {rel * 100:.1f} %)",
        ok,
        force_z_n=fz,
        expected_n=float(expected),
        mass_kg=float(fz / GRAVITY[2]),
        rel_error=float(rel),
    )
    return ok


def _place(run: _Run, record, gripper) -> bool:
    result = run.place_result
    m = MoveRecord("place", run.planner.tcp_pose(result.final_configuration())[:3, 3])
    m.planned_ms, m.waypoints = float(result.stats.get("time_s", 0.0)) * 1e3, len(result.path())
    for part in run.place_parts:
        run.execute(m, *part)
    run.moves.append(m)
    if gripper is not None:
        gripper.release()
    run.ff = payload_feedforward(run.model)
    run.planner.clear_carried_object()
    run.carrying = False
    run.place_q = np.array(run.robot.read().q)
    record("place", _move_figure(m), _move_ok(m), **m.figures())
    return _move_ok(m)


def _policy_targets(run: _Run, n: int) -> list[np.ndarray]:
    """``n`` target configurations (6,) rad near the policy's start: free in the planner's
    model, reached from the start by a free straight joint segment, TCP above ``MIN_TCP_Z_M``."""
    planner, start = run.planner, START_Q
    lower, upper = np.asarray(run.model.lower), np.asarray(run.model.upper)
    targets: list[np.ndarray] = []
    while len(targets) < n:  # acceptance is high: a handful of draws
        q = np.clip(start + run.rng.uniform(-1, 1, 6) * POLICY_HALF_WIDTH_RAD, lower, upper)
        if (
            tcp_pose7(run.model, q)[2] >= MIN_TCP_Z_M
            and planner.configurations_free([q])[0]
            and planner.checker.segment_free(start, q)
        ):
            targets.append(q)
    return targets


def _policy(run: _Run, record, gripper) -> bool:
    result, error = run.plan("policy start", run.place_result, [START_Q])
    if error:
        record("policy", error, False)
        return False
    m = run.move("to policy start", result, touch_start=True, touch_end=False)
    if not _move_ok(m):
        record("policy", f"to the policy's start: {_move_figure(m)}", False, **m.figures())
        return False
    robot = run.robot
    commands = CommandSource()
    controller = OnnxRLController(RobotStateAdapter(robot, articulation="arm"), commands)
    if not controller.create(policy_path(POLICY)):
        record("policy", f"cannot load {POLICY}: {controller.error}", False)
        return False
    failed, fault = 0, None
    for k, q_target in enumerate(_policy_targets(run, POLICY_TARGETS)):
        target = tcp_pose7(run.model, q_target)
        commands.set_se3_pose("target", target)
        if not controller.init(enable_data_collection=False, mode=WorkerMode.SYNC):
            record("policy", f"controller init failed: {controller.error}", False)
            return False
        robot.phase = f"policy:{k + 1}"
        run.say(f"[..] policy: moving (target {k + 1} of {POLICY_TARGETS}, {POLICY_TIME_S} s)")
        reach, n_failed = _reach(run, controller, target)
        run.policy.append(reach)
        failed, fault = failed + n_failed, controller.fault or fault
    cycles = len(run.policy) * round(POLICY_TIME_S / robot.control_period_s)
    d = max(p.position_error_m for p in run.policy)
    ang = max(p.rotation_error_rad for p in run.policy)
    ok = (
        d < THRESHOLDS["policy_position_error_m"]
        and ang < THRESHOLDS["policy_rotation_error_rad"]
        and failed <= MAX_FAILED_CYCLES * cycles
    )
    record(
        "policy",
        f"{POLICY}.onnx to {len(run.policy)} targets, {POLICY_TIME_S} s each: worst "
        f"{d * 1e3:.1f} mm, {ang:.3f} rad"
        + (f"; {failed} of {cycles} controller cycles failed ({fault})" if failed else ""),
        ok,
        targets=[p.figures() for p in run.policy],
        failed_cycles=failed,
        cycles=cycles,
        to_start=m.figures(),
    )
    return ok


def _reach(run: _Run, controller: OnnxRLController, target: np.ndarray) -> tuple[PolicyRecord, int]:
    """Let the controller drive for ``POLICY_TIME_S``; the reach and how many cycles failed (a
    failed cycle, e.g. a stale joint reading, keeps the last command in force)."""
    robot, path, failed = run.robot, [], 0
    for _ in range(round(POLICY_TIME_S / robot.control_period_s)):
        failed += not controller.update(robot.read().t_us)
        robot.step()
        path.append(run.model.fk(robot.read().q)[:3, 3])
    d, ang = pose_error(tcp_pose7(run.model, robot.read().q), target)
    return PolicyRecord(target, d, ang, np.array(path)), failed


def _home(run: _Run, record, gripper) -> bool:
    home = np.asarray(run.model.home_q, dtype=float)
    result, error = run.plan("home", run.robot.read().q, [home])
    if error:
        record("home", error, False)
        return False
    m = run.move("home", result, touch_start=False, touch_end=False)
    record("home", _move_figure(m), _move_ok(m), **m.figures())
    return _move_ok(m)


def _imu(run: _Run, record, gripper) -> bool:
    robot = run.robot
    n0 = len(robot)
    run.hold(WEIGH_S, "imu")
    trace = robot.arrays()
    f = np.nanmean(trace["specific_force"][n0:], axis=0)
    w = np.nanmean(trace["angular_rate"][n0:], axis=0)
    if not np.all(np.isfinite(f)):
        record("imu", "no IMU samples", False)
        return False
    world_R_imu = run.model.fk(robot.read().q, IMU_LINK)[:3, :3]
    predicted = world_R_imu.T @ -GRAVITY  # at rest the IMU reads gravity's reaction, IMU frame
    angle = float(np.arctan2(np.linalg.norm(np.cross(f, predicted)), f @ predicted))
    ok = angle < THRESHOLDS["imu_gravity_angle_rad"]
    record(
        "imu",
        f"at rest |f| {np.linalg.norm(f):.3f} m/s^2, {angle * 1e3:.1f} mrad from the gravity "
        f"direction the kinematics predicts; |w| {np.linalg.norm(w):.4f} rad/s",
        ok,
        specific_force_m_s2=f.tolist(),
        predicted_m_s2=predicted.tolist(),
        gravity_angle_rad=angle,
        angular_rate_rad_s=w.tolist(),
    )
    return ok


def _progress_bar(enabled: bool):
    if not enabled:
        return None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description:<8}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), transient=True,
    )  # fmt: skip
