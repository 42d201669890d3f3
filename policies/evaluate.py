"""Evaluate a shipped ONNX policy through ``twin.control.OnnxRLController`` on the sim backend.

    python -m twin.policies.evaluate --policy reach --episodes 100 --seed 0
    python -m twin.policies.evaluate --policy reach --backend hardware --episodes 10 --seed 1000
    python -m twin.policies.evaluate --policy reach --randomize --episodes 20 --seed 1000

Episode ``i`` uses ``seed + i``: the Reach environment's ``reset(seed=seed + i)`` draws the start
configuration and the target pose (the same sampler the policy was trained on), then the
environment's robot is driven by the controller alone (no torch, no environment ``step``): every
control period ``controller.update(t_us)`` reads the robot, runs the ONNX graph and writes the
joint targets when a policy period is due, and ``robot.step()`` advances the sim. An episode
succeeds if the TCP is within 2 cm and 0.1 rad of the target after ``EPISODE_DURATION_S`` (4 s)
of sim time. Each episode also measures the fastest joint against its URDF velocity limit
(``peak_speed_ratio``: displacement over ``twin.safety.VELOCITY_WINDOW_S``, rule 6 of the safety
layer) and counts the velocity-limit events. Prints a table and ends with one JSON line.

``--randomize``: each episode's sim arm is also randomised (link masses, joint friction and
damping, payload: ``twin/env/randomization.py``, drawn from the episode's seed).
``--backend hardware``: the same seeded starts and targets, on ``SerialRobot`` talking to the
sim-backed device emulators over pseudo-terminals (DYNAMIXEL bus, Bota F/T, WitMotion IMU),
lock-step on a ``ManualClock`` at the hardware's own 4 ms control period: the arm is driven to
the start configuration slowly, then the controller alone runs it for 4 s.
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
    #: The fastest joint relative to its URDF velocity limit (``twin.safety`` rule 6: speed over
    #: ``VELOCITY_WINDOW_S`` of readings), and the velocity-limit events of the episode.
    peak_speed_ratio: float = float("nan")
    velocity_events: int = 0


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


def _controller(robot, policy):
    from twin.control import CommandSource, OnnxRLController, RobotStateAdapter

    commands = CommandSource()
    controller = OnnxRLController(RobotStateAdapter(robot, articulation="arm"), commands)
    if not controller.create(policy_path(str(policy))):
        raise RuntimeError(f"cannot load {policy}: {controller.error}")
    return controller, commands


def _episode(controller, commands, robot, task, seed: int, duration_s: float) -> EpisodeResult:
    """Run the controller alone on ``robot`` for ``duration_s`` toward ``task.target_pose``."""
    from twin.control import WorkerMode
    from twin.env.core import POLICY_RATE_HZ, tcp_pose7
    from twin.safety import VELOCITY_WINDOW_S, velocity_events_seen

    commands.set_se3_pose("target", task.target_pose)
    if not controller.init(enable_data_collection=False, mode=WorkerMode.SYNC):
        raise RuntimeError(f"controller init failed: {controller.error}")
    n_steps = round(duration_s / robot.control_period_s)
    per_policy_step = max(1, round(1.0 / (POLICY_RATE_HZ * robot.control_period_s)))
    reached_at = None
    window = max(1, round(VELOCITY_WINDOW_S / robot.control_period_s))
    q = [robot.read().q]
    with velocity_events_seen() as too_fast:
        for k in range(n_steps):
            if not controller.update(robot.read().t_us):
                raise RuntimeError(f"controller cycle failed: {controller.fault}")
            robot.step()
            q.append(robot.read().q)
            if (k + 1) % per_policy_step or reached_at is not None:
                continue  # tolerance checked once per policy period, as in the env
            if task.is_success(tcp_pose7(robot.model, q[-1])):
                reached_at = (k + 1) * robot.control_period_s
    tcp = tcp_pose7(robot.model, robot.read().q)
    d, ang = task.errors(tcp)
    q = np.array(q)
    speed = np.abs(q[window:] - q[:-window]) / (window * robot.control_period_s)  # (K, n) rad/s
    peak = float(np.max(speed / robot.model.velocity_limits)) if len(speed) else float("nan")
    return EpisodeResult(seed, d, ang, task.is_success(tcp), reached_at, peak, len(too_fast))


def run_episodes(
    policy: str | pathlib.Path,
    seeds: list[int],
    duration_s: float | None = None,
    randomize: bool = False,
) -> list[EpisodeResult]:
    """Run ``policy`` (a shipped name or an .onnx path) on the Reach task for each seed, on the
    sim backend (its physics randomised per episode with ``randomize``)."""
    import gymnasium as gym

    import twin  # noqa: F401  (registers the environment ids)
    from twin.env import EPISODE_DURATION_S

    duration_s = EPISODE_DURATION_S if duration_s is None else duration_s
    env = gym.make(TASKS["reach"], randomize=randomize).unwrapped
    results = []
    try:
        controller, commands = _controller(env.robot, policy)
        for seed in seeds:
            env.reset(seed=seed)  # start configuration and target from the task's sampler
            results.append(_episode(controller, commands, env.robot, env.task, seed, duration_s))
    finally:
        env.close()
    return results


def run_episodes_hardware(
    policy: str | pathlib.Path, seeds: list[int], duration_s: float | None = None
) -> list[EpisodeResult]:
    """Run ``policy`` for each seed on ``SerialRobot`` through the sim-backed emulators (module
    doc); starts and targets are those of ``run_episodes`` for the same seeds."""
    from dataclasses import replace

    import gymnasium as gym
    from twin.hardware import ManualClock, SerialRobot
    from twin.hardware.emulator import EmulatorStack, make_sim_source
    from twin.hardware.emulator.testing import emulator_config

    import twin  # noqa: F401  (registers the environment ids)
    from twin.env import EPISODE_DURATION_S
    from twin.env.core import move_to

    duration_s = EPISODE_DURATION_S if duration_s is None else duration_s
    sampler = gym.make(TASKS["reach"]).unwrapped  # the seeded starts and targets
    config = emulator_config(watchdog_s=None, stale_after_s=1.0)
    config = replace(config, bus=replace(config.bus, reply_timeout_s=2.0))
    clock = ManualClock()
    period_us = round(config.control_period_s * 1e6)
    results = []
    try:
        with EmulatorStack(config, make_sim_source(seed=0), clock=clock) as stack:
            with stack.clock_running(period_us):
                robot = SerialRobot(stack.robot_config(), clock=clock)
            with robot:
                controller, commands = _controller(robot, policy)
                for seed in seeds:
                    sampler.reset(seed=seed)  # the sim arm is now at the episode's start
                    move_to(robot, sampler.robot.read().q, sampler.gains)
                    results.append(
                        _episode(controller, commands, robot, sampler.task, seed, duration_s)
                    )
    finally:
        sampler.close()
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
        "peak_speed_ratio_max": float(max(r.peak_speed_ratio for r in results)),
        "velocity_events": int(sum(r.velocity_events for r in results)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--policy", default="reach", help="shipped policy name or .onnx path")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", choices=("sim", "hardware"), default="sim")
    ap.add_argument("--randomize", action="store_true", help="randomised sim physics")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    seeds = list(range(args.seed, args.seed + args.episodes))
    if args.backend == "hardware":
        results = run_episodes_hardware(args.policy, seeds)
    else:
        results = run_episodes(args.policy, seeds, randomize=args.randomize)
    summary = summarize(results)
    summary.update(
        policy=str(policy_path(args.policy).name),
        seed=args.seed,
        backend=args.backend,
        randomize=args.randomize,
    )
    summary["wall_time_s"] = round(time.perf_counter() - t0, 1)
    print(f"{'metric':<28} {'value':>10}")
    for key, value in summary.items():
        text = f"{value:.4f}" if isinstance(value, float) else str(value)
        print(f"{key:<28} {text:>10}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
