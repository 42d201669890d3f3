"""``CsvDataCollection``: every registered source, one CSV row per collection, never silently lost.

Columns: ``t_us``, then one per element of each source in registration order (``prefix`` for a
one-element source, ``prefix[i]`` otherwise). The header is written at the first collection,
after which the set of sources is fixed. Each row is written to the operating system when it is
collected, through ``twin.line_file.LineFile``: the file only ever holds whole rows (a write
that fails part-way, on a full disk, is cut back), so ``load_csv`` reads whatever made it. A
row that cannot be written is counted in ``rows_dropped``, its reason kept in ``error`` and
logged (once per new reason), and ``collect_data`` returns ``False`` (the controller then
reports a fault of the collection, without changing the policy's rate): no row goes missing
without a trace, and nothing raises.
"""

from __future__ import annotations

import logging
import os
import pathlib

import numpy as np

from twin.control.interfaces import DataCollectionInterface
from twin.line_file import LineFile

__all__ = ["CsvDataCollection", "load_csv"]

logger = logging.getLogger(__name__)
_FLOAT_FORMAT = ".9g"  # round-trips float32 values


class CsvDataCollection(DataCollectionInterface):
    """Writes ``path`` (CSV); see the module docstring. A context manager; ``close()`` is idempotent."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = pathlib.Path(path)
        self._sources: dict[str, np.ndarray] = {}
        self._file: LineFile | None = None
        self._header_written = False
        self._logged = False
        self._started = False
        self._closed = False
        self.rows_written = 0
        self.rows_dropped = 0
        #: Reason of the last refused registration or failed write, else ``None``.
        self.error: str | None = None

    def register_data_source(self, prefix: str, data: np.ndarray) -> bool:
        """Register a live array view (read at each collection). Re-registering a prefix replaces it.

        Refused (``False``, reason in ``error``) after the first collection or for a prefix
        containing a comma, quote or newline.
        """
        if self._started:
            self.error = f"cannot register {prefix!r}: collection to {str(self.path)!r} has started (columns are fixed)"
            return False
        if any(ch in prefix for ch in ',"\n\r') or not prefix:
            self.error = (
                f"data source name {prefix!r} must be non-empty without commas, quotes or newlines"
            )
            return False
        self._sources[prefix] = np.asarray(data).reshape(-1)
        return True

    def columns(self) -> list[str]:
        cols = ["t_us"]
        for prefix, view in self._sources.items():
            cols += [prefix] if view.size == 1 else [f"{prefix}[{i}]" for i in range(view.size)]
        return cols

    def collect_data(self, t_us: int) -> bool:
        """Append one row with every source's current values; ``False`` if it was not written."""
        if self._closed:
            return self._drop(f"collection to {str(self.path)!r} is closed")
        try:
            if not self._started:
                self._started = True
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = LineFile(self.path)
            elif self._file is None:
                self._file = LineFile(self.path)  # opening failed before: try again
        except OSError as e:
            return self._drop(f"opening {str(self.path)!r} failed: {e}")
        fields = [str(int(t_us))]
        for view in self._sources.values():
            fields += [format(float(x), _FLOAT_FORMAT) for x in view.tolist()]
        if not self._header_written:
            self._file.append(",".join(self.columns()))
        self._file.append(",".join(fields))
        result = self._file.flush()
        if result.error is not None:
            if not self._header_written and result.written:
                self._header_written = True  # the header made it, the row did not
            return self._drop(f"writing row at t_us={t_us}: {result.error}")
        self._header_written = True
        self.rows_written += 1
        return True

    def _drop(self, reason: str) -> bool:
        self.rows_dropped += 1
        if not self._logged:
            self._logged = True
            logger.error("data collection: %s (later failures are counted in rows_dropped)", reason)
        self.error = reason
        return False

    def close(self) -> None:
        """Close the file (rows are already written); safe to call twice."""
        self._closed = True
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def __enter__(self) -> CsvDataCollection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_csv(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read a file written by ``CsvDataCollection``: ``{"t_us": (rows,) int64, prefix: (rows, size)}``."""
    path = pathlib.Path(path)
    with path.open(encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split(",")
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2, dtype=float)
    out: dict[str, list[int]] = {}
    for i, col in enumerate(header):
        out.setdefault(col.split("[", 1)[0] if col.endswith("]") else col, []).append(i)
    result = {name: data[:, cols] for name, cols in out.items()}
    result["t_us"] = data[:, 0].astype(np.int64)
    return result
