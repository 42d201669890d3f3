"""The API log: every public planner call and its result, as JSON (no pickles).

    planner = RecordingPlanner(Planner(settings))     # use it exactly like the planner
    planner.set_obstacles(obstacles)
    result = planner.path(InitialState(q0), PathRequest([q1]))
    log_path = planner.export_api_log()               # -> .../api_log_<time>_<n>.json
    resources = package_api_log(log_path)             # -> .../api_log_<time>_<n>-resources.zip
    report = twin.planning.replay(log_path)           # re-runs every call, lists differences

Log file (``format`` ``"twin-api-log"``, ``version`` 1): ``settings`` (every ``PlannerSettings``
field; the seed makes planning replayable), ``urdf_sha256`` of the planner's arm, and ``calls``:
``{"index", "method", "args", "result" | "raised"}`` per call in order. Arguments are encoded
losslessly (``encode``): numpy arrays as nested lists with a dtype, the planner's value types as
``{"__type__": name, fields...}``, enums by value; an ``InitialState`` built from the result of an
earlier logged call refers to that call (``{"__type__": "InitialState", "previous_call": k}``) so
a replay chains the replayed results. Results are summarised deterministically: a ``PathResult``
as its error, selected goal index and path configurations and movements (``stats`` with its times
is left out); configurations and poses as lists; ``Tcp`` as its encoding. An exception is logged
as its type name and message and raised again.

The time limit (``max_planning_time_s``) and replay: a query that finishes within its limit
replays exactly (its random numbers never depend on the clock). A query the limit stopped is
logged with ``"deadline_hit": true`` and the RRT ``"iterations"`` it used, so a replay on a
faster or slower machine that finishes it, or stops it elsewhere, is reported as a difference
(replay such a log with a larger limit to see the whole search).

The roadmap build (``search.roadmap``) runs in steps inside queries, as much as each query's time
allows, so how far it got depends on the clock: a query that looked at the roadmap is logged with
``"roadmap_steps"`` (the build's steps done after it) and ``"roadmap_deferred"`` (the build was not
done: the query planned with RRT-Connect alone); a replay takes the build to exactly those steps
before the call (``Planner.pin_roadmap_steps``), so it reproduces the same paths on any machine.

The default export directory is ``$TWIN_API_LOG_DIR``, else ``~/.local/share/twin/api_logs``.
``package_api_log`` writes ``<log stem>-resources.zip`` beside the log (the log itself is not
included, as in the reference): the cell package of the planner's cell (``cells.package_cell``,
the URDF included) or the arm's URDF alone when the planner has no cell, plus ``settings.json``.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import itertools
import json
import os
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from twin.planning import requests as rq
from twin.planning import types as ty
from twin.planning.errors import PlanningInputError
from twin.planning.settings import PlannerSettings

FORMAT_NAME = "twin-api-log"
FORMAT_VERSION = 1
ENV_LOG_DIR = "TWIN_API_LOG_DIR"

#: Public planner methods that are recorded (others are passed through unrecorded).
RECORDED = (
    "set_obstacles",
    "clear_obstacles",
    "set_carried_object",
    "clear_carried_object",
    "set_replaceable_tool",
    "clear_replaceable_tool",
    "set_attachments",
    "set_tcp",
    "get_tcp",
    "compute_inverse_kinematics",
    "path",
    "clip_point_cloud_with_box",
    "clip_point_cloud_with_mesh",
)

# Value types and the fields that rebuild them (their dataclass fields).
_TYPES: dict[str, type] = {
    t.__name__: t
    for t in (
        ty.TransformedBox,
        ty.Tcp,
        ty.Obstacle,
        ty.CarriedObject,
        ty.ToolBoxElement,
        ty.ReplaceableTool,
        rq.BlendRadius,
        rq.Waypoint,
        rq.PathRequest,
    )
}
_ENUMS: dict[str, type[enum.Enum]] = {
    e.__name__: e
    for e in (
        ty.ObstacleKind,
        rq.PathType,
        rq.GoalPrioritization,
        rq.Movement,
        rq.PathError,
        rq.Profile,
    )
}


def default_log_dir() -> Path:
    env = os.environ.get(ENV_LOG_DIR)
    return Path(env) if env else Path.home() / ".local" / "share" / "twin" / "api_logs"


# ------------------------------------------------------------------------------------ codec
def encode(value: Any, results: dict[int, int] | None = None) -> Any:
    """JSON-able, lossless form of a call argument (see the module doc). ``results`` maps
    ``id(PathResult)`` to the index of the call that returned it."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, enum.Enum):
        return {"__enum__": type(value).__name__, "value": value.value}
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, (list, tuple)):
        return [encode(v, results) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v, results) for k, v in value.items()}
    if isinstance(value, rq.InitialState):
        prev = value.previous
        if prev is not None and results is not None and id(prev) in results:
            return {"__type__": "InitialState", "previous_call": results[id(prev)]}
        if prev is not None:
            return {"__type__": "InitialState", "previous_result": encode_result(prev)}
        out = {"__type__": "InitialState", "configuration": encode(value.configuration)}
        if value.touch:
            out["touch"] = True
        return out
    name = type(value).__name__
    if name in _TYPES and dataclasses.is_dataclass(value):
        fields = {
            f.name: encode(getattr(value, f.name), results) for f in dataclasses.fields(value)
        }
        return {"__type__": name, **fields}
    raise PlanningInputError(f"the API log cannot encode a {name} argument")


