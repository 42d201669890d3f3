"""Must-show: a policy with the convention's full naming and metadata example loads in strict
mode and drives the simulated arm to a commanded configuration within 1 mrad.

The policy is fixed-gain (weights set by hand): ``pos target = q_cmd + m`` with the recurrent
memory ``m' = m + KI (q_cmd - q)``. Gravity leaves a steady-state error of about 10 mrad under
pure PD at these gains; the memory integrates the error, so its final value is the position
offset whose stiffness torque holds the arm up, and the error goes to zero.
"""

from __future__ import annotations

import numpy as np
import pytest
from control_fakes import STIFFNESS, drive, full_example_model, set_full_example_commands

from twin.control import CommandSource, OnnxRLController, RobotStateAdapter

sim = pytest.importorskip("twin.sim")


@pytest.fixture
def robot():
    with sim.PyBulletRobot(seed=0) as arm:
        for _ in range(10):  # until the IMU has its first sample (the policy reads it)
            if arm.read().imu is not None:
                break
            arm.step()
        yield arm


def test_full_example_policy_drives_the_sim_arm_within_one_milliradian(robot, tmp_path):
    path = full_example_model(tmp_path / "full_example.onnx", robot.model.joint_names)
    state, commands = RobotStateAdapter(robot), CommandSource()
    with OnnxRLController(state, commands) as controller:
        assert controller.create(path, strict=True), controller.error
        ctx = controller.context()
        served = {t for comp in (*ctx.inputs, *ctx.outputs) for t in comp.tensors}
        model_tensors = {*controller.runtime.input_names(), *controller.runtime.output_names()} - {
            "actions"
        }
        assert served == model_tensors and ctx.unclaimed == ()
        assert controller.init(), controller.error
        goal = robot.model.home_q + np.array([0.3, -0.2, 0.25, 0.4, -0.3, 0.5])
        set_full_example_commands(commands, goal)
        qs = drive(controller, robot, 400)  # (q_des ramps at the velocity limits: rule 6)
        memory = controller.runtime.input_buffer("memory.integral.in").copy()

    assert np.abs(qs[0] - goal).max() > 0.2
    assert np.abs(qs[-50:] - goal).max() < 1e-3  # within 1 mrad over the last 0.2 s
    # The memory carries the gravity load: stiffness * offset is a real holding torque.
    assert np.abs(memory * STIFFNESS).max() > 1.0  # N m
