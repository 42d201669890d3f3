"""``twin demo``: one pass through the product (``twin.demo``)."""

from __future__ import annotations

import argparse

from twin.cli.common import add_backend_options, backend_session


def run_demo(args: argparse.Namespace) -> int:
    """``twin demo``: one pass through the product (``twin.demo``); exit 1 if a step failed."""
    from twin.demo import run_demo as demo

    with backend_session(args) as options:
        steps = demo(options.pop("backend"), seed=args.seed, **options)
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
    add_backend_options(parser)
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=run_demo)
