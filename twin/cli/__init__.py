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

Signals cannot cut the way out short (``_Signals``): the first SIGINT or SIGTERM of a run raises
``KeyboardInterrupt`` in the main thread; from then on, and from the moment the subcommand
returns or fails, a signal only counts. The unwinding (a robot's park, closing its ports), the
error report and the final line then always finish; a second signal says once that it waits.
Every way out of ``main`` is an exit code and at most a few lines on stderr: 0 or the
subcommand's code; 2 or 1 for an error (one line); 130 / 143 after a signal, also when the
signal came while an error was being reported (the error's line first, then the interrupted
line); 0 for a closed stdout (``twin info | head``). An error raised while the run unwinds after
a signal replaces the interrupt: the cleanup did not end as the interrupted line would promise
(``ParkError``: the park is unverified), so it is reported as that error, with its own exit code
(1 for a device), and the line says it came after the interrupt (``docs/faults/serial.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import traceback
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


def _one_line_warning(prog: str):
    """``warnings.showwarning`` for the command: ``<prog>: warning: <message>`` on stderr."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"{prog}: warning: {message}", file=sys.stderr if file is None else file)

    return show


class _Signals:
    """SIGINT and SIGTERM during one run of ``main`` (module doc): the first raises
    ``KeyboardInterrupt`` (``Terminated`` for SIGTERM) unless ``shielded``; every later one, and
    any while shielded, is only counted in ``received``."""

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.received: list[int] = []  # signal numbers, in order
        self.shielded = False
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def shield(self) -> None:
        """From now on a signal no longer raises: the run is on its way out."""
        self.shielded = True

    def _handle(self, signum: int, frame) -> None:
        self.received.append(signum)
        if not self.shielded:
            self.shielded = True  # the unwinding that starts here must not be cut short
            raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
        if len(self.received) == 2:  # say once why the signal did not stop the command at once
            _note(
                f"{self.prog}: stopping: every robot is being closed (the arm parked, the "
                "ports closed); a signal cannot cut this short (SIGKILL can)"
            )

    def terminated(self, interrupt: BaseException | None) -> bool:
        """Whether the run's stop came from SIGTERM: ``interrupt`` (the ``KeyboardInterrupt``
        caught, if any) or else the first signal received."""
        if interrupt is not None:
            return isinstance(interrupt, Terminated)
        return bool(self.received) and self.received[0] == signal.SIGTERM

    def exit_code(self, interrupt: BaseException | None = None) -> int | None:
        """130 (SIGINT) or 143 (SIGTERM) for the first signal of the run, or ``None``."""
        if interrupt is None and not self.received:
            return None
        return EXIT_INTERRUPTED + 13 * self.terminated(interrupt)


def _say(line: str) -> None:
    """One line on stderr (a closed stderr is ignored)."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _note(line: str) -> None:
    """One line on stderr from a signal handler: one ``os.write`` of the descriptor (no buffered
    writer that the interrupted code may be in the middle of), else ``_say``."""
    try:
        fd = sys.stderr.fileno()
    except (OSError, ValueError, AttributeError):  # a captured stderr (tests in one process)
        _say(line)
        return
    with contextlib.suppress(OSError):
        os.write(fd, (line + "\n").encode())


def _interrupted_line(signals: _Signals, interrupt: BaseException | None) -> str:
    what = "terminated" if signals.terminated(interrupt) else "interrupted"
    return f"{signals.prog}: {what}: the arm holds its position, every port is closed"


def _after_interrupt(error: BaseException) -> bool:
    """Whether ``error`` was raised while a ``KeyboardInterrupt`` unwound (its context chain)."""
    seen = error.__context__
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__context__
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``twin`` console script; returns the exit code (module doc)."""
    signals = _Signals("twin")
    try:
        return _run(list(sys.argv[1:] if argv is None else argv), signals)
    finally:
        signals.restore()


def _run(argv: list[str], signals: _Signals) -> int:
    """Parse ``argv``, run the subcommand and report how it ended (``main``). The handlers are
    installed first (also when started in the background, SIGINT ignored: Ctrl-C must still stop
    the arm) and shielded on the way out."""
    args, interrupt, code = None, None, 0
    try:
        try:
            signals.install()
            args = build_parser().parse_args(argv)
            signals.prog = " ".join(
                ["twin", args.command, *([args.action] if getattr(args, "action", None) else [])]
            )
            if not args.debug:  # a warning (a slow control loop, say) is one line, as errors are
                warnings.showwarning = _one_line_warning(signals.prog)
            code = int(args.func(args))
        finally:
            signals.shield()
    except BrokenPipeError:  # the reader went away (``twin info | head``): not an error
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt as caught:  # also raised by code that held a signal back
        interrupt = caught
        backends.close_open_robots()
        if getattr(args, "debug", False):
            _say(_interrupted_line(signals, interrupt))
            raise
    except Exception as error:
        if getattr(args, "debug", False):
            raise
        backends.close_open_robots()
        verdict = classify(error)
        if verdict is None:  # a bug: its traceback, exit code 1 (as Python's own)
            with contextlib.suppress(OSError, ValueError):
                traceback.print_exception(error, file=sys.stderr)
            code = 1
        else:
            code, message = verdict
            after = _after_interrupt(error)
            _say(
                f"{signals.prog}: error: {message}" + " (while stopping after an interrupt)" * after
            )
            if after:
                return code  # the cleanup did not end as the interrupted line would say
    signalled = signals.exit_code(interrupt)
    if signalled is None:
        return code
    _say(_interrupted_line(signals, interrupt))
    return signalled
