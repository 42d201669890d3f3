"""Vector envs over the twin environments: gymnasium's sync and async ones and the twin's own
``TwinVectorEnv`` (``twin/env/vector.py``) give bit for bit the episodes of single envs, with
gymnasium's info layout and autoreset rules; errors in workers surface with their message."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import twin  # noqa: F401  (registers the environment ids)
from twin.env.vector import MAX_SPIN_S, TwinVectorEnv, VectorWorkerError

N_ENVS = 3
N_STEPS = 104  # past the 100-step time limit: the autoreset is compared too
SEED = 11

#: (vectorization, make_vec keywords) compared against single envs.
MODES = {
    "sync": ("sync", {}),
    "async": ("async", {}),
    "twin 2 workers": ("vector_entry_point", {"num_workers": 2}),
    "twin 2 workers, blocking hand-off": ("vector_entry_point", {"num_workers": 2, "spin_s": 0.0}),
    "twin 2 pinned workers": ("vector_entry_point", {"num_workers": 2, "pin": True}),
    "twin, main + 1 worker": ("vector_entry_point", {"num_workers": 2, "in_main": True}),
    "twin 1 worker": ("vector_entry_point", {"num_workers": 1}),
    "twin, all in main": ("vector_entry_point", {"num_workers": 1, "in_main": True}),
}


def _actions() -> np.ndarray:
    return np.random.default_rng(SEED).uniform(-1.0, 1.0, (N_STEPS, N_ENVS, 6)).astype(np.float32)


def _single_rollouts(env_id: str) -> list[list[tuple]]:
    """Per env: (obs, reward, terminated, truncated, info) of its reset and every step, with
    gymnasium's next-step autoreset done by hand."""
    out = []
    for i in range(N_ENVS):
        with gym.make(env_id) as env:
            obs, info = env.reset(seed=SEED + i)
            steps, done = [(obs, 0.0, False, False, info)], False
            for a in _actions()[:, i]:
                if done:
                    obs, info = env.reset()
                    step = (obs, 0.0, False, False, info)
                else:
                    step = env.step(a)
                done = step[2] or step[3]
                steps.append(step)
            out.append(steps)
    return out


@pytest.fixture(scope="module", params=["twin/Reach-v0", "twin/PressGoal-v0"])
def reference(request):
    return request.param, _single_rollouts(request.param)


def _equal_obs(vector_obs, i: int, single_obs) -> bool:
    if isinstance(single_obs, dict):
        return all(np.array_equal(vector_obs[k][i], v) for k, v in single_obs.items())
    return np.array_equal(vector_obs[i], single_obs)


@pytest.mark.parametrize("mode", MODES)
def test_vector_envs_give_the_single_envs_episodes_bit_for_bit(reference, mode):
    env_id, singles = reference
    vectorization, options = MODES[mode]
    envs = gym.make_vec(env_id, num_envs=N_ENVS, vectorization_mode=vectorization, **options)
    try:
        assert isinstance(envs, TwinVectorEnv) == (vectorization == "vector_entry_point")
        obs, info = envs.reset(seed=SEED)
        results = [(obs, np.zeros(N_ENVS), np.zeros(N_ENVS, bool), np.zeros(N_ENVS, bool), info)]
        results += [envs.step(a) for a in _actions()]
    finally:
        envs.close()
    truncations = 0
    for t, (obs, rewards, terminated, truncated, info) in enumerate(results):
        for i in range(N_ENVS):
            s_obs, s_reward, s_terminated, s_truncated, s_info = singles[i][t]
            assert _equal_obs(obs, i, s_obs), (mode, t, i)
            assert rewards[i] == s_reward and rewards.dtype == np.float64, (mode, t, i)
            assert (terminated[i], truncated[i]) == (s_terminated, s_truncated), (mode, t, i)
            for key, value in s_info.items():
                assert info[key][i] == value and info["_" + key][i], (mode, t, i, key)
            assert set(info) == {k for key in s_info for k in (key, "_" + key)}
        truncations += int(truncated.sum())
    assert truncations == N_ENVS  # every env hit its time limit once: the autoreset was compared


def test_twin_vector_info_has_gymnasiums_layout_and_dtypes():
    kwargs = {"num_envs": 2}
    sync = gym.make_vec("twin/Reach-v0", vectorization_mode="sync", **kwargs)
    mine = gym.make_vec("twin/Reach-v0", vectorization_mode="vector_entry_point", **kwargs)
    try:
        infos = []
        for envs in (sync, mine):
            envs.reset(seed=3)
            infos.append(envs.step(np.full((2, 6), 0.5, np.float32))[4])
    finally:
        sync.close()
        mine.close()
    assert infos[0].keys() == infos[1].keys()
    for key, value in infos[0].items():
        assert value.dtype == infos[1][key].dtype and np.array_equal(value, infos[1][key]), key
    assert infos[1]["is_success"].dtype == np.bool_  # a typed array, not an object array


