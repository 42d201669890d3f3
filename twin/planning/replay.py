"""Replaying an API log (``api_log``): re-run every call on a fresh planner, report differences.

    report = replay("api_log_....json")                  # the shipped cell's planner
    report = replay(log_path, resources="...-resources.zip")   # the cell from the bundle
    assert report, report.differences

The planner is rebuilt from the log's settings (seed included): from the cell package inside
``resources`` when given (installed into a temporary cells directory and its URDF loaded),
else ``Planner(settings)``, else ``planner`` when one is passed. Its arm must be the one the log
was recorded with (URDF SHA-256). Each call's arguments are decoded (an ``InitialState`` built
from an earlier call's result uses the replayed result), the call is made, and its result summary
(``api_log.encode_result``) or raised exception (type and message) compared with the log's;
numbers are compared exactly unless ``atol`` is given. A query logged with ``roadmap_steps``
takes the replayed planner's roadmap build to those steps first (``Planner.pin_roadmap_steps``),
so a build spread over queries by the clock replays as it was recorded.
"""

from __future__ import annotations

import hashlib
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twin.planning.api_log import decode, encode_result, read_log, settings_from_dict
from twin.planning.errors import PlanningInputError


@dataclass(frozen=True)
class Difference:
    """One call whose outcome differs: ``expected`` (logged) and ``actual`` (replayed) are the
    result summaries, or ``{"raised": ...}``."""

    index: int
    method: str
    expected: Any
    actual: Any


@dataclass(frozen=True)
class ReplayReport:
    """``calls`` replayed and the ``differences`` found; truthy when there are none."""

    calls: int
    differences: list[Difference] = field(default_factory=list)

    def __bool__(self) -> bool:
        return not self.differences


def _same(a: Any, b: Any, atol: float) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], atol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, atol) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float | int) and not isinstance(b, bool):
        return a == b or abs(a - b) <= atol
    return a == b and type(a) is type(b)


def _planner(data: dict, resources: str | Path | None, planner: Any, tmp: Path) -> Any:
    if planner is not None:
        return planner
    from twin.planning.planner import Planner

    settings = settings_from_dict(data["settings"])
    if resources is None:
        return Planner(settings)
    from twin.kinematics import ArmModel
    from twin.planning import cells

    with zipfile.ZipFile(resources) as z:
        if "cell.zip" not in z.namelist():
            raise PlanningInputError(f"{resources}: no cell.zip inside; expected an API-log bundle")
        z.extract("cell.zip", tmp)
    cell_dir = cells.install_package(tmp / "cell.zip", tmp / "cells")
    cell = cells.load_cell(cell_dir.name, tmp / "cells")
    return Planner(settings, model=ArmModel.from_urdf(cell.urdf_path))


def replay(
    log: str | Path | dict,
    resources: str | Path | None = None,
    *,
    planner: Any = None,
    atol: float = 0.0,
) -> ReplayReport:
    """Re-run the calls of ``log`` (a path or the parsed dict); see the module doc."""
    data = read_log(log)
    with tempfile.TemporaryDirectory() as tmp:
        p = _planner(data, resources, planner, Path(tmp))
        digest = hashlib.sha256(Path(p.model.urdf_path).read_bytes()).hexdigest()
        if digest != data["urdf_sha256"]:
            raise PlanningInputError(
                f"the planner's arm ({Path(p.model.urdf_path).name}) is not the one the log was "
                f"recorded with ({data['urdf']}, SHA-256 {data['urdf_sha256'][:12]}...)"
            )
        results: list[Any] = []
        differences = []
        for call in data["calls"]:
            args = decode(call["args"], results)
            kwargs = decode(call["kwargs"], results)
            logged = call.get("result")
            steps = logged.get("roadmap_steps") if isinstance(logged, dict) else None
            if hasattr(p, "pin_roadmap_steps"):
                p.pin_roadmap_steps(steps)
            try:
                result = getattr(p, call["method"])(*args, **kwargs)
                actual: Any = encode_result(result)
            except Exception as e:  # compared with the logged exception
                result, actual = None, {"raised": {"type": type(e).__name__, "message": str(e)}}
            results.append(result)
            expected = {"raised": call["raised"]} if "raised" in call else call["result"]
            if not _same(expected, actual, atol):
                differences.append(Difference(call["index"], call["method"], expected, actual))
    return ReplayReport(len(data["calls"]), differences)
