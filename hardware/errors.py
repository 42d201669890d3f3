"""Exception classes of the serial backend (docs/style.md #8).

Three families, never mixed:

- ``TransportError``: the byte pipe failed (port missing, closed under us, no reply in time).
- ``DeviceStatusError``: the device answered, and the answer says it failed or is faulted.
- ``InvalidArgumentError``: the caller passed a value outside what the protocol or device accepts
  (a ``ValueError``, so generic input validation catches it too).

``ProtocolError`` is what the pure codecs raise for bytes that are not a valid packet; the stream
parsers catch it and count it, so it never escapes a reader thread.
"""

from __future__ import annotations


class HardwareError(Exception):
    """Base class of every error raised by ``hardware``."""


class TransportError(HardwareError):
    """The serial link failed: port missing or lost, write failed, or no reply in time."""


class DisconnectedError(TransportError):
    """A command was refused because a device's port is disconnected (reconnection may be running)."""


class ReplyTimeoutError(TransportError):
    """A device did not answer within its reply timeout."""


class ReplyLostError(ReplyTimeoutError):
    """A reply is known lost before its timeout: a damaged frame (CRC error), a later device's
    reply, or as many bytes as the answer takes arrived without it."""


class DeviceStatusError(HardwareError):
    """A device answered with an error status (e.g. a DYNAMIXEL status packet's ERR byte)."""

    def __init__(self, message: str, *, device: str = "", code: int = 0) -> None:
        super().__init__(message)
        self.device = device
        self.code = code


class DeviceFaultError(DeviceStatusError):
    """A command was refused because a device reports a latched hardware fault."""


class InvalidArgumentError(HardwareError, ValueError):
    """A value is outside what the protocol or the device accepts; the message says the range."""


class ProtocolError(HardwareError, ValueError):
    """Bytes that do not form a valid packet (wrong header, length, checksum or field)."""


class ConfigError(InvalidArgumentError):
    """The hardware TOML configuration is missing a key or holds a wrong value."""


class StartupError(TransportError):
    """A device could not be opened and set up within its bounded retries; the message names the
    device, its port and the last error."""


class ParkError(DeviceStatusError):
    """``close()`` could not leave every servo in the safe state (torque on, current-based
    position mode); ``states`` maps each servo id to its read-back ``ServoState`` (the message
    names them all). The ports are closed all the same."""

    def __init__(self, message: str, states: dict | None = None) -> None:
        super().__init__(message, device="servo_bus")
        self.states = dict(states or {})


class ControlRateWarning(RuntimeWarning):
    """The control loop runs below its configured rate (``SerialRobot.diagnostics()``)."""


class WireBoundWarning(RuntimeWarning):
    """The configured control rate exceeds what the servo bus's wire can carry at its baud rate
    (``twin.hardware.config.wire_bound_hz``): the loop cannot reach it on a real bus."""
