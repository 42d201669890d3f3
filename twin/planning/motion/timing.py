"""Time parameterisation of a ``JointCurve`` within per-joint velocity and acceleration limits.

Every piece of the curve is run as constant-acceleration phases, so the trajectory is exactly a
list of phases ``q(t) = q0 + v0 t + a t^2 / 2`` (joint space):

* a straight piece of direction ``u`` is a trapezoid (or triangle) in its arc length ``s``: path
  speed at most ``V = min_j vmax_j / |u_j|``, path acceleration ``A = min_j amax_j / |u_j|``, so
  ``|qd_j| = |u_j| sdot <= vmax_j`` and ``|qdd_j| = |u_j| sddot <= amax_j``;
* a blend (``curve``) is run with its Bezier parameter linear in time over ``T = 2 entry / v_in``:
  its velocity goes linearly from ``u_in v_in`` to ``u_out v_out`` (``v_out = v_in exit / entry``)
  and its acceleration ``(u_out v_out - u_in v_in) / T`` is constant, so the limits hold when
  ``v_in <= sqrt(2 entry amax_j / |k u_out_j - u_in_j|)`` (``k = exit / entry``) and both speeds
  are within the neighbouring segments' ``V``;
* the speed at each blend is the largest that the limits and the neighbouring segments allow
  (forward-backward pass over the chain, as in classic velocity planning); stops and the two ends
  are passed at rest.

The result is time-optimal for this phase structure (not along the blend: its speed is set by the
constant-acceleration form). No jerk limit: the acceleration steps between phases.

The trajectory is analytic: sampled at any time, its samples lie on the curve, and the finite
differences of sampled positions and velocities are averages of the analytic ones, so they obey
the limits too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.planning.errors import PlanningInputError
from twin.planning.motion.curve import Blend, JointCurve, Line

_TINY = 1e-12


@dataclass(frozen=True)
class Trajectory:
    """Constant-acceleration phases: ``t_start`` (M+1,) s phase boundaries (``t_start[-1]`` is
    the duration), ``q0``, ``v0``, ``a`` (M, d): position rad, velocity rad/s and acceleration
    rad/s^2 of each phase at its start. Past the end the trajectory rests at its last point."""

    t_start: np.ndarray
    q0: np.ndarray
    v0: np.ndarray
    a: np.ndarray
    end: np.ndarray

    @property
    def duration(self) -> float:
        """s."""
        return float(self.t_start[-1])

    def sample(self, t: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position (K, d) rad, velocity (K, d) rad/s, acceleration (K, d) rad/s^2 at times
        ``t`` (K,) s (clamped to ``[0, duration]``; after the end: the end point at rest)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if len(self.a) == 0:
            z = np.zeros((len(t), len(self.end)))
            return np.broadcast_to(self.end, z.shape).copy(), z, z.copy()
        after = t >= self.duration
        tc = np.clip(t, 0.0, self.duration)
        k = np.clip(np.searchsorted(self.t_start, tc, side="right") - 1, 0, len(self.a) - 1)
        dt = (tc - self.t_start[k])[:, None]
        q = self.q0[k] + self.v0[k] * dt + 0.5 * self.a[k] * dt * dt
        qd = self.v0[k] + self.a[k] * dt
        qdd = self.a[k].copy()
        q[after] = self.end
        qd[after] = 0.0
        qdd[after] = 0.0
        return q, qd, qdd

    def sample_times(self, period_s: float) -> np.ndarray:
        """Times (K,) s ``0, period, ...`` up to the first one at or after the end."""
        if not (np.isfinite(period_s) and period_s > 0):
            raise PlanningInputError(f"period_s: expected a period > 0 s, got {period_s}")
        count = int(np.ceil(self.duration / period_s - 1e-9)) + 1
        return np.arange(count) * period_s


def _limits(values: object, d: int, what: str) -> np.ndarray:
    x = np.broadcast_to(np.asarray(values, dtype=float), (d,)).copy()
    if not np.all(np.isfinite(x)) or np.any(x <= 0.0):
        raise PlanningInputError(f"{what}: expected {d} finite limits > 0, got {values}")
    return x


def _path_limit(u: np.ndarray, limits: np.ndarray) -> float:
    """``min_j limit_j / |u_j|`` over the joints that move."""
    m = np.abs(u) > _TINY
    return float(np.min(limits[m] / np.abs(u[m])))


def time_parameterize(
    curve: JointCurve, velocity_limits: object, acceleration_limits: object
) -> Trajectory:
    """The fastest trajectory of the phase structure above along ``curve``.

    velocity_limits (d,) rad/s and acceleration_limits (d,) rad/s^2, each > 0.
    """
    d = curve.vertices.shape[1]
    vmax = _limits(velocity_limits, d, "velocity_limits")
    amax = _limits(acceleration_limits, d, "acceleration_limits")
    pieces = curve.pieces
    if not pieces:
        return Trajectory(
            np.zeros(1), np.zeros((0, d)), np.zeros((0, d)), np.zeros((0, d)), curve.end
        )
    # The chain: node speeds between pieces. Node j is the junction after piece j.
    speed_cap = np.full(len(pieces) + 1, np.inf)
    speed_cap[0] = speed_cap[-1] = 0.0
    seg_v = np.array([_path_limit(p.u, vmax) if isinstance(p, Line) else np.inf for p in pieces])
    seg_a = np.array([_path_limit(p.u, amax) if isinstance(p, Line) else np.inf for p in pieces])
    ratio = np.ones(len(pieces))  # speed at the end of piece / speed at its start
    for j, p in enumerate(pieces):
        if isinstance(p, Blend):
            k = p.exit / p.entry
            ratio[j] = k
            cap_in = min(_path_limit(p.u_in, vmax), _path_limit(p.u_out, vmax) / k)
            diff = np.abs(k * p.u_out - p.u_in)
            m = diff > _TINY
            if np.any(m):
                cap_in = min(cap_in, float(np.min(np.sqrt(2.0 * p.entry * amax[m] / diff[m]))))
            speed_cap[j] = min(speed_cap[j], cap_in)
            speed_cap[j + 1] = min(speed_cap[j + 1], k * cap_in)
        else:
            speed_cap[j] = min(speed_cap[j], seg_v[j])
            speed_cap[j + 1] = min(speed_cap[j + 1], seg_v[j])
    # Where the direction jumps between two pieces (a stop vertex) the node is passed at rest.
    for j in range(1, len(pieces)):
        if np.linalg.norm(_end_direction(pieces[j - 1]) - _start_direction(pieces[j])) > 1e-9:
            speed_cap[j] = 0.0
    v = speed_cap.copy()
    for j, p in enumerate(pieces):  # forward
        if isinstance(p, Line):
            v[j + 1] = min(v[j + 1], np.sqrt(v[j] ** 2 + 2.0 * seg_a[j] * p.length))
        else:
            v[j + 1] = min(v[j + 1], ratio[j] * v[j])
    for j in range(len(pieces) - 1, -1, -1):  # backward
        p = pieces[j]
        if isinstance(p, Line):
            v[j] = min(v[j], np.sqrt(v[j + 1] ** 2 + 2.0 * seg_a[j] * p.length))
        else:
            v[j] = min(v[j], v[j + 1] / ratio[j])
    for j, p in enumerate(pieces):  # a blend's two speeds are tied by its ratio
        if isinstance(p, Blend):
            v[j + 1] = ratio[j] * v[j]
            if v[j] <= _TINY:
                raise PlanningInputError(
                    "a blend would be passed at rest; the path's blend radii are inconsistent "
                    "(a blend needs a straight stretch or another blend on each side)"
                )
    phases: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
    for j, p in enumerate(pieces):
        if isinstance(p, Line):
            phases.extend(_line_phases(p, v[j], v[j + 1], seg_v[j], seg_a[j]))
        else:
            duration = 2.0 * p.entry / v[j]
            acc = (p.u_out * v[j + 1] - p.u_in * v[j]) / duration
            phases.append((duration, p.a, p.u_in * v[j], acc))
    durations = np.array([ph[0] for ph in phases])
    t_start = np.concatenate(([0.0], np.cumsum(durations)))
    return Trajectory(
        t_start,
        np.array([ph[1] for ph in phases]),
        np.array([ph[2] for ph in phases]),
        np.array([ph[3] for ph in phases]),
        curve.end.copy(),
    )


def _start_direction(p: Line | Blend) -> np.ndarray:
    return p.u if isinstance(p, Line) else p.u_in


def _end_direction(p: Line | Blend) -> np.ndarray:
    return p.u if isinstance(p, Line) else p.u_out


def _line_phases(p: Line, v0: float, v1: float, vmax: float, amax: float):
    """Accelerate, cruise, decelerate along a straight piece (phases of positive duration)."""
    v0, v1 = min(v0, vmax), min(v1, vmax)
    peak = min(vmax, np.sqrt(max(0.0, amax * p.length + 0.5 * (v0 * v0 + v1 * v1))))
    peak = max(peak, v0, v1)
    s_acc = (peak * peak - v0 * v0) / (2.0 * amax)
    s_dec = (peak * peak - v1 * v1) / (2.0 * amax)
    s_cruise = p.length - s_acc - s_dec
    if s_cruise < 0.0:  # rounding: v0 and v1 are reachable by construction
        s_cruise = 0.0
    out = []
    s = 0.0
    if peak - v0 > _TINY:
        out.append(((peak - v0) / amax, p.start + s * p.u, p.u * v0, p.u * amax))
        s += s_acc
    if s_cruise > _TINY and peak > _TINY:
        out.append((s_cruise / peak, p.start + s * p.u, p.u * peak, np.zeros_like(p.u)))
        s += s_cruise
    if peak - v1 > _TINY:
        out.append(((peak - v1) / amax, p.start + s * p.u, p.u * peak, -p.u * amax))
    return out
