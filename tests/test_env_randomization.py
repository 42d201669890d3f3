"""Domain randomisation: off by default, seeded, applied per episode through the robot's methods,
each randomisation doing what it says (physics, payload, latency, delay, sensor noise and bias)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from twin.env.randomization import DEFAULT_RANDOMIZATION, Randomization, draw, perturb
from twin.robot import ImuSample, RobotState, WrenchSample

#: Nothing randomised: every range of zero width at the nominal value.
NOMINAL = Randomization(
    link_mass_scale=(1.0, 1.0),
    joint_damping=(0.0, 0.0),
    joint_friction=(0.0, 0.0),
    payload_mass=(0.0, 0.0),
    payload_com_m=0.0,
    ft_bias=(0.0, 0.0),
    ft_noise_std=(0.0, 0.0),
    imu_accel_bias=0.0,
    imu_accel_noise_std=0.0,
    imu_gyro_bias=0.0,
    imu_gyro_noise_std=0.0,
    actuation_latency_periods=(0, 0),
    observation_delay_periods=(0, 0),
)


def _episode(env_id: str, seed: int, n: int = 8, **kwargs) -> np.ndarray:
    with gym.make(env_id, **kwargs) as env:
        obs = [env.reset(seed=seed)[0]]
        for a in np.random.default_rng(seed).uniform(-1, 1, (n, 6)).astype(np.float32):
            obs.append(env.step(a)[0])
    return np.array(obs)


def test_off_by_default():
    with gym.make("twin/Reach-v0") as env:
        env.reset(seed=0)
        assert env.unwrapped.randomization is None and env.unwrapped._draw is None


def test_randomised_episodes_replay_with_their_seed_and_differ_across_seeds():
    a = _episode("twin/Press-v0", 4, randomize=True)
    b = _episode("twin/Press-v0", 4, randomize=True)
    c = _episode("twin/Press-v0", 5, randomize=True)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[1:, :6], c[1:, :6])


def test_randomisation_changes_the_episode_and_a_zero_width_one_does_not():
    plain = _episode("twin/Reach-v0", 2)
    nominal = _episode("twin/Reach-v0", 2, randomize=NOMINAL)
    randomised = _episode("twin/Reach-v0", 2, randomize=True)
    np.testing.assert_array_equal(plain, nominal)
    assert np.abs(plain[1:, :6] - randomised[1:, :6]).max() > 1e-3  # rad


def test_draws_stay_in_their_ranges():
    r = DEFAULT_RANDOMIZATION
    rng = np.random.default_rng(0)
    for _ in range(200):
        d = draw(r, rng)
        assert np.all((d.link_mass_scale >= 0.8) & (d.link_mass_scale <= 1.2))
        assert np.all((d.joint_damping >= 0.0) & (d.joint_damping <= 0.3))
        assert np.all((d.joint_friction >= 0.0) & (d.joint_friction <= 0.2))
        assert 0.0 <= d.payload_mass <= 0.5 and np.all(np.abs(d.payload_com) <= 0.02)
        assert np.all(np.abs(d.ft_bias) <= [2.0] * 3 + [0.05] * 3)
        assert d.actuation_latency_periods in (0, 1, 2) and d.observation_delay_periods in (0, 1, 2)


def test_physics_draw_reaches_the_sim_robot():
    r = Randomization(payload_mass=(0.3, 0.3))
    with gym.make("twin/Reach-v0", randomize=r) as env:
        env.reset(seed=1)
        robot, d = env.unwrapped.robot, env.unwrapped._draw
        arm = "arm"
        masses = [robot.engine.link_inertial(arm, j).mass for j in robot._joints]
        nominal = [robot.model.link_inertial(n).mass for n in robot.model.link_names[1:7]]
        np.testing.assert_allclose(masses, np.array(nominal) * d.link_mass_scale, rtol=1e-9)
        assert robot.payload is not None and robot.payload.mass == pytest.approx(0.3)
        robot.scale_link_masses(1.0)  # restores the URDF's masses
        restored = [robot.engine.link_inertial(arm, j).mass for j in robot._joints]
        np.testing.assert_allclose(restored, nominal, rtol=1e-12)


def test_observation_delay_shows_an_older_state():
    r = Randomization(**{**NOMINAL.__dict__, "observation_delay_periods": (2, 2)})
    with gym.make("twin/Reach-v0", randomize=r) as env:
        env.reset(seed=0)
        env.step(np.ones(6, dtype=np.float32))
        seen, now = env.unwrapped._state, env.unwrapped.robot.read()
    assert now.t_us - seen.t_us == 2 * 5000  # two 5 ms control periods old
    assert np.abs(now.q - seen.q).max() > 1e-4


def test_actuation_latency_delays_the_response():
    late = Randomization(**{**NOMINAL.__dict__, "actuation_latency_periods": (2, 2)})
    prompt = _episode("twin/Reach-v0", 0, n=1, randomize=NOMINAL)
    delayed = _episode("twin/Reach-v0", 0, n=1, randomize=late)
    np.testing.assert_array_equal(prompt[0], delayed[0])
    moved_prompt = np.abs(prompt[1, :6] - prompt[0, :6]).sum()
    moved_late = np.abs(delayed[1, :6] - delayed[0, :6]).sum()
    assert 0.0 < moved_late < moved_prompt  # the same target, 10 ms later: less way covered


def test_sensor_bias_and_noise_are_added_to_the_readings():
    state = RobotState(
        t_us=0,
        q=np.zeros(6),
        qd=np.zeros(6),
        tau=np.zeros(6),
        wrench=WrenchSample(t_us=0, wrench=np.arange(6.0)),
        imu=ImuSample(0, np.array([0.0, 0.0, 9.81]), np.zeros(3)),
    )
    d = draw(
        Randomization(ft_noise_std=(0.0, 0.0), imu_accel_noise_std=0.0, imu_gyro_noise_std=0.0),
        np.random.default_rng(3),
    )
    out = perturb(state, d, np.random.default_rng(0))
    np.testing.assert_allclose(out.wrench.wrench, np.arange(6.0) + d.ft_bias)
    np.testing.assert_allclose(out.imu.specific_force, [0, 0, 9.81] + d.imu_bias[:3])
    np.testing.assert_allclose(out.imu.angular_rate, d.imu_bias[3:])
    noisy = perturb(
        state, draw(DEFAULT_RANDOMIZATION, np.random.default_rng(3)), np.random.default_rng(1)
    )
    assert not np.allclose(noisy.wrench.wrench - np.arange(6.0), d.ft_bias)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(link_mass_scale=(0.0, 1.0)), "link_mass_scale must stay > 0"),
        (dict(joint_damping=(0.5, 0.1)), "joint_damping must be"),
        (dict(observation_delay_periods=(0, 1.5)), "observation_delay_periods must be whole"),
    ],
)
def test_bad_ranges_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        Randomization(**bad)


def test_randomize_argument_is_checked():
    with pytest.raises(ValueError, match="randomize must be True, False or a"):
        gym.make("twin/Reach-v0", randomize="yes")
