"""WitMotion IMU driver (``docs/protocols/witmotion-imu.md``): configuration, reader, latest sample.

Start-up (``configure``): unlock, RSW (output content), unlock, RRATE (rate), then the two
registers are read back (``FF AA 27``, answered by a 0x5F packet) and must match; then one complete
sample must arrive within ``first_sample_timeout_s``. The baud rate is not changed (set it once
and save). Each output cycle (one packet per enabled type, in type order) becomes one
``ImuSample`` when its last packet arrives; a cycle that misses a packet is counted in
``incomplete_cycles`` and dropped. A complete cycle that passed its check sums but cannot be a
measurement (``witmotion.implausibility``: temperature, quaternion norm) is dropped and counted
by reason in ``checks``, never published. When the content includes the time packet (0x50), its
device clock is checked too (``sample_checks.DeviceClock``): a cycle whose time fields are out of
range, or whose clock jumps, is dropped the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
from twin.hardware.clock import MonotonicClock
from twin.hardware.config import ReconnectConfig
from twin.hardware.drivers.sample_checks import CLOCK_JUMP, DeviceClock, SampleChecks
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
from twin.spatial import quaternion

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
        self.incomplete_cycles = 0
        self.checks = SampleChecks()
        self._clock_check: DeviceClock[ImuSample] = DeviceClock(
            1e6 / rate_hz, 31 * 24 * 3600 * 1_000_000
        )
        self._cycle: dict[int, wit.Packet] = {}
        self._reply: wit.Packet | None = None
        self._cond = threading.Condition()
        self._init_thread: int | None = None
        self.link = SerialLink(
            name, port, baudrate, self, on_connect=self._startup, reconnect=reconnect
        )

    @property
    def parser_stats(self) -> ParserStats:
        return self.parser.stats.snapshot()

    # ------------------------------------------------------------------ reader thread
    def data_received(self, data: bytes) -> None:
        with self._cond:
            for p in self.parser.feed(data):
                if p.kind == wit.PacketType.READ_REPLY:
                    self._reply = p
                elif p.kind in self.content:
                    self._packet(p)
            self._cond.notify_all()

    def connection_lost(self, reason: str, exc: BaseException | None) -> None:
        with self._cond:
            self._cycle.clear()
            self._cond.notify_all()

    def _packet(self, p: wit.Packet) -> None:
        cycle = self._cycle
        if p.kind in cycle or (cycle and p.kind < max(cycle)):
            self.incomplete_cycles += 1  # a new cycle began before the last one completed
            cycle.clear()
        cycle[p.kind] = p
        if p.kind != self.content[-1]:
            return
        if len(cycle) != len(self.content):
            self.incomplete_cycles += 1
            cycle.clear()
            return
        force, temperature = wit.accel_of(cycle[wit.PacketType.ACCEL])
        rate = wit.gyro_of(cycle[wit.PacketType.GYRO])
        orientation = q = None
        if wit.PacketType.QUATERNION in cycle:
            q = wit.quaternion_of(cycle[wit.PacketType.QUATERNION])
        reason = wit.implausibility(temperature, q)
        if reason is not None:
            cycle.clear()
            self.checks.reject(reason, self.clock.now_us())
            return
        if q is not None:
            if np.linalg.norm(q) > 0.5:
                orientation = quaternion.canonicalize(q)
        elif wit.PacketType.ANGLE in cycle:
            roll, pitch, yaw = wit.angle_of(cycle[wit.PacketType.ANGLE])
            orientation = quaternion.from_rpy(roll, pitch, yaw)
        now = self.clock.now_us()
        sample = ImuSample(
            t_us=now, specific_force=force, angular_rate=rate, orientation=orientation
        )
        time_packet = cycle.get(wit.PacketType.TIME)
        cycle.clear()
        if time_packet is None:
            self._publish(sample)
            return
        device_t = wit.time_of(time_packet)
        if device_t is None:
            self.checks.reject("time fields", now)
            return
        jumps = self._clock_check.offer(device_t, now, sample, lambda s, _t: self._publish(s))
        self.checks.reject(CLOCK_JUMP, now, jumps)

    def _publish(self, sample: ImuSample) -> None:
        self.latest = sample
        self.samples_received += 1
        self.checks.accept()

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
            self._clock_check.restart()
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
