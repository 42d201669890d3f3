"""Scenario files: one TOML file per regression scenario, validated with messages that name the
file, the section and the field (``docs/formats/scenario.md``).

    [scenario]                      # name (default: the file's stem), description, scene, seed
    scene = "table"
    [start]                         # optional: q (6,) rad, default the model's home
    [payload]                       # optional: mass_kg, com_m (3,) m in the URDF TCP frame
    [task]                          # kind and its fields (TASK_FIELDS)
    kind = "plan_execute"
    goals = [[0.4, 0.5, 0.9, 0.0, 0.9, 0.0]]
    [expect]                        # metric = { max = ... } etc. (twin.scenario.expect)
    final_tcp_error_m = { max = 0.001 }
"""

from __future__ import annotations

import math
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any

import tomllib

from twin.names import closest, quoted
from twin.scenario.expect import Expectation

#: Task kind -> field -> (default or REQUIRED, kind of value). Kinds of value: "q" (6 numbers),
#: "q_list" and "pose_list" (lists of 6 or 7 numbers: [px, py, pz, qw, qx, qy, qz], at most
#: MAX_LIST_ITEMS), "vec3", "positive", "duration" (0 < s <= MAX_DURATION_S), "fraction"
#: (0 < x <= 1), "str".
REQUIRED = object()
#: s of robot time: the longest any one duration of a task may be (a hold, a tare, a policy's
#: time per target). Every shipped scenario's durations are a few seconds; a minute is far beyond
#: any of them and keeps a mistyped ``tare_s = 1e30`` from running for ever.
MAX_DURATION_S = 60.0
#: The most goals, poses or targets one task may list (each costs a plan or a policy run).
MAX_LIST_ITEMS = 64
#: Bounds of the other numbers a scenario gives (docs/formats/scenario.md): far beyond any arm of
#: the project's size, so that a mistyped 1e30 is an error rather than a run of nonsense.
MAX_ABS_Q_RAD = 2.0 * math.pi  # [start] q; the joint limits then clamp it (twin.safety)
MAX_PAYLOAD_KG = 50.0  # [payload] mass_kg
MAX_COM_M = 1.0  # [payload] com_m, each component, TCP frame
MAX_FORCE_N = 1000.0  # shadow_contact's contact_force_n, each component
TASK_FIELDS: dict[str, dict[str, tuple[Any, str]]] = {
    "plan_execute": {
        "goals": ((), "q_list"),
        "poses": ((), "pose_list"),
        "velocity_scale": (0.5, "fraction"),
        "settle_s": (0.5, "duration"),
    },
    "policy": {
        "policy": ("reach", "str"),
        "targets": (REQUIRED, "pose_list"),
        "duration_s": (4.0, "duration"),
    },
    "ft_weigh": {
        "tare_s": (0.5, "duration"),
        "weigh_s": (0.5, "duration"),
        "settle_s": (0.5, "duration"),
    },
    "pick_place": {},
    "shadow_contact": {
        "contact_force_n": ((0.0, 0.0, 0.0), "vec3"),
        "contact_at_s": (1.0, "duration"),
        "contact_for_s": (0.5, "duration"),
        "duration_s": (2.5, "duration"),
    },
}
SECTIONS = {
    "scenario": {"name", "description", "scene", "seed"},
    "start": {"q"},
    "payload": {"mass_kg", "com_m"},
    "task": None,  # by kind
    "expect": None,  # any metric
}


class ScenarioError(ValueError):
    """A scenario file is wrong; the message names file, section and field, and what was expected."""


@dataclass(frozen=True)
class Scenario:
    """A validated scenario file."""

    path: pathlib.Path
    name: str
    description: str
    scene: str | None
    seed: int
    start_q: tuple[float, ...] | None
    payload: tuple[float, tuple[float, float, float]] | None  # (mass kg, com m, TCP frame)
    task: str
    params: dict[str, Any] = field(default_factory=dict)
    expect: tuple[Expectation, ...] = ()


