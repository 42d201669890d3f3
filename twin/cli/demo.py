"""``twin demo``: one pass through the product (``twin.demo``)."""

from __future__ import annotations

import argparse


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


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="plan and execute collision-free motions, tare and read the F/T sensor"
    )
    parser.add_argument("--backend", choices=("sim", "hardware"), default="sim")
    parser.add_argument("--config", default=None, help="hardware TOML (backend hardware)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=run_demo)
