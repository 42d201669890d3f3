"""Executing a planned path on any ``twin.robot.Robot``: curve, timing, joint commands.

    traj = prepare(model, q_start, result.path(), flange_T_tcp=planner.get_tcp().transform)
    report = follow(robot, traj.trajectory, model)

``prepare`` turns way-points into the executed joint curve (``curve``): joint way-points are
vertices with their ``blend_radius`` (joint-space norm, rad) as parabolic blends; a run of linear
way-points becomes the joint nodes of ``linear.linear_motion`` along the Cartesian path through
their TCP poses (blended at linear-linear way-points by their radius in metres), with the small
node blends of ``linear``; a way-point between a joint and a linear segment is a stop. It then
time-parameterises the curve (``timing``) within:

* velocity limits: ``model.velocity_limits`` (rad/s), times ``velocity_scale``;
* acceleration limits: ``default_acceleration_limits(model)`` = velocity limit /
  ``ACCELERATION_TIME_S`` (each joint reaches full speed in 0.25 s: 6.3, 3.1, 6.3, 19.3, 9.6,
  19.3 rad/s^2 on the shipped arm), times ``acceleration_scale``; ``cell_timing`` gives both
  from a cell's ``limits`` (``velocity_scale``, ``acceleration_time_s``).

``follow`` writes one ``JointCommand`` per control period: ``q_des``, ``qd_des`` from the
trajectory, ``tau_ff`` from ``feedforward(q_des, qd_des, qdd_des)``, called once on every sample
((K, n) arrays in, (K, n) N m out; default ``dynamics_feedforward(model)``: the full rigid-body
inverse dynamics of the time-parameterised path, ``twin.dynamics``; ``gravity_feedforward`` and
``no_feedforward`` are the weaker choices), and the gains ``TRACKING_KP`` / ``TRACKING_KD``
(about critical damping for the shipped arm's joint inertia at home, the sim's hold gains). After
the trajectory it holds the end for ``settle_s`` and reports the tracking error (measured joints
vs the command of the same instant), its TCP equivalent and the time taken.

Documented tracking on the sim backend (``tests/test_planning8_execute.py``): with gravity
feedforward (full dynamics does better: ``benchmarks/bench_execute.py`` prints both), at most ``TRACKING_BOUND_RAD`` = 0.02 rad per joint and 10 mm at the TCP during
motion, and below 1 mm at the TCP after settling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from twin.dynamics import ArmDynamics
from twin.planning.errors import PlanningInputError
from twin.planning.motion.curve import JointCurve, MotionChecker, build_curve, curve_free
from twin.planning.motion.linear import (
    CartesianPath,
    LinearMotion,
    linear_motion,
    resolve_flange_T_tcp,
)
from twin.planning.motion.timing import Trajectory, time_parameterize
from twin.planning.requests import Movement, Waypoint
from twin.robot import JointCommand, Robot

ACCELERATION_TIME_S = 0.25
TRACKING_KP = (150.0, 250.0, 150.0, 25.0, 25.0, 8.0)  # N m/rad
TRACKING_KD = (9.0, 12.0, 6.5, 0.7, 0.75, 0.08)  # N m s/rad
TRACKING_BOUND_RAD = 0.02
START_TOLERANCE_RAD = 0.02  # the robot must be this close to the trajectory's start


class ExecutionError(RuntimeError):
    """Execution cannot start (robot far from the start, a way-point cannot be expanded...)."""


def default_acceleration_limits(model) -> np.ndarray:
    """(n,) rad/s^2: each joint's velocity limit reached in ``ACCELERATION_TIME_S``."""
    return np.asarray(model.velocity_limits, dtype=float) / ACCELERATION_TIME_S


def cell_timing(model, limits: dict) -> dict:
    """``prepare`` keyword arguments from a cell's execution limits (``Planner.limits()``):
    ``velocity_scale`` and the acceleration limits (n,) rad/s^2 that reach each joint's velocity
    limit in ``acceleration_time_s``."""
    t = float(limits.get("acceleration_time_s", ACCELERATION_TIME_S))
    if not (np.isfinite(t) and t > 0.0):
        raise PlanningInputError(f"acceleration_time_s: expected a value > 0 s, got {t}")
    return {
        "velocity_scale": float(limits.get("velocity_scale", 1.0)),
        "acceleration_limits": np.asarray(model.velocity_limits, dtype=float) / t,
    }


@dataclass(frozen=True)
class Prepared:
    """The executed curve, its trajectory and the linear motions it contains."""

    curve: JointCurve
    trajectory: Trajectory
    linear: tuple[LinearMotion, ...]


