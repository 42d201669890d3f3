"""``twin emulate``: start the device emulators of a hardware configuration, print their ports and
write a hardware TOML that points at them.

    twin emulate [--source sim|ideal] [--config FILE] [--link-dir DIR] [--write-config FILE]
                 [--print-config] [--seed N] [--duration S] [--corrupt-rate P] [--no-wire-time]
                 [--gui]

Each device answers on a pseudo-terminal with a stable name (a symlink in ``--link-dir``, a fresh
temporary directory by default). The physics behind them is the PyBullet sim by default (gravity
acts on the emulated arm, as on the real one); ``--source ideal`` is a model of independent joints
without gravity. The TOML written (``<link dir>/hardware.toml`` unless ``--write-config``) is the
configuration the emulators were started from with the emulated ports and emulator-friendly
timeouts put in, so the next command is ``twin demo --backend hardware --config <that file>``.
Runs until Ctrl-C (or ``--duration`` seconds). The servo chain models its wire at the bus baud
rate (``bus.emulate_wire_time``; ``--no-wire-time`` turns it off).

``start_emulators`` is the same start-up as a context manager, for ``--emulate`` runs in-process
(``twin.sessions.emulated_hardware``). There it can run lock-step (``lockstep=True``): the
emulators and the robot share a ``ManualClock``, so the physics advances one control period per
``robot.step()`` however loaded the machine is (the emulators share the process, and its threads
the interpreter, with the control loop); while nobody steps (bring-up, planning, a sensor
command) an ``IdlePump`` moves the clock on as real time would, so the devices keep streaming.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import fields, replace

from twin.hardware.config import HardwareConfig, default_config_path, load_config
from twin.hardware.errors import InvalidArgumentError

SOURCES = ("sim", "ideal")
CONFIG_FILE_NAME = "hardware.toml"


def probability(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability; expected 0 <= p <= 1")
    return value


def link_directory(text: str) -> pathlib.Path:
    """argparse type: a directory for the port links, created if its parent exists."""
    path = pathlib.Path(text)
    if path.is_dir():
        return path
    if path.exists() or not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is not a directory; expected a directory for the port links (an existing "
            "one, or a new one in an existing folder)"
        )
    try:
        path.mkdir()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot create {text}: {e.strerror}") from e
    return path


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The emulator's options on ``p`` (``twin emulate`` and ``python -m ...emulator.cli``)."""
    p.add_argument(
        "--source",
        choices=SOURCES,
        default="sim",
        help="physics behind the devices: the PyBullet sim (default; gravity) or an ideal "
        "model (independent joints, no gravity)",
    )
    p.add_argument("--config", default=None, help="hardware TOML (default: the shipped example)")
    p.add_argument(
        "--link-dir",
        type=link_directory,
        default=None,
        help="directory for the port symlinks, created if new (default: a temporary one)",
    )
    p.add_argument(
        "--write-config",
        type=pathlib.Path,
        default=None,
        metavar="FILE",
        help=f"write the hardware TOML for the emulated ports here "
        f"(default: {CONFIG_FILE_NAME} in the link directory)",
    )
    p.add_argument(
        "--print-config", action="store_true", help="also print that TOML on standard output"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the sim and of fault injection")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--gui", action="store_true", help="show the PyBullet GUI (sim source)")
    p.add_argument(
        "--no-wire-time",
        action="store_true",
        help="servo replies leave at once instead of taking their wire time at the bus baud "
        "rate (faster than any real bus; sets bus.emulate_wire_time = false)",
    )
    p.add_argument(
        "--corrupt-rate",
        type=probability,
        default=0.0,
        help="byte corruption probability on every port (0..1)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="twin emulate", description="Start the serial device emulators."
    )
    add_arguments(p)
    return p


