"""Device drivers: each owns a ``SerialLink`` (reader thread, reconnection) and feeds a codec."""

from hardware.drivers.bota_sensor import BotaSensor, FtReading
from hardware.drivers.dynamixel_bus import BusStats, DynamixelBus, PresentValues
from hardware.drivers.witmotion_imu import WitmotionImu

__all__ = ["BotaSensor", "BusStats", "DynamixelBus", "FtReading", "PresentValues", "WitmotionImu"]