def joint_curve(
    model,
    q_start: object,
    waypoints: Sequence[Waypoint],
    flange_T_tcp: object | None = None,
) -> tuple[JointCurve, tuple[LinearMotion, ...]]:
    """The executed joint curve of ``waypoints`` from ``q_start`` (see the module doc).

    Raises ``ExecutionError`` when a linear run cannot be followed (its ``LinearMotion`` failed).
    """
    q0 = np.asarray(q_start, dtype=float)
    f_T_t = resolve_flange_T_tcp(model, flange_T_tcp)
    points, entry, exit_ = [q0], [0.0], [0.0]
    motions = []
    i = 0
    while i < len(waypoints):
        w = waypoints[i]
        if w.movement is Movement.JOINT:
            points.append(w.configuration)
            blend = w.blend_radius
            nxt = waypoints[i + 1].movement if i + 1 < len(waypoints) else None
            ok = nxt is Movement.JOINT  # the incoming segment is a joint one by definition
            entry.append(blend.entry if ok else 0.0)
            exit_.append(blend.exit if ok else 0.0)
            i += 1
            continue
        run = [w]
        while i + len(run) < len(waypoints) and waypoints[i + len(run)].movement is Movement.LINEAR:
            run.append(waypoints[i + len(run)])
        start = points[-1]
        poses = [model.fk(start, "flange") @ f_T_t]
        poses += [model.fk(x.configuration, "flange") @ f_T_t for x in run]
        radii = [min(x.blend_radius.entry, x.blend_radius.exit) for x in run[:-1]]
        motion = linear_motion(model, start, CartesianPath.through(poses, radii), f_T_t)
        if not motion:
            raise ExecutionError(
                f"linear way-points {i}..{i + len(run) - 1} cannot be followed: "
                f"{motion.error.value}: {motion.reason}"  # type: ignore[union-attr]
            )
        motions.append(motion)
        nodes = motion.configurations[1:]
        gap = np.max(np.abs(nodes[-1] - run[-1].configuration))
        if gap > 1e-6:
            raise ExecutionError(
                f"linear way-point {i + len(run) - 1} is reached in another configuration "
                f"(off by {gap:.3g} rad): a linear motion keeps the posture and joint wraps"
            )
        entry[-1] = exit_[-1] = 0.0  # the vertex before a linear run is a stop
        points.extend(nodes[:-1])
        points.append(run[-1].configuration)
        entry.extend(motion.entry[1:-1])
        exit_.extend(motion.exit[1:-1])
        entry.append(0.0)
        exit_.append(0.0)
        i += len(run)
    return build_curve(np.array(points), np.array(entry), np.array(exit_)), tuple(motions)


def prepare(
    model,
    q_start: object,
    waypoints: Sequence[Waypoint],
    flange_T_tcp: object | None = None,
    *,
    velocity_scale: float = 1.0,
    acceleration_scale: float = 1.0,
    acceleration_limits: object | None = None,
    checker: MotionChecker | None = None,
) -> Prepared:
    """Curve and trajectory of ``waypoints`` from ``q_start`` (n,) rad.

    ``checker``: when given, the exact executed curve is verified first (``curve.curve_free``)
    and ``ExecutionError`` raised if it is blocked.
    """
    for name, s in (("velocity_scale", velocity_scale), ("acceleration_scale", acceleration_scale)):
        if not (np.isfinite(s) and 0.0 < s <= 1.0):
            raise PlanningInputError(f"{name}: expected a value in (0, 1], got {s}")
    if not waypoints:
        raise PlanningInputError("waypoints: expected at least one way-point")
    curve, motions = joint_curve(model, q_start, waypoints, flange_T_tcp)
    if checker is not None and not curve_free(curve, checker):
        raise ExecutionError(
            "the executed curve (with its blends) is blocked by the collision model"
        )
    acc = default_acceleration_limits(model) if acceleration_limits is None else acceleration_limits
    traj = time_parameterize(
        curve,
        np.asarray(model.velocity_limits, dtype=float) * velocity_scale,
        np.asarray(acc, dtype=float) * acceleration_scale,
    )
    return Prepared(curve, traj, motions)


@dataclass(frozen=True)
class ExecutionReport:
    """Tracking of one executed trajectory.

    Joint errors are ``q_des - q_measured`` at the same instant (rad); TCP errors the distance
    (m) between the TCP positions of both. ``max_*``/``rms_*`` over the trajectory (RMS over
    samples and joints for rad); ``final_*`` after settling. ``duration_s``: the trajectory's;
    ``elapsed_s``: robot time from the first command to the end of settling; ``wall_s``: wall
    clock. ``commanded``: (K, 3, n) q_des, qd_des, qdd_des of every command written; ``times_s``
    (K,) their trajectory times; ``measured`` (K, n) q at those instants.
    """

    max_joint_error_rad: float
    rms_joint_error_rad: float
    max_tcp_error_m: float
    rms_tcp_error_m: float
    final_joint_error_rad: float
    final_tcp_error_m: float
    duration_s: float
    elapsed_s: float
    wall_s: float
    commanded: np.ndarray
    times_s: np.ndarray
    measured: np.ndarray


Feedforward = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def dynamics_feedforward(model, dynamics: ArmDynamics | None = None) -> Feedforward:
    """Full inverse dynamics ``M(q) qdd + C(q, qd) qd + g(q)`` (N m) of the commanded path:
    ``dynamics`` (default ``ArmDynamics(model)``; pass ``.with_payload(...)`` for a load)."""
    dyn = ArmDynamics(model) if dynamics is None else dynamics
    return dyn.inverse_dynamics


