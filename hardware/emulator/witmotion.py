"""A WitMotion WT901-family IMU on a pseudo-terminal (``docs/protocols/witmotion-imu.md``).

Streams one group of 11-byte packets per output instant (``k / rate`` in source time), one packet
per type enabled in RSW, in type order, from the source's IMU sample at that instant (sample and
hold). The rate is RRATE, lowered to what the baud register can carry. Host commands
``FF AA reg L H``: writes need the unlock key (valid 10 s), ``FF AA 27 addr`` answers a 0x5F packet
with four registers, ``FF AA 00 00 00`` saves, ``FF AA 00 01 00`` restores the factory settings.

Forged groups (``forge``): the next groups leave damaged but with valid check sums, as about one
damaged packet in 256 does on a real line: a temperature of 300 deg C, a quaternion of norm 0.6,
a time packet hours off (a random day and hour), or random data in every packet. ``groups_forged`` counts them.
"""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

import numpy as np
from twin.hardware.emulator.faults import FaultInjector
from twin.hardware.emulator.pty_port import PtyPort
from twin.hardware.emulator.quiet import QuietWindow
from twin.hardware.emulator.sources import PhysicsSource
from twin.hardware.protocols import witmotion as wit

from twin.spatial import quaternion

UNLOCK_S = 10.0
#: What ``forge`` can do to a group, keeping every check sum valid.
FORGERIES = ("temperature", "quaternion", "clock", "random")
_EPOCH = (24, 1, 1)  # device clock origin: 2024-01-01 00:00:00
_MAG_WORLD = np.array([200.0, 0.0, -400.0])  # raw magnetometer counts of the field, world frame


def _clipped(values, limit: float) -> list[float]:
    """``np.clip(values, -limit, limit)`` on Python floats (a nan stays a nan)."""
    return [min(max(float(v), -limit), limit) for v in values]


