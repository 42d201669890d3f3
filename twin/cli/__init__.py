"""The ``twin`` command: one ``argparse`` parser with a subcommand per job.

    twin demo            plan and execute over the scene, tare and weigh with the F/T sensor
    twin plan            plan around a scene to goals; the path as JSON and pictures
    twin run             run an ONNX policy through the controller to targets
    twin shadow          drive a backend and follow it with the live twin
    twin ft              the F/T sensor services: tare, hz, filter, log
    twin scenes          the shipped scenes
    twin bench           the benchmarks, in one table
    twin info            the arm model from the shipped URDF (joints, limits, home, TCP pose)
    twin emulate         the serial device emulators on pseudo-terminals
    twin replay          replay a recording in a fresh sim, report the divergence
    twin test            run regression scenario files on either backend

Each subcommand is a module of this package with an ``add_parser(subparsers)`` function that
declares its arguments and sets ``func`` to the function that runs it (``args -> exit code``);
add the module to ``SUBCOMMANDS``. Backend options: ``twin.cli.common``.

Errors are handled here, once, by type (``ERRORS``): bad input (an unknown name, a missing or
malformed file, a port that cannot be opened) is one line on stderr naming what was wrong and
what was expected, exit code 2; a device failure one line, exit code 1; anything else is a bug
and keeps its traceback. ``--debug`` shows the traceback of every error.
Ctrl-C (SIGINT, and SIGTERM likewise) closes every robot still open (the arm holds its
position, every port is closed), says so in one line and exits 130 (143 for SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings
from collections.abc import Sequence

from twin import backends
from twin.backends import EXIT_DEVICE, EXIT_INPUT
from twin.cli import bench, demo, emulate, ft, info, plan, replay, run, scenes, shadow, test
from twin.cli.common import ArgumentParser

#: Every subcommand's module, in the order ``twin --help`` lists them.
SUBCOMMANDS = (demo, plan, run, shadow, ft, test, replay, scenes, bench, info, emulate)

#: How errors are reported, first match wins: ``(module, class name, exit code, what was
#: expected)``, one line on stderr each. Only modules already imported are consulted (naming them
#: imports nothing). Exit code 2: bad input; 1: a device failed.
ERRORS = (
    ("twin.cli.common", "UsageError", EXIT_INPUT, ""),
    ("twin.backends", "BackendError", EXIT_INPUT, ""),
    ("twin.scenes", "SceneError", EXIT_INPUT, ""),
    ("twin.kinematics.urdf", "UrdfError", EXIT_INPUT, ""),
    ("twin.control.errors", "ModelLoadError", EXIT_INPUT, "; expected an ONNX policy file"),
    ("twin.control.errors", "ControlError", EXIT_INPUT, ""),
    ("twin.policies.evaluate", "PolicyNotFoundError", EXIT_INPUT, ""),
    ("twin.sensors.errors", "InvalidArgumentError", EXIT_INPUT, ""),
    ("twin.sensors.errors", "NoDeviceError", EXIT_INPUT, ""),
    ("twin.env.core", "EnvConfigurationError", EXIT_INPUT, ""),
    ("twin.record.writer", "RecordingError", EXIT_INPUT, ""),
    ("twin.scenario.format", "ScenarioError", EXIT_INPUT, ""),
    ("twin.scenario.expect", "ExpectationError", EXIT_INPUT, ""),
    *backends.BACKEND_ERRORS,
    ("twin.sensors.errors", "FtError", EXIT_DEVICE, ""),
)
EXIT_INTERRUPTED = 130


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C so that every robot is closed on the way out."""


def build_parser() -> argparse.ArgumentParser:
    """The ``twin`` argument parser with every subcommand."""
    parser = ArgumentParser(
        prog="twin", description="Simulation-first digital twin of a six-axis arm."
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    subparsers = parser.add_subparsers(dest="command", metavar="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(subparsers)
    for sub in subparsers.choices.values():  # `twin demo --debug` as well as `twin --debug demo`
        sub.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show the traceback of an error",
        )
    return parser


def classify(error: BaseException) -> tuple[int, str] | None:
    """``(exit code, one-line message)`` for an error the user can act on, else ``None``."""
    text = " ".join(str(error).split()) or type(error).__name__
    for module, name, code, hint in ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and isinstance(error, cls):
            return code, text + hint
    if isinstance(error, OSError) and error.filename is not None:  # a file that cannot be used
        return EXIT_INPUT, f"{error.filename}: {error.strerror or text}"
    return None


def _terminate(signum, frame) -> None:
    raise Terminated()


def _one_line_warning(prog: str):
    """``warnings.showwarning`` for the command: ``<prog>: warning: <message>`` on stderr."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"{prog}: warning: {message}", file=sys.stderr if file is None else file)

    return show


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``twin`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    prog = " ".join(
        ["twin", args.command, *([args.action] if getattr(args, "action", None) else [])]
    )
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started in the background: Ctrl-C
        signal.signal(signal.SIGINT, signal.default_int_handler)  # must still stop the arm
    previous_term = signal.signal(signal.SIGTERM, _terminate)
    if not args.debug:  # a warning (a slow control loop, say) is one line, as errors are
        warnings.showwarning = _one_line_warning(prog)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # the reader went away (``twin info | head``): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt as interrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup
        backends.close_open_robots()
        what = "terminated" if isinstance(interrupt, Terminated) else "interrupted"
        print(f"{prog}: {what}: the arm holds its position, every port is closed", file=sys.stderr)
        if args.debug:
            raise
        return EXIT_INTERRUPTED + (13 if isinstance(interrupt, Terminated) else 0)
    except Exception as error:
        verdict = None if args.debug else classify(error)
        if verdict is None:
            raise
        backends.close_open_robots()
        code, message = verdict
        print(f"{prog}: error: {message}", file=sys.stderr)
        return code
    finally:
        signal.signal(signal.SIGTERM, previous_term)
