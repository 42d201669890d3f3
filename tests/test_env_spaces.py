"""Bounded observation spaces and the goal-conditioned forms: every observation inside its space
over 100 random episodes per environment (randomised: the widest spread of states; one run of
the goal form gives both forms' observations, the flat environment's own first episodes equal
to them bit for bit); ``compute_reward`` equals the step reward on the same 1,000 transitions,
batched."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from twin.env import ENV_IDS, GOAL_ENV_IDS
from twin.env.randomization import Randomization

EPISODES, STEPS = 100, 10  # 1,000 transitions per environment


#: The flat form of each goal-conditioned environment (the same class and physics).
FLAT_OF = dict(zip(GOAL_ENV_IDS, ENV_IDS, strict=True))
#: Episodes the flat environment itself runs, to show that its observations are the goal form's
#: flat ones bit for bit (so that one set of 100 episodes serves both forms).
DIRECT_EPISODES = 3


def _actions(rng: np.random.Generator, episode: int) -> np.ndarray:
    """Uniform actions, and every third episode bang-bang (+-1) to drive the joints hardest."""
    a = rng.uniform(-1.0, 1.0, size=(STEPS, 6))
    return np.sign(a) if episode % 3 == 0 else a


def _rollout(env, actions: list[np.ndarray]) -> dict:
    """Seeded episodes (episode k reset with seed k, then ``actions[k]`` until it ends)."""
    out = {"obs": [], "rewards": [], "infos": [], "space": env.observation_space}
    out["compute_reward"] = getattr(env.unwrapped, "compute_reward", None)  # goal forms only
    names = np.concatenate([[n] * k for n, k, _ in env.unwrapped.task.layout])
    out["names"] = names[env.unwrapped._free] if env.unwrapped.goal_conditioned else names
    for episode, episode_actions in enumerate(actions):
        obs, _ = env.reset(seed=episode)
        out["obs"].append(obs)
        for a in episode_actions:
            obs, reward, terminated, truncated, info = env.step(a.astype(np.float32))
            out["obs"].append(obs)
            out["rewards"].append(reward)
            out["infos"].append(info)
            if terminated or truncated:
                break
    return out


def _collect(goal_id: str, **kwargs) -> dict:
    """The goal form's episodes, the flat form's (the flat observations the goal form computes
    on its way, its ``_output``'s argument, in the flat environment's space), and the flat
    environment's own first ``DIRECT_EPISODES`` episodes."""
    rng = np.random.default_rng(0)
    actions = [_actions(rng, episode) for episode in range(EPISODES)]
    with gym.make(goal_id, **kwargs) as env:
        flat_obs = []
        output = env.unwrapped._output

        def keep(obs):
            flat_obs.append(obs.copy())
            return output(obs)

        env.unwrapped._output = keep
        goal = _rollout(env, actions)
    with gym.make(FLAT_OF[goal_id], **kwargs) as env:
        direct = _rollout(env, actions[:DIRECT_EPISODES])
    flat = {**direct, "obs": flat_obs, "rewards": goal["rewards"], "infos": goal["infos"]}
    return {goal_id: goal, FLAT_OF[goal_id]: flat, "direct": direct}


@pytest.fixture(scope="module")
def collected() -> dict:
    """goal env id -> ``_collect``'s rollouts, each collected once, when first needed."""
    return {}


def _rollouts_of(collected: dict, env_id: str) -> dict:
    goal_id = next(g for g, f in FLAT_OF.items() if env_id in (g, f))
    if goal_id not in collected:
        # Physics, delays and sensor readings randomised: the widest spread of states.
        collected[goal_id] = _collect(goal_id, randomize=Randomization())
    return collected[goal_id]


@pytest.fixture(scope="module", params=ENV_IDS + GOAL_ENV_IDS)
def rollouts(request, collected):
    return request.param, _rollouts_of(collected, request.param)[request.param]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_the_flat_env_steps_as_the_goal_forms_flat_observations(collected, env_id):
    data = _rollouts_of(collected, env_id)
    flat, direct = data[env_id], data["direct"]
    n = len(direct["obs"])
    assert n >= DIRECT_EPISODES * 2 and len(flat["obs"]) == EPISODES * (STEPS + 1)
    for k in range(n):  # bit for bit: the same physics, draws and clip
        np.testing.assert_array_equal(direct["obs"][k], flat["obs"][k], err_msg=f"{env_id} {k}")
    assert direct["rewards"] == flat["rewards"][: len(direct["rewards"])]
    for a, b in zip(direct["infos"], flat["infos"], strict=False):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), (a, b)