def _numbers(value: Any, n: int | None, where: str) -> tuple[float, ...]:
    ok = isinstance(value, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value
    )
    if not ok or (n is not None and len(value) != n):
        count = f"{n} " if n is not None else ""
        raise ScenarioError(
            f"{where}: expected a list of {count}finite numbers, got {quoted(value)}"
        )
    return tuple(float(v) for v in value)


def _bounded(values: tuple[float, ...], bound: float, unit: str, where: str) -> tuple[float, ...]:
    """``values`` if every one is within +-``bound`` (``unit``), else a ``ScenarioError``."""
    worst = max((abs(v) for v in values), default=0.0)
    if worst > bound:
        raise ScenarioError(
            f"{where}: expected values within +-{bound:g} {unit}, got {worst:g} "
            "(docs/formats/scenario.md)"
        )
    return values


def _value(kind: str, value: Any, where: str) -> Any:
    if kind == "str":
        if not isinstance(value, str) or not value:
            raise ScenarioError(f"{where}: expected a non-empty string, got {quoted(value)}")
        return value
    if kind == "vec3":
        return _bounded(_numbers(value, 3, where), MAX_FORCE_N, "N", where)
    if kind in ("q_list", "pose_list"):
        n = 6 if kind == "q_list" else 7
        if not isinstance(value, list) or len(value) > MAX_LIST_ITEMS:
            raise ScenarioError(
                f"{where}: expected a list of at most {MAX_LIST_ITEMS} lists of {n} numbers, got "
                f"{quoted(value)}"
            )
        out = tuple(_numbers(v, n, f"{where}[{i}]") for i, v in enumerate(value))
        if kind == "pose_list":
            for i, pose in enumerate(out):
                norm = math.sqrt(sum(c * c for c in pose[3:]))
                if abs(norm - 1.0) > 1e-3:
                    raise ScenarioError(
                        f"{where}[{i}]: expected a unit quaternion [qw, qx, qy, qz] after the "
                        f"position, got norm {norm:.6g}"
                    )
        return out
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ScenarioError(f"{where}: expected a number, got {quoted(value)}")
    if value <= 0:
        bound = "in (0, 1]" if kind == "fraction" else "> 0"
        raise ScenarioError(f"{where}: expected a number {bound}, got {value!r}")
    if kind == "fraction" and value > 1:
        raise ScenarioError(f"{where}: expected a number in (0, 1], got {value!r}")
    if kind == "duration" and value > MAX_DURATION_S:
        raise ScenarioError(
            f"{where}: expected a duration in (0, {MAX_DURATION_S:g}] s of robot time, got "
            f"{value!r} (docs/formats/scenario.md)"
        )
    return float(value)


def _scene(scene: str, path: pathlib.Path, where: str) -> str:
    """A shipped scene's name as it is; a scene file (``*.json``) relative to the scenario file,
    or one of the scene files shipped beside the named scenes (``pick_place``) by its stem."""
    from twin.scenes import SHIPPED_SCENES, scene_file

    if scene in SHIPPED_SCENES:
        return scene
    found = scene_file(scene, relative_to=path.parent)
    if found is not None:
        return str(found)
    raise ScenarioError(
        f"{where}: [scenario] scene = {scene!r}{closest(scene, SHIPPED_SCENES)}: expected a "
        f"shipped scene ({', '.join(SHIPPED_SCENES)}), a scene file shipped beside them, or a "
        "scene .json file relative to the scenario file"
    )


