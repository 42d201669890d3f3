"""The one interface of the four transformers: configuration, setters, policy, reporting.

Subclasses supply the physics (``_resolve`` when the geometry changes, ``update`` and
``update_batch`` on one plain-arithmetic kernel); everything else lives here once.
"""

from __future__ import annotations

import logging
import math
import os
import time
import warnings
from typing import ClassVar

import numpy as np

from twin.transforms import _compiled
from twin.transforms import _scalar as s
from twin.transforms.codes import POLICY_TABLE, Condition, Policy, ReturnCode
from twin.transforms.config import (
    ENTRY_FIELDS,
    Origin,
    Rotation,
    TfConfig,
    TfConfigWarning,
    Translation,
    _Where,
    load_tf_config,
    parse_origin,
    parse_quaternion,
    parse_vector,
    validate_config,
)

_log = logging.getLogger("twin.transforms")
_OK = ReturnCode.OK
_SETTER_OF = {attr: key for attr, key, _ in ENTRY_FIELDS}
#: Rows per chunk in ``update_batch`` (the temporaries of a chunk stay in cache).
BATCH_CHUNK = 4096
#: ``_fast_out`` while the compiled fast path of ``update`` is off (never an ``out`` argument).
NOT_READY = object()
F64 = np.dtype(np.float64)


def now_us() -> int:
    """The default clock of time stamps when none is given: monotonic, integer microseconds."""
    return time.monotonic_ns() // 1000


def all_finite(values: tuple | list) -> bool:
    return all(math.isfinite(v) for v in values)


_IDENTITY7 = np.array([[0.0], [0.0], [0.0], [1.0], [0.0], [0.0], [0.0]])


