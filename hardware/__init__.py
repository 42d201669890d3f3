"""The serial hardware backend: protocol codecs, device drivers, device emulators and
``SerialRobot`` (``twin.robot.Robot`` over pyserial). Configuration: ``assets/hardware/``."""

from twin.hardware.clock import ManualClock, MonotonicClock
from twin.hardware.config import HardwareConfig, default_config_path, load_config
from twin.hardware.errors import (
    ConfigError,
    ControlRateWarning,
    DeviceFaultError,
    DeviceStatusError,
    DisconnectedError,
    HardwareError,
    InvalidArgumentError,
    ParkError,
    ProtocolError,
    ReplyLostError,
    ReplyTimeoutError,
    StartupError,
    TransportError,
    WireBoundWarning,
)
from twin.hardware.serial_robot import HealthEvent, SerialRobot

__all__ = [
    "ConfigError",
    "ControlRateWarning",
    "DeviceFaultError",
    "DeviceStatusError",
    "DisconnectedError",
    "HardwareConfig",
    "HardwareError",
    "HealthEvent",
    "InvalidArgumentError",
    "ManualClock",
    "MonotonicClock",
    "ParkError",
    "ProtocolError",
    "ReplyLostError",
    "ReplyTimeoutError",
    "SerialRobot",
    "StartupError",
    "TransportError",
    "WireBoundWarning",
    "default_config_path",
    "load_config",
]
