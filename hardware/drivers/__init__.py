"""Device drivers: each owns a ``SerialLink`` (reader thread, reconnection) and feeds a codec."""

from twin.hardware.drivers.bota_sensor import BotaSensor, FtReading
from twin.hardware.drivers.dynamixel_bus import BusStats, DynamixelBus, PresentValues
from twin.hardware.drivers.witmotion_imu import WitmotionImu

__all__ = ["BotaSensor", "BusStats", "DynamixelBus", "FtReading", "PresentValues", "WitmotionImu"]
