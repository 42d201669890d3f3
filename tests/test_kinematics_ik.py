"""Inverse kinematics: closed form (every posture, singular cases, limits), numeric, inputs."""

from __future__ import annotations

import pathlib
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from twin.kinematics import POSTURES, ArmModel, NoClosedFormError, branch_index
from twin.spatial import SO3, batch

MODEL = ArmModel.default()
TOL = 1e-9  # m and rad


def _random_q(model: ArmModel, rng: np.random.Generator, n: int) -> np.ndarray:
    lo = np.maximum(model.lower, -np.pi)  # continuous joints: one turn
    hi = np.minimum(model.upper, np.pi)
    return rng.uniform(lo, hi, (n, 6))


def _branches(model: ArmModel, q: np.ndarray) -> np.ndarray:
    return np.array([branch_index(f) for f in model.posture(q)])


def _assert_fk_matches(model: ArmModel, q: np.ndarray, poses: np.ndarray, link: str = "tcp"):
    dp, dr = batch.pose_errors(model.fk(q, link), poses)
    assert dp.max() < TOL, dp.max()
    assert dr.max() < TOL, dr.max()


def _check_batch(model: ArmModel, configs: np.ndarray) -> None:
    """Every generating posture found, every solution exact and inside the limits, and the
    solution with the generator's posture and wraps is the generator itself."""
    poses = model.fk(configs)
    sols = model.ik_all_batch(poses)
    rows = np.arange(len(configs))
    own = _branches(model, configs)
    assert sols.valid[rows, own].all()
    valid = sols.valid.reshape(-1)
    flat = sols.q.reshape(-1, 6)[valid]
    owner = np.repeat(rows, sols.valid.sum(axis=1))
    assert np.isfinite(flat).all()
    assert np.isnan(sols.q.reshape(-1, 6)[~valid]).all()
    _assert_fk_matches(model, flat, poses[owner])
    assert model.within_limits(flat).all()
    # Each solution has the posture of its branch.
    branch_of = np.tile(np.arange(8), len(configs))[valid]
    np.testing.assert_array_equal(model.posture(flat), POSTURES[branch_of])
    # With the generator as reference: the generator, to rounding amplified by its conditioning.
    q, found = model.ik_batch(poses, configs)
    assert found.all()
    regular = np.abs(np.sin(configs[:, 4])) > 1e-3  # away from the wrist singularity
    np.testing.assert_allclose(q[regular], configs[regular], atol=1e-8)
    _assert_fk_matches(model, q, poses)


def test_ik_finds_every_posture_of_10000_random_poses_exactly():
    _check_batch(MODEL, _random_q(MODEL, np.random.default_rng(10), 10_000))


def test_single_pose_api_agrees_with_the_batch():
    configs = _random_q(MODEL, np.random.default_rng(11), 20)
    poses = MODEL.fk(configs)
    batch_sols = MODEL.ik_all_batch(poses)
    for k, (q, pose) in enumerate(zip(configs, poses)):
        sols = MODEL.ik_all(pose)
        assert len(sols) == batch_sols.valid[k].sum() and sols.reason == ""
        # the generated scalar code and the batch's numpy round apart by a few ulps (scalar_ik)
        np.testing.assert_allclose(
            sols.configurations, batch_sols.q[k][batch_sols.valid[k]], rtol=0.0, atol=1e-14
        )
        np.testing.assert_array_equal(sols.postures, POSTURES[batch_sols.valid[k]])
        assert MODEL.posture(q).tolist() in sols.postures.tolist()
        np.testing.assert_allclose(MODEL.ik(pose, q), q, atol=1e-8)


def _in_limits_q():
    return arrays(np.float64, 6, elements=st.floats(0.0, 1.0)).map(
        lambda u: MODEL.lower + u * (MODEL.upper - MODEL.lower)
    )


@settings(max_examples=100)
@given(_in_limits_q())
def test_property_ik_of_fk_contains_the_posture_and_reproduces_the_pose(q):
    pose = MODEL.fk(q)
    sols = MODEL.ik_all(pose, reference_q=q)
    assert MODEL.posture(q).tolist() in sols.postures.tolist()
    _assert_fk_matches(MODEL, sols.configurations, np.broadcast_to(pose, (len(sols), 4, 4)))
    solution = MODEL.ik(pose, q)
    assert solution is not None
    _assert_fk_matches(MODEL, solution, pose)


# -- singular cases, on purpose -------------------------------------------------------------
@pytest.mark.parametrize("q5", [0.0, 1e-13, -1e-10, 1e-6])
def test_wrist_singular_poses_give_finite_exact_answers(q5):
    configs = _random_q(MODEL, np.random.default_rng(12), 200)
    configs[:, 4] = q5
    poses = MODEL.fk(configs)
    q, found = MODEL.ik_batch(poses, configs)
    assert found.all() and np.isfinite(q).all()
    _assert_fk_matches(MODEL, q, poses)
    if q5 == 0.0:  # q4 is free: it comes from the reference, q6 takes the rest
        np.testing.assert_allclose(q, configs, atol=1e-9)
    sols = MODEL.ik_all_batch(poses)  # reference = home
    assert np.isfinite(sols.q[sols.valid]).all()
    _assert_fk_matches(MODEL, sols.q[sols.valid], np.repeat(poses, sols.valid.sum(1), axis=0))


