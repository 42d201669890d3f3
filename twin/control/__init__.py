"""ONNX policy controller, compatible with exploy's naming and metadata convention.

``OnnxRLController(state, command, data_collection)`` loads a policy (``create``), connects it
to the robot (``init``) and runs it (``update(t_us)``), with the tensor matching of exploy's
controller (``docs/reference/onnx-controller.md``, ``docs/formats/onnx-policy.md``). ``RobotStateAdapter`` serves the
state interface from any ``twin.robot.Robot``; ``CommandSource`` holds settable commands;
``CsvDataCollection`` records every model input and output.
"""

from twin.control.commands import CommandSource
from twin.control.components import Input, Output
from twin.control.context import OnnxContext
from twin.control.controller import NullDataCollection, OnnxRLController
from twin.control.data_collection import CsvDataCollection, load_csv
from twin.control.errors import (
    ComponentInitError,
    ContextError,
    ControlError,
    ExecutionProviderWarning,
    InferenceOverdueError,
    MetadataError,
    ModelLoadError,
    TensorNotFoundError,
    TensorShapeError,
    TensorTypeError,
    UnclaimedTensorWarning,
)
from twin.control.interfaces import CommandInterface, DataCollectionInterface, RobotStateInterface
from twin.control.matchers import GroupMatcher, Match, Matcher
from twin.control.robot_io import RobotStateAdapter
from twin.control.runtime import OnnxRuntime, OnnxRuntimeOptions
from twin.control.workers import AsyncWorker, SyncWorker, Worker, WorkerMode

__all__ = [
    "AsyncWorker",
    "CommandInterface",
    "CommandSource",
    "ComponentInitError",
    "ContextError",
    "ControlError",
    "CsvDataCollection",
    "DataCollectionInterface",
    "ExecutionProviderWarning",
    "GroupMatcher",
    "InferenceOverdueError",
    "Input",
    "Match",
    "Matcher",
    "MetadataError",
    "ModelLoadError",
    "NullDataCollection",
    "OnnxContext",
    "OnnxRLController",
    "OnnxRuntime",
    "OnnxRuntimeOptions",
    "Output",
    "RobotStateAdapter",
    "RobotStateInterface",
    "SyncWorker",
    "TensorNotFoundError",
    "TensorShapeError",
    "TensorTypeError",
    "UnclaimedTensorWarning",
    "Worker",
    "WorkerMode",
    "load_csv",
]
