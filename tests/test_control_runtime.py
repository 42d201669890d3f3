"""OnnxRuntime: mirrors exploy's onnx_runtime_test.cpp on a small model built here (bad file,
metadata, typed buffers and wrong-type access, reset, copy checks, initializer semantics)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from twin.control import (
    ExecutionProviderWarning,
    ModelLoadError,
    OnnxRuntime,
    OnnxRuntimeOptions,
    TensorNotFoundError,
    TensorShapeError,
    TensorTypeError,
)

INIT_DEFAULT = np.array([[0.25, 0.5, 0.75]], np.float32)


def _simple_model(path):
    """float_output = float_input * 2 + init_float_input (graph default INIT_DEFAULT);
    int_output = int_input + 1; int64_output = int64_input + 2; bool_output = not bool_input;
    pair_output (1, 2) = first two float inputs."""
    f, i32, i64, b = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL
    inits = [
        numpy_helper.from_array(INIT_DEFAULT, "init_float_input"),
        numpy_helper.from_array(np.full((1, 3), 2.0, np.float32), "two"),
        numpy_helper.from_array(np.ones((1, 3), np.int32), "one32"),
        numpy_helper.from_array(np.full((1, 3), 2, np.int64), "two64"),
        numpy_helper.from_array(np.array([0], np.int64), "start"),
        numpy_helper.from_array(np.array([2], np.int64), "stop"),
        numpy_helper.from_array(np.array([1], np.int64), "axis"),
    ]
    nodes = [
        helper.make_node("Mul", ["float_input", "two"], ["doubled"]),
        helper.make_node("Add", ["doubled", "init_float_input"], ["float_output"]),
        helper.make_node("Add", ["int_input", "one32"], ["int_output"]),
        helper.make_node("Add", ["int64_input", "two64"], ["int64_output"]),
        helper.make_node("Not", ["bool_input"], ["bool_output"]),
        helper.make_node("Slice", ["float_input", "start", "stop", "axis"], ["pair_output"]),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "simple",
        [
            vi("float_input", f, [1, 3]),
            vi("int_input", i32, [1, 3]),
            vi("int64_input", i64, [1, 3]),
            vi("bool_input", b, [1, 3]),
            vi("init_float_input", f, [1, 3]),
        ],
        [
            vi("float_output", f, [1, 3]),
            vi("int_output", i32, [1, 3]),
            vi("int64_output", i64, [1, 3]),
            vi("bool_output", b, [1, 3]),
            vi("pair_output", f, [1, 2]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for key, value in (("model_version", "1.0"), ("model_type", "simple_test")):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, json.dumps(value)
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def simple_path(tmp_path_factory):
    return _simple_model(tmp_path_factory.mktemp("rt") / "simple.onnx")


@pytest.fixture
def rt(simple_path):
    runtime = OnnxRuntime()
    runtime.initialize(simple_path)
    yield runtime
    runtime.close()


def test_initialize_with_missing_or_empty_path_fails_with_the_path(tmp_path):
    with pytest.raises(ModelLoadError, match=r"nonexistent\.onnx"):
        OnnxRuntime().initialize(tmp_path / "nonexistent.onnx")
    with pytest.raises(ModelLoadError, match="not found"):
        OnnxRuntime().initialize("")
    assert not OnnxRuntime().is_initialized


def test_initialize_with_a_file_that_is_not_onnx(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelLoadError, match="cannot load"):
        OnnxRuntime().initialize(bad)


def test_initialize_valid_file(rt):
    assert rt.is_initialized and rt.provider == "cpu" and rt.fallback_message is None


def test_profiling_writes_a_json_profile(simple_path, tmp_path):
    runtime = OnnxRuntime()
    runtime.initialize(
        simple_path, OnnxRuntimeOptions(profiling_path=tmp_path / "prof" / "run.json")
    )
    assert runtime.evaluate()
    profile = runtime.end_profiling()
    assert profile is not None and profile.is_file() and profile.parent == tmp_path / "prof"
    assert isinstance(json.loads(profile.read_text()), list)
    runtime.close()
    runtime.close()  # idempotent


def test_cuda_request_falls_back_to_cpu_with_a_clear_message(simple_path):
    runtime = OnnxRuntime()
    # This environment's onnxruntime has no CUDA provider (as the reference's CI has no GPU).
    with pytest.warns(ExecutionProviderWarning, match="CUDA execution provider requested"):
        runtime.initialize(simple_path, OnnxRuntimeOptions(provider="cuda"))
    assert runtime.provider == "cpu"
    assert "running on CPU" in runtime.fallback_message
    assert runtime.evaluate()


def test_unknown_provider_is_an_input_error(simple_path):
    with pytest.raises(ValueError, match="execution provider"):
        OnnxRuntime().initialize(simple_path, OnnxRuntimeOptions(provider="tpu"))


def test_custom_metadata(rt):
    assert rt.get_custom_metadata("model_version") == '"1.0"'
    assert rt.get_custom_metadata("model_type") == '"simple_test"'
    assert rt.get_custom_metadata("nonexistent_key") is None


def test_input_and_output_names_include_the_initializer_backed_input(rt):
    assert set(rt.input_names()) == {
        "float_input",
        "int_input",
        "int64_input",
        "bool_input",
        "init_float_input",
    }
    assert rt.input_info("init_float_input").has_default
    assert not rt.input_info("float_input").has_default
    assert set(rt.output_names()) == {
        "float_output",
        "int_output",
        "int64_output",
        "bool_output",
        "pair_output",
    }


def test_buffers_have_the_tensor_size_and_unknown_names_fail(rt):
    assert rt.input_buffer("float_input").shape == (3,)
    assert rt.output_buffer("float_output").shape == (3,)
    with pytest.raises(TensorNotFoundError, match="nonexistent"):
        rt.input_buffer("nonexistent")
    with pytest.raises(TensorNotFoundError, match="nonexistent"):
        rt.output_buffer("nonexistent")


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("float_input", np.int32),
        ("int_input", np.float32),
        ("bool_input", np.float32),
        ("int64_input", np.int32),
        ("int_input", np.int64),
    ],
)
def test_wrong_type_access_fails_naming_tensor_and_types(rt, name, wrong):
    with pytest.raises(TensorTypeError, match=name):
        rt.input_buffer(name, wrong)


def test_buffer_views_share_one_persistent_buffer(rt):
    a = rt.input_buffer("float_input")
    a[:2] = [1.234, 5.678]
    b = rt.input_buffer("float_input")
    np.testing.assert_array_equal(b[:2], np.float32([1.234, 5.678]))
    assert np.shares_memory(a, b)


def test_evaluate_every_tensor_type_in_place(rt):
    rt.input_buffer("float_input")[:] = [1.5, 2.5, 3.5]
    rt.input_buffer("int_input", np.int32)[:] = [10, 20, 30]
    rt.input_buffer("int64_input", np.int64)[:] = [100, 200, 300]
    rt.input_buffer("bool_input", np.bool_)[:] = [True, False, True]
    out = rt.output_buffer("float_output")  # a view taken before evaluation sees the results
    assert rt.evaluate()
    np.testing.assert_allclose(out, np.float32([3.0, 5.0, 7.0]) + INIT_DEFAULT[0])
    np.testing.assert_array_equal(rt.output_buffer("int_output", np.int32), [11, 21, 31])
    np.testing.assert_array_equal(rt.output_buffer("int64_output", np.int64), [102, 202, 302])
    np.testing.assert_array_equal(rt.output_buffer("bool_output", np.bool_), [False, True, False])


def test_reset_buffers_zeroes_every_type(rt):
    rt.input_buffer("float_input")[:] = 42.5
    rt.input_buffer("int_input", np.int32)[:] = 99
    rt.input_buffer("int64_input", np.int64)[:] = 12345
    rt.input_buffer("bool_input", np.bool_)[:] = True
    rt.output_buffer("float_output")[:] = 3.5
    rt.reset_buffers()
    for name, dtype in (
        ("float_input", np.float32),
        ("int_input", np.int32),
        ("int64_input", np.int64),
    ):
        assert not rt.input_buffer(name, dtype).any()
    assert not rt.input_buffer("bool_input", np.bool_).any()
    assert not rt.output_buffer("float_output").any()


@pytest.mark.parametrize(
    ("out", "inp", "dtype", "values"),
    [
        ("float_output", "float_input", np.float32, [1.5, 2.5, 3.5]),
        ("int_output", "int_input", np.int32, [10, 20, 30]),
        ("int64_output", "int64_input", np.int64, [100, 200, 300]),
        ("bool_output", "bool_input", np.bool_, [True, False, True]),
    ],
)
def test_copy_output_to_input(rt, out, inp, dtype, values):
    rt.input_buffer(inp, dtype)[:] = values
    assert rt.evaluate()
    expected = rt.output_buffer(out, dtype).copy()
    rt.input_buffer(inp, dtype)[:] = 0
    rt.copy_output_to_input(out, inp)
    np.testing.assert_array_equal(rt.input_buffer(inp, dtype), expected)
    assert not np.array_equal(expected, np.zeros(3, dtype))


def test_copy_checks_names_types_and_shapes(rt):
    with pytest.raises(TensorNotFoundError, match="nonexistent_input"):
        rt.copy_output_to_input("float_output", "nonexistent_input")
    with pytest.raises(TensorNotFoundError, match="nonexistent_output"):
        rt.copy_output_to_input("nonexistent_output", "float_input")
    for out, inp in (
        ("int_output", "float_input"),
        ("float_output", "int_input"),
        ("int_output", "int64_input"),
        ("int64_output", "int_input"),
        ("float_output", "bool_input"),
    ):
        with pytest.raises(TensorTypeError, match=f"{out}.*{inp}"):
            rt.copy_output_to_input(out, inp)
    with pytest.raises(TensorShapeError, match=r"pair_output.*\(1, 2\).*float_input.*\(1, 3\)"):
        rt.copy_output_to_input("pair_output", "float_input")


def test_first_run_after_reset_uses_the_graph_default_then_the_buffer(rt):
    rt.reset_buffers()
    rt.input_buffer("float_input")[:] = [1.5, 2.5, 3.5]
    init = rt.input_buffer("init_float_input")
    init[:] = 999.0  # ignored on the first run: the graph's default is used
    out = rt.output_buffer("float_output")
    assert rt.evaluate()
    np.testing.assert_allclose(out, [3.25, 5.5, 7.75])
    init[:] = [10.0, 20.0, 30.0]  # second run: the buffer overrides the default
    assert rt.evaluate()
    np.testing.assert_allclose(out, [13.0, 25.0, 37.0])
    init[:] = [-1.0, -2.0, -3.0]  # and keeps doing so
    assert rt.evaluate()
    np.testing.assert_allclose(out, [2.0, 3.0, 4.0])


def test_reset_rearms_the_graph_defaults(rt):
    rt.reset_buffers()
    rt.input_buffer("float_input")[:] = [1.5, 2.5, 3.5]
    assert rt.evaluate()
    rt.input_buffer("init_float_input")[:] = 10.0
    assert rt.evaluate()
    assert rt.output_buffer("float_output")[0] == pytest.approx(13.0)
    rt.reset_buffers()
    rt.input_buffer("float_input")[:] = [1.5, 2.5, 3.5]
    rt.input_buffer("init_float_input")[:] = 999.0
    assert rt.evaluate()
    np.testing.assert_allclose(rt.output_buffer("float_output"), [3.25, 5.5, 7.75])


def test_outputs_finite_sees_nan_and_inf_in_any_float_output(rt):
    assert rt.evaluate() and rt.outputs_finite()
    rt.input_buffer("float_input")[:] = [np.inf, 0.0, 0.0]
    assert rt.evaluate()
    assert not rt.outputs_finite()
    assert set(rt.non_finite_outputs()) == {"float_output", "pair_output"}
    rt.input_buffer("float_input")[:] = [0.0, np.nan, 0.0]
    assert rt.evaluate() and not rt.outputs_finite()


def test_evaluate_before_initialize_fails_with_a_reason():
    runtime = OnnxRuntime()
    assert not runtime.evaluate()
    assert "not initialized" in runtime.last_error


def test_an_unsupported_element_type_is_a_load_error_naming_the_tensor(tmp_path):
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x64"], ["y64"])],
        "double",
        [vi("x64", TensorProto.DOUBLE, [1, 2])],
        [vi("y64", TensorProto.DOUBLE, [1, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "double.onnx"))
    runtime = OnnxRuntime()
    with pytest.raises(ModelLoadError, match=r"'x64'.*tensor\(double\)"):
        runtime.initialize(tmp_path / "double.onnx")
    assert not runtime.is_initialized


# numpy warns about the overflow on this (fault) path
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_absurdly_large_outputs_count_as_non_finite(rt):
    rt.input_buffer("float_input")[:] = [1e20, 0.0, 0.0]  # finite in float32, square overflows
    assert rt.evaluate()
    assert not rt.outputs_finite()
    assert "float_output" in rt.non_finite_outputs()
    assert rt.output_limit > 1e18
    rt.input_buffer("float_input")[:] = [rt.output_limit / 4, 0.0, 0.0]
    assert rt.evaluate() and rt.outputs_finite() and rt.non_finite_outputs() == []


def test_both_run_paths_give_the_same_outputs(simple_path):
    """``evaluate`` calls onnxruntime's compiled entry point when the installed wrapper exposes
    it, else the public ``run_with_iobinding``: both fill the bound buffers alike."""
    import onnxruntime as ort

    from twin.control.runtime import _runner

    class PublicOnly:  # a wrapper without the compiled session attribute
        def __init__(self, session):
            self.session, self.calls = session, 0

        def run_with_iobinding(self, binding):
            self.calls += 1
            return self.session.run_with_iobinding(binding)

    session = ort.InferenceSession(str(simple_path), providers=["CPUExecutionProvider"])
    results = []
    for wrap in (lambda s: s, PublicOnly):
        x = np.array([[1.0, -2.0, 4.0]], np.float32)
        out = np.zeros((1, 3), np.float32)
        binding = session.io_binding()
        for name, value in (("float_input", x), ("init_float_input", np.ones((1, 3), np.float32))):
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value))
        for name in ("int_input", "int64_input", "bool_input"):
            dtype = {"int_input": np.int32, "int64_input": np.int64, "bool_input": np.bool_}[name]
            binding.bind_ortvalue_input(
                name, ort.OrtValue.ortvalue_from_numpy(np.zeros((1, 3), dtype))
            )
        binding.bind_ortvalue_output("float_output", ort.OrtValue.ortvalue_from_numpy(out))
        wrapped = wrap(session)
        _runner(wrapped, binding)()
        results.append(out.copy())
        if isinstance(wrapped, PublicOnly):
            assert wrapped.calls == 1
    np.testing.assert_array_equal(results[0], [[3.0, -3.0, 9.0]])
    np.testing.assert_array_equal(results[1], results[0])
