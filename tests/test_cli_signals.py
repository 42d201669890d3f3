"""Every way out of ``twin.cli.main`` is an exit code and a few clean lines, whatever signal
arrives when: a real ``main`` in a subprocess (``cli_signal_helper.py``: one more subcommand that
fails or cleans up on purpose, and waits at each stage for a line on stdin), real signals sent
once it has printed the stage's line. Before the fix a Ctrl-C while an error was being reported
escaped as a traceback (exit -2) and a second Ctrl-C could cut a cleanup short."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import threading
import time

import pytest
from cli_helpers import TWIN, clean_env, stderr_lines
from cli_signal_helper import Helper

ERROR_LINE = "twin fail: error: the helper failed on purpose; expected nothing else"
NOTE = (
    "twin fail: stopping: every robot is being closed (the arm parked, the ports closed); "
    "a signal cannot cut this short (SIGKILL can)"
)


@pytest.fixture
def helper():
    started: list[Helper] = []

    def start(when: str) -> Helper:
        started.append(Helper(when, clean_env()))
        return started[-1]

    yield start
    for h in started:
        h.kill()


def test_the_helper_fails_with_the_error_line_and_exit_code_2_when_left_alone(helper):
    h = helper("report")
    h.wait_for("reporting")
    h.go_on()
    code, _, err = h.finish()
    assert code == 2, err
    assert stderr_lines(err) == [ERROR_LINE]


@pytest.mark.parametrize(
    ("signum", "code", "what"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_signal_while_an_error_is_reported_ends_the_report_then_exits_130_or_143(
    helper, signum, code, what
):
    h = helper("report")
    h.wait_for("reporting")  # main is formatting the error's message
    h.proc.send_signal(signum)
    h.go_on()
    got, _, err = h.finish()
    assert "Traceback" not in err, err
    assert got == code, err
    assert stderr_lines(err) == [
        ERROR_LINE,
        f"twin fail: {what}: no robot was opened",
    ]


def test_a_second_ctrl_c_does_not_cut_the_cleanup_short(helper):
    h = helper("cleanup")
    h.wait_for("running")
    h.proc.send_signal(signal.SIGINT)  # the first: KeyboardInterrupt, the cleanup starts
    h.wait_for("cleaning")
    h.proc.send_signal(signal.SIGINT)  # the second, while the cleanup waits
    h.proc.send_signal(signal.SIGTERM)  # and a third, of the other kind
    h.go_on()
    code, out, err = h.finish()
    assert "Traceback" not in err, err
    assert out[-1] == "cleaned", out  # the cleanup ran to its end
    assert code == 130, err  # the first signal's code
    assert stderr_lines(err) == [
        NOTE,  # once, for the second signal
        "twin fail: interrupted: no robot was opened",
    ]


def test_a_closed_stdout_is_exit_code_0_without_a_traceback():
    twin = subprocess.Popen(
        [*TWIN, "info"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env()
    )
    first = twin.stdout.readline()  # read one line, then go away as `head -1` does
    twin.stdout.close()
    err = twin.stderr.read().decode()
    assert twin.wait(timeout=120) == 0, err
    assert first.startswith(b"arm model:")
    assert stderr_lines(err) == [], err


class _Stopped(KeyboardInterrupt):
    """Raised by the test's SIGTERM handler (as the command's raises ``Terminated``)."""


def _fds() -> set[str]:
    return {os.readlink(f) for f in pathlib.Path("/proc/self/fd").iterdir() if f.exists()}


@pytest.mark.skipif(not pathlib.Path("/proc/self/fd").exists(), reason="needs /proc")
def test_sigterm_while_a_hardware_robot_connects_parks_it_and_leaves_no_port_or_thread():
    """SIGTERM while ``open_robot`` sets the servos up (servo 3's first reply dropped by the
    emulators' fault injection, so the start-up waits and retries: the signal comes then) is
    held back until the robot is whole; then it is parked, read back and closed, and only then
    does the signal reach its handler. Before, SIGTERM was not held back (only SIGINT was): the
    servos were left unparked, two pty descriptors and two reader threads open."""
    from cli_signal_helper import emulators
    from twin.hardware.emulator import BUS

    from twin import backends

    def stop(_signum, _frame):
        raise _Stopped

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with contextlib.ExitStack() as stack, backends.tracking() as opened:
            emulated = stack.enter_context(emulators())
            bus = emulated.stack.faults[BUS]
            threads, fds = set(threading.enumerate()), _fds()
            bus.drop_next(3, 1)

            def signal_once_dropped():
                while bus.stats.frames_dropped == 0:
                    time.sleep(0.001)
                os.kill(os.getpid(), signal.SIGTERM)

            sender = threading.Thread(target=signal_once_dropped, daemon=True)
            sender.start()
            with pytest.raises(_Stopped):
                emulated.open_robot()
            sender.join(timeout=10)
            assert len(opened) == 1, "the signal cut the start-up short: a half-built robot"
            (robot,) = opened
            assert bus.stats.frames_dropped == 1  # the signal came while it connected
            assert sorted(robot.park_report) == [1, 2, 3, 4, 5, 6]
            assert all(state.safe for state in robot.park_report.values()), robot.park_report
            for _ in range(500):  # the reader threads end as their ports close
                if set(threading.enumerate()) <= threads | {sender}:
                    break
                time.sleep(0.01)
            assert set(threading.enumerate()) <= threads | {sender}
            assert _fds() == fds  # the robot's ports are closed
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["python", "-m", "twin", "run"], "twin"),
        (["python", "-X", "dev", "-W", "error", "-m", "twin.cli", "info"], "twin.cli"),
        (["python", "-mtwin", "info"], "twin"),
        (["python", "script.py", "-m", "twin"], None),  # a script's own arguments
        (["python", "-c", "import twin", "-m", "twin"], None),
        (["/venv/bin/twin", "run"], None),  # the console script: told by __main__'s file
    ],
)
def test_the_command_is_told_from_the_interpreter_arguments(argv, module):
    from twin.interrupts import _run_module

    assert _run_module(argv) == module
