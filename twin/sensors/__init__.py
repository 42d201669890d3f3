"""F/T sensor services over any ``twin.robot.Robot`` (see ``twin.sensors.ft_service``)."""

from twin.sensors.errors import (
    BadDeviceError,
    FtError,
    FtSystemError,
    InvalidArgumentError,
    NoDeviceError,
    NotConnectedError,
)
from twin.sensors.filters import LowPassBank, butterworth_biquad
from twin.sensors.ft_service import Calibration, FtSensorService, FtServiceHealth
from twin.sensors.ports import WrenchState
from twin.sensors.sampling import TareResult

__all__ = [
    "BadDeviceError",
    "Calibration",
    "FtError",
    "FtSensorService",
    "FtServiceHealth",
    "FtSystemError",
    "InvalidArgumentError",
    "LowPassBank",
    "NoDeviceError",
    "NotConnectedError",
    "TareResult",
    "WrenchState",
    "butterworth_biquad",
]
