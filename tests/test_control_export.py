"""The exporter: numerics of the written MLP, the convention's metadata strings, input casts,
constant outputs, graph defaults, and argument checks."""

from __future__ import annotations

import json
import sys

import numpy as np
import onnx
import pytest

from twin.control import OnnxRuntime
from twin.control.export import (
    EXPLOY_VERSION,
    TensorSpec,
    export_mlp,
    export_torch,
    joint_targets_metadata,
    model_metadata,
)


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def test_mlp_numerics_match_a_numpy_forward_pass(tmp_path):
    rng = np.random.default_rng(7)
    layers = [
        (rng.normal(size=(5, 16)) * 0.5, rng.normal(size=16)),
        (rng.normal(size=(16, 4)) * 0.5, rng.normal(size=4)),
    ]
    path = export_mlp(
        tmp_path / "mlp.onnx",
        inputs=[("a", 2), ("b", 3)],
        outputs=[("x", 1), ("y", 3)],
        layers=layers,
        update_rate_hz=50,
        actions_output=True,
    )
    rt = OnnxRuntime()
    rt.initialize(path)
    obs = rng.normal(size=5).astype(np.float32)
    rt.input_buffer("a")[:] = obs[:2]
    rt.input_buffer("b")[:] = obs[2:]
    assert rt.evaluate()
    w0, b0 = (np.float32(v) for v in layers[0])
    w1, b1 = (np.float32(v) for v in layers[1])
    expected = _elu(obs @ w0 + b0) @ w1 + b1
    np.testing.assert_allclose(
        np.concatenate([rt.output_buffer("x"), rt.output_buffer("y")]),
        expected,
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(rt.output_buffer("actions"), expected, rtol=1e-5, atol=1e-6)


def test_metadata_follows_the_convention(tmp_path):
    joints = ["j1", "j2"]
    path = export_mlp(
        tmp_path / "m.onnx",
        inputs=[("obj.arm.joints.pos", 2)],
        outputs=[("output.joint_targets.arm.pos", 2)],
        layers=[(np.eye(2), np.zeros(2))],
        update_rate_hz=62.5,
        metadata={
            "obj.arm.joints": {"joint_names": joints},
            "output.joint_targets.arm": joint_targets_metadata(joints, [1, 2], [0.1, 0.2]),
            "note": "plain text",
        },
        base_names={"arm": "base_link"},
    )
    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert props["exploy_version"] == json.dumps(EXPLOY_VERSION) and props[
        "exploy_version"
    ].startswith('"')
    assert float(props["update_rate"]) == 62.5
    assert json.loads(props["base_names"]) == {"arm": "base_link"}
    assert json.loads(props["obj.arm.joints"]) == {"joint_names": joints}
    assert json.loads(props["output.joint_targets.arm"]) == {
        "type": "joint_targets",
        "names": joints,
        "stiffness": [1.0, 2.0],
        "damping": [0.1, 0.2],
    }
    assert props["note"] == "plain text"  # strings are written as given


def test_int_and_bool_inputs_are_cast_and_constant_outputs_and_defaults_are_written(tmp_path):
    path = export_mlp(
        tmp_path / "m.onnx",
        inputs=[
            TensorSpec("ctx.step_count", 1, "int32"),
            TensorSpec("cmd.boolean.go", 1, "bool"),
            TensorSpec("memory.h.in", 1),
        ],
        outputs=[("out", 1), ("memory.h.out", 1)],
        layers=[(np.array([[1.0, 0.0], [10.0, 0.0], [0.0, 1.0]]), np.zeros(2))],
        update_rate_hz=10,
        constant_outputs={"output.joint_targets.arm.vel": np.zeros(3)},
        input_defaults={"memory.h.in": [5.0]},
    )
    rt = OnnxRuntime()
    rt.initialize(path)
    assert rt.input_info("memory.h.in").has_default
    rt.input_buffer("ctx.step_count", np.int32)[0] = 3
    rt.input_buffer("cmd.boolean.go", np.bool_)[0] = True
    assert rt.evaluate()
    assert rt.output_buffer("out")[0] == 13.0
    assert rt.output_buffer("memory.h.out")[0] == 5.0  # the graph default on the first run
    assert rt.output_buffer("output.joint_targets.arm.vel").shape == (3,)
    assert rt.evaluate() and rt.output_buffer("memory.h.out")[0] == 0.0  # then the (zero) buffer


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layers": [(np.zeros((3, 2)), np.zeros(2))]}, "layer 0"),
        ({"layers": [(np.zeros((2, 3)), np.zeros(3))]}, "last layer has 3 outputs"),
        ({"layers": []}, "at least one layer"),
        ({"activation": "swish"}, "activation"),
        ({"update_rate_hz": 0}, "positive rate"),
        ({"input_defaults": {"nope": [1.0]}}, "not an input"),
    ],
)
def test_bad_arguments_are_refused(tmp_path, kwargs, message):
    args = {
        "inputs": [("a", 2)],
        "outputs": [("y", 2)],
        "layers": [(np.eye(2), np.zeros(2))],
        "update_rate_hz": 10,
        **kwargs,
    }
    with pytest.raises(ValueError, match=message):
        export_mlp(tmp_path / "bad.onnx", **args)
    with pytest.raises(ValueError, match="dtype"):
        TensorSpec("x", 1, "float64")


def test_model_metadata_has_the_required_keys():
    props = model_metadata(250.0)
    assert set(props) == {"exploy_version", "update_rate", "model_source"}
    assert "date_exported" in model_metadata(250.0, date_exported="2025-01-01")


def test_export_torch_without_pytorch_says_so(tmp_path, monkeypatch):
    """Where PyTorch is installed (the test extra has it) its absence is faked: ``None`` in
    ``sys.modules`` makes ``import torch`` raise ImportError, as on a machine without it."""
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="needs PyTorch"):
        export_torch(
            object(), tmp_path / "t.onnx", inputs=[("a", 1)], output_names=["y"], update_rate_hz=10
        )


def test_export_torch_matches_the_module(tmp_path):
    """Runs only where PyTorch is installed (it is not a dependency of the project)."""
    torch = pytest.importorskip("torch")

    class Policy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(3, 2)

        def forward(self, pos, step):
            y = self.layer(torch.cat([pos, step.float()], dim=1))
            return y[:, :1], y[:, 1:]

    torch.manual_seed(0)
    module = Policy()
    path = export_torch(
        module,
        tmp_path / "t.onnx",
        inputs=[("obj.a.joints.pos", 2), ("ctx.step_count", 1, "int32")],
        output_names=["x", "y"],
        update_rate_hz=10,
    )
    rt = OnnxRuntime()
    rt.initialize(path)
    assert rt.get_custom_metadata("exploy_version") == json.dumps(EXPLOY_VERSION)
    rt.input_buffer("obj.a.joints.pos")[:] = [1.0, 2.0]
    rt.input_buffer("ctx.step_count", np.int32)[0] = 3
    assert rt.evaluate()
    with torch.no_grad():
        x, y = module(torch.tensor([[1.0, 2.0]]), torch.tensor([[3]], dtype=torch.int32))
    np.testing.assert_allclose(
        [rt.output_buffer("x")[0], rt.output_buffer("y")[0]], [x.item(), y.item()], rtol=1e-6
    )
