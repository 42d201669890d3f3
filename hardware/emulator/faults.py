"""Fault injection on an emulated device's output: corrupt or drop bytes at a seeded rate, delay.

Applied per ``write`` of the emulator (one frame, packet or reply), so ``writes_affected`` counts
the frames that left the device damaged: the number a driver must account for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from twin.hardware.errors import InvalidArgumentError


@dataclass
class FaultStats:
    bytes_in: int = 0
    bytes_corrupted: int = 0
    bytes_dropped: int = 0
    writes: int = 0
    writes_affected: int = 0


class FaultInjector:
    """Seeded byte faults: each byte is corrupted (XOR with a non-zero value) with probability
    ``corrupt_rate`` and dropped with probability ``drop_rate``; every write waits ``delay_s``."""

    def __init__(
        self, seed: int = 0, corrupt_rate: float = 0.0, drop_rate: float = 0.0, delay_s: float = 0.0
    ) -> None:
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.stats = FaultStats()
        self.corrupt_rate = self.drop_rate = self.delay_s = 0.0
        self.set(corrupt_rate=corrupt_rate, drop_rate=drop_rate, delay_s=delay_s)

    def set(
        self,
        *,
        corrupt_rate: float | None = None,
        drop_rate: float | None = None,
        delay_s: float | None = None,
    ) -> None:
        """Change rates (probability per byte, 0..1) or the delay (s) while running."""
        for name, value in (("corrupt_rate", corrupt_rate), ("drop_rate", drop_rate)):
            if value is not None:
                if not 0.0 <= value <= 1.0:
                    raise InvalidArgumentError(
                        f"{name} must be a probability in [0, 1], got {value}"
                    )
                setattr(self, name, float(value))
        if delay_s is not None:
            if not 0.0 <= delay_s < 10.0:
                raise InvalidArgumentError(f"delay_s must be in [0, 10) s, got {delay_s}")
            self.delay_s = float(delay_s)

    @property
    def active(self) -> bool:
        return self.corrupt_rate > 0 or self.drop_rate > 0 or self.delay_s > 0

    def apply(self, data: bytes) -> tuple[bytes, bool]:
        """The bytes that leave the device for ``data``, and whether any was damaged (the delay is
        the caller's to wait)."""
        with self._lock:
            s = self.stats
            s.writes += 1
            s.bytes_in += len(data)
            if not (self.corrupt_rate or self.drop_rate) or not data:
                return data, False
            arr = np.frombuffer(data, np.uint8).copy()
            n = arr.size
            hit = self._rng.random(n) < self.corrupt_rate
            k = int(hit.sum())
            if k:
                arr[hit] ^= self._rng.integers(1, 256, k, dtype=np.uint8)
            drop = self._rng.random(n) < self.drop_rate
            d = int(drop.sum())
            s.bytes_corrupted += k
            s.bytes_dropped += d
            if k or d:
                s.writes_affected += 1
            return (arr[~drop].tobytes() if d else arr.tobytes()), bool(k or d)
