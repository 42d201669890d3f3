"""CSV logging of published wrenches with decimation and exact missed-entry accounting.

File layout: one comment line naming the frame, units and decimation, one header row, then one
row per logged sample::

    # twin F/T log; frame: sensor (intrinsic: body-fixed); force N, torque N m; time us; decimation 10
    t_us,fx_N,fy_N,fz_N,tx_Nm,ty_Nm,tz_Nm
    1005000,0.0123,...

Decimation counts the samples the backend received (``Robot.wrench_samples``): sample ``k``
(``k = 0`` is the first after the log starts) is due when ``k % decimation == 0``. ``total``
counts every due sample, ``missed`` the due samples that are not on disk: lost to the backend's
queue overflow (``skip``) or to a failed write. Both are exact. Rows are kept in memory and
written whenever a second of sensor time or of wall time has passed, so a crash loses at most
about the last second; the file only ever holds whole rows (``twin.line_file``).

A write failure never raises: its rows count as missed, and ``fault`` says what failed (it stays
set for the rest of the session; ``faults`` counts the failed writes). Only opening the file and
writing its header can raise (``FtSystemError``), when the log starts.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from twin.line_file import FlushResult, LineFile
from twin.sensors.errors import FtSystemError, InvalidArgumentError

FLUSH_INTERVAL_S = 1.0
HEADER_COLUMNS = "t_us,fx_N,fy_N,fz_N,tx_Nm,ty_Nm,tz_Nm"
_log = logging.getLogger("twin.sensors")


class WrenchLog:
    """One CSV log file (module doc). ``frame`` and ``frame_doc`` go into the header line."""

    def __init__(self, path: str, decimation: int, frame: str, frame_doc: str) -> None:
        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"log path must be a non-empty string, got {path!r}")
        if isinstance(decimation, bool) or not isinstance(decimation, (int, np.integer)):
            raise InvalidArgumentError(f"decimation must be an integer >= 1, got {decimation!r}")
        if decimation < 1:
            raise InvalidArgumentError(f"decimation must be an integer >= 1, got {decimation}")
        self.path = path
        self.frame = frame
        self.decimation = int(decimation)
        self.missed = 0
        self.total = 0
        self.faults = 0
        #: The first write failure of this log, or None.
        self.fault: str | None = None
        self._index = -1  # received samples since the log started, minus one
        try:
            self._file: LineFile | None = LineFile(path)
        except OSError as e:
            raise FtSystemError(e.errno or -1, f"cannot open log {path!r}: {e.strerror}") from e
        self._file.append(
            f"# twin F/T log; frame: {frame} ({frame_doc}); force N, torque N m; time us; "
            f"decimation {self.decimation}"
        )
        self._file.append(HEADER_COLUMNS)
        header = self._file.flush()
        if header.error is not None:
            self._file.close()
            self._file = None
            raise FtSystemError(-1, f"cannot start log {path!r}: {header.error}")
        self._flushed_t_us: int | None = None
        self._flushed_wall = time.monotonic()

    @property
    def closed(self) -> bool:
        return self._file is None

    def skip(self, samples: int) -> None:
        """``samples`` received samples that never reached the service (a queue overflow): the
        due ones among them are missed."""
        if self._file is None or samples <= 0:
            return
        d, before = self.decimation, self._index
        self._index += samples
        due = self._index // d - before // d  # (-1) // d is -1: right for the first samples too
        self.total += due
        self.missed += due

    def record(self, t_us: int, wrench) -> None:
        """One received sample ``wrench`` (6,) (an array or a list of floats) at ``t_us``;
        written if due."""
        if self._file is None:
            return
        self._index += 1
        if self._index % self.decimation == 0:
            self.total += 1
            values = wrench.tolist() if isinstance(wrench, np.ndarray) else wrench
            self._file.append(f"{t_us},{','.join(map(repr, map(float, values)))}")
        if self._flushed_t_us is None:
            self._flushed_t_us = t_us
        now = time.monotonic()
        if (
            t_us - self._flushed_t_us >= FLUSH_INTERVAL_S * 1e6
            or now - self._flushed_wall >= FLUSH_INTERVAL_S
        ):
            self.flush()
            self._flushed_t_us, self._flushed_wall = t_us, now

    def flush(self) -> None:
        """Write the pending rows; a failure counts them as missed and sets ``fault``."""
        if self._file is not None:
            self._account(self._file.flush())

    def close(self) -> None:
        """Write the pending rows and close; safe to call twice."""
        file, self._file = self._file, None
        if file is not None:
            self._account(file.close())

    def _account(self, result: FlushResult) -> None:
        if result.error is None:
            return
        self.missed += result.lost
        self.faults += 1
        if self.fault is None:
            self.fault = f"F/T log {self.path!r}: {result.error}; {result.lost} row(s) missed"
            _log.error("%s (later failures are counted in log_info)", self.fault)

    @staticmethod
    def same_file(a: str, b: str) -> bool:
        return os.path.abspath(a) == os.path.abspath(b)
