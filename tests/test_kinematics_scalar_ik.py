"""Single-pose IK (the generated ``scalar_ik`` code) against the batched kernel: the same
solutions, postures, validity and reasons for random reachable poses, singular wrists,
shoulders and elbows on purpose, poses out of reach and poses reachable only outside the
limits; the fast pose check accepts what ``as_poses`` accepts; chunked batches equal one pass
and peak memory follows the output."""

from __future__ import annotations

import pathlib
import pickle
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from twin.kinematics import POSTURES, ArmModel, analytic_ik, branch_index, fk, scalar_ik
from twin.kinematics.validate import as_poses

MODEL = ArmModel.default()
#: Scalar and batched code run the same operations; observed equal to the last bit on the
#: shipped arm, within 1.1e-12 rad on a dense geometry (the batch's matrix product rounds
#: differently from a scalar sum).
EQUAL_TOL = 1e-11
#: Where the wrist centre sits in the TCP frame (the origin of link_5).
WRIST_IN_TCP = (np.linalg.inv(MODEL.fk(MODEL.home_q)) @ MODEL.fk(MODEL.home_q, "link_5"))[:3, 3]
CASES = ("regular", "wrist", "elbow", "shoulder", "far")


def _pose(q: np.ndarray, case: str) -> np.ndarray:
    """The TCP pose of ``q`` (6,) rad, made singular or out of reach on purpose."""
    q = q.copy()
    if case == "wrist":
        q[4] = 0.0  # axes 4 and 6 aligned
    elif case == "elbow":
        q[2] = MODEL.closed_form.q3_stretched
    pose = MODEL.fk(q)
    if case == "shoulder":  # the wrist centre onto axis 1 (the base z axis)
        pose[:2, 3] -= (pose[:3, :3] @ WRIST_IN_TCP + pose[:3, 3])[:2]
    elif case == "far":
        pose[:3, 3] *= 3.0
    return pose


def _assert_same(model: ArmModel, pose: np.ndarray, ref: np.ndarray, link: str = "tcp"):
    """``ik_all``, one-pose ``ik_all_batch`` and ``ik`` equal the batched kernel (N = 1)."""
    kernel = model.closed_form.solve(pose[None], ref[None], link)
    keep = kernel.valid[0]
    sols = model.ik_all(pose, reference_q=ref, link=link)
    np.testing.assert_array_equal(sols.postures, POSTURES[keep])
    assert sols.configurations.shape == (keep.sum(), 6)
    assert np.abs(sols.configurations - kernel.q[0][keep]).max(initial=0.0) <= EQUAL_TOL
    assert sols.reason == kernel.solutions(0).reason
    one = model.ik_all_batch(pose[None], ref, link)
    np.testing.assert_array_equal(one.valid, kernel.valid)
    np.testing.assert_array_equal(one.reachable, kernel.reachable)
    np.testing.assert_allclose(one.q, kernel.q, rtol=0.0, atol=EQUAL_TOL)  # NaN where invalid
    own = branch_index(model.posture(ref))
    q = model.ik(pose, ref, link)
    if keep[own]:
        assert np.abs(q - kernel.q[0, own]).max() <= EQUAL_TOL
    else:
        assert q is None
    return kernel


def _angles(lo: float = -np.pi, hi: float = np.pi):
    return arrays(np.float64, 6, elements=st.floats(lo, hi))


@settings(max_examples=400)
@given(_angles(), st.sampled_from(CASES), st.sampled_from(("home", "own", "random")), _angles())
def test_property_single_pose_equals_the_batched_kernel(q, case, ref_kind, random_ref):
    ref = {"home": MODEL.home_q, "own": q, "random": random_ref}[ref_kind]
    _assert_same(MODEL, _pose(q, case), np.array(ref))


