"""``SerialLink``: one serial port, a reader thread that owns it, and reconnection with back-off.

The reader thread (one ``poll`` and one ``read`` per wake-up) feeds a ``LinkProtocol`` (``connection_made``, ``data_received`` with immutable
``bytes``, ``connection_lost``), after pyserial's ``serial.threaded`` (docs/style.md #6). Every exit of
the reader passes through ``_lost``, which records why. When a port disappears the link keeps
retrying to open it (back-off doubling from ``backoff_initial_s`` to ``backoff_max_s``) and runs the
device's ``on_connect`` initialisation before it reports itself ready again. Writes are refused
with ``DisconnectedError`` while it is not ready. A request-reply bus (``direct_read``) reads its
replies in the thread that waits for them (``receive``); its reader thread only watches for the
port's loss, so a reply costs one thread wake-up, not two.
"""

from __future__ import annotations

import contextlib
import enum
import math
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import serial
from twin.hardware.config import ReconnectConfig
from twin.hardware.errors import DisconnectedError, TransportError

_READ_SIZE = 65536  # bytes taken per wake-up of a reader (more than any burst of ours)


class LinkProtocol:
    """What a device driver implements to receive the bytes of its port."""

    def connection_made(self, link: SerialLink) -> None:
        """The port is open (before ``on_connect`` runs)."""

    def data_received(self, data: bytes) -> None:
        """Bytes read from the port, in order (called in the reader thread)."""

    def connection_lost(self, reason: str, exc: BaseException | None) -> None:
        """The port is gone or was closed; ``reason`` says why."""


class LinkedDevice(LinkProtocol):
    """A driver that owns one ``SerialLink`` (``self.link``): the lifecycle all drivers share."""

    link: SerialLink

    def open(self: _Device) -> _Device:
        self.link.open()
        return self

    def close(self) -> None:
        """Close the port; safe to call twice."""
        self.link.close()

    def __enter__(self: _Device) -> _Device:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ready(self) -> bool:
        return self.link.ready


_Device = TypeVar("_Device", bound=LinkedDevice)


class LinkState(enum.Enum):
    CLOSED = "closed"
    CONNECTING = "connecting"  # port open, device initialisation running
    READY = "ready"
    LOST = "lost"  # port gone; reconnection with back-off running


@dataclass(frozen=True)
class LinkEvent:
    """``t_s``: ``time.monotonic()`` of the event; ``kind``: ready | lost | retry_failed | closed."""

    t_s: float
    link: str
    kind: str
    detail: str


