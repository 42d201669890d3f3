"""Per-axis low-pass filtering of wrench samples: a 2nd-order Butterworth biquad per axis.

Design (bilinear transform with pre-warping, RBJ/Butterworth ``Q = 1/sqrt(2)``) for cut-off
``fc`` Hz at sample rate ``fs`` Hz, ``K = tan(pi fc / fs)``::

    b0 = b2 = K^2 / (1 + sqrt(2) K + K^2),  b1 = 2 b0
    a1 = 2 (K^2 - 1) / (1 + sqrt(2) K + K^2),  a2 = (1 - sqrt(2) K + K^2) / (1 + sqrt(2) K + K^2)

Unit gain at DC, -3 dB at ``fc``, -40 dB/decade above. Run as direct form II transposed, all six
axes at once. A cut-off of 0 switches the axis's filter off (output = input); a cut-off at or
above Nyquist (``fs / 2``) cannot be designed and is refused by ``LowPassBank.design``.
"""

from __future__ import annotations

import math

import numpy as np

SQRT2 = math.sqrt(2.0)


def butterworth_biquad(fc_hz: float, fs_hz: float) -> tuple[float, float, float, float, float]:
    """``(b0, b1, b2, a1, a2)`` of the 2nd-order Butterworth low-pass (module doc);
    ``(1, 0, 0, 0, 0)`` (pass-through) for ``fc_hz == 0``. Requires ``0 <= fc < fs / 2``."""
    if fc_hz == 0.0:
        return (1.0, 0.0, 0.0, 0.0, 0.0)
    if not (0.0 < fc_hz < 0.5 * fs_hz):
        raise ValueError(f"cut-off {fc_hz} Hz must be in (0, {0.5 * fs_hz}) Hz (Nyquist)")
    k = math.tan(math.pi * fc_hz / fs_hz)
    k2 = k * k
    norm = 1.0 / (1.0 + SQRT2 * k + k2)
    b0 = k2 * norm
    return (b0, 2.0 * b0, b0, 2.0 * (k2 - 1.0) * norm, (1.0 - SQRT2 * k + k2) * norm)


class LowPassBank:
    """Six independent biquads for ``[fx, fy, fz, tx, ty, tz]``.

    ``cutoffs_hz``: (6,) Hz, 0 = off. ``step(x)`` filters one sample (6,) and returns the
    filtered sample (6,); the first sample after ``reset`` initialises the state to steady state
    (no start-up transient).
    """

    def __init__(self) -> None:
        self.cutoffs_hz = np.zeros(6)
        self.fs_hz = 0.0
        self._coef = np.zeros((5, 6))
        self._coef[0] = 1.0
        self._z1 = np.zeros(6)
        self._z2 = np.zeros(6)
        self._primed = False

    def design(self, cutoffs_hz: np.ndarray, fs_hz: float) -> None:
        """Set the cut-offs (6,) Hz for sample rate ``fs_hz``; ValueError if one is out of
        ``[0, fs/2)``. Keeps the filter state (a change of cut-off does not jump)."""
        cut = np.asarray(cutoffs_hz, dtype=float).reshape(6)
        coef = np.array([butterworth_biquad(float(fc), fs_hz) for fc in cut]).T
        self.cutoffs_hz, self.fs_hz, self._coef = cut, float(fs_hz), coef

    def reset(self) -> None:
        self._primed = False

    def step(self, x: np.ndarray) -> np.ndarray:
        b0, b1, b2, a1, a2 = self._coef
        if not self._primed:
            # steady state for a constant input x: y = x
            self._z2 = (b2 - a2) * x
            self._z1 = (1.0 - b0) * x
            self._primed = True
        y = b0 * x + self._z1
        self._z1 = b1 * x - a1 * y + self._z2
        self._z2 = b2 * x - a2 * y
        return y
