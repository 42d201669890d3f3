"""Single-configuration FK and Jacobian (the generated ``LinkChain`` code) against the batched
tree: equal to 1e-15 for every link, on the shipped arm and on a dense, tilted geometry with a
fixed joint inside the chain; fresh arrays; input checks; pickling."""

from __future__ import annotations

import pickle
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from twin.kinematics import ArmModel
from twin.kinematics.validate import as_configurations

MODEL = ArmModel.default()
#: Single and batched paths multiply the same constants in a different order: a few ulps.
EQUAL_TOL = 1e-15


def _configs(model: ArmModel, seed: int, n: int) -> np.ndarray:
    """``n`` in-limit configurations and ``n // 4`` far outside them (+-4 pi), (N, 6) rad."""
    rng = np.random.default_rng(seed)
    inside = rng.uniform(model.lower, model.upper, (n, 6))
    return np.concatenate((inside, rng.uniform(-4 * np.pi, 4 * np.pi, (n // 4, 6))))


def _assert_single_equals_batched(model: ArmModel, configs: np.ndarray) -> None:
    for link in model.link_names:
        poses, jacs = model.fk(configs, link), model.jacobian(configs, link)
        for q, pose, jac in zip(configs, poses, jacs):
            single_pose, single_jac = model.fk_jacobian(q, link)
            assert np.abs(model.fk(q, link) - pose).max() <= EQUAL_TOL, link
            assert np.abs(model.jacobian(q, link) - jac).max() <= EQUAL_TOL, link
            assert np.abs(single_pose - pose).max() <= EQUAL_TOL, link
            assert np.abs(single_jac - jac).max() <= EQUAL_TOL, link


def test_single_configuration_equals_the_batched_path_for_every_link():
    _assert_single_equals_batched(MODEL, _configs(MODEL, 11, 400))


def _dense_arm(tmp_path) -> ArmModel:
    """The shipped arm with tilted joint axes, rotated origins and a fixed joint between
    joint_2 and joint_3 (so no constant is 0 or 1 and fixed factors fold mid-chain)."""
    tree = ET.parse(MODEL.urdf_path)
    root = tree.getroot()
    joints = {j.get("name"): j for j in root.findall("joint")}
    tilts = {"joint_2": "0.36 0.48 0.8", "joint_4": "0.6 0 0.8", "joint_6": "-0.2 0.3 0.9"}
    for name, axis in tilts.items():
        joints[name].find("axis").set("xyz", axis)
    for name, rpy in {"joint_1": "0.1 -0.2 0.3", "joint_5": "0.4 0.1 -0.7"}.items():
        joints[name].find("origin").set("rpy", rpy)
    spacer = ET.SubElement(root, "link", name="spacer")
    inertial = ET.SubElement(spacer, "inertial")
    ET.SubElement(inertial, "mass", value="0.01")
    ET.SubElement(inertial, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(
        inertial, "inertia", ixx="1e-6", iyy="1e-6", izz="1e-6", ixy="0", ixz="0", iyz="0"
    )
    fixed = ET.SubElement(root, "joint", name="spacer_joint", type="fixed")
    ET.SubElement(fixed, "parent", link=joints["joint_3"].find("parent").get("link"))
    ET.SubElement(fixed, "child", link="spacer")
    ET.SubElement(fixed, "origin", xyz="0.01 -0.02 0.05", rpy="0.3 0.2 0.1")
    joints["joint_3"].find("parent").set("link", "spacer")
    path = tmp_path / "dense.urdf"
    tree.write(path)
    return ArmModel.from_urdf(path, home_q=np.zeros(6))


def test_a_dense_geometry_with_a_mid_chain_fixed_joint_also_matches(tmp_path):
    model = _dense_arm(tmp_path)
    assert "spacer" in model.link_names
    # Dense constants: far more generated operations than the axis-aligned shipped arm.
    assert model.chain("tcp").source.count("\n") > 1.5 * MODEL.chain("tcp").source.count("\n")
    _assert_single_equals_batched(model, _configs(model, 12, 120))


@settings(max_examples=200)
@given(arrays(np.float64, 6, elements=st.floats(-20.0, 20.0)), st.sampled_from(MODEL.link_names))
def test_single_equals_batched_for_any_angles(q, link):
    pose, jac = MODEL.fk_jacobian(q, link)
    assert np.abs(pose - MODEL.fk(q[None], link)[0]).max() <= EQUAL_TOL
    assert np.abs(jac - MODEL.jacobian(q[None], link)[0]).max() <= EQUAL_TOL
    np.testing.assert_array_equal(pose[3], [0.0, 0.0, 0.0, 1.0])


def test_links_before_the_first_joint_are_constant():
    q = _configs(MODEL, 13, 4)[0]
    np.testing.assert_array_equal(MODEL.fk(q, "base_link"), np.eye(4))
    np.testing.assert_array_equal(MODEL.jacobian(q, "base_link"), np.zeros((6, 6)))
    assert not MODEL.jacobian(q, "link_2")[:, 2:].any()  # joints beyond a link do not move it


def test_every_call_returns_new_arrays():
    q = MODEL.home_q
    first, first_jac = MODEL.fk_jacobian(q)
    expected = first.copy()
    first[:] = 0.0
    first_jac[:] = 0.0
    np.testing.assert_array_equal(MODEL.fk(q), expected)
    assert MODEL.jacobian(q).any()
    assert MODEL.fk(q, "base_link") is not MODEL.fk(q, "base_link")


def test_input_checks_of_the_single_path():
    with pytest.raises(ValueError, match="non-finite"):
        MODEL.fk_jacobian([0.0, np.nan, 0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="one configuration"):
        MODEL.fk_jacobian(np.zeros((2, 6)))
    with pytest.raises(ValueError, match="unknown link 'gripper'"):
        MODEL.fk_jacobian(MODEL.home_q, "gripper")
    with pytest.raises(ValueError, match="unknown link 'gripper'"):
        MODEL.chain("gripper")
    # Huge but finite angles are valid input (no overflow in the finiteness check).
    assert as_configurations(np.full(6, 1e200), 6).shape == (6,)
    assert as_configurations([[1e300] * 6], 6).shape == (1, 6)


def test_fk_accepts_lists_and_matches_arrays():
    q = _configs(MODEL, 14, 4)[1]
    np.testing.assert_array_equal(MODEL.fk(q.tolist()), MODEL.fk(q))
    single = q.astype(np.float32)
    np.testing.assert_array_equal(MODEL.fk(single), MODEL.fk(single.astype(float)))


def test_a_pickled_model_rebuilds_its_generated_code():
    q = _configs(MODEL, 15, 4)[2]
    expected = MODEL.fk_jacobian(q, "imu")
    clone = pickle.loads(pickle.dumps(MODEL))
    for got, want in zip(clone.fk_jacobian(q, "imu"), expected):
        np.testing.assert_array_equal(got, want)
