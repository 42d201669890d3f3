"""Work that a signal must not cut short: opening a robot (a half-connected one could not be
closed) and closing it (a half-done park leaves the servos as they were).

    with held_signals() as held:     # SIGINT and SIGTERM only counted during the block
        robot = connect()
        if held:                     # one came: close what was opened, still inside the block
            robot.close()
    # on the way out the first held signal goes to the handler it was meant for

``hold_from_start()``, the first thing ``import twin`` does, starts the same holding for the
``twin`` command's process only (``is_command``): from then on its signals are recorded in
``early`` until the command's own handlers take over (``twin.cli.signals``).

Main thread only (elsewhere, and outside the main interpreter, the block runs unprotected, as
Python delivers signals to the main thread anyway). A signal whose handler is ``SIG_IGN`` stays
ignored. Blocks may nest; only the outermost one delivers.
"""

from __future__ import annotations

import contextlib
import pathlib
import signal
import sys
import threading
from collections.abc import Iterator

#: The signals held back: Ctrl-C and the polite stop of a service manager or ``kill``.
HELD = (signal.SIGINT, signal.SIGTERM)

#: ``python -m`` module names that are the ``twin`` command, and its console script's name.
COMMAND_MODULES = ("twin", "twin.cli")
COMMAND_SCRIPT = "twin"
#: The interpreter's options that take the next argument as their value.
OPTIONS_WITH_VALUE = ("-X", "-W", "--check-hash-based-pycs")

_depth = 0  # how many blocks the main thread is inside
early: list[int] = []  # signals recorded since ``hold_from_start``, in order
early_previous: dict[int, object] = {}  # the handlers ``hold_from_start`` replaced


def is_command() -> bool:
    """Whether this process is the ``twin`` command (``python -m twin``, ``python -m twin.cli``
    or the console script), not a program that imports ``twin`` (a test, a notebook: their
    handlers stay theirs). Also right while ``python -m`` is still importing the package."""
    module = _run_module(getattr(sys, "orig_argv", sys.argv))
    if module is not None:
        return module in COMMAND_MODULES
    main = sys.modules.get("__main__")
    return pathlib.Path(getattr(main, "__file__", None) or "").name == COMMAND_SCRIPT


def _run_module(argv: list[str]) -> str | None:
    """The module of ``python [options] -m MODULE ...`` in the interpreter's ``argv``, or
    ``None`` (a script, ``-c``, the console script)."""
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, None)
        if arg.startswith("-m"):
            return arg[2:]
        if arg in OPTIONS_WITH_VALUE:
            next(args, None)
        elif arg == "-c" or not arg.startswith("-"):
            return None
    return None


def hold_from_start() -> None:
    """In the ``twin`` command's main thread only: record SIGINT and SIGTERM in ``early`` from
    now on (nothing is open yet; an exception in the middle of an import would be a traceback)
    until ``twin.cli.signals.Signals.install`` takes them over."""
    if early_previous or not is_command():
        return
    with contextlib.suppress(ValueError):  # not the main thread or interpreter
        for signum in HELD:
            early_previous[signum] = signal.signal(signum, lambda n, _f: early.append(n))


@contextlib.contextmanager
def held_signals() -> Iterator[list[int]]:
    """Hold back SIGINT and SIGTERM during the block; yields the list of signal numbers that
    arrived meanwhile (in order). When the outermost block ends (also by an exception) the first
    one is raised again (``signal.raise_signal``) to the handler it was meant for: the command's
    own handler, Python's ``KeyboardInterrupt`` or the default end of the process."""
    global _depth
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread() or _depth:
        yield held
        return
    previous: dict[int, object] = {}
    try:
        for signum in HELD:
            before = signal.getsignal(signum)
            if before is not None and before is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, lambda n, _f: held.append(n))
    except ValueError:  # not the main interpreter
        yield held
        return
    _depth += 1
    try:
        yield held
    finally:
        _depth -= 1
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            signal.raise_signal(held[0])
