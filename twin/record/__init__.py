"""Recordings of a run as MCAP files, and their replay (``docs/formats/recording.md``).

    robot = open_recorded("run.mcap", "sim", seed=1, scene="table")   # a RecordingRobot
    ...                                                              # use it as any Robot
    robot.close()                                  # closes the robot, then the file
    report = replay("run.mcap")                    # a fresh sim, the recorded commands
    print(report.table())

``read_recording`` and ``recording_info`` read a file back (also one cut short by ``kill -9``).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from typing import Any

from twin.backends import open_robot
from twin.record.reader import (
    ChannelInfo,
    Message,
    Recording,
    RecordingError,
    read_recording,
    recording_info,
)
from twin.record.replay import SIGNALS, Divergence, ReplayReport, replay
from twin.record.robot import LayerRecording, RecordingRobot
from twin.record.writer import McapWriter


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    """Versions of Python and the packages a run depends on, for a recording's metadata."""
    names = ("twin", "numpy", "pybullet", "onnxruntime", "gymnasium", "mcap")
    return {"python": platform.python_version(), **{n: _version(n) for n in names}}


def plain_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options a recording can store and replay: plain values, paths as strings."""
    out = {}
    for key, value in options.items():
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if value is None or isinstance(value, (bool, int, float, str)):
            out[key] = value
    return out


def open_recorded(path: str, backend: str, **options: Any) -> RecordingRobot:
    """``open_robot(backend, **options)`` recorded to ``path``: the metadata holds the backend,
    its options (those that are plain values), the scene and seed, and the versions."""
    robot = open_robot(backend, **options)
    plain = plain_options(options)
    metadata = {
        "backend": backend,
        "robot_options": plain,
        "scene": plain.get("scene"),
        "seed": plain.get("seed"),
        "versions": versions(),
    }
    try:
        return RecordingRobot(robot, path, metadata=metadata)
    except Exception:
        robot.close()
        raise


__all__ = [
    "SIGNALS",
    "ChannelInfo",
    "Divergence",
    "LayerRecording",
    "McapWriter",
    "Message",
    "Recording",
    "RecordingError",
    "RecordingRobot",
    "ReplayReport",
    "open_recorded",
    "plain_options",
    "read_recording",
    "recording_info",
    "replay",
    "versions",
]
