"""Gymnasium environments on the twin: ``twin/Reach-v0`` and ``twin/Press-v0``.

    import gymnasium, twin
    env = gymnasium.make("twin/Reach-v0", render_mode="rgb_array")            # sim backend
    env = gymnasium.make("twin/Reach-v0", backend="hardware", hardware_config="arm.toml")

| id | observation | success |
|---|---|---|
| ``twin/Reach-v0`` | (44,) ``features.REACH_MODEL_TERMS`` (32 without model features) | TCP within 2 cm and 0.1 rad |
| ``twin/Press-v0`` | (40,) ``features.PRESS_TERMS`` incl. the tared F/T reading | force within 10 % for 1 s |
| ``twin/ReachGoal-v0`` | ``Dict``: observation (25,), achieved / desired goal (7,) poses | as Reach |
| ``twin/PressGoal-v0`` | ``Dict``: observation (25,), goals (8,) pose + force N | as Press |

Both: actions (6,) in [-1, 1], joint-target deltas of up to 0.25 rad held by the PD law
(``tasks.DEFAULT_GAINS``) at 25 Hz; episodes of 4 s (100 steps); ``info["is_success"]``;
``rgb_array`` frames 240 x 320 x 3 uint8 (TinyRenderer) with the goal drawn as a red sphere,
``human`` the PyBullet GUI (``rgb_array`` with a warning when there is no display). Observation
spaces are bounded (``features.observation_bounds``). ``randomize=True`` turns on domain
randomisation (``randomization.py``). Only the goal forms have ``env.compute_reward``
(vectorised; Stable-Baselines3 takes any env with one for a goal env), and the step reward of
both forms is it of the goals as the goal form observes them (float32), bit for bit; SB3's
``check_env(env.unwrapped)`` passes on every id (``tests/test_env_sb3.py``).
``gymnasium.make_vec(id, num_envs)`` builds ``vector.TwinVectorEnv`` (worker processes stepping
blocks of envs through shared memory; gymnasium's ``"sync"`` and ``"async"`` modes work too).

Robot, task and environment are separate (``twin/robot.py``, ``tasks.py``, ``core.py``); the
observation features are in ``features.py`` and the exported ONNX policies rebuild them.
Training with them (vector envs, HER, domain randomisation, Ray RLlib): ``docs/training.md``.
"""

from twin.env.registration import (
    ENV_IDS,
    EPISODE_DURATION_S,
    GOAL_ENV_IDS,
    MAX_EPISODE_STEPS,
    register_envs,
)

__all__ = ["ENV_IDS", "EPISODE_DURATION_S", "GOAL_ENV_IDS", "MAX_EPISODE_STEPS", "register_envs"]
