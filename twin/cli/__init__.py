"""The ``twin`` command: one ``argparse`` parser with a subcommand per job.

    twin demo            plan and execute over the scene, tare and weigh with the F/T sensor
    twin info            the arm model from the shipped URDF (joints, limits, home, TCP pose)
    twin emulate         the serial device emulators on pseudo-terminals

Each subcommand is a module of this package with an ``add_parser(subparsers)`` function that
declares its arguments and sets ``func`` to the function that runs it (``args -> exit code``);
add the module to ``SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from twin.cli import demo, emulate, info, plan

#: Every subcommand's module, in the order ``twin --help`` lists them.
SUBCOMMANDS = (demo, plan, info, emulate)


def build_parser() -> argparse.ArgumentParser:
    """The ``twin`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="twin", description="Simulation-first digital twin of a six-axis arm."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``twin`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["emulate"]:  # every option after it belongs to the emulator's own parser
        return emulate.run_emulate(argparse.Namespace(emulator_args=argv[1:]))
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # the reader went away (``twin info | head``): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
