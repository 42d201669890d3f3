"""``QuietWindow``: the emulator's other threads keep clear of the servo chain's paced replies.

The emulators of one stack share one process and so one interpreter lock: a physics tick, or an
F/T or IMU stream encoding its frames, that runs when a paced reply is due holds the lock while
the servo chain's port thread wakes to write it, and the reply leaves that much late (the
free-running bus cycle waits for it). The servo chain says when its next reply is due
(``reply_due``, perf_counter s, before it waits); the other threads call ``defer`` before their
work, which sleeps through the window from ``before_s`` ahead of that time to ``after_s`` past it
and returns at once otherwise. No lock on either side: ``due`` is one float attribute, written by
one thread and read by the others; a reply announced just after a thread looked is missed by it
for that one piece of work, which is the cost of no lock (a deferral is an optimisation, never a
condition for correctness). ``docs/protocols/dynamixel.md``, "The emulator's part of a
free-running cycle".
"""

from __future__ import annotations

import math
import time

#: The window around a paced reply's due time (s): work is deferred from this long before it ...
BEFORE_S = 300e-6
#: ... to this long after it (the reply's write, a wake-up late, is done by then).
AFTER_S = 80e-6


class QuietWindow:
    """A window around the servo chain's next paced reply (module doc); times perf_counter s."""

    def __init__(self, before_s: float = BEFORE_S, after_s: float = AFTER_S) -> None:
        if not (0.0 <= before_s < 0.01 and 0.0 <= after_s < 0.01):
            raise ValueError(
                f"a quiet window needs before_s and after_s in [0, 10 ms), got {before_s}, {after_s}"
            )
        self.before_s, self.after_s = before_s, after_s
        self.due = -math.inf  # the next paced reply's due time

    def reply_due(self, due: float) -> None:
        """The servo chain's next paced reply is due at ``due`` (perf_counter s)."""
        self.due = due

    def defer(self) -> float:
        """Sleep through the window if now is in it (again if a later reply was announced
        meanwhile); the seconds slept (0.0: not in a window, nothing deferred)."""
        clock = time.perf_counter
        start = now = clock()
        while True:
            due = self.due
            if not due - self.before_s <= now < due + self.after_s:
                break
            time.sleep(due + self.after_s - now)
            now = clock()
        return 0.0 if now == start else now - start
