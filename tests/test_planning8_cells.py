"""Cells (cells.py): layout, settings per profile, attachments, generate with progress,
package_cell refusals, install_package rejecting unsafe archives without writing outside."""

from __future__ import annotations

import json
import stat
import zipfile

import pytest

from twin.planning import PlannerSettings, PlanningInputError, Profile
from twin.planning.cells import (
    CellError,
    PackageError,
    generate,
    install_package,
    load_cell,
    package_cell,
)


@pytest.fixture
def cells(tmp_path):
    """A user cells directory holding ``quick``: the shipped cell with a tiny sample count."""
    shipped = load_cell("twin_arm", tmp_path / "none")
    config = json.loads(json.dumps(shipped.config))
    config["name"] = "quick"
    config["planner"]["testing"]["self_collision_samples"] = 60
    root = tmp_path / "cells"
    (root / "quick").mkdir(parents=True)
    (root / "quick" / "cell.json").write_text(json.dumps(config))
    return root


def tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_shipped_cell_loads_with_profiles_and_attachments(tmp_path):
    cell = load_cell("twin_arm", tmp_path)
    assert cell.urdf_path.name == "twin_arm.urdf" and cell.urdf_path.is_file()
    assert set(cell.attachment_names) == {"suction_cup", "wrist_camera"}
    prod = cell.settings("production")
    assert prod.profile is Profile.PRODUCTION and prod.max_iterations == 6000
    assert cell.settings("testing").max_iterations == 3000
    cup = cell.attachment_elements(["suction_cup"])
    assert len(cup) == 1 and cup[0].compliant_box is not None
    assert cell.attachment_elements([]) == []
    with pytest.raises(PlanningInputError, match=r"\['gripper'\] are not defined"):
        cell.attachment_elements(["suction_cup", "gripper"])
    with pytest.raises(CellError, match="no cell 'nowhere'"):
        load_cell("nowhere", tmp_path)
    with pytest.raises(CellError, match="plain directory name"):
        load_cell("../twin_arm", tmp_path)


def test_generate_reports_progress_and_writes_the_cell_data(cells):
    calls = []
    out = generate(
        PlannerSettings("quick", "testing"), lambda p, s: calls.append((p, s)), cells_dir=cells
    )
    assert out == cells / "quick" / "generated" / "testing"
    percents = [p for p, _ in calls]
    assert percents[0] == 0.0 and percents[-1] == 100.0
    assert percents == sorted(percents)
    texts = [s for _, s in calls]
    assert texts[0] == "Loading the robot model" and texts[-1] == "Done"
    assert "Generating the self-collision matrix" in texts
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["files"] == ["spheres.json", "self_collision.json"]
    spheres = json.loads((out / "spheres.json").read_text())
    assert len(spheres["bodies"]) > 5
    matrix = json.loads((out / "self_collision.json").read_text())
    assert matrix["samples"] == 60 and len(matrix["kept_pairs"]) > 0


def test_generate_runs_pluggable_stages_and_keeps_old_data_when_a_stage_fails(cells):
    settings = PlannerSettings("quick", "production")

    def first(ctx):
        ctx.report(0.5)
        return {"a.json": {"x": 1}}

    calls = []
    out = generate(
        settings, lambda p, s: calls.append((p, s)), stages=[("one", first)], cells_dir=cells
    )
    assert calls == [(0.0, "one"), (50.0, "one"), (100.0, "Done")]
    assert json.loads((out / "a.json").read_text()) == {"x": 1}

    def broken(ctx):
        raise RuntimeError("stage failed")

    with pytest.raises(RuntimeError, match="stage failed"):
        generate(settings, stages=[("one", first), ("two", broken)], cells_dir=cells)
    assert json.loads((out / "a.json").read_text()) == {"x": 1}  # the previous output stays
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]


