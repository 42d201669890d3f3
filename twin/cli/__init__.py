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
Ctrl-C (SIGINT, and SIGTERM likewise) stops the command, closes every robot it opened and says
in one closing line what is known of each (``twin.cli.closing``): "the servos were parked and
read back (servo 1: torque on, ...)" only when the park read every servo back safe, "the servos
were NOT parked: servo 3: torque no reply, ..." otherwise, "the PyBulletRobot was closed" for a
robot without servos, "no robot was opened" when none was; exit 130 (143 for SIGTERM).

Signals are handled from the first line of the ``twin`` package (``twin.interrupts``,
``twin.cli.signals``: one that arrives while the command is still importing stops it before it
starts) and cannot cut the way out
short: the first SIGINT or SIGTERM of a run raises ``KeyboardInterrupt`` in the main thread;
from then on, and from the moment the subcommand returns or fails, a signal only counts. Opening
a robot and closing it (its park) hold both signals back until they are done
(``twin.interrupts``). The unwinding (a robot's park, closing its ports), the error report and
the closing line then always finish; a second signal says once that it waits.
Every way out of ``main`` is an exit code and at most a few lines on stderr: 0 or the
subcommand's code; 2 or 1 for an error; 130 / 143 after a signal, also when the signal came
while an error was being reported (the error's line first, then the interrupted line); 0 for a
closed stdout (``twin info | head``). The first cause is the one shown: a command that fails
reports its errors in the order they happened, in one line (``error: <the first>; then: <what
followed>``, e.g. the stale-joints ``DeviceFaultError`` then the ``ParkError`` of the close it
led to), with the first one's exit code, and, when the run opened servos and no error names
their states already, how they were left ("; the servos were parked and read back (...)");
``--debug`` shows the traceback instead. An error
raised while the run unwinds after a signal replaces the interrupt: the cleanup did not end as
the interrupted line would promise (``ParkError``: the park is unverified), so it is reported
as that error, with its own exit code (1 for a device), and the line says it came after the
interrupt (``docs/faults/serial.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
import warnings
from collections.abc import Sequence

from twin import backends
from twin.backends import EXIT_DEVICE, EXIT_INPUT
from twin.cli import (
    bench,
    demo,
    emulate,
    ft,
    info,
    plan,
    replay,
    run,
    scenes,
    shadow,
    test,
)
from twin.cli.closing import after_errors, errors_in_order, robots_left
from twin.cli.common import ArgumentParser
from twin.cli.signals import Signals, _say
from twin.interrupts import is_command

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
    signals = Signals("twin")
    try:
        with backends.tracking() as robots:
            code = _run(list(sys.argv[1:] if argv is None else argv), signals, robots)
    finally:
        signals.restore()
    if is_command():  # the outcome is said: no late signal changes it (``exit_process``)
        signals.exit_process(code)
    return code


def _run(argv: list[str], signals: Signals, robots: list) -> int:
    """Parse ``argv``, run the subcommand and report how it ended (``main``). The handlers are
    installed first (also when started in the background, SIGINT ignored: Ctrl-C must still stop
    the arm) and shielded on the way out. ``robots``: every robot the run opens."""
    args, interrupt, code, errors = None, None, 0, []
    signals.install()
    if signals.received:  # a signal while the command was being imported: it does not start
        _say(_interrupted_line(signals, None, robots))
        return signals.exit_code()
    try:
        try:
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
        errors = errors_in_order(caught)  # raised while stopping (a park that failed)
        if getattr(args, "debug", False):
            _close(robots)
            _say(_interrupted_line(signals, interrupt, robots))
            raise
    except Exception as error:
        if getattr(args, "debug", False):
            raise
        if isinstance(error.__cause__, KeyboardInterrupt) and classify(error) is None:
            interrupt = error.__cause__  # the signal, turned into another error by the code it
        else:  # stopped (an extension module's import: "ImportError: initialization failed")
            errors = errors_in_order(error)
    closing = _close(robots)
    after = interrupt is not None or any(_after_interrupt(e) for e in errors)
    errors += closing
    if errors:
        code = _report(errors, signals.prog, after=after, servos=after_errors(robots, errors))
        if after:
            return code  # the cleanup did not end as an interrupted line would say
    signalled = signals.exit_code(interrupt)
    if signalled is None:
        return code
    _say(_interrupted_line(signals, interrupt, robots))
    return signalled


def _close(robots: list) -> list[Exception]:
    """Close every robot of the run still open (the park, read back; the ports); the errors
    that raised, in order. Then any robot opened outside the run (``close_open_robots``)."""
    errors = []
    for robot in robots:
        try:
            robot.close()
        except Exception as e:  # reported in the closing line
            errors.append(e)
    backends.close_open_robots()
    return errors


def _report(errors: list[BaseException], prog: str, *, after: bool, servos: str = "") -> int:
    """Report the run's ``errors`` (the first one first) in one line, with how the ``servos``
    were left if that is to be said, or the traceback of a bug among them (the chain shows them
    all); the exit code of the first one (1 for a bug)."""
    verdicts = [classify(e) for e in errors]
    if any(v is None for v in verdicts):  # a bug: its traceback, exit code 1 (as Python's own)
        with contextlib.suppress(OSError, ValueError):
            traceback.print_exception(errors[-1], file=sys.stderr)
        return 1
    message = "; then: ".join(text for _, text in verdicts) + f"; {servos}" * bool(servos)
    _say(f"{prog}: error: {message}" + " (while stopping after an interrupt)" * after)
    return verdicts[0][0]


def _interrupted_line(signals: Signals, interrupt: BaseException | None, robots: list) -> str:
    """The closing line after a signal: what is known of every robot the run opened."""
    what = "terminated" if signals.terminated(interrupt) else "interrupted"
    return f"{signals.prog}: {what}: {robots_left(robots)}"
