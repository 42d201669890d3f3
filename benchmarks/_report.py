"""Shared output for benchmark scripts: a readable table, then one line of JSON.

Every benchmark measures its anchor in the same run, prints a table with ``print_table`` and
ends with ``emit_json`` so that tooling can read the last line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence

import numpy as np


def parse_args(description: str) -> argparse.Namespace:
    """``--quick`` for a run of a few seconds; ``--seed`` for the problems' generator."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a run of a few seconds")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def time_calls(fn: Callable[[], object], repeats: int, warmup: int = 10) -> np.ndarray:
    """Wall time (s) of each of ``repeats`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    out = np.empty(repeats)
    clock = time.perf_counter
    for i in range(repeats):
        t0 = clock()
        fn()
        out[i] = clock() - t0
    return out


def rate(fn: Callable[[], object], items_per_call: int, min_time_s: float) -> float:
    """Items per second of ``fn`` run repeatedly for at least ``min_time_s``."""
    fn()
    calls = 0
    t0 = time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= min_time_s:
            return calls * items_per_call / elapsed


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a fixed-width table."""
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def emit_json(name: str, figures: dict[str, object]) -> None:
    """The last line of every benchmark: its figures and ratios as JSON."""
    print(json.dumps({"benchmark": name, **figures}, default=float))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
