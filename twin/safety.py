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

6. **Speed on the motion** (per robot, ``TargetRamp`` and ``VelocityWatch``, on every backend
   whose ``step`` runs ``Robot._before_step``: the sim and the serial backend). Two limits on
   ``q_des``, re-applied at the start of every control period:

   - *ramp*: ``q_des`` moves at most ``velocity_limits * control_period_s`` per period from the
     ``q_des`` in force. A farther target is reached along a ramp at the limit, one step per
     ``step()``; the written command stays in force meanwhile (a ramp step is not a command:
     the watchdog counts from the caller's last ``write``).
   - *law speed* (Khatib's velocity saturation): on a joint whose loop is under-damped on the
     URDF's inertia at the measured ``q`` (damping ratio ``kd / (2 sqrt(kp M_jj))`` below
     ``DAMPING_RATIO_BOUNDED``), ``q_des`` is kept where the speed the law aims for,
     ``qd_des + (tau_ff - g(q) + kp (q_des - q)) / kd`` (``g``: the URDF's gravity torques),
     stays within the limit plus ``LAW_SPEED_MARGIN |qd_des|``. A ramp alone lets a stiff,
     under-damped loop lag and then overshoot (the reach policy's gains on joint 1: 2.3x the
     limit after a 0.5 rad step); a well-damped loop follows the ramp without overshoot, and
     is left alone because the bound assumes the law's ``kd`` is all the damping (a plant with
     10x that viscous damping would be slowed to a tenth). The bound sees one joint at a time;
     a joint that the others' motion drives past it anyway (the reach policy's joint 2, to
     1.3x, as joints 1 and 3 swing) is braked: its aim drops by ``OVERSPEED_GAIN`` times the
     excess, which multiplies the law's damping against the excess by ``1 + OVERSPEED_GAIN``.

   A target that moves within the limits (the planner's time-parameterised trajectories) is
   applied unchanged: its tracking figures are bit for bit those without the rule. The reach
   policy, which steps ``q_des`` by up to 0.25 rad at 25 Hz with stiff gains, is slowed from
   3.7x the limit (joint 2, ``twin demo``) to about 1.2x (``policies/reach.md``). The rule limits the target, not
   the joint: a push or a fault can still drive a joint faster, so ``VelocityWatch`` measures
   each joint's speed (its displacement over ``VELOCITY_WINDOW_S``) every period and publishes
   each excursion above ``velocity_limits * (1 + VELOCITY_MARGIN)`` as a velocity-limit event
   (``twin.events``: source ``safety``, kind ``velocity_limit``; ``Robot.velocity_events()``).
   A joint in torque or velocity control (``kp = 0``) is bounded by rule 2 alone, a joint
   without damping (``kd = 0``) by the ramp alone.

What the rules do not bound: the transient of the user's own loop. A step into a limit with
an under-damped ``kp``/``kd`` overshoots the soft limit by the loop's overshoot (the margin
absorbs a few per cent; the sim's URDF joints have hard stops, a real arm its end stops).
Holds (before the first command, and on a watchdog expiry) keep the measured position: a hold
never moves the arm, not even out of the margin.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from twin.kinematics.model import ArmModel

#: Rule 6: the measured joint speed may exceed the URDF velocity limit by this share (tracking
#: overshoot of a ramp at the limit) before ``VelocityWatch`` reports a velocity-limit event.
VELOCITY_MARGIN = 0.25
#: Rule 6: a joint's measured speed is its displacement over this window of readings (s).
VELOCITY_WINDOW_S = 0.02
#: Rule 6: the speed the law may aim for is the URDF limit plus this share of the command's own
#: ``|qd_des|``: headroom for a time-parameterised trajectory at the limit to catch up a lag
#: (0.2: the planner's tracking figures are bit for bit those without rule 6; 0.1 made them
#: worse by 1-4 %); a policy that commands positions alone (``qd_des = 0``) gets none.
LAW_SPEED_MARGIN = 0.2
#: Rule 6: joints whose law has a damping ratio below this (on the URDF's inertia at the measured
#: configuration) get the law-speed bound; better-damped ones follow the ramp with a speed
#: overshoot below 5 % (a second-order loop's step overshoot at ratio 0.7 is 4.6 %).
DAMPING_RATIO_BOUNDED = 0.7
#: Rule 6's cheap test of whether gains can be under-damped at all: the joint-space inertia's
#: diagonal at this many seeded configurations, its largest value per joint times the factor.
INERTIA_SAMPLES = 256
INERTIA_BOUND_FACTOR = 1.5
#: Rule 6: the URDF's inertia and gravity torques are recomputed once the arm has moved this far
#: (rad, any joint) from where they were last computed.
MODEL_TERMS_RAD = 0.03
#: Rule 6: an under-damped joint measured faster than its law-speed cap (pushed by the other
#: joints' motion, which the per-joint bound does not see) is braked with its damping against the
#: excess times ``1 + OVERSPEED_GAIN`` (less where one control period could not hold it stably).
OVERSPEED_GAIN = 4.0
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


class TargetRamp:
    """Rule 6 for one robot: the rate of ``q_des`` and the law's speed (module doc).

    ``limit`` takes each validated command (the *target*) and returns the one to apply now;
    ``advance`` (at every ``step()``, with the measured state) returns the next period's
    command when it differs from the one in force. ``ref`` (n,) rad is the ``q_des`` in force
    (None before the first command: the measured position).
    """

    def __init__(self, model: ArmModel, limits: JointLimits, period_s: float):
        self.model, self.limits, self.names = model, limits, model.joint_names
        self.period_s = period_s
        self._terms: tuple[list[float], list[float], list[float]] | None = None
        self.step_rad = np.minimum(limits.velocity * period_s, _FAR).tolist()
        self.speed = np.minimum(limits.velocity, _FAR).tolist()
        self.ref: list[float] | None = None
        self.target = None  # the validated command in force (limited until reached), or None
        self._want: list[float] | None = None  # the target's q_des (n,) rad
        # the target's under-damped joints (``_underdamped``) for the model terms in use
        self._bounded: list[int] = []
        self._bounded_for: tuple[bytes, bytes, int] | None = None  # (kp, kd, terms version)
        self._terms_version = 0
        self._gains: tuple[bytes, bytes] | None = None  # the target's (kp, kd) last seen
        self._may_bound = True  # whether those gains leave a joint under-damped somewhere
        self.fresh = False  # a command was written in this period (``limit``)

    def limit(self, command, reading):
        """The command to apply now for ``command`` (a validated ``JointCommand``), written in
        this period: its ``q_des`` one period's step at most from ``ref`` (at first, from the
        measured position) and, with a reading, within the law-speed bound. ``reading`` is a
        callable giving the latest ``(q, qd)`` (n,) rad, rad/s, or None (the step alone). The
        coming period's ``advance`` then keeps it (one step a period, however often a caller
        writes)."""
        q = qd = None
        if reading is not None:
            q, qd = reading()
        if self.ref is None:
            self.ref = list(q)
        self.fresh = True
        return self._bounded_towards(command, q, qd)

    def advance(self, q: list[float], qd: list[float]):
        """The command for the coming period, from the measured ``q``, ``qd`` (n,) rad, rad/s,
        or None when the one in force stays (also when it was written in this period)."""
        if self.fresh:  # ``limit`` made this period's command
            self.fresh = False
            return None
        target = self.target
        if target is None:
            return None
        now = self._bounded_towards(target, q, qd, reached=self.ref == self._want)
        return None if now is None or now.rows[0].tolist() == self.ref else now

    def _bounded_towards(self, command, q, qd, reached: bool = False):
        """``_towards`` from ``ref`` with the law-speed bound on the joints the command's gains
        leave under-damped at ``q`` (none without a reading); None when ``reached`` and no joint
        is bounded (nothing would change)."""
        rows = command.rows
        gains = (rows[3].tobytes(), rows[4].tobytes())
        if gains != self._gains:  # new gains: can any joint be under-damped anywhere?
            self._gains = gains
            self._may_bound = bool(self._underdamped(self._inertia_bound, rows[3], rows[4]))
        bounded: list[int] = []
        if self._may_bound and q is not None:  # (no reading: the step alone)
            m, _ = self._model_terms(q)
            key = (*gains, self._terms_version)
            if key != self._bounded_for:  # new gains or new model terms: which joints to bound
                self._bounded = self._underdamped(m, rows[3], rows[4])
                self._bounded_for = key
            bounded = self._bounded
        if reached and not bounded:
            return None
        return self._towards(command, self.ref, q, rows[1].tolist(), qd, bounded)

    def accept(self, now, target) -> None:
        """``now`` is in force (``ref`` its ``q_des``), on the way to ``target``."""
        self.ref, self.target = now.rows[0].tolist(), target
        self._want = target.rows[0].tolist()

    def forget(self) -> None:
        """Start afresh from the measured position (after a reset, a fault, a hold)."""
        self.ref = self.target = None
        self.fresh = False

    def _towards(self, command, ref: list[float], q=None, qd_des=None, qd=None, bounded=None):
        """``command`` with its ``q_des`` limited: within one period's step of ``ref`` and, with
        a measured ``q``, ``qd`` (n,) rad, rad/s, on the ``bounded`` joints (under-damped:
        ``_underdamped``; found here when not given), so that the speed the law aims for stays
        within the limit plus ``LAW_SPEED_MARGIN |qd_des|``. That speed is ``qd_des + (tau_ff -
        g(q) + kp (q_des - q)) / kd``: the law's torque beyond what holds the arm against
        gravity (the URDF's, ``g``), over its damping, as in Khatib's velocity saturation."""
        rows = command.rows
        want = rows[0].tolist()
        lim = [min(max(a, r - s), r + s) for a, r, s in zip(want, ref, self.step_rad)]
        if bounded is None and q is not None:
            bounded = self._underdamped(self._model_terms(q)[0], rows[3], rows[4])
        if bounded:
            m, gravity = self._model_terms(q)
            load = [t - g for t, g in zip(rows[2].tolist(), gravity)]
            kp, kd = rows[3].tolist(), rows[4].tolist()
            for j in bounded:
                p, d = kp[j], kd[j]
                v = self.speed[j] + LAW_SPEED_MARGIN * abs(qd_des[j])
                # a joint already faster than v (pushed by the others' motion) is braked:
                # its damping against the excess times 1 + gain, the gain kept to what one
                # period's sample can hold stably (kd (1 + gain) T / M_jj <= 1)
                gain = min(OVERSPEED_GAIN, m[j] / (d * self.period_s) - 1.0)
                over = 0.0 if qd is None else max(gain, 0.0) * (abs(qd[j]) - v)
                v_hi = v - over if over > 0.0 and qd[j] > 0.0 else v
                v_lo = v - over if over > 0.0 and qd[j] < 0.0 else v
                low = q[j] + (d * (-v_lo - qd_des[j]) - load[j]) / p
                high = q[j] + (d * (v_hi - qd_des[j]) - load[j]) / p
                lim[j] = min(max(lim[j], low), high)
        if lim == want:
            return command
        out = rows.copy()
        out[0] = lim
        # the command's own class (twin.robot's JointCommand, which imports this module)
        return type(command).from_rows(out).validated(self.names, self.limits.effort, self.limits)

    def _model_terms(self, q: list[float]) -> tuple[list[float], list[float]]:
        """The URDF's joint-space inertia ``M_jj`` (n,) kg m^2 and gravity torques (n,) N m at
        ``q`` (n,) rad, computed afresh once ``q`` is ``MODEL_TERMS_RAD`` from where they last
        were (a control cycle's budget: they change little over a few periods)."""
        cached = self._terms
        if cached is not None and max(map(abs, map(float.__sub__, q, cached[0]))) < MODEL_TERMS_RAD:
            return cached[1], cached[2]
        x = np.asarray(q, float)
        dyn = self._dynamics
        m, g = np.diagonal(dyn.mass_matrix(x)).tolist(), dyn.gravity_torques(x).tolist()
        self._terms = (list(q), m, g)
        self._terms_version += 1
        return m, g

    @staticmethod
    def _underdamped(m: list[float], kp: np.ndarray, kd: np.ndarray) -> list[int]:
        """The joints whose law, on the URDF's inertia ``M_jj`` (n,) kg m^2, has a damping ratio
        ``kd / (2 sqrt(kp M_jj))`` below ``DAMPING_RATIO_BOUNDED`` (``kp > 0``; with ``kd = 0``
        the ratio is 0, but the bound needs damping: such a joint has the step only). A
        better-damped loop follows the ramp without speed overshoot worth bounding."""
        b = 4.0 * DAMPING_RATIO_BOUNDED**2  # ratio < b  <=>  kd^2 < 4 b^2 kp M_jj
        return [
            j
            for j, (p, d, mj) in enumerate(zip(kp.tolist(), kd.tolist(), m))
            if p > 0.0 and d > 0.0 and b * p * mj > d * d
        ]

    @functools.cached_property
    def _inertia_bound(self) -> list[float]:
        """(n,) kg m^2: above every joint's ``M_jj`` over its limits (the largest of
        ``INERTIA_SAMPLES`` seeded configurations, times ``INERTIA_BOUND_FACTOR``), so gains
        not under-damped on it are not under-damped anywhere: the law-speed bound, the model
        terms and their cost are then skipped for a target already reached."""
        lo = np.maximum(self.limits.lower, -np.pi)
        hi = np.minimum(self.limits.upper, np.pi)
        qs = np.random.default_rng(0).uniform(lo, hi, (INERTIA_SAMPLES, lo.size))
        diag = np.array([np.diagonal(self._dynamics.mass_matrix(q)) for q in qs])
        return (INERTIA_BOUND_FACTOR * diag.max(axis=0)).tolist()

    @functools.cached_property
    def _dynamics(self):
        """The URDF's rigid-body dynamics (gravity torques, mass matrix)."""
        from twin.dynamics import ArmDynamics  # (on first use: twin.robot stays light to import)

        return ArmDynamics(self.model)


class VelocityWatch:
    """Rule 6's check on the motion: each joint's measured speed, its displacement over the last
    ``VELOCITY_WINDOW_S`` of readings (so a staircase of per-period targets and an encoder
    tick do not count as speed), against the URDF velocity limit plus ``VELOCITY_MARGIN``; one
    event per excursion per joint (re-armed once the joint is back within its limit). Given
    the joint's own velocity reading too (the sim's, the servo's Present Velocity), an
    excursion starts only when that reading is beyond the bound as well: a reading's time stamp
    is the host's, so a late reading (a loaded host, a plant that is sampled in bursts) can put
    a window's displacement over too short a time, where the velocity reading has no clock."""

    def __init__(
        self, limits: JointLimits, joint_names: tuple[str, ...], margin: float = VELOCITY_MARGIN
    ):
        self.names = joint_names
        self.limit_rad_s = limits.velocity.tolist()
        self.bound = (limits.velocity * (1.0 + margin)).tolist()
        self.events: list[VelocityEvent] = []
        self._over: dict[int, VelocityEvent] = {}
        self._window_us = round(VELOCITY_WINDOW_S * 1e6)
        self._history: collections.deque[tuple[int, list[float]]] = collections.deque()
        self._reach: list[float] = []  # (n,) rad: each joint's bound times _reach_dt
        self._reach_dt = -1.0

    def check(
        self, t_us: int, q: list[float], qd: list[float] | None = None
    ) -> list[VelocityEvent]:
        """The excursions that start at the reading ``q`` (n,) rad at ``t_us`` (with ``qd`` (n,)
        rad/s, the joints' velocity reading, when there is one); the peaks of those under way
        are updated."""
        history = self._history
        if history and t_us <= history[-1][0]:
            return []  # no new reading (or the clock restarted: a reset)
        history.append((t_us, q))
        while len(history) > 2 and t_us - history[1][0] >= self._window_us:
            history.popleft()
        t0, q0 = history[0]
        if t_us - t0 < self._window_us:
            return []
        dt = (t_us - t0) * 1e-6
        if not self._over:  # the common case: every joint within its bound, nothing under way
            if dt != self._reach_dt:  # (the window's length is the same most periods)
                self._reach, self._reach_dt = [b * dt for b in self.bound], dt
            if all(abs(a - b) <= r for a, b, r in zip(q, q0, self._reach)):
                return []
        started = []
        for j, (a, b, bound, lim) in enumerate(zip(q, q0, self.bound, self.limit_rad_s)):
            speed = abs(a - b) / dt
            event = self._over.get(j)
            if event is not None:
                if speed <= lim:
                    del self._over[j]
                elif speed > event.peak_rad_s:
                    event.peak_rad_s, event.peak_t_us = speed, t_us
            elif speed > bound and (qd is None or abs(qd[j]) > bound):  # (nan compares False:
                # an unreadable joint is not an excursion)
                event = VelocityEvent(self.names[j], j, t_us, speed, t_us, lim, bound)
                self._over[j] = event
                self.events.append(event)
                started.append(event)
        return started

    def restart(self) -> None:
        """Forget the readings (a teleport, a reset): speeds are measured afresh."""
        self._history.clear()
        self._over.clear()


@dataclass
class VelocityEvent:
    """A joint measured faster than its URDF velocity limit plus the margin: from ``t_us``,
    peak ``peak_rad_s`` at ``peak_t_us``; ``limit_rad_s`` the URDF limit, ``bound_rad_s`` the
    limit with the margin."""

    joint: str
    index: int
    t_us: int
    peak_rad_s: float
    peak_t_us: int
    limit_rad_s: float
    bound_rad_s: float

    def line(self) -> str:
        """One line for a report."""
        return (
            f"joint {self.joint} at {self.peak_rad_s:.2f} rad/s (limit {self.limit_rad_s:.3f}, "
            f"bound {self.bound_rad_s:.3f}) at t = {self.peak_t_us / 1e6:.3f} s"
        )


@contextlib.contextmanager
def velocity_events_seen() -> Iterator[list[dict]]:
    """Collect the velocity-limit events published (``twin.events``) while the block runs, from
    any robot in this process, through any wrapper: a list of ``VelocityEvent`` fields."""
    from twin import events

    seen: list[dict] = []

    def on_event(source: str, kind: str, detail: dict) -> None:
        if source == "safety" and kind == "velocity_limit":
            seen.append(detail)

    events.subscribe(on_event)
    try:
        yield seen
    finally:
        events.unsubscribe(on_event)


def velocity_summary(seen: list[dict]) -> str:
    """One line on the velocity-limit events ``seen`` (``velocity_events_seen``)."""
    if not seen:
        return f"velocity limits held: no joint above its URDF limit + {VELOCITY_MARGIN:.0%}"
    shown = "; ".join(VelocityEvent(**d).line() for d in seen[:3])
    more = f" (and {len(seen) - 3} more)" if len(seen) > 3 else ""
    return f"velocity limit exceeded {len(seen)} times: {shown}{more}"