def load_scenario(path: str | os.PathLike) -> Scenario:
    """Read and validate one scenario file; raises ``ScenarioError`` naming what is wrong."""
    path = pathlib.Path(path)
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"{where}: no such scenario file") from None
    except OSError as e:
        raise ScenarioError(f"{where}: cannot read the scenario file ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{where}: not UTF-8 text (byte {e.start}); expected TOML") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{where}: not valid TOML ({e})") from None
    except RecursionError:
        raise ScenarioError(f"{where}: not valid TOML (nested too deeply)") from None
    for section, value in data.items():
        if section not in SECTIONS:
            raise ScenarioError(
                f"{where}: unknown section [{section}]{closest(section, SECTIONS)}; expected "
                f"{', '.join(f'[{s}]' for s in SECTIONS)}"
            )
        if not isinstance(value, dict):
            raise ScenarioError(f"{where}: {section} must be a [{section}] table")
        allowed = SECTIONS[section]
        for key in value if allowed is not None else ():
            if key not in allowed:
                raise ScenarioError(
                    f"{where}: [{section}] unknown field {key!r}{closest(key, allowed)}; "
                    f"expected {', '.join(sorted(allowed))}"
                )
    head = data.get("scenario", {})
    name = head.get("name", path.stem)
    scene = head.get("scene")
    seed = head.get("seed", 0)
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{where}: [scenario] name: expected a non-empty string, got {name!r}")
    if scene is not None and (not isinstance(scene, str) or not scene):
        raise ScenarioError(f"{where}: [scenario] scene: expected a scene name, got {scene!r}")
    if scene is not None:
        scene = _scene(scene, path, where)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ScenarioError(f"{where}: [scenario] seed: expected an integer >= 0, got {seed!r}")
    start = data.get("start", {})
    start_q = None
    if "q" in start:
        q_where = f"{where}: [start] q"
        start_q = _bounded(_numbers(start["q"], 6, q_where), MAX_ABS_Q_RAD, "rad", q_where)
    payload = None
    if "payload" in data:
        p = data["payload"]
        if "mass_kg" not in p:
            raise ScenarioError(f"{where}: [payload] mass_kg: missing (kg, > 0)")
        mass_where, com_where = f"{where}: [payload] mass_kg", f"{where}: [payload] com_m"
        mass = _value("positive", p["mass_kg"], mass_where)
        if mass > MAX_PAYLOAD_KG:
            raise ScenarioError(
                f"{mass_where}: expected a mass in (0, {MAX_PAYLOAD_KG:g}] kg, got {mass:g} "
                "(docs/formats/scenario.md)"
            )
        com = _bounded(
            _numbers(p.get("com_m", [0.0, 0.0, 0.0]), 3, com_where), MAX_COM_M, "m", com_where
        )
        payload = (mass, com)
    task = data.get("task")
    if task is None:
        raise ScenarioError(
            f"{where}: missing [task] (with kind = one of {', '.join(TASK_FIELDS)})"
        )
    kind = task.get("kind")
    if not isinstance(kind, str) or kind not in TASK_FIELDS:
        hint = closest(kind, TASK_FIELDS) if isinstance(kind, str) else ""
        raise ScenarioError(
            f"{where}: [task] kind = {quoted(kind)}{hint}; expected a string, one of "
            f"{', '.join(TASK_FIELDS)}"
        )
    spec = TASK_FIELDS[kind]
    params = {}
    for key, value in task.items():
        if key == "kind":
            continue
        if key not in spec:
            raise ScenarioError(
                f"{where}: [task] unknown field {key!r} for kind {kind!r}{closest(key, spec)}; "
                f"expected {', '.join(spec)}"
            )
        params[key] = _value(spec[key][1], value, f"{where}: [task] {key}")
    for key, (default, _) in spec.items():
        if key not in params:
            if default is REQUIRED:
                raise ScenarioError(f"{where}: [task] {key}: missing (needed by kind {kind!r})")
            params[key] = default
    if kind == "plan_execute" and not (params["goals"] or params["poses"]):
        raise ScenarioError(f"{where}: [task] needs goals (joint, rad) or poses (TCP) to plan to")
    expect = tuple(
        Expectation.parse(metric, spec_, f"{where}")
        for metric, spec_ in data.get("expect", {}).items()
    )
    return Scenario(
        path,
        name,
        str(head.get("description", "")),
        scene,
        seed,
        start_q,
        payload,
        kind,
        params,
        expect,
    )