def test_package_cell_refuses_existing_files_missing_folders_and_unknown_cells(cells, tmp_path):
    existing = tmp_path / "exists.zip"
    existing.write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        package_cell("quick", existing, cells_dir=cells)
    assert existing.read_bytes() == b"keep me"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        package_cell("quick", tmp_path / "missing" / "cell.zip", cells_dir=cells)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(CellError, match="no cell"):
        package_cell("unknown", tmp_path / "u.zip", cells_dir=cells)
    with pytest.raises(CellError, match="no generated production data"):
        package_cell("quick", tmp_path / "g.zip", ["production"], cells_dir=cells)
    assert not (tmp_path / "g.zip").exists()


def test_package_and_install_round_trip(cells, tmp_path):
    generate(PlannerSettings("quick", "testing"), cells_dir=cells)
    pkg = package_cell("quick", tmp_path / "quick.zip", ["testing"], cells_dir=cells)
    names = zipfile.ZipFile(pkg).namelist()
    assert "quick/cell.json" in names and "quick/robot/twin_arm.urdf" in names
    assert "quick/generated/testing/self_collision.json" in names
    target = tmp_path / "other"
    installed = install_package(pkg, target)
    assert installed == target / "quick"
    cell = load_cell("quick", target)
    assert cell.urdf_path == target / "quick" / "robot" / "twin_arm.urdf"
    assert cell.urdf_path.read_bytes() == load_cell("twin_arm", target).urdf_path.read_bytes()
    with pytest.raises(FileExistsError):
        install_package(pkg, target)
    install_package(pkg, target, overwrite=True)
    assert (target / "quick" / "generated" / "testing" / "manifest.json").is_file()
    assert not [p for p in target.iterdir() if p.name.startswith(".")]


def evil_zip(path, entries):
    """A zip with ``entries``: (name, data, unix mode or None)."""
    with zipfile.ZipFile(path, "w") as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            if mode is not None:
                info.external_attr = mode << 16
            z.writestr(info, data)
    return path


CELL = json.dumps(
    {"format": "twin-cell", "version": 1, "name": "bad", "robot": {"urdf": "robot/a.urdf"}}
)


@pytest.mark.parametrize(
    ("entry", "mode", "message"),
    [
        ("bad/../../escaped.txt", None, "escapes its directory"),
        ("/tmp/absolute.txt", None, "absolute path"),
        ("bad/link", stat.S_IFLNK | 0o777, "symbolic link"),
        ("bad/fifo", stat.S_IFIFO | 0o644, "not a regular file"),
        ("bad\\..\\win.txt", None, "portable"),
        ("C:/win.txt", None, "portable"),
        ("other/cell.json", None, "exactly one cell directory"),
    ],
)
def test_install_rejects_unsafe_entries_and_writes_nothing(tmp_path, entry, mode, message):
    target = tmp_path / "target" / "cells"
    target.mkdir(parents=True)
    outside = tmp_path / "target"
    pkg = evil_zip(
        tmp_path / "evil.zip",
        [("bad/cell.json", CELL, None), ("bad/robot/a.urdf", "<robot/>", None), (entry, "x", mode)],
    )
    before = tree(tmp_path)
    with pytest.raises(PackageError, match=message):
        install_package(pkg, target)
    assert tree(tmp_path) == before
    assert tree(outside) == ["cells"]


def test_install_rejects_archives_that_are_not_cells(tmp_path):
    target = tmp_path / "cells"
    with pytest.raises(PackageError, match=r"no bad/cell\.json"):
        install_package(evil_zip(tmp_path / "a.zip", [("bad/x.txt", "x", None)]), target)
    (tmp_path / "b.zip").write_bytes(b"not a zip")
    with pytest.raises(PackageError, match="not a readable zip"):
        install_package(tmp_path / "b.zip", target)
    wrong = json.dumps({"format": "other"})
    with pytest.raises(CellError, match="format"):
        install_package(evil_zip(tmp_path / "c.zip", [("bad/cell.json", wrong, None)]), target)
    assert not (target / "bad").exists()
    assert not [p for p in target.iterdir() if p.name.startswith(".")]
