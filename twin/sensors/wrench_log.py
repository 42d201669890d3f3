"""CSV logging of published wrenches with decimation and missed-entry accounting.

File layout: one comment line naming the frame, units and decimation, one header row, then one
row per logged sample::

    # twin F/T log; frame: sensor (intrinsic: body-fixed); force N, torque N m; time us; decimation 10
    t_us,fx_N,fy_N,fz_N,tx_Nm,ty_Nm,tz_Nm
    1005000,0.0123,...

Decimation counts sensor samples, including samples the service never saw (the sensor ran
faster than the control loop; their number comes from the time stamps): sample ``k`` (``k = 0``
is the first after the log starts) is due when ``k % decimation == 0``. A due sample that was not
written (never seen, or a failed write) counts as missed; ``total`` counts every due sample.
Rows are buffered and flushed whenever a second of sensor time or of wall time has passed since
the last flush, so a crash loses at most about the last second.
"""

from __future__ import annotations

import os
import time

import numpy as np

from twin.sensors.errors import FtSystemError, InvalidArgumentError

FLUSH_INTERVAL_S = 1.0
HEADER_COLUMNS = "t_us,fx_N,fy_N,fz_N,tx_Nm,ty_Nm,tz_Nm"


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
        self._index = -1  # implied sample index of the last sample seen
        try:
            self._fh = open(path, "w", encoding="ascii", newline="\n")  # noqa: SIM115 - held open
            self._fh.write(
                f"# twin F/T log; frame: {frame} ({frame_doc}); force N, torque N m; time us; "
                f"decimation {self.decimation}\n{HEADER_COLUMNS}\n"
            )
            self._fh.flush()
        except OSError as e:
            raise FtSystemError(e.errno or -1, f"cannot open log {path!r}: {e.strerror}") from e
        self._flushed_t_us: int | None = None
        self._flushed_wall = time.monotonic()

    @property
    def closed(self) -> bool:
        return self._fh is None

    def record(self, t_us: int, wrench: np.ndarray, advance: int) -> None:
        """One new sample ``wrench`` (6,) at ``t_us``; ``advance`` = sensor samples since the
        previous one seen (1 when none was skipped)."""
        if self._fh is None:
            return
        first = self._index < 0
        previous = self._index
        self._index = 0 if first else previous + max(1, advance)
        d = self.decimation
        if not first:
            # due samples strictly between the previous and this one were never seen
            skipped_due = (self._index - 1) // d - previous // d
            self.missed += skipped_due
            self.total += skipped_due
        if self._index % d == 0:
            self.total += 1
            try:
                self._fh.write(f"{t_us},{','.join(repr(float(v)) for v in wrench)}\n")
            except OSError:
                self.missed += 1
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
        if self._fh is not None:
            try:
                self._fh.flush()
            except OSError as e:
                raise FtSystemError(e.errno or -1, f"cannot write log {self.path!r}: {e}") from e

    def close(self) -> None:
        """Flush and close; safe to call twice."""
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError as e:
                raise FtSystemError(e.errno or -1, f"cannot close log {self.path!r}: {e}") from e

    @staticmethod
    def same_file(a: str, b: str) -> bool:
        return os.path.abspath(a) == os.path.abspath(b)
