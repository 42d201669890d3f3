"""The first cause is the one shown (issue 31, item 14): a command that fails reports its first
error in its closing line, with what followed, in order; ``--debug`` shows the tracebacks.

Before the fix a run whose servo went silent ended with only the ``ParkError`` line; the real
first error (``DeviceFaultError: joint readings stale ... no status packet from servo 1``)
showed only with ``--debug``. Here a real ``twin.cli.main`` in a subprocess
(``cli_signal_helper.py fail --when stale``: a ``SerialRobot`` on in-process emulators, servo 1
silenced by their fault injection), and the closing-line pieces on real values."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys

import pytest
from cli_helpers import TWIN, clean_env, stderr_lines
from cli_signal_helper import __file__ as HELPER
from cli_signal_helper import parked_servos
from twin.hardware.arm_bus import SAFE_MODE, ServoState

from twin.cli import closing
from twin.demo import STEP_NAMES
from twin.interrupts import held_signals

STALE = "twin fail: error: command refused: joint readings stale ("
PARK = "; then: SerialRobot.close(): the arm could not be left in its safe state"
#: The demo's file size limit (bytes): above its report's largest file, below its recording.
DEMO_FILE_LIMIT = 1_500_000


def _helper(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, HELPER, *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
        check=False,
    )


def test_a_device_fault_then_a_failed_park_shows_the_fault_first_then_the_park():
    done = _helper("fail", "--when", "stale")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr  # the first error's code: a device failed
    (line,) = stderr_lines(done.stderr)
    assert line.startswith(STALE), line
    assert "no status packet from servo 1 within 50.0 ms" in line.split(PARK)[0], line
    assert line.count(PARK) == 1, line
    parked = line.split(PARK)[1]
    assert "servo 1: torque no reply, mode no reply" in parked, line
    for pid in (2, 3, 4, 5, 6):  # the others were parked and read back
        assert f"servo {pid}: torque on, mode CURRENT_BASED_POSITION (5)" in parked, line


def test_an_error_line_says_how_the_servos_were_left_when_no_error_names_them():
    done = _helper("fail", "--when", "opened")
    assert done.returncode == 2, done.stderr
    (line,) = stderr_lines(done.stderr)
    assert line.startswith("twin fail: error: the helper failed on purpose with the arm open; "), (
        line
    )
    assert parked_servos(line) == {1, 2, 3, 4, 5, 6}, line


def test_debug_shows_both_tracebacks_in_order():
    done = _helper("--debug", "fail", "--when", "stale")
    assert done.returncode == 1, done.stderr
    err = done.stderr
    fault = err.index("twin.hardware.errors.DeviceFaultError: command refused: joint readings")
    park = err.index("twin.hardware.errors.ParkError: SerialRobot.close()")
    assert fault < err.index("During handling of the above exception") < park, err


def _chain() -> BaseException:
    try:
        try:
            raise KeyError("internal detail")
        except KeyError as e:
            raise ValueError("the first error") from e  # its message says the cause
    except ValueError:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            try:
                raise RuntimeError("the second error")
            except RuntimeError as second:
                return second
    raise AssertionError("unreachable")


def test_errors_in_order_puts_the_first_first_and_skips_interrupts_and_causes():
    errors = closing.errors_in_order(_chain())
    assert [str(e) for e in errors] == ["the first error", "the second error"]


class _Parked:
    def __init__(self, report):
        self.park_report = report


class _NoPark:
    pass


ON = ServoState(torque=1, mode=SAFE_MODE)
SILENT = ServoState(torque=None, mode=None)


@pytest.mark.parametrize(
    ("robots", "expected"),
    [
        ([], "no robot was opened"),
        ([_NoPark()], "the _NoPark was closed (it has no servos to park)"),
        (
            [_NoPark(), _Parked({1: ON, 2: ON})],
            "the servos were parked and read back (servos 1, 2: torque on, mode "
            "CURRENT_BASED_POSITION (5)), every port is closed",
        ),
        (
            [_Parked({1: ON, 2: SILENT, 3: ON})],
            "the servos were NOT parked: servos 1, 3: torque on, mode CURRENT_BASED_POSITION "
            "(5); servo 2: torque no reply, mode no reply",
        ),
        (
            [_Parked(None)],
            "the servos were NOT parked: no servo was read back (the park did not run)",
        ),
    ],
)
def test_the_closing_line_says_parked_only_when_every_servo_read_back_safe(robots, expected):
    assert closing.robots_left(robots) == expected
    assert "holds" not in closing.robots_left(robots)


def test_held_signals_delivers_the_first_one_after_the_block():
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda n, _f: got.append(n))
    try:
        with held_signals() as held:
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGINT)
            assert held == [signal.SIGTERM, signal.SIGINT]
            assert got == []  # held back during the block
            with held_signals() as inner:  # nested: the outer block holds
                signal.raise_signal(signal.SIGTERM)
            assert inner == [] and got == []
        assert got == [signal.SIGTERM]  # the first one, to the handler it was meant for
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_held_signals_leaves_an_ignored_signal_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with held_signals() as held:
            signal.raise_signal(signal.SIGINT)
        assert held == []
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_demo_prints_its_table_when_its_recording_fills_the_disk(tmp_path):
    """A disk that fills under ``twin demo --record`` (a file size limit in the child: writes
    past it fail with EFBIG, as a full disk's fail with ENOSPC): the demo runs to its end, prints
    its table and summary line, then the recording's error line, exit 2 (issue 31, item 9).
    Before, exit 2 and only the error line. The limit lets the report (figures, trace.npz,
    under 1 MB) through and stops the recording (about 3.6 MB)."""

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (DEMO_FILE_LIMIT, DEMO_FILE_LIMIT))

    recording = tmp_path / "demo.mcap"
    done = subprocess.run(
        [*TWIN, "demo", "--no-progress", "--record", str(recording), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=600,
        preexec_fn=limit_files,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, done.stderr
    (line,) = stderr_lines(done.stderr)
    assert line.startswith(f"twin demo: error: recording '{recording}': "), line
    assert "were not written (OSError: [Errno 27] File too large)" in line, line
    out = " ".join(done.stdout.split())  # the table, its cells folded over lines
    for name in STEP_NAMES:
        assert f"│ {name} " in out, done.stdout
    summary = rf"demo: \d+ of {len(STEP_NAMES)} steps ok(; failed: .*)?; stopped by an error: "
    assert re.search(summary + "the report in", out), done.stdout


def test_the_tests_read_the_closing_line_servo_by_servo():
    """``parked_servos`` (the tests' reader of closing lines) on lines ``robots_left`` made."""
    assert parked_servos(closing.robots_left([_Parked({1: ON, 2: ON, 3: ON})])) == {1, 2, 3}
    assert parked_servos(closing.robots_left([_Parked({1: ON, 2: SILENT})])) == set()
    assert parked_servos(closing.robots_left([])) == set()
