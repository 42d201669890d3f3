"""The scene file parser (``twin.scenes``): shipped scenes, format checks, mesh and cloud files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from twin.scenes import (
    SHIPPED_SCENES,
    ItemKind,
    SceneFormatError,
    load_scene,
    read_mesh,
    scene_path,
    scenes_dir,
)


def write_scene(tmp_path: Path, items: list[dict], **top) -> Path:
    doc = {"format": "twin-scene", "version": 1, "name": "t", "items": items, **top}
    path = tmp_path / "scene.json"
    path.write_text(json.dumps(doc))
    return path


BOX = {"name": "b", "kind": "box", "pose": [0, 0, 0, 1, 0, 0, 0], "size": [0.1, 0.2, 0.3]}


@pytest.mark.parametrize("name", SHIPPED_SCENES)
def test_shipped_scenes_parse(name):
    scene = load_scene(name)
    assert scene.name == name and scene.path == scene_path(name)
    assert scene.description
    assert len(set(scene.names)) == len(scene.items) > 0
    for item in scene.items:
        assert item.pose.shape == (7,) and item.pose[3] >= 0
        assert np.linalg.norm(item.pose[3:]) == pytest.approx(1.0)
        assert np.all(item.dims > 0)


def test_shipped_scenes_cover_every_kind_and_both_mesh_formats():
    items = [it for name in SHIPPED_SCENES for it in load_scene(name).items]
    assert {it.kind for it in items} == set(ItemKind)
    assert {it.mesh_path.suffix for it in items if it.kind is ItemKind.MESH} == {".obj", ".stl"}


def test_bin_point_cloud_lies_inside_the_bin():
    scene = load_scene("bin")
    cloud, bin_item = scene.item("bin_objects"), scene.item("bin")
    assert cloud.points.shape[1] == 3 and len(cloud.points) >= 1000
    assert cloud.colors.shape == cloud.points.shape
    assert np.all((cloud.colors >= 0) & (cloud.colors <= 1))
    np.testing.assert_array_equal(cloud.pose, bin_item.pose)  # cloud given in the bin frame
    mesh = bin_item.mesh()
    lo, hi = mesh.vertices.min(0), mesh.vertices.max(0)
    assert np.all(cloud.points >= lo) and np.all(cloud.points <= hi)
    world = cloud.world_points()
    np.testing.assert_allclose(world, cloud.points + cloud.pose[:3])  # identity rotation


def test_pose_is_normalised_and_canonical(tmp_path):
    item = dict(BOX, pose=[1, 2, 3, -0.7071, 0, 0, -0.7071])
    scene = load_scene(write_scene(tmp_path, [item]))
    pose = scene.item("b").pose
    np.testing.assert_allclose(pose[3:], [np.sqrt(0.5), 0, 0, np.sqrt(0.5)])
    m = scene.item("b").world_T_item
    np.testing.assert_allclose(m[:3, 3], [1, 2, 3])
    np.testing.assert_allclose(m[:3, :3] @ [1, 0, 0], [0, 1, 0], atol=1e-12)  # yaw +90 deg
    with pytest.raises(ValueError):
        pose[0] = 5.0  # read-only


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kind": "cone"}, "kind"),
        ({"pose": [0, 0, 0, 1, 0, 0]}, "pose"),
        ({"pose": [0, 0, 0, 2, 0, 0, 0]}, "unit quaternion"),
        ({"size": [0.1, -0.2, 0.3]}, "> 0"),
        ({"size": [0.1, 0.2]}, "size"),
        ({"name": ""}, "name"),
    ],
)
def test_malformed_items_are_refused_with_a_reason(tmp_path, change, message):
    with pytest.raises(SceneFormatError, match=message):
        load_scene(write_scene(tmp_path, [dict(BOX, **change)]))


def test_malformed_files_are_refused(tmp_path):
    with pytest.raises(SceneFormatError, match="unique"):
        load_scene(write_scene(tmp_path, [BOX, BOX]))
    with pytest.raises(SceneFormatError, match="format"):
        load_scene(write_scene(tmp_path, [BOX], format="other"))
    missing = {"name": "m", "kind": "mesh", "pose": BOX["pose"], "file": "nope.obj"}
    with pytest.raises(SceneFormatError, match="does not exist"):
        load_scene(write_scene(tmp_path, [missing]))
    np.save(tmp_path / "flat.npy", np.zeros((10, 2)))
    cloud = {
        "name": "c",
        "kind": "point_cloud",
        "pose": BOX["pose"],
        "file": "flat.npy",
        "point_radius": 0.01,
    }
    with pytest.raises(SceneFormatError, match=r"\(N, 3\)"):
        load_scene(write_scene(tmp_path, [cloud]))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SceneFormatError, match="JSON"):
        load_scene(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="shipped"):
        scene_path("kitchen")


def test_obj_reader_fans_polygons_and_resolves_negative_indices(tmp_path):
    obj = tmp_path / "quad.obj"
    obj.write_text(
        "o q\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvn 0 0 1\nf 1//1 2//1 3//1 4//1\nf -4 -3 -1\n"
    )
    mesh = read_mesh(obj)
    assert mesh.vertices.shape == (4, 3)
    np.testing.assert_array_equal(mesh.faces, [[0, 1, 2], [0, 2, 3], [0, 1, 3]])


def test_ascii_and_binary_stl_give_the_same_triangles(tmp_path):
    binary = read_mesh(scenes_dir() / "wedge.stl")
    lines = ["solid w"]
    for face in binary.faces:
        lines += ["facet normal 0 0 0", "outer loop"]
        lines += ["vertex " + " ".join(repr(float(c)) for c in v) for v in binary.vertices[face]]
        lines += ["endloop", "endfacet"]
    (tmp_path / "w.stl").write_text("\n".join([*lines, "endsolid w"]))
    ascii_mesh = read_mesh(tmp_path / "w.stl")
    np.testing.assert_array_equal(
        ascii_mesh.vertices[ascii_mesh.faces], binary.vertices[binary.faces]
    )
    assert binary.faces.shape == (8, 3)  # a closed triangular prism


def test_mesh_item_is_scaled(tmp_path):
    item = {
        "name": "w",
        "kind": "mesh",
        "pose": BOX["pose"],
        "file": str(scenes_dir() / "wedge.stl"),
        "scale": [2, 1, 0.5],
    }
    mesh = load_scene(write_scene(tmp_path, [item])).item("w").mesh()
    np.testing.assert_allclose(mesh.vertices.max(0), [0.12, 0.04, 0.03])


def test_the_parser_does_not_import_a_physics_engine():
    code = (
        "import sys, twin.scenes; twin.scenes.load_scene('bin'); print('pybullet' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "False"
