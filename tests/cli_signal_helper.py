"""``twin`` with one more subcommand, ``fail``, for the signal tests (``test_cli_signals.py``):

    python tests/cli_signal_helper.py fail --when report    # fails; signalled while it reports
    python tests/cli_signal_helper.py fail --when cleanup   # signalled, then again while it cleans
    python tests/cli_signal_helper.py fail --when park      # signalled while a robot is open
    python tests/cli_signal_helper.py fail --when stale     # a device fault, then a failed park
    python tests/cli_signal_helper.py fail --when opened    # an error while a robot is open

Each stage prints a line on stdout and waits for a line on stdin, so a test signals the real
``twin.cli.main`` at a known point and lets it go on by writing a line (no sleeps):

- ``report``: prints ``running``, raises ``HeldError`` (a ``UsageError``: exit code 2) whose
  message, when ``main`` formats it for the report, prints ``reporting`` and waits;
- ``cleanup``: prints ``running`` and waits (the test's signal interrupts the wait), then its
  ``finally`` prints ``cleaning``, waits, and prints ``cleaned``;
- ``park``: opens a hardware robot (``open_robot``) on the emulators, in this process (ideal
  source, no F/T sensor or IMU), silences servo 3 and prints ``running``, waiting: the signal's
  unwinding closes the robot, whose park cannot be verified (``ParkError``);
- ``stale``: as ``park`` but servo 1 goes silent while the arm holds and no signal comes: the
  stale-joints fault refuses a command (``DeviceFaultError``), then the close's park cannot
  read servo 1 back (``ParkError``): two errors, the first one first;
- ``opened``: as ``park`` but nothing is silenced: a ``UsageError`` while the robot is open,
  whose close parks the arm and reads it back.

``Helper`` (used by the tests) runs it and drives the stages.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import sys
from dataclasses import replace

import twin.cli
from twin.cli.common import UsageError

#: Cycles of ``stale`` before it gives up waiting for the stale-joints fault (it comes within
#: ``stale_fault_cycles`` failed reads: a few).
STALE_CYCLES = 200


#: A closing line's account of a park read back safe (``twin.cli.closing``), and one group of
#: servos in the same state within it.
PARKED = re.compile(r"the servos were parked and read back \((.*)\), every port is closed$")
SERVO_GROUP = re.compile(r"servos? ([\d, ]+): (.*)")
SAFE_STATE = "torque on, mode CURRENT_BASED_POSITION (5)"


def parked_servos(line: str) -> set[int]:
    """The servo ids that ``line`` says were parked and read back safe (torque on, current-based
    position mode; whatever else the read-back names after that), none if it says no park."""
    found = PARKED.search(line)
    if found is None:
        return set()
    ids: set[int] = set()
    for group in found.group(1).split("; "):
        servos = SERVO_GROUP.fullmatch(group)
        if servos is not None and servos.group(2).startswith(SAFE_STATE):
            ids |= {int(pid) for pid in servos.group(1).split(", ")}
    return ids


def _stage(name: str) -> None:
    print(name, flush=True)
    sys.stdin.readline()


class HeldError(UsageError):
    """A user error whose message is slow to give (it waits at the ``reporting`` stage)."""

    def __str__(self) -> str:
        _stage("reporting")
        return "the helper failed on purpose; expected nothing else"


class Emulated:
    """Emulators running in this process (ideal source, no F/T sensor or IMU, short reply
    timeouts): ``stack`` and ``open_robot()``, a hardware robot on them through ``open_robot``."""

    def __init__(self, stack, model) -> None:
        self.stack, self.model = stack, model

    def open_robot(self):
        from twin.backends import open_robot

        return open_robot("hardware", config=self.stack.robot_config(), model=self.model)


@contextlib.contextmanager
def emulators():
    """``Emulated`` for the block."""
    from twin.hardware.emulator import EmulatorStack, IdealSource
    from twin.hardware.emulator.testing import emulator_config

    from twin.kinematics import ArmModel

    model = ArmModel.default()
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False)
    config = replace(
        config,
        ft=replace(config.ft, enabled=False),
        imu=replace(config.imu, enabled=False),
        bus=replace(config.bus, attempts=2, reply_timeout_s=0.05),
    )
    with EmulatorStack(config, IdealSource(effort_limits=model.effort_limits)) as stack:
        yield Emulated(stack, model)


@contextlib.contextmanager
def _emulated_robot():
    """A hardware robot on ``emulators()``; yields ``(stack, robot)``."""
    with emulators() as emulated, emulated.open_robot() as robot:
        yield emulated.stack, robot


def _park_unverified() -> int:
    from twin.hardware.emulator import BUS

    with _emulated_robot() as (stack, robot):
        robot.step()
        stack.faults[BUS].silence(3)
        _stage("running")
    return 0


def _stale_then_park(servo: int = 1) -> int:
    """Servo ``servo`` goes silent while the arm holds: the stale-joints fault refuses the next
    command (``DeviceFaultError``), and the close it unwinds through cannot read that servo
    back (``ParkError``)."""
    from twin.hardware.emulator import BUS

    from twin.robot import JointCommand

    with _emulated_robot() as (stack, robot):
        hold = JointCommand(robot.read().q)
        robot.step()
        stack.faults[BUS].silence(servo)
        for _ in range(STALE_CYCLES):
            robot.write(hold)
            robot.step()
    return 0


def _fail_with_the_arm_open() -> int:
    with _emulated_robot() as (_, robot):
        robot.step()
        raise UsageError("the helper failed on purpose with the arm open")


def run(args: argparse.Namespace) -> int:
    if args.when == "opened":
        return _fail_with_the_arm_open()
    if args.when == "park":
        return _park_unverified()
    if args.when == "stale":
        return _stale_then_park()
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
    parser.add_argument(
        "--when", choices=("report", "cleanup", "park", "stale", "opened"), required=True
    )
    parser.set_defaults(func=run)


class Helper:
    """``cli_signal_helper.py fail --when WHEN`` running (``env``: its environment): wait for
    its stage lines, signal it, let it go on."""

    def __init__(self, when: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "fail", "--when", when],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.out: list[str] = []

    def wait_for(self, stage: str) -> None:
        for line in self.proc.stdout:  # bounded by the test's timeout (the process's own end)
            self.out.append(line.rstrip("\n"))
            if self.out[-1] == stage:
                return
        raise AssertionError(
            f"no {stage!r} line; stdout {self.out}, stderr {self.proc.stderr.read()}"
        )

    def go_on(self) -> None:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def finish(self, timeout_s: float = 60) -> tuple[int, list[str], str]:
        """Close stdin (every later wait returns at once); (exit code, stdout lines, stderr)."""
        out, err = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, self.out + out.splitlines(), err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    twin.cli.SUBCOMMANDS = (*twin.cli.SUBCOMMANDS, sys.modules[__name__])
    raise SystemExit(twin.cli.main())
