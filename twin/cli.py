"""The ``twin`` command: one ``argparse`` parser with a subcommand per job.

    twin info            the arm model from the shipped URDF (joints, limits, home, TCP pose)

Each subcommand is a ``_add_<name>(subparsers)`` function that declares its arguments and sets
``func`` to the function that runs it (``args -> exit code``); add one to ``_SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
from collections.abc import Callable, Sequence

import numpy as np

from twin.kinematics import ArmModel
from twin.spatial import SE3


def _fmt_row(values: Sequence[object], widths: Sequence[int]) -> str:
    return "  ".join(str(v).ljust(w) for v, w in zip(values, widths)).rstrip()


def _vector(values: np.ndarray, digits: int) -> str:
    return "[" + ", ".join(f"{v:.{digits}f}" for v in values) + "]"


def run_info(args: argparse.Namespace) -> int:
    """Print the arm model: joints with limits, home configuration and TCP pose, masses."""
    model = ArmModel.default() if args.urdf is None else ArmModel.from_urdf(args.urdf)
    out = sys.stdout
    print(f"arm model: {model.robot.name} ({model.urdf_path})", file=out)
    print(f"\njoints ({model.n_joints}, revolute; limits from the URDF):", file=out)
    headers = [
        "joint",
        "lower deg",
        "upper deg",
        "lower rad",
        "upper rad",
        "velocity rad/s",
        "effort N m",
    ]
    rows = [
        [
            name,
            f"{np.degrees(lo):.3f}",
            f"{np.degrees(hi):.3f}",
            f"{lo:.6f}",
            f"{hi:.6f}",
            f"{vel:.4g}",
            f"{eff:.4g}",
        ]
        for name, lo, hi, vel, eff in zip(
            model.joint_names, model.lower, model.upper, model.velocity_limits, model.effort_limits
        )
    ]
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    print("  " + _fmt_row(headers, widths), file=out)
    for row in rows:
        print("  " + _fmt_row(row, widths), file=out)

    home = model.home_q
    print("\nhome configuration:", file=out)
    print(f"  q deg = {_vector(np.degrees(home), 3)}", file=out)
    print(f"  q rad = {_vector(home, 6)}", file=out)
    if model.has_analytic_ik:
        flags = ", ".join(f"{int(f):+d}" for f in model.posture(home))
        print(f"  posture (shoulder, elbow, wrist) = ({flags})", file=out)

    base_T_tcp = SE3.from_matrix(model.fk(home, "tcp"))
    print("\nhome TCP pose (base frame):", file=out)
    print(f"  [px, py, pz, qw, qx, qy, qz] = {_vector(base_T_tcp.pose7(), 6)}", file=out)
    print(
        f"  RPY deg (Z-Y-X: roll, pitch, yaw) = {_vector(np.degrees(base_T_tcp.rotation.rpy()), 3)}",
        file=out,
    )

    print(f"\nlinks ({len(model.link_names)}), total mass {model.total_mass:.3f} kg:", file=out)
    width = max(len(n) for n in model.link_names)
    for name in model.link_names:
        print(f"  {name.ljust(width)}  {model.link_mass(name):.3f} kg", file=out)
    ik = "closed form (spherical wrist)" if model.has_analytic_ik else model.analytic_ik_reason
    print(f"\ninverse kinematics: {ik}; numeric (damped least squares) always", file=out)
    return 0


def _add_info(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "info", help="print the arm model (joints, limits, home configuration, home TCP pose)"
    )
    parser.add_argument(
        "--urdf", type=pathlib.Path, default=None, help="a URDF other than the shipped arm"
    )
    parser.set_defaults(func=run_info)


def run_emulate(args: argparse.Namespace) -> int:
    """``twin emulate``: the serial device emulators (``hardware.emulator.cli``), imported lazily."""
    from twin.hardware.emulator.cli import main as emulate_main

    return int(emulate_main(args.emulator_args) or 0)


def _add_emulate(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "emulate",
        add_help=False,
        help="start the serial device emulators on pseudo-terminals and print their ports "
        "(twin emulate --help for options)",
    )
    parser.set_defaults(func=run_emulate, emulator_args=[])


def run_demo(args: argparse.Namespace) -> int:
    """``twin demo``: one pass through the product (``twin.demo``); exit 1 if a step failed."""
    from twin.demo import run_demo as demo

    options = {"config": args.config} if args.backend == "hardware" else {}
    steps = demo(args.backend, seed=args.seed, **options)
    failed = [s.name for s in steps if not s.ok]
    print(
        f"\ndemo: {len(steps) - len(failed)} of {len(steps)} steps ok"
        + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


def _add_demo(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="plan and execute collision-free motions, tare and read the F/T sensor"
    )
    parser.add_argument("--backend", choices=("sim", "hardware"), default="sim")
    parser.add_argument("--config", default=None, help="hardware TOML (backend hardware)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=run_demo)


#: Every subcommand's parser builder, in the order ``twin --help`` lists them.
_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_demo,
    _add_info,
    _add_emulate,
]


def build_parser() -> argparse.ArgumentParser:
    """The ``twin`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="twin", description="Simulation-first digital twin of a six-axis arm."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="command", required=True)
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``twin`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["emulate"]:  # every option after it belongs to the emulator's own parser
        return run_emulate(argparse.Namespace(emulator_args=argv[1:]))
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # the reader went away (``twin info | head``): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
