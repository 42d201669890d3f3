"""``OnnxRuntime``: an onnxruntime session with typed, preallocated buffers bound by name.

Every input and output tensor gets one numpy buffer for the life of the session. Components
write inputs and read outputs in place through flat views (``input_buffer(name, dtype)``);
``evaluate()`` runs the session through an IO binding on those same buffers, so an update
allocates nothing. All float32 outputs live in one arena so that a single reduction tells
whether any output is non-finite (``outputs_finite()``).

Graph inputs that also have an initializer (overridable initializers) take the graph's value on
the first evaluation after ``reset_buffers()`` and the buffer's value afterwards.
"""

from __future__ import annotations

import logging
import math
import os
import pathlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import onnxruntime as ort

from twin.control.errors import (
    ExecutionProviderWarning,
    ModelLoadError,
    TensorNotFoundError,
    TensorShapeError,
    TensorTypeError,
)
from twin.control.metadata import read_model_metadata

__all__ = ["OnnxRuntime", "OnnxRuntimeOptions", "TensorInfo"]

logger = logging.getLogger(__name__)

#: ONNX element types the runtime buffers (the convention needs float32, int32 and bool).
ELEMENT_TYPES: dict[str, type[np.generic]] = {
    "tensor(float)": np.float32,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
    "tensor(int64)": np.int64,
}
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_ARENA_ALIGN = 16  # float32 elements (64 bytes) between output slices in the arena
_ORT_LOG_ERROR = 3  # onnxruntime severity: errors only (initializer-as-input notes are expected)


@dataclass(frozen=True)
class OnnxRuntimeOptions:
    """Session options.

    provider: ``"cpu"`` (default) or ``"cuda"`` (falls back to CPU, with a warning, when the
    installed onnxruntime has no CUDA provider). profiling_path: where onnxruntime writes its
    JSON profile (``end_profiling()`` returns the file), or ``None``. Threads default to one,
    which gives the lowest latency and bit-identical results for small policies.
    """

    provider: str = "cpu"
    profiling_path: str | os.PathLike[str] | None = None
    intra_op_num_threads: int = 1
    inter_op_num_threads: int = 1