class WitmotionEmulator:
    """The IMU on its own pseudo-terminal (module doc)."""

    def __init__(
        self,
        source: PhysicsSource,
        *,
        name: str = "imu",
        link_dir: Path | None = None,
        faults: FaultInjector | None = None,
        baudrate: int = 115200,
        quiet: QuietWindow | None = None,
    ) -> None:
        self.source = source
        self.quiet = quiet  # whose windows the stream waits out before it encodes
        baud_code = {b: c for c, b in wit.BAUD_CODES.items()}[baudrate]
        self.factory = {
            wit.Reg.RSW: wit.RSW_DEFAULT,
            wit.Reg.RRATE: wit.RRATE_DEFAULT,
            wit.Reg.BAUD: baud_code,
        }
        self.registers = dict(self.factory)
        self.saved = dict(self.factory)
        self._unlocked_until = 0.0
        self._cmd = bytearray()
        self._next_t: float = 0.0
        self._period_us: float = 0.0
        self._single = False
        self._reschedule()
        self._stop = threading.Event()
        self.groups_sent = 0
        self.groups_forged = 0
        self._forge: collections.deque[str] = collections.deque()
        self._forge_rng = np.random.default_rng(0)
        self.stream_errors: list[str] = []
        self.port = PtyPort(name, self._on_data, link_dir=link_dir, faults=faults)
        self._thread = threading.Thread(target=self._stream, name=f"emu-{name}-stream", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        with self.source.imu_changed:
            self.source.imu_changed.notify_all()
        self._thread.join(timeout=2.0)
        self.port.close()

    @property
    def rate_hz(self) -> float:
        """The effective output rate (RRATE, limited by the baud rate)."""
        rate = wit.RATE_CODES.get(self.registers[wit.Reg.RRATE], 0.0)
        n_types = max(1, len(wit.types_in(self.registers[wit.Reg.RSW])))
        line = wit.BAUD_CODES.get(self.registers[wit.Reg.BAUD], 9600) / (
            10 * wit.PACKET_LENGTH * n_types
        )
        return min(rate, line)

    def _reschedule(self) -> None:
        rate = self.rate_hz
        code = self.registers[wit.Reg.RRATE]
        self._single = code == wit.RATE_SINGLE
        self._period_us = 1e6 / rate if rate > 0 else 0.0
        t = self.source.t_us
        self._next_t = (
            (np.floor(t / self._period_us) + 1) * self._period_us if rate > 0 else float(t)
        )

    # ----------------------------------------------------------------- host commands
    def _on_data(self, data: bytes) -> None:
        self._cmd += data
        for reg, value in wit.parse_commands(self._cmd):
            self._command(reg, value)

    def _command(self, reg: int, value: int) -> None:
        now = time.monotonic()
        with self.source.lock:
            if reg == wit.Reg.KEY:
                if value == wit.UNLOCK_VALUE:
                    self._unlocked_until = now + UNLOCK_S
                return
            if reg == wit.Reg.READ_ADDR:
                values = [self.registers.get(value + k, 0) for k in range(4)]
                self.port.write(
                    wit.encode_packet(
                        wit.PacketType.READ_REPLY, [v - 65536 if v > 32767 else v for v in values]
                    )
                )
                return
            if now > self._unlocked_until:
                return  # locked: writes are ignored, as on the device
            if reg == wit.Reg.SAVE:
                if value == 0:
                    self.saved = dict(self.registers)
                elif value == 1:
                    self.registers = dict(self.factory)
                    self._reschedule()
            elif (
                reg == wit.Reg.RRATE
                and (value in wit.RATE_CODES or value in (wit.RATE_SINGLE, wit.RATE_OFF))
            ) or (reg == wit.Reg.RSW and value & 0x7FFF):
                self.registers[reg] = value
                self._reschedule()
            elif reg == wit.Reg.BAUD and value in wit.BAUD_CODES:
                self.registers[reg] = value  # takes effect for the line on the next power-up
                self._reschedule()

    def forge(self, kind: str, count: int = 1) -> None:
        """Replace the next ``count`` groups by forgeries of ``kind`` (one of ``FORGERIES``)."""
        if kind not in FORGERIES or count < 1:
            raise ValueError(
                f"forge needs a kind in {FORGERIES} and count >= 1, got {kind!r}, {count}"
            )
        self._forge.extend([kind] * count)

    def _forged(self, group: bytes, kind: str) -> bytes:
        packets = [
            group[i : i + wit.PACKET_LENGTH] for i in range(0, len(group), wit.PACKET_LENGTH)
        ]
        out = []
        for p in packets:
            packet = wit.decode_packet(p)
            values = list(packet.values)
            if kind == "random":
                values = [int(v) for v in self._forge_rng.integers(-32768, 32768, 4)]
            elif kind == "temperature" and packet.kind == wit.PacketType.ACCEL:
                values[3] = 30000  # 300 deg C
            elif kind == "quaternion" and packet.kind == wit.PacketType.QUATERNION:
                values = [round(0.6 * v) for v in values]
            elif kind == "clock" and packet.kind == wit.PacketType.TIME:
                day, hour = (int(x) for x in self._forge_rng.integers((1, 0), (29, 24)))
                values[1] = day | hour << 8
            out.append(wit.encode_packet(packet.kind, values))
        return b"".join(out)

    # ----------------------------------------------------------------- streaming
    def _stream(self) -> None:
        src = self.source
        while not self._stop.is_set():
            due = []  # (t_us, sample) of each output instant reached, taken under the lock
            with src.imu_changed:
                src.imu_changed.wait(0.05)
                if self._period_us <= 0 and not self._single:
                    continue
                types = wit.types_in(self.registers[wit.Reg.RSW])
                while self._next_t <= src.t_us:
                    t = round(self._next_t)
                    sample = src.imu_sample_at(t)
                    if sample is not None:
                        due.append((t, sample))
                    if self._single:
                        self._single, self._period_us = False, 0.0
                        break
                    self._next_t += self._period_us
            if due and self.quiet is not None:
                self.quiet.defer()
            for t, sample in due:  # encoded outside the lock, which the servo chain waits on
                try:
                    g = self._group(t, sample, types)
                except ValueError as e:  # a value the packets cannot carry: skip it
                    self.stream_errors.append(f"t={t} us: {e}")
                    continue
                if self._forge:
                    g = self._forged(g, self._forge.popleft())
                    self.groups_forged += 1
                if self.port.write(g).delivered:
                    self.groups_sent += 1

    @staticmethod
    def _group(t_us: int, sample, types) -> bytes:
        q = sample.orientation if sample.orientation is not None else np.array([1.0, 0.0, 0.0, 0.0])
        out = []
        for kind in types:
            if kind == wit.PacketType.TIME:
                ms_total = t_us // 1000
                s, ms = divmod(ms_total, 1000)
                m, s = divmod(s, 60)
                h, m = divmod(m, 60)
                d, h = divmod(h, 24)
                yy, mm, dd = _EPOCH[0], _EPOCH[1], _EPOCH[2] + d % 28
                out.append(wit.encode_packet(kind, [yy | mm << 8, dd | h << 8, m | s << 8, ms]))
            elif kind == wit.PacketType.ACCEL:
                out.append(wit.encode_accel(_clipped(sample.specific_force, 156.0), 25.0))
            elif kind == wit.PacketType.GYRO:
                out.append(wit.encode_gyro(_clipped(sample.angular_rate, 34.0)))
            elif kind == wit.PacketType.ANGLE:
                rpy = quaternion.matrix_to_rpy(quaternion.to_matrix(q))
                rpy = (rpy + np.pi) % (2 * np.pi) - np.pi  # [-pi, pi): -pi is -32768
                out.append(wit.encode_angle(np.minimum(rpy, np.pi - wit.ANGLE_SCALE)))
            elif kind == wit.PacketType.MAG:
                mag = quaternion.to_matrix(q).T @ _MAG_WORLD
                out.append(wit.encode_packet(kind, [*np.rint(mag).astype(int), 2500]))
            elif kind == wit.PacketType.QUATERNION:
                out.append(wit.encode_quaternion(q))
            else:
                out.append(wit.encode_packet(kind, [0, 0, 0, 0]))
        return b"".join(out)
