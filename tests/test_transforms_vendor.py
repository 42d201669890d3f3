"""Our transformers against the vendor's own library (PyPI ``bota-tf-utils``; optional: skipped
when it is not installed) on random configurations, the pose semantics included, and on a user's
JSON file read by both."""

from __future__ import annotations

import json

import numpy as np
import pytest

from twin.transforms import (
    ImuTf,
    Policy,
    PoseTf,
    ReturnCode,
    Rotation,
    TfConfig,
    Translation,
    TwistTf,
    WrenchTf,
)

vendor = pytest.importorskip("bota_tf_utils")
vendor_control = pytest.importorskip("bota_control")

ORIGINS = ("fixed_frame", "moving_frame")
VENDOR_CLASS = {WrenchTf: "BotaTfWrench", TwistTf: "BotaTfTwist", ImuTf: "BotaTfImu",
                PoseTf: "BotaTfPose"}  # fmt: skip
VENDOR_POLICY = {Policy.BEST_EFFORT: "BestEffort", Policy.SOFT_RT: "SoftRt",
                 Policy.HARD_RT: "HardRt", Policy.STRICT_RT: "StrictRt"}  # fmt: skip


def unit(rng) -> np.ndarray:
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def random_config(rng, pose: bool) -> TfConfig:
    def origin():
        return ORIGINS[rng.integers(2)]

    return TfConfig(
        input_ref_point=Translation(origin(), tuple(rng.uniform(-1, 1, 3))),
        input_expr_axes=Rotation("fixed_frame" if pose else origin(), tuple(unit(rng))),
        output_ref_point=Translation(origin(), tuple(rng.uniform(-1, 1, 3))),
        output_expr_axes=Rotation(origin(), tuple(unit(rng))),
    )


def vendor_tf(cls, config: TfConfig):
    cfg = vendor.BotaTfConfig()
    for attr in ("input_ref_point", "output_ref_point", "input_expr_axes", "output_expr_axes"):
        entry = getattr(config, attr)
        v = vendor.Translation() if attr.endswith("point") else vendor.Rotation()
        if attr.endswith("point"):
            v.translation = list(entry.translation)
        else:
            v.rotation = list(entry.rotation)
        v.origin = entry.origin
        setattr(cfg, attr, v)
    cfg.policy = getattr(
        vendor_control.BotaControlBlockPolicy, VENDOR_POLICY[Policy(config.policy)]
    )
    return getattr(vendor, VENDOR_CLASS[cls])(cfg)


def canonical(pose: np.ndarray) -> np.ndarray:
    sign = -1.0 if pose[3] < 0 else 1.0
    return np.concatenate((pose[:3], sign * pose[3:]))


@pytest.mark.parametrize("cls", [WrenchTf, TwistTf, ImuTf])
def test_six_vector_transformers_agree_with_the_vendor(cls):
    rng = np.random.default_rng(16)
    for _ in range(300):
        config = random_config(rng, pose=False)
        ours, theirs = cls(config), vendor_tf(cls, config)
        for _ in range(3):
            moving = np.r_[rng.uniform(-1, 1, 3), unit(rng)]
            x = rng.normal(scale=5.0, size=6)
            ours.set_fixed_to_moving_frame_tf(moving)
            theirs.set_fixed_to_moving_frame_tf(moving)
            out = np.empty(6)
            assert theirs.update(x, out) == vendor_control.BotaControlReturnCode.OK
            code, mine = ours.update(x)
            assert code is ReturnCode.OK
            np.testing.assert_allclose(mine, out, atol=1e-10, rtol=0)


def test_pose_agrees_with_the_vendor_for_every_kind_of_point_and_axes():
    rng = np.random.default_rng(17)
    kinds = set()
    for _ in range(1000):
        config = random_config(rng, pose=True)
        kinds.add((config.input_ref_point.origin, config.output_ref_point.origin,
                   config.output_expr_axes.origin))  # fmt: skip
        ours, theirs = PoseTf(config), vendor_tf(PoseTf, config)
        x = np.r_[rng.uniform(-1, 1, 3), unit(rng)]
        out = np.empty(7)
        assert theirs.update(x, out) == vendor_control.BotaControlReturnCode.OK
        code, mine = ours.update(x)
        assert code is ReturnCode.OK
        np.testing.assert_allclose(mine, canonical(out), atol=1e-10, rtol=0)
        np.testing.assert_allclose(ours.update_batch(x[None])[1][0], mine, atol=1e-12)
    assert len(kinds) == 8  # every combination of fixed and moving points and output axes


@pytest.mark.parametrize("policy", list(Policy))
def test_codes_for_entries_not_set_and_a_missing_transform_are_the_vendors(policy):
    config = TfConfig(policy=policy)
    ours, theirs = WrenchTf(config), vendor_tf(WrenchTf, config)
    x, out = np.ones(6), np.empty(6)
    assert ours.update(x)[0].name == theirs.update(x, out).name
    for tf in (ours, theirs):
        tf.set_input_reference_point("moving_frame", np.zeros(3))
        tf.set_input_expression_axes("moving_frame", np.array([1.0, 0.0, 0.0, 0.0]))
        tf.set_output_reference_point("fixed_frame", np.zeros(3))
        tf.set_output_expression_axes("fixed_frame", np.array([1.0, 0.0, 0.0, 0.0]))
    assert ours.update(x)[0].name == theirs.update(x, out).name


def test_a_users_json_file_gives_the_same_numbers_here_and_there(tmp_path):
    """Both libraries read the same file, 4-decimal quaternions included (ours normalises them,
    with a warning; the vendor uses them raw: the results agree to the rounding of the file)."""
    s = 0.7071
    doc = {
        "tf_pose_config": {
            "set_input_reference_point": {"origin": "fixed_frame", "translation": [0.1, 0, 0]},
            "set_input_expression_axes": {"origin": "fixed_frame", "rotation": [s, 0, 0, s]},
            "set_output_reference_point": {"origin": "moving_frame", "translation": [0, 0.2, 0]},
            "set_output_expression_axes": {"origin": "fixed_frame", "rotation": [1, 0, 0, 0]},
        },
        "tf_wrench_config": {
            "set_input_reference_point": {"origin": "moving_frame", "translation": [0, 0, 0.05]},
            "set_input_expression_axes": {"origin": "moving_frame", "rotation": [s, s, 0, 0]},
            "set_output_reference_point": {"origin": "fixed_frame", "translation": [0.1, 0, 0]},
            "set_output_expression_axes": {"origin": "fixed_frame", "rotation": [1, 0, 0, 0]},
        },
    }
    path = tmp_path / "user.json"
    path.write_text(json.dumps(doc))
    with pytest.warns(UserWarning, match="normalised"):
        pose, wrench = PoseTf(path), WrenchTf(path)
    x, out = np.array([1.0, 2.0, 3.0, 1.0, 0.0, 0.0, 0.0]), np.empty(7)
    vendor.BotaTfPose(str(path)).update(x, out)
    np.testing.assert_allclose(pose.update(x)[1], out, atol=1e-4)  # 2e-5 of metres
    theirs = vendor.BotaTfWrench(str(path))
    moving = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    wrench.set_fixed_to_moving_frame_tf(moving)
    theirs.set_fixed_to_moving_frame_tf(moving)
    w, out6 = np.array([1.0, 2.0, 3.0, 0.1, 0.2, 0.3]), np.empty(6)
    theirs.update(w, out6)
    np.testing.assert_allclose(wrench.update(w)[1], out6, atol=1e-3)