@dataclass(frozen=True)
class TensorInfo:
    """A model tensor: name, numpy element type, shape (symbolic dimensions resolved to 1)."""

    name: str
    dtype: type[np.generic]
    shape: tuple[int, ...]
    has_default: bool = False  # an input with a graph initializer

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class OnnxRuntime:
    """An ONNX model with typed buffers; see the module docstring.

    >>> rt = OnnxRuntime(); rt.initialize("policy.onnx")          # doctest: +SKIP
    >>> rt.input_buffer("obj.arm.joints.pos", np.float32)[:] = q  # doctest: +SKIP
    >>> rt.evaluate()                                             # doctest: +SKIP
    """

    def __init__(self) -> None:
        self._session: ort.InferenceSession | None = None
        self.model_path: pathlib.Path | None = None
        self.provider = "cpu"
        #: Why CUDA was not used although it was asked for, or ``None``.
        self.fallback_message: str | None = None
        #: The onnxruntime error of the last failed ``evaluate()``, or ``None``.
        self.last_error: str | None = None
        self._profiling = False
        self._inputs: dict[str, TensorInfo] = {}
        self._outputs: dict[str, TensorInfo] = {}
        self._in_buffers: dict[str, np.ndarray] = {}
        self._out_buffers: dict[str, np.ndarray] = {}
        self._float_arena = np.zeros(0, dtype=np.float32)
        self._metadata: dict[str, str] = {}
        self._keepalive: list[object] = []
        #: Zero-argument calls that run the session on the two IO bindings (``_runner``).
        self._run_defaults: Callable[[], object] | None = None
        self._run_buffers: Callable[[], object] | None = None
        self._use_defaults = True

    # ------------------------------------------------------------------ setup
    def initialize(
        self, model_path: str | os.PathLike[str], options: OnnxRuntimeOptions | None = None
    ) -> None:
        """Load ``model_path`` and allocate one buffer per tensor (all zero).

        Raises ``ModelLoadError`` if the file does not exist, is not a valid ONNX model, or has a
        tensor whose element type is not float32, int32, int64 or bool.
        """
        options = options or OnnxRuntimeOptions()
        path = pathlib.Path(model_path)
        if not str(model_path) or not path.is_file():
            raise ModelLoadError(
                f"ONNX model file not found: {str(model_path)!r}; expected an existing .onnx file"
            )
        if options.provider not in PROVIDERS:
            raise ValueError(
                f"unknown execution provider {options.provider!r}; expected one of {tuple(PROVIDERS)}"
            )
        self.close()
        self.fallback_message = None
        session = self._create_session(path, options)
        inputs = {arg.name: _tensor_info(arg, False, path) for arg in session.get_inputs()}
        for arg in session.get_overridable_initializers():
            inputs[arg.name] = _tensor_info(arg, True, path)
        self._inputs = inputs
        self._outputs = {arg.name: _tensor_info(arg, False, path) for arg in session.get_outputs()}
        self._metadata = read_model_metadata(session.get_modelmeta(), path)
        self._allocate_and_bind(session)
        self._session = session
        self.model_path = path
        self.reset_buffers()

    def _create_session(
        self, path: pathlib.Path, options: OnnxRuntimeOptions
    ) -> ort.InferenceSession:
        so = ort.SessionOptions()
        so.intra_op_num_threads = options.intra_op_num_threads
        so.inter_op_num_threads = options.inter_op_num_threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = _ORT_LOG_ERROR
        self._profiling = options.profiling_path is not None
        if self._profiling:
            prefix = pathlib.Path(options.profiling_path)
            prefix.parent.mkdir(parents=True, exist_ok=True)
            so.enable_profiling = True
            so.profile_file_prefix = str(prefix.with_suffix(""))
        providers = [PROVIDERS["cpu"]]
        if options.provider == "cuda":
            available = ort.get_available_providers()
            if PROVIDERS["cuda"] in available:
                providers = [PROVIDERS["cuda"], PROVIDERS["cpu"]]
            else:
                self._fall_back(
                    f"this onnxruntime build has no CUDA provider (available: {available})"
                )
        try:
            session = ort.InferenceSession(str(path), so, providers=providers)
        except Exception as e:  # onnxruntime raises its own exception types, not exported
            if options.provider == "cuda" and self.fallback_message is None:
                self._fall_back(f"creating the CUDA session failed ({e})")
                return self._create_session(path, replace(options, provider="cpu"))
            raise ModelLoadError(f"cannot load ONNX model {str(path)!r}: {e}") from e
        self.provider = "cuda" if session.get_providers()[0] == PROVIDERS["cuda"] else "cpu"
        if options.provider == "cuda" and self.provider != "cuda" and self.fallback_message is None:
            self._fall_back("onnxruntime did not place the model on the CUDA provider")
        return session

    def _fall_back(self, why: str) -> None:
        self.fallback_message = (
            f"CUDA execution provider requested but not used: {why}; running on CPU"
        )
        logger.warning(self.fallback_message)
        warnings.warn(self.fallback_message, ExecutionProviderWarning, stacklevel=4)

    def _allocate_and_bind(self, session: ort.InferenceSession) -> None:
        float_outputs = [i for i in self._outputs.values() if i.dtype is np.float32]
        offsets, total = {}, 0
        for info in float_outputs:
            offsets[info.name] = total
            total += -(-info.size // _ARENA_ALIGN) * _ARENA_ALIGN
        self._float_arena = np.zeros(total, dtype=np.float32)
        self._in_buffers = {n: np.zeros(i.shape, dtype=i.dtype) for n, i in self._inputs.items()}
        self._out_buffers = {}
        for name, info in self._outputs.items():
            if name in offsets:
                start = offsets[name]
                self._out_buffers[name] = self._float_arena[start : start + info.size].reshape(
                    info.shape
                )
            else:
                self._out_buffers[name] = np.zeros(info.shape, dtype=info.dtype)
        values_in = {n: ort.OrtValue.ortvalue_from_numpy(b) for n, b in self._in_buffers.items()}
        values_out = {n: ort.OrtValue.ortvalue_from_numpy(b) for n, b in self._out_buffers.items()}
        buffers, defaults = session.io_binding(), session.io_binding()
        for name, value in values_in.items():
            buffers.bind_ortvalue_input(name, value)
            if not self._inputs[name].has_default:
                defaults.bind_ortvalue_input(name, value)
        for name, value in values_out.items():
            buffers.bind_ortvalue_output(name, value)
            defaults.bind_ortvalue_output(name, value)
        if not any(i.has_default for i in self._inputs.values()):
            defaults = buffers
        self._keepalive = [values_in, values_out, buffers, defaults]
        self._run_buffers = _runner(session, buffers)
        self._run_defaults = _runner(session, defaults)

    # ------------------------------------------------------------------ queries
    @property
    def is_initialized(self) -> bool:
        return self._session is not None

    @property
    def session(self) -> ort.InferenceSession:
        """The underlying onnxruntime session (for comparisons; do not rebind its IO)."""
        if self._session is None:
            raise RuntimeError("OnnxRuntime is not initialized; call initialize(model_path) first")
        return self._session

    def input_names(self) -> tuple[str, ...]:
        """Input tensor names in graph order (initializer-backed inputs last)."""
        return tuple(self._inputs)

    def output_names(self) -> tuple[str, ...]:
        return tuple(self._outputs)

    def input_info(self, name: str) -> TensorInfo:
        return _lookup(self._inputs, name, "input")

    def output_info(self, name: str) -> TensorInfo:
        return _lookup(self._outputs, name, "output")

    def get_custom_metadata(self, key: str) -> str | None:
        """The model's ``metadata_props`` value for ``key``, or ``None`` if absent."""
        return self._metadata.get(key)

    def custom_metadata(self) -> dict[str, str]:
        return dict(self._metadata)

    def input_buffer(self, name: str, dtype: type[np.generic] = np.float32) -> np.ndarray:
        """Flat, writable view of input ``name``'s buffer, shape (size,).

        Raises ``TensorNotFoundError`` for an unknown name and ``TensorTypeError`` if the tensor's
        element type is not ``dtype``.
        """
        return _typed_view(self._in_buffers, _lookup(self._inputs, name, "input"), dtype, "input")

    def output_buffer(self, name: str, dtype: type[np.generic] = np.float32) -> np.ndarray:
        """Flat view of output ``name``'s buffer (written in place by ``evaluate()``)."""
        return _typed_view(
            self._out_buffers, _lookup(self._outputs, name, "output"), dtype, "output"
        )

    # ------------------------------------------------------------------ running
    def evaluate(self) -> bool:
        """Run the model on the input buffers into the output buffers.

        Returns ``False`` (reason in ``last_error``) if onnxruntime fails.
        """
        run = self._run_defaults if self._use_defaults else self._run_buffers
        if run is None:
            self.last_error = "OnnxRuntime is not initialized; call initialize(model_path) first"
            return False
        try:
            run()
        except Exception as e:  # onnxruntime's Fail/RuntimeException are not importable types
            self.last_error = f"onnxruntime evaluation failed: {e}"
            return False
        self._use_defaults = False
        return True

    @property
    def output_limit(self) -> float:
        """Magnitude beyond which a float32 output counts as non-finite: ``sqrt(max / n)`` for n
        arena elements (about 2e18 for a small policy), so the arena's sum of squares cannot
        overflow while every value is below it. No sensible policy output comes near it."""
        return math.sqrt(_FLOAT32_MAX / max(1, self._float_arena.size))

    @property
    def output_arena(self) -> np.ndarray:
        """The one float32 array that holds every float32 output (each output's buffer is a
        slice of it, 64-byte aligned, zero padding between): what ``outputs_finite`` reduces."""
        return self._float_arena

    def outputs_finite(self) -> bool:
        """True if every float32 output is finite and below ``output_limit`` in magnitude.

        One dot product over the arena (about 1 us): NaN and inf propagate into the sum of
        squares (numpy warns about the overflow of absurd values; that is the fault path).
        """
        return math.isfinite(self._float_arena.dot(self._float_arena))

    def non_finite_outputs(self) -> list[str]:
        """Float32 outputs holding NaN, inf or values beyond ``output_limit`` (the slow path)."""
        limit = self.output_limit
        return [
            n
            for n, b in self._out_buffers.items()
            if b.dtype == np.float32 and not np.all(np.abs(b) < limit)
        ]

    def reset_buffers(self) -> None:
        """Zero every input and output buffer; the next evaluation uses graph initializer defaults."""
        for buf in self._in_buffers.values():
            buf.fill(0)
        for buf in self._out_buffers.values():
            buf.fill(0)
        self._use_defaults = True

    def copy_output_to_input(self, output_name: str, input_name: str) -> None:
        """Copy output ``output_name`` into input ``input_name`` (e.g. recurrent memory).

        Raises ``TensorNotFoundError``, ``TensorTypeError`` (element types differ) or
        ``TensorShapeError`` (sizes differ), naming both tensors.
        """
        src, dst = self.check_copy(output_name, input_name)
        np.copyto(dst, src)

    def check_copy(self, output_name: str, input_name: str) -> tuple[np.ndarray, np.ndarray]:
        """Validate a copy from output to input; returns the (source, destination) flat views."""
        out = _lookup(self._outputs, output_name, "output")
        inp = _lookup(self._inputs, input_name, "input")
        if out.dtype is not inp.dtype:
            raise TensorTypeError(
                f"cannot copy output {output_name!r} ({np.dtype(out.dtype).name}) to input "
                f"{input_name!r} ({np.dtype(inp.dtype).name}): element types must be equal"
            )
        if out.shape != inp.shape:
            raise TensorShapeError(
                f"cannot copy output {output_name!r} of shape {out.shape} to input "
                f"{input_name!r} of shape {inp.shape}: shapes must be equal"
            )
        return self._out_buffers[output_name].reshape(-1), self._in_buffers[input_name].reshape(-1)

    # ------------------------------------------------------------------ cleanup
    def end_profiling(self) -> pathlib.Path | None:
        """Stop profiling and return the JSON profile written by onnxruntime (or ``None``)."""
        if self._session is None or not self._profiling:
            return None
        self._profiling = False
        return pathlib.Path(self._session.end_profiling())

    def close(self) -> None:
        """Release the session (idempotent); a profile in progress is written first."""
        if self._session is not None:
            self.end_profiling()
        self._session = None
        self._keepalive = []
        self._run_defaults = self._run_buffers = None

    def __enter__(self) -> OnnxRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _tensor_info(arg: object, has_default: bool, path: pathlib.Path) -> TensorInfo:
    dtype = ELEMENT_TYPES.get(arg.type)
    if dtype is None:
        raise ModelLoadError(
            f"tensor {arg.name!r} of {str(path)!r} has type {arg.type}; expected one of "
            f"{tuple(ELEMENT_TYPES)}"
        )
    shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in arg.shape)
    return TensorInfo(arg.name, dtype, shape, has_default)


