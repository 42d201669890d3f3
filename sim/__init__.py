"""PyBullet backend: the simulated arm with its F/T sensor and IMU models, and scene loading.

The only package that imports PyBullet (every engine call is in ``sim.engine``).
"""

from twin.sim.ft_sensor import FtSensorConfig, SimFtDevice
from twin.sim.imu import ImuConfig
from twin.sim.robot import (
    DEFAULT_CONTROL_PERIOD_S,
    HOLD_KD,
    HOLD_KP,
    Payload,
    PyBulletRobot,
    RobotClosedError,
)

__all__ = [
    "DEFAULT_CONTROL_PERIOD_S",
    "HOLD_KD",
    "HOLD_KP",
    "FtSensorConfig",
    "ImuConfig",
    "Payload",
    "PyBulletRobot",
    "RobotClosedError",
    "SimFtDevice",
]
