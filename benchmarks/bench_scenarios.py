"""Scenarios per minute on one core, sim backend: the shipped suite run by ``run_scenario``
(start state, task, checks) against the same tasks run bare on an open sim, in the same run.

Anchor: each task's own function on a sim opened once per scenario, without the harness (no
expectations, no result); the harness's cost is the difference. ``--quick`` runs the suite once,
a full run three times. Throughput is scenarios per minute of wall time on this process's one
core (the sim and the task are single-threaded).

    python -m twin.benchmarks.bench_scenarios [--quick]
"""

from __future__ import annotations

import time

import numpy as np
from twin.benchmarks._report import emit_json, parse_args, print_table

from twin.backends import open_robot
from twin.scenario import load_scenario, run_scenario
from twin.scenario.sweep import scenario_files, shipped_suite
from twin.scenario.tasks import TASKS


def _bare(scenario) -> float:
    t0 = time.perf_counter()
    with open_robot("sim", scene=scenario.scene, seed=scenario.seed) as robot:
        if scenario.start_q is not None:
            robot.reset(q=np.asarray(scenario.start_q))
        TASKS[scenario.task](robot, scenario, robot)
    return time.perf_counter() - t0


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rounds = 1 if args.quick else 3
    scenarios = [load_scenario(f) for f in scenario_files([shipped_suite()])]
    rows, harness, bare = [], [], []
    for s in scenarios:
        h, b, ok = [], [], True
        for _ in range(rounds):
            b.append(_bare(s))
            result = run_scenario(s, "sim")
            h.append(result.wall_s)
            ok = ok and result.ok
        harness.append(float(np.median(h)))
        bare.append(float(np.median(b)))
        rows.append((s.name, s.task, harness[-1], bare[-1], harness[-1] / bare[-1], ok))
    print_table(
        "shipped scenarios on the sim, one core (median wall s)",
        ("scenario", "kind", "run_scenario s", "bare task s", "ratio", "passed"),
        rows,
    )
    per_minute = 60.0 * len(scenarios) / sum(harness)
    print(
        f"\n{per_minute:.1f} scenarios per minute on one core (suite of {len(scenarios)}); "
        f"harness cost {sum(harness) / sum(bare):.3f}x the bare tasks"
    )
    emit_json(
        "scenarios",
        {
            "quick": args.quick,
            "scenarios": len(scenarios),
            "scenarios_per_minute": per_minute,
            "harness_over_bare": sum(harness) / sum(bare),
            "all_passed": all(r[-1] for r in rows),
        },
    )


if __name__ == "__main__":
    main()
