"""``twin ft tare|hz|filter|log``: the F/T sensor services (``twin.sensors.FtSensorService``) over
any backend.

    twin ft tare --duration 1.0            # zero the readings; prints the offset and the noise
    twin ft hz --set 400                   # measured sample rate (and set the device's)
    twin ft filter --force 20 --torque 20  # per-axis low-pass cut-offs, Hz (0 = off)
    twin ft log wrench.csv --duration 2    # CSV of the published wrench, missed / total entries

While a command runs the arm holds the position it was found in (the executor's tracking gains,
gravity feed-forward); every control period the service processes the newest sample. Forces are
N and torques N m, in the sensor frame unless ``--world`` (a world-aligned exported frame).
"""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from twin.cli.common import UsageError, add_backend_options, open_robot_from_args

WORLD_FRAME = "world_aligned"


def _holder(robot) -> Callable[[], None]:
    """A ``step`` that holds the arm where it is now, then advances one control period."""
    from twin.kinematics.gravity import gravity_torques
    from twin.planning.motion.execute import TRACKING_KD, TRACKING_KP
    from twin.robot import JointCommand

    q = np.asarray(robot.read().q, float)
    hold = JointCommand(
        q_des=q,
        tau_ff=gravity_torques(robot.model, q),
        kp=np.asarray(TRACKING_KP),
        kd=np.asarray(TRACKING_KD),
    )

    def step() -> None:
        robot.write(hold)
        robot.step()

    return step


@dataclass
class Session:
    """What an action works with: the connected service, the holding ``step``, the robot."""

    service: object
    step: Callable[[], None]
    robot: object
    world: bool

    def run_for(self, duration_s: float) -> list:
        """Step and update for ``duration_s``; the published wrenches (6,) N, N m seen."""
        return _run_for(self, duration_s)


def _run_for(session: Session, duration_s: float) -> list:
    service = session.service
    seen, last = [], None
    for _ in range(max(1, round(duration_s / session.robot.control_period_s))):
        session.step()
        service.update()
        port = service.frame(WORLD_FRAME) if session.world else service.wrench
        if port is not None and port.force is not None and port.t_us != last:
            last = port.t_us
            seen.append(np.concatenate([port.force, port.torque]))
    return seen


def _vec(x: np.ndarray, digits: int = 4) -> str:
    return "[" + ", ".join(f"{v:+.{digits}f}" for v in x) + "]"


def _print_stats(what: str, samples: list) -> None:
    if not samples:
        print(f"{what}: no samples")
        return
    arr = np.array(samples)
    print(f"{what}: {len(arr)} samples")
    print(
        f"  mean [fx, fy, fz] N {_vec(arr.mean(0)[:3])}  [tx, ty, tz] N m {_vec(arr.mean(0)[3:])}"
    )
    print(f"  std  [fx, fy, fz] N {_vec(arr.std(0)[:3])}  [tx, ty, tz] N m {_vec(arr.std(0)[3:])}")


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0")
    return value


def run_ft(args: argparse.Namespace) -> int:
    """Open the robot, connect the service, run the ``ft`` action, disconnect."""
    from twin.sensors import FtSensorService

    if args.action == "log" and not args.file.parent.is_dir():
        raise UsageError(f"log file {args.file}: the folder {args.file.parent} does not exist")
    with open_robot_from_args(args, seed=args.seed, scene=args.scene) as robot:
        service = FtSensorService(robot)
        service.connect()
        if args.world:
            service.export_frame(WORLD_FRAME, 0, 0, 0, 0, 0, 0, world=True)
        try:
            code = ACTIONS[args.action](Session(service, _holder(robot), robot, args.world), args)
        finally:
            service.disconnect()
    return code


def _tare(session: Session, args) -> int:
    result = session.service.tare(duration=args.duration, step=session.step)
    if not result.ok:
        print(f"tare failed: {result.reason}")
        return 1
    print(f"tare: {result.samples} samples over {result.duration_s:.3f} s of sensor time")
    print(
        f"  offset [fx, fy, fz] N {_vec(result.offset[:3])}  [tx, ty, tz] N m {_vec(result.offset[3:])}"
    )
    _print_stats(f"after the tare ({args.settle:g} s)", session.run_for(args.settle))
    return 0


