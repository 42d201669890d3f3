"""``PtyPort``: the device end of a pseudo-terminal, with a stable path and unplug / replug.

The emulator holds the master side (raw mode, non-blocking); a driver opens the slave by path with
pyserial like any serial port. ``path`` is a symlink in ``link_dir`` to the current ``/dev/pts/N``,
so a port that is unplugged (``unplug``: the link disappears and the master closes, exactly what a
client sees when a USB adapter is pulled) and plugged back (``replug``) keeps its name. Writes
pass through the optional ``FaultInjector`` and are dropped while no client has the port open
(as bytes sent to a closed port are lost).
"""

from __future__ import annotations

import errno
import os
import select
import threading
import time
import tty
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from twin.hardware.emulator.faults import FaultInjector

_POLL_S = 0.02


class WriteResult(NamedTuple):
    """delivered: the client had the port open; damaged: bytes were corrupted or dropped."""

    delivered: bool
    damaged: bool


_IDLE_S = 0.005


class PtyPort:
    """One emulated serial port (module doc). ``on_data(bytes)`` gets what the client writes;
    ``on_client(connected)`` is told when a client opens or closes the port."""

    def __init__(
        self,
        name: str,
        on_data: Callable[[bytes], None],
        *,
        link_dir: Path | None = None,
        faults: FaultInjector | None = None,
        on_client: Callable[[bool], None] | None = None,
    ) -> None:
        self.name = name
        self.faults = faults
        self._on_data = on_data
        self._on_client = on_client
        self._link = Path(link_dir) / name if link_dir is not None else None
        self._lock = threading.Lock()
        self._fd: int | None = None
        self.pts_name = ""
        self._stop = threading.Event()
        self._client = False
        self.events: list[tuple[float, str]] = []
        self.dropped_bytes = 0
        self.writes = 0  # writes made while a client had the port open (frames, replies)
        self._plug()
        self._thread = threading.Thread(target=self._loop, name=f"emu-{name}", daemon=True)
        self._thread.start()

    @property
    def path(self) -> str:
        """The name a client opens (the stable symlink, or the pts name without ``link_dir``)."""
        return str(self._link) if self._link is not None else self.pts_name

    @property
    def thread(self) -> threading.Thread:
        """The thread that reads the client's bytes and runs the device's answers."""
        return self._thread

    @property
    def plugged(self) -> bool:
        return self._fd is not None

    @property
    def client_connected(self) -> bool:
        return self._client

    def input_waiting(self) -> bool:
        """Whether bytes from the client are waiting in the pty, not read yet (a device that
        keeps time of what it hears asks: they reached it, its reader thread has not run)."""
        fd = self._fd
        if fd is None:
            return False
        poller = select.poll()
        try:
            poller.register(fd, select.POLLIN)
            return any(mask & select.POLLIN for _, mask in poller.poll(0))
        except (OSError, ValueError):  # unplugged meanwhile
            return False

    # ----------------------------------------------------------------- plug / unplug
    def _plug(self) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line discipline, before any byte flows
        self.pts_name = os.ttyname(slave)
        os.close(slave)  # the client opens it by name; POLLHUP on the master until it does
        os.set_blocking(master, False)
        if self._link is not None:
            tmp = self._link.with_name(self._link.name + ".new")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.pts_name)
            tmp.replace(self._link)
        self._fd = master
        self.events.append((time.monotonic(), "plugged"))

    def unplug(self) -> float:
        """Pull the plug: the path disappears and the client's port fails. Returns the
        ``time.monotonic()`` at which the master closed."""
        with self._lock:
            fd, self._fd = self._fd, None
            if self._link is not None:
                self._link.unlink(missing_ok=True)
            t = time.monotonic()
            if fd is not None:
                os.close(fd)
            self.events.append((t, "unplugged"))
        self._set_client(False)
        return t

    def replug(self) -> None:
        """Plug the port back in (a new pseudo-terminal behind the same path)."""
        with self._lock:
            if self._fd is None and not self._stop.is_set():
                self._plug()

    def close(self) -> None:
        """Stop for good; safe to call twice."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=1.0)
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)
            if self._link is not None:
                self._link.unlink(missing_ok=True)

    # ----------------------------------------------------------------- I/O
    def write(self, data: bytes) -> WriteResult:
        """Send ``data`` to the client, through the fault injector. Nothing is sent (and no fault
        drawn) while no client has the port open."""
        if self._fd is None or not self._client:
            self.dropped_bytes += len(data)
            return WriteResult(False, False)
        damaged = False
        faults = self.faults
        if faults is not None and faults.armed:  # lock-free: nothing armed, nothing to draw
            if faults.delay_s:
                time.sleep(faults.delay_s)
            data, damaged = faults.apply(data)
        with self._lock:  # the one lock of a write: against unplug / close of the fd
            self.writes += 1
            fd = self._fd
            if fd is None or not data:
                self.dropped_bytes += len(data)
                return WriteResult(fd is not None, damaged)
            sent = 0
            try:
                sent = os.write(fd, data)
                while sent < len(data):
                    sent += os.write(fd, data[sent:])
            except OSError:  # BlockingIOError too: the client is not reading, the device drops
                self.dropped_bytes += len(data) - sent
            return WriteResult(True, damaged or sent < len(data))

    def _set_client(self, connected: bool) -> None:
        if connected != self._client:
            self._client = connected
            self.events.append((time.monotonic(), "client_open" if connected else "client_closed"))
            if self._on_client is not None:
                self._on_client(connected)

    def _loop(self) -> None:
        _fine_timer_slack()
        poller_fd = None
        poller = None
        while not self._stop.is_set():
            fd = self._fd
            if fd is None:
                time.sleep(_IDLE_S)
                continue
            if fd != poller_fd:
                poller = select.poll()
                poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
                poller_fd = fd
            try:
                events = poller.poll(_POLL_S * 1000)
            except (OSError, ValueError):
                poller_fd = None
                continue
            if not events:
                if fd == self._fd and _has_client(fd):
                    self._set_client(True)
                continue
            mask = events[0][1]
            if mask & select.POLLNVAL:
                poller_fd = None
                continue
            if mask & select.POLLIN:
                try:
                    data = os.read(fd, 4096)
                except BlockingIOError:
                    continue
                except OSError as e:
                    if e.errno != errno.EIO:
                        poller_fd = None
                    data = b""
                if data:
                    self._set_client(True)
                    if self.faults is not None and self.faults.armed_in:  # a forged instruction
                        data = self.faults.apply_in(data)
                    self._on_data(data)
                    continue
            if mask & (select.POLLHUP | select.POLLERR):
                if fd == self._fd:
                    self._set_client(False)
                time.sleep(_IDLE_S)


def _has_client(fd: int) -> bool:
    p = select.poll()
    p.register(fd, select.POLLHUP)
    try:
        return not any(m & select.POLLHUP for _, m in p.poll(0))
    except OSError:
        return False


def _fine_timer_slack() -> None:
    """Let this thread's sleeps end within a microsecond of their time (Linux ``PR_SET_TIMERSLACK``;
    the default slack of 50 us would add to every paced reply of a wire-timed device). Elsewhere,
    or without ctypes, nothing changes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_TIMERSLACK, 1000, 0, 0, 0)
    except (OSError, AttributeError, ImportError):
        pass


_PR_SET_TIMERSLACK = 29
