"""OnnxContext and the built-in matchers: mirrors exploy's context_test.cpp (several matchers,
group matchers, update rate, created components) plus the stricter errors of our convention
(duplicate claims, strict vs lenient, missing/malformed metadata, all naming the tensor)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from control_fakes import REF_INPUTS, REF_METADATA, REF_OUTPUTS, reference_model

from twin.control import (
    ContextError,
    GroupMatcher,
    Match,
    Matcher,
    MetadataError,
    OnnxContext,
    OnnxRuntime,
    TensorShapeError,
    UnclaimedTensorWarning,
)
from twin.control import components as c
from twin.control.export import TensorSpec, export_mlp
from twin.control.matchers import (
    BodyMatcher,
    JointMatcher,
    default_group_matchers,
    default_matchers,
)

# Lenient creations below warn about the custom tensor; tests that check it use pytest.warns.
pytestmark = pytest.mark.filterwarnings("ignore::twin.control.UnclaimedTensorWarning")


def runtime_for(path) -> OnnxRuntime:
    rt = OnnxRuntime()
    rt.initialize(path)
    return rt


def default_context() -> OnnxContext:
    ctx = OnnxContext()
    for m in default_matchers():
        ctx.register_matcher(m)
    for m in default_group_matchers():
        ctx.register_group_matcher(m)
    return ctx


def edit_metadata(path, drop=(), **values):
    model = onnx.load(str(path))
    keep = [
        (p.key, p.value) for p in model.metadata_props if p.key not in drop and p.key not in values
    ]
    del model.metadata_props[:]
    for key, value in [*keep, *values.items()]:
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def ref_path(tmp_path_factory):
    return reference_model(tmp_path_factory.mktemp("ctx") / "ref.onnx")


@pytest.fixture
def ref_rt(ref_path):
    rt = runtime_for(ref_path)
    yield rt
    rt.close()


class SubstringMatcher(Matcher):
    """Claims tensors containing ``pattern`` and creates nothing (as in the reference test)."""

    def __init__(self, pattern: str) -> None:
        super().__init__(f"Substring[{pattern}]")
        self.pattern = pattern

    def matches(self, match: Match) -> bool:
        if self.pattern in match.name:
            self.found[match.name] = (match, None)
            return True
        return False


class CountingGroupMatcher(GroupMatcher):
    """Claims everything (or nothing) and counts create calls."""

    def __init__(self, claim: bool) -> None:
        super().__init__()
        self.claim = claim
        self.created = {"inputs": 0, "outputs": 0}

    def matches(self, match: Match) -> bool:
        return self.claim

    def create_inputs(self):
        self.created["inputs"] += 1
        return []

    def create_outputs(self):
        self.created["outputs"] += 1
        return []


def test_several_matchers_lenient_and_update_rate(ref_rt):
    ctx = OnnxContext()
    for pattern in ("joint", "base", "sensor"):
        ctx.register_matcher(SubstringMatcher(pattern))
    with pytest.warns(UnclaimedTensorWarning):
        ctx.create_context(ref_rt, strict=False)
    assert ctx.update_rate == 10.0
    assert ctx.exploy_version == (0, 1)
    assert "cmd.se3_pose.pose" in ctx.unclaimed and "obj.robot1.joints.pos" not in ctx.unclaimed


def test_group_matchers_claiming_everything_satisfy_strict_mode(ref_rt):
    ctx = OnnxContext()
    yes, no = CountingGroupMatcher(True), CountingGroupMatcher(False)
    ctx.register_group_matcher(yes)
    ctx.register_group_matcher(no)
    ctx.create_context(ref_rt)
    assert yes.created == {"inputs": 1, "outputs": 1} and no.created == {"inputs": 1, "outputs": 1}


def test_registration_checks_the_kind_of_matcher():
    ctx = OnnxContext()
    with pytest.raises(TypeError, match="GroupMatcher"):
        ctx.register_group_matcher(SubstringMatcher("x"))
    with pytest.raises(TypeError, match="Matcher"):
        ctx.register_matcher(object())


def test_no_matchers_or_no_model_is_an_error(ref_rt):
    with pytest.raises(ContextError, match="no matchers"):
        OnnxContext().create_context(ref_rt)
    with pytest.raises(ContextError, match="no model"):
        default_context().create_context(OnnxRuntime())


def test_default_matchers_create_one_component_per_tensor_or_group(ref_rt):
    ctx = default_context()
    ctx.register_matcher(SubstringMatcher("custom."))
    ctx.create_context(ref_rt)
    kinds = {}
    for comp in (*ctx.inputs, *ctx.outputs):
        kinds.setdefault(type(comp).__name__, []).append(comp.name)
    assert kinds["JointPositionInput"] == ["obj.robot1.joints.pos"]
    assert kinds["BasePositionInput"] == ["obj.robot1.base.pos_b_rt_w_in_w"]
    assert sorted(kinds["BodyOrientationInput"]) == ["obj.box1.box.w_Q_b", "obj.box2.box.w_Q_b"]
    assert kinds["ImuOrientationInput"] == ["sensor.imu.torso.w_Q_b"]
    assert sorted(kinds["HeightScanInput"]) == [
        f"sensor.ray_caster.{s}" for s in ("one", "trail", "two")
    ]
    assert kinds["SphericalImageInput"] == ["sensor.spherical_image.one"]
    assert kinds["JointTargetOutput"] == ["output.joint_targets.robot1"]
    assert kinds["Se2VelocityOutput"] == ["output.se2_velocity.base_vel"]
    assert kinds["MemoryOutput"] == ["hidden"] and kinds["StepCountInput"] == ["ctx.step_count"]
    claimed = {t for comp in (*ctx.inputs, *ctx.outputs) for t in comp.tensors}
    assert claimed == {s.name for s in (*REF_INPUTS, *REF_OUTPUTS)} - {"custom.extensible_data"}
    # metadata parsed into the components
    trail = next(i for i in ctx.inputs if i.name == "sensor.ray_caster.trail")
    assert trail.channels == ("b", "g", "height", "r") and trail.info.pattern.size_x == 1.6
    target = next(o for o in ctx.outputs if isinstance(o, c.JointTargetOutput))
    np.testing.assert_array_equal(target.metadata.stiffness, [1.0, 2.0])
    vel = next(i for i in ctx.inputs if i.name == "cmd.se2_velocity.vel_with_range")
    assert vel.info.ranges.lin_vel_y.lo == -0.75


def test_a_tensor_claimed_twice_is_an_error_naming_it_and_the_matchers(ref_rt):
    ctx = default_context()
    ctx.register_matcher(SubstringMatcher("custom."))
    ctx.register_matcher(SubstringMatcher("joints.pos"))
    with pytest.raises(
        ContextError, match=r"'obj\.robot1\.joints\.pos' is claimed by 2 matchers.*JointMatcher"
    ):
        ctx.create_context(ref_rt, strict=False)  # an error even in lenient mode
    assert ctx.inputs == [] and ctx.outputs == []


def test_strict_mode_fails_on_unclaimed_lenient_warns(ref_rt):
    ctx = default_context()
    with pytest.raises(ContextError, match=r"'custom\.extensible_data'.*strict"):
        ctx.create_context(ref_rt)
    with pytest.warns(UnclaimedTensorWarning, match=r"custom\.extensible_data"):
        ctx.create_context(ref_rt, strict=False)
    assert ctx.unclaimed == ("custom.extensible_data",) and len(ctx.inputs) > 20


def test_matchers_survive_and_are_reset_between_creations(ref_rt):
    ctx = default_context()
    ctx.register_matcher(SubstringMatcher("custom."))
    ctx.create_context(ref_rt)
    first = len(ctx.inputs)
    ctx.create_context(ref_rt)
    assert len(ctx.inputs) == first  # no component created twice


@pytest.mark.parametrize(
    ("drop", "values", "message"),
    [
        (("exploy_version",), {}, "no 'exploy_version'"),
        ((), {"exploy_version": "0.1.0"}, "JSON string"),  # unquoted: not a JSON string
        ((), {"exploy_version": '"latest"'}, "MAJOR.MINOR"),
        (("update_rate",), {}, "no 'update_rate'"),
        ((), {"update_rate": "fast"}, "positive rate"),
        ((), {"update_rate": "-50"}, "positive rate"),
        ((), {"base_names": '["robot1"]'}, "base_names"),
    ],
)
def test_model_level_metadata_errors(tmp_path, drop, values, message):
    path = edit_metadata(reference_model(tmp_path / "m.onnx"), drop=drop, **values)
    with pytest.raises(MetadataError, match=message):
        default_context().create_context(runtime_for(path), strict=False)


def _without(key):
    return {k: v for k, v in REF_METADATA.items() if k != key}


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (_without("obj.robot1.joints"), r"'obj\.robot1\.joints'.*joint_names"),
        (
            {**REF_METADATA, "obj.robot1.joints": {"names": ["j1", "j2", "j3"]}},
            r"'obj\.robot1\.joints'.*joint_names",
        ),
        (_without("output.joint_targets.robot1"), r"output\.joint_targets\.robot1"),
        (
            {
                **REF_METADATA,
                "output.joint_targets.robot1": {
                    "names": ["j1", "j2"],
                    "stiffness": [1.0],
                    "damping": [0.1, 0.2],
                },
            },
            r"'output\.joint_targets\.robot1'.*'stiffness': 2 finite gains",
        ),
        (
            {
                **REF_METADATA,
                "output.joint_targets.robot1": {
                    "type": "pd",
                    "names": ["j1"],
                    "stiffness": [1.0],
                    "damping": [1.0],
                },
            },
            "expected 'joint_targets'",
        ),
        (_without("cmd.joint_pos.arm"), r"cmd\.joint_pos\.arm"),
        (_without("output.se2_velocity.base_vel"), r"output\.se2_velocity\.base_vel.*target_frame"),
        (
            {**REF_METADATA, "cmd.float.value": {"range": [2.0, 1.0]}},
            r"cmd\.float\.value.*lo <= hi",
        ),
        (
            {**REF_METADATA, "cmd.se2_velocity.vel_with_range": {"ranges": {"lin_vel_x": [0, 1]}}},
            "ranges",
        ),
        (_without("sensor.pinhole_image.one"), r"sensor\.pinhole_image\.one"),
        (
            {**REF_METADATA, "sensor.ray_caster.one": {"pattern_type": "grid"}},
            r"'sensor\.ray_caster\.one' needs field 'resolution'",
        ),
        ({**REF_METADATA, "obj.robot1.joints": "{not json"}, "not valid JSON"),
    ],
)
def test_required_metadata_missing_or_malformed_is_an_error(tmp_path, metadata, message):
    path = reference_model(tmp_path / "m.onnx", metadata=metadata)
    with pytest.raises(MetadataError, match=message):
        default_context().create_context(runtime_for(path), strict=False)


def test_optional_command_metadata_may_be_absent(tmp_path):
    meta = _without("cmd.float.value")
    path = reference_model(
        tmp_path / "m.onnx",
        metadata={k: v for k, v in meta.items() if k != "cmd.se2_velocity.vel_with_range"},
    )
    ctx = default_context()
    with pytest.warns(UnclaimedTensorWarning):
        ctx.create_context(runtime_for(path), strict=False)
    value = next(i for i in ctx.inputs if i.name == "cmd.float.value")
    assert value.info.range is None


def test_an_incomplete_memory_pair_is_an_error(tmp_path):
    outputs = [s for s in REF_OUTPUTS if s.name != "memory.hidden.out"]
    path = reference_model(tmp_path / "m.onnx", outputs=outputs)
    with pytest.raises(
        ContextError,
        match=r"memory 'hidden' has tensor 'memory\.hidden\.in' but no 'memory\.hidden\.out'",
    ):
        default_context().create_context(runtime_for(path), strict=False)


def test_a_tensor_of_the_wrong_size_is_an_error_naming_it(tmp_path):
    inputs = [
        TensorSpec("obj.robot1.joints.pos", 2) if s.name == "obj.robot1.joints.pos" else s
        for s in REF_INPUTS
    ]
    path = reference_model(tmp_path / "m.onnx", inputs=inputs)
    with pytest.raises(
        TensorShapeError, match=r"'obj\.robot1\.joints\.pos' has 2 elements.*3 joints"
    ):
        default_context().create_context(runtime_for(path), strict=False)


def test_base_fields_are_bodies_when_no_base_names_are_given(tmp_path):
    path = reference_model(tmp_path / "m.onnx", base_names={})
    ctx = default_context()
    with pytest.warns(UnclaimedTensorWarning):
        ctx.create_context(runtime_for(path), strict=False)
    base = next(i for i in ctx.inputs if i.name == "obj.robot1.base.pos_b_rt_w_in_w")
    assert isinstance(base, c.BodyPositionInput) and base.info.body_name == "base"


def test_body_matcher_excludes_the_base_pair_only():
    matcher = BodyMatcher("w_Q_b", c.BodyOrientationInput)
    bases = {"robot1": "base"}
    assert not matcher.matches(Match("obj.robot1.base.w_Q_b", None, bases))
    assert matcher.matches(Match("obj.robot2.base.w_Q_b", None, bases))
    assert matcher.matches(Match("obj.robot1.hand.w_Q_b", None, bases))
    assert not matcher.matches(Match("obj.robot1.hand.w_Q_b.extra", None, bases))  # whole name only
    assert not JointMatcher().matches(Match("obj.robot-1.joints.pos"))  # <id> is [a-zA-Z0-9_]+


def test_informational_outputs_are_not_matched_and_plain_obs_models_get_a_hint(tmp_path):
    path = export_mlp(
        tmp_path / "plain.onnx",
        inputs=[("obs", 4)],
        outputs=[("actions", 2)],
        layers=[(np.zeros((4, 2)), np.zeros(2))],
        update_rate_hz=50,
    )
    with pytest.raises(
        ContextError, match=re.escape("'obs' looks like a plain obs->actions export")
    ):
        default_context().create_context(runtime_for(path))


def test_real_matchers_subset_on_the_reference_model(ref_rt):
    ctx = OnnxContext()
    ctx.register_group_matcher(JointMatcher())
    for m in default_matchers()[1:3]:  # base position and base orientation
        ctx.register_matcher(m)
    with pytest.warns(UnclaimedTensorWarning):
        ctx.create_context(ref_rt, strict=False)
    assert {type(i).__name__ for i in ctx.inputs} == {
        "JointPositionInput",
        "JointVelocityInput",
        "BasePositionInput",
        "BaseOrientationInput",
    }
    assert ctx.update_rate == 10
