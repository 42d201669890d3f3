"""What the subcommands share: the argument parser class, the backend options and opening the
robot they select.

    def add_parser(subparsers):
        parser = subparsers.add_parser("run", help=...)
        add_backend_options(parser)               # --backend, --config, --emulate
        parser.set_defaults(func=run)

    def run(args):
        with open_robot_from_args(args, seed=args.seed, scene=args.scene) as robot:
            ...

The backend follows ``twin.backends``' precedence rule (``--backend``, then ``$TWIN_BACKEND``,
then sim; ``--config``, then ``$TWIN_HARDWARE_CONFIG``); ``--emulate`` starts the serial device
emulators in this process for the run and stops them after. Keyword arguments of
``open_robot_from_args`` are sim options (seed, scene, ...), ignored on hardware.
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from twin import backends, sessions
from twin.robot import Robot


class UsageError(ValueError):
    """A command-line value the user must fix; the message says what was expected."""


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line on stderr (exit code 2), without the
    usage block: ``twin run: error: argument --policy: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def choice(name: str, choices: Sequence[str], what: str) -> str:
    """``name`` if it is one of ``choices``, else ``UsageError`` naming the closest and all."""
    if name in choices:
        return name
    raise UsageError(
        f"unknown {what} {name!r}{backends.closest(name, list(choices))}; expected one of: "
        f"{', '.join(choices)}"
    )


def _backend_name(text: str) -> str:
    try:
        return backends.resolve_backend(text)
    except backends.BackendError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def existing_file(text: str) -> pathlib.Path:
    """argparse type: the path of an existing file."""
    path = pathlib.Path(text)
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text} {what}; expected an existing file")
    return path


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    """``--backend``, ``--config`` and ``--emulate`` (see the module doc)."""
    group = parser.add_argument_group("backend")
    group.add_argument(
        "--backend",
        type=_backend_name,
        default=None,
        metavar="{" + ",".join(backends.BACKENDS) + "}",
        help=f"robot backend (default: ${backends.BACKEND_ENV_VAR}, else sim)",
    )
    group.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help=f"hardware TOML naming the ports (default: ${backends.HARDWARE_CONFIG_ENV_VAR}; "
        "`twin emulate` writes one)",
    )
    group.add_argument(
        "--emulate",
        action="store_true",
        help="hardware backend: run the serial device emulators (sim physics) in this process "
        "for the run, on the ports of --config (default: the shipped example)",
    )
    group.add_argument(
        "--record",
        type=_recording_path,
        default=None,
        metavar="FILE.mcap",
        help="record the run (every read and write, what the layers publish) to an MCAP file; "
        "twin replay replays it",
    )


def _recording_path(text: str) -> pathlib.Path:
    """argparse type: a ``.mcap`` file to write, in an existing folder."""
    path = pathlib.Path(text)
    if path.suffix != ".mcap":
        raise argparse.ArgumentTypeError(f"{text}: expected a file name ending in .mcap")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: the folder {path.parent} does not exist")
    return path


def recorded(robot: Robot, args: argparse.Namespace, backend: str, sim_options: dict) -> Robot:
    """``robot`` recorded to ``--record`` (``twin.record``) with what replay needs, or ``robot``
    itself without the option. The recording closes with the robot."""
    path = getattr(args, "record", None)
    if path is None:
        return robot
    from twin.record import RecordingRobot, plain_options, versions

    plain = plain_options(sim_options)
    metadata = {
        "backend": backend,
        "robot_options": plain if backend == "sim" else {},
        "scene": plain.get("scene"),
        "seed": plain.get("seed"),
        "command": getattr(args, "command", None),
        "versions": versions(),
    }
    try:
        recording = RecordingRobot(robot, path, metadata=metadata)
    except OSError as e:  # the file cannot take even its header (a full disk): name it
        raise OSError(e.errno, e.strerror, str(path)) from e
    recording.subscribe_layers()
    return recording


@contextlib.contextmanager
def backend_session(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """``{"backend": name, "config": ...}`` for ``open_robot`` from the backend options, with
    the emulators running during the block if ``--emulate`` (``twin.sessions.backend_session``)."""
    with sessions.backend_session(
        getattr(args, "backend", None),
        config=getattr(args, "config", None),
        emulate=getattr(args, "emulate", False),
        seed=getattr(args, "seed", 0) or 0,
        config_how="--config FILE",
    ) as options:
        yield options


@contextlib.contextmanager
def open_robot_from_args(args: argparse.Namespace, **sim_options: Any) -> Iterator[Robot]:
    """The robot the backend options select, closed (the arm held, its ports closed) when the
    block ends; ``sim_options`` (seed, scene, ...) apply on the sim only. A scene is checked
    first (a misspelt name is refused before any backend starts)."""
    if sim_options.get("scene") is not None:
        from twin.scenes import load_scene

        load_scene(sim_options["scene"])
    with (
        backend_session(args) as options,
        backends.open_robot(**options, sim_options=sim_options) as robot,
        recorded(robot, args, options["backend"], sim_options) as run,
    ):
        yield run


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "") -> None:
    """A fixed-width table on stdout, columns as wide as their widest cell."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    print(indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for row in cells:
        print(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