def decode(value: Any, results: list[Any] | None = None) -> Any:
    """The inverse of ``encode``; ``results`` are the replayed results, by call index."""
    if isinstance(value, list):
        return [decode(v, results) for v in value]
    if not isinstance(value, dict):
        return value
    if "__ndarray__" in value:
        return np.array(value["__ndarray__"], dtype=value["dtype"])
    if "__enum__" in value:
        return _ENUMS[value["__enum__"]](value["value"])
    kind = value.get("__type__")
    if kind == "InitialState":
        if "previous_call" in value:
            return rq.InitialState(results[value["previous_call"]])  # type: ignore[index]
        if "previous_result" in value:
            return rq.InitialState(decode_result(value["previous_result"]))
        if value.get("touch"):
            return rq.InitialState.from_touch(decode(value["configuration"]))
        return rq.InitialState(decode(value["configuration"]))
    if kind in _TYPES:
        fields = {k: decode(v, results) for k, v in value.items() if k != "__type__"}
        for key in ("elements", "goal_configurations"):  # tuples in the value types
            if key in fields:
                fields[key] = tuple(fields[key])
        return _TYPES[kind](**fields)
    return {k: decode(v, results) for k, v in value.items()}


def encode_result(result: Any) -> Any:
    """Deterministic summary of a call's result (see the module doc)."""
    if isinstance(result, rq.PathResult):
        touch = {"ends_in_touch": True} if result.ends_in_touch else {}
        if result.stats.get("deadline_hit"):
            touch["deadline_hit"] = True
            touch["iterations"] = int(result.stats.get("iterations", 0))
        if "roadmap_steps" in result.stats:  # how far the roadmap build got (module doc)
            touch["roadmap_steps"] = int(result.stats["roadmap_steps"])
            touch["roadmap_deferred"] = bool(result.stats.get("roadmap_deferred"))
        return {
            **touch,
            "__type__": "PathResult",
            "error": None if result.error is None else result.error.value,
            "selected_goal_idx": result.selected_goal_idx,
            "tcp": encode(result.tcp),
            "path": [w.configuration.tolist() for w in result.waypoints],
            "movements": [w.movement.value for w in result.waypoints],
            "blend_radii": [[w.blend_radius.entry, w.blend_radius.exit] for w in result.waypoints],
        }
    return encode(result)


def decode_result(summary: dict) -> rq.PathResult:
    """A ``PathResult`` rebuilt from its summary (for an ``InitialState`` of an unlogged result)."""
    waypoints = tuple(
        rq.Waypoint(np.array(q), rq.Movement(m), rq.BlendRadius(*b))
        for q, m, b in zip(summary["path"], summary["movements"], summary["blend_radii"])
    )
    error = None if summary["error"] is None else rq.PathError(summary["error"])
    return rq.PathResult(
        error,
        summary["selected_goal_idx"],
        decode(summary["tcp"]),
        waypoints,
        ends_in_touch=bool(summary.get("ends_in_touch", False)),
    )


# --------------------------------------------------------------------------------- recorder
_COUNTER = itertools.count()


