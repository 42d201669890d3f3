"""The shipped arm URDF: names, inertials, primitives, limits, home, and PyBullet loading it."""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from twin import assets
from twin.kinematics import ArmModel

MODEL = ArmModel.default()
LINKS = (
    "base_link",
    "link_1",
    "link_2",
    "link_3",
    "link_4",
    "link_5",
    "link_6",
    "flange",
    "ft_sensor",
    "imu",
    "tool",
    "tcp",
)
FIXED = {
    "flange_joint": ("link_6", "flange"),
    "ft_sensor_joint": ("flange", "ft_sensor"),
    "imu_joint": ("ft_sensor", "imu"),
    "tool_joint": ("ft_sensor", "tool"),
    "tcp_joint": ("tool", "tcp"),
}
GRAVITY = np.array([0.0, 0.0, -9.81])


def test_urdf_is_found_through_importlib_resources():
    path = assets.arm_urdf_path()
    assert path.name == "twin_arm.urdf"
    assert path.is_file()
    assert (path.parent / "README.md").is_file()
    assert MODEL.urdf_path == path


def test_names_follow_the_contract():
    assert MODEL.joint_names == tuple(f"joint_{i}" for i in range(1, 7))
    assert set(MODEL.link_names) == set(LINKS)
    joints = {j.name: j for j in MODEL.robot.joints}
    for i in range(1, 7):
        assert joints[f"joint_{i}"].type == "revolute"
        parent = "base_link" if i == 1 else f"link_{i - 1}"
        assert (joints[f"joint_{i}"].parent, joints[f"joint_{i}"].child) == (parent, f"link_{i}")
    for name, (parent, child) in FIXED.items():
        assert joints[name].type == "fixed"
        assert (joints[name].parent, joints[name].child) == (parent, child)


def test_every_link_has_a_physical_inertial():
    for name in LINKS:
        inertial = MODEL.link_inertial(name)
        assert inertial is not None, name
        assert inertial.mass > 0.0
        eig = np.linalg.eigvalsh(inertial.inertia)
        assert np.all(eig > 0.0), name
        # Triangle inequality of principal moments (a real mass distribution).
        assert eig[0] + eig[1] >= eig[2] * (1 - 1e-12), name
    assert MODEL.link_mass("ft_sensor") == pytest.approx(0.1)
    assert 0.2 <= MODEL.link_mass("tool") <= 0.3
    assert MODEL.link_mass("imu") == MODEL.link_mass("tcp") == pytest.approx(1e-3)
    assert MODEL.total_mass == pytest.approx(sum(MODEL.link_mass(n) for n in LINKS))


def test_collision_geometry_is_primitives_with_link_frame_origins():
    kinds = set()
    for name in LINKS:
        for kind, dims, origin in MODEL.collision_shapes(name):
            kinds.add(kind)
            assert kind in ("box", "cylinder", "sphere")
            assert len(dims) == {"box": 3, "cylinder": 2, "sphere": 1}[kind]
            assert min(dims) > 0.0
            assert origin.shape == (4, 4)
            np.testing.assert_allclose(origin[:3, :3].T @ origin[:3, :3], np.eye(3), atol=1e-12)
    assert {"box", "cylinder"} <= kinds
    for moving in ("link_1", "link_2", "link_3", "link_4", "link_5", "tool"):
        assert MODEL.collision_shapes(moving), moving
    assert MODEL.collision_shapes("tcp") == []


def test_limits_match_the_documented_servos_and_reductions():
    np.testing.assert_allclose(np.degrees(MODEL.upper), [170, 115, 145, 170, 120, 270])
    np.testing.assert_allclose(MODEL.lower, -MODEL.upper)
    stall = np.array([10.6, 10.6, 10.6, 4.1, 4.1, 4.1])  # XM540-W270 x3, XM430-W350 x3
    rpm = np.array([30.0, 30.0, 30.0, 46.0, 46.0, 46.0])
    ratio = np.array([2.0, 4.0, 2.0, 1.0, 2.0, 1.0])
    efficiency = np.where(ratio > 1, 0.9, 1.0)
    np.testing.assert_allclose(MODEL.effort_limits, stall * ratio * efficiency, atol=0.005)
    np.testing.assert_allclose(MODEL.velocity_limits, rpm * 2 * np.pi / 60 / ratio, atol=5e-4)


