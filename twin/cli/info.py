"""``twin info``: the arm model from the shipped URDF (or another one)."""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence

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


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "info",
        help="print the arm model (joints, limits, home configuration, home TCP pose)",
        description="Print the arm model read from the shipped URDF (or --urdf): its joints "
        "with their limits, the home configuration and the TCP pose at home.",
    )
    parser.add_argument(
        "--urdf", type=pathlib.Path, default=None, help="a URDF other than the shipped arm"
    )
    parser.set_defaults(func=run_info)
