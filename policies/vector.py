"""Gymnasium's vector environments (``AsyncVectorEnv``: one process per worker, sharing nothing)
or the twin's (``TwinVectorEnv``, ``twin/env/vector.py``: worker processes exchanging through
shared memory) behind stable-baselines3's ``VecEnv`` interface, so the training scripts step
them directly.

    envs = make_gym_vector("twin/Reach-v0", n_envs=2, seed=0, mode="twin", randomize=True)
    model = SAC("MlpPolicy", Sb3VectorEnv(envs))

The vector env resets a finished worker in the same step (``AutoresetMode.SAME_STEP``); its last
observation goes to ``info["terminal_observation"]`` and ``info["TimeLimit.truncated"]`` tells a
time-out from a termination, as SB3 expects.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

import twin  # noqa: F401  (registers the environment ids)

#: ``make_gym_vector``'s modes: gymnasium's vector envs and the twin's.
VECTOR_MODES = ("async", "sync", "twin")


def make_gym_vector(
    env_id: str, n_envs: int, seed: int, mode: str = "async", **env_kwargs
) -> gym.vector.VectorEnv:
    """``n_envs`` copies of ``env_id`` in gymnasium's ``"async"`` (processes) or ``"sync"``
    vector env or in the twin's ``"twin"`` (``TwinVectorEnv``, one worker process per core),
    autoresetting in the same step; env ``i`` is seeded ``seed + i`` on the first reset."""
    if mode not in VECTOR_MODES:
        raise ValueError(f"vector mode must be one of {VECTOR_MODES}, got {mode!r}")
    same_step = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
    if mode == "twin":  # the ids' vector_entry_point takes its options as keywords
        envs = gym.make_vec(
            env_id, n_envs, vectorization_mode="vector_entry_point", **same_step, **env_kwargs
        )
    else:
        envs = gym.make_vec(
            env_id, n_envs, vectorization_mode=mode, vector_kwargs=same_step, **env_kwargs
        )
    envs.reset(seed=seed)
    return envs


class Sb3VectorEnv(VecEnv):
    """A gymnasium ``VectorEnv`` (``make_gym_vector``, flat Box observations) as an SB3 ``VecEnv``."""

    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        self.envs = envs
        super().__init__(envs.num_envs, envs.single_observation_space, envs.single_action_space)
        self._obs, _ = envs.reset()
        self._actions: np.ndarray | None = None

    def reset(self) -> np.ndarray:
        seed = self._seeds[0] if any(s is not None for s in self._seeds) else None
        self._obs, _ = self.envs.reset(seed=seed)
        self._reset_seeds()
        return self._obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, dtype=np.float32)

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.envs.step(self._actions)
        done = terminated | truncated
        infos = [{} for _ in range(self.num_envs)]
        for key, values in info.items():
            if key.startswith("_") or key in ("final_obs", "final_info"):
                continue
            mask = info.get(f"_{key}", np.ones(self.num_envs, bool))
            for i in np.flatnonzero(mask):
                infos[i][key] = values[i]
        for i in np.flatnonzero(done):
            infos[i]["terminal_observation"] = info["final_obs"][i]
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            final = info.get("final_info", {})
            if "is_success" in final:
                infos[i]["is_success"] = bool(final["is_success"][i])
        self._obs = obs
        return obs, rewards.astype(np.float32), done, infos

    def close(self) -> None:
        self.envs.close()

    def get_attr(self, attr_name, indices=None):
        return [self.envs.get_attr(attr_name)[i] for i in self._indices(indices)]

    def set_attr(self, attr_name, value, indices=None) -> None:
        raise NotImplementedError("Sb3VectorEnv does not set attributes of its workers")

    def env_method(self, method_name, *args, indices=None, **kwargs):
        results = self.envs.call(method_name, *args, **kwargs)
        return [results[i] for i in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._indices(indices)]

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)
