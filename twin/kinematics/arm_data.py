"""What the IK solvers read of an arm: the protocol ``ArmModel`` satisfies.

The solvers (``analytic_ik``, ``numeric_ik``) take any object with these attributes rather than
the model class, so they sit below ``model`` (which builds them) and can be read, tested and
replaced alone.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from twin.kinematics.chain import LinkChain
from twin.kinematics.fk import KinematicTree
from twin.kinematics.urdf import UrdfRobot


class ArmData(Protocol):
    """The kinematic data of an arm with ``n_joints`` revolute joints."""

    #: The parsed URDF (links, joints with their axes).
    robot: UrdfRobot
    #: Names of the actuated joints, in configuration order.
    joint_names: tuple[str, ...]
    n_joints: int
    #: Joint limits (n,) rad.
    lower: np.ndarray
    upper: np.ndarray
    #: Batched forward kinematics of every link.
    tree: KinematicTree

    def chain(self, link: str = "tcp") -> LinkChain:
        """The generated single-configuration FK/Jacobian of ``link``."""
        ...
