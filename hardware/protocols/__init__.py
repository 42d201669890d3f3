"""Pure protocol codecs (no I/O): DYNAMIXEL Protocol 2.0, Bota serial, WitMotion.

Each protocol module has encoders, decoders that raise ``ProtocolError`` for invalid bytes, and a
stream parser that resynchronises after garbage and counts what it drops (``ParserStats``).
"""

from twin.hardware.protocols import bota, crc, dynamixel, witmotion
from twin.hardware.protocols.stream import FixedFrameParser, ParserStats

__all__ = ["FixedFrameParser", "ParserStats", "bota", "crc", "dynamixel", "witmotion"]
