"""The exported policy graph: same features as the env, exploy metadata, runs in the controller."""

from __future__ import annotations

import itertools
import json

import gymnasium as gym
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twin.policies import export

import twin  # noqa: F401
from twin.control import CommandSource, OnnxRLController, RobotStateAdapter, WorkerMode
from twin.env import features
from twin.env.core import ACTION_SCALE_RAD
from twin.env.tasks import DEFAULT_GAINS
from twin.kinematics import ArmModel


def _random_layers(seed: int, n_obs: int = features.REACH_OBS_SIZE) -> list[export.Layer]:
    rng = np.random.default_rng(seed)
    sizes = [n_obs, 16, 16, 6]
    return [
        (rng.normal(0, 0.5, (o, i)).astype(np.float32), rng.normal(0, 0.1, o).astype(np.float32))
        for i, o in itertools.pairwise(sizes)
    ]


def _mlp_action(layers, obs: np.ndarray) -> np.ndarray:
    x = obs.astype(np.float64)
    for k, (w, b) in enumerate(layers):
        x = x @ w.T.astype(np.float64) + b
        if k < len(layers) - 1:
            x = np.maximum(x, 0.0)
    return np.tanh(x)


@pytest.fixture(scope="module")
def arm() -> ArmModel:
    return ArmModel.default()


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory, arm):
    path = tmp_path_factory.mktemp("policy") / "random.onnx"
    model = export.build_reach_model(_random_layers(0), arm.joint_names, arm.lower, arm.upper)
    onnx.save(model, path)
    return path


def _unit(v: list[float]) -> np.ndarray:
    v = np.asarray(v)
    return v / np.linalg.norm(v)


quats = st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(lambda v: np.linalg.norm(v) > 0.1)
vec3 = st.lists(st.floats(-1, 1), min_size=3, max_size=3)
vec6 = st.lists(st.floats(-3, 3), min_size=6, max_size=6)


@settings(max_examples=200, deadline=None)
@given(q=vec6, qd=vec6, p=vec3, quat=quats, pt=vec3, quat_t=quats)
def test_graph_features_equal_env_features(policy_file, q, qd, p, quat, pt, quat_t):
    session = _session(policy_file)
    tcp = np.concatenate((p, _unit(quat)))
    target = np.concatenate((pt, _unit(quat_t)))
    feed = {
        export.IN_Q: np.float32([q]),
        export.IN_QD: np.float32([qd]),
        export.IN_TCP_POS: np.float32([tcp[:3]]),
        export.IN_TCP_QUAT: np.float32([tcp[3:]]),
        export.IN_TARGET: np.float32([target]),
    }
    obs_graph = session.run(["obs"], feed)[0][0]
    obs_env = features.reach_observation(
        np.float32(q), np.float32(qd), np.float32(tcp), np.float32(target)
    )
    # A relative rotation of pi (w of q_tcp^-1 q_target = their dot product, about 0): its
    # rotation vector (the last 3 entries) is defined only up to its sign, and float32 rounding
    # (or a denormal flushed to zero) picks one. Either sign is the feature.
    at_pi = abs(float(np.dot(tcp[3:], target[3:]))) < 1e-3
    if at_pi and np.allclose(obs_graph[-3:], -obs_env[-3:], atol=2e-5):
        obs_env[-3:] *= -1.0
    np.testing.assert_allclose(obs_graph, obs_env, atol=2e-5)


@pytest.fixture(scope="module")
def model_policy_file(tmp_path_factory, arm):
    path = tmp_path_factory.mktemp("policy") / "random_ik.onnx"
    layers = _random_layers(1, features.REACH_MODEL_OBS_SIZE)
    model = export.build_reach_model(layers, arm.joint_names, arm.lower, arm.upper, model_arm=arm)
    onnx.save(model, path)
    return path


@settings(max_examples=100, deadline=None)
@given(
    q=st.lists(st.floats(-2.5, 2.5), min_size=6, max_size=6),
    offset=st.lists(st.floats(-0.3, 0.3), min_size=3, max_size=3),
    rotvec=st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3),
)
def test_graph_ik_step_equals_env_feature(model_policy_file, arm, q, offset, rotvec):
    """The model terms built in ONNX (FK, Jacobian, Newton-Schulz, gravity) match numpy's."""
    from twin.env.core import tcp_pose7
    from twin.spatial import quaternion

    q = np.asarray(q)
    tcp = tcp_pose7(arm, q)
    target = np.concatenate(
        (tcp[:3] + offset, quaternion.multiply(tcp[3:], quaternion.exp(np.asarray(rotvec))))
    )
    feed = {
        export.IN_Q: np.float32([q]),
        export.IN_QD: np.zeros((1, 6), np.float32),
        export.IN_TCP_POS: np.float32([tcp[:3]]),
        export.IN_TCP_QUAT: np.float32([tcp[3:]]),
        export.IN_TARGET: np.float32([target]),
    }
    obs_graph = _session(model_policy_file).run(["obs"], feed)[0][0]
    gravity = features.gravity_offset(arm, q, DEFAULT_GAINS.kp)
    terms = (arm.jacobian(q), gravity)
    obs_env = features.reach_observation(q, np.zeros(6), tcp, target, terms)
    assert obs_graph.shape == (features.REACH_MODEL_OBS_SIZE,)
    np.testing.assert_allclose(obs_graph, obs_env, atol=2e-4, rtol=1e-3)


