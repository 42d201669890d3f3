"""Joint space <-> servo register units, for six joints at once (pure, vectorised).

For joint ``j`` with ``ticks_per_rad`` (servo ticks per joint radian: 4096 / 2 pi times any gear
reduction), ``zero_ticks`` (servo position at joint zero) and ``direction`` (+1 or -1):

    q   = direction * (ticks - zero_ticks) / ticks_per_rad                      rad
    qd  = direction * units * 0.229 rpm * (servo ticks per rad / ticks_per_rad)  rad/s
    tau = direction * units * 2.69 mA * torque_constant                          N m

Servo-side gains (current-based position mode, the documented mapping of ``assets/hardware/
README.md``): the servo's position loop is modelled as ``current = (P / 128) e - (D / 16) de``,
``e`` in ticks, ``de`` the change of the position in ticks per servo loop period
``servo_loop_period_s``, current in 2.69 mA units. In joint units this is the robot law with

    kp = P * ticks_per_rad * current_unit_a * torque_constant / 128                 N m/rad
    kd = D * ticks_per_rad * current_unit_a * torque_constant * servo_loop_s / 16   N m s/rad
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from twin.hardware.errors import InvalidArgumentError
from twin.hardware.protocols.dynamixel_table import MAX_GAIN, Units

_abs, _max = np.absolute, np.maximum.reduce  # the ufuncs themselves (no wrapper per call)
P_GAIN_DIVISOR = 128.0
D_GAIN_DIVISOR = 16.0


@dataclass(frozen=True)
class JointMap:
    """Per-joint conversion constants; every array is (n,) in joint order."""

    ids: tuple[int, ...]
    zero_ticks: np.ndarray
    direction: np.ndarray
    ticks_per_rad: np.ndarray
    torque_constant: np.ndarray  # N m of joint torque per ampere of servo current
    current_unit_a: float = Units.CURRENT_A
    servo_loop_period_s: float = 0.001

    def __post_init__(self) -> None:
        n = len(self.ids)
        for name in ("zero_ticks", "direction", "ticks_per_rad", "torque_constant"):
            arr = np.asarray(getattr(self, name), float)
            if arr.shape != (n,) or not np.all(np.isfinite(arr)):
                raise InvalidArgumentError(f"JointMap.{name} must be {n} finite numbers, got {arr}")
            object.__setattr__(self, name, arr)
        if not np.all(np.isin(self.direction, (-1.0, 1.0))):
            raise InvalidArgumentError(
                f"direction must be +1 or -1 per joint, got {self.direction}"
            )
        if np.any(self.ticks_per_rad <= 0) or np.any(self.torque_constant <= 0):
            raise InvalidArgumentError("ticks_per_rad and torque_constant must be > 0 per joint")
        if not (self.current_unit_a > 0 and self.servo_loop_period_s > 0):
            raise InvalidArgumentError("current_unit_a and servo_loop_period_s must be > 0")
        # Signed scales (the direction's sign flip is exact: the same values, fewer numpy calls).
        object.__setattr__(self, "_signed_tpr", self.direction * self.ticks_per_rad)
        object.__setattr__(
            self,
            "_signed_vel",
            self.direction * (Units.VELOCITY_RAD_S * Units.TICKS_PER_RAD) / self.ticks_per_rad,
        )
        object.__setattr__(self, "_signed_tau", self.direction * self.torque_unit)
        object.__setattr__(self, "_signed_rates", np.stack((self._signed_vel, self._signed_tau)))
        terms = np.stack((self.zero_ticks, self._signed_tpr, *self._signed_rates))
        terms.flags.writeable = False
        object.__setattr__(self, "_present_terms", terms)
        # per joint (signed ticks per rad, zero ticks): floats (ticks_from_floats), rows (2, n)
        object.__setattr__(
            self, "_tick_terms", tuple(zip(self._signed_tpr.tolist(), self.zero_ticks.tolist()))
        )
        ticks = np.stack((self._signed_tpr, self.zero_ticks))
        ticks.flags.writeable = False
        object.__setattr__(self, "_tick_rows", ticks)

    @property
    def n(self) -> int:
        return len(self.ids)

    # --- position ---------------------------------------------------------------------------
    def q_from_ticks(self, ticks) -> np.ndarray:
        """(n,) rad from servo ticks."""
        return (np.asarray(ticks, float) - self.zero_ticks) / self._signed_tpr

    @property
    def present_terms(self) -> np.ndarray:
        """(4, n) read-only: ``from_present``'s constants, rows zero ticks, signed ticks per rad,
        signed rad/s per velocity unit and signed N m per current unit (the compiled cycle
        decode, ``PresentLayout.decode_joints``, applies them with the same operations)."""
        return self._present_terms

    @property
    def tick_terms(self) -> np.ndarray:
        """(2, n) read-only: ``ticks_from_q``'s constants, rows signed ticks per rad and zero
        ticks (the compiled command ticks, ``ArmBus``, apply them with the same operations)."""
        return self._tick_rows

    def from_present(self, position, velocity, current) -> np.ndarray:
        """(3, n) read-only rows q rad, qd rad/s, tau N m of raw Present Position, Velocity and
        Current (n,) each: ``q_from_ticks``, ``qd_from_units`` and ``tau_from_current`` (the
        same operations, so the same values) in one new array and five numpy calls."""
        out = np.empty((3, self.n))
        out[0], out[1], out[2] = position, velocity, current
        q, rates = out[0], out[1:]
        np.subtract(q, self.zero_ticks, out=q)
        np.divide(q, self._signed_tpr, out=q)
        np.multiply(rates, self._signed_rates, out=rates)
        out.flags.writeable = False
        return out

    def ticks_from_q(self, q) -> np.ndarray:
        """(n,) int64 servo ticks (rounded) for joint angles ``q`` (n,) rad; range-checked against
        the multi-turn range of +-256 revolutions."""
        ticks = np.rint(np.asarray(q, float) * self._signed_tpr + self.zero_ticks)
        lim = Units.EXTENDED_POSITION_LIMIT
        if not _max(_abs(ticks)) <= lim:  # also false for a nan
            raise InvalidArgumentError(
                f"goal positions {ticks} ticks exceed the servo range +-{lim}"
            )
        return ticks.astype(np.int64)

    def ticks_from_floats(self, q: Sequence[float]) -> list[int]:
        """``ticks_from_q`` on Python floats, for a handful of joints where numpy's per-call cost
        would dominate: ``q`` n floats rad, n int ticks. The same operations on IEEE doubles, so
        the same ticks (``round`` is half to even, as ``np.rint``); a goal beyond the range or not
        finite goes through ``ticks_from_q``, which refuses it with its error."""
        lim = Units.EXTENDED_POSITION_LIMIT
        try:
            ticks = [round(a * s + z) for a, (s, z) in zip(q, self._tick_terms)]
        except (OverflowError, ValueError):  # inf or nan
            ticks = None
        if ticks is None or min(ticks) < -lim or max(ticks) > lim:
            self.ticks_from_q(np.array(q, float))
            raise InvalidArgumentError(f"goal positions {list(q)} rad are not finite")
        return ticks

    def ticks_clamped(self, q) -> tuple[np.ndarray, np.ndarray]:
        """Servo ticks (n,) int64 for ``q`` (n,) rad clamped to the multi-turn range (a hold's
        goal: never refused; a nan goal is held at the zero position), and the (n,) float ticks
        asked for before the clamp (beyond the range where the clamp moved the goal)."""
        wanted = np.rint(np.asarray(q, float) * self._signed_tpr + self.zero_ticks)
        lim = Units.EXTENDED_POSITION_LIMIT
        ticks = np.clip(np.where(np.isnan(wanted), self.zero_ticks, wanted), -lim, lim)
        return ticks.astype(np.int64), wanted

    # --- velocity ---------------------------------------------------------------------------
    @property
    def velocity_unit(self) -> np.ndarray:
        """(n,) rad/s of joint velocity per Present Velocity unit."""
        return Units.VELOCITY_RAD_S * Units.TICKS_PER_RAD / self.ticks_per_rad

    def qd_from_units(self, units) -> np.ndarray:
        return np.asarray(units, float) * self._signed_vel

    def units_from_qd(self, qd) -> np.ndarray:
        return np.rint(self.direction * np.asarray(qd, float) / self.velocity_unit).astype(np.int64)

    # --- current / torque -------------------------------------------------------------------
    @property
    def torque_unit(self) -> np.ndarray:
        """(n,) N m of joint torque per current unit (2.69 mA)."""
        return self.current_unit_a * self.torque_constant

    def tau_from_current(self, units) -> np.ndarray:
        return np.asarray(units, float) * self._signed_tau

    def current_from_tau(self, tau) -> np.ndarray:
        """(n,) int64 current units (rounded) for joint torques ``tau`` (n,) N m."""
        return np.rint(self.direction * np.asarray(tau, float) / self.torque_unit).astype(np.int64)

    # --- servo gains ------------------------------------------------------------------------
    @property
    def kp_unit(self) -> np.ndarray:
        """(n,) N m/rad per Position P Gain unit."""
        return self.ticks_per_rad * self.torque_unit / P_GAIN_DIVISOR

    @property
    def kd_unit(self) -> np.ndarray:
        """(n,) N m s/rad per Position D Gain unit."""
        return self.ticks_per_rad * self.torque_unit * self.servo_loop_period_s / D_GAIN_DIVISOR

    def gains_from_kp_kd(self, kp, kd) -> tuple[np.ndarray, np.ndarray]:
        """(P, D) register values (n,) int64 for ``kp`` N m/rad and ``kd`` N m s/rad."""
        p = np.rint(np.asarray(kp, float) / self.kp_unit)
        d = np.rint(np.asarray(kd, float) / self.kd_unit)
        for name, raw, unit in (("kp", p, self.kp_unit), ("kd", d, self.kd_unit)):
            bad = np.flatnonzero(~np.isfinite(raw) | (raw < 0) | (raw > MAX_GAIN))
            if bad.size:
                j = int(bad[0])
                raise InvalidArgumentError(
                    f"{name} of joint index {j} maps to gain {raw[j]}; the servo accepts 0..{MAX_GAIN}, "
                    f"i.e. {name} in [0, {MAX_GAIN * unit[j]:.4g}]"
                )
        return p.astype(np.int64), d.astype(np.int64)

    def kp_kd_from_gains(self, p, d) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(p, float) * self.kp_unit, np.asarray(d, float) * self.kd_unit
