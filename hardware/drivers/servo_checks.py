"""Plausibility of the servos' present values: what ``ArmBus`` does with a reading whose status
packets passed their CRC (``sample_checks`` does the same for the F/T sensor and the IMU;
``docs/faults/serial.md``, ``docs/protocols/dynamixel.md``, "Plausible readings").

A 16-bit CRC passes about one damaged packet in 65,536, so a present-values answer that passes it
can still say anything. One cycle's reading (q rad, qd rad/s, tau N m, (n,) each, joint order) is
refused whole, counted by reason, when any servo's value is impossible:

- ``tick range``: Present Position beyond the multi-turn range, +-1,048,575 ticks (+-256 turns);
- ``joint limit``: q beyond the URDF limit by more than ``POSITION_MARGIN_RAD``;
- ``velocity``: |Present Velocity| above ``VELOCITY_MARGIN`` times the servo's Velocity Limit
  register (its no-load speed: 200 units of 0.229 rpm on the X series), in joint units;
- ``current``: |Present Current| above ``CURRENT_MARGIN`` times the Current Limit register;
- ``jump``: q moved from the last accepted reading by more than that velocity bound allows in the
  time from the start of that reading's read to the end of this one, plus ``JUMP_MARGIN_RAD``.

The checks are a few vectorised comparisons of the (3, n) rows (``check``); the reasons are only
worked out for a refused reading. ``ImplausibleReadingError`` is a ``ProtocolError``: the caller
treats the cycle as a failed read (the stale-joints rule counts it) and never uses its values.
"""

from __future__ import annotations

import numpy as np
from twin.hardware.drivers.sample_checks import SampleChecks
from twin.hardware.errors import InvalidArgumentError, ProtocolError
from twin.hardware.joint_map import JointMap
from twin.hardware.protocols.dynamixel_table import Units

#: A reading this far beyond a URDF joint limit (rad) is impossible (the servo's range check
#: stops a joint well inside it; the margin covers an arm pushed against its stops).
POSITION_MARGIN_RAD = 0.5
#: A servo back-driven by its load turns faster than its no-load speed (the Velocity Limit), but
#: not this many times faster. Generous on purpose: the emulators' plants have no speed limit,
#: and a host-side limit cycle there (``tests/test_hw_serial_robot.py``) reaches 7 times it.
VELOCITY_MARGIN = 15.0
#: Present Current overshoots the Current Limit briefly (the servo's current loop); not by this.
CURRENT_MARGIN = 1.5
#: A jump allowance on top of the velocity bound (rad): encoder quantisation and the sample's
#: place within its read.
JUMP_MARGIN_RAD = 0.02

TICK_RANGE, JOINT_LIMIT, VELOCITY, CURRENT, JUMP = (
    "tick range",
    "joint limit",
    "velocity",
    "current",
    "jump",
)
REASONS = (TICK_RANGE, JOINT_LIMIT, VELOCITY, CURRENT, JUMP)


class ImplausibleReadingError(ProtocolError):
    """A servo reading that passed its CRC holds an impossible value (the message names the
    servo, the value, the bound and the reason); ``reasons`` lists every reason found."""

    def __init__(self, message: str, reasons: tuple[str, ...]) -> None:
        super().__init__(message)
        self.reasons = reasons


