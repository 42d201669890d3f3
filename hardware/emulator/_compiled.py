"""The emulators' compiled kernel (numba, optional): the ideal plant's integration.

- ``integrate(state, drives, plant, steps, dt)``: ``steps`` semi-implicit Euler steps of ``dt`` s
  of ``IdealSource``'s joints, in place: ``state`` (3, n) float64 rows q rad, qd rad/s, tau N m;
  ``drives`` (6, n) the ``DriveArrays`` rows (torque N m, kp N m/rad, kd N m s/rad, q_goal rad,
  qd_goal rad/s, torque limit N m); ``plant`` (3, n) effort limit N m, damping N m s/rad,
  inertia kg m^2. Per joint the same float64 operations, in the same order, as
  ``IdealSource._integrate_floats`` (no fused multiply-add, no fast-math: the same state, bit for
  bit; ``tests/test_hw_emulator_plant.py``). Returns 0.

``kernels()`` loads the module once per process (``twin.numba_cache``); ``TWIN_HARDWARE_COMPILED=0``
turns it off, as does numba being absent, and the Python form runs.
"""

from __future__ import annotations

from types import SimpleNamespace

from twin.hardware.protocols._compiled import VARIABLE

from twin import numba_cache


def integrate(state, drives, plant, steps, dt):
    """The ideal plant's ``steps`` integration steps, in place (module doc)."""
    n = state.shape[1]
    for j in range(n):
        torque, kp, kd = drives[0, j], drives[1, j], drives[2, j]
        q_goal, qd_goal, limit = drives[3, j], drives[4, j], drives[5, j]
        effort, damping, inertia = plant[0, j], plant[1, j], plant[2, j]
        q, qd, tau = state[0, j], state[1, j], state[2, j]
        for _ in range(steps):
            u = kp * (q_goal - q) + kd * (qd_goal - qd)
            if u == u:  # a nan stays a nan (as _clip)
                u = limit if u > limit else -limit if u < -limit else u
            tau = torque + u
            if tau == tau:
                tau = effort if tau > effort else -effort if tau < -effort else tau
            qd += dt * (tau - damping * qd) / inertia
            q += dt * qd
        state[0, j], state[1, j], state[2, j] = q, qd, tau
    return 0


_ENTRIES = {
    integrate: "int64(float64[:, ::1], float64[:, ::1], float64[:, ::1], int64, float64)",
}


def source() -> str:
    """The compiled module's source (module doc)."""
    functions = [(fn, f'"{sig}", {numba_cache.NJIT}') for fn, sig in _ENTRIES.items()]
    return numba_cache.njit_source(__name__, ["from numba import njit", ""], functions)


def kernels() -> SimpleNamespace | None:
    """The entry points by function name (called without numba's type dispatch), plus
    ``load_s``; None when disabled or without numba."""
    names = [fn.__name__ for fn in _ENTRIES]
    return numba_cache.compiled_module(
        "twin_emulator_plant", VARIABLE, source, names, entry_points=True
    )
