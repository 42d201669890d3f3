"""The bus cycle's codec compiled by numba (optional: the ``fast`` or ``test`` extra): each cycle's
packets in one call of a few hundred machine instructions, where the Python forms
(``dynamixel_cycle``) make some forty interpreter and numpy calls. On a loaded host a control
thread wakes into cold caches every period, and what a cycle costs is then mostly what it
touches: one compiled call touches a few cache lines of code and a 512-byte CRC table.

- ``present_joints(wire, consts, out)``: the cycle's FAST_SYNC_READ answer (``wire``: exactly
  its ``8 + 14 n`` bytes) checked and decoded as ``PresentLayout.decode_wire`` does (the head,
  no stuffing pattern after it, each block's id, each block's CRC-16 and the packet's), and
  each servo's Present Position, Velocity and Current converted to joint units with the
  operations of ``JointMap.from_present``, in the same order: ``out`` (3, n) float64 rows
  q rad, qd rad/s, tau N m. ``consts`` (5 n + 8) float64: per servo the zero ticks, the signed
  ticks per rad, the signed velocity and torque units (``JointMap.present_terms``), the ids, then
  the packet's 8 head bytes. Returns the OR of the servos' ERR bytes (0 to 255), or -1 for any
  other answer (``out`` is then not to be used).
- ``goal_wire(values, lo, hi, buf)``: the goal SYNC_WRITE of ``GoalWriter``: ``buf`` uint8 holds
  the packet's head and each record's id (laid out once); each value is written little-endian
  into its record (``size = (len(buf) - 14) / n - 1`` bytes) and the CRC-16 after them. Returns
  0, 1 when the records hold the stuffing pattern (the caller's codec stuffs them), or -1 when a
  value is outside ``[lo, hi]`` (nothing written).

- ``command_ticks(rows, kp_div, terms, out)``: a servo-side command's goal ticks (``ArmBus``'s
  fold of the feed-forward into the goal, then ``JointMap.ticks_from_q``, the same operations in
  the same order): ``rows`` (5, n) ``q_des, qd_des, tau_ff, kp, kd``, ``kp_div`` (n,) the servos'
  kp, ``terms`` (2, n) signed ticks per rad and zero ticks, ``out`` (n,) int64. Returns 0, or -1
  when a goal is beyond the multi-turn range or not finite (the caller's Python form raises).

- ``block_crcs(buf, ends)``: a fast read's aggregate status (``fast_status_wire``, a device's
  answer): block ``k``'s CRC-16, over the packet from its first byte up to ``ends[k]``, written
  at ``ends[k]`` (two bytes, little-endian) for every block in turn.

``kernels()`` loads the module once per process (``twin.numba_cache``: compiled once per
machine, then from the disk cache); ``TWIN_HARDWARE_COMPILED=0`` turns it off, as does numba
being absent, and the Python forms run (the same bytes and values: ``tests/test_hw_compiled.py``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from twin.hardware.protocols.crc import DXL_TABLE8
from twin.hardware.protocols.dynamixel_table import Units

from twin import numba_cache

VARIABLE = "TWIN_HARDWARE_COMPILED"
LIMIT = float(Units.EXTENDED_POSITION_LIMIT)  # ticks: the multi-turn range, +-256 revolutions
T8 = DXL_TABLE8  # the byte-wise CRC-16 table (the compiled module's own copy: a uint16 array)


def present_joints(wire, consts, out):
    """The cycle's fast read in joint units (module doc)."""
    n = out.shape[1]
    if len(wire) != 8 + 14 * n:
        return -1
    for i in range(8):
        if wire[i] != consts[5 * n + i]:
            return -1
    for i in range(8, len(wire) - 2):
        if wire[i] == 0xFF and wire[i + 1] == 0xFF and wire[i + 2] == 0xFD:
            return -1
    crc = 0
    start = 0
    flags = 0
    for k in range(n):
        o = 8 + 14 * k
        end = o + 12
        for i in range(start, end):
            crc = ((crc << 8) & 0xFFFF) ^ T8[((crc >> 8) ^ wire[i]) & 0xFF]
        if wire[end] | (wire[end + 1] << 8) != crc:
            return -1
        for i in range(end, end + 2):
            crc = ((crc << 8) & 0xFFFF) ^ T8[((crc >> 8) ^ wire[i]) & 0xFF]
        start = end + 2
        if wire[o + 1] != consts[4 * n + k]:
            return -1
        flags |= wire[o]
    for k in range(n):
        o = 8 + 14 * k
        cur = wire[o + 2] | (wire[o + 3] << 8)
        if cur >= 0x8000:
            cur -= 0x10000
        vel = wire[o + 4] | (wire[o + 5] << 8) | (wire[o + 6] << 16) | (wire[o + 7] << 24)
        if vel >= 0x80000000:
            vel -= 0x100000000
        pos = wire[o + 8] | (wire[o + 9] << 8) | (wire[o + 10] << 16) | (wire[o + 11] << 24)
        if pos >= 0x80000000:
            pos -= 0x100000000
        out[0, k] = (float(pos) - consts[k]) / consts[n + k]
        out[1, k] = float(vel) * consts[2 * n + k]
        out[2, k] = float(cur) * consts[3 * n + k]
    return flags