def pose_columns(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns (7, N) of rows ``[tx, ty, tz, qw, qx, qy, qz]`` (N, 7) (views of ``rows``, so no
    copy, unless a row has to be replaced), the quaternion norms (N,), and the rows (N,) bool
    with a NaN, an infinity or a zero quaternion: those are replaced by the identity."""
    cols = rows.T
    qw, qx, qy, qz = cols[3:]
    norm = np.sqrt(qw * qw + qx * qx + qy * qy + qz * qz)
    bad = non_finite_rows(rows, axis=1) | (norm == 0.0)
    if bad.any():
        cols = np.ascontiguousarray(cols)
        cols[:, bad] = _IDENTITY7
        norm[bad] = 1.0
    return cols, norm, bad


def non_finite_rows(a: np.ndarray, axis: int) -> np.ndarray:
    """(N,) bool: the rows of ``a`` (reduced along ``axis``) holding a NaN or an infinity. A
    finite sum of the whole array proves every element finite (one fast flat pass); only
    otherwise is each row checked."""
    if np.isfinite(a.sum()):
        return np.zeros(a.shape[1 - axis], dtype=bool)
    return ~np.isfinite(a).all(axis=axis)


class TransformerBase:
    """Shared behaviour of ``WrenchTf``, ``TwistTf``, ``ImuTf`` and ``PoseTf``.

    Construct from a JSON file path (reads the class's section), a ``TfConfig``, or nothing (all
    entries "not set"). Entries given there are locked: their setters return False and warn.
    """

    #: JSON section read by this transformer.
    SECTION: ClassVar[str]
    #: Length of the signal vector.
    SIZE: ClassVar[int]
    #: Field names of the signal, for messages.
    FIELDS: ClassVar[str]

    def __init__(self, source: str | os.PathLike | TfConfig | None = None) -> None:
        if source is None:
            config, label = TfConfig(), ""
        elif isinstance(source, TfConfig):
            config, label = validate_config(source), "TfConfig"
        elif isinstance(source, (str, os.PathLike)):
            config, label = load_tf_config(source, self.SECTION), "JSON"
        else:
            raise TypeError(
                f"{type(self).__name__}: expected a JSON file path, a TfConfig or None, "
                f"got {type(source).__name__}"
            )
        where = _Where(os.fspath(source) if label == "JSON" else "TfConfig", self.SECTION)
        for attr, key, _ in ENTRY_FIELDS:
            entry = getattr(config, attr)
            self._check_entry(attr, entry.origin, where, key if label == "JSON" else attr)
        self._name = config.name
        self._policy = Policy(config.policy)
        self._table = POLICY_TABLE[self._policy]
        self._entries: dict[str, Translation | Rotation] = {
            attr: getattr(config, attr) for attr, _, _ in ENTRY_FIELDS
        }
        self._locked = {a for a, e in self._entries.items() if e.origin is not Origin.UNSET}
        self._unset = self._unset_entries()
        self._locked_label = label
        age = config.max_tf_age_s
        self._max_age_us = None if age is None else round(age * 1e6)
        self._last_code = _OK
        self._reason = ""
        self._standing: Condition | None = None
        self._standing_reason = ""
        self._code = _OK
        self._code_reason = ""
        self._dirty = True
        self._out_array: np.ndarray | None = None  # the last ``out`` array and a view on it
        self._out_view: memoryview | None = None
        # The compiled kernels (``_compiled``; None without numba), and the ``out`` array for
        # which ``update`` may take the compiled path: set after an OK update through the
        # checked path, ``NOT_READY`` again on any change of entries, transform or code.
        self._fast = _compiled.kernels()
        self._fast_out: object = NOT_READY

    # ----------------------------------------------------------------- metadata
    def name(self) -> str:
        """The configured name, or an empty string."""
        return self._name

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def last_code(self) -> ReturnCode:
        """The code of the last ``update``."""
        return self._last_code

    @property
    def reason(self) -> str:
        """Why the last ``update`` was not OK (empty if it was)."""
        return "" if self._last_code is _OK else self._reason

    def entry(self, attr: str) -> Translation | Rotation:
        """The current entry ``input_ref_point``, ``input_expr_axes``, ``output_ref_point`` or
        ``output_expr_axes`` (normalised values)."""
        return self._entries[attr]

    @property
    def uses_moving_frame(self) -> bool:
        return any(e.origin is Origin.MOVING for e in self._entries.values())

    # ----------------------------------------------------------------- setters
    def set_input_reference_point(self, origin: str, translation) -> bool:
        """Translation (3,) m from ``origin`` to the input reference point, in origin axes."""
        return self._set("input_ref_point", origin, translation)

    def set_input_expression_axes(self, origin: str, rotation) -> bool:
        """Unit quaternion (4,) ``[qw, qx, qy, qz]`` of the input axes relative to ``origin``."""
        return self._set("input_expr_axes", origin, rotation)

    def set_output_reference_point(self, origin: str, translation) -> bool:
        """Translation (3,) m from ``origin`` to the output reference point, in origin axes."""
        return self._set("output_ref_point", origin, translation)

    def set_output_expression_axes(self, origin: str, rotation) -> bool:
        """Unit quaternion (4,) ``[qw, qx, qy, qz]`` of the output axes relative to ``origin``."""
        return self._set("output_expr_axes", origin, rotation)

    def _set(self, attr: str, origin: str, value) -> bool:
        cls = type(self).__name__
        if attr in self._locked:
            warnings.warn(
                f"{cls}: {_SETTER_OF[attr][4:]} was loaded from {self._locked_label} and cannot "
                "be overridden from code.",
                TfConfigWarning,
                stacklevel=3,
            )
            return False
        setter = _SETTER_OF[attr]
        where = _Where(f"{cls}.{setter}", None)
        org = parse_origin(origin, where, "origin")
        if org is Origin.UNSET:
            raise where.error("origin", "is empty; expected 'fixed_frame' or 'moving_frame'")
        self._check_entry(attr, org, where, "origin")
        if attr.endswith("point"):
            entry = Translation(org, parse_vector(value, 3, where, "translation", "[x, y, z] m"))
        else:
            entry = Rotation(org, parse_quaternion(value, where, "rotation"))
        self._entries[attr] = entry
        self._entries_changed()
        return True

    def _check_entry(self, attr: str, origin: Origin | str, where: _Where, fld: str) -> None:
        """Hook: refuse an origin this transformer cannot use (raise ``TfConfigError``)."""

    def _entries_changed(self) -> None:
        self._unset = self._unset_entries()
        self._dirty = True
        self._fast_out = NOT_READY

    # ----------------------------------------------------------------- helpers for subclasses
    def _unset_entries(self) -> list[str]:
        return [_SETTER_OF[a] for a, e in self._entries.items() if e.origin is Origin.UNSET]

    def _begin_resolve(self) -> bool:
        """Reset the standing state; False (with ``NOT_SET`` standing) if an entry is unset."""
        self._dirty = False
        self._standing = None
        self._code = _OK
        self._code_reason = ""
        if self._unset:
            self._stand(
                Condition.NOT_SET,
                f"entries not set: {', '.join(self._unset)}; set them before update",
            )
            return False
        return True

    def _stand(self, cond: Condition, reason: str) -> None:
        """Record a condition that holds until the geometry changes; degrade or refuse."""
        outcome = self._table[cond]
        if outcome.computed:
            if outcome.code > self._code:
                self._code, self._code_reason = outcome.code, reason
        elif self._standing is None:
            self._standing, self._standing_reason = cond, reason

    def _fail(self, cond: Condition, reason: str, out):
        """Zero output with the policy's code for ``cond``."""
        code = self._table[cond].code
        if out is None:
            out = np.zeros(self.SIZE)
        else:
            for i in range(self.SIZE):
                out[i] = 0.0
        self._reason = reason
        if code is not self._last_code:
            self._report(code)
        return code, out

    def _report(self, code: ReturnCode) -> None:
        """Log on a change of code only (the hot path never formats messages while OK)."""
        self._last_code = code
        self._fast_out = NOT_READY
        label = f"{type(self).__name__}({self._name!r})"
        if code is _OK:
            _log.info("%s: back to OK", label)
        else:
            _log.warning("%s: %s: %s", label, code.name, self._reason)

    def _sink(self, out):
        """Where ``update`` writes its values: for a contiguous float64 (SIZE,) array a cached
        memoryview on it (item assignment through one costs half as much as on the array; a
        control loop passes the same array every time), else ``out`` itself."""
        if out is self._out_array:
            return self._out_view
        if (
            type(out) is np.ndarray
            and out.dtype == np.float64
            and out.shape == (self.SIZE,)
            and out.flags.c_contiguous
            and out.flags.writeable
        ):
            self._out_array, self._out_view = out, memoryview(out)
            return self._out_view
        return out

    def _arm_fast_path(self, out) -> None:
        """After an OK ``update`` through the checked path: let the next ones with this ``out``
        (a writable float64 (SIZE,) array) take the compiled path."""
        if (
            self._fast is not None
            and self._last_code is _OK
            and not self._dirty
            and self._standing is None
            and self._code is _OK
            and type(out) is np.ndarray
            and out.dtype is F64
            and out.shape == (self.SIZE,)
            and out.flags.writeable
        ):
            self._fast_out = out

    def _compiled_batch(self, run, n: int, out: np.ndarray, base_code: ReturnCode) -> np.ndarray:
        """Per-row codes (N,) int8 of a compiled batch kernel: ``run(zero_off, status, target)``
        writes the rows into ``target`` (``out``, or a float64 copy written back) and their
        statuses (``_compiled``'s: 0 computed, 1 off norm, 2 non-finite)."""
        status = np.empty(n, dtype=np.int8)
        writable = out.dtype is F64 and out.flags.writeable
        target = out if writable else np.empty(out.shape)
        off, bad = self._table[Condition.OFF_NORM], self._table[Condition.NON_FINITE]
        run(not off.computed, status, target)
        if not writable:
            out[...] = target
        base = int(base_code)
        lut = np.array([base, max(base, int(off.code)), max(base, int(bad.code))], dtype=np.int8)
        return lut[status]

    def _signal_error(self, value) -> ValueError:
        return ValueError(
            f"{type(self).__name__}.update: expected {self.SIZE} numbers {self.FIELDS}, "
            f"got {value!r}"
        )

    def _batch_input(self, x, out) -> tuple[np.ndarray, np.ndarray]:
        arr = np.asarray(x, dtype=float)
        if arr.ndim != 2 or arr.shape[1] != self.SIZE:
            raise ValueError(
                f"{type(self).__name__}.update_batch: expected an (N, {self.SIZE}) array of "
                f"{self.FIELDS}, got shape {arr.shape}"
            )
        if out is None:
            out = np.empty_like(arr)
        elif out.shape != arr.shape:
            raise ValueError(f"out must have shape {arr.shape}, got {out.shape}")
        return arr, out

    def _batch_codes(
        self,
        out: np.ndarray,
        bad: np.ndarray,
        off: np.ndarray | None,
        standing: Condition | None,
        base_code: ReturnCode,
    ) -> np.ndarray:
        """Per-row codes (N,) int8 for non-finite rows ``bad`` and off-norm rows ``off``
        (zeroing refused rows of ``out``), on top of ``standing`` / ``base_code``."""
        n = len(out)
        codes = np.full(n, int(base_code), dtype=np.int8)
        if standing is not None:
            codes[:] = int(self._table[standing].code)
            out[:] = 0.0
            return codes
        for cond, rows in ((Condition.OFF_NORM, off), (Condition.NON_FINITE, bad)):
            if rows is None or not rows.any():
                continue
            outcome = self._table[cond]
            codes[rows] = np.maximum(codes[rows], int(outcome.code))
            if not outcome.computed:
                out[rows] = 0.0
        return codes

    @staticmethod
    def _entry_matrix(entry: Rotation) -> s.Mat9:
        return s.quat_to_mat9(tuple(entry.rotation))
