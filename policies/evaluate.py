"""Evaluate a shipped ONNX policy through ``twin.control.OnnxRLController`` on the sim backend.

    python -m policies.evaluate --policy reach --episodes 100 --seed 0

Episode ``i`` uses ``seed + i``: the Reach environment's ``reset(seed=seed + i)`` draws the start
configuration and the target pose (the same sampler the policy was trained on), then the
environment's robot is driven by the controller alone (no torch, no environment ``step``): every
control period ``controller.update(t_us)`` reads the robot, runs the ONNX graph and writes the
joint targets when a policy period is due, and ``robot.step()`` advances the sim. An episode
succeeds if the TCP is within 2 cm and 0.1 rad of the target after ``EPISODE_DURATION_S`` (4 s)
of sim time. Prints a table and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
from dataclasses import dataclass

import numpy as np

POLICY_DIR = pathlib.Path(__file__).resolve().parent
TASKS = {"reach": "twin/Reach-v0"}


@dataclass(frozen=True)
class EpisodeResult:
    """One evaluated episode: final errors (m, rad), success, first time within tolerance (s)."""

    seed: int
    position_error_m: float
    rotation_error_rad: float
    success: bool
    time_to_tolerance_s: float | None


class PolicyNotFoundError(ValueError):
    """Neither a shipped policy's name nor the path of an existing ``.onnx`` file."""


def shipped_policies() -> tuple[str, ...]:
    """Names of the shipped policies (``policies/<name>.onnx``)."""
    return tuple(sorted(p.stem for p in POLICY_DIR.glob("*.onnx")))


def policy_path(policy: str) -> pathlib.Path:
    """``policies/<policy>.onnx`` for a shipped name, or the ``.onnx`` path given;
    ``PolicyNotFoundError`` (with the closest shipped name) for anything else."""
    path = pathlib.Path(policy)
    names = shipped_policies()
    expected = f"expected an ONNX policy file (.onnx) or a shipped policy ({', '.join(names)})"
    if path.suffix == ".onnx":
        if not path.is_file():
            raise PolicyNotFoundError(f"policy file {policy} does not exist; {expected}")
        return path
    if path.suffix or len(path.parts) > 1 or path.exists():
        raise PolicyNotFoundError(f"{policy} is not an ONNX policy; {expected}")
    if policy not in names:
        from twin.backends import closest

        raise PolicyNotFoundError(f"unknown policy {policy!r}{closest(policy, names)}; {expected}")
    return POLICY_DIR / f"{policy}.onnx"


def run_episodes(
    policy: str | pathlib.Path, seeds: list[int], duration_s: float | None = None
) -> list[EpisodeResult]:
    """Run ``policy`` (a shipped name or an .onnx path) on the Reach task for each seed."""
    import gymnasium as gym

    import twin  # noqa: F401  (registers the environment ids)
    from twin.control import CommandSource, OnnxRLController, RobotStateAdapter, WorkerMode
    from twin.env import EPISODE_DURATION_S
    from twin.env.core import tcp_pose7

    duration_s = EPISODE_DURATION_S if duration_s is None else duration_s
    env = gym.make(TASKS["reach"]).unwrapped
    results = []
    try:
        robot, task = env.robot, env.task
        commands = CommandSource()
        controller = OnnxRLController(RobotStateAdapter(robot, articulation="arm"), commands)
        if not controller.create(policy_path(str(policy))):
            raise RuntimeError(f"cannot load {policy}: {controller.error}")
        n_steps = round(duration_s / robot.control_period_s)
        per_policy_step = max(1, round(env.policy_period_s / robot.control_period_s))
        for seed in seeds:
            env.reset(seed=seed)  # start configuration and target from the task's sampler
            commands.set_se3_pose("target", task.target_pose)
            if not controller.init(enable_data_collection=False, mode=WorkerMode.SYNC):
                raise RuntimeError(f"controller init failed: {controller.error}")
            reached_at = None
            for k in range(n_steps):
                if not controller.update(robot.read().t_us):
                    raise RuntimeError(f"controller cycle failed: {controller.fault}")
                robot.step()
                if (k + 1) % per_policy_step or reached_at is not None:
                    continue  # tolerance checked once per policy period, as in the env
                if task.is_success(tcp_pose7(robot.model, robot.read().q)):
                    reached_at = (k + 1) * robot.control_period_s
            tcp = tcp_pose7(robot.model, robot.read().q)
            d, ang = task.errors(tcp)
            results.append(EpisodeResult(seed, d, ang, task.is_success(tcp), reached_at))
    finally:
        env.close()
    return results


def summarize(results: list[EpisodeResult]) -> dict:
    d = np.array([r.position_error_m for r in results])
    a = np.array([r.rotation_error_rad for r in results])
    reached = [r.time_to_tolerance_s for r in results if r.time_to_tolerance_s is not None]
    return {
        "episodes": len(results),
        "success_rate": float(np.mean([r.success for r in results])),
        "position_error_m_median": float(np.median(d)),
        "position_error_m_p95": float(np.percentile(d, 95)),
        "rotation_error_rad_median": float(np.median(a)),
        "rotation_error_rad_p95": float(np.percentile(a, 95)),
        "time_to_tolerance_s_median": float(np.median(reached)) if reached else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--policy", default="reach", help="shipped policy name or .onnx path")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = run_episodes(args.policy, list(range(args.seed, args.seed + args.episodes)))
    summary = summarize(results)
    summary.update(policy=str(policy_path(args.policy).name), seed=args.seed)
    summary["wall_time_s"] = round(time.perf_counter() - t0, 1)
    print(f"{'metric':<28} {'value':>10}")
    for key, value in summary.items():
        text = f"{value:.4f}" if isinstance(value, float) else str(value)
        print(f"{key:<28} {text:>10}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
