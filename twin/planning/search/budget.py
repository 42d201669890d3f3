"""The budget of one planning query: a time limit on the wall clock, or a number of collision
checks (the same on any machine, so a query it stops stops at the same point everywhere).

A ``Deadline`` reads a clock: ``time.perf_counter`` (seconds) or a checker's count of checked
configurations (``CollisionChecker.checked``). The searches look at it only between their units
of work (an RRT chunk, a roadmap build step, a batch of roadmap search pops, a goal), so with a
check budget a query replays exactly whatever the machine's load.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Deadline:
    """Passed once ``clock()`` exceeds ``at`` (``limit`` beyond the clock's value when made).
    ``unit``: what the clock counts, for messages (``"s"`` or ``"checks"``)."""

    def __init__(
        self, limit: float, clock: Callable[[], float] = time.perf_counter, unit: str = "s"
    ) -> None:
        self.clock, self.unit, self.limit = clock, unit, limit
        self.at = clock() + limit

    @classmethod
    def checks(cls, checker, limit: int) -> Deadline:
        """A budget of ``limit`` configurations checked by ``checker`` from now on."""
        return cls(limit, lambda: checker.checked, "checks")

    def passed(self) -> bool:
        return self.clock() > self.at

    def share(self, fraction: float) -> Deadline:
        """A deadline on the same clock at ``fraction`` of what is left of this one."""
        return Deadline(fraction * max(0.0, self.at - self.clock()), self.clock, self.unit)


def passed(deadline: Deadline | None) -> bool:
    """Whether ``deadline`` (None: no budget) has passed."""
    return deadline is not None and deadline.passed()
