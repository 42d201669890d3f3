"""The concrete environments: ``ReachEnv`` (``twin/Reach-v0``) and ``PressEnv`` (``twin/Press-v0``)."""

from __future__ import annotations

from typing import Any

from twin.env import features
from twin.env.core import POLICY_RATE_HZ, TwinEnv
from twin.env.tasks import PressTask, ReachTask
from twin.spatial import batch


class ReachEnv(TwinEnv):
    """Reach a sampled TCP pose within 2 cm and 0.1 rad (see ``ReachTask``).

    Observation: ``twin.env.features.REACH_MODEL_TERMS`` (44,) float32 (``REACH_TERMS`` (32,)
    with ``model_features=False``: no IK step and gravity offset). Episodes last 4 s of sim time
    (100 steps at 25 Hz, a ``TimeLimit``); ``info["is_success"]`` says whether the TCP is
    within tolerance now.
    """

    def __init__(self, *, model_features: bool = True, **kwargs: Any) -> None:
        self.model_features = model_features
        options = dict(kwargs.pop("robot_options", None) or {})
        if kwargs.get("backend", "sim") == "sim":
            options.setdefault("sensors", False)  # Reach observes the joints only
        super().__init__(robot_options=options, **kwargs)

    def _make_task(self, model: Any) -> ReachTask:
        def model_terms(q):
            return self.kinematics(q)[1], features.gravity_offset(model, q, self.gains.kp)

        return ReachTask(
            fk=lambda q: self.kinematics(q)[0],
            lower=model.lower,
            upper=model.upper,
            model_terms=model_terms if self.model_features else None,
        )


class PressEnv(TwinEnv):
    """Press the tool onto the table of the ``table`` scene with a target normal force.

    Observation: ``twin.env.features.PRESS_TERMS`` (40,) float32, including the tared F/T
    reading (the sim robot runs its F/T model only: ``state.imu`` is ``None``). Success (and termination): the pushed force stays within 10 % of the target for
    1 s. Episodes are truncated after 4 s (100 steps at 25 Hz).
    """

    #: The scene the task is set in; its ``table_top`` box gives the surface height.
    SCENE = "table"
    TABLE_ITEM = "table_top"
    #: Time the arm holds still after a reset before the F/T sensor is tared (s).
    TARE_SETTLE_S = 0.1

    def __init__(self, **kwargs: Any) -> None:
        options = dict(kwargs.pop("robot_options", None) or {})
        options.setdefault("scene", self.SCENE)  # a sim option: the real arm's table is real
        if kwargs.get("backend", "sim") == "sim":
            options.setdefault("sensors", ("ft",))  # Press observes no IMU: the sim runs none
        super().__init__(robot_options=options, **kwargs)

    def _make_task(self, model: Any) -> PressTask:
        from twin.scenes import load_scene

        scene = load_scene(self.SCENE)
        top = next(item for item in scene.items if item.name == self.TABLE_ITEM)
        surface_z = float(top.pose[2] + top.dims[2] / 2.0)
        return PressTask(
            fk=lambda q: self.kinematics(q)[0],
            ik=lambda pose, q_ref: model.ik(batch.matrices_from_pose7(pose), q_ref),
            lower=model.lower,
            upper=model.upper,
            surface_z_m=surface_z,
            policy_period_s=1.0 / POLICY_RATE_HZ,
        )

    def _reset_robot(self, q0) -> None:
        super()._reset_robot(q0)
        for _ in range(max(1, round(self.TARE_SETTLE_S / self.robot.control_period_s))):
            self.robot.step()
        # tared on the reading the task sees (a randomised bias is removed, as a tare does)
        self.task.tare(None if (w := self._read().wrench) is None else w.wrench)
