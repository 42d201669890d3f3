"""Configuration semantics, setters, policies and return codes of the transformers."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest
from twin.assets.config import tf_example_path

import twin.transforms as tfm
from twin.transforms import (
    POLICY_TABLE,
    Condition,
    ImuTf,
    Policy,
    PoseTf,
    ReturnCode,
    Rotation,
    TfConfig,
    TfConfigError,
    TfConfigWarning,
    Translation,
    TwistTf,
    WrenchTf,
)

EXAMPLE = tf_example_path()
# The section exactly as printed in docs/formats/transformer-config.md.
SPEC_TEXT = """{
  "tf_wrench_config": {
    "name": "sensor_to_tcp",
    "policy": "best_effort",
    "set_input_reference_point":  {"origin": "moving_frame", "translation": [0.0, 0.0, 0.05]},
    "set_input_expression_axes":  {"origin": "moving_frame", "rotation": [1.0, 0.0, 0.0, 0.0]},
    "set_output_reference_point": {"origin": "fixed_frame",  "translation": [0.1, 0.0, 0.0]},
    "set_output_expression_axes": {"origin": "fixed_frame",  "rotation": [1.0, 0.0, 0.0, 0.0]}
  }
}"""
MOVING_ID = Rotation("moving_frame", (1.0, 0.0, 0.0, 0.0))
FIXED_ID = Rotation("fixed_frame", (1.0, 0.0, 0.0, 0.0))
ORIGIN_PT = Translation("moving_frame", (0.0, 0.0, 0.0))


def moving_config(policy="best_effort", **kw) -> TfConfig:
    return TfConfig(
        policy=policy,
        input_ref_point=ORIGIN_PT,
        input_expr_axes=MOVING_ID,
        output_ref_point=Translation("fixed_frame", (0.1, 0.0, 0.0)),
        output_expr_axes=FIXED_ID,
        **kw,
    )


def write(tmp_path, doc, name="cfg.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


# ------------------------------------- the worked examples of docs/formats/transformer-config.md
@pytest.mark.parametrize("source", ["asset", "spec"])
def test_spec_wrench_worked_example(tmp_path, source):
    path = EXAMPLE if source == "asset" else write(tmp_path, SPEC_TEXT)
    tf = WrenchTf(path)
    assert tf.name() == "sensor_to_tcp" and tf.policy is Policy.BEST_EFFORT
    tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    out = np.empty(6)
    code, got = tf.update([1.0, 2.0, 3.0, 0.0, 0.0, 0.0], out)
    assert code is ReturnCode.OK and got is out
    np.testing.assert_allclose(out, [1.0, 2.0, 3.0, -2.1, 1.35, -0.2], atol=1e-12, rtol=0)


def test_spec_imu_worked_example():
    tf = ImuTf(EXAMPLE)
    tf.set_fixed_to_moving_frame_tf([0.4, -0.2, 0.9, 0.5, 0.5, 0.5, 0.5])  # any moving pose
    code, out = tf.update([0.5, -1.0, 9.81, 0.0, 0.0, 2.0])
    assert code is ReturnCode.OK
    np.testing.assert_allclose(out, [0.5 - 4.0, -1.0, 9.81, 0.0, 0.0, 2.0], atol=1e-12, rtol=0)


def test_other_transformers_refuse_a_file_without_their_section():
    with pytest.raises(
        TfConfigError, match=r"tf_example\.json: section 'tf_pose_config' is missing"
    ):
        PoseTf(EXAMPLE)


# --------------------------------------------------------------------------- setters
def test_setter_on_a_file_entry_returns_false_warns_and_keeps_it():
    tf = WrenchTf(EXAMPLE)
    with pytest.warns(TfConfigWarning) as record:
        ok = tf.set_output_reference_point("moving_frame", [9.0, 9.0, 9.0])
    assert ok is False
    assert str(record[0].message) == (
        "WrenchTf: output_reference_point was loaded from JSON and cannot be overridden from code."
    )
    entry = tf.entry("output_ref_point")
    assert entry.origin == "fixed_frame" and tuple(entry.translation) == (0.1, 0.0, 0.0)


def test_setter_on_a_config_object_entry_returns_false():
    tf = TwistTf(moving_config())
    with pytest.warns(TfConfigWarning, match="loaded from TfConfig"):
        assert tf.set_input_expression_axes("fixed_frame", [0.0, 1.0, 0.0, 0.0]) is False
    assert tf.entry("input_expr_axes") == MOVING_ID


def test_unset_entries_take_setters_and_then_transform():
    tf = WrenchTf()
    assert tf.name() == ""
    code, out = tf.update([1.0, 2.0, 3.0, 0.0, 0.0, 0.0])
    assert code is ReturnCode.NonFatalError and not out.any()
    assert "set_input_reference_point" in tf.reason
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tf.set_input_reference_point("moving_frame", [0.0, 0.0, 0.05])
        assert tf.set_input_expression_axes("moving_frame", [1.0, 0.0, 0.0, 0.0])
        assert tf.set_output_reference_point("fixed_frame", [0.1, 0.0, 0.0])
        assert tf.set_output_expression_axes("fixed_frame", [1.0, 0.0, 0.0, 0.0])
        # not from config: may be set again
        assert tf.set_output_reference_point("fixed_frame", [0.1, 0.0, 0.0])
    tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    code, out = tf.update([1.0, 2.0, 3.0, 0.0, 0.0, 0.0])
    assert code is ReturnCode.OK
    np.testing.assert_allclose(out, [1.0, 2.0, 3.0, -2.1, 1.35, -0.2], atol=1e-12)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda tf: tf.set_input_reference_point("", [0, 0, 0]), "is empty"),
        (lambda tf: tf.set_input_reference_point("world", [0, 0, 0]), "unknown origin 'world'"),
        (lambda tf: tf.set_input_reference_point("fixed_frame", [0, 0]), "has length 2"),
        (lambda tf: tf.set_output_expression_axes("fixed_frame", [1, 0, 0, 0.1]), "norm"),
        (lambda tf: tf.set_output_expression_axes("fixed_frame", [1, 0, np.nan, 0]), "not finite"),
    ],
)
def test_setters_refuse_bad_values(call, match):
    with pytest.raises(TfConfigError, match=match):
        call(WrenchTf())


# --------------------------------------------------------------------------- policies and codes
@pytest.mark.parametrize(
    ("policy", "code"),
    [
        ("best_effort", ReturnCode.NonFatalError),
        ("soft_rt", ReturnCode.NonFatalError),
        ("hard_rt", ReturnCode.FatalError),
        ("strict_rt", ReturnCode.FatalError),
    ],
)
@pytest.mark.parametrize("cls", [WrenchTf, TwistTf, ImuTf])
def test_missing_moving_frame_transform(cls, policy, code):
    tf = cls(moving_config(policy))
    out = np.full(6, 7.0)
    got_code, got = tf.update([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], out)
    assert got_code is code and got is out and not out.any()
    assert "set_fixed_to_moving_frame_tf" in tf.reason


@pytest.mark.parametrize("policy", list(Policy))
def test_non_finite_input_is_reported_not_passed_through(policy):
    tf = WrenchTf(moving_config(policy.value))
    tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    for bad in (np.nan, np.inf, -np.inf):
        code, out = tf.update([1.0, bad, 3.0, 0.0, 0.0, 0.0])
        assert code is POLICY_TABLE[policy][Condition.NON_FINITE].code
        assert code >= ReturnCode.NonFatalError and not out.any()
    code, _ = tf.update([1.0, 2.0, 3.0, 0.0, 0.0, 0.0])
    assert code is ReturnCode.OK and tf.reason == ""
    tf.set_fixed_to_moving_frame_tf([0.0, np.nan, 1.0, 1.0, 0.0, 0.0, 0.0])
    assert tf.update([1.0, 2.0, 3.0, 0.0, 0.0, 0.0])[0] >= ReturnCode.NonFatalError
    tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])  # zero quaternion
    assert tf.update([1.0, 2.0, 3.0, 0.0, 0.0, 0.0])[0] >= ReturnCode.NonFatalError


@pytest.mark.parametrize("policy", list(Policy))
def test_non_unit_moving_quaternion_is_at_least_degraded(policy):
    q = np.array([0.9, 0.1, -0.3, 0.2])
    unit = np.concatenate(([0.2, 0.3, 0.4], q / np.linalg.norm(q)))
    ref = WrenchTf(moving_config())
    ref.set_fixed_to_moving_frame_tf(unit)
    _, expected = ref.update([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
    tf = WrenchTf(moving_config(policy.value))
    tf.set_fixed_to_moving_frame_tf(np.concatenate(([0.2, 0.3, 0.4], q * 1.01)))
    code, out = tf.update([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])
    if policy is Policy.STRICT_RT:
        assert code is ReturnCode.FatalError and not out.any()
    else:
        assert code is ReturnCode.Degraded and "norm" in tf.reason
        np.testing.assert_allclose(out, expected, atol=1e-12)
    # within 1e-6 of unit norm is fine
    tf.set_fixed_to_moving_frame_tf(np.concatenate(([0.2, 0.3, 0.4], unit[3:] * (1 + 5e-7))))
    assert tf.update([1.0, 2.0, 3.0, 0.1, 0.2, 0.3])[0] is ReturnCode.OK


def test_pose_input_quaternion_off_norm_and_nan():
    tf = PoseTf(
        TfConfig(
            input_ref_point=ORIGIN_PT,
            input_expr_axes=FIXED_ID,
            output_ref_point=Translation("moving_frame", (0.0, 0.0, 0.1)),
            output_expr_axes=FIXED_ID,
        )
    )
    code, out = tf.update([0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0])
    assert code is ReturnCode.Degraded
    np.testing.assert_allclose(out, [0.0, 0.0, 1.1, 1.0, 0.0, 0.0, 0.0], atol=1e-12)
    code, out = tf.update([0.0, np.nan, 1.0, 1.0, 0.0, 0.0, 0.0])
    assert code is ReturnCode.NonFatalError and not out.any()
    codes, outs = tf.update_batch(
        [[0, 0, 1, 1, 0, 0, 0], [0, 0, 1, 3, 0, 0, 0], [np.inf, 0, 0, 1, 0, 0, 0]]
    )
    assert codes.tolist() == [ReturnCode.OK, ReturnCode.Degraded, ReturnCode.NonFatalError]
    assert not outs[2].any()


STALE_EXPECT = {
    Policy.BEST_EFFORT: (ReturnCode.Stale, True),
    Policy.SOFT_RT: (ReturnCode.DeadlineMissed, True),
    Policy.HARD_RT: (ReturnCode.DeadlineMissed, False),
    Policy.STRICT_RT: (ReturnCode.FatalError, False),
}


@pytest.mark.parametrize("policy", list(Policy))
def test_stale_moving_frame_transform(policy):
    tf = ImuTf(moving_config(policy.value, max_tf_age_s=0.01))
    tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0], t_us=1_000_000)
    x = [0.0, 0.0, 9.81, 0.0, 0.0, 1.0]
    code, fresh = tf.update(x, t_us=1_010_000)
    assert code is ReturnCode.OK
    fresh = fresh.copy()
    code, out = tf.update(x, t_us=1_010_001)
    want_code, computed = STALE_EXPECT[policy]
    assert code is want_code and "old" in tf.reason
    np.testing.assert_array_equal(out, fresh if computed else np.zeros(6))
    tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0], t_us=1_010_001)
    assert tf.update(x, t_us=1_010_002)[0] is ReturnCode.OK


def test_max_tf_age_from_json(tmp_path):
    doc = json.loads(SPEC_TEXT)
    doc["tf_wrench_config"]["max_tf_age_s"] = 0.002
    tf = WrenchTf(write(tmp_path, doc))
    tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0], t_us=0)
    assert tf.update([1.0, 2.0, 3.0, 0.0, 0.0, 0.0], t_us=3000)[0] is ReturnCode.Stale


def test_batch_codes_per_row():
    tf = WrenchTf(moving_config())
    x = np.ones((4, 6))
    x[1, 2] = np.nan
    tfs = np.tile([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0], (4, 1))
    tfs[2, 3:] *= 1.5
    tfs[3, 3:] = 0.0
    codes, out = tf.update_batch(x, tfs)
    assert codes.tolist() == [
        ReturnCode.OK,
        ReturnCode.NonFatalError,
        ReturnCode.Degraded,
        ReturnCode.NonFatalError,
    ]
    assert out[0].any() and out[2].any() and not out[1].any() and not out[3].any()
    np.testing.assert_allclose(out[2], out[0], atol=1e-12)
    # no per-row transforms and none pushed: every row refused
    codes, out = WrenchTf(moving_config("hard_rt")).update_batch(x)
    assert np.all(codes == ReturnCode.FatalError) and not out.any()


def test_the_documented_table_is_the_policy_table():
    rows = {}
    names = {
        "none": None,
        "off norm": Condition.OFF_NORM,
        "stale": Condition.STALE,
        "non-finite": Condition.NON_FINITE,
        "tf missing": Condition.TF_MISSING,
        "not set": Condition.NOT_SET,
    }
    for line in tfm.__doc__.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] in names and len(cells) == 5:
            rows[names[cells[0]]] = cells[1:]
    assert set(rows) == set(names.values())
    for cond, cells in rows.items():
        for policy, cell in zip(Policy, cells):
            code_name, output = (c.strip() for c in cell.split(","))
            if cond is None:
                assert (code_name, output) == ("OK", "computed")
                continue
            outcome = POLICY_TABLE[policy][cond]
            assert code_name == outcome.code.name
            assert output.startswith("comp") == outcome.computed


# --------------------------------------------------------------------------- bad configurations
def entry_doc(**changes):
    doc = json.loads(SPEC_TEXT)
    doc["tf_wrench_config"].update(changes)
    return doc


@pytest.mark.parametrize(
    ("doc", "pattern"),
    [
        ('{"tf_wrench_config": {"name": "x",}}', r"cfg\.json: not valid JSON at line 1 column"),
        ("[1, 2]", r"cfg\.json: expected a JSON object"),
        (
            entry_doc(set_input_reference_point={"origin": "moving", "translation": [0, 0, 0]}),
            r"cfg\.json: section 'tf_wrench_config': field 'set_input_reference_point\.origin': "
            r"unknown origin 'moving'",
        ),
        (
            entry_doc(
                set_output_expression_axes={"origin": "fixed_frame", "rotation": [1, 0, 0, 0.05]}
            ),
            r"section 'tf_wrench_config': field 'set_output_expression_axes\.rotation': "
            r"quaternion .* has norm 1\.00124922; expected a unit quaternion .* within 0\.001 of 1",
        ),
        (
            entry_doc(set_output_reference_point={"origin": "fixed_frame", "translation": [0, 1]}),
            r"field 'set_output_reference_point\.translation': has length 2; expected a list of 3",
        ),
        (
            entry_doc(set_input_expression_axes={"origin": "fixed_frame", "rotation": [1, 0, 0]}),
            r"field 'set_input_expression_axes\.rotation': has length 3; expected a list of 4",
        ),
        (
            entry_doc(
                set_input_expression_axes={"origin": "fixed_frame", "translation": [0, 0, 0]}
            ),
            r"field 'set_input_expression_axes\.translation': unexpected key",
        ),
        (entry_doc(name=3), r"field 'name': got 3; expected a string"),
        ({"tf_twist_config": {}}, r"section 'tf_wrench_config' is missing"),
    ],
)
def test_bad_config_files_name_file_section_and_field(tmp_path, doc, pattern):
    with pytest.raises(TfConfigError, match=pattern):
        WrenchTf(write(tmp_path, doc))


def test_hand_written_quaternions_are_normalised_with_a_warning(tmp_path):
    """4-decimal quaternions (norm off 1e-5) load, normalised, with a warning naming the file,
    section and field; off by up to 1e-3 too; beyond that they are refused (case above)."""
    r = [0.7071, 0.0, 0.0, 0.7071]
    doc = entry_doc(
        set_input_expression_axes={"origin": "moving_frame", "rotation": r},
        set_output_expression_axes={"origin": "fixed_frame", "rotation": [1.0, 0.0, 0.0, 0.0447]},
    )
    path = write(tmp_path, doc)
    with pytest.warns(TfConfigWarning) as record:
        tf = WrenchTf(path)
    texts = [str(w.message) for w in record]
    assert any(
        re.search(
            r"cfg\.json: section 'tf_wrench_config': field 'set_input_expression_axes\.rotation': "
            r"quaternion \[0\.7071, 0\.0, 0\.0, 0\.7071\] has norm 0\.99999\d*; normalised",
            t,
        )
        for t in texts
    ), texts
    assert any("set_output_expression_axes.rotation" in t for t in texts)  # norm off 9.99e-4
    np.testing.assert_allclose(
        tf.entry("input_expr_axes").rotation, [np.sqrt(0.5), 0, 0, np.sqrt(0.5)], atol=1e-15
    )
    tf.set_fixed_to_moving_frame_tf([0, 0, 0, 1, 0, 0, 0])
    code, out = tf.update([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert code is ReturnCode.OK
    np.testing.assert_allclose(np.linalg.norm(out[:3]), 1.0, atol=1e-12)  # rigid: unit rotations
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        WrenchTf(write(tmp_path, json.loads(SPEC_TEXT), "unit.json"))  # unit: no warning
    with pytest.warns(TfConfigWarning, match=r"WrenchTf\.set_output_expression_axes.*normalised"):
        assert WrenchTf().set_output_expression_axes("fixed_frame", r)


def test_unreadable_file(tmp_path):
    with pytest.raises(TfConfigError, match=r"nope\.json: cannot read"):
        WrenchTf(tmp_path / "nope.json")


def test_unknown_policy_warns_and_falls_back(tmp_path):
    with pytest.warns(TfConfigWarning, match="unknown policy 'fast'"):
        tf = WrenchTf(write(tmp_path, entry_doc(policy="fast")))
    assert tf.policy is Policy.BEST_EFFORT


def test_pose_refuses_moving_input_axes(tmp_path):
    doc = {
        "tf_pose_config": {
            "set_input_expression_axes": {"origin": "moving_frame", "rotation": [1, 0, 0, 0]}
        }
    }
    with pytest.raises(TfConfigError, match=r"tf_pose_config.*set_input_expression_axes.*circular"):
        PoseTf(write(tmp_path, doc))
    with pytest.raises(TfConfigError, match="circular"):
        PoseTf().set_input_expression_axes("moving_frame", [1, 0, 0, 0])
    assert not hasattr(PoseTf(), "set_fixed_to_moving_frame_tf")


def test_wrong_signal_length_is_a_programming_error():
    tf = WrenchTf(moving_config())
    tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"expected 6 numbers \[fx, fy, fz, tx, ty, tz\]"):
        tf.update([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="expected 7 numbers"):
        tf.set_fixed_to_moving_frame_tf([0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match=r"\(N, 6\)"):
        tf.update_batch(np.zeros((3, 7)))
