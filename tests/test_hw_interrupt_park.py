"""Ctrl-C while a hardware robot is open, and its park cannot be verified: the ``ParkError``
replaces the interrupt (``docs/faults/serial.md``, "Ctrl-C or SIGTERM while the arm moves"). The
command says the arm was not left safe, exit code 1, never "the arm holds its position" with 130. A real
``twin.cli.main`` in a subprocess (``cli_signal_helper.py fail --when park``: a ``SerialRobot``
through ``open_robot`` on in-process emulators, servo 3 silenced by their fault injection) and a
real SIGINT once the robot is open."""

from __future__ import annotations

import signal

from cli_helpers import clean_env, stderr_lines
from cli_signal_helper import Helper


def test_an_unverified_park_after_ctrl_c_is_the_park_error_and_exit_code_1():
    h = Helper("park", clean_env())
    try:
        h.wait_for("running")  # the robot is open and servo 3 has gone silent
        h.proc.send_signal(signal.SIGINT)
        code, _, err = h.finish(timeout_s=120)
    finally:
        h.kill()
    assert "Traceback" not in err, err
    assert code == 1, err
    (line,) = stderr_lines(err)
    assert line.startswith(
        "twin fail: error: SerialRobot.close(): the arm could not be left in its safe state "
        "(every servo torque on, current-based position mode): "
    ), line
    assert "servo 3: torque no reply, mode no reply" in line, line
    for pid in (1, 2, 4, 5, 6):  # the others were parked and read back
        assert f"servo {pid}: torque on, mode CURRENT_BASED_POSITION (5)" in line, line
    assert line.endswith("(while stopping after an interrupt)"), line
    assert "interrupted" not in line.split(": error: ")[0]  # no "holds its position" claim
