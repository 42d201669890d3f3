"""``twin emulate``: the serial device emulators (``twin.hardware.emulator.cli``), imported lazily."""

from __future__ import annotations

import argparse


def run_emulate(args: argparse.Namespace) -> int:
    """``twin emulate``: run the emulators until Ctrl-C or ``--duration``."""
    from twin.hardware.emulator.cli import run

    return int(run(args) or 0)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from twin.hardware.emulator.cli import add_arguments

    parser = subparsers.add_parser(
        "emulate",
        help="start the serial device emulators on pseudo-terminals, print their ports and "
        "write a hardware TOML for them",
        description="Start the serial device emulators (DYNAMIXEL servo chain, Bota F/T sensor, "
        "WitMotion IMU) on pseudo-terminals, print their ports and write a hardware TOML that "
        "names them; then: twin demo --backend hardware --config <that file>.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run_emulate)
