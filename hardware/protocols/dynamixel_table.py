"""DYNAMIXEL Protocol 2.0 named tables: instructions, status errors, hardware error bits, the
X-series control table (XM430 / XH540) and its units (``docs/protocols/dynamixel.md``)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

BROADCAST_ID = 0xFE
MAX_ID = 252
STATUS_INSTRUCTION = 0x55
ALERT_BIT = 0x80
ERROR_CODE_MASK = 0x7F


class Instruction(enum.IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    FACTORY_RESET = 0x06
    REBOOT = 0x08
    CLEAR = 0x10
    STATUS = 0x55
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83
    FAST_SYNC_READ = 0x8A
    BULK_READ = 0x92
    BULK_WRITE = 0x93
    FAST_BULK_READ = 0x9A


class StatusError(enum.IntEnum):
    """Bits 0..6 of the status ERR byte hold one of these numbers; bit 7 is the alert flag."""

    NONE = 0
    RESULT_FAIL = 1
    INSTRUCTION = 2
    CRC = 3
    DATA_RANGE = 4
    DATA_LENGTH = 5
    DATA_LIMIT = 6
    ACCESS = 7


class HardwareError(enum.IntFlag):
    """Hardware Error Status (address 70) bits."""

    NONE = 0
    INPUT_VOLTAGE = 1 << 0
    OVERHEATING = 1 << 2
    ENCODER = 1 << 3
    ELECTRICAL_SHOCK = 1 << 4
    OVERLOAD = 1 << 5


class OperatingMode(enum.IntEnum):
    CURRENT = 0
    VELOCITY = 1
    POSITION = 3
    EXTENDED_POSITION = 4
    CURRENT_BASED_POSITION = 5
    PWM = 16


class FactoryReset(enum.IntEnum):
    ALL = 0xFF
    KEEP_ID = 0x01
    KEEP_ID_AND_BAUD = 0x02


#: Baud Rate register (address 8) codes.
BAUD_CODES: dict[int, int] = {
    0: 9600,
    1: 57600,
    2: 115200,
    3: 1_000_000,
    4: 2_000_000,
    5: 3_000_000,
    6: 4_000_000,
    7: 4_500_000,
}


@dataclass(frozen=True)
class Register:
    """One control-table entry: little-endian, ``size`` bytes at ``address``."""

    name: str
    address: int
    size: int
    writable: bool
    signed: bool = False
    default: int = 0

    @property
    def eeprom(self) -> bool:
        """EEPROM area (below address 64): locked while torque is enabled."""
        return self.address < EEPROM_END

    @property
    def end(self) -> int:
        return self.address + self.size


EEPROM_END = 64


class XTable:
    """The X-series control table subset we use (XM430-W350 / XH540-W270 e-manual)."""

    MODEL_NUMBER = Register("model_number", 0, 2, False, default=1020)
    FIRMWARE_VERSION = Register("firmware_version", 6, 1, False, default=46)
    ID = Register("id", 7, 1, True, default=1)
    BAUD_RATE = Register("baud_rate", 8, 1, True, default=1)
    RETURN_DELAY_TIME = Register("return_delay_time", 9, 1, True, default=250)
    DRIVE_MODE = Register("drive_mode", 10, 1, True)
    OPERATING_MODE = Register("operating_mode", 11, 1, True, default=OperatingMode.POSITION)
    HOMING_OFFSET = Register("homing_offset", 20, 4, True, signed=True)
    CURRENT_LIMIT = Register("current_limit", 38, 2, True, default=1193)
    VELOCITY_LIMIT = Register("velocity_limit", 44, 4, True, default=200)
    MAX_POSITION_LIMIT = Register("max_position_limit", 48, 4, True, default=4095)
    MIN_POSITION_LIMIT = Register("min_position_limit", 52, 4, True, default=0)
    TORQUE_ENABLE = Register("torque_enable", 64, 1, True)
    LED = Register("led", 65, 1, True)
    STATUS_RETURN_LEVEL = Register("status_return_level", 68, 1, True, default=2)
    HARDWARE_ERROR_STATUS = Register("hardware_error_status", 70, 1, False)
    VELOCITY_I_GAIN = Register("velocity_i_gain", 76, 2, True, default=1920)
    VELOCITY_P_GAIN = Register("velocity_p_gain", 78, 2, True, default=100)
    POSITION_D_GAIN = Register("position_d_gain", 80, 2, True)
    POSITION_I_GAIN = Register("position_i_gain", 82, 2, True)
    POSITION_P_GAIN = Register("position_p_gain", 84, 2, True, default=800)
    FEEDFORWARD_2ND_GAIN = Register("feedforward_2nd_gain", 88, 2, True)
    FEEDFORWARD_1ST_GAIN = Register("feedforward_1st_gain", 90, 2, True)
    #: Bus Watchdog: 0 off (and clears a trip), 1..127 armed (``Units.BUS_WATCHDOG_S`` each),
    #: -1 tripped (``BUS_WATCHDOG_TRIPPED``); RAM, firmware v38 and later.
    BUS_WATCHDOG = Register("bus_watchdog", 98, 1, True, signed=True)
    GOAL_PWM = Register("goal_pwm", 100, 2, True, signed=True, default=885)
    GOAL_CURRENT = Register("goal_current", 102, 2, True, signed=True, default=1193)
    GOAL_VELOCITY = Register("goal_velocity", 104, 4, True, signed=True)
    PROFILE_ACCELERATION = Register("profile_acceleration", 108, 4, True)
    PROFILE_VELOCITY = Register("profile_velocity", 112, 4, True)
    GOAL_POSITION = Register("goal_position", 116, 4, True, signed=True, default=2048)
    MOVING = Register("moving", 122, 1, False)
    PRESENT_PWM = Register("present_pwm", 124, 2, False, signed=True)
    PRESENT_CURRENT = Register("present_current", 126, 2, False, signed=True)
    PRESENT_VELOCITY = Register("present_velocity", 128, 4, False, signed=True)
    PRESENT_POSITION = Register("present_position", 132, 4, False, signed=True)
    PRESENT_INPUT_VOLTAGE = Register("present_input_voltage", 144, 2, False, default=120)
    PRESENT_TEMPERATURE = Register("present_temperature", 146, 1, False, default=35)

    #: Size of the emulated table in bytes (addresses beyond the last entry read as zero).
    SIZE = 147

    @classmethod
    def registers(cls) -> tuple[Register, ...]:
        return tuple(v for v in vars(cls).values() if isinstance(v, Register))


#: Present Current, Velocity and Position are contiguous: one 10-byte read gets all three.
PRESENT_BLOCK_ADDRESS = XTable.PRESENT_CURRENT.address
PRESENT_BLOCK_LENGTH = XTable.PRESENT_POSITION.end - PRESENT_BLOCK_ADDRESS
#: Bus Watchdog (98) values: the largest interval it can be set to (in ``Units.BUS_WATCHDOG_S``),
#: and what it reads after a trip (``docs/protocols/dynamixel.md``, "Bus Watchdog").
BUS_WATCHDOG_MAX = 127
BUS_WATCHDOG_TRIPPED = -1
#: The Goal registers a tripped Bus Watchdog makes read-only (a write answers DATA_RANGE).
GOAL_REGISTERS = (XTable.GOAL_PWM, XTable.GOAL_CURRENT, XTable.GOAL_VELOCITY, XTable.GOAL_POSITION)
#: Position D, I and P gains are contiguous (80..85).
GAIN_BLOCK_ADDRESS = XTable.POSITION_D_GAIN.address
GAIN_BLOCK_LENGTH = XTable.POSITION_P_GAIN.end - GAIN_BLOCK_ADDRESS
MAX_GAIN = 16383


class Units:
    """Units of the X-series registers (XM430-W350 e-manual)."""

    TICKS_PER_REV = 4096
    CENTER_TICKS = 2048
    #: Servo-shaft ticks per radian.
    TICKS_PER_RAD = TICKS_PER_REV / (2.0 * math.pi)
    #: Present/Goal Velocity: 0.229 rpm per unit, in servo-shaft rad/s.
    VELOCITY_RAD_S = 0.229 * 2.0 * math.pi / 60.0
    #: Present/Goal Current: 2.69 mA per unit.
    CURRENT_A = 0.00269
    #: Return Delay Time: 2 us per unit.
    RETURN_DELAY_S = 2e-6
    #: Bus Watchdog: 20 ms per unit.
    BUS_WATCHDOG_S = 0.02
    #: Current-based position mode multi-turn range: +-256 revolutions.
    EXTENDED_POSITION_LIMIT = 256 * TICKS_PER_REV - 1
