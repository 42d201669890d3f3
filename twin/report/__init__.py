"""Reports of a run: the per-cycle trace, what each move and reach measured, the figures (PNG,
matplotlib) and the JSON of every figure (``write_report``).

Nothing here imports a backend: the trace comes through the robot interface
(``TraceRecorder``), the scene snapshot is an image the caller rendered.
"""

from twin.report.camera import Camera
from twin.report.records import MovePart, MoveRecord, PolicyRecord
from twin.report.trace import TraceRecorder
from twin.report.writer import write_report

__all__ = ["Camera", "MovePart", "MoveRecord", "PolicyRecord", "TraceRecorder", "write_report"]