class RecordingPlanner:
    """A planner that records every call of ``RECORDED`` (module doc); anything else is passed
    through to the wrapped ``planner``."""

    def __init__(self, planner: Any) -> None:
        self._planner = planner
        self._calls: list[dict[str, Any]] = []
        self._result_calls: dict[int, int] = {}
        self._keep: list[Any] = []  # keeps logged results alive so their ids stay unique

    @property
    def planner(self) -> Any:
        return self._planner

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The recorded calls so far (JSON-able dicts)."""
        return list(self._calls)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._planner, name)
        if name not in RECORDED or not callable(attr):
            return attr

        def recorded(*args: Any, **kwargs: Any) -> Any:
            return self._record(name, attr, args, kwargs)

        recorded.__doc__ = attr.__doc__
        recorded.__name__ = name
        return recorded

    def _record(self, name: str, method, args: tuple, kwargs: dict) -> Any:
        entry: dict[str, Any] = {
            "index": len(self._calls),
            "method": name,
            "args": encode(list(args), self._result_calls),
            "kwargs": encode(kwargs, self._result_calls),
        }
        try:
            result = method(*args, **kwargs)
        except Exception as e:
            entry["raised"] = {"type": type(e).__name__, "message": str(e)}
            self._calls.append(entry)
            raise
        entry["result"] = encode_result(result)
        if isinstance(result, rq.PathResult):
            self._result_calls[id(result)] = entry["index"]
            self._keep.append(result)
        self._calls.append(entry)
        return result

    def log(self) -> dict[str, Any]:
        """The whole log as a JSON-able dict."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "settings": settings_dict(self._planner.settings),
            "urdf": Path(self._planner.model.urdf_path).name,
            "urdf_sha256": hashlib.sha256(
                Path(self._planner.model.urdf_path).read_bytes()
            ).hexdigest(),
            "calls": self.calls,
        }

    def export_api_log(self, directory: str | Path | None = None) -> Path:
        """Write the log as JSON into ``directory`` (default: ``default_log_dir()``, created if
        needed) under a new name; returns its path."""
        folder = default_log_dir() if directory is None else Path(directory)
        if directory is not None and not folder.is_dir():
            raise FileNotFoundError(f"the folder {folder} does not exist")
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        text = json.dumps(self.log(), indent=None, separators=(",", ":")) + "\n"
        while True:
            path = folder / f"api_log_{stamp}_{os.getpid()}_{next(_COUNTER)}.json"
            try:
                with open(path, "x", encoding="utf-8") as f:
                    f.write(text)
                return path
            except FileExistsError:
                continue

    def __repr__(self) -> str:
        return f"RecordingPlanner({len(self._calls)} calls, {self._planner!r})"


def settings_dict(settings: PlannerSettings) -> dict[str, Any]:
    return {f.name: encode(getattr(settings, f.name)) for f in dataclasses.fields(settings)}


def settings_from_dict(data: dict[str, Any]) -> PlannerSettings:
    return PlannerSettings(**{k: decode(v) for k, v in data.items()})


def read_log(log: str | Path | dict) -> dict[str, Any]:
    data = log if isinstance(log, dict) else json.loads(Path(log).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT_NAME or data.get("version") != FORMAT_VERSION:
        raise PlanningInputError(
            f"not an API log: expected format {FORMAT_NAME!r} version {FORMAT_VERSION}"
        )
    return data


def package_api_log(path: str | Path, *, cells_dir: str | Path | None = None) -> Path:
    """Bundle what a replay of the log at ``path`` needs into ``<stem>-resources.zip`` beside it
    (see the module doc); refuses to overwrite an existing bundle. Returns its path."""
    from twin.planning import cells

    path = Path(path)
    data = read_log(path)
    out = path.with_name(f"{path.stem}-resources.zip")
    if out.exists():
        raise FileExistsError(f"{out} already exists")
    settings = data["settings"]
    cell_name = decode(settings["cell_name"])
    with tempfile.TemporaryDirectory() as tmp:
        cell_zip = Path(tmp) / "cell.zip"
        cells.package_cell(cell_name, cell_zip, cells_dir=cells_dir)
        with zipfile.ZipFile(out, "x", compression=zipfile.ZIP_DEFLATED) as z:
            z.write(cell_zip, "cell.zip")
            z.writestr("settings.json", json.dumps(settings, indent=1) + "\n")
    return out