def gravity_feedforward(model, dynamics: ArmDynamics | None = None) -> Feedforward:
    """Gravity torques ``g(q)`` (N m) of the commanded positions only."""
    dyn = ArmDynamics(model) if dynamics is None else dynamics
    return lambda q, qd, qdd: dyn.gravity_torques(q)


def no_feedforward(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """Zero torques (K, n): feedback alone (a gravity-free arm)."""
    return np.zeros_like(np.asarray(q, dtype=float))


def follow(
    robot: Robot,
    trajectory: Trajectory,
    model=None,
    *,
    kp: object = TRACKING_KP,
    kd: object = TRACKING_KD,
    feedforward: Feedforward | None = None,
    settle_s: float = 0.25,
    flange_T_tcp: object | None = None,
) -> ExecutionReport:
    """Run ``trajectory`` on ``robot`` at its control rate and measure the tracking.

    model: for the TCP errors and the default feedforward (``robot.model``). Raises ``ExecutionError`` when the robot
    is more than ``START_TOLERANCE_RAD`` away from the trajectory's start.
    """
    model = robot.model if model is None else model
    dt = float(robot.control_period_s)
    n = len(model.joint_names)
    kp_a = np.broadcast_to(np.asarray(kp, dtype=float), (n,)).copy()
    kd_a = np.broadcast_to(np.asarray(kd, dtype=float), (n,)).copy()
    times = trajectory.sample_times(dt)
    settle = int(np.ceil(max(0.0, settle_s) / dt))
    times = np.concatenate((times, times[-1] + dt * np.arange(1, settle + 1)))
    q_des, qd_des, qdd_des = trajectory.sample(times)
    state = robot.read()
    gap = float(np.max(np.abs(state.q - q_des[0])))
    if gap > START_TOLERANCE_RAD:
        raise ExecutionError(
            f"the robot is {gap:.3g} rad from the trajectory's start; expected within "
            f"{START_TOLERANCE_RAD} rad (move it there first)"
        )
    measured = np.empty_like(q_des)
    t0_us, wall0 = state.t_us, time.perf_counter()
    if feedforward is None:
        feedforward = dynamics_feedforward(model)
    tau = feedforward(q_des, qd_des, qdd_des)
    tau = np.asarray(tau, dtype=float)
    if tau.shape != q_des.shape:
        raise PlanningInputError(
            f"feedforward: expected torques of shape {q_des.shape} (one row per sample), "
            f"got {tau.shape}"
        )
    for k in range(len(times)):
        measured[k] = state.q
        robot.write(JointCommand(q_des[k], qd_des[k], tau[k], kp_a, kd_a))
        robot.step()
        state = robot.read()
    wall = time.perf_counter() - wall0
    elapsed = (state.t_us - t0_us) * 1e-6
    f_T_t = resolve_flange_T_tcp(model, flange_T_tcp)
    p_des = (model.fk(q_des, "flange") @ f_T_t)[:, :3, 3]
    p_meas = (model.fk(measured, "flange") @ f_T_t)[:, :3, 3]
    e_joint = q_des - measured
    e_tcp = np.linalg.norm(p_des - p_meas, axis=1)
    moving = slice(0, len(times) - settle) if settle else slice(None)
    return ExecutionReport(
        max_joint_error_rad=float(np.max(np.abs(e_joint[moving]))),
        rms_joint_error_rad=float(np.sqrt(np.mean(e_joint[moving] ** 2))),
        max_tcp_error_m=float(np.max(e_tcp[moving])),
        rms_tcp_error_m=float(np.sqrt(np.mean(e_tcp[moving] ** 2))),
        final_joint_error_rad=float(np.max(np.abs(trajectory.end - state.q))),
        final_tcp_error_m=float(
            np.linalg.norm(
                (model.fk(trajectory.end, "flange") @ f_T_t)[:3, 3]
                - (model.fk(state.q, "flange") @ f_T_t)[:3, 3]
            )
        ),
        duration_s=trajectory.duration,
        elapsed_s=elapsed,
        wall_s=wall,
        commanded=np.stack((q_des, qd_des, qdd_des), axis=1),
        times_s=times,
        measured=measured,
    )


def execute(
    robot: Robot,
    waypoints: Sequence[Waypoint],
    model=None,
    flange_T_tcp: object | None = None,
    *,
    feedforward: Feedforward | None = None,
    checker: MotionChecker | None = None,
    **timing: float,
) -> tuple[Prepared, ExecutionReport]:
    """``prepare`` from the robot's measured configuration, then ``follow``."""
    model = robot.model if model is None else model
    q0 = np.asarray(robot.read().q, dtype=float)
    prepared = prepare(model, q0, waypoints, flange_T_tcp, checker=checker, **timing)
    report = follow(
        robot, prepared.trajectory, model, feedforward=feedforward, flange_T_tcp=flange_T_tcp
    )
    return prepared, report
