"""Batches split over the cores: ``split(kernel, inputs, out, extra)`` runs a nogil kernel on
row chunks of (N, ...) arrays, on the calling thread and on worker threads at once.

The chunks are taken one at a time from a shared counter, the calling thread taking its share
too, so that a thread the machine does not run (a loaded machine: several processes per core)
takes fewer chunks and the call never waits for a thread that has not started: the calling
thread then does the whole batch, at the one-thread speed plus the split's own cost (about
10 us for two chunks, measured on a loaded machine). It waits only for the chunks a worker has started. Kernels are
``kernel(*inputs_rows, *extra, out_rows)`` on C-contiguous row slices, releasing the GIL
(numba's ``nogil=True``).
"""

from __future__ import annotations

import itertools
import math
import os
import queue
import threading
import time

import numpy as np

#: States per chunk: long enough (tens of microseconds) that taking one costs little, short
#: enough that the last chunk a worker finishes does not keep the caller waiting long.
CHUNK = 1024


def cores() -> int:
    """The cores this process may run on (``TWIN_DYNAMICS_THREADS`` overrides, at least 1)."""
    env = os.environ.get("TWIN_DYNAMICS_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def usable(threads: int) -> int:
    """How many of ``threads`` a split should use now: one more than the cores the 1-minute
    load average leaves idle besides this thread (``os.getloadavg``, read at most once a
    second), at least 1. A loaded machine has no idle core: there a split only adds waits
    (``bench_dynamics`` measured 0.6-0.9x of one thread at a load of 9 on 2 cores)."""
    now = time.monotonic()
    if now - _LOAD[0] > 1.0:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average: assume idle cores
            load = 0.0
        _LOAD[:] = [now, 1 + math.floor(cores() + 0.5 - load)]
    return max(1, min(threads, _LOAD[1]))


_LOAD = [-math.inf, 1]  # [monotonic time read, the threads the load allows]


class _Job:
    """One batch: chunks handed out by ``work`` to every thread that calls it."""

    def __init__(self, kernel, inputs: tuple, extra: tuple, out: np.ndarray, chunk: int) -> None:
        self.kernel, self.inputs, self.extra, self.out = kernel, inputs, extra, out
        self.rows, self.chunk = out.shape[0], chunk
        self.chunks = -(-self.rows // chunk)
        self._next = itertools.count()  # next() is atomic under the GIL
        self._lock = threading.Lock()
        self._left = self.chunks
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.results: list = [None] * self.chunks

    def work(self) -> None:
        while (i := next(self._next)) < self.chunks:
            lo, hi = i * self.chunk, min(self.rows, (i + 1) * self.chunk)
            try:
                self.results[i] = self.kernel(
                    *(a[lo:hi] for a in self.inputs), *self.extra, self.out[lo:hi]
                )
            except BaseException as e:  # reported by the caller
                self.error = e
            with self._lock:
                self._left -= 1
                if self._left == 0:
                    self.done.set()


class _Pool:
    """Daemon worker threads, started on first use, each running the jobs it is given."""

    def __init__(self) -> None:
        self._queues: list[queue.SimpleQueue] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def queues(self, workers: int) -> list[queue.SimpleQueue]:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the threads stayed in the parent
                self._queues, self._pid = [], os.getpid()
            while len(self._queues) < workers:
                q: queue.SimpleQueue = queue.SimpleQueue()
                threading.Thread(target=_serve, args=(q,), daemon=True, name="twin-dyn").start()
                self._queues.append(q)
        return self._queues[:workers]


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        jobs.get().work()


_POOL = _Pool()


def split(
    kernel, inputs: tuple, out: np.ndarray, extra: tuple = (), threads: int = 2,
    chunk: int = CHUNK,
) -> list:  # fmt: skip
    """``kernel`` over the rows of ``inputs`` (each (N, ...)) into ``out`` (N, ...), on
    ``threads`` threads (the caller and ``threads - 1`` workers; module doc): the kernel's
    results, chunk by chunk; re-raises a kernel's error."""
    job = _Job(kernel, inputs, extra, out, chunk)
    workers = min(threads, job.chunks) - 1
    for q in _POOL.queues(workers) if workers > 0 else ():
        q.put(job)
    job.work()
    job.done.wait()
    if job.error is not None:
        raise job.error
    return job.results
