"""The environments under Ray RLlib: the PPO configuration of ``docs/training.md``.

    from twin.policies.rllib import ppo_config
    algo = ppo_config("twin/Reach-v0", num_env_runners=2).build_algo()
    for _ in range(10):
        print(algo.train()["env_runners"]["episode_return_mean"])

RLlib makes the environment with ``gymnasium.make(env_id, **env_config)`` in each of its env
runners (``import twin`` registers the ids there too, through ``env_creator``).
"""

from __future__ import annotations


def _make_env(config):
    import gymnasium as gym

    import twin  # noqa: F401  (registers the environment ids in the runner's process)

    options = dict(config)
    return gym.make(options.pop("env_id"), **options)


def ppo_config(
    env_id: str = "twin/Reach-v0",
    *,
    num_env_runners: int = 0,
    train_batch_size: int = 4000,
    env_config: dict | None = None,
):
    """An RLlib ``PPOConfig`` for ``env_id`` (flat observation envs), torch, CPU only;
    ``num_env_runners=0`` samples in this process, more fan out over the Ray cluster."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env

    register_env("twin_env", _make_env)
    return (
        PPOConfig()
        .environment("twin_env", env_config={"env_id": env_id, **(env_config or {})})
        .framework("torch")
        .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=1)
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=train_batch_size,
            minibatch_size=min(128, train_batch_size),
            num_epochs=2,
            gamma=0.95,
            lr=3e-4,
        )
    )
