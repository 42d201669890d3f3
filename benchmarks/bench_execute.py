"""Execution: time parameterisation and trajectory following on the sim backend.

Problems: seeded random joint paths of 5 way-points about the home configuration (each joint
within +-0.6 rad of home), blended at every interior way-point with half the shorter neighbouring
segment.

Figures:
* time parameterisation: median ms per path (``prepare``: curve and timing);
* trajectory duration: blended vs stopping at every way-point (ratio < 1 is the blending gain),
  and vs the lower bound ``max_j (sum of |dq_j| over the path) / vmax_j`` (>= 1);
* following on ``sim.PyBulletRobot`` with full inverse-dynamics feedforward (``follow``'s
  default) and, on the same paths, with gravity-only feedforward: max and RMS joint error (rad),
  max TCP error (m) of both and their ratio (gravity-only / full: > 1 is the gain of the full
  dynamics), and the largest commanded velocity and acceleration as a fraction of the limits
  (<= 1, checked on the samples);
* overhead: ``follow``'s wall time per control cycle against the anchor measured in the same run,
  a bare loop of ``robot.write`` / ``robot.step`` / ``robot.read`` with the same precomputed
  commands (ratio: follow / anchor).

    python -m twin.benchmarks.bench_execute [--quick] [--seed N]
"""

from __future__ import annotations

import time

import numpy as np
from twin.benchmarks._report import emit_json, parse_args, print_table
from twin.sim import PyBulletRobot

from twin.planning.motion.curve import build_curve
from twin.planning.motion.execute import (
    TRACKING_KD,
    TRACKING_KP,
    default_acceleration_limits,
    dynamics_feedforward,
    follow,
    gravity_feedforward,
    prepare,
)
from twin.planning.motion.timing import time_parameterize
from twin.planning.requests import BlendRadius, Waypoint
from twin.robot import JointCommand


def random_path(rng: np.random.Generator, home: np.ndarray, count: int = 5) -> np.ndarray:
    return np.vstack((home, home + rng.uniform(-0.6, 0.6, (count, 6))))


def waypoints(points: np.ndarray) -> list[Waypoint]:
    steps = np.linalg.norm(np.diff(points, axis=0), axis=1)
    out = []
    for i, q in enumerate(points[1:], start=1):
        r = 0.5 * min(steps[i - 1], steps[i]) if i < len(points) - 1 else 0.0
        out.append(Waypoint(q, blend_radius=BlendRadius(r, r)))
    return out


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(args.seed)
    n_paths = 4 if args.quick else 20
    robot = PyBulletRobot(watchdog_s=None)
    model = robot.model
    home = np.array(model.home_q)
    vmax = np.asarray(model.velocity_limits)
    amax = default_acceleration_limits(model)
    ff = dynamics_feedforward(model)
    gravity_only = gravity_feedforward(model)
    prep_ms, gain, bound, errs, tcp, vfrac, afrac, follow_s, anchor_s = ([] for _ in range(9))
    g_errs, g_tcp = [], []
    for _ in range(n_paths):
        points = random_path(rng, home)
        w = waypoints(points)
        t0 = time.perf_counter()
        prepared = prepare(model, home, w)
        prep_ms.append(1e3 * (time.perf_counter() - t0))
        traj = prepared.trajectory
        stop = time_parameterize(build_curve(points), vmax, amax)
        gain.append(traj.duration / stop.duration)
        lower = np.max(np.sum(np.abs(np.diff(points, axis=0)), axis=0) / vmax)
        bound.append(traj.duration / lower)
        robot.reset(home)
        rep_g = follow(robot, traj, feedforward=gravity_only)
        g_errs.append((rep_g.max_joint_error_rad, rep_g.rms_joint_error_rad))
        g_tcp.append(rep_g.max_tcp_error_m)
        robot.reset(home)
        rep = follow(robot, traj, feedforward=ff)
        errs.append((rep.max_joint_error_rad, rep.rms_joint_error_rad))
        tcp.append(rep.max_tcp_error_m)
        dt = robot.control_period_s
        q_cmd, qd_cmd = rep.commanded[:, 0], rep.commanded[:, 1]
        vfrac.append(np.max(np.abs(qd_cmd) / vmax))
        afrac.append(np.max(np.abs(np.diff(qd_cmd, axis=0)) / dt / amax))
        follow_s.append(rep.wall_s / len(rep.times_s))
        # Anchor: the same commands in a bare write/step/read loop.
        tau = ff(q_cmd, qd_cmd, rep.commanded[:, 2])
        cmds = [
            JointCommand(q, qd, t, np.array(TRACKING_KP), np.array(TRACKING_KD))
            for q, qd, t in zip(q_cmd, qd_cmd, tau)
        ]
        robot.reset(home)
        t0 = time.perf_counter()
        for c in cmds:
            robot.write(c)
            robot.step()
            robot.read()
        anchor_s.append((time.perf_counter() - t0) / len(cmds))
    robot.close()
    errs, g_errs = np.array(errs), np.array(g_errs)
    g_max, full_max = float(g_errs[:, 0].max()), float(errs[:, 0].max())
    overhead = float(np.median(follow_s) / np.median(anchor_s))
    rows = [
        ("prepare (curve + timing)", "ms / path", float(np.median(prep_ms))),
        ("duration blended / stopping", "ratio", float(np.median(gain))),
        ("duration / lower bound", "ratio", float(np.median(bound))),
        ("max joint error, full dynamics ff", "rad", full_max),
        ("RMS joint error, full dynamics ff", "rad", float(np.sqrt(np.mean(errs[:, 1] ** 2)))),
        ("max TCP error, full dynamics ff", "m", float(np.max(tcp))),
        ("max joint error, gravity-only ff", "rad", g_max),
        ("RMS joint error, gravity-only ff", "rad", float(np.sqrt(np.mean(g_errs[:, 1] ** 2)))),
        ("max TCP error, gravity-only ff", "m", float(np.max(g_tcp))),
        ("max joint error gravity-only / full", "ratio", g_max / full_max),
        ("max |qd| / vmax", "", float(np.max(vfrac))),
        ("max |qdd| / amax (samples)", "", float(np.max(afrac))),
        ("follow cycle", "us", 1e6 * float(np.median(follow_s))),
        ("anchor cycle (bare loop)", "us", 1e6 * float(np.median(anchor_s))),
        ("follow / anchor", "ratio", overhead),
    ]
    print_table(
        f"Execution on the sim backend, {n_paths} random blended paths",
        ["figure", "unit", "value"],
        rows,
    )
    emit_json(
        "execute",
        {
            "paths": n_paths,
            "prepare_ms_median": rows[0][2],
            "blend_gain_ratio": rows[1][2],
            "lower_bound_ratio": rows[2][2],
            "max_joint_error_rad": rows[3][2],
            "rms_joint_error_rad": rows[4][2],
            "max_tcp_error_m": rows[5][2],
            "gravity_only_max_joint_error_rad": rows[6][2],
            "gravity_only_rms_joint_error_rad": rows[7][2],
            "gravity_only_max_tcp_error_m": rows[8][2],
            "max_joint_error_gravity_over_full": rows[9][2],
            "max_velocity_fraction": rows[10][2],
            "max_acceleration_fraction": rows[11][2],
            "follow_over_anchor": overhead,
        },
    )


if __name__ == "__main__":
    main()