def test_same_step_autoreset_matches_gymnasiums_final_obs_and_info():
    """``AutoresetMode.SAME_STEP`` (SB3's convention): the infos that carry ``final_obs`` and
    ``final_info`` go pickled, and equal the sync vector env's."""
    mode = {"autoreset_mode": AutoresetMode.SAME_STEP}
    sync = gym.make_vec("twin/Reach-v0", 2, vectorization_mode="sync", vector_kwargs=mode)
    mine = gym.make_vec("twin/Reach-v0", 2, vectorization_mode="vector_entry_point", **mode)
    actions = np.random.default_rng(0).uniform(-1, 1, (101, 2, 6)).astype(np.float32)
    try:
        assert mine.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        steps = []
        for envs in (sync, mine):
            envs.reset(seed=5)
            steps.append([envs.step(a) for a in actions])
    finally:
        sync.close()
        mine.close()
    for t, (a, b) in enumerate(zip(*steps)):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        assert a[4].keys() == b[4].keys(), t
    final = steps[1][99][4]  # step 100: both envs truncated and reset in the same step
    assert steps[1][99][3].all() and "final_obs" in final
    for i in range(2):
        np.testing.assert_array_equal(final["final_obs"][i], steps[0][99][4]["final_obs"][i])
        assert (
            final["final_info"]["position_error_m"][i]
            == (steps[0][99][4]["final_info"]["position_error_m"][i])
        )
    assert "final_obs" not in steps[1][100][4]  # the next step is a usual one again


def test_make_vec_uses_the_twin_vector_env_by_default_and_passes_env_options():
    envs = gym.make_vec("twin/Reach-v0", num_envs=2, model_features=False, num_workers=1)
    try:
        assert isinstance(envs, TwinVectorEnv) and envs.num_workers == 1
        assert len(envs.processes) == 1
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 32)  # the env option reached the workers' envs
        assert envs.get_attr("model_features") == (False, False)
        envs.set_attr("gains", [envs.get_attr("gains")[0]] * 2)
    finally:
        envs.close()
    assert all(not p.is_alive() for p in envs.processes)
    with pytest.raises(gym.error.ClosedEnvironmentError):
        envs.step(np.zeros((2, 6), np.float32))


def test_rgb_array_frames_of_every_env():
    envs = gym.make_vec("twin/Reach-v0", num_envs=2, render_mode="rgb_array", in_main=True)
    try:
        assert envs.render_mode == "rgb_array"
        envs.reset(seed=0)
        frames = envs.render()
    finally:
        envs.close()
    assert len(frames) == 2 and all(
        f.shape == (240, 320, 3) and f.dtype == np.uint8 for f in frames
    )
    assert not np.array_equal(frames[0], frames[1])  # each env draws its own goal


