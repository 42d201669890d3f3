"""``twin replay FILE.mcap``: replay a recording in a fresh sim and report where it diverged;
``--info`` lists its channels, message counts, rates and duration instead.

Exit 0 when every signal is reproduced, 1 when one diverged, 3 when the file is cut short and
what it holds reproduced (``partial: N of M messages, cut at t = T s``), 2 for a file that is
not a replayable recording (one line: the file, where, what was expected)."""

from __future__ import annotations

import argparse
import pathlib
import sys

from twin.backends import EXIT_INPUT
from twin.record import SIGNALS, RecordingError, read_recording, recording_info, replay


def _tolerance(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep or name not in SIGNALS:
        raise argparse.ArgumentTypeError(
            f"expected SIGNAL=VALUE with SIGNAL one of {', '.join(SIGNALS)}, got {text!r}"
        )
    try:
        tol = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: expected a number, got {value!r}") from None
    if not tol >= 0.0:
        raise argparse.ArgumentTypeError(f"{name}: expected a tolerance >= 0, got {value!r}")
    return name, tol


def print_info(path: pathlib.Path) -> None:
    """Channels, counts, rates and the duration of the recording at ``path``."""
    rec = read_recording(path)
    channels = recording_info(rec)
    start = min(c.first_us for c in channels) if channels else 0
    end = max(c.last_us for c in channels) if channels else 0
    meta = rec.metadata
    print(f"recording: {path}")
    print(
        f"  backend {meta.get('backend', '?')}, scene {meta.get('scene')}, seed {meta.get('seed')}, "
        f"duration {(end - start) * 1e-6:.3f} s, {len(rec.messages)} messages"
    )
    if rec.cut is not None:
        print(
            f"  {rec.partial_line()} (byte {rec.cut.offset} of {rec.cut.size}: no summary, "
            "read up to the last complete chunk)"
        )
    head = ("topic", "schema", "messages", "rate Hz")
    rows = [head] + [(c.topic, c.schema, str(c.count), f"{c.rate_hz:.1f}") for c in channels]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


#: Exit code of a replay of a file cut short whose part reproduced.
EXIT_PARTIAL = 3


def run_replay(args: argparse.Namespace) -> int:
    """The exit code of the module doc."""
    try:
        if args.info:
            print_info(args.file)
            return 0
        report = replay(args.file, dict(args.tolerance))
    except RecordingError as e:
        print(f"twin replay: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_INPUT
    print(f"replay of {args.file} in a fresh sim:")
    print(report.table())
    if args.plot is not None:
        print(f"plot: {report.plot(args.plot)}")
    verdict = "reproduced" if report.reproduced else "diverged"
    if report.partial:
        print(f"{report.partial_line}; the part replayed {verdict}")
        return EXIT_PARTIAL if report.reproduced else 1
    print(verdict)
    return 0 if report.reproduced else 1


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay a recording (.mcap) in a fresh sim and report the divergence per signal",
        description=__doc__,
    )
    parser.add_argument("file", type=pathlib.Path, help="a recording made with --record")
    parser.add_argument("--info", action="store_true", help="list channels, counts and rates")
    parser.add_argument(
        "--plot", type=pathlib.Path, default=None, help="write a PNG of the differences"
    )
    parser.add_argument(
        "--tolerance",
        type=_tolerance,
        action="append",
        default=[],
        metavar="SIGNAL=VALUE",
        help=f"a signal's tolerance ({', '.join(f'{k} {v[1]:g} {v[0]}' for k, v in SIGNALS.items())} by default)",
    )
    parser.set_defaults(func=run_replay)