def _lookup(table: dict[str, TensorInfo], name: str, kind: str) -> TensorInfo:
    info = table.get(name)
    if info is None:
        raise TensorNotFoundError(
            f"the model has no {kind} tensor {name!r}; {kind}s: {sorted(table)}"
        )
    return info


def _typed_view(
    buffers: dict[str, np.ndarray], info: TensorInfo, dtype: type[np.generic], kind: str
) -> np.ndarray:
    if np.dtype(dtype) != np.dtype(info.dtype):
        raise TensorTypeError(
            f"{kind} tensor {info.name!r} holds {np.dtype(info.dtype).name}, "
            f"not {np.dtype(dtype).name}; ask for its own element type"
        )
    return buffers[info.name].reshape(-1)


def _runner(session: ort.InferenceSession, binding: ort.IOBinding) -> Callable[[], object]:
    """A zero-argument call that runs ``session`` on ``binding``.

    onnxruntime's compiled entry point directly when the installed version exposes it: the Python
    wrapper's ``run_with_iobinding`` adds per-call WebGPU graph-capture bookkeeping (about 1 us)
    that a CPU or CUDA session never uses. Otherwise the public method.
    """
    compiled, compiled_binding = (
        getattr(session, "_sess", None),
        getattr(binding, "_iobinding", None),
    )
    if compiled_binding is not None and callable(getattr(compiled, "run_with_iobinding", None)):
        return partial(compiled.run_with_iobinding, compiled_binding, None)
    return partial(session.run_with_iobinding, binding)
