"""Generate the stored planner benchmark queries: ``assets/planning/queries_<scene>.json``.

For each shipped scene (table, shelf, bin with its point cloud, cage), TCP poses are drawn in the
scene's work regions (tool pointing down onto the table, the bin and the tray, or forward into the
shelf), solved with the closed-form IK (every posture), and the configurations that are free under
the planner's model and under PyBullet's exact check are kept. A query joins two such
configurations of different poses (the goal with the start's posture when it has one). A query is
kept only when it is solvable: a planner with another seed and a large budget finds a path, and
that path is re-verified with PyBullet's exact geometry at 1 mm / 0.01 rad.

    python benchmarks/make_planner_queries.py [--seed 0] [--count 120] [--scenes table bin]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planner_exact import ExactChecker, verify_path

from twin.planning import InitialState, PathRequest, Planner, PlannerSettings
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.spatial import SO3

QUERY_DIR = Path(__file__).resolve().parent.parent / "assets" / "planning"
FORMAT = "twin-planner-queries"

# (lower corner, upper corner, approach) of the TCP positions per scene, base frame, m
REGIONS = {
    "table": [((0.18, -0.45, 0.08), (0.6, 0.45, 0.35), "down")],
    "shelf": [
        ((0.53, -0.25, 0.17), (0.62, 0.25, 0.27), "forward"),
        ((0.53, -0.25, 0.44), (0.62, 0.25, 0.6), "forward"),
        ((0.25, -0.35, 0.12), (0.42, 0.35, 0.5), "forward"),
        ((0.2, -0.4, 0.1), (0.4, 0.4, 0.3), "down"),
    ],
    "bin": [
        ((0.33, 0.18, 0.14), (0.47, 0.42, 0.3), "down"),
        ((0.3, -0.36, 0.07), (0.4, -0.24, 0.25), "down"),
        ((0.15, -0.3, 0.15), (0.45, 0.3, 0.4), "down"),
    ],
    "cage": [
        ((0.22, -0.35, 0.08), (0.6, 0.35, 0.42), "down"),
        ((0.1, -0.35, 0.62), (0.4, 0.35, 0.75), "down"),
        ((0.3, -0.3, 0.15), (0.5, 0.3, 0.4), "forward"),
    ],
}


def random_pose(rng: np.random.Generator, region) -> np.ndarray:
    """A TCP pose (4x4) in ``region``: tool axis (TCP z) down or forward, random yaw, tilt
    within 0.3 rad."""
    lo, hi, approach = region
    m = np.eye(4)
    m[:3, 3] = rng.uniform(lo, hi)
    tilt = SO3.from_rpy(*rng.uniform(-0.3, 0.3, size=2), 0.0)
    if approach == "down":
        base = SO3.from_rpy(np.pi, 0.0, 0.0)
    else:
        base = SO3.from_rpy(0.0, np.pi / 2, 0.0)
    spin = SO3.from_rpy(0.0, 0.0, rng.uniform(-np.pi, np.pi))
    m[:3, :3] = (tilt @ base @ spin).matrix()
    return m


def free_ik(planner, exact, pose) -> list[tuple[np.ndarray, tuple]]:
    sols = planner.model.ik_all(pose)
    if len(sols) == 0:
        return []
    ok = planner.configurations_free(sols.configurations)
    out = []
    for q, posture, free in zip(sols.configurations, sols.postures, ok):
        if free and not exact.colliding(q):
            out.append((q, tuple(int(v) for v in posture)))
    return out


def make_scene(scene: str, seed: int, count: int) -> dict:
    rng = np.random.default_rng([seed, sum(map(ord, scene))])
    planner = Planner()
    planner.set_obstacles(obstacles_from_scene(scene))
    solver = Planner(PlannerSettings(seed=seed + 1000, max_iterations=20000))
    solver.set_obstacles(obstacles_from_scene(scene))
    travel = planner.checker.travel
    pool: list[tuple[np.ndarray, np.ndarray, list]] = []
    with ExactChecker(planner.model.urdf_path, scene) as exact:
        while len(pool) < 3 * count:
            region = REGIONS[scene][int(rng.integers(len(REGIONS[scene])))]
            pose = random_pose(rng, region)
            sols = free_ik(planner, exact, pose)
            if sols:
                pool.append((pose, sols))
        queries = []
        attempts = 0
        while len(queries) < count:
            attempts += 1
            i, j = rng.choice(len(pool), size=2, replace=False)
            (pa, sa), (pb, sb) = pool[i], pool[j]
            q0, posture = sa[int(rng.integers(len(sa)))]
            same = [q for q, p in sb if p == posture]
            q1 = same[0] if same else sb[int(rng.integers(len(sb)))][0]
            if np.linalg.norm(q1 - q0) < 0.3:
                continue
            result = solver.path(InitialState(q0), PathRequest([q1]))
            if not result:
                continue
            path = np.vstack([q0, *[w.configuration for w in result.path()]])
            if verify_path(exact, path, travel):
                continue
            queries.append(
                {
                    "start": q0.tolist(),
                    "goal": q1.tolist(),
                    "start_pose": pa.tolist(),
                    "goal_pose": pb.tolist(),
                    "direct": len(result.path()) == 1,
                }
            )
            print(f"\r{scene}: {len(queries)}/{count} (attempts {attempts})", end="", flush=True)
    print()
    return {
        "format": FORMAT,
        "version": 1,
        "scene": scene,
        "seed": seed,
        "description": __doc__.split("\n\n")[1].replace("\n", " "),
        "queries": queries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=120)
    parser.add_argument("--scenes", nargs="*", default=list(REGIONS))
    parser.add_argument("--out-dir", type=Path, default=QUERY_DIR)
    args = parser.parse_args()
    for scene in args.scenes:
        data = make_scene(scene, args.seed, args.count)
        path = args.out_dir / f"queries_{scene}.json"
        path.write_text(
            json.dumps(data, indent=None, separators=(",", ":")) + "\n", encoding="utf-8"
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
