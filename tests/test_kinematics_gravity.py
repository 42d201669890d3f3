"""Gravity torques from the URDF inertials equal PyBullet's inverse dynamics at rest."""

import numpy as np
import pybullet as p
from twin.assets import arm_urdf_path

from twin.kinematics import ArmModel
from twin.kinematics.gravity import gravity_torques


def test_gravity_torques_match_pybullet_inverse_dynamics():
    model = ArmModel.default()
    client = p.connect(p.DIRECT)
    try:
        p.setGravity(0, 0, -9.81, physicsClientId=client)
        body = p.loadURDF(
            str(arm_urdf_path()),
            useFixedBase=True,
            flags=p.URDF_USE_INERTIA_FROM_FILE,
            physicsClientId=client,
        )
        rng = np.random.default_rng(11)
        qs = rng.uniform(model.lower, model.upper, size=(20, 6))
        ours = gravity_torques(model, qs)
        for q, tau in zip(qs, ours):
            ref = p.calculateInverseDynamics(
                body, q.tolist(), [0.0] * 6, [0.0] * 6, physicsClientId=client
            )
            np.testing.assert_allclose(tau, ref, atol=1e-6)
        np.testing.assert_array_equal(gravity_torques(model, qs[3]), ours[3])
    finally:
        p.disconnect(client)
