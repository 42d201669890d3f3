"""Runs on a backend the precedence rule chose, with the device emulators standing in for the
hardware when asked (``--emulate``): what the CLI opens robots with.

``twin.backends`` decides which backend and configuration a run uses; this module runs the
emulators around such a run. It sits above both (the emulators' physics is the sim, opened
through ``twin.backends``), so neither imports the other back.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

from twin.backends import HARDWARE_CONFIG_ENV_VAR, resolve_options

#: Thread switch interval (s) while emulators share this process: their I/O threads answer the
#: serial driver's threads promptly (as ``twin emulate`` does in its own process).
EMULATED_SWITCH_INTERVAL_S = 0.0005


@contextlib.contextmanager
def emulated_hardware(
    config: Any = None,
    *,
    source: str = "sim",
    seed: int = 0,
    link_dir: str | pathlib.Path | None = None,
    lockstep: bool = True,
) -> Iterator[dict[str, Any]]:
    """Start the serial device emulators of ``config`` (default ``$TWIN_HARDWARE_CONFIG``, else
    the shipped example) in this process, on pseudo-terminals, driven by ``source`` (one of
    ``EMULATOR_SOURCES``); stops every emulator on exit. Yields the hardware options of
    ``open_robot``: ``config``, the ``HardwareConfig`` with the emulated ports plugged in (and
    timeouts suited to emulators), and with ``lockstep`` (default) ``clock``, the clock the robot
    shares with the emulators: the physics then advances one period per ``robot.step()``
    whatever the machine's load (``twin.hardware.emulator.cli``)."""
    from twin.hardware.emulator.cli import start_emulators
    from twin.hardware.emulator.testing import emulator_config

    if config is None:
        config = os.environ.get(HARDWARE_CONFIG_ENV_VAR) or None
    interval = sys.getswitchinterval()
    sys.setswitchinterval(EMULATED_SWITCH_INTERVAL_S)
    try:
        with start_emulators(
            config, source=source, seed=seed, link_dir=link_dir, lockstep=lockstep
        ) as stack:
            options = {"config": _lockstep_config(stack.robot_config()) if lockstep else None}
            if lockstep:
                options["clock"] = stack.clock
            else:
                options["config"] = emulator_config(stack.robot_config())
            yield options
    finally:
        sys.setswitchinterval(interval)


def _lockstep_config(config: Any) -> Any:
    """``emulator_config`` of ``config`` for a lock-step run: a reply may wait for the physics to
    step, which virtual time does not mind (as the hardware-in-the-loop tests do)."""
    from dataclasses import replace

    from twin.hardware.emulator.testing import emulator_config

    config = emulator_config(config)
    return replace(config, bus=replace(config.bus, reply_timeout_s=2.0))


@contextlib.contextmanager
def backend_session(
    backend: str | None = None,
    *,
    config: Any = None,
    emulate: bool = False,
    seed: int = 0,
    config_how: str = "config=<path>",
) -> Iterator[dict[str, Any]]:
    """``resolve_options`` for the block; with ``emulate`` (hardware only) the device emulators
    run in this process while the block runs (``emulated_hardware``: the configuration, default
    ``$TWIN_HARDWARE_CONFIG`` else the shipped example, with their ports put in)."""
    options = resolve_options(backend, config=config, emulate=emulate, config_how=config_how)
    if not emulate:
        yield options
        return
    with emulated_hardware(options["config"], seed=seed) as emulated:
        yield {**options, **emulated}
