"""The same environment under Ray RLlib (docs/training.md): a few PPO iterations on a local Ray
instance. Optional: skipped unless the ``rllib`` extra (``pip install -e '.[rllib]'``) is in."""

from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.rllib")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ppo_runs_a_few_iterations_on_reach(local_ray):
    from twin.policies.rllib import ppo_config

    algo = ppo_config("twin/Reach-v0", train_batch_size=200).build_algo()
    try:
        results = [algo.train() for _ in range(2)]
    finally:
        algo.stop()
    sampled = [r["env_runners"]["num_env_steps_sampled_lifetime"] for r in results]
    assert sampled[0] >= 200 and sampled[1] >= 2 * 200  # each iteration sampled its batch
    returns = [r["env_runners"].get("episode_return_mean") for r in results]
    finite = [x for x in returns if x is not None]
    assert all(np.isfinite(finite))
    assert all(x < 100.0 for x in finite)  # dense Reach reward: at most +1 per step
