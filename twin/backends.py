"""The sim-to-real switch: ``open_robot("sim" | "hardware", ...)``.

This is the only module of ``twin`` that names the backends, and it imports them lazily, so
everything above the robot interface runs unchanged on either one:

    with open_robot("sim", seed=1) as robot: ...
    with open_robot("hardware", config="arm.toml") as robot: ...
    with open_robot(sim_options={"scene": "table"}) as robot: ...   # $TWIN_BACKEND, else sim

One precedence rule for every choice: an explicit argument, then the environment variable, then
the default. The backend: ``backend=`` (the CLI's ``--backend``), then ``$TWIN_BACKEND``, then
``"sim"``. The hardware configuration: ``config=`` (``--config``), then
``$TWIN_HARDWARE_CONFIG``; there is no default (a real arm's ports must be named). An unknown
value is a ``BackendError`` listing the choices.

``emulated_hardware()`` starts the serial device emulators in this process and yields a hardware
configuration whose ports are theirs, so ``open_robot("hardware", config=...)`` drives them.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterator
from typing import Any

from twin.interrupts import held_signals
from twin.names import closest
from twin.robot import Robot

BACKENDS = ("sim", "hardware")
#: Environment variable that selects the backend when none is given (default "sim").
BACKEND_ENV_VAR = "TWIN_BACKEND"
#: Environment variable naming the hardware TOML file when no config is given.
HARDWARE_CONFIG_ENV_VAR = "TWIN_HARDWARE_CONFIG"
#: Sources of physics behind the device emulators: the PyBullet sim (gravity, the same arm the
#: sim backend runs) or an ideal model (independent joints, no gravity).
EMULATOR_SOURCES = ("sim", "ideal")

#: Exit codes of the CLI: bad input (a wrong configuration, a port that is not there) and a device
#: that failed (no answer in time, a lost link, a fault).
EXIT_INPUT, EXIT_DEVICE = 2, 1
#: How the CLI reports the backends' exceptions, first match wins: ``(module, class name, exit
#: code, what was expected)``, each in one line. Only modules already imported are consulted, so
#: naming them here imports nothing.
BACKEND_ERRORS = (
    ("twin.hardware.errors", "ReplyTimeoutError", EXIT_DEVICE, ""),
    ("twin.hardware.errors", "DisconnectedError", EXIT_DEVICE, ""),
    ("twin.hardware.errors", "InvalidArgumentError", EXIT_INPUT, ""),  # ConfigError included
    (
        "twin.hardware.errors",
        "TransportError",
        EXIT_INPUT,
        "; expected the ports of the hardware TOML to be there (run `twin emulate`, or pass "
        "--emulate, to stand the emulators in for the arm)",
    ),
    ("twin.hardware.errors", "HardwareError", EXIT_DEVICE, ""),
)


_open_robots: weakref.WeakSet[Robot] = weakref.WeakSet()
_trackers: list[list[Robot]] = []  # the lists of ``tracking()`` blocks under way


class BackendError(ValueError):
    """A backend choice is wrong or incomplete; the message says what was expected."""


def resolve_backend(backend: str | None = None) -> str:
    """The backend to use: ``backend`` if given, else ``$TWIN_BACKEND``, else ``"sim"``.

    ``BackendError`` (naming where the value came from and the choices) for an unknown name.
    """
    name, origin = backend_origin(backend)
    if name not in BACKENDS:
        where = f" in {BACKEND_ENV_VAR}" if origin == BACKEND_ENV_VAR else ""
        raise BackendError(
            f"unknown backend {name!r}{where}{closest(name, BACKENDS)}; "
            f"expected one of: {', '.join(BACKENDS)}"
        )
    return name


def backend_origin(backend: str | None = None) -> tuple[str, str]:
    """``(name, origin)`` by the precedence rule, unchecked: origin ``"argument"``,
    ``BACKEND_ENV_VAR`` or ``"default"``."""
    if backend is not None:
        return backend, "argument"
    if os.environ.get(BACKEND_ENV_VAR):
        return os.environ[BACKEND_ENV_VAR], BACKEND_ENV_VAR
    return "sim", "default"


def resolve_hardware_config(config: Any = None, *, how: str = "config=<path>") -> Any:
    """The hardware configuration: ``config`` (a path or a ``HardwareConfig``) if given, else
    ``$TWIN_HARDWARE_CONFIG``; ``BackendError`` if neither (``how`` names the argument to pass
    in the message, e.g. ``--config FILE``). Whether the file exists is the backend's check."""
    if config is not None and config != "":
        return config
    if os.environ.get(HARDWARE_CONFIG_ENV_VAR):
        return os.environ[HARDWARE_CONFIG_ENV_VAR]
    raise BackendError(
        f"backend 'hardware' needs its configuration: pass {how} or set "
        f"{HARDWARE_CONFIG_ENV_VAR} (a hardware TOML file naming the ports; `twin emulate` "
        "writes one for the emulators)"
    )


