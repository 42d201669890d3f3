"""Forward kinematics and Jacobians: against PyBullet, finite differences and invariants."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

import numpy as np
import pybullet as pb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from twin.kinematics import ArmModel, UrdfError
from twin.spatial import batch, quaternion

MODEL = ArmModel.default()
TOL = 1e-9  # m and rad


def _random_q(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(MODEL.lower, MODEL.upper, (n, 6))


def _in_limits_q():
    return arrays(np.float64, 6, elements=st.floats(0.0, 1.0)).map(
        lambda u: MODEL.lower + u * (MODEL.upper - MODEL.lower)
    )


#: PyBullet's link states are single precision (see the test below): its float32 rounding,
#: a few ulps (eps = 1.2e-7) of 1 m positions and unit quaternions, bounds the agreement.
PYBULLET_POS_TOL = 2e-7  # m
PYBULLET_ROT_TOL = 2e-6  # rad


@pytest.fixture(scope="module")
def pybullet_link_frames():
    """1000 random configurations (1000, 6) rad and PyBullet's URDF link frames of each:
    ``{link: (1000, 4, 4)}`` (world = base_link frame)."""
    configs = _random_q(np.random.default_rng(1), 1000)
    client = pb.connect(pb.DIRECT)
    try:
        body = pb.loadURDF(str(MODEL.urdf_path), useFixedBase=True, physicsClientId=client)
        n = pb.getNumJoints(body, physicsClientId=client)
        names = [pb.getJointInfo(body, i, physicsClientId=client)[12].decode() for i in range(n)]
        pos = np.empty((len(configs), n, 3))
        xyzw = np.empty((len(configs), n, 4))
        for k, q in enumerate(configs):
            for j in range(6):
                pb.resetJointState(body, j, q[j], physicsClientId=client)
            states = pb.getLinkStates(
                body, list(range(n)), computeForwardKinematics=True, physicsClientId=client
            )
            for i, s in enumerate(states):
                pos[k, i] = s[4]  # URDF link frame (not the centre-of-mass frame, index 0/1)
                xyzw[k, i] = s[5]
    finally:
        pb.disconnect(client)
    frames = {
        name: batch.matrices_from_pose7(
            np.concatenate((pos[:, i], xyzw[:, i, 3:], xyzw[:, i, :3]), axis=1)
        )
        for i, name in enumerate(names)
    }
    return configs, frames, (pos, xyzw)


def test_pybullet_link_states_are_single_precision(pybullet_link_frames):
    # Why PyBullet cannot be the 1e-9 reference: every number it returns is a float32.
    _, _, (pos, xyzw) = pybullet_link_frames
    np.testing.assert_array_equal(pos.astype(np.float32), pos)
    np.testing.assert_array_equal(xyzw.astype(np.float32), xyzw)


def test_fk_matches_pybullet_link_frames_on_1000_random_configurations(pybullet_link_frames):
    configs, theirs, _ = pybullet_link_frames
    ours = MODEL.fk_all(configs)
    assert set(theirs) == set(MODEL.link_names) - {"base_link"}
    for name, frames in theirs.items():
        dp, dr = batch.pose_errors(ours[name], frames)
        assert dp.max() < PYBULLET_POS_TOL, name
        assert dr.max() < PYBULLET_ROT_TOL, name
    np.testing.assert_array_equal(ours["base_link"], np.broadcast_to(np.eye(4), (1000, 4, 4)))


def _reference_fk(configs: np.ndarray) -> dict[str, np.ndarray]:
    """Textbook double-precision FK straight from the URDF XML, one 4x4 product per joint and
    configuration (independent of twin.kinematics): ``{link: base_T_link (N, 4, 4)}``."""
    joints = []
    for joint in ET.parse(MODEL.urdf_path).getroot().findall("joint"):  # parents come first
        origin = joint.find("origin")
        roll, pitch, yaw = (float(v) for v in origin.get("rpy").split())
        t = np.eye(4)
        t[:3, :3] = _rz(yaw) @ _ry(pitch) @ _rx(roll)
        t[:3, 3] = [float(v) for v in origin.get("xyz").split()]
        axis = index = None
        if joint.get("type") == "revolute":
            axis = np.array([float(v) for v in joint.find("axis").get("xyz").split()])
            index = int(joint.get("name")[-1]) - 1
        joints.append(
            (joint.find("parent").get("link"), joint.find("child").get("link"), t, axis, index)
        )
    out = {name: np.empty((len(configs), 4, 4)) for name in MODEL.link_names}
    for k, q in enumerate(configs):
        frames = {"base_link": np.eye(4)}
        for parent, child, t, axis, index in joints:
            if axis is not None:
                kx = np.array(
                    [[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]]
                )
                r = np.eye(4)
                r[:3, :3] = np.eye(3) + np.sin(q[index]) * kx + (1 - np.cos(q[index])) * (kx @ kx)
                t = t @ r
            frames[child] = frames[parent] @ t
        for name, frame in frames.items():
            out[name][k] = frame
    return out


def _rx(a: float) -> np.ndarray:
    return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])


def _ry(a: float) -> np.ndarray:
    return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])


def _rz(a: float) -> np.ndarray:
    return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])


def test_fk_matches_a_double_precision_reference_to_1e_9(pybullet_link_frames):
    # The same 1000 configurations; the reference is exact to rounding, and so is ours.
    configs, theirs, _ = pybullet_link_frames
    ours = MODEL.fk_all(configs)
    reference = _reference_fk(configs)
    for name in MODEL.link_names:
        dp, dr = batch.pose_errors(ours[name], reference[name])
        assert dp.max() < TOL, name
        assert dr.max() < TOL, name
    # PyBullet itself misses the exact answer by its float32 rounding.
    assert batch.pose_errors(theirs["tcp"], reference["tcp"])[0].max() > 1e-9


def test_single_batched_and_fk_all_agree():
    configs = _random_q(np.random.default_rng(2), 20)
    every = MODEL.fk_all(configs)
    for name in MODEL.link_names:
        batched = MODEL.fk(configs, name)
        assert batched.shape == (20, 4, 4)
        np.testing.assert_allclose(batched, every[name], atol=1e-15)
        np.testing.assert_allclose(MODEL.fk(configs[3], name), batched[3], atol=1e-15)
    assert MODEL.fk_all(configs[0])["tcp"].shape == (4, 4)


@settings(max_examples=50)
@given(_in_limits_q())
def test_fk_gives_rigid_transforms(q):
    for name, m in MODEL.fk_all(q).items():
        np.testing.assert_allclose(m[:3, :3].T @ m[:3, :3], np.eye(3), atol=1e-14, err_msg=name)
        assert np.linalg.det(m[:3, :3]) == pytest.approx(1.0, abs=1e-14)
        np.testing.assert_array_equal(m[3], [0.0, 0.0, 0.0, 1.0])


def test_fixed_frames_follow_the_urdf_offsets():
    q = _random_q(np.random.default_rng(3), 1)[0]
    f = MODEL.fk_all(q)
    np.testing.assert_allclose(
        np.linalg.inv(f["ft_sensor"]) @ f["tcp"][:, 3], [0.0, 0.0, 0.10, 1.0], atol=1e-14
    )
    imu_in_sensor = np.linalg.inv(f["ft_sensor"]) @ f["imu"]
    np.testing.assert_allclose(imu_in_sensor[:3, 3], [0.015, -0.01, -0.008], atol=1e-14)
    np.testing.assert_allclose(imu_in_sensor[:3, 0], [0.0, 1.0, 0.0], atol=1e-14)  # yaw 90 deg


def _finite_difference_jacobian(q: np.ndarray, link: str, h: float = 1e-6) -> np.ndarray:
    steps = np.eye(6) * h
    plus = MODEL.fk(q + steps, link)
    minus = MODEL.fk(q - steps, link)
    lin = (plus[:, :3, 3] - minus[:, :3, 3]) / (2 * h)
    rel = plus[:, :3, :3] @ np.swapaxes(minus[:, :3, :3], 1, 2)  # base-frame increments
    ang = quaternion.log(quaternion.from_matrix(rel)) / (2 * h)
    return np.concatenate((lin, ang), axis=1).T


@pytest.mark.parametrize("link", ["tcp", "imu", "link_3", "flange"])
def test_jacobian_matches_finite_differences(link):
    configs = _random_q(np.random.default_rng(4), 25)
    jacs = MODEL.jacobian(configs, link)
    assert jacs.shape == (25, 6, 6)
    for q, jac in zip(configs, jacs):
        np.testing.assert_allclose(jac, _finite_difference_jacobian(q, link), atol=1e-7)
        np.testing.assert_allclose(MODEL.jacobian(q, link), jac, atol=1e-15)
    if link == "link_3":  # joints beyond the link do not move it
        np.testing.assert_array_equal(jacs[:, :, 3:], 0.0)


def test_jacobian_predicts_the_twist_of_a_small_motion():
    rng = np.random.default_rng(5)
    q = _random_q(rng, 1)[0]
    dq = rng.normal(size=6) * 1e-7
    before, after = MODEL.fk(q), MODEL.fk(q + dq)
    twist = MODEL.jacobian(q) @ dq
    np.testing.assert_allclose(after[:3, 3] - before[:3, 3], twist[:3], atol=1e-12)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.zeros(5), r"shape \(6,\) or \(N, 6\)"),
        (np.zeros((2, 7)), r"shape \(6,\) or \(N, 6\)"),
        (np.array([0, 0, np.nan, 0, 0, 0]), "non-finite"),
        (np.array([[0, 0, 0, 0, np.inf, 0]]), "non-finite"),
        ("abc", "joint angles"),
    ],
)
def test_bad_configurations_raise_value_error(bad, match):
    with pytest.raises(ValueError, match=match):
        MODEL.fk(bad)
    with pytest.raises(ValueError, match=match):
        MODEL.jacobian(bad)


def test_unknown_link_and_bad_urdf_raise(tmp_path):
    with pytest.raises(ValueError, match="unknown link 'gripper'"):
        MODEL.fk(MODEL.home_q, "gripper")
    with pytest.raises(UrdfError, match="cannot read URDF"):
        ArmModel.from_urdf(tmp_path / "missing.urdf")
    broken = tmp_path / "broken.urdf"
    broken.write_text(
        MODEL.urdf_path.read_text().replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>')
    )
    with pytest.raises(UrdfError, match="zero vector"):
        ArmModel.from_urdf(broken)
    mesh = tmp_path / "mesh.urdf"
    mesh.write_text(
        MODEL.urdf_path.read_text().replace(
            '<box size="0.05 0.05 0.26"/>', '<mesh filename="arm.stl"/>'
        )
    )
    with pytest.raises(UrdfError, match="mesh"):
        ArmModel.from_urdf(mesh)


def test_tree_path_runs_from_the_root_to_the_link_through_each_parent():
    tree = ArmModel.default().tree
    path = tree.path("tcp")
    assert tree.link_names[path[-1].link] == "tcp" and path[0].parent == 0  # 0: the root
    for parent, child in itertools.pairwise(path):
        assert child.parent == parent.link
    assert [e.q_index for e in path if e.q_index >= 0] == list(range(6))
    assert tree.path_joints("tcp") == tuple(range(6))
    assert tree.path(tree.link_names[0]) == ()
