"""Bota serial F/T sensor driver (``docs/protocols/bota-serial.md``), also the ``FtSensorDevice`` of the
serial backend.

Start-up, as the vendor's host driver does it: open (raw 8N1), wait for the boot text (``App Init``)
or for frames (the sensor is already running) up to ``boot_timeout_s``, ``C``, ``p?`` twice
(metadata), ``c,0,1,0,<baud code>``, ``f,<sinc>,0,0,1``, optional offsets ``b`` and calibration rows
``m0..m5``, then ``R`` and at least one frame within ``activation_timeout_s``. Replies are found by
the substring ``r,0,<cmd>,<code>`` anywhere in the received bytes (frames may precede the reply to
``C``). Unlike the vendor driver, a port that disappears is noticed: the link reports it and
reconnects (running this start-up again).

The reader thread feeds text to the reply search in configuration mode and bytes to the frame
parser in run mode; the switch happens in the reader thread at the ``r,0,R,0`` reply, so no frame
byte is lost or misread.

Each frame that passes the CRC is checked further (``bota_checks.FrameScreen``): a reserved
status bit, a value beyond ``PLAUSIBLE_RANGE_FACTOR`` times ``measuring_range``, an implausible
temperature, a RAW frame while the sensor is not configured for raw output (or one whose
calibrated wrench is out of range) or a device-clock jump drops it, counted by reason in
``checks``; it is never published. An accepted frame becomes the latest ``WrenchSample`` (time
stamped on the driver's clock at receipt), goes into a bounded history with its unwrapped device
time stamp, and into the queue that ``take_samples()`` empties (every frame, for logging;
bounded, overflow counted). Frames the device clock shows missing are counted in
``timestamp_gaps``. A user ``on_sample`` callback that raises is counted in ``callback_errors``
(the first one logged with its traceback); it never reaches the reader thread, so it cannot
disconnect the sensor.

Raw output: the sensor sends raw gauge values (status ``RAW``) only when calibration use is off:
``raw_output=True`` at start-up (``c,0,0,0,<baud>``), or a ``c`` command through ``command``. The
driver then reads the pending settings (``w``) before each ``R`` and keeps the calibration they
hold (``bota.RawOutput``) for the range check of raw frames; the reader thread takes it over at
the ``r,0,R,0`` reply, with the first raw frame. A ``c`` turning calibration use back on, and a
restart with the driver's own settings, make RAW frames implausible again.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from twin.hardware.clock import MonotonicClock
from twin.hardware.config import ReconnectConfig
from twin.hardware.drivers.bota_checks import FrameScreen
from twin.hardware.errors import (
    DeviceStatusError,
    DisconnectedError,
    InvalidArgumentError,
    ReplyTimeoutError,
    TransportError,
)
from twin.hardware.protocols import bota
from twin.hardware.protocols.stream import ParserStats
from twin.hardware.transport import LinkedDevice, LinkState, SerialLink

from twin.robot import FtSensorDevice, FtStatus, WrenchBatch, WrenchSample
from twin.sensors.device import MEASURING_RANGE

_log = logging.getLogger(__name__)
_TEXT_LIMIT = 16384
_COMMAND_RETRIES = 3
_CONFIG_COMMANDS = "cfbmslwp"


@dataclass(frozen=True)
class FtReading:
    """A received frame: the sample (host time ``t_us``) and the device's unwrapped time stamp."""

    sample: WrenchSample
    device_t_us: int