class SerialLink:
    """A serial port owned by a reader thread (module doc)."""

    def __init__(
        self,
        name: str,
        port: str,
        baudrate: int,
        protocol: LinkProtocol,
        *,
        on_connect: Callable[[SerialLink], None] | None = None,
        reconnect: ReconnectConfig | None = None,
        read_timeout_s: float = 0.05,
        direct_read: bool = False,
    ) -> None:
        self.name, self.port, self.baudrate = name, port, baudrate
        self.protocol = protocol
        #: The device reads its bytes itself, in the thread that waits for them (``receive``): a
        #: request-reply bus, whose device sends only answers. The reader thread then only
        #: watches for the port's loss (a hang-up), and is not woken by every reply.
        self.direct_read = direct_read
        self._direct: tuple[serial.Serial, int, select.poll] | None = None
        self._on_connect = on_connect
        self._reconnect = reconnect or ReconnectConfig()
        self._read_timeout_s = read_timeout_s
        self._lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._state = LinkState.CLOSED
        self._changed = threading.Condition(self._lock)
        self._ser: serial.Serial | None = None
        self._gen = 0
        self._closing = threading.Event()
        self._reconnecting = False
        self._threads: list[threading.Thread] = []
        self.events: list[LinkEvent] = []
        self.listeners: list[Callable[[LinkEvent], None]] = []
        self.bytes_in = 0
        self.bytes_out = 0

    # ----------------------------------------------------------------- state
    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def closing(self) -> threading.Event:
        """Set once ``close()`` starts: long waits in ``on_connect`` should give up on it."""
        return self._closing

    @property
    def ready(self) -> bool:
        return self._state is LinkState.READY

    def wait_ready(self, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._state is LinkState.READY, timeout_s)

    def wait_state(self, state: LinkState, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._state is state, timeout_s)

    def _event(
        self, kind: str, detail: str, t_s: float | None = None, *, notify: bool = True
    ) -> LinkEvent:
        """Record an event (callers hold ``_lock`` when it goes with a state change, so the two are
        seen together) and, unless ``notify`` is False, tell the listeners."""
        ev = LinkEvent(time.monotonic() if t_s is None else t_s, self.name, kind, detail)
        self.events.append(ev)
        if notify:
            self._notify(ev)
        return ev

    def _notify(self, ev: LinkEvent) -> None:
        for fn in list(self.listeners):
            fn(ev)

    def _set_state(self, state: LinkState) -> None:
        self._state = state
        self._changed.notify_all()

    def reader_cpu_s(self) -> float:
        """CPU seconds the current reader thread has used (0.0 when none runs): what receiving
        costs the host, apart from the thread that waits for the data."""
        readers = [t for t in self._threads if t.is_alive() and t.name.endswith("-reader")]
        return sum(thread_cpu_s(t) for t in readers)

    # ----------------------------------------------------------------- open / close
    def open(self) -> None:
        """Open the port and run the device initialisation; ``TransportError`` if either fails."""
        if self._closing.is_set():
            raise TransportError(f"{self.name}: link was closed; create a new one")
        self._connect()

    def _connect(self) -> None:
        try:
            ser = serial.Serial(
                self.port,
                self.baudrate,
                timeout=self._read_timeout_s,
                write_timeout=1.0,
                exclusive=True,
            )
        except (serial.SerialException, OSError, ValueError) as e:
            raise TransportError(
                f"{self.name}: cannot open {self.port} at {self.baudrate} baud: {e}"
            ) from e
        with self._lock:
            self._gen += 1
            gen = self._gen
            self._ser = ser
            if self.direct_read:
                poller = select.poll()
                poller.register(ser.fileno(), select.POLLIN | select.POLLPRI)
                self._direct = (ser, ser.fileno(), poller)
            self._set_state(LinkState.CONNECTING)
        reader = threading.Thread(
            target=self._read_loop, args=(gen, ser), name=f"{self.name}-reader", daemon=True
        )
        self._threads.append(reader)
        reader.start()
        try:
            self.protocol.connection_made(self)
            if self._on_connect is not None:
                self._on_connect(self)
        except Exception as e:
            self._drop(gen)
            if isinstance(e, TransportError):
                raise
            raise TransportError(
                f"{self.name}: device initialisation on {self.port} failed: {e}"
            ) from e
        with self._lock:
            if gen != self._gen or self._state is not LinkState.CONNECTING:
                raise DisconnectedError(f"{self.name}: {self.port} was lost during initialisation")
            self._set_state(LinkState.READY)
            self._reconnecting = False  # a later loss starts a new reconnection loop
            ev = self._event("ready", f"{self.port} open and initialised", notify=False)
        self._notify(ev)

    def _drop(self, gen: int) -> None:
        with self._lock:
            if gen != self._gen:
                return
            self._gen += 1
            ser, self._ser = self._ser, None
            if self._state is not LinkState.CLOSED:
                self._set_state(LinkState.LOST)
        _close_quietly(ser)

    def close(self) -> None:
        """Stop the reader and reconnection, close the port. Safe to call twice."""
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
            self._gen += 1
            ser, self._ser = self._ser, None
            self._set_state(LinkState.CLOSED)
        _close_quietly(ser)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=2.0)
        self._event("closed", "closed by the host")

    # ----------------------------------------------------------------- I/O
    def write(self, data: bytes, *, connecting: bool = False) -> None:
        """Write ``data``; refused with ``DisconnectedError`` unless ready (or, with
        ``connecting``, during the device initialisation)."""
        allowed = (LinkState.READY, LinkState.CONNECTING) if connecting else (LinkState.READY,)
        with self._write_lock:
            ser, state = self._ser, self._state
            if ser is None or state not in allowed:
                raise DisconnectedError(
                    f"{self.name}: {self.port} is {state.value}; command refused"
                )
            try:
                # One write(2) of the descriptor; pyserial's ``write`` (a select for every write,
                # to honour its write timeout) only for what the port did not take at once.
                try:
                    sent = os.write(ser.fileno(), data)
                except BlockingIOError:
                    sent = 0
                if sent < len(data):
                    ser.write(data[sent:])
            except (serial.SerialException, OSError, TypeError, AttributeError) as e:
                raise DisconnectedError(f"{self.name}: write to {self.port} failed: {e}") from e
            self.bytes_out += len(data)

    def receive(self, timeout_s: float) -> bytes:
        """A ``direct_read`` link: the bytes waiting, after up to ``timeout_s`` for the first
        (``b""`` if none came; 0: none waiting), read in the calling thread with one ``poll``
        and one ``read``.
        ``DisconnectedError`` if the port is gone or hung up."""
        direct = self._direct
        ser = self._ser
        if direct is None or ser is None or direct[0] is not ser:
            raise DisconnectedError(f"{self.name}: {self.port} is {self._state.value}")
        _, fd, poller = direct
        try:
            # a zero timeout asks whether bytes wait (a port in pyserial's mode reads b"" when
            # none do, which would be taken for a hang-up)
            if not poller.poll(max(1, math.ceil(timeout_s * 1e3)) if timeout_s > 0 else 0):
                return b""
            if self._ser is not ser:  # closed or lost while waiting
                raise DisconnectedError(f"{self.name}: {self.port} is {self._state.value}")
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return b""
        except (OSError, ValueError) as e:
            raise DisconnectedError(f"{self.name}: read from {self.port} failed: {e}") from e
        if not data:
            raise DisconnectedError(f"{self.name}: {self.port} hung up")
        self.bytes_in += len(data)
        return data

    def _read_loop(self, gen: int, ser: serial.Serial) -> None:
        """Wait for the port with one ``poll`` and take every byte waiting with one ``read`` of
        its descriptor (pyserial's ``read`` costs two selects, two reads and three ioctls per
        burst: this thread wakes once per reply). A hang-up, an error or an empty read of a
        readable port is the port lost."""
        reason, exc = "closed by the host", None
        fd = ser.fileno()
        poller = select.poll()
        # a direct-read link's bytes are read by its device (``receive``): here only the loss of
        # the port, which poll reports whatever is asked (POLLHUP, POLLERR, POLLNVAL)
        poller.register(fd, 0 if self.direct_read else select.POLLIN | select.POLLPRI)
        # pyserial's cancel_read (in close) writes to this pipe: it ends the poll at once, so the
        # port's file (and its exclusive lock) is released when it is closed, not a poll later
        abort = getattr(ser, "pipe_abort_read_r", None)
        if abort is not None:
            poller.register(abort, select.POLLIN)
        timeout_ms = max(1, round(self._read_timeout_s * 1e3))
        read, poll, deliver = os.read, poller.poll, self.protocol.data_received
        try:
            while gen == self._gen:
                events = poll(timeout_ms)
                if not events or gen != self._gen:
                    continue
                mask = next((m for f, m in events if f == fd), 0)
                if not mask:  # only the abort pipe: closed by the host
                    break
                if mask & select.POLLNVAL:
                    raise serial.SerialException(f"{self.port} was closed")
                readable = mask & (select.POLLIN | select.POLLPRI) and not self.direct_read
                data = read(fd, _READ_SIZE) if readable else b""
                if not data:
                    raise serial.SerialException(
                        f"{self.port} hung up (device disconnected or multiple access on port?)"
                    )
                if gen == self._gen:
                    self.bytes_in += len(data)
                    deliver(data)
        except (serial.SerialException, OSError, TypeError, AttributeError, ValueError) as e:
            reason, exc = f"port lost: {e}", e
        except Exception as e:  # a protocol bug must not kill the link silently
            reason, exc = f"protocol handler raised {type(e).__name__}: {e}", e
        finally:
            self._lost(gen, reason, exc)

    def _lost(self, gen: int, reason: str, exc: BaseException | None) -> None:
        t = time.monotonic()
        with self._lock:
            if gen != self._gen:
                return  # closed or dropped on purpose: already handled
            self._gen += 1
            ser, self._ser = self._ser, None
            self._set_state(LinkState.LOST)
            start = not self._reconnecting and not self._closing.is_set()
            self._reconnecting = self._reconnecting or start
            ev = self._event("lost", reason, t, notify=False)
        self._notify(ev)
        _close_quietly(ser)
        self.protocol.connection_lost(reason, exc)
        if start:
            th = threading.Thread(
                target=self._reconnect_loop, name=f"{self.name}-reconnect", daemon=True
            )
            self._threads = [x for x in self._threads if x.is_alive()] + [th]
            th.start()

    def _reconnect_loop(self) -> None:
        delay = self._reconnect.backoff_initial_s
        while not self._closing.wait(delay):
            try:
                self._connect()
                return
            except TransportError as e:
                self._event("retry_failed", str(e))
                delay = min(2.0 * delay, self._reconnect.backoff_max_s)


def thread_cpu_s(thread: threading.Thread) -> float:
    """CPU seconds of a running ``thread`` (its POSIX CPU clock; 0.0 if it has ended)."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (OSError, TypeError):
        return 0.0


def _close_quietly(ser: serial.Serial | None) -> None:
    if ser is None:
        return
    with contextlib.suppress(Exception):
        ser.cancel_read()
    with contextlib.suppress(Exception):
        ser.close()
