"""Helpers of the CLI tests: run ``twin`` as a subprocess, run ``twin emulate`` beside a test."""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import subprocess
import sys
import threading
from collections.abc import Iterator

#: PyBullet prints this banner on stderr when it is imported (a C-level printf we cannot stop).
PYBULLET_BANNER = re.compile(r"^pybullet build time: .*$")
TWIN = [sys.executable, "-m", "twin"]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any TWIN_* variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TWIN_")}
    env.update(extra)
    return env


def stderr_lines(stderr: str) -> list[str]:
    """The lines of ``stderr`` that are twin's (without PyBullet's import banner and without
    warnings, one line each: a slow control loop on a loaded machine warns once)."""
    return [
        line
        for line in stderr.splitlines()
        if line and not PYBULLET_BANNER.match(line) and ": warning: " not in line
    ]


def twin(*args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd=None):
    """Run ``python -m twin ARGS``; the ``CompletedProcess`` (text)."""
    return subprocess.run(
        [*TWIN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean_env() if env is None else env,
        cwd=cwd,
        check=False,
    )


class Emulators:
    """A running ``twin emulate`` process: ``ports`` (name -> link path), ``pts`` (name -> the
    /dev/pts device), ``config`` (the hardware TOML it wrote), ``lines`` (its stdout so far)."""

    def __init__(self, proc: subprocess.Popen, link_dir: pathlib.Path) -> None:
        self.proc, self.link_dir = proc, link_dir
        self.ports: dict[str, str] = {}
        self.pts: dict[str, str] = {}
        self.config: pathlib.Path | None = None
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            m = re.match(r"^(servo_bus|ft_sensor|imu)\s+(\S+) -> (\S+)", line)
            if m:
                self.ports[m.group(1)], self.pts[m.group(1)] = m.group(2), m.group(3)
            m = re.match(r"^config\s+(\S+)", line)
            if m:
                self.config = pathlib.Path(m.group(1))
            if "ready" in line:
                self.ready.set()

    def stop(self, timeout: float = 30) -> int:
        """SIGINT (its documented stop), wait; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(2)
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code


@contextlib.contextmanager
def emulators(link_dir: pathlib.Path, *args: str, timeout: float = 120) -> Iterator[Emulators]:
    """``twin emulate --link-dir LINK_DIR ARGS`` running for the block (stopped after)."""
    proc = subprocess.Popen(
        [*TWIN, "emulate", "--link-dir", str(link_dir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    emu = Emulators(proc, link_dir)
    try:
        if not emu.ready.wait(timeout):
            raise TimeoutError(f"twin emulate not ready within {timeout} s: {emu.lines}")
        yield emu
    finally:
        emu.stop()
        proc.stderr.close()


def open_pts(pid: int) -> set[str]:
    """The /dev/pts devices process ``pid`` has open (empty once it is gone)."""
    fd_dir = pathlib.Path(f"/proc/{pid}/fd")
    out = set()
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("/dev/pts/"):
                    out.add(target)
    return out


def processes_with_env(marker: str) -> list[int]:
    """Pids of live processes whose environment holds ``marker`` (``NAME=value``)."""
    found = []
    needle = marker.encode()
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found
