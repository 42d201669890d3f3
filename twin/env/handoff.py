"""The step hand-off of ``TwinVectorEnv`` (``twin/env/vector.py``) between its main process and
its worker processes: semaphores in shared memory, each side polling for a short while before
it blocks.

Per vector step the main process resets the count of finished workers, clears each worker's
``command`` flag and posts the worker's ``go`` semaphore; each worker steps its block, sets its
``answer`` flag if a pickled answer follows on its pipe, counts itself finished and, the last of
them, posts the one ``done`` semaphore the main process waits on (one wake-up of the main per
step, whatever the number of workers). A command (reset, call, close) goes pickled on the pipe
with ``command`` set before ``go`` is posted.

A waiting side first polls its semaphore for ``spin_s`` seconds, yielding the core to anything
runnable between polls (``os.sched_yield``), then blocks on it. A post to a semaphore nobody is
blocked on is a write to shared memory: no system call, no wake-up of a sleeping core (which
costs tens of microseconds on a virtual machine, and lets the scheduler park the woken worker on
a busy core). Blocked, a side wakes every ``ALIVE_CHECK_S`` to check that the other side lives.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

#: Default of ``spin_s``: seconds a waiting side polls before it blocks. It covers the main
#: process's work between two vector steps in a training loop (the policy's forward pass, the
#: replay buffer) so that the workers are awake when the actions come.
SPIN_S = 1e-3
#: Seconds a blocked side waits before it checks that the other side is still alive.
ALIVE_CHECK_S = 0.5

_yield = getattr(os, "sched_yield", lambda: None)


def wait(semaphore, spin_s: float, check_alive: Callable[[], None]) -> None:
    """Take ``semaphore``: polled for up to ``spin_s`` seconds, then blocking; ``check_alive``
    runs every ``ALIVE_CHECK_S`` while blocked (it raises if the other side is gone)."""
    if semaphore.acquire(False):
        return
    if spin_s > 0.0:
        end = time.perf_counter() + spin_s
        while time.perf_counter() < end:
            _yield()
            if semaphore.acquire(False):
                return
    while not semaphore.acquire(timeout=ALIVE_CHECK_S):
        check_alive()


class Handoff:
    """The semaphores and flags of ``workers`` worker processes (module doc); picklable to the
    workers when they start (any start method)."""

    def __init__(self, ctx, workers: int) -> None:
        self.workers = workers
        self.go = [ctx.Semaphore(0) for _ in range(workers)]
        self.done = ctx.Semaphore(0)
        self.lock = ctx.Lock()
        self.finished = ctx.RawArray("i", 1)
        self.command = ctx.RawArray("b", workers)
        self.answer = ctx.RawArray("b", workers)

    # -- main process ---------------------------------------------------------------------
    def start_step(self) -> None:
        """Wake every worker for a step (their actions are in shared memory)."""
        self.finished[0] = 0
        for w, go in enumerate(self.go):
            self.command[w] = 0
            go.release()

    def send_command(self, w: int) -> None:
        """Wake worker ``w`` for the command just written to its pipe."""
        self.command[w] = 1
        self.go[w].release()

    def wait_step(self, spin_s: float, check_alive: Callable[[], None]) -> list[int]:
        """Wait until every worker has stepped; the workers whose answer waits on their pipe."""
        if self.workers == 0:  # the main process steps every environment itself
            return []
        wait(self.done, spin_s, check_alive)
        return [w for w in range(self.workers) if self.answer[w]]

    # -- worker process -------------------------------------------------------------------
    def wait_go(self, w: int, spin_s: float, check_alive: Callable[[], None]) -> bool:
        """Wait for the main process; ``True`` for a step, ``False`` for a command."""
        wait(self.go[w], spin_s, check_alive)
        return not self.command[w]

    def finish_step(self, w: int, answer: bool) -> None:
        """Worker ``w`` has stepped (``answer``: a pickled answer follows on its pipe)."""
        self.answer[w] = answer
        with self.lock:
            self.finished[0] += 1
            last = self.finished[0] == self.workers
        if last:
            self.done.release()
