"""PyBullet's exact collision queries for the planner's tests and benchmarks (never used by twin).

``ExactChecker`` holds one DIRECT client with the arm (URDF, self-collision enabled), a scene's
items exactly as the simulator builds them (``sim.scene.add_scene`` rules: primitives, concave
triangle meshes, point clouds as voxel cubes) and optional attached boxes (tool, carried object).
A configuration collides when any contact point has a negative distance between

* a moving link and an obstacle (the fixed base is not checked against the scene), or
* two links whose groups are not the same and not joined by one joint (the same rule as the
  planner's model), or an attached box and a link outside the last group.

Two query styles: ``colliding`` (joint resets, one ``performCollisionDetection``, candidate contact
points confirmed with ``getClosestPoints``: fast, used to verify) and ``colliding_closest`` (joint
resets plus ``getClosestPoints`` per body and per link pair, as pybullet-planning does: the baseline
planner's check).
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pybullet as pb
from twin.sim.scene import voxel_cubes

from twin.planning import InitialState, PathRequest, Planner
from twin.planning.collision.checker import MotionChecker
from twin.scenes import ItemKind, Scene, load_scene


def _xyzw(m: np.ndarray) -> list[float]:
    from twin.spatial import quaternion

    w, x, y, z = quaternion.from_matrix(m[:3, :3])
    return [float(x), float(y), float(z), float(w)]


class ExactChecker:
    """Exact PyBullet collision checks of the arm in a scene (see the module doc)."""

    def __init__(self, urdf_path, scene: Scene | str | None = None, disabled_pairs=()) -> None:
        """``disabled_pairs``: link-name pairs never checked against each other (an SRDF's)."""
        self.client = pb.connect(pb.DIRECT)
        cid = self.client
        self.robot = pb.loadURDF(
            str(urdf_path),
            useFixedBase=True,
            flags=pb.URDF_USE_SELF_COLLISION | pb.URDF_USE_SELF_COLLISION_EXCLUDE_PARENT,
            physicsClientId=cid,
        )
        n = pb.getNumJoints(self.robot, physicsClientId=cid)
        self.link_index = {pb.getBodyInfo(self.robot, physicsClientId=cid)[0].decode(): -1}
        parent = {}
        revolute = {}
        self.joints = []
        for j in range(n):
            info = pb.getJointInfo(self.robot, j, physicsClientId=cid)
            self.link_index[info[12].decode()] = j
            parent[j] = info[16]
            revolute[j] = info[2] == pb.JOINT_REVOLUTE
            if revolute[j]:
                self.joints.append(j)
        self.group = {-1: 0}
        for j in range(n):  # joints are listed parents first
            self.group[j] = self.group[parent[j]] + (1 if revolute[j] else 0)
        self.last_group = max(self.group.values())
        self.obstacles: list[int] = []
        self.attached: list[tuple[int, np.ndarray]] = []  # (body, flange_T_box centre)
        self._flange = self.link_index.get("flange", max(self.link_index.values()))
        self.disabled = {
            frozenset((self.link_index[a], self.link_index[b])) for a, b in disabled_pairs
        }
        self.contact_threshold = 0.0
        if scene is not None:
            self.add_scene(scene)
        links = [k for k in self.group if self._has_shape(k)]
        self.self_pairs = [
            (a, b) for a in links for b in links if a < b and not self._link_pair_ok(a, b)
        ]
        self.calls = 0

    def _has_shape(self, link: int) -> bool:
        return bool(pb.getCollisionShapeData(self.robot, link, physicsClientId=self.client))

    def close(self) -> None:
        if self.client is not None:
            pb.disconnect(self.client)
            self.client = None

    def __enter__(self) -> ExactChecker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------- world
    def add_scene(self, scene: Scene | str) -> None:
        if not isinstance(scene, Scene):
            scene = load_scene(scene)
        cid = self.client
        for item in scene.items:
            m = item.world_T_item
            pos, orn = m[:3, 3].tolist(), _xyzw(m)
            if item.kind is ItemKind.BOX:
                shape = pb.createCollisionShape(
                    pb.GEOM_BOX, halfExtents=(item.dims / 2).tolist(), physicsClientId=cid
                )
            elif item.kind is ItemKind.SPHERE:
                shape = pb.createCollisionShape(
                    pb.GEOM_SPHERE, radius=item.dims[0], physicsClientId=cid
                )
            elif item.kind is ItemKind.CYLINDER:
                shape = pb.createCollisionShape(
                    pb.GEOM_CYLINDER, radius=item.dims[0], height=item.dims[1], physicsClientId=cid
                )
            else:
                if item.kind is ItemKind.MESH:
                    mesh = item.mesh()
                    vertices, faces = mesh.vertices, mesh.faces
                else:
                    vertices, faces = voxel_cubes(item.points, item.dims[0])
                shape = pb.createCollisionShape(
                    pb.GEOM_MESH,
                    vertices=np.asarray(vertices, float).tolist(),
                    indices=np.asarray(faces, int).ravel().tolist(),
                    flags=pb.GEOM_FORCE_CONCAVE_TRIMESH,
                    physicsClientId=cid,
                )
            body = pb.createMultiBody(0.0, shape, -1, pos, orn, physicsClientId=cid)
            self.obstacles.append(body)

    def attach_box(self, flange_T_bottom: np.ndarray, dimensions: np.ndarray) -> None:
        """A box rigidly attached to the flange (bottom-centred pose in the flange frame)."""
        centre = np.asarray(flange_T_bottom, float).copy()
        centre[:3, 3] += 0.5 * dimensions[2] * centre[:3, 2]
        shape = pb.createCollisionShape(
            pb.GEOM_BOX,
            halfExtents=(np.asarray(dimensions) / 2).tolist(),
            physicsClientId=self.client,
        )
        body = pb.createMultiBody(
            1.0, shape, -1, [0, 0, 5], [0, 0, 0, 1], physicsClientId=self.client
        )
        self.attached.append((body, centre))

    # ------------------------------------------------------------------------------ checks
    def _set(self, q: np.ndarray) -> None:
        cid = self.client
        for j, v in zip(self.joints, q):
            pb.resetJointState(self.robot, j, float(v), physicsClientId=cid)
        if self.attached:
            state = pb.getLinkState(
                self.robot, self._flange, computeForwardKinematics=True, physicsClientId=cid
            )
            from twin.spatial import quaternion

            x, y, z, w = state[5]
            base_T_flange = np.eye(4)
            base_T_flange[:3, :3] = quaternion.to_matrix(np.array([w, x, y, z]))
            base_T_flange[:3, 3] = state[4]
            for body, flange_T in self.attached:
                m = base_T_flange @ flange_T
                pb.resetBasePositionAndOrientation(
                    body, m[:3, 3].tolist(), _xyzw(m), physicsClientId=cid
                )

    def _link_pair_ok(self, la: int, lb: int) -> bool:
        return abs(self.group[la] - self.group[lb]) < 2 or frozenset((la, lb)) in self.disabled

    def colliding(self, q: np.ndarray) -> bool:
        """True when configuration q (6,) rad collides: one detection pass lists candidate
        contacts, each confirmed with ``getClosestPoints`` (Bullet keeps stale contact points of
        pairs that separated since the previous configuration; closest points are stateless)."""
        cid = self.client
        self._set(q)
        self.calls += 1
        pb.performCollisionDetection(physicsClientId=cid)
        candidates = []
        for c in pb.getContactPoints(bodyA=self.robot, physicsClientId=cid):
            if c[8] >= 0.0:
                continue
            body_b, la, lb = c[2], c[3], c[4]
            if body_b == self.robot:
                relevant = not self._link_pair_ok(la, lb)
            elif body_b in self.obstacles:
                relevant = self.group[la] > 0
            else:  # an attached box
                relevant = self.group[la] != self.last_group
            if relevant:
                candidates.append((self.robot, body_b, la, lb))
        for body, _ in self.attached:
            for c in pb.getContactPoints(bodyA=body, physicsClientId=cid):
                if c[8] < 0.0 and c[2] in self.obstacles:
                    candidates.append((body, c[2], c[3], c[4]))
        for a, b, la, lb in candidates:
            points = pb.getClosestPoints(a, b, 0.0, la, lb, physicsClientId=cid)
            if any(p[8] < 0.0 for p in points):
                return True
        return False

    def colliding_closest(self, q: np.ndarray) -> bool:
        """The same decision with ``getClosestPoints`` queries (pybullet-planning style)."""
        cid = self.client
        self._set(q)
        self.calls += 1
        for body in self.obstacles:
            for c in pb.getClosestPoints(self.robot, body, 0.0, physicsClientId=cid):
                if c[8] < 0.0 and self.group[c[3]] > 0:
                    return True
        for a, b in self.self_pairs:
            if any(
                c[8] < 0.0
                for c in pb.getClosestPoints(self.robot, self.robot, 0.0, a, b, physicsClientId=cid)
            ):
                return True
        for body, _ in self.attached:
            for other in self.obstacles:
                if any(
                    c[8] < 0.0 for c in pb.getClosestPoints(body, other, 0.0, physicsClientId=cid)
                ):
                    return True
            for c in pb.getClosestPoints(body, self.robot, 0.0, physicsClientId=cid):
                if c[8] < 0.0 and self.group[c[4]] != self.last_group:
                    return True
        return False

    def closer_than(self, q: np.ndarray, obstacle_distance: float, self_distance: float) -> bool:
        """True when at configuration q (6,) rad a moving link comes within ``obstacle_distance``
        m of an obstacle, or a checked link pair within ``self_distance`` m of each other."""
        cid = self.client
        self._set(q)
        for body in self.obstacles:
            for c in pb.getClosestPoints(self.robot, body, obstacle_distance, physicsClientId=cid):
                if c[8] < obstacle_distance and self.group[c[3]] > 0:
                    return True
        for a, b in self.self_pairs:
            points = pb.getClosestPoints(
                self.robot, self.robot, self_distance, a, b, physicsClientId=cid
            )
            if any(c[8] < self_distance for c in points):
                return True
        return False

    def colliding_many(self, q: np.ndarray) -> np.ndarray:
        """``colliding`` for configurations (N, 6) rad -> (N,) bool."""
        return np.array([self.colliding(x) for x in np.atleast_2d(q)], dtype=bool)


#: Steps per round of ``ExactMotionChecker.free_prefixes`` (a blocked segment stops early).
_PREFIX_CHUNKS = (32, 128, 512, 2048, 1 << 62)


class ExactMotionChecker(MotionChecker):
    """The planner's checker interface on PyBullet's exact queries: the baseline's checker.

    Configurations are checked one by one with ``colliding_closest`` (joint resets plus
    ``getClosestPoints``, as pybullet-planning's collision functions do); segments at a fixed
    joint resolution (pybullet-planning's default, 3 degrees per step), ends first, then
    in order with an early exit.
    """

    def __init__(
        self, exact: ExactChecker, lower, upper, resolution: float = np.radians(3.0)
    ) -> None:
        self.exact = exact
        self.lower = np.asarray(lower, dtype=float)
        self.upper = np.asarray(upper, dtype=float)
        self.resolution = resolution
        self.checked = 0

    def _free_inside(self, q: np.ndarray) -> np.ndarray:
        self.checked += len(q)
        return np.array([not self.exact.colliding_closest(x) for x in q], dtype=bool)

    def steps(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        dq = np.abs(np.atleast_2d(qb) - np.atleast_2d(qa))
        return np.maximum(1, np.ceil(dq.max(axis=1) / self.resolution).astype(int))

    def free_prefixes(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        """``free_prefix`` of segments qa -> qb (K, n) together: fractions (K,). Steps at the
        joint resolution are checked in order, in rounds of growing size; a segment stops at its
        first blocked step (the planner's own checker certifies intervals instead; this is the
        baseline's fixed-resolution way)."""
        qa = np.atleast_2d(np.asarray(qa, dtype=float))
        qb = np.atleast_2d(np.asarray(qb, dtype=float))
        n_steps = self.steps(qa, qb)
        owner = np.repeat(np.arange(len(qa)), n_steps)
        k = np.arange(n_steps.sum()) - np.repeat(np.cumsum(n_steps) - n_steps, n_steps) + 1
        configs = qa[owner] + (k / n_steps[owner])[:, None] * (qb - qa)[owner]
        first_bad = np.full(len(qa), np.iinfo(np.int64).max)
        first_bad[~self.within_limits(qb)] = 1  # outside the limits: nothing beyond qa is kept
        lo = 1
        for size in _PREFIX_CHUNKS:
            hi = lo + size
            sel = np.flatnonzero((k >= lo) & (k < hi) & (k < first_bad[owner]))
            if len(sel):
                ok = self._free_inside(configs[sel])
                bad = sel[~ok]
                np.minimum.at(first_bad, owner[bad], k[bad])
            lo = hi
            if lo > n_steps.max():
                break
        return np.where(first_bad > n_steps, 1.0, (np.minimum(first_bad, n_steps) - 1) / n_steps)

    def _segments(self, qa: np.ndarray, qb: np.ndarray):
        """Each segment checked configuration by configuration from its start, at the joint
        resolution, stopping at the first collision (pybullet-planning's way)."""
        qa, qb = np.atleast_2d(qa), np.atleast_2d(qb)
        free = np.zeros(len(qa), dtype=bool)
        start_ok = np.zeros(len(qa), dtype=bool)
        end_ok = np.zeros(len(qa), dtype=bool)
        inside = self.within_limits(qa) & self.within_limits(qb)
        for i, n in enumerate(self.steps(qa, qb)):
            if not inside[i]:
                continue
            start_ok[i] = self._free_inside(qa[i : i + 1])[0]
            end_ok[i] = self._free_inside(qb[i : i + 1])[0]
            free[i] = start_ok[i] and end_ok[i]
            for t in np.arange(1, n) / n:
                if not free[i]:
                    break
                free[i] = self._free_inside((qa[i] + t * (qb[i] - qa[i]))[None])[0]
        return free, start_ok, end_ok


def verify_path(
    exact: ExactChecker, path: np.ndarray, travel, mm: float = 0.001, rad: float = 0.01
) -> bool:
    """True when the joint-space polyline ``path`` (K, 6) rad collides anywhere, checked with
    ``exact.colliding`` at steps where no joint moves more than ``rad`` and no point of the robot
    more than ``mm`` metres (``travel(qa, qb)``: a bound (K,) m of any point's displacement)."""
    path = np.atleast_2d(path)
    if exact.colliding(path[0]):
        return True
    for qa, qb in itertools.pairwise(path):
        n = max(
            1,
            int(np.ceil(np.max(np.abs(qb - qa)) / rad)),
            int(np.ceil(float(travel(qa[None], qb[None])[0]) / mm)),
        )
        for t in np.arange(1, n + 1) / n:
            if exact.colliding(qa + t * (qb - qa)):
                return True
    return False


def _path_of(start: np.ndarray, result) -> np.ndarray:
    """The planned polyline (K + 1, n) rad: ``start``, then the result's way-points."""
    return np.vstack([start, *[w.configuration for w in result.path()]])


def time_and_verify(
    planner: Planner, exact: ExactChecker, queries: list[tuple[np.ndarray, np.ndarray]]
) -> dict:
    """Plans every (start, goal) (n,) rad query in one timed loop, then a second pass plans each
    again right after the exact verification of the previous path (PyBullet work in between,
    which evicts the planner's code and data from the CPU caches: the ``cold`` times) and
    compares it with the first (the replay guarantee). Returns arrays over the queries:
    ``times``, ``cpu``, ``cold`` (s), ``ok``, ``checks`` (configurations checked); and the
    counts ``colliding`` (paths that collide in ``exact``, ``verify_path``) and ``mismatches``
    (queries whose second plan differs)."""
    times, cpu, ok, checks, results = [], [], [], [], []
    for start, goal in queries:
        c0, w0, p0 = planner.checker.checked, time.perf_counter(), time.process_time()
        result = planner.path(InitialState(start), PathRequest([goal]))
        times.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - p0)
        checks.append(planner.checker.checked - c0)
        ok.append(bool(result))
        results.append(result)
    cold, colliding, mismatches = [], 0, 0
    for (start, goal), result in zip(queries, results):
        t0 = time.perf_counter()
        again = planner.path(InitialState(start), PathRequest([goal]))
        cold.append(time.perf_counter() - t0)
        mismatches += bool(again) != bool(result)
        if result:
            path = _path_of(start, result)
            colliding += verify_path(exact, path, planner.checker.travel)
            mismatches += bool(again) and not np.array_equal(_path_of(start, again), path)
    return {
        "times": np.array(times),
        "cpu": np.array(cpu),
        "cold": np.array(cold),
        "ok": np.array(ok),
        "checks": np.array(checks),
        "colliding": int(colliding),
        "mismatches": int(mismatches),
    }
