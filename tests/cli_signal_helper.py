"""``twin`` with one more subcommand, ``fail``, for the signal tests (``test_cli_signals.py``):

    python tests/cli_signal_helper.py fail --when report    # fails; signalled while it reports
    python tests/cli_signal_helper.py fail --when cleanup   # signalled, then again while it cleans

Each stage prints a line on stdout and waits for a line on stdin, so a test signals the real
``twin.cli.main`` at a known point and lets it go on by writing a line (no sleeps):

- ``report``: prints ``running``, raises ``HeldError`` (a ``UsageError``: exit code 2) whose
  message, when ``main`` formats it for the report, prints ``reporting`` and waits;
- ``cleanup``: prints ``running`` and waits (the test's signal interrupts the wait), then its
  ``finally`` prints ``cleaning``, waits, and prints ``cleaned``.
"""

from __future__ import annotations

import argparse
import sys

import twin.cli
from twin.cli.common import UsageError


def _stage(name: str) -> None:
    print(name, flush=True)
    sys.stdin.readline()


class HeldError(UsageError):
    """A user error whose message is slow to give (it waits at the ``reporting`` stage)."""

    def __str__(self) -> str:
        _stage("reporting")
        return "the helper failed on purpose; expected nothing else"


def run(args: argparse.Namespace) -> int:
    if args.when == "report":
        print("running", flush=True)
        raise HeldError()
    try:
        _stage("running")
        return 0
    finally:
        _stage("cleaning")
        print("cleaned", flush=True)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("fail", help="fail on purpose (signal tests)")
    parser.add_argument("--when", choices=("report", "cleanup"), required=True)
    parser.set_defaults(func=run)


if __name__ == "__main__":
    twin.cli.SUBCOMMANDS = (*twin.cli.SUBCOMMANDS, sys.modules[__name__])
    raise SystemExit(twin.cli.main())
