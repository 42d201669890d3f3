"""A Bota serial F/T sensor on a pseudo-terminal (``docs/protocols/bota-serial.md``).

Boot: when a client opens the port the sensor (re)boots after ``boot_delay_s``: ``App Init`` and
the text lines, then run mode (37-byte frames). Commands are lines ending in ``\\n`` (CR ignored),
handed to the physics source's ``FtSensorDevice`` (the sim's, or ``IdealFtDevice``), whose reply
is sent followed by CR LF (``r,0,<cmd>,<code>``; ``p?`` a ``p,0,...`` line then ``r,0,p,0``).
Frames: one per new sensor sample of the source, at ``51200 / sinc_length`` Hz, with the sample's
wrench (float32), status bits, temperature and its time stamp (us, wrapping at 2**32) as the
device clock. Nothing is streamed in configuration mode.

Forged frames (``forge``): the next frames leave damaged but with a valid CRC, as about one in
65,536 frames damaged on a real line does: reserved status bits set, a value of 2e36, the RAW
status bit with a value of 1e30 (``raw_out_of_range``), a time stamp seconds to hours off (a
random offset per frame), or a random body. ``frames_forged`` and ``forged_t_us`` record them.
"""

from __future__ import annotations

import collections
import struct
import threading
from pathlib import Path

import numpy as np
from twin.hardware.emulator.faults import FaultInjector
from twin.hardware.emulator.pty_port import PtyPort
from twin.hardware.emulator.quiet import QuietWindow
from twin.hardware.emulator.sources import PhysicsSource
from twin.hardware.protocols import bota

from twin.robot import FtStatus

#: What ``forge`` can do to a frame, keeping its CRC valid.
FORGERIES = ("reserved_bits", "out_of_range", "raw_out_of_range", "clock_jump", "random")
#: The value a forged out-of-range frame carries on one axis (``out_of_range``, ``raw_out_of_range``).
FORGED_VALUE = {"out_of_range": 2e36, "raw_out_of_range": 1e30}
_BOOT_LINES = ("c,0,1,0,4", "name: {product}", "S/N: {serial}", "FW version: 1.3.0")


