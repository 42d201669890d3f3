"""Write ONNX policies with the exploy naming and metadata convention.

``export_mlp`` builds the graph with ``onnx.helper`` from numpy weights, so it needs no training
framework: the named inputs are concatenated (int32/bool inputs cast to float) into ``obs``,
run through the MLP (activation between layers, linear last layer), and the result is split
into the named outputs in order. Constant outputs (e.g. zero velocity targets) and graph
defaults for inputs (overridable initializers) can be added. ``export_torch`` does the same for
a ``torch.nn.Module`` when PyTorch is installed (it is not a project dependency; its test runs
only where PyTorch is present).

    export_mlp("policy.onnx",
               inputs=[("obj.arm.joints.pos", 6), ("cmd.joint_pos.goal", 6)],
               outputs=[("output.joint_targets.arm.pos", 6)],
               layers=[(W, b)], activation=None, update_rate_hz=250,
               metadata={"obj.arm.joints": {"joint_names": names}, ...})
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "EXPLOY_VERSION",
    "TensorSpec",
    "export_mlp",
    "export_torch",
    "joint_targets_metadata",
    "model_metadata",
    "write_metadata",
]

#: The convention version this exporter writes (``exploy_version``).
EXPLOY_VERSION = "0.1.0"
OPSET = 17
IR_VERSION = 8  # readable by onnxruntime >= 1.10
_ONNX_TYPES = {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32, "bool": TensorProto.BOOL}
_ACTIVATIONS = {"elu": "Elu", "relu": "Relu", "tanh": "Tanh"}


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: name, element count (tensor shape ``[1, size]``), element type."""

    name: str
    size: int
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.dtype not in _ONNX_TYPES:
            raise ValueError(
                f"tensor {self.name!r}: dtype {self.dtype!r}; expected one of {tuple(_ONNX_TYPES)}"
            )
        if self.size < 1:
            raise ValueError(f"tensor {self.name!r}: size must be >= 1, got {self.size}")


def _spec(value: TensorSpec | tuple) -> TensorSpec:
    return value if isinstance(value, TensorSpec) else TensorSpec(*value)


def joint_targets_metadata(
    names: Sequence[str], stiffness: Sequence[float], damping: Sequence[float]
) -> dict:
    """The ``output.joint_targets.<term>`` metadata object."""
    return {
        "type": "joint_targets",
        "names": list(names),
        "stiffness": [float(x) for x in stiffness],
        "damping": [float(x) for x in damping],
    }


def model_metadata(
    update_rate_hz: float,
    metadata: Mapping[str, object] | None = None,
    base_names: Mapping[str, str] | None = None,
    exploy_version: str = EXPLOY_VERSION,
    model_source: str = "twin.control.export",
    date_exported: str | None = None,
) -> dict[str, str]:
    """The ``metadata_props`` strings: model-level keys plus ``metadata`` (non-strings JSON-encoded)."""
    if not (np.isfinite(update_rate_hz) and update_rate_hz > 0):
        raise ValueError(f"update_rate_hz must be a positive rate, got {update_rate_hz}")
    props = {
        "exploy_version": json.dumps(exploy_version),
        "update_rate": json.dumps(float(update_rate_hz)),
        "model_source": json.dumps(model_source),
    }
    if date_exported is not None:
        props["date_exported"] = json.dumps(date_exported)
    if base_names:
        props["base_names"] = json.dumps(dict(base_names))
    for key, value in (metadata or {}).items():
        props[key] = value if isinstance(value, str) else json.dumps(value)
    return props


def _set_metadata(model: onnx.ModelProto, props: Mapping[str, str]) -> None:
    existing = {p.key: p for p in model.metadata_props}
    for key, value in props.items():
        entry = existing.get(key) or model.metadata_props.add()
        entry.key, entry.value = key, value


def write_metadata(path: str | os.PathLike[str], props: Mapping[str, str]) -> None:
    """Add or replace ``metadata_props`` entries of the ONNX file at ``path``."""
    model = onnx.load(str(path))
    _set_metadata(model, props)
    onnx.save(model, str(path))


