"""``ArmModel``: the arm's kinematic and inertial model, read from its URDF.

Joint arrays are ``(6,)`` (or ``(N, 6)`` batches) in the order of ``joint_names``, rad; poses are
``(4, 4)`` homogeneous matrices ``base_T_link`` (m), base = the URDF root link frame.
"""

from __future__ import annotations

import functools
import math
import pathlib
from functools import cached_property

import numpy as np

from twin.kinematics import analytic_ik, numeric_ik, scalar_ik, srdf
from twin.kinematics.chain import LinkChain
from twin.kinematics.fk import KinematicTree, assemble
from twin.kinematics.urdf import (
    REVOLUTE_TYPES,
    CollisionShape,
    Inertial,
    UrdfError,
    UrdfJoint,
    UrdfLink,
    UrdfRobot,
    parse_urdf,
)
from twin.kinematics.validate import as_configurations, as_poses

#: Tolerance (rad) on the home configuration lying inside the joint limits.
_HOME_LIMIT_TOL = 1e-12


class ArmModel:
    """A serial arm from a URDF: FK of any link, Jacobians, analytic and numeric IK.

    lower, upper: (n,) rad; velocity_limits: (n,) rad/s; effort_limits: (n,) N m;
    home_q: (n,) rad (from the URDF's ``<group_state name="home">``, else zeros).

    Frames ``flange`` and ``tcp``: the URDF's links of those names; when it has none, a frame
    fixed to the last link of the chain (``tip_link``) at ``flange_offset`` ((4, 4)
    ``tip_T_flange``, default identity), and ``tcp`` at ``tcp_offset`` ((4, 4)
    ``flange_T_tcp``, default identity). ``srdf``: the MoveIt SRDF whose
    ``<disable_collisions>`` pairs are never checked for self-collision
    (``disabled_collision_pairs``); ``None`` reads ``<urdf stem>.srdf`` beside the URDF if it
    exists, ``False`` reads none.
    """

    def __init__(
        self,
        robot: UrdfRobot,
        urdf_path: pathlib.Path,
        home_q: np.ndarray | None = None,
        *,
        flange_offset: np.ndarray | None = None,
        tcp_offset: np.ndarray | None = None,
        srdf_path: str | pathlib.Path | bool | None = None,
    ) -> None:
        self.urdf_path = pathlib.Path(urdf_path)
        robot = _with_default_frames(robot, flange_offset, tcp_offset)
        self.robot = robot
        joints = _serial_movable_joints(robot)
        self.joint_names: tuple[str, ...] = tuple(j.name for j in joints)
        self.n_joints = len(joints)
        self.lower = _frozen([j.lower for j in joints])
        self.upper = _frozen([j.upper for j in joints])
        self.velocity_limits = _frozen([j.velocity for j in joints])
        self.effort_limits = _frozen([j.effort for j in joints])
        self.tree = KinematicTree(robot, self.joint_names)
        self._chains: dict[str, LinkChain] = {}  # single-configuration code, built on first use
        self.link_names: tuple[str, ...] = self.tree.link_names
        self.tip_link: str = joints[-1].child
        if home_q is None:
            missing = [n for n in self.joint_names if n not in robot.home]
            home_q = (
                np.zeros(self.n_joints)
                if missing
                else np.array([robot.home[n] for n in self.joint_names])
            )
        home = as_configurations(home_q, self.n_joints, "home_q")
        if home.ndim != 1:
            raise ValueError(f"home_q must have shape ({self.n_joints},), got {home.shape}")
        if not self.within_limits(home, tol=_HOME_LIMIT_TOL):
            raise ValueError(f"home_q {home} rad lies outside the joint limits")
        home.flags.writeable = False
        self.home_q = home
        self._home_list = home.tolist()  # the default reference of the single-pose IK
        self._analytic = analytic_ik.SphericalWristIk.build(self)
        if srdf_path is None:
            srdf_path = srdf.srdf_beside(self.urdf_path)
        self.srdf_path = None if srdf_path in (None, False) else pathlib.Path(srdf_path)
        #: Sorted link-name pairs never checked for self-collision (from the SRDF).
        self.disabled_collision_pairs: frozenset[tuple[str, str]] = (
            frozenset()
            if self.srdf_path is None
            else srdf.disabled_pairs(self.srdf_path, tuple(robot.links))
        )

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_urdf(
        cls,
        path: str | pathlib.Path,
        home_q: np.ndarray | None = None,
        *,
        flange_offset: np.ndarray | None = None,
        tcp_offset: np.ndarray | None = None,
        srdf: str | pathlib.Path | bool | None = None,
    ) -> ArmModel:
        """Model of the URDF at ``path``; ``home_q`` (n,) rad overrides the file's home; the
        other options: see the class doc."""
        return cls(
            parse_urdf(path),
            pathlib.Path(path),
            home_q,
            flange_offset=flange_offset,
            tcp_offset=tcp_offset,
            srdf_path=srdf,
        )

    @classmethod
    def default(cls) -> ArmModel:
        """The shipped arm, ``assets/arm/twin_arm.urdf``: one shared instance (treat it as
        read-only; its arrays are)."""
        return _default_model()

    def __repr__(self) -> str:
        return f"ArmModel({self.urdf_path.name!r}, joints={self.joint_names})"

    # -- limits and postures ------------------------------------------------------------------
    def within_limits(self, q: np.ndarray, tol: float = 0.0) -> np.ndarray | bool:
        """Whether configurations ``q`` (n,) or (N, n) rad lie in ``[lower - tol, upper + tol]``."""
        q = as_configurations(q, self.n_joints)
        ok = np.all((q >= self.lower - tol) & (q <= self.upper + tol), axis=-1)
        return bool(ok) if q.ndim == 1 else ok

    def posture(self, q: np.ndarray) -> np.ndarray:
        """Posture flags (3,) or (N, 3) int ``[shoulder, elbow, wrist]``, each +1 or -1, of
        configurations ``q`` (n,) or (N, n) rad. Needs the closed form (see ``analytic_ik``)."""
        q = as_configurations(q, self.n_joints)
        flags = self._require_analytic().posture(np.atleast_2d(q))
        return flags[0] if q.ndim == 1 else flags

    @property
    def has_analytic_ik(self) -> bool:
        """Whether the arm's geometry admits the closed-form IK (spherical wrist etc.)."""
        return isinstance(self._analytic, analytic_ik.SphericalWristIk)

    @property
    def closed_form(self) -> analytic_ik.SphericalWristIk | None:
        """The closed-form solver (its geometry, e.g. ``q3_stretched``), or ``None``."""
        return self._analytic if self.has_analytic_ik else None

    @property
    def analytic_ik_reason(self) -> str:
        """Why the closed form is unavailable ("" when it is available)."""
        return "" if self.has_analytic_ik else str(self._analytic)

    # -- forward kinematics and Jacobians -----------------------------------------------------
    def fk(self, q: np.ndarray, link: str = "tcp") -> np.ndarray:
        """``base_T_link`` (4, 4), or (N, 4, 4) for ``q`` of shape (N, n) rad.

        One configuration runs the link's generated straight-line code (``chain.LinkChain``,
        a few microseconds); a batch runs the vectorised tree. They agree to rounding."""
        self._check_link(link)
        q = as_configurations(q, self.n_joints)
        if q.ndim == 1:
            return self.chain(link).pose(q.tolist())
        return self.tree.poses(q, link)

    def fk_all(self, q: np.ndarray) -> dict[str, np.ndarray]:
        """``{link: base_T_link}`` for every link: (4, 4) each, or (N, 4, 4) for (N, n) ``q``."""
        q = as_configurations(q, self.n_joints)
        frames = self.tree.rotations_translations(np.atleast_2d(q))
        return {
            name: (assemble(r, p)[0] if q.ndim == 1 else assemble(r, p))
            for name, (r, p) in frames.items()
        }

    def jacobian(self, q: np.ndarray, link: str = "tcp") -> np.ndarray:
        """Geometric Jacobian (6, n), or (N, 6, n): rows ``[v; w]`` of ``link``'s origin in the
        base frame (m/s and rad/s per rad/s of each joint). One configuration runs the
        generated code (as ``fk``)."""
        self._check_link(link)
        q = as_configurations(q, self.n_joints)
        if q.ndim == 1:
            return self.chain(link).pose_jacobian(q.tolist())[1]
        return self.tree.jacobian(q, link)

    def fk_jacobian(self, q: np.ndarray, link: str = "tcp") -> tuple[np.ndarray, np.ndarray]:
        """``(base_T_link (4, 4), jacobian (6, n))`` of one configuration ``q`` (n,) rad, from
        one evaluation of the link's chain (what a controller reading a body's pose and twist
        needs each cycle)."""
        self._check_link(link)
        q = as_configurations(q, self.n_joints)
        if q.ndim != 1:
            raise ValueError(
                f"fk_jacobian takes one configuration ({self.n_joints},), got {q.shape}; "
                "use fk and jacobian for batches"
            )
        return self.chain(link).pose_jacobian(q.tolist())

    def chain(self, link: str = "tcp") -> LinkChain:
        """The generated single-configuration FK/Jacobian of ``link`` (built on first use).

        Its ``pose(q)``/``pose_jacobian(q)`` take ``q`` as a list of n finite floats (rad) and
        skip the input checks: for hot loops that already hold validated values."""
        chain = self._chains.get(link)
        if chain is None:
            self._check_link(link)
            chain = self._chains[link] = LinkChain(self.tree, link)
        return chain

    # -- inverse kinematics -------------------------------------------------------------------
    def ik_all(
        self, pose: np.ndarray, reference_q: np.ndarray | None = None, link: str = "tcp"
    ) -> analytic_ik.IkSolutions:
        """Every closed-form solution (up to 8, inside the limits) for ``base_T_link`` ``pose``
        (4, 4). Free angles at singular poses and the choice among ``+-2 pi`` wraps follow
        ``reference_q`` (n,) rad, else ``home_q``. Raises ``NoClosedFormError`` if the geometry
        has no closed form (use ``ik_numeric``). Runs the generated single-pose code
        (``scalar_ik``, tens of microseconds); equal to ``ik_all_batch`` to a few ulps."""
        flat = scalar_ik.flat_pose(pose)
        self._check_link(link)
        ref = scalar_ik.reference_list(reference_q, self._home_list, self.n_joints)
        return scalar_ik.for_link(self._require_analytic(), link).solutions(flat, ref)

    def ik_all_batch(
        self, poses: np.ndarray, reference_q: np.ndarray | None = None, link: str = "tcp"
    ) -> analytic_ik.IkBatch:
        """Closed-form IK of poses (N, 4, 4) ``base_T_link``: ``IkBatch`` with ``q`` (N, 8, 6)
        rad (NaN where invalid), ``valid`` (N, 8) and the branch ``postures`` (8, 3).
        ``reference_q``: (n,) or (N, n) rad, default ``home_q``."""
        self._check_link(link)
        if isinstance(poses, np.ndarray) and poses.shape == (1, 4, 4):  # the generated code
            ref = scalar_ik.reference_list(reference_q, self._home_list, self.n_joints)
            code = scalar_ik.for_link(self._require_analytic(), link)
            return code.batch(scalar_ik.flat_pose(poses[0], "poses"), ref)
        poses = as_poses(poses)
        if poses.ndim != 3:
            raise ValueError(f"poses must have shape (N, 4, 4), got {poses.shape}")
        ref = self.home_q if reference_q is None else reference_q
        ref = as_configurations(ref, self.n_joints, "reference_q")
        ref = np.broadcast_to(ref, (poses.shape[0], self.n_joints))
        return self._require_analytic().solve(poses, ref, link)

    def ik(self, pose: np.ndarray, reference_q: np.ndarray, link: str = "tcp") -> np.ndarray | None:
        """The solution (n,) rad for ``pose`` (4, 4) with the posture of ``reference_q`` (n,),
        its angles the wraps nearest the reference; ``None`` if that posture cannot reach the
        pose within the limits. Without a closed form: ``ik_numeric`` from ``reference_q``."""
        ref = as_configurations(reference_q, self.n_joints, "reference_q")
        if ref.ndim != 1:
            raise ValueError(f"reference_q must have shape ({self.n_joints},), got {ref.shape}")
        if not self.has_analytic_ik:
            return self.ik_numeric(pose, ref, link)
        flat = scalar_ik.flat_pose(pose)
        self._check_link(link)
        return scalar_ik.for_link(self._analytic, link).nearest(flat, ref.tolist())

    def ik_batch(
        self, poses: np.ndarray, reference_q: np.ndarray, link: str = "tcp"
    ) -> tuple[np.ndarray, np.ndarray]:
        """``ik`` for poses (N, 4, 4), each with the posture (and the wraps) of its reference
        ``reference_q`` (n,) or (N, n) rad: solutions (N, n) rad (NaN rows where none) and
        ``found`` (N,) bool. Needs the closed form."""
        poses = as_poses(poses)
        if poses.ndim != 3:
            raise ValueError(f"poses must have shape (N, 4, 4), got {poses.shape}")
        ref = as_configurations(reference_q, self.n_joints, "reference_q")
        ref = np.broadcast_to(ref, (poses.shape[0], self.n_joints))
        batch = self.ik_all_batch(poses, ref, link)
        s, e, w = (self.posture(ref).astype(int)).T
        branch = (1 - s) * 2 + (1 - e) + (1 - w) // 2
        rows = np.arange(poses.shape[0])
        return batch.q[rows, branch].copy(), batch.valid[rows, branch].copy()

    def ik_numeric(
        self, pose: np.ndarray, q0: np.ndarray, link: str = "tcp", **options: float
    ) -> np.ndarray | None:
        """Damped-least-squares IK from ``q0`` (n,) rad to ``pose`` (4, 4), within the limits;
        ``None`` if it does not converge. ``options``: see ``numeric_ik.solve``."""
        self._check_link(link)
        pose = as_poses(pose)
        q0 = as_configurations(q0, self.n_joints, "q0")
        if pose.ndim != 2 or q0.ndim != 1:
            raise ValueError(
                f"ik_numeric takes one pose (4, 4) and q0 ({self.n_joints},), "
                f"got {pose.shape} and {q0.shape}"
            )
        return numeric_ik.solve(self, pose, q0, link, **options).q

    # -- links: inertials and collision geometry ----------------------------------------------
    def link_mass(self, link: str) -> float:
        """Mass of ``link``, kg (0 if the URDF gives none)."""
        inertial = self.link_inertial(link)
        return 0.0 if inertial is None else inertial.mass

    def link_inertial(self, link: str) -> Inertial | None:
        """``Inertial`` (mass kg, com (3,) m and inertia (3, 3) kg m^2 in the link frame)."""
        self._check_link(link)
        return self.robot.links[link].inertial

    @cached_property
    def total_mass(self) -> float:
        """Sum of every link's mass, kg (the fixed base included)."""
        return float(sum(self.link_mass(name) for name in self.link_names))

    def collision_shapes(self, link: str) -> list[CollisionShape]:
        """Collision primitives of ``link``: ``(kind, dims, link_T_shape (4, 4))`` each."""
        self._check_link(link)
        return [
            CollisionShape(s.kind, s.dims, s.origin.copy())
            for s in self.robot.links[link].collisions
        ]

    def collision_mesh_files(self, link: str) -> tuple[pathlib.Path | None, ...]:
        """The resolved file of each of ``link``'s collision shapes that is a mesh (None for a
        primitive), in the order of ``collision_shapes``."""
        self._check_link(link)
        found = self.robot.links[link].mesh_files
        return found + (None,) * (len(self.robot.links[link].collisions) - len(found))

    # -- helpers ------------------------------------------------------------------------------
    def _check_link(self, link: str) -> None:
        if link not in self.tree.index:
            raise ValueError(f"unknown link {link!r}; expected one of {self.link_names}")

    def _require_analytic(self) -> analytic_ik.SphericalWristIk:
        if not self.has_analytic_ik:
            raise analytic_ik.NoClosedFormError(
                f"{self.urdf_path.name}: no closed-form IK ({self._analytic}); "
                "use ik_numeric (damped least squares) instead"
            )
        return self._analytic


