"""``twin test``: run regression scenario files on the sim, the emulated hardware, or both.

    twin test scenarios/ --backend both --junit results.xml --record-dir runs/

Each failing metric prints the scenario, the metric, the expected and measured values, and the
recording to open (``twin replay``). Exit 0 when every run passed, 1 otherwise, 2 for a bad file
or argument.
"""

from __future__ import annotations

import argparse
import sys


def run_test(args: argparse.Namespace) -> int:
    # Imported here, not at the top: the scenario runner pulls in the planner, which every other
    # ``twin`` command (``twin --help`` too) would otherwise pay for at start-up.
    from twin.safety import velocity_events_seen, velocity_summary
    from twin.scenario import ScenarioError, load_scenario
    from twin.scenario.report import table, update_expectations, write_junit
    from twin.scenario.sweep import expand_backends, scenario_files, shipped_suite, sweep

    try:
        files = scenario_files(args.paths or [shipped_suite()])
        if not files:
            raise ScenarioError(f"no scenario files (*.toml) in {', '.join(map(str, args.paths))}")
        scenarios = [load_scenario(f) for f in files]
        backends = expand_backends(args.backend)
        seeds = args.seed or [None]
        with velocity_events_seen() as too_fast:  # (runs in this process unless --ray)
            results = sweep(scenarios, backends, seeds, args.record_dir, args.ray)
    except ScenarioError as e:
        print(f"twin test: {e}", file=sys.stderr)
        return 2
    print(table(results))
    failed = [r for r in results if not r.ok]
    for r in failed:
        print("\n" + "\n".join(r.failures()))
    if args.junit is not None:
        print(f"\nJUnit XML: {write_junit(results, args.junit)}")
    if args.update_expectations:
        for s in scenarios:
            diff = update_expectations(s, [r for r in results if r.scenario.path == s.path])
            if diff:
                print("\n" + diff, end="")
        return 0
    if args.ray is None:
        print(f"\n{velocity_summary(too_fast)}")
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "test",
        help="run regression scenario files on the sim, the emulated hardware, or both",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="*", help="scenario files or folders (default: the shipped suite)"
    )
    parser.add_argument(
        "--backend",
        default="sim",
        help="sim, hardware (emulators started per run, on their own ports) or both",
    )
    parser.add_argument(
        "--seed", type=int, action="append", default=[], help="run with this seed (repeatable)"
    )
    parser.add_argument("--junit", default=None, help="write JUnit XML here")
    parser.add_argument("--record-dir", default=None, help="record every run here (.mcap)")
    parser.add_argument(
        "--update-expectations",
        action="store_true",
        help="rewrite each file's [expect] around the measured values, showing the diff",
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="run on a Ray cluster (default: a local Ray instance); needs pip install ray",
    )
    parser.set_defaults(func=run_test)
