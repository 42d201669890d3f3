"""``WrenchTf``, ``TwistTf`` and ``ImuTf``: 6-vector signals moved between reference points and
expression axes of a fixed and a moving frame.

Every entry resolves, given ``fixed_T_moving``, to a point ``p`` (3,) m and axes ``R`` (3, 3)
in the fixed frame. From the input (``p_in``, ``R_in``) and output (``p_out``, ``R_out``) the
geometry is ``A = R_out^T R_in`` (input axes to output axes) and ``r = R_out^T (p_out - p_in)``
(from the input point to the output point, in output axes). Then, in output axes:

- wrench ``[f, t]``: ``f_o = A f``, ``t_o = A t - r x f_o`` (the moment term);
- twist ``[v, w]``: ``w_o = A w``, ``v_o = A v + w_o x r`` (the velocity term);
- IMU ``[a, w]``: ``w_o = A w``, ``a_o = A a + w_o x (w_o x r)`` (the centripetal term of the
  vendor SDK, ``R_out<-fixed (R_fixed<-in a + w_f x (w_f x (p_out - p_in)))``; no angular-
  acceleration term, an IMU does not measure it).

``A`` and ``r`` are recomputed only when an entry or the moving-frame transform changes.
"""

from __future__ import annotations

import math

import numpy as np

from twin.spatial import quaternion
from twin.transforms import _compiled
from twin.transforms import _scalar as s
from twin.transforms import kernels as maths
from twin.transforms.base import (
    BATCH_CHUNK,
    F64,
    NOT_READY,
    TransformerBase,
    all_finite,
    non_finite_rows,
    now_us,
    pose_columns,
)
from twin.transforms.codes import Condition, ReturnCode
from twin.transforms.config import QUATERNION_NORM_TOLERANCE, Origin

_OK = ReturnCode.OK
_ND = np.ndarray
_NO_TFS = np.zeros((0, 7))


def _mat9(m: np.ndarray) -> s.Mat9:
    return tuple(np.asarray(m, dtype=float).ravel().tolist())