def export_mlp(
    path: str | os.PathLike[str],
    *,
    inputs: Sequence[TensorSpec | tuple],
    outputs: Sequence[TensorSpec | tuple],
    layers: Sequence[tuple[np.ndarray, np.ndarray]],
    update_rate_hz: float,
    activation: str | None = "elu",
    metadata: Mapping[str, object] | None = None,
    base_names: Mapping[str, str] | None = None,
    constant_outputs: Mapping[str, np.ndarray] | None = None,
    input_defaults: Mapping[str, np.ndarray] | None = None,
    actions_output: bool = False,
    exploy_version: str = EXPLOY_VERSION,
) -> pathlib.Path:
    """Write an MLP policy to ``path`` (see the module docstring); returns the path.

    layers: ``[(W (n_in, n_out), b (n_out,)), ...]``, float32 after conversion; the first
    ``n_in`` must equal the summed input sizes and the last ``n_out`` the summed output sizes.
    activation: ``"elu"``, ``"relu"``, ``"tanh"`` or ``None`` (all layers linear).
    constant_outputs: name -> (size,) values of extra float32 outputs that do not depend on
    the inputs. input_defaults: input name -> (size,) graph default (an overridable
    initializer, used by the runtime on the first evaluation after a reset).
    actions_output: also output the MLP result as ``actions`` (informational).
    """
    ins = [_spec(s) for s in inputs]
    outs = [_spec(s) for s in outputs]
    if activation is not None and activation not in _ACTIVATIONS:
        raise ValueError(
            f"activation {activation!r}; expected one of {tuple(_ACTIVATIONS)} or None"
        )
    if not layers:
        raise ValueError("an MLP needs at least one layer (W, b)")
    n_in, n_out = sum(s.size for s in ins), sum(s.size for s in outs)
    weights = [
        (np.asarray(w, np.float32), np.asarray(b, np.float32).reshape(-1)) for w, b in layers
    ]
    for k, (w, b) in enumerate(weights):
        expected_in = n_in if k == 0 else weights[k - 1][0].shape[1]
        if w.ndim != 2 or w.shape[0] != expected_in or b.shape != (w.shape[1],):
            raise ValueError(
                f"layer {k}: W {w.shape} / b {b.shape} do not fit {expected_in} inputs"
            )
    if weights[-1][0].shape[1] != n_out:
        raise ValueError(
            f"the last layer has {weights[-1][0].shape[1]} outputs; the outputs need {n_out}"
        )

    nodes, inits = [], []
    obs_parts = []
    for s in ins:
        if s.dtype == "float32":
            obs_parts.append(s.name)
        else:
            nodes.append(
                helper.make_node("Cast", [s.name], [f"{s.name}/float"], to=TensorProto.FLOAT)
            )
            obs_parts.append(f"{s.name}/float")
    nodes.append(helper.make_node("Concat", obs_parts, ["obs/concat"], axis=1))
    x = "obs/concat"
    for k, (w, b) in enumerate(weights):
        inits += [numpy_helper.from_array(w, f"mlp/W{k}"), numpy_helper.from_array(b, f"mlp/b{k}")]
        nodes.append(helper.make_node("Gemm", [x, f"mlp/W{k}", f"mlp/b{k}"], [f"mlp/h{k}"]))
        x = f"mlp/h{k}"
        if activation is not None and k < len(weights) - 1:
            nodes.append(helper.make_node(_ACTIVATIONS[activation], [x], [f"mlp/a{k}"]))
            x = f"mlp/a{k}"
    inits.append(numpy_helper.from_array(np.array([s.size for s in outs], np.int64), "split/sizes"))
    nodes.append(helper.make_node("Split", [x, "split/sizes"], [s.name for s in outs], axis=1))
    graph_outputs = [
        helper.make_tensor_value_info(s.name, TensorProto.FLOAT, [1, s.size]) for s in outs
    ]
    if actions_output:
        nodes.append(helper.make_node("Identity", [x], ["actions"]))
        graph_outputs.append(
            helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, n_out])
        )
    for name, values in (constant_outputs or {}).items():
        arr = np.asarray(values, np.float32).reshape(1, -1)
        nodes.append(
            helper.make_node(
                "Constant", [], [name], value=numpy_helper.from_array(arr, f"{name}/value")
            )
        )
        graph_outputs.append(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, list(arr.shape))
        )
    for name, values in (input_defaults or {}).items():
        spec = next((s for s in ins if s.name == name), None)
        if spec is None:
            raise ValueError(f"input_defaults names {name!r}, which is not an input")
        dtype = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}[spec.dtype]
        inits.append(numpy_helper.from_array(np.asarray(values, dtype).reshape(1, spec.size), name))

    graph = helper.make_graph(
        nodes,
        "exploy_policy",
        [helper.make_tensor_value_info(s.name, _ONNX_TYPES[s.dtype], [1, s.size]) for s in ins],
        graph_outputs,
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="twin"
    )
    model.ir_version = IR_VERSION
    _set_metadata(model, model_metadata(update_rate_hz, metadata, base_names, exploy_version))
    onnx.checker.check_model(model)
    out_path = pathlib.Path(path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out_path))
    return out_path


def export_torch(
    module: object,
    path: str | os.PathLike[str],
    *,
    inputs: Sequence[TensorSpec | tuple],
    output_names: Sequence[str],
    update_rate_hz: float,
    metadata: Mapping[str, object] | None = None,
    base_names: Mapping[str, str] | None = None,
    exploy_version: str = EXPLOY_VERSION,
) -> pathlib.Path:
    """Export ``module`` (forward takes one ``(1, size)`` tensor per input, in order, and returns
    the outputs in ``output_names`` order) with the convention's metadata.

    Needs PyTorch >= 2.5 (not a project dependency; tested only where it is installed).
    Uses the torch.export-based exporter when onnxscript is installed, else the TorchScript one.
    """
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            "export_torch needs PyTorch, which is not installed; use export_mlp for numpy weights"
        ) from e
    ins = [_spec(s) for s in inputs]
    torch_types = {"float32": torch.float32, "int32": torch.int32, "bool": torch.bool}
    dummy = tuple(torch.zeros((1, s.size), dtype=torch_types[s.dtype]) for s in ins)
    out_path = pathlib.Path(path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    use_dynamo = importlib.util.find_spec("onnxscript") is not None
    with warnings.catch_warnings():  # the TorchScript exporter is deprecated, deliberately used
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module,
            dummy,
            str(out_path),
            input_names=[s.name for s in ins],
            output_names=list(output_names),
            opset_version=OPSET,
            dynamo=use_dynamo,  # without onnxscript: the TorchScript exporter
        )
    write_metadata(out_path, model_metadata(update_rate_hz, metadata, base_names, exploy_version))
    return out_path