def test_ik_step_undoes_a_small_joint_offset(arm):
    """To first order, the IK step from q to the pose of q + dq is dq."""
    from twin.env.core import tcp_pose7

    q = np.array([0.2, 0.4, 1.1, 0.3, 1.0, -0.2])
    dq = np.array([0.01, -0.008, 0.006, -0.01, 0.007, 0.005])
    tcp, target = tcp_pose7(arm, q), tcp_pose7(arm, q + dq)
    terms = (arm.jacobian(q), np.zeros(6))
    obs = features.reach_observation(q, np.zeros(6), tcp, target, terms)
    np.testing.assert_allclose(obs[-12:-6], dq, atol=1.5e-3)


def test_gravity_offset_holds_the_arm_as_the_sim_computes_it(arm):
    """kp * gravity_offset equals PyBullet's gravity torques (inverse dynamics at rest)."""
    from twin.sim import PyBulletRobot

    rng = np.random.default_rng(4)
    with PyBulletRobot() as robot:
        for q in rng.uniform(arm.lower, arm.upper, size=(5, 6)):
            tau_sim = robot.engine.inverse_dynamics("arm", q, np.zeros(6), np.zeros(6))
            tau = features.gravity_offset(arm, q, np.ones(6))
            # the 1 g IMU link off the TCP chain is left out: a few mN m
            np.testing.assert_allclose(tau, tau_sim, atol=0.01)


_SESSIONS: dict = {}


def _session(path) -> ort.InferenceSession:
    if path not in _SESSIONS:
        _SESSIONS[path] = ort.InferenceSession(str(path))
    return _SESSIONS[path]


def test_rotation_error_feature_is_sign_invariant_and_small_angle_exact():
    tcp = np.array([0.3, 0.0, 0.4, 1.0, 0.0, 0.0, 0.0])
    angle = 0.05
    target = np.concatenate(([0.3, 0.0, 0.4], [np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)]))
    flipped = np.concatenate((target[:3], -target[3:]))
    _, rot = features.pose_error_tcp(tcp[:3], tcp[3:], target[:3], target[3:])
    _, rot_flipped = features.pose_error_tcp(tcp[:3], tcp[3:], flipped[:3], flipped[3:])
    np.testing.assert_allclose(rot, rot_flipped)
    np.testing.assert_allclose(rot, [0.0, 0.0, 2 * np.sin(angle / 2)])


def test_metadata_follows_the_exploy_convention(policy_file, arm):
    meta = {p.key: p.value for p in onnx.load(policy_file).metadata_props}
    assert json.loads(meta["exploy_version"]) == "0.1.0"
    assert float(meta["update_rate"]) == 25.0
    assert json.loads(meta["base_names"]) == {"arm": "base_link"}
    assert json.loads(meta["obj.arm.joints"]) == {"joint_names": list(arm.joint_names)}
    targets = json.loads(meta["output.joint_targets.arm"])
    assert targets["type"] == "joint_targets"
    assert targets["names"] == list(arm.joint_names)
    np.testing.assert_allclose(targets["stiffness"], DEFAULT_GAINS.kp)
    np.testing.assert_allclose(targets["damping"], DEFAULT_GAINS.kd)
    names = {i.name for i in onnx.load(policy_file).graph.input}
    assert names == {
        export.IN_Q,
        export.IN_QD,
        export.IN_TCP_POS,
        export.IN_TCP_QUAT,
        "cmd.se3_pose.target",
    }


def test_controller_command_equals_env_action_path(model_policy_file):
    """Run by the ONNX controller, the policy writes exactly the env's q + scale * a target."""
    env = gym.make("twin/Reach-v0").unwrapped
    try:
        obs, _ = env.reset(seed=5)
        robot = env.robot
        written = []
        original_write = robot.write
        robot.write = lambda cmd: (written.append(cmd), original_write(cmd))[1]
        commands = CommandSource()
        commands.set_se3_pose("target", env.task.target_pose)
        controller = OnnxRLController(RobotStateAdapter(robot, articulation="arm"), commands)
        assert controller.create(model_policy_file), controller.error
        assert controller.init(enable_data_collection=False, mode=WorkerMode.SYNC), controller.error
        assert controller.update(robot.read().t_us), controller.fault
        action = _mlp_action(_random_layers(1, features.REACH_MODEL_OBS_SIZE), obs)
        expected = np.clip(
            robot.read().q + ACTION_SCALE_RAD * action, env.model.lower, env.model.upper
        )
        assert len(written) == 1
        np.testing.assert_allclose(written[0].q_des, expected, atol=1e-5)
        np.testing.assert_allclose(written[0].kp, DEFAULT_GAINS.kp)
        np.testing.assert_allclose(written[0].kd, DEFAULT_GAINS.kd)
    finally:
        env.close()


class _SpacesOnly(gym.Env):
    """An environment that only has spaces (SB3 needs one to build a model)."""

    def __init__(self, observation_space, action_space) -> None:
        self.observation_space, self.action_space = observation_space, action_space


def test_mlp_from_sb3_matches_the_actor():
    torch = pytest.importorskip("torch")
    sb3 = pytest.importorskip("stable_baselines3")
    spaces = gym.spaces
    n = features.REACH_OBS_SIZE
    env = _SpacesOnly(
        spaces.Box(-np.inf, np.inf, (n,), np.float32), spaces.Box(-1, 1, (6,), np.float32)
    )
    try:
        model = sb3.SAC("MlpPolicy", env, policy_kwargs={"net_arch": [8, 8]}, device="cpu", seed=0)
        obs = np.random.default_rng(0).normal(size=(4, features.REACH_OBS_SIZE)).astype(np.float32)
        expected, _ = model.predict(obs, deterministic=True)
        layers = export.mlp_from_sb3_sac(model)
        got = np.stack([_mlp_action(layers, o) for o in obs])
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert torch.is_tensor(model.actor.mu.weight)
    finally:
        env.close()
