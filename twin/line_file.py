"""``LineFile``: a text file that only ever holds whole lines and returns its write failures.

For files written from a control loop (the F/T log, the controller's data collection). ``append``
keeps a line in memory; ``flush`` writes the pending lines with ``os.write``. If a write fails
part-way (a full disk, a file size limit), the file is cut back to the last whole line written,
the lines that did not make it are dropped, and ``flush`` returns how many were written and lost
and why: nothing raises once the file is open, and no reader ever meets a partial line.
"""

from __future__ import annotations

import contextlib
import os
from typing import NamedTuple


class FlushResult(NamedTuple):
    """``written``: lines now on disk; ``lost``: lines dropped; ``error``: why, or None."""

    written: int
    lost: int
    error: str | None


class LineFile:
    """A file of whole lines at ``path``, created or truncated (module doc). ``open`` errors
    raise ``OSError``; everything after returns a ``FlushResult``. Not thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._size = 0  # bytes of whole lines on disk
        self._pending: list[bytes] = []

    @property
    def closed(self) -> bool:
        return self._fd is None

    @property
    def pending(self) -> int:
        """Lines appended and not yet written."""
        return len(self._pending)

    def append(self, line: str) -> None:
        """Keep one line (``line`` without its terminator, no newline inside) for the next flush."""
        self._pending.append(line.encode("utf-8") + b"\n")

    def flush(self) -> FlushResult:
        """Write the pending lines; on a failure keep the whole lines that made it (module doc)."""
        lines, self._pending = self._pending, []
        if self._fd is None:
            return FlushResult(0, len(lines), f"{self.path!r} is closed") if lines else _NOTHING
        if not lines:
            return _NOTHING
        data = b"".join(lines)
        done, error = 0, None
        while done < len(data):
            try:
                n = os.write(self._fd, data[done:])
            except OSError as e:
                error = f"writing {self.path!r} failed: {e.strerror or e}"
                break
            if n <= 0:
                error = f"writing {self.path!r} failed: no byte accepted"
                break
            done += n
        if error is None:
            self._size += done
            return FlushResult(len(lines), 0, None)
        whole = data.rfind(b"\n", 0, done) + 1  # bytes of the whole lines that made it
        written = data.count(b"\n", 0, whole)
        self._size += whole
        with contextlib.suppress(OSError):  # a device file (/dev/full) cannot be truncated
            os.ftruncate(self._fd, self._size)
            os.lseek(self._fd, self._size, os.SEEK_SET)
        return FlushResult(written, len(lines) - written, error)

    def close(self) -> FlushResult:
        """Flush and close; safe to call twice (the second call has nothing to do)."""
        if self._fd is None:
            return _NOTHING
        result = self.flush()
        fd, self._fd = self._fd, None
        try:
            os.close(fd)
        except OSError as e:
            return FlushResult(result.written, result.lost, f"closing {self.path!r} failed: {e}")
        return result


_NOTHING = FlushResult(0, 0, None)
