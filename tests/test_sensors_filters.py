"""The per-axis 2nd-order Butterworth low-pass of the F/T services."""

from __future__ import annotations

import numpy as np
import pytest

from twin.sensors import LowPassBank, butterworth_biquad


def gain(coef, f_hz: float, fs_hz: float) -> float:
    b0, b1, b2, a1, a2 = coef
    z = np.exp(-2j * np.pi * f_hz / fs_hz)  # z^-1
    return abs((b0 + b1 * z + b2 * z * z) / (1.0 + a1 * z + a2 * z * z))


@pytest.mark.parametrize(("fc", "fs"), [(5.0, 200.0), (20.0, 250.0), (90.0, 200.0), (1.0, 800.0)])
def test_butterworth_gain_unit_at_dc_minus_3db_at_cutoff_zero_at_nyquist(fc, fs):
    coef = butterworth_biquad(fc, fs)
    assert gain(coef, 0.0, fs) == pytest.approx(1.0, abs=1e-12)
    assert gain(coef, fc, fs) == pytest.approx(1.0 / np.sqrt(2.0), abs=1e-12)
    assert gain(coef, 0.5 * fs, fs) == pytest.approx(0.0, abs=1e-12)
    # monotone, second order: about -40 dB per decade well below Nyquist
    if 10 * fc < 0.1 * fs:
        assert gain(coef, 10 * fc, fs) == pytest.approx(0.01, rel=0.05)


def test_bank_filters_each_axis_with_its_own_cutoff():
    fs = 200.0
    bank = LowPassBank()
    cut = np.array([5.0, 20.0, 0.0, 5.0, 50.0, 0.0])
    bank.design(cut, fs)
    t = np.arange(4000) / fs
    tone = 20.0  # Hz
    x = np.sin(2 * np.pi * tone * t)
    y = np.array([bank.step(np.full(6, v)) for v in x])
    steady, ts = y[2000:], t[2000:]  # a whole number of periods of the tone
    sin, cos = np.sin(2 * np.pi * tone * ts), np.cos(2 * np.pi * tone * ts)
    amplitude = np.hypot(sin @ steady, cos @ steady) * 2.0 / len(ts)
    expected = [gain(butterworth_biquad(fc, fs), tone, fs) for fc in cut]
    np.testing.assert_allclose(amplitude, expected, rtol=1e-6)
    np.testing.assert_array_equal(y[:, 2], x)  # off: pass-through


def test_first_sample_primes_the_state_without_transient():
    bank = LowPassBank()
    bank.design(np.full(6, 3.0), 200.0)
    x = np.array([1.0, -2.0, 3.0, 0.1, 0.2, -0.3])
    for _ in range(50):
        np.testing.assert_allclose(bank.step(x), x, atol=1e-12)


@pytest.mark.parametrize("fc", [100.0, 150.0, -1.0])
def test_design_refuses_cutoffs_outside_zero_to_nyquist(fc):
    with pytest.raises(ValueError, match="Nyquist"):
        butterworth_biquad(fc, 200.0)
