"""The emulators' compiled kernels (numba, optional): the ideal plant's integration and the servo
chain's answer to the bus cycle, each a call of a few hundred machine instructions where the
Python forms make some hundred interpreter calls (on a loaded machine an emulator thread wakes
into cold caches every cycle, and what it costs is then mostly what it touches).

- ``integrate(state, drives, plant, steps, dt)``: ``steps`` semi-implicit Euler steps of ``dt`` s
  of ``IdealSource``'s joints, in place: ``state`` (3, n) float64 rows q rad, qd rad/s, tau N m;
  ``drives`` (6, n) the ``DriveArrays`` rows (torque N m, kp N m/rad, kd N m s/rad, q_goal rad,
  qd_goal rad/s, torque limit N m); ``plant`` (3, n) effort limit N m, damping N m s/rad,
  inertia kg m^2. Per joint the same float64 operations, in the same order, as
  ``IdealSource._integrate_floats`` (no fused multiply-add, no fast-math: the same state, bit for
  bit; ``tests/test_hw_emulator_plant.py``). Returns 0.

- ``cycle_goals(data, expect, consts, tables, q_goal)``: ``CycleRequests.match`` and the goal
  writes of ``ServoChainEmulator._write_goals`` on one read of the port: ``expect`` uint8 is the
  goal SYNC_WRITE's 12-byte head, the n servo ids and the FAST_SYNC_READ request's bytes;
  ``consts`` (6, n) float64 per servo (joint order) whether it holds a position, its goal range
  lo and hi (ticks), its direction, zero ticks and ticks per rad; ``tables`` (n, SIZE) uint8 the
  control tables. Returns -1 (not the cycle's instructions) or -2 (a goal not for the fast path:
  a servo not holding, a value beyond its range), nothing written; else 1 (goals) | 2 (the read
  follows), each goal's 4 bytes written into its table at Goal Position and its q_goal rad into
  ``q_goal`` (n,).
- ``present_wire(state, terms, tables, buf, ends, reply)``: ``ServoChainEmulator._refresh``'s
  present registers from ``state`` (3, n) q, qd, tau through ``terms`` (5, n) (direction, zero
  ticks, ticks per rad, torque and velocity units), rounded half to even into their ranges (a
  nan reads 0), into ``tables`` with the Moving byte; with ``reply`` also the fast read's
  aggregate status into ``buf`` (laid out by ``FastStatusWriter``: ERR from the table's
  Hardware Error Status, the block, the CRCs at ``ends``). Returns 0.

``kernels()`` loads the module once per process (``twin.numba_cache``); ``TWIN_HARDWARE_COMPILED=0``
turns it off, as does numba being absent, and the Python form runs.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from twin.hardware.protocols._compiled import VARIABLE, block_crcs
from twin.hardware.protocols.crc import DXL_TABLE8
from twin.hardware.protocols.dynamixel_table import ALERT_BIT, PRESENT_BLOCK_ADDRESS, XTable

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


GOAL, MOVING = XTable.GOAL_POSITION.address, XTable.MOVING.address
HW_ERROR, PRESENT, ALERT = XTable.HARDWARE_ERROR_STATUS.address, PRESENT_BLOCK_ADDRESS, ALERT_BIT
T8 = DXL_TABLE8


def cycle_goals(data, expect, consts, tables, q_goal):
    """The cycle's goals from one read of the port (module doc)."""
    n = q_goal.size
    size = len(data)
    g = 12 + 5 * n + 2
    r = expect.size - 12 - n
    if size < 12:
        return 2 if size == r and _same(data, 0, expect, 12 + n, r) else -1
    if not _same(data, 0, expect, 0, 12):
        return 2 if size == r and _same(data, 0, expect, 12 + n, r) else -1
    if size != g and size != g + r:
        return -1
    if size > g and not _same(data, g, expect, 12 + n, r):
        return -1
    for k in range(n):
        if data[12 + 5 * k] != expect[12 + k]:
            return -1
    for i in range(7, g - 4):
        if data[i] == 0xFF and data[i + 1] == 0xFF and data[i + 2] == 0xFD:
            return -1
    crc = 0
    for i in range(g - 2):
        crc = ((crc << 8) & 0xFFFF) ^ T8[((crc >> 8) ^ data[i]) & 0xFF]
    if data[g - 2] | (data[g - 1] << 8) != crc:
        return -1
    for k in range(n):
        v = _int32(data, 13 + 5 * k)
        if consts[0, k] == 0.0 or not consts[1, k] <= v <= consts[2, k]:
            return -2
    for k in range(n):
        o = 13 + 5 * k
        for b in range(4):
            tables[k, GOAL + b] = data[o + b]
        q_goal[k] = consts[3, k] * (float(_int32(data, o)) - consts[4, k]) / consts[5, k]
    return 1 | (2 if size > g else 0)


