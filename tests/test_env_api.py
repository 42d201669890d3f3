"""Gymnasium environments: API conformance, seeding, vectorisation, rendering, backend switch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import twin
from twin.env import ENV_IDS, MAX_EPISODE_STEPS
from twin.env import core as env_core
from twin.env.core import RENDER_HEIGHT, RENDER_WIDTH, EnvConfigurationError


@pytest.fixture(params=ENV_IDS)
def env_id(request) -> str:
    return request.param


def test_ids_are_registered_on_import_of_twin():
    assert twin.env.ENV_IDS == ("twin/Reach-v0", "twin/Press-v0")
    assert twin.env.GOAL_ENV_IDS == ("twin/ReachGoal-v0", "twin/PressGoal-v0")
    for env_id in ENV_IDS + twin.env.GOAL_ENV_IDS:
        spec = gym.spec(env_id)
        assert spec.max_episode_steps == MAX_EPISODE_STEPS == 100
    assert round(twin.env.EPISODE_DURATION_S * env_core.POLICY_RATE_HZ) == MAX_EPISODE_STEPS


def test_check_env_passes_on_the_unwrapped_env(env_id, monkeypatch):
    # Headless here and in CI: the declared 'human' mode falls back to rgb_array (tests/test_env_render.py).
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with gym.make(env_id) as env, pytest.warns(RuntimeWarning, match="needs a display"):
        check_env(env.unwrapped)


def _rollout(env: gym.Env, seed: int, n_steps: int) -> tuple[np.ndarray, list[float]]:
    obs, _ = env.reset(seed=seed)
    actions = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n_steps, 6)).astype(np.float32)
    observations, rewards = [obs], []
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(a)
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            break
    return np.array(observations), rewards


def test_same_seed_gives_identical_episodes(env_id):
    with gym.make(env_id) as env:
        obs_a, rew_a = _rollout(env, seed=7, n_steps=30)
        _rollout(env, seed=8, n_steps=10)  # a different episode in between
        obs_b, rew_b = _rollout(env, seed=7, n_steps=30)
    with gym.make(env_id) as fresh:
        obs_c, _ = _rollout(fresh, seed=7, n_steps=30)
    assert obs_a.shape[0] > 1
    np.testing.assert_array_equal(obs_a, obs_b)  # bit for bit, same env
    np.testing.assert_array_equal(obs_a, obs_c)  # and in a new env
    assert rew_a == rew_b


def test_different_seeds_give_different_targets(env_id):
    with gym.make(env_id) as env:
        targets = [env.unwrapped.task.sample_goal(np.random.default_rng(s)) for s in range(5)]
    assert len({tuple(np.round(t, 9)) for t in targets}) == 5


def test_async_vector_of_four_steps():
    envs = gym.make_vec("twin/Reach-v0", num_envs=4, vectorization_mode="async")
    try:
        obs, _ = envs.reset(seed=3)
        assert obs.shape == (4, envs.single_observation_space.shape[0])
        for _ in range(3):
            obs, rewards, _, _, _ = envs.step(envs.action_space.sample())
        assert obs.shape[0] == 4 and np.all(np.isfinite(obs)) and rewards.shape == (4,)
        assert len(set(np.round(obs[:, 20], 6))) == 4  # each worker its own target (seed + i)
    finally:
        envs.close()


def test_rgb_array_frames_show_the_arm(env_id):
    with gym.make(env_id, render_mode="rgb_array") as env:
        env.reset(seed=0)
        frame_a = env.render()
        for _ in range(10):
            env.step(np.ones(6, dtype=np.float32))
        frame_b = env.render()
    assert frame_a.shape == (RENDER_HEIGHT, RENDER_WIDTH, 3) == (240, 320, 3)
    assert frame_a.dtype == np.uint8
    assert frame_a.std() > 10.0  # not a blank image
    # the background is near white: the arm (and table) cover a visible share of the pixels
    assert (frame_a.min(axis=2) < 200).mean() > 0.01
    # the arm moved, so the image changed
    assert np.abs(frame_a.astype(int) - frame_b.astype(int)).sum(axis=2).astype(bool).mean() > 0.002


@pytest.mark.filterwarnings("ignore:.*render_mode='video'.*:UserWarning")
def test_render_mode_is_validated():
    with pytest.raises(EnvConfigurationError, match="render_mode 'video'"):
        gym.make("twin/Reach-v0", render_mode="video")


def test_hardware_backend_without_config_says_what_is_missing(env_id):
    with pytest.raises(EnvConfigurationError, match="hardware_config=<path"):
        gym.make(env_id, backend="hardware")


def test_unknown_backend_is_refused():
    with pytest.raises(EnvConfigurationError, match="unknown backend 'robot'"):
        gym.make("twin/Reach-v0", backend="robot")


def test_hardware_backend_routes_through_open_robot(monkeypatch, tmp_path):
    """The env opens the robot with the CLI's switch; a sim stands in for the arm here."""
    from twin.backends import open_robot

    calls = []

    def recording_open_robot(backend, **options):
        calls.append((backend, options))
        return open_robot("sim")  # no hardware attached: a sim robot answers instead

    monkeypatch.setattr(env_core, "open_robot", recording_open_robot)
    config = tmp_path / "arm.toml"
    with gym.make("twin/Reach-v0", backend="hardware", hardware_config=str(config)) as env:
        env.reset(seed=0)
        env.step(np.zeros(6, dtype=np.float32))
    assert calls == [("hardware", {"config": str(config)})]


def test_step_before_reset_is_an_error():
    env = gym.make("twin/Reach-v0", disable_env_checker=True).unwrapped
    try:
        with pytest.raises(gym.error.ResetNeeded):
            env.step(np.zeros(6, dtype=np.float32))
    finally:
        env.close()
        env.close()  # idempotent


def test_hardware_backend_with_a_missing_config_file_names_it(tmp_path):
    """Through the real switch: the hardware backend refuses a config file that is not there."""
    missing = tmp_path / "no_such_arm.toml"
    with pytest.raises(Exception, match=r"no_such_arm\.toml"):
        gym.make("twin/Reach-v0", backend="hardware", hardware_config=str(missing))