class _FailingEnv(gym.Env):
    """Steps fine until ``fail_at``, then raises (a broken environment in a worker)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, fail_at: int = 2) -> None:
        self.fail_at, self.t = fail_at, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t == self.fail_at:
            raise RuntimeError("the arm left the table")
        return np.full(2, float(action[0]), np.float32), 1.0, False, False, {"t": self.t}


def test_an_error_in_a_worker_names_the_worker_and_the_error():
    envs = TwinVectorEnv([_FailingEnv, lambda: _FailingEnv(fail_at=99)], num_workers=2)
    try:
        envs.reset(seed=0)
        obs, rewards, _, _, info = envs.step(np.array([[0.5], [-0.5]], np.float32))
        assert rewards.tolist() == [1.0, 1.0]
        np.testing.assert_array_equal(obs, [[0.5, 0.5], [-0.5, -0.5]])
        assert info["t"].tolist() == [1, 1] and info["t"].dtype == np.int64
        with pytest.raises(
            VectorWorkerError, match=r"worker process 0: RuntimeError\('the arm left"
        ):
            envs.step(np.zeros((2, 1), np.float32))
    finally:
        envs.close()


@pytest.mark.parametrize(("workers", "expected"), [(0, "from 1 to the number"), (3, "from 1 to")])
def test_bad_worker_counts_are_refused(workers, expected):
    with pytest.raises(ValueError, match=expected):
        TwinVectorEnv([_FailingEnv, _FailingEnv], num_workers=workers)


@pytest.mark.parametrize("spin_s", [-1e-3, MAX_SPIN_S * 2, "1ms", None])
def test_bad_spin_times_are_refused(spin_s):
    with pytest.raises(ValueError, match=r"spin_s must be seconds from 0 to"):
        TwinVectorEnv([_FailingEnv], spin_s=spin_s)


class _DyingEnv(_FailingEnv):
    """Its process ends in the middle of its second step (a crash the env cannot report)."""

    def __init__(self) -> None:
        super().__init__(fail_at=99)

    def step(self, action):
        if self.t == 1:
            os._exit(3)
        return super().step(action)


@pytest.mark.parametrize("spin_s", [0.0, 1e-3])
def test_a_worker_that_dies_mid_step_is_reported_not_waited_for(spin_s):
    envs = TwinVectorEnv([_DyingEnv, lambda: _FailingEnv(fail_at=99)], num_workers=2, spin_s=spin_s)
    try:
        envs.reset(seed=0)
        envs.step(np.zeros((2, 1), np.float32))
        with pytest.raises(VectorWorkerError, match=r"worker process 0 exited .*exit code 3"):
            envs.step(np.zeros((2, 1), np.float32))
        with pytest.raises(VectorWorkerError, match=r"a worker process was lost; close"):
            envs.step(np.zeros((2, 1), np.float32))  # no more steps after a lost worker
    finally:
        envs.close()
    assert not any(p.is_alive() for p in envs.processes)


def test_an_error_in_the_main_block_leaves_the_workers_in_step():
    """The main's own block raises; the workers' answers of that step are still taken, so the
    next step gives every env's own next step."""
    envs = TwinVectorEnv(
        [_FailingEnv, lambda: _FailingEnv(fail_at=99)], num_workers=2, in_main=True
    )
    try:
        envs.reset(seed=0)
        envs.step(np.zeros((2, 1), np.float32))
        with pytest.raises(RuntimeError, match="the arm left the table"):
            envs.step(np.zeros((2, 1), np.float32))
        obs, _, _, _, info = envs.step(np.array([[0.25], [0.75]], np.float32))
    finally:
        envs.close()
    assert info["t"].tolist() == [3, 3]
    np.testing.assert_array_equal(obs, [[0.25, 0.25], [0.75, 0.75]])


def test_spawned_workers_step_alike_with_single_threaded_libraries():
    """``context="spawn"``: the workers import numpy afresh, with one BLAS thread (the
    ``OPENBLAS_NUM_THREADS`` they start with), and step as forked ones do."""
    obs, before = [], {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    for context in ("fork", "spawn"):
        envs = gym.make_vec("twin/Reach-v0", 2, num_workers=2, context=context)
        try:
            envs.reset(seed=2)
            obs.append(envs.step(np.full((2, 6), 0.3, np.float32))[0])
            threads = [len(os.listdir(f"/proc/{p.pid}/task")) for p in envs.processes]
        finally:
            envs.close()
        assert threads == [1, 1], context
    np.testing.assert_array_equal(obs[0], obs[1])
    assert {k: os.environ.get(k) for k in before} == before  # this process's are as they were


def test_pinned_workers_run_on_their_own_cores():
    envs = TwinVectorEnv([_FailingEnv] * 2, num_workers=2, pin=True)
    try:
        cores = [os.sched_getaffinity(p.pid) for p in envs.processes]
    finally:
        envs.close()
    n = os.cpu_count()
    assert cores == [{0}, {1 % n}]


def test_the_training_adapter_gives_the_same_transitions_over_the_twin_vector_env():
    """``policies/vector.py``: SB3's view (``Sb3VectorEnv``) of the twin's vector env equals its
    view of gymnasium's sync one, the time-limit reset (``terminal_observation``) included."""
    pytest.importorskip("stable_baselines3")
    from twin.policies.vector import Sb3VectorEnv, make_gym_vector

    actions = np.random.default_rng(1).uniform(-1, 1, (101, 2, 6)).astype(np.float32)
    runs = []
    for mode in ("sync", "twin"):
        envs = Sb3VectorEnv(make_gym_vector("twin/Reach-v0", 2, seed=4, mode=mode))
        try:
            steps = [envs.reset()]
            for a in actions:
                envs.step_async(a)
                steps.append(envs.step_wait())
        finally:
            envs.close()
        runs.append(steps)
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for t, (a, b) in enumerate(zip(runs[0][1:], runs[1][1:])):
        for x, y in zip(a[:3], b[:3]):
            np.testing.assert_array_equal(x, y, err_msg=str(t))
        assert [sorted(i) for i in a[3]] == [sorted(i) for i in b[3]], t
    final = runs[1][100]  # step 100: both time out, reset in the same step
    assert final[2].all() and all(i["TimeLimit.truncated"] for i in final[3])
    for i in range(2):
        np.testing.assert_array_equal(
            final[3][i]["terminal_observation"], runs[0][100][3][i]["terminal_observation"]
        )