def _same(data, start, expect, offset, count):
    """Whether ``data[start:start + count]`` is ``expect[offset:offset + count]``."""
    for i in range(count):  # noqa: SIM110 (a loop numba compiles)
        if data[start + i] != expect[offset + i]:
            return False
    return True


def _int32(data, o):
    v = data[o] | (data[o + 1] << 8) | (data[o + 2] << 16) | (data[o + 3] << 24)
    return v - 0x100000000 if v >= 0x80000000 else v


def _register(x, lo, hi):
    """``x`` rounded half to even into ``[lo, hi]`` (a nan: 0), as ``servo_chain._rounded``."""
    if lo <= x <= hi:
        return np.int64(np.rint(x))
    if x < lo:
        return np.int64(lo)
    if x > hi:
        return np.int64(hi)
    return np.int64(0)


def present_wire(state, terms, tables, buf, ends, reply):
    """The present registers, and the fast read's answer with ``reply`` (module doc)."""
    n = state.shape[1]
    for k in range(n):
        direction, zero, tpr, unit, vel_unit = (
            terms[0, k],
            terms[1, k],
            terms[2, k],
            terms[3, k],
            terms[4, k],
        )
        cur = _register(direction * state[2, k] / unit, -32768.0, 32767.0)
        vel = _register(direction * state[1, k] / vel_unit, -2147483648.0, 2147483647.0)
        ticks = _register(zero + direction * state[0, k] * tpr, -2147483648.0, 2147483647.0)
        for b in range(2):
            tables[k, PRESENT + b] = (cur >> (8 * b)) & 0xFF
        for b in range(4):
            tables[k, PRESENT + 2 + b] = (vel >> (8 * b)) & 0xFF
            tables[k, PRESENT + 6 + b] = (ticks >> (8 * b)) & 0xFF
        tables[k, MOVING] = 1 if vel != 0 else 0
    if reply == 0:
        return 0
    for k in range(n):
        o = ends[k] - 12
        buf[o] = ALERT if tables[k, HW_ERROR] != 0 else 0
        for b in range(10):
            buf[o + 2 + b] = tables[k, PRESENT + b]
    return block_crcs(buf, ends)


_BYTES = "Bytes(uint8, 1, 'C', readonly=True)"
_ENTRIES = {
    integrate: "int64(float64[:, ::1], float64[:, ::1], float64[:, ::1], int64, float64)",
    cycle_goals: f"int64({_BYTES}, uint8[::1], float64[:, ::1], uint8[:, ::1], float64[::1])",
    present_wire: "int64(float64[:, ::1], float64[:, ::1], uint8[:, ::1], uint8[::1], int64[::1], int64)",
}
_HELPERS = (_same, _int32, _register, block_crcs)  # block_crcs: the codec's own


def source() -> str:
    """The compiled module's source (module doc)."""
    helpers = [(fn, numba_cache.NJIT) for fn in _HELPERS]
    functions = [(fn, f'"{sig}", {numba_cache.NJIT}') for fn, sig in _ENTRIES.items()]
    head = [
        "import numpy as np",
        "from numba import njit",
        "",
        f"T8 = np.array({list(DXL_TABLE8)!r}, dtype=np.uint16)",
        f"GOAL, MOVING, HW_ERROR, PRESENT, ALERT = {GOAL}, {MOVING}, {HW_ERROR}, {PRESENT}, {ALERT}",
        "",
    ]
    return numba_cache.njit_source(__name__, head, helpers + functions)


def kernels() -> SimpleNamespace | None:
    """The entry points by function name (called without numba's type dispatch), plus
    ``load_s``; None when disabled or without numba."""
    names = [fn.__name__ for fn in _ENTRIES]
    return numba_cache.compiled_module(
        "twin_emulator_plant", VARIABLE, source, names, entry_points=True
    )