@functools.lru_cache(maxsize=1)
def _default_model() -> ArmModel:
    from twin import assets

    return ArmModel.from_urdf(assets.arm_urdf_path())


def _with_default_frames(
    robot: UrdfRobot, flange_offset: np.ndarray | None, tcp_offset: np.ndarray | None
) -> UrdfRobot:
    """``robot`` with a fixed ``flange`` frame on the chain's last link and a ``tcp`` frame on
    the flange, each added only when the URDF has no link of that name (offsets (4, 4))."""
    links, joints = dict(robot.links), list(robot.joints)
    tip = _serial_movable_joints(robot)[-1].child
    for name, parent, offset in (("flange", tip, flange_offset), ("tcp", "flange", tcp_offset)):
        if name in links:
            if offset is not None:
                raise ValueError(
                    f"{robot.name!r} has a {name!r} link; a {name}_offset applies only to a "
                    "URDF without one"
                )
            continue
        origin = np.eye(4) if offset is None else np.asarray(offset, dtype=float)
        if origin.shape != (4, 4) or not np.all(np.isfinite(origin)):
            raise ValueError(f"{name}_offset must be a finite (4, 4) transform, got {origin}")
        links[name] = UrdfLink(name=name, inertial=None, collisions=())
        joints.append(
            UrdfJoint(
                name=f"{name}_frame",
                type="fixed",
                parent=parent,
                child=name,
                origin=origin.copy(),
                axis=np.array([1.0, 0.0, 0.0]),
                lower=-math.inf,
                upper=math.inf,
                velocity=math.inf,
                effort=math.inf,
            )
        )
    if len(links) == len(robot.links):
        return robot
    return UrdfRobot(
        name=robot.name, links=links, joints=tuple(joints), root=robot.root, home=robot.home
    )


