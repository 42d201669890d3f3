"""The sim-to-real switch: ``open_robot("sim" | "hardware", ...)``.

This is the only module of ``twin`` that names the backends, and it imports them lazily, so
everything above the robot interface runs unchanged on either one:

    with open_robot("sim", seed=1) as robot: ...
    with open_robot("hardware", config="assets/hardware/arm.toml") as robot: ...
"""

from __future__ import annotations

import os
from typing import Any

from twin.robot import Robot

BACKENDS = ("sim", "hardware")
#: Environment variable that selects the backend when none is given (default "sim").
BACKEND_ENV_VAR = "TWIN_BACKEND"


def open_robot(backend: str | None = None, **options: Any) -> Robot:
    """Open a robot on ``backend`` ("sim" or "hardware"; default ``$TWIN_BACKEND`` or "sim").

    ``options`` go to the backend's constructor: ``sim.PyBulletRobot`` (``seed``, ``scene``,
    ``gui``, ...) or ``hardware.SerialRobot`` (``config``: path of the hardware TOML file).
    """
    name = backend or os.environ.get(BACKEND_ENV_VAR, "sim")
    if name == "sim":
        from twin.sim import PyBulletRobot

        return PyBulletRobot(**options)
    if name == "hardware":
        from twin.hardware import SerialRobot

        config = options.pop("config", None)
        if config is None:
            raise ValueError(
                "backend 'hardware' needs config=<path of the hardware TOML file> "
                "(see assets/hardware/README.md)"
            )
        return SerialRobot(config, **options)
    raise ValueError(f"unknown backend {name!r}; expected one of {BACKENDS}")
