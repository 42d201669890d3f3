"""Hindsight experience replay on the goal-conditioned form: a short stable-baselines3 SAC run
with ``HerReplayBuffer`` (in the ``test`` and ``train`` extras; skipped without stable-baselines3)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import twin  # noqa: F401  (registers the environment ids)

sb3 = pytest.importorskip("stable_baselines3")


@pytest.fixture
def one_torch_thread():
    """Torch on one thread while the test runs: a 32 x 32 network gains nothing from more, and
    on a shared machine its worker threads wait on each other (ten times slower)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_sac_with_her_trains_on_reach_goal(one_torch_thread):
    from stable_baselines3 import SAC, HerReplayBuffer

    env = gym.make("twin/ReachGoal-v0")
    model = SAC(
        "MultiInputPolicy",
        env,
        replay_buffer_class=HerReplayBuffer,
        buffer_size=1_000,  # room for every step of the run (the default 1e6 takes seconds to set up)
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_starts=100,
        batch_size=64,
        policy_kwargs={"net_arch": [32, 32]},
        seed=0,
        device="cpu",
    )
    model.learn(total_timesteps=150)
    buffer = model.replay_buffer
    assert model.num_timesteps == 150 and buffer.size() == 150
    batch = buffer.sample(256)
    # Relabelled rewards are the env's compute_reward of the stored achieved goal (after the
    # step) and the sampled goal: they stay in the reward's range (the +1 bonus at most, and
    # no lower than the largest pose error the arm can make, with the effort penalty).
    rewards = batch.rewards.numpy().ravel()
    assert np.all(rewards <= 1.0) and np.all(rewards > -10.0)
    recomputed = env.unwrapped.compute_reward(
        batch.next_observations["achieved_goal"].numpy(),
        batch.observations["desired_goal"].numpy(),
        None,
    )
    # without the effort penalty (not in the sample) the recomputed reward is the larger one
    assert np.all(recomputed >= rewards - 1e-5)
    assert np.mean(recomputed - rewards) < 0.2  # the penalty is small next to the pose terms
    env.close()
