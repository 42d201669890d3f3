"""Fuzzing every reader a user can point the CLI at (issue 31): ``twin plan`` inputs (scene files,
goals), ``twin test`` scenario files, ``twin run --policy`` ONNX files and cell packages, on
random and mutated files. The rule: a file is either accepted (and what was read lies within the
documented bounds) or refused with the one error the CLI prints in one line, exit 2; never
another exception (a traceback) and never a hang.

Hypothesis runs derandomised (``tests/conftest.py``): every failure replays. A few hundred cases
per reader here; ``TWIN_FUZZ_LONG=1`` runs 100 times as many. Most cases call the in-process
entry points (what the CLI calls); a small sample runs the CLI itself as a subprocess.
"""

from __future__ import annotations

import io
import json
import math
import os
import pathlib
import shutil
import subprocess
import time
import zipfile

import numpy as np
import pytest
import tomllib
from cli_helpers import TWIN, clean_env, stderr_lines
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.cli import classify
from twin.planning import PlanningInputError
from twin.planning._validate import WORLD_EXTENT_M
from twin.planning.cells import CellError, PackageError, install_package, load_cell, package_cell
from twin.scenario import ScenarioError, load_scenario
from twin.scenario.format import MAX_DURATION_S, MAX_LIST_ITEMS, TASK_FIELDS
from twin.scenario.sweep import shipped_suite
from twin.scenes import SceneError, load_scene, scenes_dir

LONG = os.environ.get("TWIN_FUZZ_LONG") == "1"
#: s: a CLI run that takes longer is a hang (the issue's bound is 30 s on an idle machine; this
#: one leaves room for a machine loaded by other test runs).
CLI_TIMEOUT_S = 120.0


def cases(n: int):
    """Hypothesis settings for ``n`` cases (100 n with ``TWIN_FUZZ_LONG=1``)."""
    return settings(max_examples=n * (100 if LONG else 1), deadline=None)


# ------------------------------------------------------------------------------- mutations
EDITS = st.lists(
    st.tuples(st.sampled_from("fidt"), st.floats(0.0, 1.0), st.integers(0, 255)),
    min_size=1,
    max_size=8,
)


def mutate(data: bytes, edits) -> bytes:
    """``data`` with byte edits: (f)lip, (i)nsert, (d)elete at a fraction of the length, or
    (t)runcate there."""
    b = bytearray(data)
    for op, where, byte in edits:
        i = min(int(where * len(b)), max(len(b) - 1, 0))
        if op == "f" and b:
            b[i] ^= byte or 0xFF
        elif op == "i":
            b.insert(i, byte)
        elif op == "d" and b:
            del b[i]
        elif op == "t":
            del b[i:]
    return bytes(b)


HOSTILE_NUMBERS = st.sampled_from(
    [0, -1, 1e308, -1e308, 1e30, 1e18, 1e-300, math.inf, -math.inf, math.nan, 2**63 - 1, -(2**63)]
)
LEAVES = st.one_of(
    HOSTILE_NUMBERS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=8),
    st.booleans(),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=8), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


def replace_at(doc: object, choice: float, value: object) -> object:
    """``doc`` (decoded JSON or TOML) with the leaf or container at position ``choice`` (a
    fraction of a depth-first walk) replaced by ``value``."""
    paths: list[tuple] = []

    def walk(node: object, path: tuple) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))

    walk(doc, ())
    path = paths[min(int(choice * len(paths)), len(paths) - 1)]
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]  # type: ignore[index]
    node[path[-1]] = value  # type: ignore[index]
    return doc


