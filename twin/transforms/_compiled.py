"""The transformers' hot paths compiled by numba (optional: ``pip install numba``).

``kernels()`` gives, once per process, the entry points of the compiled functions below (called
directly, without numba's dispatcher: its type resolution would cost more than the arithmetic).
The functions are plain Python over the plain-arithmetic maths of ``kernels`` and ``_scalar``:
their source, those functions' source and ``@njit(cache=True)`` lines make one module
(``twin.numba_cache.load_generated``), so the machine code is built once per machine (a few
seconds, ``bench_transforms`` prints it) and later processes load it from the disk cache.
``TWIN_TRANSFORMS_COMPILED=0`` turns it off (the Python paths run), as does numba being absent.

Arrays: ``g`` (24,) the resolved 6-vector geometry ``[A (9, row-major), r (3,) m, fixed_T_moving
translation (3,) m, rotation (9,)]``; ``plan`` (30,) ``kernels.geometry``'s plan flattened
(``plan_of``); ``c`` (38,) ``kernels.pose``'s constants flattened (``pose_constants``). Statuses:
0 computed, 1 quaternion off unit norm (normalised, computed), 2 non-finite input or transform
or zero quaternion (not computed), 3 wrong length (nothing written). ``kind``: 0 wrench, 1 twist,
2 IMU. The kernels check the lengths and the values; the caller checks the array types (dtype
float64, the number of dimensions; any strides are fine, and the output must be writable).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

from twin import numba_cache
from twin.transforms import _scalar
from twin.transforms import kernels as maths
from twin.transforms._scalar import IDENTITY9, quat_to_mat9
from twin.transforms.config import QUATERNION_NORM_TOLERANCE
from twin.transforms.kernels import geometry, imu, pose, twist, wrench

prange = range  # numba's prange in the compiled module
#: Rows per task of the parallel batch kernels; a batch below ``PARALLEL_ROWS`` runs on one
#: thread (starting the threads costs tens of microseconds, and on a loaded two-core machine
#: the split pays only for large batches, ``bench_transforms``' scaling table).
CHUNK = 8192
PARALLEL_ROWS = 131072
KINDS = {"WrenchTf": 0, "TwistTf": 1, "ImuTf": 2}


# ------------------------------------------------------------------ compiled functions
def plan_of(p):
    return (
        p[0], (p[1], p[2], p[3]), p[4], (p[5], p[6], p[7]), p[8],
        (p[9], p[10], p[11], p[12], p[13], p[14], p[15], p[16], p[17]), p[18], p[19],
        (p[20], p[21], p[22], p[23], p[24], p[25], p[26], p[27], p[28]), p[29],
    )  # fmt: skip


def pose_constants(c):
    return (
        c[0], c[1], c[2],
        (c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11]),
        (c[12], c[13], c[14], c[15], c[16], c[17], c[18], c[19], c[20]),
        (c[21], c[22], c[23]), (c[24], c[25], c[26]), (c[27], c[28], c[29]),
        (c[30], c[31], c[32], c[33]), (c[34], c[35], c[36], c[37]),
    )  # fmt: skip


def six(kind, a, r, x0, x1, x2, x3, x4, x5):
    if kind == 0:
        return wrench(a, r, x0, x1, x2, x3, x4, x5)
    if kind == 1:
        return twist(a, r, x0, x1, x2, x3, x4, x5)
    return imu(a, r, x0, x1, x2, x3, x4, x5)


def tf_parts(tx, ty, tz, qw, qx, qy, qz):
    """(status, translation, rotation 9-tuple) of one ``fixed_T_moving``."""
    n2 = qw * qw + qx * qx + qy * qy + qz * qz
    finite = math.isfinite(tx) and math.isfinite(ty) and math.isfinite(tz)
    if not (finite and math.isfinite(n2) and n2 > 0.0):
        return 2, (0.0, 0.0, 0.0), IDENTITY9
    n = math.sqrt(n2)
    status = 1 if abs(n - 1.0) > QUATERNION_NORM_TOLERANCE else 0
    return status, (tx, ty, tz), quat_to_mat9((qw / n, qx / n, qy / n, qz / n))


def update6(kind, x, g, out):
    if x.shape[0] != 6 or out.shape[0] != 6:
        return 3
    x0, x1, x2, x3, x4, x5 = x[0], x[1], x[2], x[3], x[4], x[5]
    if not math.isfinite(x0 + x1 + x2 + x3 + x4 + x5):
        return 2
    a = (g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8])
    y = six(kind, a, (g[9], g[10], g[11]), x0, x1, x2, x3, x4, x5)
    for i in range(6):
        out[i] = y[i]
    return 0


def set_tf(plan, tf, g):
    """Geometry of ``plan`` for ``fixed_T_moving`` ``tf`` (7,) into ``g``; the status."""
    if tf.shape[0] != 7:
        return 3
    status, t, rot = tf_parts(tf[0], tf[1], tf[2], tf[3], tf[4], tf[5], tf[6])
    if status == 2:
        return 2
    a, r = geometry(plan_of(plan), t, rot)
    for i in range(9):
        g[i] = a[i]
        g[15 + i] = rot[i]
    for i in range(3):
        g[9 + i] = r[i]
        g[12 + i] = t[i]
    return status


def batch6_rows(kind, x, tfs, plan, g, zero_off, status, out, lo, hi):
    """Rows ``lo:hi`` of (N, 6) ``x`` into ``out``: each with its own ``fixed_T_moving`` from
    ``tfs`` (N, 7), or with the geometry in ``g`` when ``tfs`` has no rows."""
    pl = plan_of(plan)
    a0 = (g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8])
    r0 = (g[9], g[10], g[11])
    per_row = tfs.shape[0] > 0
    for k in range(lo, hi):
        x0, x1, x2, x3, x4, x5 = x[k, 0], x[k, 1], x[k, 2], x[k, 3], x[k, 4], x[k, 5]
        st = 0 if math.isfinite(x0 + x1 + x2 + x3 + x4 + x5) else 2
        a, r = a0, r0
        if per_row and st == 0:
            st, t, rot = tf_parts(
                tfs[k, 0], tfs[k, 1], tfs[k, 2], tfs[k, 3], tfs[k, 4], tfs[k, 5], tfs[k, 6]
            )
            if st != 2:
                a, r = geometry(pl, t, rot)
        status[k] = st
        if st == 2 or (st == 1 and zero_off):
            for i in range(6):
                out[k, i] = 0.0
        else:
            y = six(kind, a, r, x0, x1, x2, x3, x4, x5)
            for i in range(6):
                out[k, i] = y[i]


def batch6(kind, x, tfs, plan, g, zero_off, status, out):
    batch6_rows(kind, x, tfs, plan, g, zero_off, status, out, 0, x.shape[0])


def batch6_parallel(kind, x, tfs, plan, g, zero_off, status, out):
    n = x.shape[0]
    for c in prange((n + CHUNK - 1) // CHUNK):
        batch6_rows(
            kind, x, tfs, plan, g, zero_off, status, out, c * CHUNK, min(n, c * CHUNK + CHUNK)
        )


def pose_row(ct, px, py, pz, qw, qx, qy, qz):
    """(status, output pose 7-tuple) of one input pose."""
    n2 = qw * qw + qx * qx + qy * qy + qz * qz
    if not (math.isfinite(px + py + pz) and math.isfinite(n2) and n2 > 0.0):
        return 2, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    n = math.sqrt(n2)
    st = 1 if abs(n - 1.0) > QUATERNION_NORM_TOLERANCE else 0
    p, q = pose(ct, px, py, pz, (qw / n, qx / n, qy / n, qz / n))
    w, x, y, z = qcanonical(q)
    return st, (p[0], p[1], p[2], w, x, y, z)


def pose_update(x, c, out):
    if x.shape[0] != 7 or out.shape[0] != 7:
        return 3
    st, y = pose_row(pose_constants(c), x[0], x[1], x[2], x[3], x[4], x[5], x[6])
    if st == 2:
        return 2
    for i in range(7):
        out[i] = y[i]
    return st


def pose_batch_rows(x, c, zero_off, status, out, lo, hi):
    ct = pose_constants(c)
    for k in range(lo, hi):
        st, y = pose_row(ct, x[k, 0], x[k, 1], x[k, 2], x[k, 3], x[k, 4], x[k, 5], x[k, 6])
        status[k] = st
        if st == 2 or (st == 1 and zero_off):
            for i in range(7):
                out[k, i] = 0.0
        else:
            for i in range(7):
                out[k, i] = y[i]


def pose_batch(x, c, zero_off, status, out):
    pose_batch_rows(x, c, zero_off, status, out, 0, x.shape[0])


def pose_batch_parallel(x, c, zero_off, status, out):
    n = x.shape[0]
    for k in prange((n + CHUNK - 1) // CHUNK):
        pose_batch_rows(x, c, zero_off, status, out, k * CHUNK, min(n, k * CHUNK + CHUNK))


# ------------------------------------------------------------------ the module
qcanonical = _scalar.qcanonical
_HELPERS = (
    _scalar.quat_to_mat9, _scalar.mat_mul, _scalar.transpose, _scalar.mat_t_mul,
    _scalar.mat_vec, _scalar.mat_t_vec, _scalar.qmul, _scalar.qconj, _scalar.qrot,
    _scalar.qcanonical, maths.geometry, maths.wrench, maths.twist, maths.imu, maths.pose,
    plan_of, pose_constants, six, tf_parts, batch6_rows, pose_row, pose_batch_rows,
)  # fmt: skip
_A1, _A2 = "float64[:]", "float64[:, :]"
#: The entry points and their signatures (``parallel`` for the ``_parallel`` ones).
_ENTRIES = {
    update6: f"int64(int64, {_A1}, {_A1}, {_A1})",
    set_tf: f"int64({_A1}, {_A1}, {_A1})",
    batch6: f"void(int64, {_A2}, {_A2}, {_A1}, {_A1}, boolean, int8[:], {_A2})",
    batch6_parallel: f"void(int64, {_A2}, {_A2}, {_A1}, {_A1}, boolean, int8[:], {_A2})",
    pose_update: f"int64({_A1}, {_A1}, {_A1})",
    pose_batch: f"void({_A2}, {_A1}, boolean, int8[:], {_A2})",
    pose_batch_parallel: f"void({_A2}, {_A1}, boolean, int8[:], {_A2})",
}


def source() -> str:
    """The compiled module's source (module doc)."""
    head = [
        "import math",
        "",
        "from numba import njit, prange",
        "",
        f"IDENTITY9 = {IDENTITY9!r}",
        f"QUATERNION_NORM_TOLERANCE = {QUATERNION_NORM_TOLERANCE!r}",
        f"CHUNK = {CHUNK!r}",
        "",
    ]
    functions = [(fn, numba_cache.NJIT) for fn in _HELPERS]
    for fn, signature in _ENTRIES.items():
        parallel = ", parallel=True" if fn.__name__.endswith("_parallel") else ""
        functions.append((fn, f'"{signature}", {numba_cache.NJIT}{parallel}'))
    return numba_cache.njit_source(__name__, head, functions)


def enabled() -> bool:
    """Whether compiled kernels are wanted (``TWIN_TRANSFORMS_COMPILED`` not "0") and numba is
    importable."""
    return numba_cache.enabled("TWIN_TRANSFORMS_COMPILED")


def kernels() -> SimpleNamespace | None:
    """The entry points (module doc) by function name, plus ``load_s`` (the time the first load
    took: building or loading the machine code); None when disabled or without numba."""
    names = [fn.__name__ for fn in _ENTRIES]
    return numba_cache.compiled_module(
        "twin_transforms", "TWIN_TRANSFORMS_COMPILED", source, names, entry_points=True
    )
