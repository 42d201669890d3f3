"""Inverse dynamics and the mass matrix against PyBullet's, on thousands of random states.

PyBullet's ``calculateInverseDynamics`` / ``calculateMassMatrix`` run Bullet's double-precision
multibody algorithms on the URDF's inertials (``URDF_USE_INERTIA_FROM_FILE``) and ignore joint
damping and friction (the shipped URDF declares none either), so they are the same model: the
agreement is rounding (about 1e-15 relative; the bound is 1e-9).
"""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from twin.dynamics import ArmDynamics, rnea
from twin.kinematics import ArmModel

REL_TOL = 1e-9
N_STATES = 3000


def _relative(ours: np.ndarray, ref: np.ndarray, axes) -> np.ndarray:
    scale = np.maximum(np.linalg.norm(ref, axis=axes), 1e-12)
    return np.linalg.norm(ours - ref, axis=axes) / scale


def _states(model: ArmModel, rng: np.random.Generator, n: int):
    q = rng.uniform(model.lower, model.upper, (n, 6))
    qd = rng.uniform(-1.0, 1.0, (n, 6)) * model.velocity_limits * 2.0
    qdd = rng.uniform(-20.0, 20.0, (n, 6))
    return q, qd, qdd


@pytest.fixture(scope="module")
def client():
    cid = pb.connect(pb.DIRECT)
    pb.setGravity(0.0, 0.0, -9.81, physicsClientId=cid)
    yield cid
    pb.disconnect(cid)


def _load(client: int, path) -> int:
    return pb.loadURDF(
        str(path), useFixedBase=True, flags=pb.URDF_USE_INERTIA_FROM_FILE, physicsClientId=client
    )


def _reference(client: int, body: int, q, qd, qdd):
    tau = np.array(
        [
            pb.calculateInverseDynamics(
                body, a.tolist(), b.tolist(), c.tolist(), physicsClientId=client
            )
            for a, b, c in zip(q, qd, qdd)
        ]
    )
    mass = np.array([pb.calculateMassMatrix(body, a.tolist(), physicsClientId=client) for a in q])
    return tau, mass


def test_inverse_dynamics_and_mass_matrix_match_pybullet(client):
    dyn = ArmDynamics.default()
    body = _load(client, dyn.arm.urdf_path)
    q, qd, qdd = _states(dyn.arm, np.random.default_rng(17), N_STATES)
    tau_ref, mass_ref = _reference(client, body, q, qd, qdd)
    tau, mass = dyn.inverse_dynamics(q, qd, qdd), dyn.mass_matrix(q)
    assert _relative(tau, tau_ref, 1).max() < REL_TOL
    assert _relative(mass, mass_ref, (1, 2)).max() < REL_TOL
    # the vectorised reference kernels (base-frame prefix sums, CRBA) agree as well
    assert _relative(rnea.inverse_dynamics(dyn.bodies, q, qd, qdd), tau_ref, 1).max() < REL_TOL
    assert _relative(rnea.mass_matrix(dyn.bodies, q), mass_ref, (1, 2)).max() < REL_TOL
    # single configurations give the batch's numbers
    np.testing.assert_allclose(
        dyn.inverse_dynamics(q[5], qd[5], qdd[5]), tau[5], rtol=0, atol=1e-13
    )
    np.testing.assert_allclose(dyn.mass_matrix(q[5]), mass[5], rtol=0, atol=1e-15)
    # gravity and Coriolis parts separately
    zero = np.zeros_like(q[:200])
    g_ref, _ = _reference(client, body, q[:200], zero, zero)
    assert _relative(dyn.gravity_torques(q[:200]), g_ref, 1).max() < REL_TOL


def test_a_payload_at_the_flange_matches_pybullet_with_the_payload_in_the_urdf(client, tmp_path):
    mass, com = 0.8, np.array([0.02, -0.01, 0.06])
    inertia = np.diag([2e-3, 3e-3, 1e-3])
    text = ArmModel.default().urdf_path.read_text()
    link = (
        '<link name="payload"><inertial>'
        f'<origin xyz="{com[0]} {com[1]} {com[2]}" rpy="0 0 0"/><mass value="{mass}"/>'
        '<inertia ixx="2e-3" ixy="0" ixz="0" iyy="3e-3" iyz="0" izz="1e-3"/></inertial></link>'
        '<joint name="payload_joint" type="fixed"><parent link="flange"/><child link="payload"/>'
        '<origin xyz="0 0 0" rpy="0 0 0"/></joint></robot>'
    )
    path = tmp_path / "arm_with_payload.urdf"
    path.write_text(text.replace("</robot>", link))
    body = _load(client, path)
    dyn = ArmDynamics.default().with_payload(mass, com, inertia, link="flange")
    q, qd, qdd = _states(dyn.arm, np.random.default_rng(18), 500)
    tau_ref, mass_ref = _reference(client, body, q, qd, qdd)
    assert _relative(dyn.inverse_dynamics(q, qd, qdd), tau_ref, 1).max() < REL_TOL
    assert _relative(dyn.mass_matrix(q), mass_ref, (1, 2)).max() < REL_TOL
    # and it is not the arm without it
    assert _relative(ArmDynamics.default().inverse_dynamics(q, qd, qdd), tau_ref, 1).max() > 1e-3


def test_gravity_torques_are_inverse_dynamics_at_rest():
    from twin.kinematics.gravity import gravity_torques

    dyn = ArmDynamics.default()
    q = np.random.default_rng(3).uniform(dyn.arm.lower, dyn.arm.upper, (50, 6))
    zero = np.zeros_like(q)
    np.testing.assert_array_equal(gravity_torques(dyn.arm, q), dyn.inverse_dynamics(q, zero, zero))
    np.testing.assert_array_equal(gravity_torques(dyn.arm, q[0]), dyn.gravity_torques(q)[0])


def test_bad_input_is_refused_with_a_message():
    dyn = ArmDynamics.default()
    with pytest.raises(ValueError, match="shape"):
        dyn.inverse_dynamics(np.zeros(5), np.zeros(5), np.zeros(5))
    with pytest.raises(ValueError, match="share one shape"):
        dyn.inverse_dynamics(np.zeros(6), np.zeros((2, 6)), np.zeros(6))
    with pytest.raises(ValueError, match="non-finite"):
        dyn.mass_matrix([0, 0, np.nan, 0, 0, 0])
    with pytest.raises(ValueError, match="mass"):
        dyn.with_payload(-1.0)
    with pytest.raises(ValueError, match="unknown link"):
        dyn.with_payload(1.0, link="nowhere")
    with pytest.raises(ValueError, match="fixed to the base"):
        dyn.with_payload(1.0, link="base_link")
    with pytest.raises(ValueError, match="gravity"):
        ArmDynamics(dyn.arm, gravity=[0, 0])
