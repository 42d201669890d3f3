"""``twin emulate``: start the device emulators of a hardware configuration and print their ports.

    twin emulate [--source ideal|sim] [--config FILE] [--link-dir DIR] [--seed N] [--duration S]

Each device answers on a pseudo-terminal with a stable name (a symlink in ``--link-dir``, a fresh
temporary directory by default); point ``SerialRobot`` (or any serial tool) at them. Runs until
Ctrl-C (or ``--duration`` seconds). Wired into the ``twin`` command as ``hardware.emulator.cli.main``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from twin.hardware.config import load_config


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="twin emulate", description="Start the serial device emulators."
    )
    p.add_argument(
        "--source", choices=("ideal", "sim"), default="ideal", help="physics behind the devices"
    )
    p.add_argument("--config", default=None, help="hardware TOML (default: the shipped example)")
    p.add_argument(
        "--link-dir", default=None, help="directory for the port symlinks (default: a temp dir)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the sim and of fault injection")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--gui", action="store_true", help="show the PyBullet GUI (sim source)")
    p.add_argument(
        "--corrupt-rate", type=float, default=0.0, help="byte corruption probability on every port"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from twin.hardware.emulator.sources import IdealSource, make_sim_source
    from twin.hardware.emulator.stack import EmulatorStack

    try:
        config = load_config(args.config)
    except ValueError as e:
        print(f"twin emulate: {e}", file=sys.stderr)
        return 2
    if args.source == "sim":
        source = make_sim_source(seed=args.seed, gui=args.gui)
    else:
        from twin.kinematics import ArmModel

        model = ArmModel.default()
        source = IdealSource(
            model.home_q, effort_limits=model.effort_limits, sinc_length=config.ft.sinc_length
        )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    sys.setswitchinterval(0.0005)  # this process is all I/O threads: switch promptly
    with EmulatorStack(config, source, link_dir=args.link_dir, seed=args.seed) as stack:
        for faults in stack.faults.values():
            faults.set(corrupt_rate=args.corrupt_rate)
        for name, path in stack.ports.items():
            print(f"{name:10s} {path} -> {stack.port(name).pts_name}")
        print(f"source: {args.source}; ready (Ctrl-C to stop)", flush=True)
        stop.wait(args.duration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
