"""Foreign arms in the planner: mesh collision geometry, SRDF pairs, default flange and TCP.

The UR5 (meshes, ``assets/arms/ur5``) and pybullet_data's xArm6 (V-HACD pieces) load, plan, and
their sphere models are checked against PyBullet's exact geometry on the real meshes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from twin.assets import arms
from twin.benchmarks.planner_exact import ExactChecker, verify_path

from twin.kinematics import ArmModel, UrdfError
from twin.planning.collision import geometry, mesh_spheres, self_collision
from twin.planning.collision.robot_model import RobotSpheres
from twin.planning.planner import Planner
from twin.planning.requests import InitialState, PathRequest
from twin.planning.settings import PlannerSettings

SETTINGS = PlannerSettings(**arms.FOREIGN_ARM_SETTINGS)
ARMS = {"ur5": arms.ur5_mesh_model, "xarm6": arms.xarm6_model}


@pytest.fixture(scope="module", params=sorted(ARMS))
def arm(request):
    model = ARMS[request.param]()
    planner = Planner(SETTINGS, model=model)
    exact = ExactChecker(model.urdf_path, disabled_pairs=model.disabled_collision_pairs)
    yield request.param, model, planner, exact
    exact.close()


def _covered(points: np.ndarray, cover) -> np.ndarray:
    d = np.linalg.norm(points[:, None] - cover.centers[None], axis=-1) - cover.radii
    return d.min(axis=1) <= 0.0


def _mesh_shapes(model):
    for link in model.link_names:
        files = model.collision_mesh_files(link)
        for shape, file in zip(model.collision_shapes(link), files):
            if file is not None:
                yield link, shape, file


# ---------------------------------------------------------------------------------- loading
def test_foreign_arms_load_with_small_sphere_models(arm):
    _, model, planner, _ = arm
    robot = planner._robot
    count = sum(len(b.spheres.radii) for b in robot.urdf_bodies)
    assert model.n_joints == 6
    assert 10 <= count <= 60, count  # tens per arm, like VAMP's 40-sphere UR5
    assert all(b.spheres.radii.max() <= SETTINGS.max_sphere_radius for b in robot.urdf_bodies)
    # No flange/tcp link in either URDF: both default to the chain's last link.
    tip = model.fk(model.home_q, model.tip_link)
    np.testing.assert_allclose(model.fk(model.home_q, "flange"), tip, atol=1e-12)
    np.testing.assert_allclose(model.fk(model.home_q, "tcp"), tip, atol=1e-12)


def test_mesh_cover_holds_every_surface_point_of_mesh_and_hull(arm):
    """Dense surface samples (2 mm) of every collision mesh and of its convex pieces' hulls, and
    grid points inside the hulls, all lie in the union of the cover's spheres."""
    _, model, *_ = arm
    checked = 0
    for _, shape, file in _mesh_shapes(model):
        cover = mesh_spheres.cover_mesh_file(
            file, tuple(shape.dims), SETTINGS.max_sphere_radius, SETTINGS.max_sphere_slack
        )
        for h in mesh_spheres.piece_hulls(file, shape.dims):
            tris = mesh_spheres.hull_triangles(h)
            points = geometry.sample_triangles(tris, 0.002)
            lo, hi = h.min_bound, h.max_bound
            grid = np.stack(np.meshgrid(*[np.linspace(lo[i], hi[i], 12) for i in range(3)]), -1)
            grid = grid.reshape(-1, 3)
            inside = np.max(grid @ h.equations[:, :3].T + h.equations[:, 3], axis=1) <= 0
            points = np.vstack((points, grid[inside], h.points))  # the mesh's own vertices too
            assert _covered(points, cover).all(), file.name
            checked += len(points)
    assert checked > 10_000


def test_mesh_covers_are_tight():
    """Volume overshoot of the union of spheres over the hulls, per arm (documented figure)."""
    for make in ARMS.values():
        model = make()
        over = []
        for _, shape, file in _mesh_shapes(model):
            cover = mesh_spheres.cover_mesh_file(
                file, tuple(shape.dims), SETTINGS.max_sphere_radius, SETTINGS.max_sphere_slack
            )
            over.append(
                mesh_spheres.volume_overshoot(
                    cover, mesh_spheres.piece_hulls(file, shape.dims), 40_000
                )
            )
        assert 0.0 < np.median(over) < 3.0, over  # UR5 2.4, xArm6 1.1 (docs)


