"""The serial hardware backend: protocol codecs, device drivers, device emulators and
``SerialRobot`` (``twin.robot.Robot`` over pyserial). Configuration: ``assets/hardware/``."""

from twin.hardware.clock import ManualClock, MonotonicClock
from twin.hardware.config import HardwareConfig, default_config_path, load_config
from twin.hardware.errors import (
    ConfigError,
    DeviceFaultError,
    DeviceStatusError,
    DisconnectedError,
    HardwareError,
    InvalidArgumentError,
    ProtocolError,
    ReplyTimeoutError,
    TransportError,
)
from twin.hardware.serial_robot import HealthEvent, SerialRobot

__all__ = [
    "ConfigError",
    "DeviceFaultError",
    "DeviceStatusError",
    "DisconnectedError",
    "HardwareConfig",
    "HardwareError",
    "HealthEvent",
    "InvalidArgumentError",
    "ManualClock",
    "MonotonicClock",
    "ProtocolError",
    "ReplyTimeoutError",
    "SerialRobot",
    "TransportError",
    "default_config_path",
    "load_config",
]
