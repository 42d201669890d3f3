"""WitMotion IMU driver (``docs/protocols/witmotion-imu.md``): configuration, reader, latest sample.

Start-up (``configure``): unlock, RSW (output content), unlock, RRATE (rate), then the two
registers are read back (``FF AA 27``, answered by a 0x5F packet) and must match; then one complete
sample must arrive within ``first_sample_timeout_s``. The baud rate is not changed (set it once
and save). The reader thread hands each packet to ``witmotion_cycle.ImuCycles``: each output
cycle (one packet per enabled type, in type order) becomes one ``ImuSample`` when its last packet
arrives; a cycle that misses a packet is counted in ``incomplete_cycles`` and dropped; a cycle
that passed its check sums but cannot be a measurement (temperature, quaternion norm, with the
time packet 0x50 its time fields or a device-clock jump) is dropped and counted by reason in
``checks``, never published.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from twin.hardware.clock import MonotonicClock
from twin.hardware.config import ReconnectConfig
from twin.hardware.drivers.witmotion_cycle import ImuCycles
from twin.hardware.errors import (
    DeviceStatusError,
    DisconnectedError,
    InvalidArgumentError,
    ReplyTimeoutError,
)
from twin.hardware.protocols import witmotion as wit
from twin.hardware.protocols.stream import ParserStats
from twin.hardware.transport import LinkedDevice, LinkState, SerialLink

from twin.robot import ImuSample

DEFAULT_CONTENT = (wit.PacketType.ACCEL, wit.PacketType.GYRO, wit.PacketType.QUATERNION)


class WitmotionImu(LinkedDevice):
    """The IMU on one port (module doc). ``content``: the packet types to enable and expect."""

    def __init__(
        self,
        port: str,
        baudrate: int = 115200,
        *,
        rate_hz: float = 200.0,
        content: Sequence[int] = DEFAULT_CONTENT,
        configure: bool = True,
        first_sample_timeout_s: float = 1.0,
        reply_timeout_s: float = 0.5,
        reconnect: ReconnectConfig | None = None,
        clock=None,
        name: str = "imu",
    ) -> None:
        self.rate_code = wit.rate_code(rate_hz)
        self.content = tuple(sorted(int(k) for k in content))
        if wit.PacketType.ACCEL not in self.content or wit.PacketType.GYRO not in self.content:
            raise InvalidArgumentError(
                f"IMU content must include 0x51 and 0x52, got {self.content}"
            )
        self.rsw = wit.rsw_for(self.content)
        self.configure = configure
        self.first_sample_timeout_s = first_sample_timeout_s
        self.reply_timeout_s = reply_timeout_s
        self.clock = clock or MonotonicClock()
        self.parser = wit.WitmotionStreamParser()
        self.latest: ImuSample | None = None
        self.samples_received = 0
        self._cycles = ImuCycles(self.content, rate_hz)
        self.checks = self._cycles.checks
        self._reply: wit.Packet | None = None
        self._cond = threading.Condition()
        self._init_thread: int | None = None
        self.link = SerialLink(
            name, port, baudrate, self, on_connect=self._startup, reconnect=reconnect
        )

    @property
    def parser_stats(self) -> ParserStats:
        return self.parser.stats.snapshot()

    @property
    def incomplete_cycles(self) -> int:
        """Output cycles dropped because a packet of theirs was missing."""
        return self._cycles.incomplete

    # ------------------------------------------------------------------ reader thread
    def data_received(self, data: bytes) -> None:
        with self._cond:
            packets = self.parser.feed(data)
            now = self.clock.now_us() if packets else 0
            for p in packets:
                if p.kind == wit.PacketType.READ_REPLY:
                    self._reply = p
                elif p.kind in self.content:
                    self._cycles.feed(p, now, self._publish)
            self._cond.notify_all()

    def connection_lost(self, reason: str, exc: BaseException | None) -> None:
        with self._cond:
            self._cycles.clear()
            self._cond.notify_all()

    def _publish(self, sample: ImuSample) -> None:
        self.latest = sample
        self.samples_received += 1

    # ------------------------------------------------------------------ start-up
    def _wait(self, predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not (value := predicate()):
                if self.link.state in (LinkState.LOST, LinkState.CLOSED):
                    raise DisconnectedError(f"{self.link.name}: port lost while waiting for {what}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ReplyTimeoutError(f"{self.link.name}: no {what} within {timeout_s:.3g} s")
                self._cond.wait(remaining)
            return value

    def _write(self, data: bytes) -> None:
        self.link.write(data, connecting=self._init_thread == threading.get_ident())

    def write_register(self, reg: int, value: int) -> None:
        """Unlock, then write one register (the device does not acknowledge writes)."""
        self._write(wit.cmd_unlock() + wit.cmd_write_register(reg, value))

    def read_registers(self, addr: int) -> tuple[int, int, int, int]:
        """Four registers from ``addr`` (uint16 each), via a 0x5F reply."""
        with self._cond:
            self._reply = None
        self._write(wit.cmd_read_register(addr))
        reply = self._wait(
            lambda: self._reply, self.reply_timeout_s, f"register read reply for 0x{addr:02X}"
        )
        return tuple(v & 0xFFFF for v in reply.values)

    def _startup(self, link: SerialLink) -> None:
        self._init_thread = threading.get_ident()
        with self._cond:
            self._cycles.clock.restart()
        try:
            if self.configure:
                self.write_register(wit.Reg.RSW, self.rsw)
                self.write_register(wit.Reg.RRATE, self.rate_code)
                rsw, rrate, _, _ = self.read_registers(wit.Reg.RSW)
                if (rsw, rrate) != (self.rsw, self.rate_code):
                    raise DeviceStatusError(
                        f"{link.name}: IMU registers read back RSW=0x{rsw:04X} RRATE=0x{rrate:02X}, "
                        f"expected 0x{self.rsw:04X} and 0x{self.rate_code:02X}",
                        device=link.name,
                    )
            before = self.samples_received
            self._wait(
                lambda: self.samples_received > before, self.first_sample_timeout_s, "IMU sample"
            )
        finally:
            self._init_thread = None