def _hz(session: Session, args) -> int:
    service = session.service
    if args.set is not None:
        got = service.set_rate(args.set)
        print(f"rate set: asked {args.set:g} Hz, the device runs at {got:g} Hz")
    session.run_for(args.duration)
    print(
        f"measured {service.hz():.1f} Hz over the last second (device "
        f"{session.robot.ft_device.rate_hz:g} Hz, control loop "
        f"{1.0 / session.robot.control_period_s:g} Hz)"
    )
    return 0


def _three(values: list[float] | None, current: np.ndarray) -> np.ndarray:
    """Cut-offs (3,) Hz from 1 or 3 values, or ``current``."""
    if values is None:
        return current
    if len(values) not in (1, 3):
        raise UsageError(f"expected 1 or 3 cut-offs (Hz, X Y Z), got {len(values)}: {values}")
    return np.broadcast_to(np.asarray(values, float), (3,))


def _filter(session: Session, args) -> int:
    service = session.service
    ffc, tfc = service.get_ft_filter()
    print(f"cut-offs Hz (0 = off): force {_vec(ffc, 1)} torque {_vec(tfc, 1)}")
    if args.force is not None or args.torque is not None:
        service.set_ft_filter(_three(args.force, ffc), _three(args.torque, tfc))
        ffc, tfc = service.get_ft_filter()
        print(f"set:                   force {_vec(ffc, 1)} torque {_vec(tfc, 1)}")
    _print_stats(f"published wrench ({args.duration:g} s)", session.run_for(args.duration))
    return 0


def _log(session: Session, args) -> int:
    service, path = session.service, str(args.file)
    if args.world:
        service.log_frame(WORLD_FRAME, path, args.decimation)
    else:
        service.log(path, args.decimation)
    try:
        session.run_for(args.duration)
    finally:
        service.log_stop()
    missed, total = service.log_info()
    print(
        f"logged {total - missed} of {total} entries to {path} ({missed} missed, decimation {args.decimation})"
    )
    return 0


ACTIONS = {"tare": _tare, "hz": _hz, "filter": _filter, "log": _log}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ft",
        help="the F/T sensor services: tare, hz, filter, log",
        description="The F/T sensor services over any backend; the arm holds its position.",
    )
    actions = parser.add_subparsers(dest="action", metavar="action", required=True)

    def action(name: str, help: str, duration: float) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help, description=help)
        p.add_argument(
            "--duration", type=_positive, default=duration, help=f"seconds (default {duration:g})"
        )
        p.add_argument(
            "--world", action="store_true", help="a world-aligned frame, not the sensor frame"
        )
        p.add_argument("--seed", type=int, default=0, help="sim seed")
        p.add_argument("--scene", default=None, help="sim scene")
        add_backend_options(p)
        p.set_defaults(func=run_ft)
        return p

    tare = action(
        "tare", "zero the readings over --duration s of samples; print offset and noise", 0.5
    )
    tare.add_argument("--settle", type=_positive, default=0.5, help="seconds of readings after")
    hz = action("hz", "measure the sample rate (and set the device's with --set HZ)", 1.5)
    hz.add_argument("--set", type=_positive, default=None, metavar="HZ")
    filt = action("filter", "show or set the low-pass cut-offs (Hz per axis, 0 = off)", 1.0)
    filt.add_argument(
        "--force", type=float, nargs="+", default=None, metavar="HZ", help="1 or 3 values"
    )
    filt.add_argument(
        "--torque", type=float, nargs="+", default=None, metavar="HZ", help="1 or 3 values"
    )
    log = action("log", "log the published wrench to a CSV file", 2.0)
    log.add_argument("file", type=pathlib.Path, help="CSV file to write")
    log.add_argument("--decimation", type=int, default=1, help="every n-th sample")