def _wrist_centre_in_tcp() -> np.ndarray:
    tcp_T_link5 = np.linalg.inv(MODEL.fk(MODEL.home_q, "tcp")) @ MODEL.fk(MODEL.home_q, "link_5")
    return tcp_T_link5[:3, 3]  # the wrist centre is the origin of link_5


@pytest.mark.parametrize("rpy", [(0.3, 0.4, 0.5), (0.0, np.pi / 2, 0.0), (np.pi, 0.0, 0.0)])
def test_shoulder_singular_poses_take_q1_from_the_reference(rpy):
    rot = SO3.from_rpy(*rpy).matrix()
    pose = np.eye(4)
    pose[:3, :3] = rot
    pose[:3, 3] = np.array([0.0, 0.0, 0.5]) - rot @ _wrist_centre_in_tcp()  # wrist on axis 1
    for q1 in (0.7, -2.0):
        ref = np.array([q1, 0.0, 0.0, 0.0, 0.0, 0.0])
        sols = MODEL.ik_all(pose, reference_q=ref)
        assert len(sols) >= 2 and np.isfinite(sols.configurations).all()
        _assert_fk_matches(MODEL, sols.configurations, np.broadcast_to(pose, (len(sols), 4, 4)))
        q1s = np.angle(np.exp(1j * (sols.configurations[:, 0] - q1)))
        assert np.all(np.isclose(q1s, 0.0, atol=1e-12) | np.isclose(np.abs(q1s), np.pi))


def test_stretched_elbow_poses_give_finite_answers_and_a_step_further_is_out_of_reach():
    stretched = MODEL.closed_form.q3_stretched
    configs = _random_q(MODEL, np.random.default_rng(13), 200)
    configs[:, 2] = stretched
    poses = MODEL.fk(configs)
    sols = MODEL.ik_all_batch(poses, configs)
    rows = np.arange(len(configs))
    own = _branches(MODEL, configs)
    assert sols.valid[rows, own].all()
    _assert_fk_matches(MODEL, sols.q[rows, own], poses)
    np.testing.assert_allclose(sols.q[rows, own, 2], stretched, atol=1e-6)  # sqrt conditioning
    # One metre-scale step outwards along the arm: no solution, and the reason says so.
    shoulder = MODEL.fk(configs[0], "link_2")[:3, 3]
    wrist = MODEL.fk(configs[0], "link_5")[:3, 3]
    beyond = poses[0].copy()
    beyond[:3, 3] += 1e-6 * (wrist - shoulder) / np.linalg.norm(wrist - shoulder)
    sols = MODEL.ik_all(beyond)
    assert len(sols) == 0 and sols.reason == "pose out of reach of the arm"
    assert MODEL.ik(beyond, configs[0]) is None


def test_unreachable_pose_gives_none_and_a_reason():
    far = np.eye(4)
    far[:3, 3] = [1.5, 0.0, 0.2]
    sols = MODEL.ik_all(far)
    assert len(sols) == 0 and sols.configurations.shape == (0, 6)
    assert sols.reason == "pose out of reach of the arm"
    assert MODEL.ik(far, MODEL.home_q) is None
    assert MODEL.ik_numeric(far, MODEL.home_q, max_iterations=50) is None


def test_poses_reachable_only_outside_the_limits_are_refused_with_that_reason():
    configs = np.random.default_rng(14).uniform(-np.pi, np.pi, (2000, 6))
    poses = MODEL.fk(configs)
    sols = MODEL.ik_all_batch(poses)
    limited = np.flatnonzero(sols.reachable & ~sols.valid.any(axis=1))
    assert limited.size > 0
    single = MODEL.ik_all(poses[limited[0]])
    assert len(single) == 0 and single.reason == "every solution violates the joint limits"


def test_joint_6_wraps_to_the_turn_nearest_the_reference():
    q = MODEL.home_q.copy()
    q[5] = 3.0  # 172 deg: 3.0 - 2 pi = -188 deg is inside the +-270 deg limits too
    pose = MODEL.fk(q)
    ref = q.copy()
    ref[5] = -3.0
    np.testing.assert_allclose(MODEL.ik(pose, ref)[5], 3.0 - 2 * np.pi, atol=1e-9)
    ref[5] = 2.5
    np.testing.assert_allclose(MODEL.ik(pose, ref)[5], 3.0, atol=1e-9)
    sols = MODEL.ik_all(pose)  # reference home: q6 = 0 is nearer to 3.0
    own = sols.postures.tolist().index(MODEL.posture(q).tolist())
    np.testing.assert_allclose(sols.configurations[own], q, atol=1e-9)


@pytest.mark.parametrize("link", ["flange", "ft_sensor", "imu"])
def test_closed_form_solves_for_other_frames_beyond_joint_6(link):
    configs = _random_q(MODEL, np.random.default_rng(15), 50)
    poses = MODEL.fk(configs, link)
    q, found = MODEL.ik_batch(poses, configs, link=link)
    assert found.all()
    _assert_fk_matches(MODEL, q, poses, link)