def _frozen(values: list[float]) -> np.ndarray:
    out = np.array(values, dtype=float)
    out.flags.writeable = False
    return out


def _serial_movable_joints(robot: UrdfRobot) -> list:
    """The movable joints, root to tip; raises ``UrdfError`` unless they form one chain."""
    movable = [j for j in robot.joints if j.type in REVOLUTE_TYPES]
    if not movable:
        raise UrdfError(f"URDF {robot.name!r} has no revolute joint")
    parent_joint = {j.child: j for j in robot.joints}

    def movable_ancestors(link: str) -> list:
        chain, seen = [], {link}
        while link in parent_joint:
            j = parent_joint[link]
            if j.parent in seen:  # parse_urdf refuses cycles; a hand-built UrdfRobot may not
                raise UrdfError(f"URDF {robot.name!r}: kinematic cycle at joint {j.name!r}")
            seen.add(j.parent)
            if j.type in REVOLUTE_TYPES:
                chain.append(j)
            link = j.parent
        return chain[::-1]

    deepest = max(movable, key=lambda j: len(movable_ancestors(j.child)))
    chain = movable_ancestors(deepest.child)
    if len(chain) != len(movable):
        off = sorted({j.name for j in movable} - {j.name for j in chain})
        raise UrdfError(f"movable joints {off} are off the serial chain to {deepest.child!r}")
    return chain