def _gravity_torques(q: np.ndarray, payload_kg: float) -> np.ndarray:
    """Static joint torques (6,) N m holding the arm and a payload at the TCP against gravity."""
    frames = MODEL.fk_all(q)
    masses = [
        (frames[n][:3, :3] @ MODEL.link_inertial(n).com + frames[n][:3, 3], MODEL.link_mass(n), n)
        for n in LINKS
    ]
    masses.append((frames["tcp"][:3, 3], payload_kg, "tcp"))
    tau = np.zeros(6)
    for j, joint in enumerate(MODEL.robot.joints[:6]):
        frame = frames[joint.child]
        axis, origin = frame[:3, :3] @ joint.axis, frame[:3, 3]
        for pos, mass, link in masses:
            if j in MODEL.tree.path_joints(link):
                tau[j] += np.cross(pos - origin, mass * GRAVITY) @ axis
    return tau


def test_reductions_hold_a_1kg_payload_stretched_out_with_margin():
    stretched = np.array([0.0, np.pi / 2, MODEL.closed_form.q3_stretched, 0.0, 0.0, 0.0])
    tcp = MODEL.fk(stretched)[:3, 3]
    assert 0.6 <= np.hypot(tcp[0], tcp[1]) <= 0.9  # reach from the joint-1 axis
    tau = np.abs(_gravity_torques(stretched, payload_kg=1.0))
    assert tau[1] > 10.6  # one XM540 at the shoulder would not be enough ...
    assert np.all(tau[[1, 2, 4]] * 2.0 < MODEL.effort_limits[[1, 2, 4]])  # ... >= 2x margin


def test_home_is_tool_down_elbow_bent_and_well_inside_the_limits():
    np.testing.assert_allclose(np.degrees(MODEL.home_q), [0, 20, 90, 0, 70, 0], atol=1e-12)
    margin = np.minimum(MODEL.home_q - MODEL.lower, MODEL.upper - MODEL.home_q)
    assert np.all(margin >= np.radians(50) - 1e-9)
    tcp = MODEL.fk(MODEL.home_q)
    np.testing.assert_allclose(tcp[:3, 2], [0, 0, -1], atol=1e-12)  # tool z points down
    np.testing.assert_array_equal(MODEL.posture(MODEL.home_q), [1, 1, 1])
    jac = MODEL.jacobian(MODEL.home_q)
    assert np.linalg.svd(jac, compute_uv=False).min() > 0.05  # far from any singularity


@pytest.fixture(scope="module")
def bullet():
    client = pb.connect(pb.DIRECT)
    body = pb.loadURDF(
        str(assets.arm_urdf_path()),
        useFixedBase=True,
        flags=pb.URDF_USE_INERTIA_FROM_FILE,
        physicsClientId=client,
    )
    yield client, body
    pb.disconnect(client)


def test_pybullet_loads_it_with_the_expected_links_and_masses(bullet):
    client, body = bullet
    assert pb.getBodyInfo(body, physicsClientId=client)[0].decode() == "base_link"
    n = pb.getNumJoints(body, physicsClientId=client)
    infos = [pb.getJointInfo(body, i, physicsClientId=client) for i in range(n)]
    assert [info[12].decode() for info in infos] == list(LINKS[1:])
    assert [info[1].decode() for info in infos[:6]] == list(MODEL.joint_names)
    for i, info in enumerate(infos):
        link = info[12].decode()
        dyn = pb.getDynamicsInfo(body, i, physicsClientId=client)
        assert dyn[0] == pytest.approx(MODEL.link_mass(link))
        np.testing.assert_allclose(dyn[2], np.diag(MODEL.link_inertial(link).inertia), rtol=1e-9)
        np.testing.assert_allclose(dyn[3], MODEL.link_inertial(link).com, atol=1e-12)
        if i < 6:
            assert (info[8], info[9]) == pytest.approx((MODEL.lower[i], MODEL.upper[i]))
