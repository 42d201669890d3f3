"""Gymnasium registration of the twin environments (run on ``import twin``)."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

#: Episode length of every environment (s of robot time): 4 s, i.e. 100 steps at the 25 Hz
#: policy rate (``twin.env.core.POLICY_RATE_HZ``; not imported here so that ``import twin``
#: stays light; a test checks the two agree).
EPISODE_DURATION_S = 4.0
MAX_EPISODE_STEPS = 100

#: The environment ids with a flat (Box) observation; tests loop over this tuple.
ENV_IDS = ("twin/Reach-v0", "twin/Press-v0")
#: Their goal-conditioned forms (``goal_conditioned=True``: a ``Dict`` observation with
#: ``observation``, ``achieved_goal``, ``desired_goal`` and ``env.compute_reward``, for HER).
GOAL_ENV_IDS = ("twin/ReachGoal-v0", "twin/PressGoal-v0")

_ENTRY_POINTS = {
    "twin/Reach-v0": ("twin.env.envs:ReachEnv", {}),
    "twin/Press-v0": ("twin.env.envs:PressEnv", {}),
    "twin/ReachGoal-v0": ("twin.env.envs:ReachEnv", {"goal_conditioned": True}),
    "twin/PressGoal-v0": ("twin.env.envs:PressEnv", {"goal_conditioned": True}),
}


class VectorEntryPoint:
    """The ids' ``vector_entry_point``: ``gymnasium.make_vec(id, num_envs, vectorization_mode=
    "vector_entry_point", num_workers=..., **env_kwargs)`` builds a ``twin.env.vector.TwinVectorEnv``
    (imported on first use, so that ``import twin`` stays light)."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id

    def __call__(self, num_envs: int, **kwargs):
        from twin.env.vector import make_vector_env

        return make_vector_env(self.env_id, num_envs, **kwargs)


def register_envs() -> None:
    """Register ``ENV_IDS`` and ``GOAL_ENV_IDS`` with Gymnasium (idempotent)."""
    for env_id in ENV_IDS + GOAL_ENV_IDS:
        if env_id not in registry:
            entry_point, kwargs = _ENTRY_POINTS[env_id]
            register(
                id=env_id,
                entry_point=entry_point,
                kwargs=kwargs,
                vector_entry_point=VectorEntryPoint(env_id),
                max_episode_steps=MAX_EPISODE_STEPS,
            )