def goal_wire(values, lo, hi, buf):
    """The goal SYNC_WRITE's bytes into ``buf`` (module doc)."""
    n = values.size
    size = (buf.size - 14) // n - 1
    for k in range(n):
        if values[k] < lo or values[k] > hi:
            return -1
    for k in range(n):
        v = values[k]
        o = 12 + k * (size + 1) + 1
        for b in range(size):
            buf[o + b] = (v >> (8 * b)) & 0xFF
    stuffed = 0
    for i in range(12, buf.size - 4):
        if buf[i] == 0xFF and buf[i + 1] == 0xFF and buf[i + 2] == 0xFD:
            stuffed = 1
    crc = 0
    for i in range(buf.size - 2):
        crc = ((crc << 8) & 0xFFFF) ^ T8[((crc >> 8) ^ buf[i]) & 0xFF]
    buf[buf.size - 2] = crc & 0xFF
    buf[buf.size - 1] = crc >> 8
    return stuffed


def command_ticks(rows, kp_div, terms, out):
    """A command's goal ticks into ``out`` (module doc)."""
    n = out.size
    for k in range(n):
        goal = rows[0, k] + (rows[2, k] + rows[4, k] * rows[1, k]) / kp_div[k]
        t = np.rint(goal * terms[0, k] + terms[1, k])
        if not -LIMIT <= t <= LIMIT:
            return -1
        out[k] = np.int64(t)
    return 0


def block_crcs(buf, ends):
    """Every block's CRC into ``buf`` (module doc)."""
    crc = 0
    start = 0
    for k in range(ends.size):
        end = ends[k]
        for i in range(start, end):
            crc = ((crc << 8) & 0xFFFF) ^ T8[((crc >> 8) ^ buf[i]) & 0xFF]
        buf[end] = crc & 0xFF
        buf[end + 1] = crc >> 8
        start = end  # the next block's CRC runs on over this one's bytes
    return 0


_BYTES = "Bytes(uint8, 1, 'C', readonly=True)"
#: The entry points and their one signature each (compiled when the module loads).
_ENTRIES = {
    present_joints: f"int64({_BYTES}, float64[::1], float64[:, ::1])",
    goal_wire: "int64(int64[::1], int64, int64, uint8[::1])",
    command_ticks: "int64(float64[:, ::1], float64[::1], float64[:, ::1], int64[::1])",
    block_crcs: "int64(uint8[::1], int64[::1])",
}


def source() -> str:
    """The compiled module's source (module doc)."""
    head = [
        "import numpy as np",
        "from numba import njit",
        "",
        f"T8 = np.array({list(DXL_TABLE8)!r}, dtype=np.uint16)",
        f"LIMIT = {LIMIT!r}",
        "",
    ]
    functions = [(fn, f'"{sig}", {numba_cache.NJIT}') for fn, sig in _ENTRIES.items()]
    return numba_cache.njit_source(__name__, head, functions)


def kernels() -> SimpleNamespace | None:
    """The entry points by function name (called without numba's type dispatch: every argument
    of the signature's types), plus ``load_s``; None when disabled or without numba."""
    names = [fn.__name__ for fn in _ENTRIES]
    return numba_cache.compiled_module(
        "twin_hardware_cycle", VARIABLE, source, names, entry_points=True
    )