def test_the_cases_cover_singular_unreachable_and_limit_refused_poses():
    """A fixed sweep over every case: the kernel meets each situation, the scalar code agrees."""
    rng = np.random.default_rng(21)
    seen = {"solved": 0, "out of reach": 0, "limits": 0, "free q1": 0, "free q4": 0}
    for case in CASES:
        for q in rng.uniform(-np.pi, np.pi, (150, 6)):  # angles beyond the limits included
            ref = rng.uniform(-np.pi, np.pi, 6)
            pose = _pose(q, case)
            kernel = _assert_same(MODEL, pose, ref)
            valid, reachable = kernel.valid[0].any(), kernel.reachable[0]
            seen["solved"] += bool(valid)
            seen["out of reach"] += not reachable
            seen["limits"] += bool(reachable and not valid)
            if case == "shoulder" and valid:
                q1 = kernel.q[0][kernel.valid[0], 0]  # free: from the reference (or a half turn)
                turns = np.angle(np.exp(1j * (q1 - ref[0])))
                seen["free q1"] += bool(np.all((np.abs(turns) < 1e-9) | (np.abs(turns) > 3.14)))
            if case == "wrist" and valid:
                seen["free q4"] += bool(
                    np.any(np.abs(kernel.q[0][kernel.valid[0], 3] - ref[3]) < 1e-9)
                )
    assert all(count >= 10 for count in seen.values()), seen


def test_exact_singularities_take_the_free_angles_from_the_reference():
    q = np.array([0.4, -0.3, 0.9, 1.1, 0.0, -0.7])  # q5 = 0: q4 free
    ref = np.array([0.4, -0.3, 0.9, -0.5, 0.2, 0.3])
    kernel = _assert_same(MODEL, MODEL.fk(q), ref)
    own = branch_index(MODEL.posture(ref))
    np.testing.assert_allclose(kernel.q[0, own, 3], -0.5, atol=1e-12)  # q4 = the reference's
    pose = _pose(q, "shoulder")
    for q1 in (0.7, -2.0):
        kernel = _assert_same(MODEL, pose, np.array([q1, 0.0, 0.0, 0.0, 0.0, 0.0]))
        assert kernel.valid[0].sum() >= 2


def test_stretched_elbow_and_a_step_beyond():
    q = np.array([0.2, 0.3, MODEL.closed_form.q3_stretched, 0.4, 0.5, 0.6])
    pose = MODEL.fk(q)
    assert _assert_same(MODEL, pose, q).valid[0].any()
    shoulder, wrist = MODEL.fk(q, "link_2")[:3, 3], MODEL.fk(q, "link_5")[:3, 3]
    pose[:3, 3] += 1e-6 * (wrist - shoulder) / np.linalg.norm(wrist - shoulder)
    kernel = _assert_same(MODEL, pose, q)
    assert not kernel.reachable[0]
    assert MODEL.ik_all(pose).reason == "pose out of reach of the arm"


def _oblique(tmp_path: pathlib.Path) -> ArmModel:
    """A general geometry: tilted base, lateral shoulder offset, anti-parallel elbow axis,
    oblique wrist (the general subproblem 2), continuous joint 6 (no limits)."""
    import xml.etree.ElementTree as ET

    tree = ET.parse(MODEL.urdf_path)
    edits = {
        "joint_1": ("origin", "rpy", "0.3 -0.2 0.5"),
        "joint_2": ("origin", "xyz", "0.03 0.04 0.1"),
        "joint_3": ("axis", "xyz", "0 -1 0"),
        "joint_5": ("axis", "xyz", "0 0.6 0.8"),
    }
    for joint in tree.getroot().findall("joint"):
        if joint.get("name") in edits:
            tag, key, value = edits[joint.get("name")]
            joint.find(tag).set(key, value)
        if joint.get("name") == "joint_6":
            joint.set("type", "continuous")
    path = tmp_path / "oblique.urdf"
    tree.write(path)
    return ArmModel.from_urdf(path)


def test_a_general_geometry_equals_its_batched_kernel(tmp_path):
    model = _oblique(tmp_path)
    assert model.has_analytic_ik and not model.closed_form.orthogonal_wrist
    rng = np.random.default_rng(22)
    reached = 0
    for q in rng.uniform(-np.pi, np.pi, (300, 6)):
        reached += bool(_assert_same(model, model.fk(q), rng.uniform(-4.0, 4.0, 6)).valid.any())
    assert reached > 100


@pytest.mark.parametrize("link", ["flange", "imu"])
def test_other_links_beyond_joint_6(link):
    rng = np.random.default_rng(23)
    for q in rng.uniform(MODEL.lower, MODEL.upper, (40, 6)):
        assert _assert_same(MODEL, MODEL.fk(q, link), q, link).valid.any()


def test_the_generated_code_is_kept_and_rebuilt_after_pickling():
    code = scalar_ik.for_link(MODEL.closed_form, "tcp")
    assert code is scalar_ik.for_link(MODEL.closed_form, "tcp")
    assert "def solve(p, ref):" in code.source and "_atan(" in code.source
    assert "np." not in code.source  # plain floats and math only
    clone = pickle.loads(pickle.dumps(MODEL))
    pose = MODEL.fk(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))
    np.testing.assert_array_equal(
        clone.ik_all(pose).configurations, MODEL.ik_all(pose).configurations
    )


