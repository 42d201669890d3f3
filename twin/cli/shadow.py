"""``twin shadow``: drive a backend and follow it with the live twin (``twin.shadow``).

    twin shadow --duration 6                        # the sim, followed by a second sim
    twin shadow --backend hardware --emulate --payload 0.3 --payload-at 3

The arm moves from where it stands onto a slow sweep about its home configuration (joints 1 and
5 by ``--amplitude-deg`` at ``--frequency-hz``), tracked with the executor's gains and gravity
feed-forward; every control period ``Shadow.update()`` compares the measured F/T and IMU readings
with the twin's prediction. It prints the residuals ``--print-hz`` times a second (force N and
torque N m norms, sensor frame; specific force m/s^2 and rate rad/s norms, IMU frame; the payload
estimate kg) and a line at every change of the flags (``ShadowFlag``: contact, payload, drift)
as it happens. ``--payload KG`` welds a payload to the tool at ``--payload-at`` seconds on a robot
that can (the sim), so the twin sees a payload change.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from twin.cli.common import UsageError, add_backend_options, open_robot_from_args

#: Joints the sweep moves (0-based) and the time to blend onto it from the start pose (s).
SWEEP_JOINTS = (0, 4)
RAMP_S = 1.0


def _smoothstep(s: float) -> float:
    s = min(max(s, 0.0), 1.0)
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


def reference(t_s: float, q_start: np.ndarray, home: np.ndarray, amplitude_rad: float, hz: float):
    """``(q, qd)`` (6,) rad, rad/s of the sweep at ``t_s``, blended from ``q_start`` over
    ``RAMP_S``."""
    mask = np.zeros_like(home)
    mask[list(SWEEP_JOINTS)] = 1.0
    w = 2.0 * math.pi * hz
    q_sweep = home + amplitude_rad * math.sin(w * t_s) * mask
    qd_sweep = amplitude_rad * w * math.cos(w * t_s) * mask
    s = _smoothstep(t_s / RAMP_S)
    return q_start + s * (q_sweep - q_start), s * qd_sweep


def _flag_names(flags) -> set[str]:
    return {f.name for f in type(flags) if f.value and f in flags}


def run_shadow(args: argparse.Namespace) -> int:
    """``twin shadow``; prints residuals and events; exit 0."""
    from twin.kinematics.gravity import gravity_torques
    from twin.planning.motion.execute import TRACKING_KD, TRACKING_KP
    from twin.robot import JointCommand
    from twin.shadow import Shadow, ShadowConfig

    if args.duration <= 0 or args.print_hz <= 0:
        raise UsageError("--duration and --print-hz must be > 0")
    config = ShadowConfig(accel_window_s=args.accel_window)
    amplitude = math.radians(args.amplitude_deg)
    with (
        open_robot_from_args(args, seed=args.seed, scene=args.scene) as robot,
        Shadow(robot, config=config) as shadow,
    ):
        model = robot.model
        home = np.asarray(model.home_q, float)
        q_start = np.asarray(robot.read().q, float)
        period = robot.control_period_s
        n = round(args.duration / period)
        every = max(1, round(1.0 / (args.print_hz * period)))
        attach = getattr(robot, "attach_payload", None)
        if args.payload and not callable(attach):
            print("shadow: this robot cannot weld a payload (the sim can); --payload ignored")
        print(
            f"{'t s':>6}  {'|f| N':>7}  {'|t| N m':>7}  {'|a| m/s2':>8}  {'|w| rad/s':>9}  "
            f"{'payload kg':>10}  flags",
            flush=True,
        )
        before: set[str] = set()
        events = 0
        for k in range(n):
            t = k * period
            if args.payload and callable(attach) and k == round(args.payload_at / period):
                attach(args.payload, np.zeros(3))
                print(f"{t:6.2f}  payload of {args.payload} kg welded to the tool", flush=True)
            q, qd = reference(t, q_start, home, amplitude, args.frequency_hz)
            robot.write(
                JointCommand(
                    q_des=q,
                    qd_des=qd,
                    tau_ff=gravity_torques(model, q),
                    kp=np.asarray(TRACKING_KP),
                    kd=np.asarray(TRACKING_KD),
                )
            )
            robot.step()
            report = shadow.update()
            now = _flag_names(report.flags)
            if now != before:
                change = [f"+{f}" for f in sorted(now - before)] + [
                    f"-{f}" for f in sorted(before - now)
                ]
                print(f"{t + period:6.2f}  event: {' '.join(change)}", flush=True)
                events += 1
                before = now
            if (k + 1) % every == 0:
                r, i = report.wrench_residual, report.imu_residual
                print(
                    f"{t + period:6.2f}  {np.linalg.norm(r[:3]):7.3f}  {np.linalg.norm(r[3:]):7.4f}  "
                    f"{np.linalg.norm(i[:3]):8.3f}  {np.linalg.norm(i[3:]):9.4f}  "
                    f"{report.payload_mass_kg:10.3f}  {' '.join(sorted(now)) or 'OK'}",
                    flush=True,
                )
    print(
        f"shadow: {n} cycles, {events} flag changes; last flags {' '.join(sorted(before)) or 'OK'}"
    )
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "shadow",
        help="drive a backend and follow it with the live twin; print residuals and events",
        description="Drive the arm on a slow sweep and follow it with the live twin (a sim that "
        "mirrors the measured joints and predicts the F/T and IMU readings); print the "
        "residuals and every change of the flags (contact, payload, drift) as it happens.",
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds (default 5)")
    parser.add_argument("--amplitude-deg", type=float, default=10.0, help="sweep amplitude")
    parser.add_argument("--frequency-hz", type=float, default=0.2, help="sweep frequency")
    parser.add_argument("--print-hz", type=float, default=2.0, help="residual lines per second")
    parser.add_argument(
        "--payload", type=float, default=0.0, metavar="KG", help="weld a payload (sim)"
    )
    parser.add_argument("--payload-at", type=float, default=2.0, metavar="S")
    parser.add_argument(
        "--accel-window",
        type=float,
        default=0.02,
        metavar="S",
        help="the twin differences measured velocities over at least this long (default 0.02 s, "
        "for quantised servo velocities)",
    )
    parser.add_argument("--seed", type=int, default=0, help="sim seed")
    parser.add_argument("--scene", default=None, help="sim scene")
    add_backend_options(parser)
    parser.set_defaults(func=run_shadow)