@given(
    hnp.arrays(np.float64, (12, 3), elements=st.floats(-0.1, 0.1)),
    st.integers(1, 6),
    st.lists(st.floats(0.0, 1.0), min_size=12, max_size=12),
)
def test_convex_cover_contains_the_hull(points, count, weights):
    """Property: any convex combination of the points lies in the cover of their hull."""
    try:
        h = mesh_spheres.hull(points)
    except mesh_spheres.MeshFileError:
        return
    cover = mesh_spheres.cover_convex(h, count)
    w = np.asarray(weights) + 1e-9
    inner = (w / w.sum()) @ points
    probes = np.vstack(
        (points, inner, geometry.sample_triangles(mesh_spheres.hull_triangles(h), 0.005))
    )
    assert _covered(probes, cover).all()


# ------------------------------------------------------------------------------- exactness
def test_no_configuration_pybullet_finds_colliding_is_reported_free(arm):
    _, model, planner, exact = arm
    q = self_collision.sample_configurations(model, 2500, seed=11)
    free = planner._checker.free(q)
    colliding = exact.colliding_many(q)
    assert colliding.sum() > 100 and free.sum() > 300, (colliding.sum(), free.sum())
    assert not np.any(free & colliding), np.flatnonzero(free & colliding)[:5]


#: Queries per arm of ``test_plans_between_free_configurations_are_free_in_pybullet``: the dense
#: exact check of one UR5 path on its STL meshes costs 3-5 s (1 mm steps), most of the test.
PLANS = {"ur5": 2, "xarm6": 4}


def test_plans_between_free_configurations_are_free_in_pybullet(arm):
    name, model, planner, exact = arm
    q = self_collision.sample_configurations(model, 400, seed=5)
    q = q[planner._checker.free(q)]
    solved = 0
    for i in range(PLANS[name]):
        start, goal = q[2 * i], q[2 * i + 1]
        result = planner.path(InitialState(start), PathRequest([goal]))
        assert result.error is None, (name, i, result.error)
        path = np.vstack([start, *[w.configuration for w in result.path()]])
        np.testing.assert_allclose(path[-1], goal, atol=1e-9)
        assert not verify_path(exact, path, planner._checker.travel), (name, i)
        solved += 1
    assert solved == PLANS[name]


# ------------------------------------------------------------------------------------ SRDF
def test_srdf_pairs_are_never_checked():
    model = arms.ur5_mesh_model()
    robot = RobotSpheres(model, SETTINGS.max_sphere_radius, SETTINGS.max_sphere_slack)
    assert ("base_link", "upper_arm_link") in model.disabled_collision_pairs
    assert len(model.disabled_collision_pairs) == 90  # VAMP's 88 plus our two
    c = robot.compiled()
    bodies = robot.bodies()
    checked = {
        tuple(sorted((bodies[a].name, bodies[b].name)))
        for a, b in zip(c.body_pair_a, c.body_pair_b)
    }
    assert robot.disabled_pairs and not (checked & robot.disabled_pairs)
    assert ("base_link#0", "upper_arm_link#0") in robot.disabled_pairs
    # Without the SRDF the pair is checked (it is always close).
    bare = RobotSpheres(
        ArmModel.from_urdf(model.urdf_path, srdf=False),
        SETTINGS.max_sphere_radius,
        SETTINGS.max_sphere_slack,
    )
    assert ("base_link#0", "upper_arm_link#0") in bare.kept_pairs


def test_srdf_beside_the_urdf_is_found_and_unknown_links_are_named(tmp_path):
    src = arms.ur5_urdf_path().parent
    folder = tmp_path / "ur5"
    shutil.copytree(src, folder)
    model = ArmModel.from_urdf(folder / "ur5.urdf")  # finds ur5.srdf beside it
    assert model.srdf_path == folder / "ur5.srdf" and len(model.disabled_collision_pairs) == 88
    assert (
        ArmModel.from_urdf(folder / "ur5.urdf", srdf=False).disabled_collision_pairs == frozenset()
    )
    bad = folder / "bad.srdf"
    bad.write_text('<robot><disable_collisions link1="base_link" link2="uper_arm_link"/></robot>')
    with pytest.raises(UrdfError, match=r"uper_arm_link.*did you mean 'upper_arm_link'"):
        ArmModel.from_urdf(folder / "ur5.urdf", srdf=bad)


def test_self_collision_matrix_is_deterministic_and_skips_adjacent_and_srdf_pairs():
    model = arms.ur5_mesh_model()
    robot = RobotSpheres(model, SETTINGS.max_sphere_radius, SETTINGS.max_sphere_slack, matrix=False)
    kept, closest = self_collision.generate(model, robot, samples=3000)
    again, _ = self_collision.generate(model, robot, samples=3000)
    assert kept == again and kept
    group = {b.name: b.group for b in robot.urdf_bodies}
    for a, b in kept:
        assert abs(group[a] - group[b]) >= 2
        assert tuple(sorted((a, b))) not in robot.disabled_pairs
    assert all(f"{a}|{b}" in closest for a, b in kept)


