"""``RigidBodyModel``: the arm as moving rigid bodies, one per revolute joint, from the URDF.

Body ``i`` is the child link of joint ``i`` with every link fixed to it (fixed joints) merged in,
so the shipped arm's six bodies carry the flange, F/T sensor, IMU, tool and TCP links on body 6.
Each body's inertial is kept in its own frame (the child link frame of its joint, whose origin lies
on the joint axis): mass kg, com (3,) m, inertia (3, 3) kg m^2 about the centre of mass, body
axes. The fixed base link does not move and contributes nothing.

A payload (``with_payload``) is one more rigid body fixed to a link (default the flange): it is
merged into that link's body like any fixed link.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Standard gravity in the base frame (z up), m/s^2: the sim's world gravity.
GRAVITY = np.array([0.0, 0.0, -9.81])
GRAVITY.flags.writeable = False

#: Inertial parameters of one body in the regressor's order (``parameters``).
PARAMETER_NAMES = ("m", "mcx", "mcy", "mcz", "ixx", "ixy", "ixz", "iyy", "iyz", "izz")


@dataclass(frozen=True)
class BodyInertial:
    """Mass properties of a rigid body in a given frame.

    mass: kg; com: (3,) m; inertia: (3, 3) kg m^2 about the centre of mass, that frame's axes.
    """

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    def moved(self, frame_T_body: np.ndarray) -> BodyInertial:
        """The same body expressed in ``frame``, given ``frame_T_body`` (4, 4)."""
        r, p = frame_T_body[:3, :3], frame_T_body[:3, 3]
        return BodyInertial(self.mass, r @ self.com + p, r @ self.inertia @ r.T)

    def __add__(self, other: BodyInertial) -> BodyInertial:
        """Two bodies in the same frame welded into one."""
        m = self.mass + other.mass
        if m <= 0.0:
            return BodyInertial(0.0, np.zeros(3), np.zeros((3, 3)))
        com = (self.mass * self.com + other.mass * other.com) / m
        inertia = self.inertia_about(com) + other.inertia_about(com)
        return BodyInertial(m, com, inertia)

    def inertia_about(self, point: np.ndarray) -> np.ndarray:
        """(3, 3) kg m^2 about ``point`` (3,) m (parallel-axis theorem), same axes."""
        d = self.com - np.asarray(point, float)
        return self.inertia + self.mass * (d @ d * np.eye(3) - np.outer(d, d))

    def parameters(self) -> np.ndarray:
        """(10,) ``[m, m c (3), I_o xx, xy, xz, yy, yz, zz]``: the inertia ``I_o`` about the
        frame's origin. Inverse dynamics is linear in these (``regressor``)."""
        i = self.inertia_about(np.zeros(3))
        h = self.mass * self.com
        return np.array([self.mass, *h, i[0, 0], i[0, 1], i[0, 2], i[1, 1], i[1, 2], i[2, 2]])


def check_inertial(mass: float, com, inertia) -> BodyInertial:
    """A validated ``BodyInertial``; raises ``ValueError`` naming what is wrong."""
    com = np.asarray(com, float)
    inertia = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, float)
    if not (np.isfinite(mass) and mass > 0.0):
        raise ValueError(f"payload mass must be a finite number > 0 kg, got {mass!r}")
    if com.shape != (3,) or not np.all(np.isfinite(com)):
        raise ValueError(f"payload com must be 3 finite numbers (m), got {com!r}")
    if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
        raise ValueError(f"payload inertia must be a finite (3, 3) kg m^2, got {inertia!r}")
    if not np.allclose(inertia, inertia.T) or np.linalg.eigvalsh(inertia).min() < -1e-12:
        raise ValueError("payload inertia must be symmetric positive semi-definite")
    return BodyInertial(float(mass), com, inertia)


class RigidBodyModel:
    """Moving bodies of an ``ArmModel`` (module doc).

    body_links: (n,) the child link of each joint; axes: (n, 3) joint axes in their body frames;
    inertials: (n,) ``BodyInertial`` per body, body frame; mass (n,), com (n, 3), inertia
    (n, 3, 3) the same as arrays.
    """

    def __init__(self, arm, inertials: tuple[BodyInertial, ...] | None = None) -> None:
        self.arm = arm
        tree = arm.tree
        by_name = {j.name: j for j in arm.robot.joints}
        self.n = arm.n_joints
        self.body_links = tuple(by_name[name].child for name in arm.joint_names)
        self.axes = np.array([by_name[name].axis for name in arm.joint_names], float)
        self._body_of = {}
        for link in arm.link_names:
            movable = tree.path_joints(link)
            self._body_of[link] = movable[-1] if movable else -1
        if inertials is None:
            inertials = self._merged_urdf_inertials()
        self.inertials = tuple(inertials)
        self.mass = np.array([b.mass for b in self.inertials])
        self.com = np.array([b.com for b in self.inertials])
        self.inertia = np.array([b.inertia for b in self.inertials])

    def body_T_link(self, link: str) -> tuple[int, np.ndarray]:
        """``(body index, body_T_link (4, 4))`` of a link fixed to a body (-1: the base)."""
        if link not in self._body_of:
            raise ValueError(f"unknown link {link!r}; expected one of {self.arm.link_names}")
        i = self._body_of[link]
        zero = np.zeros(self.n)
        base_T_link = self.arm.fk(zero, link)
        if i < 0:
            return i, base_T_link
        return i, np.linalg.inv(self.arm.fk(zero, self.body_links[i])) @ base_T_link

    def _merged_urdf_inertials(self) -> tuple[BodyInertial, ...]:
        bodies = [BodyInertial(0.0, np.zeros(3), np.zeros((3, 3))) for _ in range(self.n)]
        for link in self.arm.link_names:
            inertial = self.arm.link_inertial(link)
            if inertial is None or inertial.mass <= 0.0:
                continue
            i, b_T_l = self.body_T_link(link)
            if i < 0:
                continue
            part = BodyInertial(inertial.mass, np.asarray(inertial.com, float), inertial.inertia)
            bodies[i] = bodies[i] + part.moved(b_T_l)
        return tuple(bodies)

    def with_payload(
        self, mass: float, com=(0.0, 0.0, 0.0), inertia=None, link: str = "flange"
    ) -> RigidBodyModel:
        """A new model with a rigid payload fixed to ``link``: ``mass`` kg, ``com`` (3,) m and
        ``inertia`` (3, 3) kg m^2 about its centre of mass (default a point mass), both in the
        ``link`` frame."""
        payload = check_inertial(mass, com, inertia)
        i, b_T_l = self.body_T_link(link)
        if i < 0:
            raise ValueError(f"link {link!r} is fixed to the base; a payload there does nothing")
        bodies = list(self.inertials)
        bodies[i] = bodies[i] + payload.moved(b_T_l)
        return RigidBodyModel(self.arm, tuple(bodies))

    def parameters(self) -> np.ndarray:
        """(n, 10) inertial parameters of every body (``BodyInertial.parameters``)."""
        return np.array([b.parameters() for b in self.inertials])
