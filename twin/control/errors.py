"""Typed errors and warnings of the ONNX policy controller.

Every message names the tensor (or group, or component) that was wrong and says what was
expected. Ordinary per-cycle failures (a value not available, a non-finite policy output) are
not exceptions: ``update()`` returns ``False`` and the controller records the reason.
"""

from __future__ import annotations


class ControlError(Exception):
    """Base class of the controller's errors."""


class ModelLoadError(ControlError):
    """The ONNX file is missing, unreadable, or uses a tensor type the runtime cannot buffer."""


class TensorNotFoundError(ControlError, KeyError):
    """No input/output tensor of that name in the model."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TensorTypeError(ControlError, TypeError):
    """A buffer was asked for with an element type other than the tensor's."""


class TensorShapeError(ControlError, ValueError):
    """A tensor has a size the component (or a copy) cannot use."""


class MetadataError(ControlError, ValueError):
    """Model metadata (``metadata_props``) is missing or malformed."""


class ContextError(ControlError):
    """Tensor matching failed: a tensor claimed twice, unclaimed (strict), or a broken group."""


class ComponentInitError(ControlError):
    """A component could not connect to the robot (unknown joint, missing sensor, ...)."""


class UnclaimedTensorWarning(UserWarning):
    """A model tensor that no matcher claims (an error in strict mode)."""


class ExecutionProviderWarning(RuntimeWarning):
    """The requested execution provider (CUDA) is not available; the runtime fell back to CPU."""


class InferenceOverdueError(ControlError):
    """The async worker's watchdog: an inference still running past its limit.

    ``dispatched_t_us`` / ``t_us``: the cycle the inference belongs to and the tick that found it
    late (the caller's microseconds); ``busy_periods``: whole periods elapsed since dispatch in
    that time base; ``busy_s``: wall-clock seconds since dispatch; ``limit``: the limit that was
    exceeded, as text (``"3 periods"`` or ``"0.250 s"``).
    """

    def __init__(
        self, dispatched_t_us: int, t_us: int, busy_periods: int, busy_s: float, limit: str
    ) -> None:
        self.dispatched_t_us, self.t_us = dispatched_t_us, t_us
        self.busy_periods, self.busy_s, self.limit = busy_periods, busy_s, limit
        super().__init__(
            f"watchdog: the inference dispatched at t_us={dispatched_t_us} is still running at "
            f"t_us={t_us}: {busy_periods} period(s) and {busy_s:.3f} s of wall time since "
            f"dispatch, beyond the limit of {limit}; no output is written until reset() (the "
            "robot keeps the last command)"
        )
