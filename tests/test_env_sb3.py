"""Stable-Baselines3 takes the environments as they are: its own ``check_env`` passes on every
registered id; only the goal forms define ``compute_reward`` (SB3 takes any env with one for a
goal env); on the goal forms the step reward is ``compute_reward`` of the goals as observed
(float32), exactly, over 1,000 transitions per env, and a batch of relabelled goals (HER's
"future" strategy, random goals, goals on the success tolerances) gives each pair's reward
exactly as one pair alone does."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from twin.env import ENV_IDS, GOAL_ENV_IDS
from twin.env.tasks import PRESS_FORCE_TOL, REACH_POS_TOL_M, REACH_ROT_TOL_RAD

env_checker = pytest.importorskip("stable_baselines3.common.env_checker")

TRANSITIONS, STEPS = 1000, 50  # per goal env; episodes of at most 50 steps


@pytest.mark.parametrize("env_id", ENV_IDS + GOAL_ENV_IDS)
def test_sb3_check_env_passes(env_id, recwarn):
    # SB3 checks the environment itself (Gymnasium 1.x wrappers do not forward attributes such
    # as compute_reward, so SB3's documented use is the env object: ``env.unwrapped``).
    with gym.make(env_id) as env:
        env_checker.check_env(env.unwrapped, warn=True)
    assert not [w for w in recwarn if "stable_baselines3" in str(w.filename)], [
        str(w.message) for w in recwarn
    ]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_flat_envs_have_no_compute_reward(env_id):
    with gym.make(env_id) as env:
        assert not hasattr(env.unwrapped, "compute_reward")
        assert isinstance(env.observation_space, gym.spaces.Box)


def _transitions(env_id: str) -> dict:
    """Seeded episodes (episode k reset with seed k) of at most ``STEPS`` uniform actions
    (seed 0) until ``TRANSITIONS``: per transition the observed goals (float32), the reward,
    the info and the episode it belongs to. Checks each step reward on the way."""
    rng = np.random.default_rng(0)
    out = {"achieved": [], "desired": [], "rewards": [], "infos": [], "episode": []}
    with gym.make(env_id, max_episode_steps=STEPS) as env:
        compute_reward = env.unwrapped.compute_reward
        episode = 0
        while len(out["rewards"]) < TRANSITIONS:
            env.reset(seed=episode)
            done = False
            while not done and len(out["rewards"]) < TRANSITIONS:
                action = rng.uniform(-1.0, 1.0, size=6).astype(np.float32)
                obs, reward, terminated, truncated, info = env.step(action)
                assert obs["achieved_goal"].dtype == np.float32
                # the step reward is compute_reward of the observed goals, exactly
                assert reward == compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
                out["achieved"].append(obs["achieved_goal"])
                out["desired"].append(obs["desired_goal"])
                out["rewards"].append(reward)
                out["infos"].append(info)
                out["episode"].append(episode)
                done = terminated or truncated
            episode += 1
    data = {k: (v if k == "infos" else np.array(v)) for k, v in out.items()}
    data["compute_reward"] = compute_reward
    return data


@pytest.fixture(scope="module", params=GOAL_ENV_IDS)
def transitions(request):
    return request.param, _transitions(request.param)


def test_step_reward_is_compute_reward_batched_exactly(transitions):
    _, data = transitions
    rewards = data["rewards"]
    assert rewards.shape == (TRANSITIONS,)
    batched = data["compute_reward"](data["achieved"], data["desired"], np.array(data["infos"]))
    assert batched.shape == rewards.shape
    np.testing.assert_array_equal(batched, rewards)


def _relabelled(data: dict, rng: np.random.Generator) -> np.ndarray:
    """Relabelled desired goals (n, g), float32: half HER "future" (an achieved goal later in
    the same episode), a quarter an achieved goal of another episode, a quarter the achieved
    goal moved onto the success tolerances (position by ``REACH_POS_TOL_M``, rotation by
    ``REACH_ROT_TOL_RAD``, force by ``PRESS_FORCE_TOL``), where a last-bit difference would flip
    the success bonus."""
    achieved, episode = data["achieved"], data["episode"]
    n = len(achieved)
    goals = achieved[rng.integers(0, n, size=n)].copy()
    for i in range(0, n, 2):  # future
        later = np.flatnonzero((episode == episode[i]) & (np.arange(n) >= i))
        goals[i] = achieved[rng.choice(later)]
    edge = np.arange(n) % 4 == 3
    goals[edge] = achieved[edge]
    direction = rng.normal(size=(int(edge.sum()), 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    goals[edge, :3] += (REACH_POS_TOL_M * direction).astype(np.float32)
    half = 0.5 * REACH_ROT_TOL_RAD  # a rotation by the tolerance about world z
    turn = np.array([np.cos(half), 0.0, 0.0, np.sin(half)])
    q = goals[edge, 3:7].astype(float)
    w, x, y, z = q.T
    tw, _, _, tz = turn
    goals[edge, 3:7] = np.stack(
        [tw * w - tz * z, tw * x - tz * y, tw * y + tz * x, tw * z + tz * w], axis=1
    ).astype(np.float32)
    if goals.shape[1] == 8:  # Press: the force at the band's edge
        goals[edge, 7] = (achieved[edge, 7] / (1.0 + PRESS_FORCE_TOL)).astype(np.float32)
        goals[edge, 7] = np.maximum(goals[edge, 7], np.float32(1.0))
    return goals


def test_relabelled_rewards_equal_one_pair_at_a_time_exactly(transitions):
    _, data = transitions
    goals = _relabelled(data, np.random.default_rng(1))
    achieved, infos = data["achieved"], np.array(data["infos"])
    compute_reward = data["compute_reward"]
    batched = compute_reward(achieved, goals, infos)
    one = np.array([compute_reward(a, g, i) for a, g, i in zip(achieved, goals, infos)])
    assert batched.shape == (TRANSITIONS,)
    np.testing.assert_array_equal(batched, one)
    # SB3's own check: a batch of two copies of a pair gives that pair's reward
    for k in range(0, TRANSITIONS, 97):
        two = compute_reward(np.stack([achieved[k]] * 2), np.stack([goals[k]] * 2), infos[[k, k]])
        np.testing.assert_array_equal(two, [one[k], one[k]])
    # relabelled with the achieved goal itself: the success bonus minus the effort penalty
    penalty = np.array([i["effort_penalty"] for i in infos])
    np.testing.assert_array_equal(compute_reward(achieved, achieved, infos), 1.0 - penalty)
