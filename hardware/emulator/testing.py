"""Helpers for tests and benchmarks that drive the emulators."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout_s: float, interval_s: float = 0.002) -> T:
    """Poll ``predicate`` until it returns a truthy value (returned) or ``timeout_s`` passes
    (``TimeoutError`` naming the predicate)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"condition {getattr(predicate, '__name__', predicate)!r} not met within {timeout_s} s"
            )
        time.sleep(interval_s)


def status_replies(port, n: int) -> list:
    """The next ``n`` DYNAMIXEL status packets read from the pyserial ``port`` (its read
    timeout bounds each wait: ``TimeoutError`` saying how many came)."""
    from twin.hardware.protocols import dynamixel as dxl

    parser, out = dxl.DynamixelStreamParser(), []
    while len(out) < n:
        chunk = port.read(max(1, port.in_waiting))
        if not chunk:
            raise TimeoutError(f"got {len(out)} of {n} status packets")
        out += parser.feed(chunk)
    return out


def emulator_config(config=None, **robot_overrides):
    """``config`` (default: the shipped example) with timeouts suited to emulators on a busy
    machine: generous reply timeouts and staleness, a short boot wait, fast reconnection, and ten
    failed joint reads in a row (not three) before the stale-readings fault, since a starved
    emulator thread can miss a few reply timeouts in a row where a servo would not.
    ``robot_overrides`` replace top-level fields (e.g. ``control_mode="current"``,
    ``stale_fault_cycles=3`` to test the shipped fault threshold)."""
    from dataclasses import replace

    from twin.hardware.config import ReconnectConfig, load_config

    config = config or load_config()
    fields = dict(
        bus=replace(config.bus, reply_timeout_s=0.1),
        ft=replace(config.ft, boot_timeout_s=0.5, activation_timeout_s=2.0, ack_timeout_s=1.0),
        imu=replace(config.imu, first_sample_timeout_s=2.0),
        reconnect=ReconnectConfig(backoff_initial_s=0.02, backoff_max_s=0.2),
        stale_after_s=0.25,
        stale_fault_cycles=10,
    )
    return replace(config, **{**fields, **robot_overrides})


def random_drive(rng):
    """A drive of a random kind (limp, a current, a PD loop) with random values, from the numpy
    generator ``rng``: for property tests of the physics sources."""
    from twin.hardware.emulator.sources import Drive, DriveKind

    kind = int(rng.integers(3))
    if kind == 0:
        return Drive()
    if kind == 1:
        return Drive(DriveKind.CURRENT, torque=float(rng.normal(0.0, 3.0)))
    return Drive(
        DriveKind.PD,
        q_goal=float(rng.normal()),
        qd_goal=float(rng.normal()),
        kp=float(rng.uniform(0.0, 50.0)),
        kd=float(rng.uniform(0.0, 2.0)),
        torque_limit=float(rng.uniform(0.1, 10.0)),
    )


def pin_process(cpus: set[int] | None) -> bool:
    """Move every thread of this process (and, by inheritance, the threads it starts later)
    onto the CPUs ``cpus`` (None: every CPU again). A benchmark pins the emulators and the host
    to different cores, as a real arm's servos compute on their own hardware. Returns False
    where thread affinity is not available (not Linux); the affinity is then left as it was."""
    if not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self/task"):
        return False
    cpus = set(range(os.cpu_count() or 1)) if cpus is None else set(cpus)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (OSError, ValueError):  # a thread that ended meanwhile
            continue
    return True