def toml_value(value: object) -> str:
    """An inline TOML value (strings, numbers, booleans, arrays, inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            "nan"
            if value != value
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return '""'


def toml_document(doc: dict) -> str:
    """A TOML file of ``doc``: tables for the top-level dicts, keys quoted."""
    lines = []
    for section, body in doc.items():
        if isinstance(body, dict):
            lines.append(f"[{json.dumps(section)}]")
            lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in body.items()]
        else:
            lines.insert(0, f"{json.dumps(section)} = {toml_value(body)}")
    return "\n".join(lines) + "\n"


def one_line_error(error: BaseException) -> bool:
    """Whether the CLI reports ``error`` in one line with exit 2 (``twin.cli.classify``)."""
    reported = classify(error)
    return reported is not None and reported[0] == 2 and "\n" not in reported[1]


# ------------------------------------------------------------------------------ scenario files
SCENARIOS = sorted(shipped_suite().glob("*.toml"))


def _check_scenario(path: pathlib.Path) -> None:
    try:
        s = load_scenario(path)
    except Exception as e:  # the rule: only errors the CLI prints in one line
        assert one_line_error(e), f"{type(e).__name__}: {e}"
        return
    assert s.task in TASK_FIELDS
    for key, value in s.params.items():
        if TASK_FIELDS[s.task][key][1] == "duration":
            assert 0.0 < value <= MAX_DURATION_S, (key, value)
        if isinstance(value, tuple) and value and isinstance(value[0], tuple):
            assert len(value) <= MAX_LIST_ITEMS
            assert all(math.isfinite(x) for row in value for x in row)


@cases(150)
@given(base=st.sampled_from(SCENARIOS), edits=EDITS)
def test_mutated_scenario_bytes_fail_in_one_line(tmp_path_factory, base, edits):
    path = tmp_path_factory.mktemp("scn") / base.name
    path.write_bytes(mutate(base.read_bytes(), edits))
    _check_scenario(path)


@cases(200)
@given(
    base=st.sampled_from(SCENARIOS),
    where=st.floats(0.0, 1.0),
    value=VALUES,
    duration=st.one_of(HOSTILE_NUMBERS, st.floats(0.0, 1e6)),
)
def test_mutated_scenario_fields_fail_in_one_line(tmp_path_factory, base, where, value, duration):
    doc = tomllib.loads(base.read_text())
    doc = replace_at(doc, where, value)
    if isinstance(doc, dict) and isinstance(doc.get("task"), dict):
        kind = doc["task"].get("kind")
        fields = TASK_FIELDS.get(kind, {}) if isinstance(kind, str) else {}
        durations = [k for k, (_, t) in fields.items() if t == "duration"]
        if durations:
            doc["task"][durations[int(where * len(durations)) % len(durations)]] = duration
    path = tmp_path_factory.mktemp("scn") / base.name
    path.write_text(toml_document(doc) if isinstance(doc, dict) else toml_value(doc))
    _check_scenario(path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (("task", "kind", ["ft_weigh"]), "kind = \\['ft_weigh'\\].*expected a string"),
        (("task", "kind", {"a": 1}), "expected a string"),
        (("task", "tare_s", 1e30), "tare_s: expected a duration in \\(0, 60\\] s"),
        (("task", "weigh_s", math.inf), "weigh_s: expected a number"),
    ],
)
def test_scenario_kind_and_durations_named(tmp_path, edit, message):
    doc = tomllib.loads((shipped_suite() / "weigh_payload.toml").read_text())
    section, key, value = edit
    doc[section][key] = value
    path = tmp_path / "s.toml"
    path.write_text(toml_document(doc))
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ScenarioError):
        load_scenario(path)


# ------------------------------------------------------------------------------ plan inputs
SCENES = ("table", "shelf", "bin", "cage", "pick_place")


@pytest.fixture(scope="module")
def scene_copy(tmp_path_factory):
    """The shipped scenes and their mesh and cloud files, in a folder the tests may write."""
    folder = tmp_path_factory.mktemp("scenes")
    for f in scenes_dir().iterdir():
        if f.is_file():
            shutil.copy(f, folder / f.name)
    return folder


def _check_scene(path: pathlib.Path) -> None:
    from twin.planning import obstacles_from_scene

    try:
        obstacles = obstacles_from_scene(load_scene(path))
    except (SceneError, PlanningInputError) as e:  # twin plan prints these in one line, exit 2
        assert "\n" not in str(e)
        return
    for o in obstacles:
        for a in (o.points, o.triangles, o.dimensions):
            if a is not None:
                assert np.all(np.isfinite(a)) and np.all(np.abs(a) <= WORLD_EXTENT_M)
        if o.pose is not None:
            assert np.all(np.abs(o.pose[:3, 3]) <= WORLD_EXTENT_M)


@cases(150)
@given(base=st.sampled_from(SCENES), edits=EDITS)
def test_mutated_scene_bytes_fail_in_one_line(scene_copy, base, edits):
    path = scene_copy / f"mutated_{base}.json"
    path.write_bytes(mutate((scene_copy / f"{base}.json").read_bytes(), edits))
    _check_scene(path)


@cases(200)
@given(base=st.sampled_from(SCENES), where=st.floats(0.0, 1.0), value=VALUES)
def test_mutated_scene_fields_fail_in_one_line(scene_copy, base, where, value):
    doc = replace_at(json.loads((scene_copy / f"{base}.json").read_text()), where, value)
    path = scene_copy / f"fields_{base}.json"
    path.write_text(json.dumps(doc))
    _check_scene(path)


NUMBER_TOKENS = st.one_of(
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "1e308",
            "-1e308",
            "1e999",
            "0",
            "-0",
            "1e-320",
            "",
            "0x10",
            "1_0",
            "abc",
            "1e18",
            "999",
            "0.7071",
        ]
    ),
    st.floats(-2.0, 2.0).map(repr),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@pytest.fixture(scope="module")
def model():
    from twin.planning import Planner, PlannerSettings

    return Planner(PlannerSettings(seed=0)).model


@cases(300)
@given(tokens=st.lists(NUMBER_TOKENS, max_size=9))
def test_random_goals_fail_in_one_line_or_give_configurations(model, tokens):
    from twin.cli.plan import GoalError, check_goal, goal_configurations, parse_numbers

    text = ",".join(tokens)
    try:
        values = check_goal(parse_numbers(text, (3, 6, 7), "--goal"), text, WORLD_EXTENT_M)
    except GoalError as e:
        assert "\n" not in str(e)
        return
    home = np.asarray(model.home_q, dtype=float)
    q = goal_configurations(model, values, home)
    assert q.ndim == 2 and q.shape[1] == 6 and np.all(np.isfinite(q))


# ------------------------------------------------------------------------------ ONNX policies
@pytest.fixture(scope="module")
def sim_robot():
    from twin.backends import open_robot

    with open_robot("sim", seed=0) as robot:
        yield robot


PLACEHOLDER = b"@" * 48


@pytest.fixture(scope="module")
def policy_template(tmp_path_factory):
    """The shipped reach policy's bytes, and the key each placeholder value stands in for: every
    metadata value replaced in turn by ``PLACEHOLDER`` (same length in the file, so raw bytes
    can be written in its place)."""
    import onnx
    from twin.policies.evaluate import policy_path

    model = onnx.load(str(policy_path("reach")))
    keys = [p.key for p in model.metadata_props]
    return model.SerializeToString(), keys


def _policy_with(template: tuple[bytes, list[str]], key_index: int, value: bytes) -> bytes:
    import onnx

    data, keys = template
    model = onnx.load_from_string(data)
    key = keys[key_index % len(keys)]
    for p in model.metadata_props:
        if p.key == key:
            p.value = PLACEHOLDER.decode()
    raw = model.SerializeToString()
    value = (value + PLACEHOLDER)[: len(PLACEHOLDER)] if len(value) < len(PLACEHOLDER) else value
    if len(value) == len(PLACEHOLDER):
        return raw.replace(PLACEHOLDER, value, 1)
    # a longer value: through the onnx API (valid UTF-8 only)
    for p in model.metadata_props:
        if p.key == key:
            p.value = value.decode("utf-8", errors="replace")
    return model.SerializeToString()


def _check_policy(robot, path: pathlib.Path) -> None:
    from twin.cli.policy_commands import PolicyCommands
    from twin.control import OnnxRLController, OnnxRuntime, RobotStateAdapter, WorkerMode

    try:
        OnnxRuntime().initialize(path)
        controller = OnnxRLController(RobotStateAdapter(robot), PolicyCommands(), None)
        try:
            if not controller.create(path):
                raise controller.error
            if not controller.init(enable_data_collection=False, mode=WorkerMode.SYNC):
                raise controller.error
            for _ in range(3):
                controller.update(robot.read().t_us)
                robot.step()
        finally:
            controller.close()
    except Exception as e:
        assert one_line_error(e), f"{type(e).__name__}: {e}"


METADATA_VALUES = st.one_of(
    st.binary(max_size=48),
    st.sampled_from(
        [
            b"\xff",
            b"\xc3\x28",
            b"[" * 48,
            b"1" * 48,
            b"1e999",
            b'"0.1"',
            b"-1",
            b"nan",
            b"{}",
            b'"\xff"',
            b"null",
            b'{"type": "joint_targets"}',
        ]
    ),
    VALUES.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    st.integers(1, 10).map(lambda n: ("[" * 5000 * n + "]" * 5000 * n).encode()),
)


@cases(80)
@given(key=st.integers(0, 99), value=METADATA_VALUES)
def test_mutated_policy_metadata_fails_in_one_line(
    sim_robot, policy_template, tmp_path_factory, key, value
):
    path = tmp_path_factory.mktemp("onnx") / "policy.onnx"
    path.write_bytes(_policy_with(policy_template, key, value))
    _check_policy(sim_robot, path)


@cases(60)
@given(edits=EDITS)
def test_mutated_policy_bytes_fail_in_one_line(sim_robot, policy_template, tmp_path_factory, edits):
    path = tmp_path_factory.mktemp("onnx") / "policy.onnx"
    path.write_bytes(mutate(policy_template[0], edits))
    _check_policy(sim_robot, path)


# ------------------------------------------------------------------------------ cell packages
HOSTILE_MESHES = st.one_of(
    st.sampled_from(
        [
            "/etc/hostname",
            "../x.stl",
            "../../x.stl",
            "file:///etc/hostname",
            "file://../x.stl",
            "package://etc/hostname",
            "package://../../etc/hostname",
            "http://host/x.stl",
            "C:\\x.stl",
            "robot/../../x.stl",
            "",
            "./",
            "meshes/../../../etc/hostname",
        ]
    ),
    st.text(max_size=20),
)


@pytest.fixture(scope="module")
def cell_package(tmp_path_factory):
    """The shipped twin_arm cell packaged: its entries {name: bytes}."""
    folder = tmp_path_factory.mktemp("pkg")
    out = package_cell("twin_arm", folder / "twin_arm.zip", cells_dir=folder / "none")
    with zipfile.ZipFile(out) as z:
        return Entries({i.filename: z.read(i) for i in z.infolist()})


class Entries(dict):
    """A package's entries {name: bytes}, shown by name only in hypothesis's reports."""

    def __repr__(self) -> str:
        return f"Entries({sorted(self)})"


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return buf.getvalue()


def _check_install(root: pathlib.Path, package: bytes) -> None:
    path = root / "cell.zip"
    path.write_bytes(package)
    cells = root / "cells"
    before = sorted(p.name for p in root.iterdir())  # cells/ may be created: it is the target
    try:
        directory = install_package(path, cells)
    except (PackageError, CellError, PlanningInputError, FileExistsError) as e:
        assert one_line_error(e) or isinstance(e, PlanningInputError | FileExistsError), e
        assert sorted(p.name for p in root.iterdir() if p != cells) == before  # nothing beside
        assert not cells.exists() or not any(cells.iterdir())  # and no half-installed cell
        return
    assert directory.resolve().is_relative_to(cells.resolve())
    cell = load_cell(directory.name, cells)
    assert cell.urdf_path.resolve().is_relative_to(directory.resolve())


@cases(150)
@given(edits=EDITS)
def test_mutated_cell_zip_bytes_fail_in_one_line(cell_package, tmp_path_factory, edits):
    _check_install(tmp_path_factory.mktemp("cell"), mutate(_zip(cell_package), edits))


@cases(150)
@given(mesh=HOSTILE_MESHES, where=st.floats(0.0, 1.0), value=VALUES, change_json=st.booleans())
def test_cells_naming_outside_files_are_refused(
    cell_package, tmp_path_factory, mesh, where, value, change_json
):
    """A mesh reference planted in the URDF (or a cell.json field replaced): the cell installs
    only if every path it names stays inside it."""
    entries = dict(cell_package)
    urdf = next(n for n in entries if n.endswith(".urdf"))
    planted = (
        '<visual><geometry><mesh filename="'
        + mesh.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
        + '"/></geometry></visual>'
    )
    text = entries[urdf].decode()
    at = text.find("<collision>")
    entries[urdf] = (text[:at] + planted + text[at:]).encode()
    if change_json:
        name = next(n for n in entries if n.endswith("cell.json"))
        doc = replace_at(json.loads(entries[name]), where, value)
        entries[name] = json.dumps(doc).encode()
    root = tmp_path_factory.mktemp("cell")
    (root / "x.stl").write_text("solid x\nendsolid x\n")  # an outside file a mesh could name
    _check_install(root, _zip(entries))


# ------------------------------------------------------------------------------ the CLI itself
def _cli(*args: str, cwd: pathlib.Path) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [*TWIN, *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        cwd=cwd,
        env=clean_env(),
    )
    return proc, time.monotonic() - start


def _nested_scene(path: pathlib.Path) -> str:
    path.write_text("[" * 100_000 + "]" * 100_000)
    return str(path)


def _huge_box_scene(path: pathlib.Path) -> str:
    item = {"name": "floor", "kind": "box", "pose": [0, 0, -1, 1, 0, 0, 0], "size": [1e18] * 3}
    path.write_text(json.dumps({"format": "twin-scene", "version": 1, "items": [item]}))
    return str(path)


def _scenario(path: pathlib.Path, key: str, value: object) -> str:
    doc = tomllib.loads((shipped_suite() / "weigh_payload.toml").read_text())
    doc["task"][key] = value
    path.write_text(toml_document(doc))
    return str(path)


def _bad_policy(path: pathlib.Path) -> str:
    from twin.policies.evaluate import policy_path

    data = policy_path("reach").read_bytes()
    at = data.find(b"25.0", data.find(b"update_rate"))
    path.write_bytes(data[:at] + b"\xff5.0" + data[at + 4 :])
    return str(path)


CLI_CASES = {
    "plan zero quaternion": lambda d: ["plan", "--scene", "table", "--goal=0.3,0,0.3,0,0,0,0"],
    "plan inf quaternion": lambda d: ["plan", "--scene", "table", "--goal=0.3,0,0.3,1e308,0,0,0"],
    "plan 1e308 position": lambda d: ["plan", "--scene", "table", "--goal=1e308,0,0.3"],
    "plan nested scene": lambda d: ["plan", "--scene", _nested_scene(d / "n.json"), "--goal=0,0,1"],
    "plan 1e18 m box": lambda d: ["plan", "--scene", _huge_box_scene(d / "h.json"), "--goal=0,0,1"],
    "test kind list": lambda d: ["test", _scenario(d / "k.toml", "kind", ["ft_weigh"])],
    "test tare 1e30": lambda d: ["test", _scenario(d / "t.toml", "tare_s", 1e30)],
    "test ray unreachable": lambda d: ["test", str(shipped_suite()), "--ray", "127.0.0.1:1"],
    "run non-UTF-8 metadata": lambda d: ["run", "--policy", _bad_policy(d / "p.onnx")],
    "run nested steps file": lambda d: ["run", "--targets", _nested_scene(d / "s.json")],
    "run step of 1e300 s": lambda d: ["run", "--targets", _long_step(d / "l.json")],
}


def _long_step(path: pathlib.Path) -> str:
    path.write_text(json.dumps([{"target": [0.3, 0.0, 0.3], "duration_s": 1e300}]))
    return str(path)


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_the_cli_answers_bad_input_in_one_line(tmp_path, case):
    """Each case of issue 31 item 8 (and 5, 10) through the real CLI: exit 2, one line on
    stderr naming the input, no traceback, and not a hang."""
    args = CLI_CASES[case](tmp_path)
    proc, elapsed = _cli(*_with_out(args, tmp_path), cwd=tmp_path)
    lines = stderr_lines(proc.stderr)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "error" in lines[0] or "twin test:" in lines[0]
    print(f"{case}: exit 2 in {elapsed:.1f} s: {lines[0][:160]}")


def _with_out(args: list[str], folder: pathlib.Path) -> list[str]:
    return [*args, "--out", str(folder / "out"), "--no-render"] if args[0] == "plan" else args


def test_a_cell_with_meshes_packages_installs_and_opens(tmp_path):
    """A cell on the shipped UR5 (package:// meshes inside the assets): the package carries the
    meshes where the packaged URDF finds them, and the installed cell's model opens them from
    inside the installed cell only."""
    from twin.kinematics import ArmModel

    user = tmp_path / "user"
    (user / "ur5cell").mkdir(parents=True)
    doc = {"format": "twin-cell", "version": 1, "name": "ur5cell"}
    doc["robot"] = {"urdf": "asset:arms/ur5/ur5.urdf"}
    (user / "ur5cell" / "cell.json").write_text(json.dumps(doc))
    package = package_cell("ur5cell", tmp_path / "ur5.zip", cells_dir=user)
    with zipfile.ZipFile(package) as z:
        meshes = [n for n in z.namelist() if n.lower().endswith(".stl")]
    assert meshes and all(n.startswith("ur5cell/robot/meshes/") for n in meshes)
    installed = install_package(package, tmp_path / "cells")
    cell = load_cell("ur5cell", tmp_path / "cells")
    model = ArmModel.from_urdf(cell.urdf_path)
    assert len(model.joint_names) == 6
    from twin.kinematics.urdf import parse_urdf

    files = [f for link in parse_urdf(cell.urdf_path).links.values() for f in link.mesh_files]
    assert files and all(f.resolve().is_relative_to(installed.resolve()) for f in files if f)
