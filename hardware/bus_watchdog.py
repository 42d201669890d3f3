"""The servos' Bus Watchdog (X-series control table, address 98), host side.

Where the host closes the loop (``current`` mode), it is armed to ``ARM_PERIODS`` control periods
(rounded up to its 20 ms unit) at the first cycle after each set-up (``ArmBus.initialise`` clears
it and leaves the servos holding servo-side; ``start``): a servo that hears no instruction for
that long stops by itself, whatever the host does. In Operating Mode 5, the mode both control
modes run in, the stop holds the position where the servo was, so a stalled host cannot drive the
arm on a goal it sent before the stall (``docs/protocols/dynamixel.md``, "Bus Watchdog").

A tripped servo refuses new goals until the host writes 0, so the host looks for a trip: after a
gap between its cycles, or a cycle, long enough for one (``due``), and every
``CHECK_INTERVAL_S`` of its clock as a backstop (a servo may count time otherwise). ``recover`` reads every servo's register,
clears (0) and arms again the tripped ones and reads them back; ``SerialRobot`` then holds at
the measured position until the next ``write()`` (``docs/faults/serial.md``, "Host stall").
A hold meant to last without the host (the park, the stale fault's safe hold) ``disarm``s it
first: a trip would put the goal at the present position and drop the gravity folded in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from twin.hardware.errors import (
    DeviceStatusError,
    DisconnectedError,
    ProtocolError,
    TransportError,
)
from twin.hardware.protocols.dynamixel_table import (
    BUS_WATCHDOG_MAX,
    BUS_WATCHDOG_TRIPPED,
    Units,
    XTable,
)

from twin.robot import ControlDiagnostics

if TYPE_CHECKING:
    from twin.hardware.drivers.dynamixel_bus import DynamixelBus

#: The Bus Watchdog is armed to this many control periods (rounded up to 20 ms units): 20 ms at
#: the shipped 4 ms, the register's smallest step. A 0.5 s stall of an arm moving at 0.9 rad/s
#: moved a joint 0.041 rad at most (0.051 armed at 40 ms; the wrist's soft hold gains carry it
#: on after the trip); a host late by more than four periods trips it and the next cycle recovers
#: (``docs/faults/serial.md``, "Host stall").
ARM_PERIODS = 5
#: A trip is looked for after a gap in the host's cycle longer than the armed time less this many
#: periods (the servo counts from when each instruction reached it), and at least this often (s).
GAP_MARGIN_PERIODS = 2
CHECK_INTERVAL_S = 1.0


def watchdog_units(period_s: float) -> int:
    """Bus Watchdog register value (20 ms units, 1..127) for ``ARM_PERIODS`` periods of
    ``period_s`` s."""
    units = math.ceil(ARM_PERIODS * period_s / Units.BUS_WATCHDOG_S - 1e-9)
    return min(max(units, 1), BUS_WATCHDOG_MAX)


@dataclass(frozen=True)
class BusWatchdogStats:
    """The Bus Watchdog as the host saw it. armed_s: the armed interval, s (0: not armed, as in
    ``servo`` mode). checks: reads of the register. trips: checks that found servos tripped;
    recoveries: of those, the ones cleared and armed again (read back). last: what the last trip
    was (servos, the host's gap) and what was done, or ``""``."""

    armed_s: float = 0.0
    checks: int = 0
    trips: int = 0
    recoveries: int = 0
    last: str = ""


@dataclass(frozen=True)
class SerialDiagnostics(ControlDiagnostics):
    """``ControlDiagnostics`` of the serial backend, with its servos' Bus Watchdog."""

    bus_watchdog: BusWatchdogStats = field(default_factory=BusWatchdogStats)


class BusWatchdog:
    """The Bus Watchdog of servos ``ids`` on ``bus`` (module doc), armed to ``units`` x 20 ms
    (0: never armed). ``period_s``: the control period; ``attempts``: tries of each arming."""

    def __init__(
        self, bus: DynamixelBus, ids: list[int], units: int, period_s: float, attempts: int
    ) -> None:
        self.bus, self.ids, self.units, self.attempts = bus, list(ids), units, attempts
        self.timeout_us = round(units * Units.BUS_WATCHDOG_S * 1e6)
        self._gap_us = max(
            self.timeout_us - GAP_MARGIN_PERIODS * round(period_s * 1e6), round(period_s * 1e6)
        )
        self._check_us = round(CHECK_INTERVAL_S * 1e6)
        self._sent_us: int | None = None  # the end of the host's last cycle (clock us)
        self._checked_us: int | None = None
        self._arm_pending = False  # armed at the next cycle (``start``)
        self._active = False  # armed by this host, and watched (``sent``, ``due``)
        self._began_us = 0  # the start of the host's current cycle (``due``)
        self._long_cycle = False  # a cycle long enough for a trip inside it (``sent``)
        self.stats = BusWatchdogStats(armed_s=units * Units.BUS_WATCHDOG_S)

    @property
    def armed(self) -> bool:
        return self.units > 0

    # ------------------------------------------------------------------ set-up
    def clear(self) -> None:
        """Write 0 to every servo (one SYNC_WRITE, not answered): a trip left by an earlier run
        is cleared, so that the goals written next are taken."""
        self.bus.sync_write_register(XTable.BUS_WATCHDOG, dict.fromkeys(self.ids, 0))

    def start(self) -> None:
        """After a set-up: arm at the next cycle (``due``, ``recover``). Until the host cycles,
        the servos hold the set-up's hold servo-side and need nothing from it."""
        self._arm_pending, self._active = self.armed, False
        self._sent_us = self._checked_us = None

    def disarm(self) -> None:
        """``clear``: the servos hold what they are sent next without the host."""
        self.clear()
        self._arm_pending = self._active = False
        self._sent_us = self._checked_us = None

    def arm(self, ids: list[int] | None = None, *, cleared: bool = False) -> None:
        """Arm servos ``ids`` (default: all): ``units``, read back, up to ``attempts`` times, each
        servo not armed yet written 0 first (a trip is cleared only by 0) unless ``cleared``;
        ``ProtocolError`` naming the servos that did not take it."""
        ids = self.ids if ids is None else ids
        if not self.armed or not ids:
            return
        values: dict[int, int] = {}
        for k in range(self.attempts):
            wrong = [pid for pid in ids if values.get(pid) != self.units]
            if k or not cleared:
                self.bus.sync_write_register(XTable.BUS_WATCHDOG, dict.fromkeys(wrong, 0))
            self.bus.sync_write_register(XTable.BUS_WATCHDOG, dict.fromkeys(wrong, self.units))
            try:
                values.update(self.bus.sync_read_register(XTable.BUS_WATCHDOG, wrong))
            except DisconnectedError:
                raise
            except (TransportError, DeviceStatusError, ProtocolError):
                continue  # a lost or damaged reply: write and read back again
            if all(values.get(pid) == self.units for pid in ids):
                return
        wrong = {pid: values.get(pid) for pid in ids if values.get(pid) != self.units}
        raise ProtocolError(
            f"Bus Watchdog (98) not armed to {self.units} on servos {wrong} (read back; None: no "
            f"reply) after {self.attempts} tries"
        )

    # ------------------------------------------------------------------ cycle
    def sent(self, now_us: int) -> None:
        """The host's cycle ended at ``now_us`` (clock us): its instructions reached the servos.
        A cycle that lasted longer than a trip needs (its goals and its read are that far apart
        at most) is looked at by the next ``due``."""
        if self._active:
            self._sent_us = now_us
            self._long_cycle = self._long_cycle or now_us - self._began_us > self._gap_us

    def due(self, now_us: int) -> bool:
        """Whether a trip may have happened since the last check: between two cycles, or inside
        the last one (``sent``), the host was silent for longer than the armed time less
        ``GAP_MARGIN_PERIODS`` periods, or ``CHECK_INTERVAL_S`` passed since the last check.
        ``now_us``: the start of the host's cycle (clock us)."""
        self._began_us = now_us
        if self._arm_pending:
            return True
        if not self._active or self._sent_us is None:
            return False
        return (
            self._long_cycle
            or now_us - self._sent_us > self._gap_us
            or now_us - self._checked_us > self._check_us
        )

    def recover(self, now_us: int) -> list[int]:
        """Arm the servos if ``start`` asked for it; otherwise read every servo's Bus Watchdog
        and clear and arm again the tripped ones (``arm``). Returns the ids that had tripped
        (empty: none). Raises what the bus raises (looked for again at the next ``due``)."""
        if self._arm_pending:
            self.arm(cleared=True)  # ``ArmBus.initialise`` wrote 0
            self._arm_pending, self._active = False, True
            self._sent_us = self._checked_us = now_us
            return []
        gap_s = (now_us - self._sent_us) * 1e-6 if self._sent_us is not None else math.nan
        values = self.bus.sync_read_register(XTable.BUS_WATCHDOG, self.ids)
        self._checked_us, self._long_cycle = now_us, False
        stats = replace(self.stats, checks=self.stats.checks + 1)
        tripped = [pid for pid, v in values.items() if v == BUS_WATCHDOG_TRIPPED]
        unarmed = [pid for pid, v in values.items() if v != self.units]
        if not unarmed:
            self.stats = stats
            return []
        if tripped:
            text = (
                f"Bus Watchdog: servos {tripped} tripped (armed at {self.timeout_us / 1e3:.0f} ms; "
                f"the host was silent {gap_s * 1e3:.0f} ms): they stopped servo-side, holding "
                "where they were"
            )
        else:  # rebooted, or set by another program
            text = f"Bus Watchdog: servos {unarmed} were not armed (read {values})"
        self.stats = replace(stats, trips=stats.trips + bool(tripped), last=text)
        self.arm(unarmed)
        self.stats = replace(
            self.stats,
            recoveries=self.stats.recoveries + bool(tripped),
            last=f"{text}; cleared and armed again (read back)",
        )
        return tripped