class ServoChecks:
    """The plausibility bounds of one arm's servos (module doc).

    ``joints``: the arm's ``JointMap``; ``lower``, ``upper`` (n,) rad: URDF limits (+-inf for a
    continuous joint); ``velocity_limit`` (n,): Velocity Limit registers (0.229 rpm units);
    ``current_limit`` (n,): Current Limit registers (2.69 mA units); ``names``: per joint, for
    messages. ``counts`` holds the accepted and refused readings by reason.
    """

    def __init__(
        self,
        joints: JointMap,
        lower,
        upper,
        velocity_limit,
        current_limit,
        names: tuple[str, ...] | None = None,
    ) -> None:
        self.map = joints
        self.names = names or tuple(f"joint index {j}" for j in range(joints.n))
        self.counts = SampleChecks()
        lim = float(Units.EXTENDED_POSITION_LIMIT)
        # the decoder's own operations on the range's ends: a tick at the edge converts equal
        edge = np.stack(((-lim - joints.zero_ticks), (lim - joints.zero_ticks))) / np.stack(
            (joints.direction * joints.ticks_per_rad,) * 2
        )
        self.tick_lo, self.tick_hi = edge.min(axis=0), edge.max(axis=0)
        self.lower = np.asarray(lower, float) - POSITION_MARGIN_RAD
        self.upper = np.asarray(upper, float) + POSITION_MARGIN_RAD
        self.set_limits(velocity_limit, current_limit)
        self._last_q: np.ndarray | None = None
        self._last_t_us = 0

    def set_limits(self, velocity_limit, current_limit) -> None:
        """The servos' Velocity Limit and Current Limit registers (n,) (read at connection)."""
        v = np.asarray(velocity_limit, float)
        c = np.asarray(current_limit, float)
        n = self.map.n
        if v.shape != (n,) or c.shape != (n,) or np.any(v <= 0) or np.any(c <= 0):
            raise InvalidArgumentError(
                f"velocity and current limits must be {n} positive register values each, "
                f"got {v.tolist()} and {c.tolist()}"
            )
        self.qd_max = VELOCITY_MARGIN * v * self.map.velocity_unit  # rad/s
        self.tau_max = CURRENT_MARGIN * c * self.map.torque_unit  # N m
        q_lo = np.maximum(self.tick_lo, self.lower)
        q_hi = np.minimum(self.tick_hi, self.upper)
        self._lo = np.stack((q_lo, -self.qd_max, -self.tau_max))
        self._hi = np.stack((q_hi, self.qd_max, self.tau_max))
        self._v_per_us = self.qd_max * 1e-6

    def reset(self) -> None:
        """Forget the last accepted reading (a new connection: no jump is measured across it)."""
        self._last_q = None

    def check(self, rows: np.ndarray, t0_us: int, t1_us: int) -> None:
        """Accept the reading ``rows`` (3, n) q rad, qd rad/s, tau N m, read between host times
        ``t0_us`` and ``t1_us``, or raise ``ImplausibleReadingError`` (counted by reason; the
        last accepted reading stays the jump's reference)."""
        ok = np.greater_equal(rows, self._lo)
        ok &= np.less_equal(rows, self._hi)  # (a nan fails both)
        last = self._last_q
        if ok.all():
            if last is None:
                self._accept(rows[0], t0_us)
                return
            step = np.abs(rows[0] - last)
            step -= JUMP_MARGIN_RAD
            if (step <= self._v_per_us * (t1_us - self._last_t_us)).all():
                self._accept(rows[0], t0_us)
                return
        self._refuse(rows, t1_us)

    def _accept(self, q: np.ndarray, t0_us: int) -> None:
        self._last_q, self._last_t_us = q, t0_us
        self.counts.accept()

    def _refuse(self, rows: np.ndarray, t1_us: int) -> None:
        """Work out every reason, count each once, raise naming every servo and value found."""
        q, qd, tau = rows
        found: list[tuple[str, int, str]] = []
        tick = ~((q >= self.tick_lo) & (q <= self.tick_hi))
        m = self.map
        for j in np.flatnonzero(tick):
            ticks = q[j] * m.direction[j] * m.ticks_per_rad[j] + m.zero_ticks[j]
            found.append(
                (
                    TICK_RANGE,
                    j,
                    f"position {q[j]:.6g} rad ({ticks:.0f} ticks) is beyond the "
                    f"servo's range +-{Units.EXTENDED_POSITION_LIMIT} ticks",
                )
            )
        for j in np.flatnonzero(~tick & ~((q >= self.lower) & (q <= self.upper))):
            found.append(
                (
                    JOINT_LIMIT,
                    j,
                    f"position {q[j]:.6g} rad is beyond the joint limits "
                    f"[{self.lower[j] + POSITION_MARGIN_RAD:.4g}, "
                    f"{self.upper[j] - POSITION_MARGIN_RAD:.4g}] rad by more than "
                    f"{POSITION_MARGIN_RAD} rad",
                )
            )
        for j in np.flatnonzero(~(np.abs(qd) <= self.qd_max)):
            found.append(
                (
                    VELOCITY,
                    j,
                    f"velocity {qd[j]:.6g} rad/s is above the servo's "
                    f"{self.qd_max[j]:.4g} rad/s ({VELOCITY_MARGIN} x its Velocity Limit)",
                )
            )
        for j in np.flatnonzero(~(np.abs(tau) <= self.tau_max)):
            found.append(
                (
                    CURRENT,
                    j,
                    f"torque {tau[j]:.6g} N m is above the servo's {self.tau_max[j]:.4g} "
                    f"N m ({CURRENT_MARGIN} x its Current Limit)",
                )
            )
        if not found and self._last_q is not None:
            dt_s = (t1_us - self._last_t_us) * 1e-6
            allowed = self.qd_max * dt_s + JUMP_MARGIN_RAD
            step = np.abs(q - self._last_q)
            for j in np.flatnonzero(~(step <= allowed)):
                found.append(
                    (
                        JUMP,
                        j,
                        f"position moved {step[j]:.4g} rad in {dt_s * 1e3:.4g} ms, more "
                        f"than the servo can ({allowed[j]:.4g} rad)",
                    )
                )
        reasons = tuple(dict.fromkeys(r for r, _, _ in found))
        for reason in reasons:
            self.counts.reject(reason, t1_us)
        text = "; ".join(f"servo {m.ids[j]} ({self.names[j]}): {what}" for _, j, what in found)
        raise ImplausibleReadingError(f"implausible servo reading refused: {text}", reasons)
