"""Write the certified query sets of ``bench_planner_clutter``:
``assets/planning/clutter_queries_<arm>.json`` (``bench_planner_clutter_queries``: how the pairs
are drawn and certified, and the file's format). A maintainer re-runs it when the bench refuses
a stored set (another URDF, margins, cage or seed); a few minutes per arm.

    python -m twin.benchmarks.make_planner_clutter_queries --arm xarm6 [--seed 0] [--count 100]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from twin.benchmarks import bench_planner_clutter_queries as certified
from twin.benchmarks.bench_planner_clutter import ARMS, QUERIES, clutter_problem, draw_pair


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arm", choices=list(ARMS), default=next(iter(ARMS)))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=QUERIES)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with clutter_problem(args.arm, args.seed) as (planner, scene, rng, exact, _):
        queries = certified.certify(
            planner, exact, lambda: draw_pair(planner, exact, rng), args.count
        )
    data = {
        "format": certified.FORMAT,
        "version": certified.VERSION,
        "description": certified.__doc__.split("\n\n")[1].replace("\n", " "),
        "header": certified.header(args.arm, args.seed, planner, scene),
        "replaced": sum(q["replaced_before"] for q in queries),
        "queries": queries,
    }
    out = args.out or certified.path_for(args.arm)
    out.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(queries)} queries, {data['replaced']} drawn pairs replaced")


if __name__ == "__main__":
    main()
