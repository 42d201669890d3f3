"""The numba-compiled dynamics (``twin.dynamics.compiled``) against the generated Python code.

Both run the same generated arithmetic (the compiled one with the inertial parameters as an input
instead of folded constants), so they agree to rounding; the bound here is 1e-12 relative. The
compiled half is skipped where numba is not installed (it is an optional dependency).
"""

from __future__ import annotations

import numpy as np
import pytest

from twin import numba_cache
from twin.dynamics import ArmDynamics, RigidBodyModel, compiled
from twin.dynamics.code import DynamicsCode

REL_TOL = 1e-12

numba = pytest.importorskip("numba")


@pytest.fixture(scope="module")
def arm():
    return ArmDynamics.default()


def _states(dyn: ArmDynamics, n: int, seed: int):
    rng = np.random.default_rng(seed)
    q = rng.uniform(dyn.arm.lower, dyn.arm.upper, (n, 6))
    qd = rng.uniform(-2.0, 2.0, (n, 6)) * dyn.arm.velocity_limits
    qdd = rng.uniform(-20.0, 20.0, (n, 6))
    return q, qd, qdd


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("payload", [None, (1.2, (0.01, -0.02, 0.08))])
@pytest.mark.parametrize("gravity", [(0.0, 0.0, -9.81), (1.0, -2.0, -9.0), (0.0, 0.0, 0.0)])
def test_compiled_equals_python(arm, payload, gravity):
    dyn = ArmDynamics(arm.arm, gravity=gravity)
    if payload is not None:
        dyn = dyn.with_payload(*payload)
    fast = DynamicsCode(dyn.bodies, compiled=True)
    slow = DynamicsCode(dyn.bodies, compiled=False)
    assert fast.compiled and not slow.compiled
    q, qd, qdd = _states(dyn, 300, seed=7)
    g = dyn.gravity
    assert _rel(fast.tau_batch(q, qd, qdd, g), slow.tau_batch(q, qd, qdd, g)) < REL_TOL
    assert _rel(fast.mass_batch(q), slow.mass_batch(q)) < REL_TOL
    for k in range(0, 300, 37):
        one = (q[k], qd[k], qdd[k])
        assert _rel(fast.tau(*one, g), slow.tau(*one, g)) < REL_TOL
        assert _rel(fast.mass(q[k]), slow.mass(q[k])) < REL_TOL
        batch = fast.tau_batch(*(x[None] for x in one), g)[0]
        assert _rel(fast.tau(*one, g), batch) < 1e-14


def test_payloads_share_one_compiled_module(arm):
    heavy = arm.with_payload(2.0, (0.0, 0.0, 0.1))
    assert compiled.kernels(heavy.bodies) is compiled.kernels(arm.bodies)
    q = np.array([0.3, -0.8, 1.1, 0.2, 0.9, -0.4])
    # The same code with other parameters: a payload changes the gravity torques.
    assert not np.allclose(heavy.gravity_torques(q), arm.gravity_torques(q))


@pytest.mark.parametrize("compiled_code", [True, False])
def test_single_state_refusals(arm, compiled_code):
    bodies = RigidBodyModel(arm.arm)  # its own, not the arm's shared model
    bodies.__dict__["_code"] = DynamicsCode(bodies, compiled=compiled_code)
    dyn = ArmDynamics(arm.arm, bodies)
    ok = np.zeros(6)
    bad = np.array([0.0, np.nan, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="qd has a non-finite value"):
        dyn.inverse_dynamics(ok, bad, ok)
    with pytest.raises(ValueError, match=r"q must have shape \(6,\)"):
        dyn.mass_matrix(np.zeros(5))
    with pytest.raises(ValueError, match="q has a non-finite value"):
        dyn.mass_matrix(np.full(6, np.inf))
    # Lists, read-only and strided arrays are accepted and give the same torques.
    ro = np.linspace(-1.0, 1.0, 6)
    ro.flags.writeable = False
    buffer = np.zeros(12)
    buffer[::2] = ro
    strided = buffer[::2]
    expected = dyn.inverse_dynamics(ro.copy(), ro.copy(), ro.copy())
    np.testing.assert_array_equal(dyn.inverse_dynamics(ro.tolist(), ro, strided), expected)


def test_switch_off(monkeypatch):
    monkeypatch.setenv("TWIN_DYNAMICS_COMPILED", "0")
    assert not compiled.enabled()
    monkeypatch.setenv("TWIN_DYNAMICS_COMPILED", "1")
    assert compiled.enabled()


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TWIN_CACHE_DIR", str(tmp_path / "cache"))
    assert numba_cache.cache_dir() == tmp_path / "cache"
    assert (tmp_path / "cache").is_dir()


@pytest.mark.parametrize("compiled_code", [True, False])
@pytest.mark.parametrize("split", [False, True])
def test_batch_refusals(arm, monkeypatch, compiled_code, split):
    from twin.dynamics import code

    bodies = RigidBodyModel(arm.arm)
    bodies.__dict__["_code"] = DynamicsCode(bodies, compiled=compiled_code)
    dyn = ArmDynamics(arm.arm, bodies)
    monkeypatch.setattr(code, "FOLLOW_LOAD", False)
    monkeypatch.setattr(code, "THREADS", 2 if split else 1)
    monkeypatch.setattr(code, "PARALLEL_STATES", 0)
    q, qd, qdd = _states(dyn, 3000, seed=5)
    # (the Python backend computes before it looks: numpy's warnings on inf - inf are expected)
    with np.errstate(over="ignore", invalid="ignore"):
        for value, k in ((np.nan, 2999), (np.inf, 0), (-np.inf, 1500)):
            bad = qd.copy()
            bad[k, 4] = value
            with pytest.raises(ValueError, match="qd has a non-finite value"):
                dyn.inverse_dynamics(q, bad, qdd)
            bad = q.copy()
            bad[k, 1] = value
            with pytest.raises(ValueError, match="q has a non-finite value"):
                dyn.mass_matrix(bad)
        # finite inputs whose torques overflow are returned, not refused
        huge = np.full_like(qd, 1e300)
        assert not np.all(np.isfinite(dyn.inverse_dynamics(q, huge, qdd)))