# ------------------------------------------------------------------- files and URIs
def test_package_uris_resolve_upwards_and_missing_files_are_named(tmp_path):
    pkg = tmp_path / "my_robot"
    (pkg / "urdf").mkdir(parents=True)
    (pkg / "meshes").mkdir()
    shutil.copy(
        arms.ur5_urdf_path().parent / "meshes/ur5/collision/wrist3.stl", pkg / "meshes/w.stl"
    )
    urdf = arms.ur5_urdf_path().read_text()
    text = urdf.replace(
        '<mesh filename="package://meshes/ur5/collision/wrist3.stl"/>',
        '<mesh filename="package://my_robot/meshes/w.stl" scale="2 2 2"/>',
    )
    (pkg / "urdf" / "r.urdf").write_text(
        text.replace("package://meshes/", f"file://{arms.ur5_urdf_path().parent}/meshes/").replace(
            '"meshes/robotiq', f'"{arms.ur5_urdf_path().parent}/meshes/robotiq'
        )
    )
    model = ArmModel.from_urdf(pkg / "urdf" / "r.urdf", srdf=False)
    (shape,) = model.collision_shapes("wrist_3_link")
    assert shape.kind == "mesh" and shape.dims == (2.0, 2.0, 2.0)
    assert model.collision_mesh_files("wrist_3_link") == (pkg / "meshes" / "w.stl",)
    (pkg / "meshes" / "w.stl").unlink()
    with pytest.raises(
        UrdfError, match=r"wrist_3_link.*package://my_robot/meshes/w.stl.*not found"
    ):
        ArmModel.from_urdf(pkg / "urdf" / "r.urdf", srdf=False)


def test_ascii_stl_and_obj_objects_are_read(tmp_path):
    tri = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    faces = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]
    lines = ["solid t"]
    for f in faces:
        lines += ["facet normal 0 0 0", "outer loop"]
        lines += [f"vertex {x} {y} {z}" for x, y, z in tri[list(f)]]
        lines += ["endloop", "endfacet"]
    (tmp_path / "t.stl").write_text("\n".join([*lines, "endsolid t"]))
    (part,) = mesh_spheres.read_parts(tmp_path / "t.stl", (0.1, 0.1, 0.1))
    np.testing.assert_allclose(np.sort(part, axis=0), np.sort(0.1 * tri, axis=0))
    obj = [
        "o a",
        *[f"v {x} {y} {z}" for x, y, z in tri],
        *[f"f {a + 1} {b + 1} {c + 1}" for a, b, c in faces],
    ]
    obj += [
        "o b",
        *[f"v {x + 5} {y} {z}" for x, y, z in tri],
        *[f"f {a + 5} {b + 5} {c + 5}" for a, b, c in faces],
    ]
    (tmp_path / "t.obj").write_text("\n".join(obj))
    parts = mesh_spheres.read_parts(tmp_path / "t.obj")
    assert len(parts) == 2 and parts[1][:, 0].min() == 5.0
    (tmp_path / "t.ply").write_text("ply")
    with pytest.raises(mesh_spheres.MeshFileError, match=r"expected an \.stl or \.obj"):
        mesh_spheres.read_parts(tmp_path / "t.ply")


# ------------------------------------------------------------------------ flange and TCP
def test_flange_and_tcp_offsets_and_our_arm_unchanged():
    offset = np.eye(4)
    offset[:3, 3] = (0.0, 0.0, 0.1)
    tcp = np.eye(4)
    tcp[:3, 3] = (0.02, 0.0, 0.05)
    model = ArmModel.from_urdf(arms.xarm6_urdf_path(), flange_offset=offset, tcp_offset=tcp)
    q = np.full(6, 0.3)
    np.testing.assert_allclose(model.fk(q, "flange"), model.fk(q, "link6") @ offset, atol=1e-12)
    np.testing.assert_allclose(model.fk(q, "tcp"), model.fk(q, "link6") @ offset @ tcp, atol=1e-12)
    ours = ArmModel.default()
    assert ours.link_names[-1] == "tcp" and "flange_frame" not in {
        j.name for j in ours.robot.joints
    }
    assert ours.disabled_collision_pairs == frozenset()
    with pytest.raises(ValueError, match="has a 'flange' link"):
        ArmModel.from_urdf(ours.urdf_path, flange_offset=offset)


def test_the_planner_imports_scipy_only_for_a_mesh():
    """scipy's hulls (an import of about 1-2 s) are loaded when a mesh is covered, not by the
    planner's import: the shipped arm has primitive shapes only."""
    code = "import sys, twin.planning; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
