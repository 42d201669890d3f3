"""Foreign arms for the planner's tests and benchmarks (see ``assets/arms/README.md``).

``ur5_mesh_model()``: the UR5 (with its Robotiq gripper) of the VAMP repository, mesh collision
geometry, with ``ur5/ur5_twin.srdf``; ``xarm6_model()``: the xArm6 that ``pybullet_data`` ships
(V-HACD convex pieces). ``FOREIGN_ARM_SETTINGS``: planner settings they need (their covers hold
spheres up to 0.12 m: a UR5 upper-arm housing is wider than the default 0.08 m allows).
"""

from __future__ import annotations

import pathlib
from importlib import resources

#: Planner settings for the foreign arms (``PlannerSettings(**FOREIGN_ARM_SETTINGS)``).
FOREIGN_ARM_SETTINGS = {"max_sphere_radius": 0.12}


def ur5_urdf_path() -> pathlib.Path:
    """``assets/arms/ur5/ur5.urdf``: the UR5 with mesh collision geometry."""
    return pathlib.Path(str(resources.files("twin.assets.arms").joinpath("ur5", "ur5.urdf")))


def ur5_mesh_model():
    """``ArmModel`` of the mesh UR5 with ``ur5_twin.srdf`` (VAMP's SRDF plus two pairs)."""
    from twin.kinematics import ArmModel

    path = ur5_urdf_path()
    return ArmModel.from_urdf(path, srdf=path.with_name("ur5_twin.srdf"))


def xarm6_urdf_path() -> pathlib.Path:
    """``pybullet_data``'s ``xarm/xarm6_robot.urdf``."""
    import pybullet_data

    return pathlib.Path(pybullet_data.getDataPath()) / "xarm" / "xarm6_robot.urdf"


def xarm6_model():
    """``ArmModel`` of pybullet_data's xArm6 (no SRDF; flange and tcp on ``link6``)."""
    from twin.kinematics import ArmModel

    return ArmModel.from_urdf(xarm6_urdf_path())
