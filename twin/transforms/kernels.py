"""The transformers' maths as plain arithmetic on floats and tuples: one source for the Python
paths (floats for one sample, (N,) arrays for the columns of a batch) and for the numba kernels
(``_compiled`` compiles these very functions).

Matrices are row-major 9-tuples, vectors 3-tuples, quaternions ``(w, x, y, z)``. Flags in the
plans are bools in Python and 0.0/1.0 in compiled code (both test true and false alike).
"""

from __future__ import annotations

from twin.transforms._scalar import (
    mat_mul,
    mat_t_mul,
    mat_t_vec,
    mat_vec,
    qconj,
    qmul,
    qrot,
    transpose,
)


def geometry(plan: tuple, tf_t, tf_r) -> tuple:
    """``A = R_out^T R_in`` (9-tuple) and ``r = R_out^T (p_out - p_in)`` (3-tuple, m) of a
    6-vector transformer, given ``fixed_T_moving`` (``tf_t`` (3,) m, ``tf_r`` 9-tuple).

    ``plan``: ``(in_moving, d_in, out_moving, d_out, in_axes_moving, m_in, in_identity,
    out_axes_moving, m_out, out_identity)``: for each point whether it is on the moving frame
    and its translation (3,) m; for each axes whether they are on the moving frame, their
    matrix (9-tuple) and whether that is the identity."""
    in_moving, d_in, out_moving, d_out, in_axes, m_in, in_ident, out_axes, m_out, out_ident = plan
    tx, ty, tz = tf_t
    pi_x, pi_y, pi_z = d_in
    if in_moving:
        x, y, z = mat_vec(tf_r, d_in)
        pi_x, pi_y, pi_z = tx + x, ty + y, tz + z
    po_x, po_y, po_z = d_out
    if out_moving:
        x, y, z = mat_vec(tf_r, d_out)
        po_x, po_y, po_z = tx + x, ty + y, tz + z
    delta = (po_x - pi_x, po_y - pi_y, po_z - pi_z)
    r_in = m_in
    if in_axes:
        r_in = tf_r if in_ident else mat_mul(tf_r, m_in)
    r_out = m_out
    if out_axes:
        r_out = tf_r if out_ident else mat_mul(tf_r, m_out)
    elif out_ident:  # identity output axes
        return r_in, delta
    if in_ident and not in_axes:
        return transpose(r_out), mat_t_vec(r_out, delta)
    return mat_t_mul(r_out, r_in), mat_t_vec(r_out, delta)


def wrench(a, r, x0, x1, x2, x3, x4, x5) -> tuple:
    """``[f, t]`` -> ``[A f, A t - r x (A f)]``."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = a
    rx, ry, rz = r
    f0 = a0 * x0 + a1 * x1 + a2 * x2
    f1 = a3 * x0 + a4 * x1 + a5 * x2
    f2 = a6 * x0 + a7 * x1 + a8 * x2
    return (
        f0,
        f1,
        f2,
        a0 * x3 + a1 * x4 + a2 * x5 - (ry * f2 - rz * f1),
        a3 * x3 + a4 * x4 + a5 * x5 - (rz * f0 - rx * f2),
        a6 * x3 + a7 * x4 + a8 * x5 - (rx * f1 - ry * f0),
    )


def twist(a, r, x0, x1, x2, x3, x4, x5) -> tuple:
    """``[v, w]`` -> ``[A v + (A w) x r, A w]``."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = a
    rx, ry, rz = r
    w0 = a0 * x3 + a1 * x4 + a2 * x5
    w1 = a3 * x3 + a4 * x4 + a5 * x5
    w2 = a6 * x3 + a7 * x4 + a8 * x5
    return (
        a0 * x0 + a1 * x1 + a2 * x2 + (w1 * rz - w2 * ry),
        a3 * x0 + a4 * x1 + a5 * x2 + (w2 * rx - w0 * rz),
        a6 * x0 + a7 * x1 + a8 * x2 + (w0 * ry - w1 * rx),
        w0,
        w1,
        w2,
    )


def imu(a, r, x0, x1, x2, x3, x4, x5) -> tuple:
    """``[acc, w]`` -> ``[A acc + w_o x (w_o x r), w_o]`` with ``w_o = A w``."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = a
    rx, ry, rz = r
    w0 = a0 * x3 + a1 * x4 + a2 * x5
    w1 = a3 * x3 + a4 * x4 + a5 * x5
    w2 = a6 * x3 + a7 * x4 + a8 * x5
    c0 = w1 * rz - w2 * ry
    c1 = w2 * rx - w0 * rz
    c2 = w0 * ry - w1 * rx
    return (
        a0 * x0 + a1 * x1 + a2 * x2 + (w1 * c2 - w2 * c1),
        a3 * x0 + a4 * x1 + a5 * x2 + (w2 * c0 - w0 * c2),
        a6 * x0 + a7 * x1 + a8 * x2 + (w0 * c1 - w1 * c0),
        w0,
        w1,
        w2,
    )


def pose(c: tuple, px, py, pz, q_p) -> tuple:
    """Output position (3-tuple, m) and quaternion (4-tuple, not renormalised) of ``PoseTf``
    for an input position and unit quaternion ``q_p`` (``twin.transforms.pose``'s formula).

    ``c``: ``(use_p, out_moving, e_zero, rot_out_t, lin, m, off, e, q_const, q_left)`` as
    ``PoseTf._resolve`` makes them (a fixed output point ignores ``p``)."""
    use_p, out_moving, e_zero, rot_out_t, lin, m, off, e, q_const, q_left = c
    if out_moving:
        mx, my, mz = m
        v = m
        if use_p:
            v = (px + mx, py + my, pz + mz)
        ux, uy, uz = qrot(qconj(q_p), v)
        ex, ey, ez = e
        return mat_vec(rot_out_t, (ux + ex, uy + ey, uz + ez)), q_const
    q_out = qmul(q_left, q_p)
    if not use_p:
        return off, q_out
    if not e_zero:
        ex, ey, ez = qrot(q_p, e)
        px, py, pz = px + ex, py + ey, pz + ez
    x, y, z = mat_vec(lin, (px, py, pz))
    ox, oy, oz = off
    return (x + ox, y + oy, z + oz), q_out