def make_source(kind: str, config: HardwareConfig, *, seed: int = 0, gui: bool = False):
    """The physics source ``kind`` (one of ``SOURCES``) for the devices of ``config``."""
    from twin.hardware.emulator.sources import IdealSource, make_sim_source

    if kind == "sim":
        return make_sim_source(seed=seed, gui=gui)
    if kind == "ideal":
        from twin.kinematics import ArmModel

        model = ArmModel.default()
        return IdealSource(
            model.home_q, effort_limits=model.effort_limits, sinc_length=config.ft.sinc_length
        )
    raise InvalidArgumentError(f"unknown emulator source {kind!r}; expected one of {SOURCES}")


class IdlePump:
    """Lock-step with a pause: while no control loop moves the ``ManualClock`` (before the first
    ``robot.step()``: the clock has not moved for ``idle_s`` of wall time; after it: no cycle is
    running and none has for ``pause_s``, e.g. a long planner call or a sensor command), advance
    it and the physics by ``step_us`` every ``idle_s``, in a thread; stopped by ``close``. During
    a cycle and between the cycles of a running loop it does nothing, so each cycle moves the
    clock by exactly one period however long it takes in wall time (the robot marks its cycles
    on the clock: ``ManualClock.in_cycle``)."""

    def __init__(self, stack, step_us: int, idle_s: float = 0.01, pause_s: float = 0.25) -> None:
        self.stack, self.step_us, self.idle_s, self.pause_s = stack, int(step_us), idle_s, pause_s
        self.advances = 0  # how often the pump moved the clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="emu-idle-pump", daemon=True)
        self._thread.start()

    def _idle(self, before: int) -> bool:
        clock = self.stack.clock
        if clock.cycling:
            return False
        if clock.last_cycle_wall is None:  # no loop yet: the clock has not moved meanwhile
            return clock.now_us() == before
        return time.monotonic() - clock.last_cycle_wall >= self.pause_s

    def _run(self) -> None:
        clock, source = self.stack.clock, self.stack.source
        while True:
            before = clock.now_us()
            if self._stop.wait(self.idle_s):
                return
            with clock.advanced:  # no cycle can start between the check and the advance
                if not self._idle(before):
                    continue
                clock.advance(self.step_us)
                self.advances += 1
            source.advance_to(clock.now_us())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


@contextlib.contextmanager
def start_emulators(
    config: HardwareConfig | str | pathlib.Path | None = None,
    *,
    source: str = "sim",
    seed: int = 0,
    link_dir: str | pathlib.Path | None = None,
    gui: bool = False,
    corrupt_rate: float = 0.0,
    lockstep: bool = False,
) -> Iterator:
    """The ``EmulatorStack`` of ``config`` (a ``HardwareConfig``, a TOML path, or ``None`` for the
    shipped example) driven by ``source``; every emulator stops when the block ends. With
    ``lockstep`` its ``clock`` is a ``ManualClock`` to share with the robot (module doc)."""
    from twin.hardware.clock import ManualClock
    from twin.hardware.emulator.stack import EmulatorStack

    if not isinstance(config, HardwareConfig):
        config = load_config(config)
    physics = make_source(source, config, seed=seed, gui=gui)
    clock = ManualClock() if lockstep else None
    try:
        stack = EmulatorStack(config, physics, link_dir=link_dir, seed=seed, clock=clock)
    except BaseException:
        physics.close()
        raise
    with stack:
        for faults in stack.faults.values():
            faults.set(corrupt_rate=corrupt_rate)
        pump = IdlePump(stack, round(config.control_period_s * 1e6)) if lockstep else None
        try:
            yield stack
        finally:
            if pump is not None:
                pump.close()


#: TOML table of each part of a ``HardwareConfig`` (the top level is ``[robot]``).
_TABLES = {"robot": None, "bus": "bus", "ft_sensor": "ft", "imu": "imu", "reconnect": "reconnect"}


def hardware_toml(text: str, original: HardwareConfig, wanted: HardwareConfig) -> str:
    """``text`` (the TOML ``original`` was read from) with every scalar key on which ``wanted``
    differs set to ``wanted``'s value; comments and the other keys stay as they were."""
    for table, attr in _TABLES.items():
        old = original if attr is None else getattr(original, attr)
        new = wanted if attr is None else getattr(wanted, attr)
        for f in fields(new):
            value = getattr(new, f.name)
            if (
                f.name == "source"
                or value == getattr(old, f.name)
                or not isinstance(value, str | int | float | bool)
            ):
                continue
            text = _set_key(text, table, f.name, _toml_value(value))
    return text


