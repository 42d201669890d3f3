"""Device emulators on pseudo-terminals: a DYNAMIXEL servo chain, a Bota F/T sensor, a WitMotion
IMU, each answering byte for byte like the device, driven by a physics source (ideal or sim)."""

from twin.hardware.emulator.bota import BotaEmulator
from twin.hardware.emulator.faults import FaultInjector
from twin.hardware.emulator.pty_port import PtyPort
from twin.hardware.emulator.servo_chain import ServoChainEmulator
from twin.hardware.emulator.sources import (
    Drive,
    DriveKind,
    IdealSource,
    PhysicsSource,
    RealTimeRunner,
    RobotSource,
    make_sim_source,
)
from twin.hardware.emulator.stack import BUS, FT, IMU, EmulatorStack
from twin.hardware.emulator.witmotion import WitmotionEmulator

__all__ = [
    "BUS",
    "FT",
    "IMU",
    "BotaEmulator",
    "Drive",
    "DriveKind",
    "EmulatorStack",
    "FaultInjector",
    "IdealSource",
    "PhysicsSource",
    "PtyPort",
    "RealTimeRunner",
    "RobotSource",
    "ServoChainEmulator",
    "WitmotionEmulator",
    "make_sim_source",
]
