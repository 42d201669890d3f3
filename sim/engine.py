"""The one wrapper around PyBullet: it owns the physics client and makes every engine call.

Nothing else in the project imports ``pybullet`` (tests and benchmarks may, to compare against it).
Bodies are named by string; links and joints by name, resolved once to indices with
``joint_index`` / ``link_index`` (a link shares its index with the joint that carries it; the base
is ``BASE_LINK`` = -1). Poses crossing this API are ``[px, py, pz, qw, qx, qy, qz]``; PyBullet's
``[x, y, z, w]`` quaternions stay inside this module.

The hot path of a control loop is ``Engine.control_io``: the four per-physics-step calls bound once
(body, joints, client) as ``functools.partial`` objects, handing PyBullet's tuples straight through,
so a control loop built on them costs no more per call than raw PyBullet.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """File descriptor 2 points at the null device inside the block (what C code prints there,
    such as PyBullet's "pybullet build time" banner, is dropped), then is restored. Python's
    ``sys.stderr`` is flushed first, so nothing written before the block is lost. Without a usable
    descriptor 2 (an embedding without one) the block runs unchanged. The descriptor is the
    process's: another thread's writes to it inside the block are dropped too, so the block
    holds only PyBullet's import and ``connect`` (1 ms and 0.1 s here)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
        finally:
            os.close(null)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


with _stderr_silenced():  # PyBullet's C code prints its build banner at import
    import pybullet as pb

BASE_LINK = -1
_FIXED_CONSTRAINT_MAX_FORCE_N = 1e7  # effectively rigid attachments (payloads)
_NO_COLLISION = 0


@dataclass(frozen=True)
class ControlIo:
    """The hot-path engine calls of a control loop, pre-bound (``functools.partial`` of the
    PyBullet functions, no Python frame per call); made by ``Engine.control_io``.

    set_torques(forces=[...]): torque control of the bound joints, N m.
    step(): one physics step.
    joint_states() -> per joint ``(q, qd, reaction (6,), applied_motor_torque)``; ``reaction``
        (for a joint with the F/T sensor enabled) is the wrench the parent exerts on the child
        link, about the child's centre of mass, in the child's inertial frame.
    link_state() -> PyBullet's link state with velocity: 0 com position, 4/5 link frame position /
        ``[x, y, z, w]`` orientation, 6 linear velocity of the com, 7 angular velocity (world).
    """

    set_torques: Callable[..., None]
    step: Callable[[], None]
    joint_states: Callable[[], tuple]
    link_state: Callable[[], tuple]


class EngineError(RuntimeError):
    """The engine refused an operation (closed client, unknown body, failed load)."""


@dataclass(frozen=True)
class JointInfo:
    """Static description of one joint of a loaded body (PyBullet's getJointInfo, renamed).

    parent_T_joint: (7,) pose of the joint frame in the parent link frame; axis: (3,) joint frame.
    """

    index: int
    name: str
    kind: int  # pybullet.JOINT_REVOLUTE, JOINT_PRISMATIC, JOINT_FIXED, ...
    link_name: str
    parent_index: int
    lower: float
    upper: float
    damping: float
    friction: float
    max_force: float
    max_velocity: float
    axis: np.ndarray
    parent_T_joint: np.ndarray

    @property
    def is_fixed(self) -> bool:
        return self.kind == pb.JOINT_FIXED


@dataclass(frozen=True)
class LinkInertial:
    """Inertial frame of a link: mass kg, link_T_inertial (7,) (centre of mass and axes);
    inertia_diagonal (3,) kg m^2, the principal moments about the centre of mass along the
    inertial frame's axes (PyBullet's local inertia diagonal)."""

    mass: float
    link_T_inertial: np.ndarray
    inertia_diagonal: np.ndarray = field(default_factory=lambda: np.zeros(3))


@dataclass(frozen=True)
class FollowIo:
    """Engine calls of a follower (a twin that mirrors measured joint states), pre-bound like
    ``ControlIo``; made by ``Engine.follow_io``.

    reset_states(targetValues=[[q], ...], targetVelocities=[[qd], ...]): teleport the bound joints
        (rad, rad/s), one call for all of them.
    link_states() -> per bound link PyBullet's link state with velocity (``ControlIo.link_state``
        layout), forward kinematics and link velocities recomputed from the joint state.
    """

    reset_states: Callable[..., None]
    link_states: Callable[[], tuple]


def pose_to_pb(pose: Sequence[float]) -> tuple[list[float], list[float]]:
    """``[px, py, pz, qw, qx, qy, qz]`` -> PyBullet's (position, ``[x, y, z, w]``)."""
    p = [float(v) for v in pose]
    return p[:3], [p[4], p[5], p[6], p[3]]


def pose_from_pb(position: Sequence[float], xyzw: Sequence[float]) -> np.ndarray:
    """PyBullet's (position, ``[x, y, z, w]``) -> ``[px, py, pz, qw, qx, qy, qz]`` (w >= 0)."""
    x, y, z, w = xyzw
    s = -1.0 if w < 0.0 else 1.0
    return np.array([*position, s * w, s * x, s * y, s * z], dtype=float)


class Engine:
    """A PyBullet physics client: DIRECT by default, GUI on request; fixed time step ``physics_dt``.

    gravity: (3,) m/s^2 in the world frame.
    """

    def __init__(
        self,
        *,
        gui: bool = False,
        physics_dt: float = 1e-3,
        gravity: Sequence[float] = (0.0, 0.0, -9.81),
    ) -> None:
        if not (np.isfinite(physics_dt) and 0.0 < physics_dt <= 0.01):
            raise ValueError(f"physics_dt must be in (0, 0.01] s, got {physics_dt}")
        self.gui = gui
        self.physics_dt = float(physics_dt)
        self.gravity = np.array(gravity, dtype=float)
        with _stderr_silenced():  # and may print on connect
            self._cid = pb.connect(pb.GUI if gui else pb.DIRECT)
        if self._cid < 0:
            raise EngineError("could not connect to PyBullet (a GUI may already be open)")
        self._bodies: dict[str, list[int]] = {}
        self._constraints: dict[str, int] = {}
        self._joints: dict[str, tuple[JointInfo, ...]] = {}
        pb.resetSimulation(physicsClientId=self._cid)
        pb.setPhysicsEngineParameter(
            fixedTimeStep=self.physics_dt,
            numSubSteps=0,
            deterministicOverlappingPairs=1,
            physicsClientId=self._cid,
        )
        pb.setGravity(*self.gravity.tolist(), physicsClientId=self._cid)
        if gui:
            pb.configureDebugVisualizer(pb.COV_ENABLE_GUI, 0, physicsClientId=self._cid)

    # ----------------------------------------------------------------- lifetime
    @property
    def is_open(self) -> bool:
        return self._cid >= 0

    def close(self) -> None:
        """Disconnect; safe to call twice."""
        if self._cid >= 0:
            try:
                pb.disconnect(physicsClientId=self._cid)
            finally:
                self._cid = -1
                self._bodies.clear()
                self._constraints.clear()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _id(self, body: str) -> int:
        try:
            return self._bodies[body][0]
        except KeyError:
            raise EngineError(f"no body named {body!r}; bodies: {sorted(self._bodies)}") from None

    def _add(self, name: str, ids: list[int]) -> None:
        if name in self._bodies:
            raise EngineError(f"a body named {name!r} exists already")
        self._bodies[name] = ids

    @property
    def bodies(self) -> tuple[str, ...]:
        return tuple(self._bodies)

    def body_ids(self, name: str) -> tuple[int, ...]:
        """PyBullet ids of the body or bodies registered as ``name`` (for diagnostics)."""
        self._id(name)
        return tuple(self._bodies[name])

    # ----------------------------------------------------------------- robots
    def load_urdf(
        self, name: str, path: str | Path, base_pose: Sequence[float] | None = None
    ) -> None:
        """Load a fixed-base URDF with the inertias from the file; zero all default damping."""
        position, orientation = pose_to_pb(
            base_pose if base_pose is not None else (0, 0, 0, 1, 0, 0, 0)
        )
        body = pb.loadURDF(
            str(path),
            position,
            orientation,
            useFixedBase=True,
            flags=pb.URDF_USE_INERTIA_FROM_FILE,
            physicsClientId=self._cid,
        )
        if body < 0:
            raise EngineError(f"PyBullet could not load the URDF {path}")
        self._add(name, [body])
        infos = tuple(
            self._joint_info(body, j)
            for j in range(pb.getNumJoints(body, physicsClientId=self._cid))
        )
        self._joints[name] = infos
        for link in [BASE_LINK, *range(len(infos))]:  # PyBullet adds 0.04 linear/angular damping
            pb.changeDynamics(
                body, link, linearDamping=0.0, angularDamping=0.0, physicsClientId=self._cid
            )

    def _joint_info(self, body: int, j: int) -> JointInfo:
        i = pb.getJointInfo(body, j, physicsClientId=self._cid)
        return JointInfo(
            index=i[0],
            name=i[1].decode(),
            kind=i[2],
            link_name=i[12].decode(),
            parent_index=i[16],
            lower=i[8],
            upper=i[9],
            damping=i[6],
            friction=i[7],
            max_force=i[10],
            max_velocity=i[11],
            axis=np.array(i[13], dtype=float),
            parent_T_joint=pose_from_pb(i[14], i[15]),
        )

    def joints(self, body: str) -> tuple[JointInfo, ...]:
        self._id(body)
        return self._joints[body]

    def joint_index(self, body: str, joint: str) -> int:
        for info in self.joints(body):
            if info.name == joint:
                return info.index
        raise EngineError(f"body {body!r} has no joint {joint!r}")

    def link_index(self, body: str, link: str) -> int:
        """Index of ``link`` (``BASE_LINK`` for the root link)."""
        infos = self.joints(body)
        for info in infos:
            if info.link_name == link:
                return info.index
        root = pb.getBodyInfo(self._id(body), physicsClientId=self._cid)[0].decode()
        if link == root:
            return BASE_LINK
        raise EngineError(f"body {body!r} has no link {link!r}")

    def link_inertial(self, body: str, link: int) -> LinkInertial:
        d = pb.getDynamicsInfo(self._id(body), link, physicsClientId=self._cid)
        return LinkInertial(
            mass=d[0],
            link_T_inertial=pose_from_pb(d[3], d[4]),
            inertia_diagonal=np.array(d[2], dtype=float),
        )

    def set_joint_dynamics(
        self, body: str, joints: Sequence[int], damping: Sequence[float]
    ) -> None:
        """Viscous joint damping (N m s/rad) applied by the engine."""
        b = self._id(body)
        for j, d in zip(joints, damping):
            pb.changeDynamics(b, j, jointDamping=float(d), physicsClientId=self._cid)

    def disable_motors(self, body: str, joints: Sequence[int], friction: Sequence[float]) -> None:
        """Replace PyBullet's default velocity motors by friction only.

        A velocity motor with target 0 and maximum force ``friction`` (N m) is PyBullet's model of
        Coulomb joint friction; ``friction`` 0 disables the motor entirely.
        """
        pb.setJointMotorControlArray(
            self._id(body),
            list(joints),
            pb.VELOCITY_CONTROL,
            targetVelocities=[0.0] * len(joints),
            forces=[float(f) for f in friction],
            physicsClientId=self._cid,
        )

    def enable_ft_sensor(self, body: str, joint: int) -> None:
        pb.enableJointForceTorqueSensor(self._id(body), joint, True, physicsClientId=self._cid)

    def reset_joints(self, body: str, joints: Sequence[int], q: Sequence[float]) -> None:
        """Teleport joints to ``q`` (rad) with zero velocity."""
        b = self._id(body)
        for j, v in zip(joints, q):
            pb.resetJointState(b, j, float(v), 0.0, physicsClientId=self._cid)

    def inverse_dynamics(
        self, body: str, q: Sequence[float], qd: Sequence[float], qdd: Sequence[float]
    ) -> np.ndarray:
        """Joint torques (N m) for the movable joints at ``q``, ``qd``, ``qdd`` (with gravity)."""
        tau = pb.calculateInverseDynamics(
            self._id(body),
            list(map(float, q)),
            list(map(float, qd)),
            list(map(float, qdd)),
            physicsClientId=self._cid,
        )
        return np.array(tau, dtype=float)

    def mass_matrix(self, body: str, q: Sequence[float]) -> np.ndarray:
        """Joint-space inertia matrix (n, n) kg m^2 of the movable joints at ``q`` (rad); bodies
        welded to ``body`` (payloads) are not included."""
        m = pb.calculateMassMatrix(self._id(body), list(map(float, q)), physicsClientId=self._cid)
        return np.array(m, dtype=float)

    # ----------------------------------------------------------------- hot path
    def control_io(
        self, body: str, joints: Sequence[int], state_joints: Sequence[int], link: int
    ) -> ControlIo:
        """Engine calls of one control loop, bound once to ``body`` and this client (module doc).

        joints: the torque-controlled joints; state_joints: the joints read every physics step;
        link: the link whose state the loop reads (with velocities).
        """
        b, cid = self._id(body), self._cid
        return ControlIo(
            set_torques=partial(
                pb.setJointMotorControlArray,
                b,
                list(joints),
                pb.TORQUE_CONTROL,
                physicsClientId=cid,
            ),
            step=partial(pb.stepSimulation, physicsClientId=cid),
            joint_states=partial(pb.getJointStates, b, list(state_joints), physicsClientId=cid),
            link_state=partial(
                pb.getLinkState,
                b,
                link,
                computeLinkVelocity=1,
                computeForwardKinematics=1,
                physicsClientId=cid,
            ),
        )

    def follow_io(self, body: str, joints: Sequence[int], links: Sequence[int]) -> FollowIo:
        """Engine calls of a follower, bound once to ``body`` and this client (``FollowIo``).

        joints: the joints it teleports; links: the links whose states it reads.
        """
        b, cid = self._id(body), self._cid
        return FollowIo(
            reset_states=partial(pb.resetJointStatesMultiDof, b, list(joints), physicsClientId=cid),
            link_states=partial(
                pb.getLinkStates,
                b,
                list(links),
                computeLinkVelocity=1,
                computeForwardKinematics=1,
                physicsClientId=cid,
            ),
        )

    def apply_external_force(self, body: str, link: int, force: Sequence[float]) -> None:
        """Push ``link`` with ``force`` (3,) N, world frame, through its centre of mass, during the
        next physics step only (PyBullet clears external forces after every step)."""
        b = self._id(body)
        com = pb.getLinkState(b, link, computeForwardKinematics=1, physicsClientId=self._cid)[0]
        pb.applyExternalForce(
            b, link, list(force), list(com), pb.WORLD_FRAME, physicsClientId=self._cid
        )

    def step(self) -> None:
        pb.stepSimulation(physicsClientId=self._cid)

    def joint_states(self, body: str, joints: list[int]) -> tuple:
        """PyBullet's per-joint tuples (see ``ControlIo.joint_states``)."""
        return pb.getJointStates(self._bodies[body][0], joints, physicsClientId=self._cid)

    @staticmethod
    def rotation_matrix(xyzw: Sequence[float]) -> tuple:
        """Row-major 3x3 rotation matrix (9 floats) of a PyBullet ``[x, y, z, w]`` quaternion."""
        return pb.getMatrixFromQuaternion(xyzw)

    def link_pose(self, body: str, link: int) -> np.ndarray:
        """(7,) world_T_link of a link frame (``BASE_LINK`` for the base)."""
        b = self._id(body)
        if link == BASE_LINK:
            return pose_from_pb(*pb.getBasePositionAndOrientation(b, physicsClientId=self._cid))
        s = pb.getLinkState(b, link, computeForwardKinematics=1, physicsClientId=self._cid)
        return pose_from_pb(s[4], s[5])

    # ----------------------------------------------------------------- static geometry
    def add_static_shape(
        self,
        name: str,
        kind: str,
        pose: Sequence[float],
        *,
        half_extents: Sequence[float] | None = None,
        radius: float | None = None,
        length: float | None = None,
        color: Sequence[float] = (0.6, 0.6, 0.6, 1.0),
    ) -> None:
        """A static ``box`` (half_extents m), ``sphere`` (radius) or ``cylinder`` (radius, length
        along its z) at ``pose`` (7,) world_T_shape."""
        geom = {"box": pb.GEOM_BOX, "sphere": pb.GEOM_SPHERE, "cylinder": pb.GEOM_CYLINDER}[kind]
        args: dict[str, object] = {}
        if kind == "box":
            args["halfExtents"] = [float(v) for v in half_extents]
        else:
            args["radius"] = float(radius)
        if kind == "cylinder":
            col = pb.createCollisionShape(
                geom, height=float(length), physicsClientId=self._cid, **args
            )
            vis = pb.createVisualShape(
                geom, length=float(length), rgbaColor=list(color), physicsClientId=self._cid, **args
            )
        else:
            col = pb.createCollisionShape(geom, physicsClientId=self._cid, **args)
            vis = pb.createVisualShape(
                geom, rgbaColor=list(color), physicsClientId=self._cid, **args
            )
        self._add(name, [self._static_body(col, vis, pose)])

    def add_static_mesh(
        self,
        name: str,
        pose: Sequence[float],
        vertices: np.ndarray,
        faces: np.ndarray,
        color: Sequence[float] = (0.6, 0.6, 0.6, 1.0),
        max_vertices: int = 8000,
    ) -> None:
        """A static concave triangle mesh: vertices (V, 3) m in the body frame, faces (F, 3).

        Meshes above ``max_vertices`` are split into several bodies under the same name (PyBullet's
        command buffers limit one shape's size).
        """
        ids = []
        for v, f in _mesh_chunks(np.asarray(vertices, float), np.asarray(faces, int), max_vertices):
            vl, fl = v.tolist(), f.reshape(-1).tolist()
            col = pb.createCollisionShape(
                pb.GEOM_MESH,
                vertices=vl,
                indices=fl,
                flags=pb.GEOM_FORCE_CONCAVE_TRIMESH,
                physicsClientId=self._cid,
            )
            vis = pb.createVisualShape(
                pb.GEOM_MESH,
                vertices=vl,
                indices=fl,
                rgbaColor=list(color),
                physicsClientId=self._cid,
            )
            ids.append(self._static_body(col, vis, pose))
        self._add(name, ids)

    def set_marker(
        self,
        name: str,
        pose: Sequence[float],
        *,
        radius: float = 0.02,
        color: Sequence[float] = (0.9, 0.1, 0.1, 1.0),
    ) -> None:
        """A visual-only sphere of ``radius`` m at ``pose`` (7,) world_T_marker: drawn in
        renders, never collides, no mass. Created on the first call under ``name``, moved on
        the next ones (the radius and colour of the first call stay)."""
        position, orientation = pose_to_pb(pose)
        if name in self._bodies:
            pb.resetBasePositionAndOrientation(
                self._bodies[name][0], position, orientation, physicsClientId=self._cid
            )
            return
        vis = pb.createVisualShape(
            pb.GEOM_SPHERE, radius=float(radius), rgbaColor=list(color), physicsClientId=self._cid
        )
        body = pb.createMultiBody(0.0, -1, vis, position, orientation, physicsClientId=self._cid)
        self._add(name, [body])

    def set_link_mass(
        self, body: str, link: int, mass: float, inertia_diagonal: Sequence[float]
    ) -> None:
        """Mass (kg) and principal inertia (3,) kg m^2 of one link (the inertial frame stays)."""
        pb.changeDynamics(
            self._id(body),
            link,
            mass=float(mass),
            localInertiaDiagonal=[float(v) for v in inertia_diagonal],
            physicsClientId=self._cid,
        )

    def _static_body(self, col: int, vis: int, pose: Sequence[float]) -> int:
        if col < 0:
            raise EngineError("PyBullet could not create the collision shape")
        position, orientation = pose_to_pb(pose)
        return pb.createMultiBody(0.0, col, vis, position, orientation, physicsClientId=self._cid)

    def remove(self, name: str) -> None:
        """Remove a body (all its parts) or a constraint by name."""
        if name in self._constraints:
            pb.removeConstraint(self._constraints.pop(name), physicsClientId=self._cid)
            return
        for b in self._bodies.pop(name, []):
            pb.removeBody(b, physicsClientId=self._cid)

    # ----------------------------------------------------------------- attachments
    def attach_point_mass(
        self,
        name: str,
        body: str,
        link: int,
        mass: float,
        link_p_com: Sequence[float],
        radius: float = 0.02,
    ) -> None:
        """Weld a solid sphere of ``mass`` kg (no collisions) to ``link`` of ``body`` with its
        centre at ``link_p_com`` (3,) m in the link frame."""
        b = self._id(body)
        inertial = self.link_inertial(body, link)
        world = self.link_pose(body, link)
        com = np.asarray(link_p_com, float)
        wp, wq = pb.multiplyTransforms(*pose_to_pb(world), com.tolist(), [0, 0, 0, 1])
        shape = pb.createCollisionShape(pb.GEOM_SPHERE, radius=radius, physicsClientId=self._cid)
        payload = pb.createMultiBody(float(mass), shape, -1, wp, wq, physicsClientId=self._cid)
        pb.setCollisionFilterGroupMask(
            payload, BASE_LINK, _NO_COLLISION, _NO_COLLISION, physicsClientId=self._cid
        )
        pb.changeDynamics(
            payload, BASE_LINK, linearDamping=0.0, angularDamping=0.0, physicsClientId=self._cid
        )
        # constraint frames are given relative to the parent's centre-of-mass (inertial) frame
        ip, iq = pose_to_pb(inertial.link_T_inertial)
        inv_p, inv_q = pb.invertTransform(ip, iq)
        pp, pq = pb.multiplyTransforms(inv_p, inv_q, com.tolist(), [0, 0, 0, 1])
        c = pb.createConstraint(
            b,
            link,
            payload,
            BASE_LINK,
            pb.JOINT_FIXED,
            [0, 0, 0],
            pp,
            [0, 0, 0],
            pq,
            [0, 0, 0, 1],
            physicsClientId=self._cid,
        )
        pb.changeConstraint(c, maxForce=_FIXED_CONSTRAINT_MAX_FORCE_N, physicsClientId=self._cid)
        self._add(name, [payload])
        self._constraints[name + "/weld"] = c

    def detach(self, name: str) -> None:
        """Remove an attachment made with ``attach_point_mass``; no-op if there is none."""
        if name + "/weld" in self._constraints:
            self.remove(name + "/weld")
        if name in self._bodies:
            self.remove(name)

    # ----------------------------------------------------------------- queries
    def closest_distance(
        self,
        body_a: str,
        body_b: str,
        max_distance: float = 0.05,
        links_a: Sequence[int] | None = None,
    ) -> float:
        """Smallest signed distance (m) between two bodies (all their parts; only ``links_a`` of
        ``body_a`` if given), capped at ``max_distance``; negative means penetration."""
        best = max_distance
        for a in self.body_ids(body_a):
            for b in self.body_ids(body_b):
                if links_a is None:
                    points = pb.getClosestPoints(a, b, max_distance, physicsClientId=self._cid)
                else:
                    points = [
                        c
                        for link in links_a
                        for c in pb.getClosestPoints(
                            a, b, max_distance, linkIndexA=link, physicsClientId=self._cid
                        )
                    ]
                for c in points:
                    best = min(best, c[8])
        return best

    def render(
        self,
        width: int,
        height: int,
        eye: Sequence[float],
        target: Sequence[float],
        fov_deg: float = 60.0,
    ) -> np.ndarray:
        """An RGB image (height, width, 3) uint8 from a camera at ``eye`` looking at ``target``
        (world, m); TinyRenderer in DIRECT mode."""
        view = pb.computeViewMatrix(list(eye), list(target), [0, 0, 1], physicsClientId=self._cid)
        proj = pb.computeProjectionMatrixFOV(
            fov_deg, width / height, 0.02, 10.0, physicsClientId=self._cid
        )
        img = pb.getCameraImage(
            width, height, view, proj, renderer=pb.ER_TINY_RENDERER, physicsClientId=self._cid
        )
        rgba = np.asarray(img[2], dtype=np.uint8).reshape(height, width, 4)
        return rgba[:, :, :3].copy()


def _mesh_chunks(vertices: np.ndarray, faces: np.ndarray, max_vertices: int):
    """Split a mesh into pieces of at most ``max_vertices`` vertices (by consecutive faces)."""
    if len(vertices) <= max_vertices:
        yield vertices, faces
        return
    per_chunk = max(1, max_vertices // 3)
    for start in range(0, len(faces), per_chunk):
        f = faces[start : start + per_chunk]
        used, inverse = np.unique(f.reshape(-1), return_inverse=True)
        yield vertices[used], inverse.reshape(-1, 3)