# -- numeric IK ----------------------------------------------------------------------------
def test_numeric_ik_converges_on_reachable_poses():
    rng = np.random.default_rng(16)
    for _ in range(5):
        target = np.clip(MODEL.home_q + rng.normal(0.0, 0.3, 6), MODEL.lower, MODEL.upper)
        pose = MODEL.fk(target)
        q = MODEL.ik_numeric(pose, MODEL.home_q)
        assert q is not None
        _assert_fk_matches(MODEL, q, pose)
        assert MODEL.within_limits(q)


# -- other geometries ----------------------------------------------------------------------
def _variant(tmp_path: pathlib.Path, name: str, edits: dict[str, dict[str, str]]) -> ArmModel:
    """The shipped URDF with joint edits ``{joint: {"xyz"|"rpy"|"axis"|"type": value}}``."""
    tree = ET.parse(MODEL.urdf_path)
    for joint in tree.getroot().findall("joint"):
        for key, value in edits.get(joint.get("name"), {}).items():
            if key == "axis":
                joint.find("axis").set("xyz", value)
            elif key == "type":
                joint.set("type", value)
            else:
                joint.find("origin").set(key, value)
    path = tmp_path / f"{name}.urdf"
    tree.write(path)
    return ArmModel.from_urdf(path)


def test_closed_form_is_derived_generally_from_the_urdf(tmp_path):
    model = _variant(
        tmp_path,
        "general",
        {
            "joint_1": {"rpy": "0.3 -0.2 0.5"},  # tilted base: no axis along a base axis
            "joint_2": {"xyz": "0.03 0.04 0.1"},  # lateral shoulder offset
            "joint_3": {"axis": "0 -1 0"},  # elbow axis anti-parallel to the shoulder's
            "joint_5": {"axis": "0 0.6 0.8"},  # oblique (non-orthogonal) spherical wrist
            "joint_6": {"type": "continuous"},
        },
    )
    assert model.has_analytic_ik, model.analytic_ik_reason
    assert np.isinf(model.upper[5])
    _check_batch(model, _random_q(model, np.random.default_rng(17), 2000))


def test_a_non_spherical_wrist_has_only_numeric_ik(tmp_path):
    model = _variant(tmp_path, "offset_wrist", {"joint_6": {"xyz": "0.02 0 0.05"}})
    assert not model.has_analytic_ik and model.closed_form is None
    assert "not spherical" in model.analytic_ik_reason
    pose = model.fk(model.home_q + 0.2)
    with pytest.raises(NoClosedFormError, match="ik_numeric"):
        model.ik_all(pose)
    with pytest.raises(NoClosedFormError):
        model.posture(model.home_q)
    q = model.ik(pose, model.home_q)  # falls back to damped least squares from the reference
    assert q is not None
    _assert_fk_matches(model, q, pose)


# -- bad input -----------------------------------------------------------------------------
def _scaled_pose() -> np.ndarray:
    pose = MODEL.fk(MODEL.home_q)
    pose[:3, :3] *= 2.0
    return pose


def _mirrored_pose() -> np.ndarray:
    pose = MODEL.fk(MODEL.home_q)
    pose[:3, 0] *= -1.0
    return pose


@pytest.mark.parametrize(
    "pose, match",
    [
        (np.eye(3), r"shape \(4, 4\)"),
        (np.full((4, 4), np.nan), "non-finite"),
        (_scaled_pose(), "not a rigid transform"),
        (_mirrored_pose(), "not a rigid transform"),
        (np.stack([np.eye(4), np.eye(4)]), r"shape \(4, 4\)"),
    ],
)
def test_bad_poses_raise_value_error(pose, match):
    with pytest.raises(ValueError, match=match):
        MODEL.ik_all(pose)
    if np.shape(pose) != (2, 4, 4):
        with pytest.raises(ValueError):
            MODEL.ik(pose, MODEL.home_q)
        with pytest.raises(ValueError):
            MODEL.ik_numeric(pose, MODEL.home_q)


def test_bad_references_and_links_raise_value_error():
    pose = MODEL.fk(MODEL.home_q)
    with pytest.raises(ValueError, match="reference_q must have shape"):
        MODEL.ik(pose, np.zeros(5))
    with pytest.raises(ValueError, match="non-finite"):
        MODEL.ik(pose, np.array([0, 0, 0, np.nan, 0, 0]))
    with pytest.raises(ValueError, match="non-finite"):
        MODEL.ik_numeric(pose, np.full(6, np.inf))
    with pytest.raises(ValueError, match=r"poses must have shape \(N, 4, 4\)"):
        MODEL.ik_all_batch(pose)
    with pytest.raises(ValueError, match="beyond joint 6"):
        MODEL.ik_all(MODEL.fk(MODEL.home_q, "link_3"), link="link_3")
    with pytest.raises(ValueError, match="unknown link"):
        MODEL.ik_all(pose, link="gripper")