def open_robot(
    backend: str | None = None,
    *,
    config: Any = None,
    sim_options: dict[str, Any] | None = None,
    **options: Any,
) -> Robot:
    """Open a robot on ``backend`` ("sim" or "hardware"; default ``$TWIN_BACKEND``, else "sim").

    ``config``: the hardware configuration (path of the TOML file or a ``HardwareConfig``;
    default ``$TWIN_HARDWARE_CONFIG``); given with the sim backend it is an error.
    ``sim_options``: what the sim must simulate (``seed``, ``scene``, ``gui``, ...), ignored on
    hardware (a real arm has no seed and its scene is the room it stands in), so callers pass them
    without asking which backend runs. ``options`` go to the backend's constructor as they are:
    ``sim.PyBulletRobot`` or ``hardware.SerialRobot`` (``model``, ``clock``).
    """
    name = resolve_backend(backend)
    if name == "sim" and config is not None:
        raise _not_hardware(f"a hardware configuration ({config}) was given", backend)
    with held_signals() as held:  # a robot half connected could not be closed
        robot = _construct(name, config, sim_options, options)
        _open_robots.add(robot)
        for opened in _trackers:
            opened.append(robot)
        if held:  # a signal while connecting: the robot is whole, so close it properly
            robot.close()
    if held:  # the signal's own handler did not stop the caller (ignored, or only counted)
        raise KeyboardInterrupt
    return robot


@contextlib.contextmanager
def tracking() -> Iterator[list[Robot]]:
    """Every robot ``open_robot`` opens during the block, in order, kept referenced until the
    block ends (the CLI reads how each one was closed)."""
    opened: list[Robot] = []
    _trackers.append(opened)
    try:
        yield opened
    finally:
        _trackers.remove(opened)


def _construct(name: str, config: Any, sim_options: dict | None, options: dict) -> Robot:
    if name == "sim":
        from twin.sim import PyBulletRobot

        return PyBulletRobot(**{**(sim_options or {}), **options})
    from twin.hardware import SerialRobot

    return SerialRobot(resolve_hardware_config(config), **options)


def _not_hardware(what: str, backend: str | None) -> BackendError:
    """``BackendError``: ``what`` needs the hardware backend, but the sim was chosen."""
    origin = backend_origin(backend)[1]
    chosen = {"argument": "", BACKEND_ENV_VAR: f" (from {BACKEND_ENV_VAR})"}.get(
        origin, " (the default)"
    )
    return BackendError(
        f"{what} but the backend is 'sim'{chosen}; choose the hardware backend "
        f"(--backend hardware, backend='hardware' or {BACKEND_ENV_VAR}=hardware)"
    )


def close_open_robots() -> int:
    """Close every robot ``open_robot`` opened that is still referenced (the arm holds its
    position on close, every port is closed); safe to repeat. Returns how many were closed."""
    robots = list(_open_robots)
    for robot in robots:
        with contextlib.suppress(Exception):  # closing after an interrupt: close the rest
            robot.close()
    _open_robots.clear()
    return len(robots)


def resolve_options(
    backend: str | None = None,
    *,
    config: Any = None,
    emulate: bool = False,
    config_how: str = "config=<path>",
) -> dict[str, Any]:
    """The arguments of ``open_robot`` for a run, by the precedence rule: ``{"backend": name,
    "config": ...}`` (``config`` is ``None`` on the sim; with ``emulate`` it is left to the
    emulators). ``BackendError`` for a configuration or ``emulate`` given to the sim, or a
    hardware run without a configuration (``config_how`` names how to pass one)."""
    name = resolve_backend(backend)
    if name == "sim":
        if config is not None:
            raise _not_hardware(f"a hardware configuration ({config}) was given", backend)
        if emulate:
            raise _not_hardware("the emulators stand in for the hardware", backend)
        return {"backend": name, "config": None}
    if emulate:
        return {"backend": name, "config": config}
    return {"backend": name, "config": resolve_hardware_config(config, how=config_how)}
