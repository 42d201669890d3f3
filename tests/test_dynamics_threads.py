"""Batches split over threads (``twin.dynamics.threads``) give the one-thread results exactly.

The kernels compute each state on its own, so a split changes which thread computes a row, never
its value: the comparisons are bit for bit.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from twin.dynamics import ArmDynamics, code, threads


def _double(x: np.ndarray, k: float, out: np.ndarray) -> None:
    out[:] = k * x


@given(rows=st.integers(1, 400), chunk=st.integers(1, 64), workers=st.integers(1, 4))
def test_split_covers_every_row_once(rows, chunk, workers):
    x = np.arange(rows * 3, dtype=float).reshape(rows, 3)
    out = np.full((rows, 3), np.nan)
    threads.split(_double, (x,), out, (2.0,), threads=workers, chunk=chunk)
    np.testing.assert_array_equal(out, 2.0 * x)


def test_split_uses_the_workers_and_reraises():
    seen, calls = set(), itertools.count()
    both = threading.Barrier(2, timeout=30.0)

    def record(x, out):
        seen.add(threading.get_ident())
        if next(calls) < 2:  # the first two chunks meet: a second thread must take one
            both.wait()
        out[:] = x

    x = np.arange(64.0)[:, None]
    out = np.empty((64, 1))
    threads.split(record, (x,), out, threads=2, chunk=4)
    np.testing.assert_array_equal(out, x)
    assert threading.get_ident() in seen and len(seen) == 2

    def fail(x, out):
        raise ArithmeticError("chunk failed")

    with pytest.raises(ArithmeticError, match="chunk failed"):
        threads.split(fail, (x,), np.empty((64, 1)), threads=2, chunk=8)


def test_cores_from_environment(monkeypatch):
    monkeypatch.setenv("TWIN_DYNAMICS_THREADS", "3")
    assert threads.cores() == 3
    monkeypatch.setenv("TWIN_DYNAMICS_THREADS", "0")
    assert threads.cores() == 1
    monkeypatch.delenv("TWIN_DYNAMICS_THREADS")
    assert threads.cores() >= 1


@pytest.mark.parametrize(("load", "expected"), [(0.0, 2), (1.2, 2), (1.6, 1), (9.0, 1)])
def test_no_split_without_an_idle_core(monkeypatch, load, expected):
    monkeypatch.setenv("TWIN_DYNAMICS_THREADS", "2")
    monkeypatch.setattr(threads, "_LOAD", [-np.inf, 0.0])  # read the load now
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (load, load, load))
    assert threads.usable(2) == expected
    monkeypatch.setattr(code, "THREADS", 2)
    monkeypatch.setattr(code, "PARALLEL_STATES", 100)
    assert code.threads_for(99) == 1
    assert code.threads_for(100) == expected


@pytest.mark.parametrize("states", [1, 1000, 1024 * 3 + 5])
def test_split_batches_equal_one_thread(monkeypatch, states):
    dyn = ArmDynamics.default().with_payload(0.8, (0.0, 0.01, 0.05))
    rng = np.random.default_rng(states)
    q = rng.uniform(dyn.arm.lower, dyn.arm.upper, (states, 6))
    qd, qdd = rng.uniform(-3.0, 3.0, (2, states, 6))
    monkeypatch.setattr(code, "THREADS", 1)
    tau, mass = dyn.inverse_dynamics(q, qd, qdd), dyn.mass_matrix(q)
    monkeypatch.setattr(code, "THREADS", 2)
    monkeypatch.setattr(code, "PARALLEL_STATES", 0)
    monkeypatch.setattr(code, "FOLLOW_LOAD", False)  # split whatever the load
    np.testing.assert_array_equal(dyn.inverse_dynamics(q, qd, qdd), tau)
    np.testing.assert_array_equal(dyn.mass_matrix(q), mass)
    for k in (0, states // 2, states - 1):  # a single call: the same arithmetic, to rounding
        one = dyn.inverse_dynamics(q[k], qd[k], qdd[k])
        np.testing.assert_allclose(one, tau[k], rtol=0.0, atol=1e-13 * np.abs(tau[k]).max())
