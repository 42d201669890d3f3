"""SIGINT and SIGTERM during one run of the ``twin`` command (``twin.cli``'s module doc).

Two phases. From the first line of the ``twin`` package (``twin.interrupts.hold_from_start``,
before numpy, gymnasium and the subcommands' imports), a signal is only recorded: nothing is
open yet, and an exception in the middle of an import would be a traceback. ``Signals`` takes
over in ``main``: a signal recorded before it stops the command before it starts; afterwards
the first signal raises ``KeyboardInterrupt`` (``Terminated`` for SIGTERM) in the main thread
unless ``shielded``, and every later one, and any while shielded, is only counted in
``received``. (Opening and closing a robot hold signals back themselves: ``twin.interrupts``.)
Before the first line of ``twin`` (the interpreter's own start-up, some tens of ms) a signal
has Python's default effect: nothing of ``twin`` runs yet.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from typing import NoReturn

from twin import interrupts

#: Exit code after SIGINT; SIGTERM's is 13 more (128 + the signal number, as a shell reports).
EXIT_INTERRUPTED = 130
#: The signals the command handles.
HANDLED = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwound like Ctrl-C so that every robot is closed on the way out."""


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


class Signals:
    """The signals of one run of ``main`` (module doc)."""

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.received: list[int] = []  # signal numbers, in order
        self.shielded = False
        self._previous: dict[int, object] = {}

    def install(self) -> None:
        """Handle both signals from now on; a signal recorded since ``hold_from_start`` counts
        as received, and the run is shielded at once (it stops before it starts)."""
        for signum in HANDLED:
            previous = signal.signal(signum, self._handle)
            self._previous[signum] = interrupts.early_previous.pop(signum, previous)
        if interrupts.early:
            self.received += interrupts.early
            interrupts.early.clear()
            self.shielded = True

    def restore(self) -> None:
        """Put back the handlers found (``main`` is over)."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def exit_process(self, code: int) -> NoReturn:
        """End the ``twin`` command with ``code`` once its outcome is said: a signal from now on
        ends it at once with the same code; the non-daemon threads are waited for and the exit
        functions run (``atexit``), as the interpreter would, the streams are flushed, and the
        process ends without the interpreter's finalisation, during which a signal would kill
        it (the handlers go back to the defaults there)."""
        for signum in HANDLED:
            signal.signal(signum, lambda _n, _f: _exit_now(code))
        for thread in threading.enumerate():  # as the interpreter would: wait for the others
            if not thread.daemon and thread is not threading.current_thread():
                thread.join()
        atexit._run_exitfuncs()
        _exit_now(code)

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
        """Whether the run's stop came from SIGTERM: the first signal received, else
        ``interrupt`` (the ``KeyboardInterrupt`` caught, if any)."""
        if self.received:
            return self.received[0] == signal.SIGTERM
        return isinstance(interrupt, Terminated)

    def exit_code(self, interrupt: BaseException | None = None) -> int | None:
        """130 (SIGINT) or 143 (SIGTERM) for the first signal of the run, or ``None``."""
        if interrupt is None and not self.received:
            return None
        return EXIT_INTERRUPTED + 13 * self.terminated(interrupt)


def _exit_now(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