def test_spaces_are_bounded(rollouts):
    _, data = rollouts
    spaces = (
        data["space"].spaces.values()
        if isinstance(data["space"], gym.spaces.Dict)
        else [data["space"]]
    )
    for space in spaces:
        assert space.is_bounded("both") and np.all(np.isfinite(space.low))


def test_every_observation_is_inside_its_space(rollouts):
    env_id, data = rollouts
    assert len(data["obs"]) == EPISODES * (STEPS + 1)
    outside = [i for i, obs in enumerate(data["obs"]) if not data["space"].contains(obs)]
    assert outside == [], f"{env_id}: {len(outside)} observations outside the space"


#: Terms whose bound is exact by construction (unit quaternions, the IK step's own clip) and
#: may be met; the others' bounds are physical ranges the arm keeps well inside.
EXACT_BOUND_TERMS = ("tcp_quat", "target_quat", "rot_error_tcp", "ik_step", "joint_pos")


def test_physical_bounds_are_not_reached_in_random_episodes(rollouts):
    """The clip is a guard, not a shaping: random episodes keep 1 % of each span clear."""
    _, data = rollouts
    space = data["space"]
    flat = (
        np.array([o["observation"] for o in data["obs"]])
        if isinstance(space, gym.spaces.Dict)
        else np.array(data["obs"])
    )
    box = space["observation"] if isinstance(space, gym.spaces.Dict) else space
    span = box.high - box.low
    margin = np.minimum(flat - box.low, box.high - flat) / span
    physical = ~np.isin(data["names"], EXACT_BOUND_TERMS)
    assert physical.sum() >= 15
    closest = margin[:, physical].min(axis=0)
    assert np.all(closest > 0.01), dict(zip(data["names"][physical], closest.round(4)))


def test_compute_reward_equals_the_step_reward_on_1000_transitions(rollouts):
    env_id, data = rollouts
    if env_id not in GOAL_ENV_IDS:
        pytest.skip("a flat-observation env has no goals")
    obs = data["obs"]
    nxt = [o for i, o in enumerate(obs) if i % (STEPS + 1)]  # the observation after each step
    achieved = np.array([o["achieved_goal"] for o in nxt], dtype=float)
    desired = np.array([o["desired_goal"] for o in nxt], dtype=float)
    rewards = np.array(data["rewards"])
    assert len(rewards) == 1000
    batched = data["compute_reward"](achieved, desired, np.array(data["infos"]))
    assert batched.shape == (1000,)
    np.testing.assert_allclose(batched, rewards, rtol=0, atol=1e-5)  # goals are float32
    # one at a time (a single info dict) gives the same
    one = data["compute_reward"](achieved[7], desired[7], data["infos"][7])
    assert one == pytest.approx(rewards[7], abs=1e-5)
    # relabelled with the achieved goal itself: the success bonus, minus the effort penalty
    penalty = np.array([i["effort_penalty"] for i in data["infos"]])
    relabelled = data["compute_reward"](achieved, achieved, np.array(data["infos"]))
    np.testing.assert_allclose(relabelled, 1.0 - penalty, atol=1e-9)


def test_goal_observation_holds_no_goal_terms():
    with gym.make("twin/ReachGoal-v0") as goal_env, gym.make("twin/Reach-v0") as flat_env:
        g, _ = goal_env.reset(seed=3)
        f, _ = flat_env.reset(seed=3)
    np.testing.assert_array_equal(g["observation"][:19], f[:19])  # q, qd, TCP pose
    np.testing.assert_array_equal(g["observation"][19:], f[38:])  # gravity offset
    np.testing.assert_allclose(g["desired_goal"], f[19:26], atol=1e-7)  # target pose


def test_compute_reward_without_info_has_no_effort_term():
    with gym.make("twin/ReachGoal-v0") as env:
        pose = np.array([0.5, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0])
        far = pose + np.array([0.1, 0, 0, 0, 0, 0, 0])
        r = env.unwrapped.compute_reward(np.stack([pose, far]), np.stack([pose, pose]), None)
    np.testing.assert_allclose(r, [1.0, -0.2])