class BotaSensor(FtSensorDevice, LinkedDevice):
    """The F/T sensor on one port (module doc)."""

    def __init__(
        self,
        port: str,
        baudrate: int = 460800,
        *,
        sinc_length: int = 256,
        offsets=None,
        calibration=None,
        boot_timeout_s: float = 3.0,
        ack_timeout_s: float = 0.5,
        activation_timeout_s: float = 1.0,
        read_metadata: bool = True,
        reconnect: ReconnectConfig | None = None,
        clock=None,
        name: str = "ft_sensor",
        history: int = 4096,
        queue: int = 4096,
        measuring_range=MEASURING_RANGE,
        raw_output: bool = False,
    ) -> None:
        if baudrate not in bota.BAUD_CODES:
            raise InvalidArgumentError(
                f"baud rate must be one of {sorted(bota.BAUD_CODES)}, got {baudrate}"
            )
        self._sinc = bota.check_sinc(sinc_length)
        bota.cmd_offsets(offsets if offsets is not None else np.zeros(6))  # validates
        self._offsets = None if offsets is None else np.asarray(offsets, float).reshape(6)
        self._calibration = (
            None if calibration is None else np.asarray(calibration, float).reshape(6, 6)
        )
        self.boot_timeout_s, self.ack_timeout_s = boot_timeout_s, ack_timeout_s
        self.activation_timeout_s = activation_timeout_s
        self.read_metadata = read_metadata
        self.clock = clock or MonotonicClock()
        self.parser = bota.BotaStreamParser()
        self.metadata: bota.Metadata | None = None
        self.latest: FtReading | None = None
        self.history: collections.deque[FtReading] = collections.deque(maxlen=history)
        self.on_sample: Callable[[FtReading], None] | None = None
        self.frames_received = 0
        self.callback_errors = 0
        self.callback_error: str | None = None
        self._screen = FrameScreen(self._sinc * bota.SINC_PERIOD_S * 1e6, measuring_range)
        self.measuring_range = self._screen.measuring_range
        self.checks = self._screen.checks
        # Calibration use of the pending settings: 1 on, 0 off (raw output), None unknown (``l``).
        self._use_calibration: int | None = 0 if raw_output else 1
        self._raw_next: bota.RawOutput | None = None  # what the reader takes over at r,0,R,0
        if queue < 1:
            raise InvalidArgumentError(f"queue must hold at least one sample, got {queue}")
        self._queue: collections.deque[WrenchSample] = collections.deque(maxlen=queue)
        self._queue_lost = 0
        self._rejected_taken = 0
        self._cond = threading.Condition()
        self._cmd_lock = threading.RLock()
        self._run_mode = False
        self._switch_on_run_ack = False
        self._text = bytearray()
        self._init_thread: int | None = None
        self.link = SerialLink(
            name, port, baudrate, self, on_connect=self._startup, reconnect=reconnect
        )

    # ------------------------------------------------------------------ lifecycle
    @property
    def sinc_length(self) -> int:
        return self._sinc

    @property
    def parser_stats(self) -> ParserStats:
        return self.parser.stats.snapshot()

    @property
    def in_config_mode(self) -> bool:
        return not self._run_mode

    # ------------------------------------------------------------------ reader thread
    def connection_made(self, link: SerialLink) -> None:
        with self._cond:
            self._run_mode = False
            self._switch_on_run_ack = False
            self._text.clear()

    def data_received(self, data: bytes) -> None:
        with self._cond:
            if self._run_mode:
                self._frames(self.parser.feed(data))
            else:
                self._text += data
                if len(self._text) > _TEXT_LIMIT:
                    del self._text[: len(self._text) - _TEXT_LIMIT // 2]
                if self._switch_on_run_ack:
                    found = bota.find_ack(bytes(self._text), bota.Cmd.RUN_MODE)
                    if found is not None and found[0] == 0:
                        rest = bytes(self._text[found[1] :])
                        self._run_mode, self._switch_on_run_ack = True, False
                        self._screen.raw = self._raw_next
                        self.parser.reset()
                        self._frames(self.parser.feed(rest))
            self._cond.notify_all()

    def connection_lost(self, reason: str, exc: BaseException | None) -> None:
        with self._cond:
            self._run_mode = False
            self._cond.notify_all()

    @property
    def timestamp_gaps(self) -> int:
        """Frames the device clock shows missing between accepted frames."""
        return self._screen.clock.lost

    def take_samples(self) -> WrenchBatch:
        """Every accepted sample since the previous call (oldest first), with the counts of
        samples lost to queue overflow and rejected as implausible meanwhile."""
        with self._cond:
            samples = tuple(self._queue)
            self._queue.clear()
            lost, self._queue_lost = self._queue_lost, 0
        rejected_total = self.checks.rejected_total
        rejected, self._rejected_taken = rejected_total - self._rejected_taken, rejected_total
        return WrenchBatch(samples, lost, rejected)

    def _frames(self, frames: list[bota.BotaFrame]) -> None:
        if not frames:
            return
        now = self.clock.now_us()
        self._screen.clock.period_us = self._sinc * bota.SINC_PERIOD_S * 1e6
        self._screen.screen(frames, now, lambda f, device_t_us: self._publish(f, device_t_us, now))

    def _publish(self, f: bota.BotaFrame, device_t_us: int, now: int) -> None:
        sample = WrenchSample(
            t_us=now,
            wrench=np.array(f.wrench, dtype=float),
            status=FtStatus(f.status),
            temperature_c=f.temperature_c,
        )
        reading = FtReading(sample, device_t_us)
        self.latest = reading
        self.history.append(reading)
        if len(self._queue) == self._queue.maxlen:
            self._queue_lost += 1
        self._queue.append(sample)
        self.frames_received += 1
        if self.on_sample is not None:
            try:
                self.on_sample(reading)
            except Exception as e:  # the user's bug: report it, keep the sensor streaming
                self.callback_errors += 1
                self.callback_error = f"on_sample raised {type(e).__name__}: {e}"
                if self.callback_errors == 1:
                    _log.exception("%s: on_sample callback raised", self.link.name)

    # ------------------------------------------------------------------ waiting helpers
    def _wait(self, predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                value = predicate()
                if value:
                    return value
                if (
                    self.link.state in (LinkState.LOST, LinkState.CLOSED)
                    or self.link.closing.is_set()
                ):
                    raise DisconnectedError(f"{self.link.name}: port lost while waiting for {what}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ReplyTimeoutError(f"{self.link.name}: no {what} within {timeout_s:.3g} s")
                self._cond.wait(remaining)

    def _send(self, text: str) -> None:
        connecting = self._init_thread == threading.get_ident()
        self.link.write((text + "\n").encode("ascii"), connecting=connecting)

    def _exchange(self, text: str, timeout_s: float | None = None, retries: int = 1) -> str:
        """Send one command in configuration mode and wait for its acknowledgement."""
        char = text[0]
        timeout_s = timeout_s or self.ack_timeout_s
        for attempt in range(retries):
            with self._cond:
                self._text.clear()
            self._send(text)
            try:
                code, end = self._wait(
                    lambda c=char: bota.find_ack(bytes(self._text), c),
                    timeout_s,
                    f"reply to {text!r}",
                )
            except ReplyTimeoutError:
                if attempt + 1 == retries:
                    raise
                continue
            with self._cond:
                reply = bytes(self._text[:end]).decode("ascii", errors="replace")
            if code != 0:
                raise DeviceStatusError(
                    f"{self.link.name}: the sensor answered {text!r} with code {code}",
                    device=self.link.name,
                    code=code,
                )
            # The reply is what came after the command (a "w" dump, a "p" line, then the ack);
            # frames may precede the reply to "C": keep only the ack there.
            return reply[reply.rfind("r,") :] if char == bota.Cmd.CONFIG_MODE else reply.strip()
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ modes
    def _enter_config(self) -> str:
        with self._cond:
            self._run_mode = False
            self._switch_on_run_ack = False
        return self._exchange(bota.Cmd.CONFIG_MODE, retries=_COMMAND_RETRIES)

    def _enter_run(self) -> str:
        raw = self._pending_raw_output()
        with self._cond:
            self._raw_next = raw
            self._text.clear()
            self._switch_on_run_ack = True
            before = self._frames_judged()
        self._send(bota.Cmd.RUN_MODE)
        self._wait(lambda: self._run_mode, self.ack_timeout_s, "reply to 'R'")
        try:  # a frame the checks refuse shows the sensor streams too
            self._wait(
                lambda: self._frames_judged() > before,
                self.activation_timeout_s,
                "frame after 'R'",
            )
        except ReplyTimeoutError as e:
            raise TransportError(f"{self.link.name}: activation failed: {e}") from e
        return bota.ack(bota.Cmd.RUN_MODE)

    def _frames_judged(self) -> int:
        return self.frames_received + self.checks.rejected_total

    def _pending_raw_output(self) -> bota.RawOutput | None:
        """The raw output the next ``R`` puts in force: None while calibration use is on (or in
        run mode, where nothing is pending), else the calibration the ``w`` dump shows."""
        if self._run_mode:
            return self._screen.raw
        if self._use_calibration == 1:
            return None
        raw = bota.raw_output_of_dump(self._exchange(bota.Cmd.PRINT_CONFIG))
        self._use_calibration = 1 if raw is None else 0
        return raw

    def _startup(self, link: SerialLink) -> None:
        self._init_thread = threading.get_ident()
        with self._cond:
            self._screen.clock.restart()  # the sensor (re)boots: its clock starts again
            self._screen.raw = None  # until its R: the boot settings are unknown
        try:
            self._wait_boot()
            self._enter_config()
            if self.read_metadata:
                for _ in range(2):
                    self.metadata = (
                        bota.parse_metadata(self._exchange("p?").encode()) or self.metadata
                    )
            self._configure()
            self._enter_run()
        finally:
            self._init_thread = None

    def _wait_boot(self) -> None:
        def booted() -> bool:
            text = bytes(self._text)
            return bota.BOOT_BANNER.encode() in text or bool(bota.BotaStreamParser().feed(text))

        # A silent sensor may still be in configuration mode: "C" tells.
        with contextlib.suppress(ReplyTimeoutError):
            self._wait(booted, self.boot_timeout_s, "boot text or frames")

    def _configure(self) -> None:
        use = 0 if self._use_calibration == 0 else 1
        self._exchange(bota.cmd_comm_setup(0, use, 0, self.link.baudrate))
        self._use_calibration = use
        self._exchange(bota.cmd_filter(self._sinc))
        if self._offsets is not None:
            self._exchange(bota.cmd_offsets(self._offsets))
        if self._calibration is not None:
            for row in range(6):
                self._exchange(bota.cmd_calibration_row(row, self._calibration[row]))

    # ------------------------------------------------------------------ FtSensorDevice
    def command(self, text: str, timeout_s: float = 1.0) -> str:
        """Send one configuration command and return the sensor's reply (``r,0,<cmd>,0``).

        ``C`` and ``R`` switch modes; a setting sent in run mode is wrapped in ``C`` ... ``R`` so
        the stream resumes; ``I`` / ``#`` reset the sensor and rerun the start-up. A reply with a
        non-zero code raises ``DeviceStatusError``; a command while disconnected
        ``DisconnectedError``; an unknown or malformed command ``InvalidArgumentError``.
        """
        cmd = text.strip()
        parsed = bota.parse_command(cmd) if cmd else None
        if parsed is None or parsed.char not in _CONFIG_COMMANDS + "CRI#":
            raise InvalidArgumentError(
                f"unknown sensor command {text!r}; expected one of C c f b m s l w p? I # R"
            )
        if not self.link.ready:
            raise DisconnectedError(
                f"{self.link.name}: sensor is {self.link.state.value}; command {cmd!r} refused"
            )
        with self._cmd_lock:
            if parsed.char == bota.Cmd.CONFIG_MODE:
                return self._enter_config()
            if parsed.char == bota.Cmd.RUN_MODE:
                return self._enter_run()
            if parsed.char in (bota.Cmd.SOFT_RESET, bota.Cmd.HARD_RESET):
                with self._cond:
                    self._run_mode = False
                    self._text.clear()
                self._send(cmd)
                self._startup(self.link)
                return bota.BOOT_BANNER if parsed.char == bota.Cmd.SOFT_RESET else ""
            resume = self._run_mode
            if resume:
                self._enter_config()
            try:
                reply = self._exchange(cmd, timeout_s)
                self._remember(parsed)
            finally:
                if resume:
                    self._enter_run()
            return reply

    def _remember(self, parsed: bota.ParsedCommand) -> None:
        if parsed.char == bota.Cmd.FILTER:
            self._sinc = int(parsed.args[0])
        elif parsed.char == bota.Cmd.OFFSETS:
            self._offsets = np.array([float(v) for v in parsed.args])
        elif parsed.char == bota.Cmd.COMM_SETUP:
            self._use_calibration = int(parsed.args[1])
        elif parsed.char == bota.Cmd.LOAD:
            self._use_calibration = None  # the saved settings: read back before the next R

    def set_filter(
        self, sinc_length: int, chop: int = 0, fast: int = 0, fir_disable: int = 1
    ) -> str:
        """Filter and output rate (``51200 / sinc_length`` Hz)."""
        return self.command(bota.cmd_filter(sinc_length, chop, fast, fir_disable))

    def set_offsets(self, offsets) -> str:
        """Device offsets (6,) N, N m, subtracted from the output."""
        return self.command(bota.cmd_offsets(offsets))

    def set_calibration(self, matrix) -> None:
        """The 6x6 calibration matrix, one ``m<row>`` command per row, in one configuration visit."""
        m = np.asarray(matrix, float)
        if m.shape != (6, 6) or not np.all(np.isfinite(m)):
            raise InvalidArgumentError(
                f"calibration must be a finite 6x6 matrix, got shape {m.shape}"
            )
        with self._cmd_lock:
            self.command(bota.Cmd.CONFIG_MODE)
            try:
                for row in range(6):
                    self.command(bota.cmd_calibration_row(row, m[row]))
                self._calibration = m
            finally:
                self.command(bota.Cmd.RUN_MODE)