class SixVectorTf(TransformerBase):
    """The shared part of the 6-vector transformers (moving frame, ``update``, batch)."""

    SIZE = 6

    def __init__(self, source=None) -> None:
        super().__init__(source)
        self._tf_set = False  # set_fixed_to_moving_frame_tf called since construction
        self._tf_ok = False  # last transform finite with a non-zero quaternion
        self._tf_off_norm = False
        self._tf_t: s.Vec3 = (0.0, 0.0, 0.0)
        self._tf_R: s.Mat9 = s.IDENTITY9
        self._tf_t_us = 0
        self._tf_norm = 1.0
        self._A: s.Mat9 = s.IDENTITY9
        self._r: s.Vec3 = (0.0, 0.0, 0.0)
        self._uses_moving = self.uses_moving_frame
        self._entry_mats: tuple | None = None  # the geometry's plan (``_plan``)
        # For the compiled kernels: the plan flattened, the geometry ``g`` (``_compiled``).
        self._plan_array = np.zeros(30)
        self._g = np.zeros(24)
        self._kind = _compiled.KINDS[self._PHYSICS]

    def _entries_changed(self) -> None:
        super()._entries_changed()
        self._uses_moving = self.uses_moving_frame
        self._entry_mats = None

    # ----------------------------------------------------------------- dynamic TF
    def set_fixed_to_moving_frame_tf(self, tf, t_us: int | None = None) -> None:
        """Push ``fixed_T_moving`` as ``[tx, ty, tz, qw, qx, qy, qz]`` (7,) m and unit quaternion.

        Call it every loop when an entry uses ``moving_frame``. ``t_us``: its time stamp (us);
        without one the monotonic clock is read. Staleness compares it with ``update``'s
        ``t_us`` (or the clock): give both or neither. A non-finite value or a zero quaternion is
        kept and reported by ``update``; a quaternion off unit norm is normalised and reported.
        """
        if (
            self._fast_out is not NOT_READY
            and type(tf) is _ND
            and tf.dtype is F64
            and tf.ndim == 1
            and self._fast.set_tf(self._plan_array, tf, self._g) == 0
        ):  # a valid unit transform: ``g`` holds the new geometry, the state stays clean
            self._tf_set = self._tf_ok = True
            self._tf_off_norm = False
            self._tf_t = self._A = None  # in ``g`` (``_from_g``)
            if self._max_age_us is not None:
                self._tf_t_us = now_us() if t_us is None else t_us
            return
        self._fast_out = NOT_READY
        if type(tf) is np.ndarray:
            tf = tf.tolist()
        try:
            tx, ty, tz, qw, qx, qy, qz = tf
            n2 = qw * qw + qx * qx + qy * qy + qz * qz
            total = tx + ty + tz + n2
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"{type(self).__name__}.set_fixed_to_moving_frame_tf: expected 7 numbers "
                f"[tx, ty, tz, qw, qx, qy, qz], got {tf!r}"
            ) from e
        self._tf_set = True
        self._tf_t_us = now_us() if t_us is None else t_us
        self._dirty = True
        ok = n2 > 0.0 and (total - total == 0.0 or all_finite((tx, ty, tz, qw, qx, qy, qz)))
        self._tf_ok = ok
        if not ok:
            return
        n = math.sqrt(n2)
        self._tf_norm = n
        self._tf_off_norm = abs(n - 1.0) > QUATERNION_NORM_TOLERANCE
        self._tf_t = (tx, ty, tz)
        self._tf_R = s.quat_to_mat9((qw / n, qx / n, qy / n, qz / n))

    def set_fixed_to_moving_frame_matrix(self, matrix, t_us: int | None = None) -> None:
        """``set_fixed_to_moving_frame_tf`` for a homogeneous matrix (4, 4) (e.g. straight from
        forward kinematics), without a conversion to a quaternion. A non-finite value, or a
        rotation block that is not orthonormal to 1e-6, is reported by ``update`` (as non-finite
        input: it cannot be repaired the way a quaternion is normalised).
        """
        m = np.asarray(matrix, dtype=float)
        if m.shape != (4, 4):
            raise ValueError(
                f"{type(self).__name__}.set_fixed_to_moving_frame_matrix: expected a (4, 4) "
                f"homogeneous matrix, got shape {m.shape}"
            )
        self._tf_set = True
        self._tf_t_us = now_us() if t_us is None else t_us
        self._dirty = True
        self._fast_out = NOT_READY
        rot = m[:3, :3]
        self._tf_ok = bool(np.isfinite(m).all()) and bool(
            np.abs(rot.T @ rot - np.eye(3)).max() <= QUATERNION_NORM_TOLERANCE
        )
        if self._tf_ok:
            self._tf_norm, self._tf_off_norm = 1.0, False
            self._tf_t = tuple(m[:3, 3].tolist())
            self._tf_R = _mat9(rot)

    # ----------------------------------------------------------------- geometry
    def _resolve(self) -> None:
        if not self._begin_resolve():
            return
        if self._uses_moving:
            if not self._tf_set:
                self._stand(
                    Condition.TF_MISSING,
                    "an entry uses moving_frame but set_fixed_to_moving_frame_tf was never "
                    "called; call it every loop",
                )
                return
            if not self._tf_ok:
                self._stand(
                    Condition.NON_FINITE,
                    "the fixed-to-moving-frame transform is not finite, or its quaternion is "
                    "zero, or its matrix is not a rotation",
                )
                return
            if self._tf_off_norm:
                self._stand(
                    Condition.OFF_NORM,
                    f"moving-frame quaternion norm {self._tf_norm:.9g} (normalised)",
                )
        if self._tf_t is None:
            self._from_g()
        self._A, self._r = maths.geometry(self._plan(), self._tf_t, self._tf_R)
        if self._fast is not None:
            self._g[:] = (*self._A, *self._r, *self._tf_t, *self._tf_R)

    def _from_g(self) -> None:
        """The Python copies of what the compiled ``set_fixed_to_moving_frame_tf`` left in
        ``g``: ``A``, ``r`` and the transform."""
        g = self._g.tolist()
        self._A, self._r = tuple(g[:9]), tuple(g[9:12])
        self._tf_t, self._tf_R = tuple(g[12:15]), tuple(g[15:])

    def _plan(self) -> tuple:
        """The entries as ``kernels.geometry`` uses them, made once per change of the entries
        (and flattened into ``_plan_array`` for the compiled kernels)."""
        if self._entry_mats is None:
            e = self._entries
            plan = []
            for attr in ("input_ref_point", "output_ref_point"):
                plan += [e[attr].origin is Origin.MOVING, tuple(e[attr].translation)]
            for attr in ("input_expr_axes", "output_expr_axes"):
                q = tuple(e[attr].rotation)
                identity = q == (1.0, 0.0, 0.0, 0.0)
                matrix = s.IDENTITY9 if identity else _mat9(quaternion.to_matrix(q))
                plan += [e[attr].origin is Origin.MOVING, matrix, identity]
            self._entry_mats = tuple(plan)
            flat = []
            for v in plan:
                flat += v if isinstance(v, tuple) else [float(v)]
            self._plan_array[:] = flat
        return self._entry_mats

    def geometry(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(A (3, 3), r (3,) m)`` at the current configuration, or None if it cannot be
        resolved (entry not set, moving-frame transform missing or invalid)."""
        if self._dirty:
            self._resolve()
        if self._standing is not None:
            return None
        if self._A is None:
            self._from_g()
        return np.array(self._A).reshape(3, 3), np.array(self._r)

    # ----------------------------------------------------------------- transform
    def update(self, x_in, out=None, t_us: int | None = None):
        """Transform one signal (6,) from the input point/axes to the output point/axes.

        ``out``: optional (6,) array or list written in place (nothing is allocated then).
        ``t_us``: time stamp for the staleness check (see ``set_fixed_to_moving_frame_tf``).
        Returns ``(code, out)``; see the policy table in ``twin.transforms``.

        The same ``out`` array (float64, writable) and a float64 (6,) ``x_in`` array after an OK
        call take the compiled kernel (``_compiled``) while nothing changes but the
        moving-frame transform; anything else takes the checked path (``_update``).
        """
        if (
            out is self._fast_out
            and type(x_in) is _ND
            and x_in.dtype is F64
            and x_in.ndim == 1
            and self._fast.update6(self._kind, x_in, self._g, out) == 0
        ):
            return _OK, out
        return self._update(x_in, out, t_us)

    def _update(self, x_in, out, t_us):
        if self._dirty:
            self._resolve()
        if self._standing is not None:
            return self._fail(self._standing, self._standing_reason, out)
        if self._A is None:
            self._from_g()
        if type(x_in) is np.ndarray:
            x_in = x_in.tolist()
        try:
            x0, x1, x2, x3, x4, x5 = x_in
            total = x0 + x1 + x2 + x3 + x4 + x5
        except (TypeError, ValueError) as e:
            raise self._signal_error(x_in) from e
        if total - total != 0.0 and not all_finite(x_in):
            return self._fail(Condition.NON_FINITE, f"non-finite input {list(x_in)}", out)
        y0, y1, y2, y3, y4, y5 = self._kernel(self._A, self._r, x0, x1, x2, x3, x4, x5)
        code = self._code
        if code is not _OK:
            self._reason = self._code_reason
        if self._max_age_us is not None and self._uses_moving:
            age_us = (now_us() if t_us is None else t_us) - self._tf_t_us
            if age_us > self._max_age_us:
                outcome = self._table[Condition.STALE]
                reason = (
                    f"fixed-to-moving-frame transform is {age_us} us old "
                    f"(max_tf_age_s = {self._max_age_us * 1e-6:g})"
                )
                if not outcome.computed:
                    return self._fail(Condition.STALE, reason, out)
                if outcome.code > code:
                    code = outcome.code
                    self._reason = reason
        if out is None:
            out = np.array((y0, y1, y2, y3, y4, y5))
        else:
            sink = self._sink(out)
            sink[0] = y0
            sink[1] = y1
            sink[2] = y2
            sink[3] = y3
            sink[4] = y4
            sink[5] = y5
        if code is not self._last_code:
            self._report(code)
        if code is _OK and (self._max_age_us is None or not self._uses_moving):
            self._arm_fast_path(out)
        return code, out

    def update_batch(self, x, moving_tfs=None, out: np.ndarray | None = None):
        """Transform N signals (N, 6); ``moving_tfs`` (N, 7) gives each row its own
        ``fixed_T_moving`` (else the last one set is used for every row).

        Returns ``(codes (N,) int8 of ReturnCode values, out (N, 6))``. Rows follow the policy
        table per row (non-finite rows and a quaternion off unit norm); staleness does not apply.
        Works in chunks of ``BATCH_CHUNK`` rows so that temporaries stay in cache.
        """
        xs, out = self._batch_input(x, out)
        if self._dirty:
            self._resolve()
        n = len(xs)
        per_row = moving_tfs is not None and self._uses_moving
        if per_row:
            tfs = np.asarray(moving_tfs, dtype=float)
            if tfs.shape != (n, 7):
                raise ValueError(
                    f"{type(self).__name__}.update_batch: moving_tfs must have shape ({n}, 7) "
                    f"[tx, ty, tz, qw, qx, qy, qz], got {tfs.shape}"
                )
        if self._standing is Condition.NOT_SET or (self._standing is not None and not per_row):
            return self._batch_codes(out, None, None, self._standing, _OK), out
        if self._fast is not None:
            self._plan()  # also made when the geometry did not resolve (per-row transforms)
            fast, kind, plan, g = self._fast, self._kind, self._plan_array, self._g
            run = fast.batch6_parallel if n >= _compiled.PARALLEL_ROWS else fast.batch6
            rows = tfs if per_row else _NO_TFS

            def kernel(zero_off, status, target):
                run(kind, xs, rows, plan, g, zero_off, status, target)

            return self._compiled_batch(kernel, n, out, _OK if per_row else self._code), out
        if self._A is None:
            self._from_g()
        codes = np.empty(n, dtype=np.int8)
        for lo in range(0, n, BATCH_CHUNK):
            sl = slice(lo, lo + BATCH_CHUNK)
            xc = xs[sl]
            bad = non_finite_rows(xc, axis=1)
            if bad.any():
                xc = np.where(bad[:, None], 0.0, xc)
            if per_row:
                off = self._batch_per_row(xc, tfs[sl], out[sl], bad)
                codes[sl] = self._batch_codes(out[sl], bad, off, None, _OK)
            else:
                self._columns(self._A, self._r, xc, out[sl])
                codes[sl] = self._batch_codes(out[sl], bad, None, None, self._code)
        return codes, out

    def _batch_per_row(self, x, tfs, out, bad) -> np.ndarray:
        """Rows with their own ``fixed_T_moving``: the scalar geometry and kernel evaluated on
        (N,) columns. Marks rows with an invalid transform in ``bad``; returns off-norm rows."""
        cols, norm, bad_tf = pose_columns(tfs)
        bad |= bad_tf
        tx, ty, tz, qw, qx, qy, qz = cols
        off = np.abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE
        rot_m = s.quat_to_mat9((qw / norm, qx / norm, qy / norm, qz / norm))
        a, r = maths.geometry(self._plan(), (tx, ty, tz), rot_m)
        self._columns(a, r, x, out)
        return off

    def _columns(self, a, r, x: np.ndarray, out: np.ndarray) -> None:
        """The scalar kernel on the columns of ``x`` (N, 6) into ``out`` (N, 6); ``a``, ``r``
        components are floats (one geometry) or (N,) arrays (one per row)."""
        np.stack(self._kernel(a, r, *x.T), axis=1, out=out)  # strided columns: no copies

    # ----------------------------------------------------------------- physics
    @staticmethod
    def _kernel(a, r, x0, x1, x2, x3, x4, x5) -> tuple:
        raise NotImplementedError


class WrenchTf(SixVectorTf):
    """Wrench ``[fx, fy, fz, tx, ty, tz]`` N, N m: at the input point in input axes ->
    at the output point in output axes. JSON section ``tf_wrench_config``."""

    SECTION = "tf_wrench_config"
    FIELDS = "[fx, fy, fz, tx, ty, tz]"

    _PHYSICS = "WrenchTf"
    _kernel = staticmethod(maths.wrench)

    def matrix(self) -> np.ndarray | None:
        """The (6, 6) linear map ``y = M x`` at the current configuration, or None if it cannot
        be resolved. ``M = [[A, 0], [-[r]x A, A]]`` (for covariances: ``M C M^T``)."""
        geometry = self.geometry()
        if geometry is None:
            return None
        a, r = geometry
        m = np.zeros((6, 6))
        m[:3, :3] = a
        m[3:, 3:] = a
        m[3:, :3] = -np.cross(r, a, axisa=0, axisb=0, axisc=0)  # -[r]x A
        return m


class TwistTf(SixVectorTf):
    """Twist ``[vx, vy, vz, wx, wy, wz]`` m/s, rad/s: velocity of the input point in input axes
    -> velocity of the output point in output axes. JSON section ``tf_twist_config``."""

    SECTION = "tf_twist_config"
    FIELDS = "[vx, vy, vz, wx, wy, wz]"

    _PHYSICS = "TwistTf"
    _kernel = staticmethod(maths.twist)

    def matrix(self) -> np.ndarray | None:
        """The (6, 6) linear map ``y = M x``: ``[[A, -[r]x A], [0, A]]``, or None."""
        geometry = self.geometry()
        if geometry is None:
            return None
        a, r = geometry
        m = np.zeros((6, 6))
        m[:3, :3] = a
        m[3:, 3:] = a
        m[:3, 3:] = -np.cross(r, a, axisa=0, axisb=0, axisc=0)  # -[r]x A
        return m


class ImuTf(SixVectorTf):
    """IMU ``[ax, ay, az, wx, wy, wz]`` m/s^2, rad/s: specific force (or acceleration) and
    angular rate at the input point in input axes -> at the output point in output axes, with
    the centripetal term and no angular-acceleration term. JSON section ``tf_imu_config``."""

    SECTION = "tf_imu_config"
    FIELDS = "[ax, ay, az, wx, wy, wz]"

    _PHYSICS = "ImuTf"
    _kernel = staticmethod(maths.imu)
