"""The arm model: URDF reader, batched FK and Jacobians, analytic and numeric IK.

from twin.kinematics import ArmModel
model = ArmModel.default()              # the shipped arm, assets/arm/twin_arm.urdf
T = model.fk(model.home_q)              # (4, 4) base_T_tcp
sols = model.ik_all(T)                  # every posture (up to 8)
q = model.ik(T, reference_q=model.home_q)
"""

from twin.kinematics.analytic_ik import (
    POSTURES,
    IkBatch,
    IkSolutions,
    NoClosedFormError,
    branch_index,
)
from twin.kinematics.model import ArmModel
from twin.kinematics.numeric_ik import NumericIkResult
from twin.kinematics.urdf import CollisionShape, Inertial, UrdfError, parse_urdf

__all__ = [
    "POSTURES",
    "ArmModel",
    "CollisionShape",
    "IkBatch",
    "IkSolutions",
    "Inertial",
    "NoClosedFormError",
    "NumericIkResult",
    "UrdfError",
    "branch_index",
    "parse_urdf",
]
