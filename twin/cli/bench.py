"""``twin bench [--quick] [--only NAME ...]``: run the benchmarks (``twin.benchmarks.bench_*``) of
the installed package, each in its own process as ``python -m twin.benchmarks.<name>``, and print
one table of their headline figures: every ratio and speed-up of each benchmark's closing JSON
line (nested keys joined with dots), with its wall time. ``--json`` ends with one JSON line of
every benchmark's full figures. Exit 1 if a benchmark failed.
"""

from __future__ import annotations

import argparse
import json
import pkgutil
import subprocess
import sys
import time

from twin.cli.common import choice, print_table

#: Words that mark a headline figure in a benchmark's JSON (ratios against its anchor).
HEADLINE_WORDS = ("ratio", "speedup")
PREFIX = "bench_"


def benchmark_names() -> tuple[str, ...]:
    """The shipped benchmarks, without the ``bench_`` prefix."""
    import twin.benchmarks

    return tuple(
        sorted(
            m.name[len(PREFIX) :]
            for m in pkgutil.iter_modules(twin.benchmarks.__path__)
            if m.name.startswith(PREFIX)
        )
    )


def headline(figures: dict, prefix: str = "") -> list[tuple[str, float]]:
    """``(dotted key, value)`` of every number in ``figures`` whose key names a ratio."""
    out = []
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += headline(value, name + ".")
        elif (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and any(word in key.lower() for word in HEADLINE_WORDS)
            and "target" not in key.lower()  # a threshold, not a figure
        ):
            out.append((name, float(value)))
    return out


def run_benchmark(name: str, quick: bool, timeout_s: float) -> tuple[float, dict | None, str]:
    """Run one benchmark; ``(wall s, its JSON figures or None, why it failed or "")``."""
    cmd = [sys.executable, "-m", f"twin.benchmarks.{PREFIX}{name}", *(["--quick"] if quick else [])]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, None, f"timed out after {timeout_s:g} s"
    wall = time.perf_counter() - t0
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return wall, None, f"exit {done.returncode}: {tail}"
    try:
        figures = json.loads(lines[-1])
    except json.JSONDecodeError:
        return wall, None, "its last line is not JSON"
    return wall, figures, ""


def run_bench(args: argparse.Namespace) -> int:
    names = benchmark_names()
    chosen = [choice(n.removeprefix(PREFIX), names, "benchmark") for n in args.only] or names
    rows, everything, failed = [], {}, []
    for name in chosen:
        print(f"running {name}{' (quick)' if args.quick else ''} ...", flush=True)
        wall, figures, why = run_benchmark(name, args.quick, args.timeout)
        if figures is None:
            failed.append(name)
            rows.append([name, f"{wall:.1f}", "FAILED", why])
            continue
        everything[name] = figures
        figs = headline(figures) or [("(no ratio in its JSON)", float("nan"))]
        for k, (key, value) in enumerate(figs):
            rows.append(
                [name if k == 0 else "", f"{wall:.1f}" if k == 0 else "", key, f"{value:.4g}"]
            )
    print()
    print_table(["benchmark", "wall s", "figure", "value"], rows)
    if args.json:
        print(json.dumps({"quick": args.quick, "failed": failed, "benchmarks": everything}))
    return 1 if failed else 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run the benchmarks and print one table of their ratios",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--quick", action="store_true", help="a few seconds per benchmark")
    parser.add_argument(
        "--only", nargs="+", default=[], metavar="NAME", help="run only these benchmarks"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds per benchmark (default 1800)"
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line of all figures")
    parser.set_defaults(func=run_bench)
