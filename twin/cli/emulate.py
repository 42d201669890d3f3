"""``twin emulate``: the serial device emulators (``twin.hardware.emulator.cli``), imported lazily."""

from __future__ import annotations

import argparse


def run_emulate(args: argparse.Namespace) -> int:
    """``twin emulate``: the serial device emulators (``hardware.emulator.cli``), imported lazily."""
    from twin.hardware.emulator.cli import main as emulate_main

    return int(emulate_main(args.emulator_args) or 0)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "emulate",
        add_help=False,
        help="start the serial device emulators on pseudo-terminals and print their ports "
        "(twin emulate --help for options)",
    )
    parser.set_defaults(func=run_emulate, emulator_args=[])
