"""``PoseTf``: a pose ``[px, py, pz, qw, qx, qy, qz]`` re-expressed for another reference point and
other expression axes, with the vendor SDK's meaning of a pose (``docs/reference/transformers.md``).

What a pose means: the position is the vector from the base (the fixed frame's origin, always the
start) to the reference point (the end), written in the expression axes; the orientation is the
moving body's orientation relative to those axes (``q * v_moving = v_expressed``). The input pose
gives where the moving body is, so there is no ``set_fixed_to_moving_frame_tf``.

With the input ``[p, q]``, input axes ``R_ia`` (``fixed_frame`` only: the input quaternion
defines the moving frame, so moving input axes would be circular and are refused) and the body's
orientation ``R_fm = R_ia R(q)`` in the base:

- the body origin is ``o = R_ia p - c_in``, with ``c_in = d_in`` for a ``fixed_frame`` input
  point (an offset in base axes) or ``c_in = R_fm e_in`` for a ``moving_frame`` one (a body
  point);
- the output point is ``P = d_out`` for a ``fixed_frame`` output point (a point of the base: the
  same whatever the body does) or ``P = o + R_fm e_out`` for a ``moving_frame`` one;
- the output axes are ``R_oa = R_out`` (``fixed_frame``) or ``R_fm R_out`` (``moving_frame``).

In one formula: ``pose_out = [R_oa^T P, R_oa^T R_fm]`` (positions m, unit quaternions).
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
    TransformerBase,
    all_finite,
    pose_columns,
)
from twin.transforms.codes import Condition, ReturnCode
from twin.transforms.config import QUATERNION_NORM_TOLERANCE, Origin, _Where

_OK = ReturnCode.OK
_ZERO3 = (0.0, 0.0, 0.0)
_ND = np.ndarray


def _floats(values: np.ndarray) -> tuple:
    """Python floats for the scalar hot path."""
    return tuple(np.asarray(values, dtype=float).tolist())


class PoseTf(TransformerBase):
    """Pose ``[px, py, pz, qw, qx, qy, qz]`` (m, unit quaternion ``[w, x, y, z]``) of the input
    reference point in the input axes -> the same of the output reference point in the output
    axes (the module's formula). JSON section ``tf_pose_config``."""

    SECTION = "tf_pose_config"
    SIZE = 7
    FIELDS = "[px, py, pz, qw, qx, qy, qz]"

    def __init__(self, source=None) -> None:
        super().__init__(source)
        self._out_moving = False
        # The constants of ``kernels.pose`` (set by ``_resolve``), and flattened for the
        # compiled kernels (``_compiled.pose_constants``).
        self._c: tuple = ()
        self._c_array = np.zeros(38)

    def _check_entry(self, attr, origin, where: _Where, fld: str) -> None:
        if attr == "input_expr_axes" and origin == Origin.MOVING:
            raise where.error(
                fld,
                "PoseTf: the input expression axes cannot use 'moving_frame' (the input pose's "
                "quaternion defines the moving frame: circular); expected 'fixed_frame'",
            )

    def _resolve(self) -> None:
        if not self._begin_resolve():
            return
        e = self._entries
        d_in, d_out = e["input_ref_point"], e["output_ref_point"]
        q_ia = np.asarray(e["input_expr_axes"].rotation)
        q_out_c = quaternion.conjugate(np.asarray(e["output_expr_axes"].rotation))
        self._out_moving = e["output_expr_axes"].origin is Origin.MOVING
        use_p = d_out.origin is Origin.MOVING  # False: the position ignores the input's
        rot_out_t = quaternion.to_matrix(q_out_c)
        # P = R_ia (p + R(q) e) + d (the R_ia term only for a moving output point)
        if use_p:
            # e = e_out - e_in (body points), d = -d_in (a fixed input point: a base offset)
            e_in = np.asarray(d_in.translation) if d_in.origin is Origin.MOVING else np.zeros(3)
            e_out = _floats(np.asarray(d_out.translation) - e_in)
            d = -np.asarray(d_in.translation) if d_in.origin is Origin.FIXED else np.zeros(3)
        else:
            # P = d = d_out, a point of the base
            e_out = _ZERO3
            d = np.asarray(d_out.translation, dtype=float)
        unit = (1.0, 0.0, 0.0, 0.0)
        m = off = _ZERO3
        lin, q_const, q_left = s.IDENTITY9, unit, unit
        if self._out_moving:
            # pos = R_out^T (R(q)^T (p + R_ia^T d) + e); orientation = conj(q_out)
            m = _floats(quaternion.rotate(quaternion.conjugate(q_ia), d))
            q_const = _floats(q_out_c)
        else:
            # pos = R_out^T R_ia (p + R(q) e) + R_out^T d; orientation = conj(q_out) q_ia q
            lin = _floats((rot_out_t @ quaternion.to_matrix(q_ia)).ravel())
            off = _floats(rot_out_t @ d)
            q_left = _floats(quaternion.multiply(q_out_c, q_ia))
        self._c = (use_p, self._out_moving, e_out == _ZERO3, _floats(rot_out_t.ravel()), lin, m,
                   off, e_out, q_const, q_left)  # fmt: skip
        flat = []
        for v in self._c:
            flat += v if isinstance(v, tuple) else [float(v)]
        self._c_array[:] = flat

    def update(self, x_in, out=None, t_us: int | None = None):
        """Transform one pose (7,). ``out``: optional (7,) array or list written in place.
        ``t_us`` is accepted for interface symmetry (a pose has no moving-frame transform to
        age). Returns ``(code, out)``; the output quaternion is unit and canonical.

        The same ``out`` array (float64, writable) and a float64 (7,) ``x_in`` array after an OK
        call take the compiled kernel (``_compiled``) until the entries change; anything else
        takes the checked path (``_update``)."""
        if (
            out is self._fast_out
            and type(x_in) is _ND
            and x_in.dtype is F64
            and x_in.ndim == 1
            and self._fast.pose_update(x_in, self._c_array, out) == 0
        ):
            return _OK, out
        return self._update(x_in, out)

    def _update(self, x_in, out):
        if self._dirty:
            self._resolve()
        if self._standing is not None:
            return self._fail(self._standing, self._standing_reason, out)
        if type(x_in) is np.ndarray:
            x_in = x_in.tolist()
        try:
            px, py, pz, qw, qx, qy, qz = x_in
            n2 = qw * qw + qx * qx + qy * qy + qz * qz
            total = px + py + pz + n2
        except (TypeError, ValueError) as e:
            raise self._signal_error(x_in) from e
        if not (n2 > 0.0 and (total - total == 0.0 or all_finite(x_in))):
            return self._fail(
                Condition.NON_FINITE, f"non-finite input or zero quaternion {list(x_in)}", out
            )
        code = _OK
        n = math.sqrt(n2)
        if abs(n - 1.0) > QUATERNION_NORM_TOLERANCE:
            outcome = self._table[Condition.OFF_NORM]
            reason = f"input quaternion norm {n:.9g} (normalised)"
            if not outcome.computed:
                return self._fail(Condition.OFF_NORM, reason, out)
            code = outcome.code
            self._reason = reason
        pos, q = maths.pose(self._c, px, py, pz, (qw / n, qx / n, qy / n, qz / n))
        qw, qx, qy, qz = s.qcanonical(q)
        if out is None:
            out = np.array((pos[0], pos[1], pos[2], qw, qx, qy, qz))
        else:
            sink = self._sink(out)
            sink[0], sink[1], sink[2] = pos
            sink[3] = qw
            sink[4] = qx
            sink[5] = qy
            sink[6] = qz
        if code is not self._last_code:
            self._report(code)
        if code is _OK:
            self._arm_fast_path(out)
        return code, out

    def update_batch(self, x, out: np.ndarray | None = None):
        """Transform N poses (N, 7). Returns ``(codes (N,) int8, out (N, 7))``; rows with a
        non-finite value or zero quaternion, or off unit norm, follow the policy table. The
        same formulas as ``update``, evaluated on (N,) columns."""
        xs, out = self._batch_input(x, out)
        if self._dirty:
            self._resolve()
        if self._standing is not None:
            return self._batch_codes(out, None, None, self._standing, _OK), out
        n = len(xs)
        if self._fast is not None:
            fast, c = self._fast, self._c_array
            run = fast.pose_batch_parallel if n >= _compiled.PARALLEL_ROWS else fast.pose_batch

            def kernel(zero_off, status, target):
                run(xs, c, zero_off, status, target)

            return self._compiled_batch(kernel, n, out, _OK), out
        codes = np.empty(n, dtype=np.int8)
        for lo in range(0, len(xs), BATCH_CHUNK):
            sl = slice(lo, lo + BATCH_CHUNK)
            codes[sl] = self._batch_chunk(xs[sl], out[sl])
        return codes, out

    def _batch_chunk(self, xs: np.ndarray, out: np.ndarray) -> np.ndarray:
        cols, norm, bad = pose_columns(xs)
        px, py, pz, qw, qx, qy, qz = cols
        off = np.abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE
        pos, q = maths.pose(self._c, px, py, pz, (qw / norm, qx / norm, qy / norm, qz / norm))
        if self._out_moving:  # constant orientation
            q = tuple(np.full(len(px), c) for c in q)
        n = len(px)
        values = [v if type(v) is np.ndarray else np.full(n, v) for v in pos]  # constant for a
        np.stack((*values, *s.qcanonical_columns(q)), axis=1, out=out)  # fixed output point
        return self._batch_codes(out, bad, off, None, _OK)
