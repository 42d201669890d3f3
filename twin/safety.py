"""The joint-limit safety layer: one rule set, applied above the backends by ``Robot.write``.

Every command a user writes passes ``JointLimits.shape`` (inside ``JointCommand.validated``),
so ``sim.PyBulletRobot`` and ``hardware.SerialRobot`` enforce the same limits with no
backend code. The limits come from the URDF (``ArmModel``): position ``lower``/``upper`` rad,
``velocity_limits`` rad/s and ``effort_limits`` N m, per joint. The rules, in this order:

1. **Position**: ``q_des`` outside the *soft* limits ``[lower + margin, upper - margin]``
   (``SOFT_MARGIN_RAD``, 0.02 rad) is clamped to them. Clamped, not refused: a stream of
   commands that runs into a limit stops at it instead of failing.
2. **Velocity**: ``qd_des`` beyond ``+-velocity_limits`` is clamped to them.
3. **Effort**: ``tau_ff`` beyond ``+-effort_limits`` is clamped to them (and the applied torque
   ``u`` always is, by ``joint_torque``).
4. **Feed-forward on a joint with stiffness** (``kp > 0``): the law's rest point
   ``q_des + (tau_ff + kd qd_des) / kp`` (where ``u = 0`` at rest) must lie inside the soft
   limits too, or a ``tau_ff``/gain combination could push the joint past its limit; the
   feed-forward is cut until it does (``tau_ff`` first, within the effort limit, then
   ``qd_des``). A feed-forward that points inwards is never cut, so gravity compensation
   holds as before, except on a joint commanded right at a limit that gravity pulls away
   from it: that joint settles short of the limit by ``gravity / kp``.
5. **Feed-forward on a joint without stiffness** (``kp = 0``: torque or velocity control):
   no rest point exists, so the law itself is bounded by a one-sided wall at the soft limits,
   ``kw (lower_soft - q) - kd qd <= u <= kw (upper_soft - q) - kd qd`` with the command's own
   ``kd`` and ``kw = WALL_RATE_PER_S * kd`` (with ``kd = 0`` no outward torque is applied at or
   beyond a soft limit), within the effort limits: ros2_control's soft joint limits with
   ``k_position = WALL_RATE_PER_S`` and ``k_velocity = kd`` (the approach speed is at most
   ``WALL_RATE_PER_S`` times the distance left). ``joint_torque`` applies it from the measured
   state wherever the law is computed on the host: every physics substep in the sim, every
   cycle of the serial backend's host-side current mode (its servo-side mode refuses such
   commands).

What the rules do not bound: the transient of the user's own loop. A step into a limit with
an under-damped ``kp``/``kd`` overshoots the soft limit by the loop's overshoot (the margin
absorbs a few per cent; the sim's URDF joints have hard stops, a real arm its end stops).
Holds (before the first command, and on a watchdog expiry) keep the measured position: a hold
never moves the arm, not even out of the margin.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from twin.kinematics.model import ArmModel

#: Distance (rad) inside each URDF position limit where commands stop.
SOFT_MARGIN_RAD = 0.02
#: Stiffness of the rule-5 wall per unit of the command's damping: ``kw = WALL_RATE_PER_S * kd``
#: (N m/rad per N m s/rad), a wall time constant of 50 ms.
WALL_RATE_PER_S = 20.0
_FAR = 1e9  # rad: stands in for an infinite limit (continuous joints) in the wall
_FAST_GAIN = 1e12  # gains the one-pass check (``holds``) takes; beyond: the general path


class JointLimits:
    """The soft position, velocity and effort limits of one arm (module doc).

    lower, upper: (n,) rad, the soft limits (URDF limits moved inwards by the margin; at most a
    quarter of the range). velocity: (n,) rad/s. effort: (n,) N m.
    """

    def __init__(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        velocity: np.ndarray,
        effort: np.ndarray,
        margin: float = SOFT_MARGIN_RAD,
    ) -> None:
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        if not (math.isfinite(margin) and margin >= 0.0):
            raise ValueError(f"soft margin must be a finite number of rad >= 0, got {margin}")
        span = np.where(np.isfinite(upper - lower), upper - lower, np.inf)
        m = np.minimum(margin, span / 4.0)
        self.lower, self.upper = _frozen(lower + m), _frozen(upper - m)
        self.velocity = _frozen(np.asarray(velocity, float))
        self.effort = _frozen(np.asarray(effort, float))
        self.n = self.lower.size
        # Python lists for the per-command checks (a handful of floats: numpy's call cost dominates)
        self._lo, self._hi = self.lower.tolist(), self.upper.tolist()
        self._vmax, self._emax = self.velocity.tolist(), self.effort.tolist()
        self._wall_lo = np.clip(self.lower, -_FAR, _FAR)
        self._wall_hi = np.clip(self.upper, -_FAR, _FAR)
        # holds(): per joint (lower, upper, -velocity, velocity, -effort, effort), all finite
        v, e = np.minimum(self.velocity, _FAR), np.minimum(self.effort, _FAR)
        self._bounds = tuple(
            zip(*(x.tolist() for x in (self._wall_lo, self._wall_hi, -v, v, -e, e)))
        )

    @classmethod
    def from_model(cls, model: ArmModel, margin: float = SOFT_MARGIN_RAD) -> JointLimits:
        """The limits of ``model`` (its URDF)."""
        return cls(model.lower, model.upper, model.velocity_limits, model.effort_limits, margin)

    def holds(
        self, q: list[float], qd: list[float], tau: list[float], kp: list[float], kd: list[float]
    ) -> bool:
        """Whether a command needs nothing done: every value finite, on every joint gains >= 0
        with stiffness (so rule 5 is not needed), ``|tau_ff| <=`` the effort limit and rules 1,
        2 and 4 hold. One pass over the joints; ``False`` only says "not certain", for the
        general path to decide (a value beyond ``1e9``, a gain beyond ``1e12``).

        q, qd, tau, kp, kd: the command's rows ``q_des, qd_des, tau_ff, kp, kd``, n floats each.
        """
        big = _FAST_GAIN
        for a, b, c, k, d, (low, high, v_lo, v_hi, e_lo, e_hi) in zip(
            q, qd, tau, kp, kd, self._bounds
        ):
            # chained comparisons against finite bounds: nan and inf fail every one of them
            if not (
                big > k > 0.0 <= d < big
                and low <= a <= high
                and v_lo <= b <= v_hi
                and e_lo <= c <= e_hi
                and low <= a + (c + d * b) / k <= high
            ):
                return False
        return True

    def shape(self, stacked: np.ndarray, values: list[float]) -> bool:
        """Apply rules 1, 2 and 4 to a command's rows in place; True if rule 5 is needed.

        stacked: (5, n) float64 rows ``q_des, qd_des, tau_ff, kp, kd`` (finite, gains >= 0,
        ``tau_ff`` already within the effort limits); values: the same as a flat list of floats.
        """
        n, lo, hi, vmax = self.n, self._lo, self._hi, self._vmax
        q, qd, tau = values[:n], values[n : 2 * n], values[2 * n : 3 * n]
        kp, kd = values[3 * n : 4 * n], values[4 * n :]
        for a, b, c, k, d, low, high, v in zip(q, qd, tau, kp, kd, lo, hi, vmax):
            if not (-v <= b <= v and low <= a <= high and k != 0.0):
                break
            if not low <= a + (c + d * b) / k <= high:
                break
        else:
            return False  # the common case, one pass: every rule holds already
        if min(map(float.__sub__, q, lo)) < 0.0 or max(map(float.__sub__, q, hi)) > 0.0:
            q = list(map(min, map(max, q, lo), hi))
            stacked[0] = q
        if max(map(float.__sub__, map(abs, qd), vmax)) > 0.0:
            qd = [min(max(v, -m), m) for v, m in zip(qd, vmax)]
            stacked[1] = qd
        wall = False
        for j in range(n):
            ff = tau[j] + kd[j] * qd[j]
            if ff == 0.0:
                continue
            if kp[j] == 0.0:
                wall = True
                continue
            rest = q[j] + ff / kp[j]
            if rest > hi[j]:
                self._cut(stacked, j, kp[j] * (hi[j] - q[j]), tau[j], kd[j], qd[j])
            elif rest < lo[j]:
                self._cut(stacked, j, kp[j] * (lo[j] - q[j]), tau[j], kd[j], qd[j])
        return wall

    def _cut(self, stacked, j: int, ff: float, tau: float, kd: float, qd: float) -> None:
        """Make joint ``j``'s feed-forward ``tau_ff + kd qd_des`` equal ``ff`` N m: ``tau_ff``
        first (within the effort limit), then ``qd_des``."""
        e = self._emax[j]
        new_tau = min(max(ff - kd * qd, -e), e)
        stacked[2, j] = new_tau
        if new_tau != ff - kd * qd:  # the effort limit stopped tau_ff: the rest from qd_des
            stacked[1, j] = (ff - new_tau) / kd

    def wall(
        self, kp: np.ndarray, kd: np.ndarray, u: np.ndarray, q: np.ndarray, qd: np.ndarray
    ) -> np.ndarray:
        """Rule 5: ``u`` (n,) N m bounded on the joints with ``kp = 0`` by the wall at the soft
        limits, from the command's gains ``kp`` (n,) N m/rad, ``kd`` (n,) N m s/rad and the
        measured ``q`` (n,) rad and ``qd`` (n,) rad/s."""
        kw = WALL_RATE_PER_S * kd
        damping = kd * qd
        hi = kw * (self._wall_hi - q) - damping
        lo = kw * (self._wall_lo - q) - damping
        undamped = kd == 0.0
        if undamped.any():
            hi = np.where(undamped, np.where(q >= self._wall_hi, 0.0, np.inf), hi)
            lo = np.where(undamped, np.where(q <= self._wall_lo, 0.0, -np.inf), lo)
        walled = np.clip(np.clip(u, lo, hi), -self.effort, self.effort)
        return np.where(kp == 0.0, walled, u)


@functools.lru_cache(maxsize=16)
def limits_for(model: ArmModel) -> JointLimits:
    """The ``JointLimits`` of ``model`` with the default margin (one per model instance)."""
    return JointLimits.from_model(model)


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only float64 copy of ``a`` (``a`` itself if it is one already, e.g. a model's)."""
    if isinstance(a, np.ndarray) and a.dtype == np.float64 and not a.flags.writeable:
        return a
    a = np.array(a, dtype=float)
    a.flags.writeable = False
    return a