@settings(max_examples=300)
@given(_angles(), st.integers(0, 15), st.floats(-3e-6, 3e-6))
def test_property_the_fast_pose_check_agrees_with_as_poses(q, entry, delta):
    """Perturbations around the orthonormality tolerance: accepted by both or refused by both."""
    pose = MODEL.fk(q)
    pose.flat[entry] += delta
    try:
        expected = as_poses(pose).ravel().tolist()
    except ValueError as e:
        with pytest.raises(ValueError, match="not a rigid transform"):
            scalar_ik.flat_pose(pose)
        assert "not a rigid transform" in str(e)
    else:
        assert scalar_ik.flat_pose(pose) == expected


def test_bad_single_poses_raise_clear_errors():
    with pytest.raises(ValueError, match=r"shape \(4, 4\), got \(2, 4, 4\); see ik_all_batch"):
        MODEL.ik_all(np.stack([np.eye(4)] * 2))
    with pytest.raises(ValueError, match="non-finite"):
        MODEL.ik_all(np.full((4, 4), np.inf))
    with pytest.raises(ValueError, match="homogeneous matrix"):
        MODEL.ik_all([[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError, match=r"reference_q must have shape \(6,\) for one pose"):
        MODEL.ik_all(np.eye(4), reference_q=np.zeros((2, 6)))
    np.testing.assert_array_equal(  # lists and (1, 6) references are fine
        MODEL.ik_all(np.eye(4).tolist(), reference_q=np.zeros((1, 6))).configurations,
        MODEL.ik_all(np.eye(4), reference_q=np.zeros(6)).configurations,
    )


# -- chunked batches ------------------------------------------------------------------------
def test_chunked_batches_equal_one_pass(monkeypatch):
    rng = np.random.default_rng(24)
    configs = rng.uniform(-np.pi, np.pi, (203, 6))
    poses = MODEL.fk(configs)
    refs = rng.uniform(-np.pi, np.pi, (203, 6))
    whole_ik = MODEL.ik_all_batch(poses, refs)
    whole_fk, whole_jac = MODEL.fk(configs, "imu"), MODEL.jacobian(configs)
    whole_frames = MODEL.fk_all(configs)
    monkeypatch.setattr(analytic_ik, "CHUNK", 16)
    monkeypatch.setattr(fk, "CHUNK", 16)
    chunked = MODEL.ik_all_batch(poses, refs)
    np.testing.assert_array_equal(chunked.valid, whole_ik.valid)
    np.testing.assert_array_equal(chunked.reachable, whole_ik.reachable)
    np.testing.assert_allclose(chunked.q, whole_ik.q, rtol=0.0, atol=1e-9)
    np.testing.assert_array_equal(MODEL.fk(configs, "imu"), whole_fk)
    np.testing.assert_array_equal(MODEL.jacobian(configs), whole_jac)
    for link, frames in MODEL.fk_all(configs).items():
        np.testing.assert_array_equal(frames, whole_frames[link])


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_of_large_batches_follows_the_output():
    n = 100_000  # about 12 chunks: the fixed per-chunk temporaries are a small part
    configs = np.random.default_rng(25).uniform(MODEL.lower, MODEL.upper, (n, 6))
    poses = MODEL.fk(configs)
    fk_output = n * 16 * 8
    ik_output = n * (8 * 6 * 8 + 8 + 1)  # q, valid, reachable
    assert _peak_bytes(lambda: MODEL.fk(configs)) < 3 * fk_output
    assert _peak_bytes(lambda: MODEL.ik_all_batch(poses)) < 3 * ik_output


@pytest.mark.parametrize("metres", [1e300, -1e308, 1e154, 1e-300])
def test_extreme_translations_give_answers_not_errors(metres):
    """Float overflow inside the generated code (inf, NaN) must end in a refusal, as in the
    batch, never in a Python exception (``math`` raises where numpy warns)."""
    pose = MODEL.fk(MODEL.home_q + 0.3)
    pose[:3, 3] = [metres, -metres, metres]
    with np.errstate(over="ignore", invalid="ignore"):
        _assert_same(MODEL, pose, MODEL.home_q)