def _toml_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # a TOML basic string: JSON escapes quotes, backslashes and control characters as TOML
        # does (\uXXXX), but not DEL; other characters stay as they are (UTF-8)
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return repr(value)


def _set_key(text: str, table: str, key: str, value: str) -> str:
    """Set ``key = value`` in ``[table]`` of the TOML ``text`` (added if absent)."""
    lines = text.splitlines()
    header = re.compile(rf"^\s*\[{re.escape(table)}\]\s*(#.*)?$")
    start = next((i for i, line in enumerate(lines) if header.match(line)), None)
    if start is None:
        return text.rstrip("\n") + f"\n\n[{table}]\n{key} = {value}\n"
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines)
    )
    assignment = re.compile(rf"^(\s*){re.escape(key)}\s*=")
    for i in range(start + 1, end):
        m = assignment.match(lines[i])
        if m:
            lines[i] = f"{m.group(1)}{key} = {value}"
            break
    else:
        lines.insert(start + 1, f"{key} = {value}")
    return "\n".join(lines) + "\n"


def write_hardware_toml(
    stack, config_path: str | pathlib.Path | None, out: pathlib.Path, *, gravity: bool = True
) -> str:
    """Write the TOML for ``stack``'s emulated ports to ``out`` (from ``config_path``, default the
    shipped example); returns its text. ``gravity``: whether the emulated arm feels gravity (the
    sim source does, the ideal one does not: its holds then need no gravity compensation). The
    file is checked by reading it back."""

    from twin.hardware.emulator.testing import emulator_config

    source = pathlib.Path(config_path) if config_path is not None else default_config_path()
    wanted = emulator_config(stack.robot_config())
    if not gravity:
        wanted = replace(wanted, hold_gravity_compensation=False)
    header = (
        f"# Written by `twin emulate` from {source.name} for the device emulators in "
        f"{stack.link_dir}:\n# the ports are theirs, and the timeouts suit emulators on a "
        "busy machine. Valid while they run.\n"
    )
    text = header + hardware_toml(source.read_text(encoding="utf-8"), stack.config, wanted)
    out.write_text(text, encoding="utf-8")
    back = load_config(out)
    if (back.bus.port, back.ft.port, back.imu.port) != (
        wanted.bus.port,
        wanted.ft.port,
        wanted.imu.port,
    ):
        raise InvalidArgumentError(
            f"{out}: the written configuration does not name the emulated ports"
        )
    return text


def run(args: argparse.Namespace) -> int:
    """Run the emulators as ``args`` say (``add_arguments``) until Ctrl-C or ``--duration``."""
    config = load_config(args.config)
    if args.no_wire_time:
        config = replace(config, bus=replace(config.bus, emulate_wire_time=False))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    sys.setswitchinterval(0.0005)  # this process is all I/O threads: switch promptly
    with start_emulators(
        config,
        source=args.source,
        seed=args.seed,
        link_dir=args.link_dir,
        gui=args.gui,
        corrupt_rate=args.corrupt_rate,
    ) as stack:
        for name, path in stack.ports.items():
            print(f"{name:10s} {path} -> {stack.port(name).pts_name}")
        out = args.write_config or stack.link_dir / CONFIG_FILE_NAME
        text = write_hardware_toml(stack, args.config, out, gravity=args.source == "sim")
        if args.print_config:
            print(text, end="")
        print(f"config     {out}")
        print(f"next: twin demo --backend hardware --config {out}")
        print(f"source: {args.source}; ready (Ctrl-C to stop)", flush=True)
        stop.wait(args.duration)
        sent = {name: stack.port(name).writes for name in stack.ports}
    print(
        "emulators stopped, ports closed; replies and frames sent: "
        + ", ".join(f"{name} {n}" for name, n in sent.items()),
        flush=True,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
