"""The emulated servos' Bus Watchdog timing (X-series control table, address 98).

``WatchdogTimer`` keeps, for the servos of one chain, when each last heard an instruction
packet addressed to it (its ID or the broadcast ID) and an alarm on the physics source at the
earliest deadline (``PhysicsSource.set_alarm``), so that a trip happens at its instant of physics
time however late the thread that advances the source runs. What a trip does to a servo is the
chain's (``ServoChainEmulator._trip``); the semantics are in ``docs/protocols/dynamixel.md``,
"Bus Watchdog (98)".
"""

from __future__ import annotations

from collections.abc import Callable

from twin.hardware.emulator.sources import PhysicsSource
from twin.hardware.protocols.dynamixel_table import BROADCAST_ID, Units, XTable

UNIT_US = round(Units.BUS_WATCHDOG_S * 1e6)
#: A deadline passed while an instruction is still on its way through the emulator is looked at
#: again this much later (us of physics time).
RECHECK_US = 1000


class WatchdogTimer:
    """Bus Watchdog deadlines of the servos ``servos`` (id -> ``EmulatedServo``, the chain's own
    dict) on ``source``. ``waiting()``: whether bytes wait unread in the chain's port;
    ``trip(servo, t_us)``: what a servo does when its deadline passes. The chain calls
    ``received`` when bytes arrive, ``heard`` for each instruction packet handled, ``done`` after
    them, and ``update`` when a servo's registers change."""

    def __init__(
        self,
        source: PhysicsSource,
        servos: dict,
        waiting: Callable[[], bool],
        trip: Callable[[object, int], None],
    ) -> None:
        self.source, self.servos, self._waiting, self._trip = source, servos, waiting, trip
        self.armed: set[int] = set()  # servos with 1..127 in the register
        self._heard_us: dict[int, int] = {}  # id -> the last instruction addressed to it
        self._heard_all_us = 0  # the last broadcast instruction
        self._alarm = False  # an alarm is set on the source
        self._rx_us: int | None = None  # when the bytes being handled arrived (clock us)
        self._rx_unheard = False  # and none of their instructions has been heard yet
        self.trips: list[tuple[int, int]] = []  # (id, t_us) of every trip

    def update(self, servo) -> None:
        """Servo ``servo``'s registers changed: armed (1..127) or not."""
        if servo.get(XTable.BUS_WATCHDOG) > 0:
            self.armed.add(servo.id)
        else:
            self.armed.discard(servo.id)

    def received(self, t_us: int) -> None:
        """Bytes from the host arrived at ``t_us`` (clock us): the instructions in them count
        from then, and a deadline that passes before they are heard spares the servos."""
        self._rx_us, self._rx_unheard = t_us, True

    def done(self) -> None:
        """The bytes of ``received`` are handled."""
        self._rx_us = None

    def heard(self, pid: int) -> None:
        """An instruction packet addressed to servo ``pid`` (``BROADCAST_ID``: every servo) was
        handled: its interval starts again from when it arrived."""
        now = self._rx_us
        self._rx_unheard = False
        if not self.armed or now is None:
            return
        if pid == BROADCAST_ID:
            self._heard_all_us = now
        else:
            self._heard_us[pid] = now
        if not self._alarm:
            with self.source.lock:
                self._schedule()

    def _deadline(self, servo) -> int | None:
        """When ``servo`` trips if it hears nothing more (clock us), or None (not armed, or
        torque off: it watches only while the torque is on)."""
        units = servo.get(XTable.BUS_WATCHDOG)
        if units <= 0 or not servo.get(XTable.TORQUE_ENABLE):
            return None
        return max(self._heard_all_us, self._heard_us.get(servo.id, 0)) + units * UNIT_US

    def _schedule(self, after_us: int = -RECHECK_US) -> None:
        """The source's alarm at the earliest deadline, or ``RECHECK_US`` after ``after_us`` if
        that is later (source lock held)."""
        deadlines = [
            d
            for pid in list(self.armed)
            if (s := self.servos.get(pid)) is not None and (d := self._deadline(s)) is not None
        ]
        self._alarm = bool(deadlines)
        if deadlines:
            self.source.set_alarm(max(min(deadlines), after_us + RECHECK_US), self._check)

    def _check(self, t_us: int) -> None:
        """The source's alarm at ``t_us`` (source lock held, physics at ``t_us``): every servo
        whose deadline has passed trips, unless an instruction reached the chain before it that
        its thread has not handled yet (bytes still in the pty, or read and not yet heard: a
        loaded machine's emulator is late, a servo is not); the alarm is set again."""
        rx = self._rx_us if self._rx_unheard else None
        waiting = self._waiting()
        for pid in list(self.armed):
            s = self.servos.get(pid)
            deadline = None if s is None else self._deadline(s)
            if (
                deadline is None
                or deadline > t_us
                or waiting
                or (rx is not None and rx <= deadline)
            ):
                continue
            self.trips.append((pid, t_us))
            self._trip(s, t_us)
        self._schedule(t_us)