class BotaEmulator:
    """The F/T sensor on its own pseudo-terminal (module doc)."""

    def __init__(
        self,
        source: PhysicsSource,
        *,
        name: str = "ft_sensor",
        link_dir: Path | None = None,
        faults: FaultInjector | None = None,
        boot_delay_s: float = 0.05,
        product: str = "BotaEmu",
        serial_number: str = "4242",
        quiet: QuietWindow | None = None,
    ) -> None:
        self.source = source
        self.quiet = quiet  # whose windows the stream waits out before it encodes
        self.boot_delay_s = boot_delay_s
        self._boot_text = (
            "\r\n".join(
                [
                    bota.BOOT_BANNER,
                    *(line.format(product=product, serial=serial_number) for line in _BOOT_LINES),
                ]
            )
            + "\r\n"
        )
        self._line = bytearray()
        self._stop = threading.Event()
        self._booting = threading.Event()
        self._last_t = source.latest_ft_t_us()
        self.frames_sent = 0
        self.frames_damaged = 0  # frames that left with at least one corrupted or dropped byte
        self.damaged_t_us: list[int] = []  # their time stamps
        self.frames_forged = 0
        self.forged_t_us: list[int] = []  # source time stamps of the frames replaced by forgeries
        self._forge: collections.deque[str] = collections.deque()
        self._forge_rng = np.random.default_rng(0)
        self.commands: list[str] = []
        self.stream_errors: list[str] = []
        self.port = PtyPort(
            name, self._on_data, link_dir=link_dir, faults=faults, on_client=self._on_client
        )
        self._thread = threading.Thread(target=self._stream, name=f"emu-{name}-stream", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        with self.source.ft_changed:
            self.source.ft_changed.notify_all()
        self._thread.join(timeout=2.0)
        self.port.close()

    # ----------------------------------------------------------------- boot and commands
    def _on_client(self, connected: bool) -> None:
        if connected:
            self._booting.set()
            threading.Timer(self.boot_delay_s, self._boot).start()

    def _boot(self) -> None:
        """Power-up: saved settings, boot text, then run mode."""
        with self.source.lock:
            self.source.ft_device.command(bota.Cmd.HARD_RESET)
            self._last_t = self.source.latest_ft_t_us()
        self.port.write(self._boot_text.encode())
        self._booting.clear()

    def replug(self) -> None:
        """Plug the port back (the sensor powers up when a client opens it)."""
        self.port.replug()

    def _on_data(self, data: bytes) -> None:
        self._line += data
        while True:
            idx = self._line.find(b"\n")
            if idx < 0:
                if len(self._line) > 4 * bota.MAX_COMMAND_LENGTH:
                    self._line.clear()  # garbage without a terminator
                return
            raw, self._line[: idx + 1] = bytes(self._line[:idx]), b""
            text = raw.decode("ascii", errors="replace").strip()
            if text:
                self._command(text)

    def _command(self, text: str) -> None:
        self.commands.append(text)
        with self.source.lock:
            try:
                reply = self.source.ft_device.command(text)
            except ValueError:
                reply = bota.ack(text[0], 2)
            if text[0] == bota.Cmd.CONFIG_MODE:
                self._last_t = self.source.latest_ft_t_us()  # frames stop with the reply
        if text[0] == bota.Cmd.HARD_RESET:
            self.port.write(self._boot_text.encode())
        elif reply:
            self.port.write(reply.encode() + b"\r\n")

    def forge(self, kind: str, count: int = 1, seed: int | None = None) -> None:
        """Replace the next ``count`` frames by forgeries of ``kind`` (one of ``FORGERIES``)."""
        if kind not in FORGERIES or count < 1:
            raise ValueError(
                f"forge needs a kind in {FORGERIES} and count >= 1, got {kind!r}, {count}"
            )
        if seed is not None:
            self._forge_rng = np.random.default_rng(seed)
        self._forge.extend([kind] * count)

    def _forged(self, frame: bota.BotaFrame, kind: str) -> bytes:
        rng = self._forge_rng
        if kind == "random":
            return bota.seal(rng.integers(0, 256, 34, dtype=np.uint8).tobytes())
        if kind == "reserved_bits":
            frame = bota.BotaFrame(
                frame.status | 0x5A50, frame.wrench, frame.timestamp_us, frame.temperature_c
            )
        elif kind == "clock_jump":
            offset = int(rng.integers(1 << 24, bota.TIMESTAMP_MODULUS - (1 << 24)))
            ts = (frame.timestamp_us + offset) % bota.TIMESTAMP_MODULUS
            frame = bota.BotaFrame(frame.status, frame.wrench, ts, frame.temperature_c)
        else:  # a float32 far out of range on one axis, as bit damage in an exponent makes
            if kind == "raw_out_of_range":  # ... and in the status: the RAW bit
                frame = bota.BotaFrame(
                    frame.status | int(FtStatus.RAW),
                    frame.wrench,
                    frame.timestamp_us,
                    frame.temperature_c,
                )
            body = bytearray(bota.encode_frame(frame)[1:35])
            struct.pack_into("<f", body, 2 + 4 * int(rng.integers(0, 6)), FORGED_VALUE[kind])
            return bota.seal(bytes(body))
        return bota.encode_frame(frame)

    # ----------------------------------------------------------------- streaming
    def _stream(self) -> None:
        src = self.source
        while not self._stop.is_set():
            with src.ft_changed:
                src.ft_changed.wait(0.05)
                samples = src.ft_samples_after(self._last_t)
                streaming = not getattr(src.ft_device, "in_config_mode", False)
            if not samples:
                continue
            self._last_t = samples[-1].t_us
            if not streaming or self._booting.is_set():
                continue
            if self.quiet is not None:
                self.quiet.defer()
            for s in samples:
                frame = bota.BotaFrame(
                    int(s.status),
                    tuple(float(v) for v in np.asarray(s.wrench, np.float32)),
                    int(s.t_us) % bota.TIMESTAMP_MODULUS,
                    float(np.float32(s.temperature_c)),
                )
                try:
                    raw = bota.encode_frame(frame)
                except ValueError as e:  # a value a frame cannot carry (non-finite): skip it
                    self.stream_errors.append(f"t={s.t_us} us: {e}")
                    continue
                if self._forge:
                    raw = self._forged(frame, self._forge.popleft())
                    self.frames_forged += 1
                    self.forged_t_us.append(int(s.t_us))
                result = self.port.write(raw)
                if result.delivered:
                    self.frames_sent += 1
                    if result.damaged:
                        self.frames_damaged += 1
                        self.damaged_t_us.append(int(s.t_us))
