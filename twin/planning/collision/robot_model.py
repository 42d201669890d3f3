"""The robot's collision model: spheres on rigid groups of links, Lipschitz bounds, pair lists.

A *group* is the set of links moved by the same leading joints: group 0 is the fixed base,
group ``k`` the links carried by joint ``k`` and no later joint (so the flange, sensor, tool and
TCP belong to the last group). Each group has an *anchor*: the child link of its joint, whose
origin lies on the joint axis. Spheres are stored in their group's anchor frame.

Bodies: one per URDF collision shape (``"<link>#<index>"``; a mesh is covered by
``mesh_spheres``: its convex pieces' hulls), plus the attached bodies
(replaceable tool, carried object) on the last group. Collision rules (the same rules the exact PyBullet check
in the tests uses):

* the base group (fixed) is not checked against the environment: it cannot move;
* bodies of the same group, or of groups joined by one joint, are never checked against each
  other (adjacent links touch at their joint by design); attached bodies are checked against every
  URDF body outside the last group, never against each other;
* bodies of two links the model's SRDF disables (``disabled_collision_pairs``) are never checked;
* of the remaining pairs, the generated self-collision matrix (``self_collision``) drops those
  that never come close over many sampled configurations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.planning.collision import self_collision
from twin.planning.collision import spheres as sph
from twin.planning.collision.spheres import SphereSet
from twin.spatial import batch

_MATRIX_CACHE: dict[tuple, frozenset] = {}


#: Names of the attached bodies the planner manages (tool, attachments, carried object).
TOOL_BODY = "replaceable_tool"
ATTACHMENTS_BODY = "attachments"
CARRIED_BODY = "carried_object"


@dataclass(frozen=True)
class Body:
    """A rigid body of the collision model: ``spheres`` in the anchor frame of ``group``."""

    name: str
    group: int
    spheres: SphereSet
    attached: bool = False


@dataclass(frozen=True)
class CompiledSpheres:
    """Flat arrays over all spheres (S) for the batched checks.

    group: (S,) group index; local: (S, 3) m anchor frame; radii: (S,) m (true cover radii);
    weights: (S, n) m/rad, Lipschitz bound of each centre's speed per joint speed; env: (S,) bool
    checked against obstacles; pair_a, pair_b: (P,) sphere indices checked for self-collision,
    grouped by body pair. ``centers`` returns (N, S + B, 3): the spheres, then one bounding sphere
    per body, so that body pairs far apart skip their sphere pairs.
    """

    group: np.ndarray
    local: np.ndarray
    radii: np.ndarray
    weights: np.ndarray
    env: np.ndarray
    pair_a: np.ndarray
    pair_b: np.ndarray
    body_of: np.ndarray
    bound_radius: np.ndarray  # (B,) m, bounding sphere of each body (centres after the spheres)
    weights_all: np.ndarray  # (S + B, n) Lipschitz weights of the sphere and bound centres
    body_pair_a: np.ndarray  # (Pb,) bodies of each checked body pair ...
    body_pair_b: np.ndarray
    body_pair_start: np.ndarray  # (Pb + 1,) ... and its sphere pairs: pair_a[start[i]:start[i+1]]
    all_group: np.ndarray  # (S + B,) group of every sphere, then of every body bound
    local_t: np.ndarray  # (3, S + B) local centres of the spheres then the bounds, transposed
    index: np.ndarray  # (S + B,) arange


class RobotSpheres:
    """Sphere model of an arm (``ArmModel`` contract: ``fk_all``, ``jacobian``,
    ``collision_shapes``, ``link_names``, limits) and of what it carries."""

    def __init__(
        self, model, max_radius: float = 0.08, max_slack: float = 0.025, matrix: bool = True
    ) -> None:
        self.model = model
        self.max_radius = max_radius
        self.max_slack = max_slack
        self.n = len(model.joint_names)
        groups, anchors = _groups_and_anchors(model)
        self.link_group = groups
        self.anchors = anchors  # anchor link name per group (index 0: the root link)
        home = np.asarray(model.home_q, dtype=float)
        frames = model.fk_all(home)
        self._anchor_T_link = {
            link: batch.invert_matrices(frames[anchors[g]]) @ frames[link]
            for link, g in groups.items()
        }
        self._chain = AnchorChain(model, anchors)
        bodies = []
        for link in model.link_names:
            files = _mesh_files(model, link)
            for i, shape in enumerate(model.collision_shapes(link)):
                cover = self._cover_shape(link, shape, files[i])
                bodies.append(Body(f"{link}#{i}", groups[link], cover))
        self.urdf_bodies: tuple[Body, ...] = tuple(bodies)
        #: Sorted body-name pairs never checked: their links are disabled by the model's SRDF.
        self.disabled_pairs = self_collision.disabled_body_pairs(model, self.urdf_bodies)
        self.attached: dict[str, Body] = {}
        self.kept_pairs: frozenset = frozenset()
        if matrix:
            key = (str(model.urdf_path), self_collision.CLEARANCE)
            key += (self.disabled_pairs,)
            if key not in _MATRIX_CACHE:
                _MATRIX_CACHE[key] = self_collision.load_or_generate(model, self)
            self.kept_pairs = _MATRIX_CACHE[key]
        self._compiled: CompiledSpheres | None = None

    # ---------------------------------------------------------------------------- geometry
    @property
    def last_group(self) -> int:
        return self.n

    @property
    def chain(self) -> AnchorChain:
        """The batched FK of the group anchors."""
        return self._chain

    def anchor_T(self, link: str) -> np.ndarray:
        """Constant transform (4, 4) from the anchor frame of ``link``'s group to ``link``."""
        return self._anchor_T_link[link]

    def _cover_shape(self, link: str, shape, mesh_file=None) -> SphereSet:
        kind, dims, origin = shape
        if kind == "mesh":
            # Imported here: mesh covers need scipy's hulls, whose import (about 1-2 s) an arm
            # of primitive shapes, such as the shipped one, should not pay.
            from twin.planning.collision import mesh_spheres

            s = mesh_spheres.cover_mesh_file(
                mesh_file, tuple(dims), self.max_radius, self.max_slack
            )
        elif kind == "sphere":
            s = sph.cover_sphere(dims[0])
        elif kind == "cylinder":
            s = sph.cover_cylinder(dims[0], dims[1], self.max_radius, self.max_slack)
        elif kind == "box":
            s = sph.cover_centered_box(0.5 * np.asarray(dims), self.max_radius, self.max_slack)
        else:
            raise ValueError(
                f"link {link!r}: collision shape {kind!r} is not supported; "
                "expected box, cylinder or sphere"
            )
        return s.transformed(self._anchor_T_link[link] @ origin)

    def primitive_bodies(self) -> list[tuple[str, int, list]]:
        """``(name, group, [(kind, dims, anchor_T_shape (4, 4))])`` per URDF body: one body per
        collision shape, named ``"<link>#<index>"``; a mesh is given as its cover's spheres."""
        out = []
        body = {b.name: b for b in self.urdf_bodies}
        for link in self.model.link_names:
            for i, (kind, dims, origin) in enumerate(self.model.collision_shapes(link)):
                name = f"{link}#{i}"
                if kind == "mesh":
                    cover = body[name].spheres
                    prims = [
                        ("sphere", np.array([r]), _at(c))
                        for c, r in zip(cover.centers, cover.radii)
                    ]
                else:
                    prims = [(kind, np.asarray(dims), self._anchor_T_link[link] @ origin)]
                out.append((name, self.link_group[link], prims))
        return out

    def set_attached(self, name: str, spheres_in_anchor: SphereSet | None) -> None:
        """Attach (or with None, remove) a body on the last group; spheres in its anchor frame."""
        if spheres_in_anchor is None or len(spheres_in_anchor.radii) == 0:
            self.attached.pop(name, None)
        else:
            self.attached[name] = Body(name, self.last_group, spheres_in_anchor, attached=True)
        self._compiled = None

    def bodies(self) -> tuple[Body, ...]:
        return self.urdf_bodies + tuple(self.attached[k] for k in sorted(self.attached))

    # ------------------------------------------------------------------------- compilation
    def compiled(self) -> CompiledSpheres:
        if self._compiled is None:
            self._compiled = self._compile()
        return self._compiled

    def _compile(self) -> CompiledSpheres:
        bodies = self.bodies()
        starts = np.cumsum([0] + [len(b.spheres.radii) for b in bodies])
        group = np.concatenate([np.full(len(b.spheres.radii), b.group) for b in bodies])
        local = np.concatenate([b.spheres.centers for b in bodies])
        radii = np.concatenate([b.spheres.radii for b in bodies])
        body_of = np.concatenate([np.full(len(b.spheres.radii), i) for i, b in enumerate(bodies)])
        weights = _lipschitz_weights(group, local, self._chain)
        env = group > 0
        # Bounding sphere of every body (appended after the spheres, same transforms).
        b_local, b_radius = [], []
        for b in bodies:
            mid = 0.5 * (b.spheres.centers.min(axis=0) + b.spheres.centers.max(axis=0))
            b_local.append(mid)
            b_radius.append(
                float(np.max(np.linalg.norm(b.spheres.centers - mid, axis=1) + b.spheres.radii))
            )
        pa, pb, body_a, body_b, pair_start = [], [], [], [], [0]
        for i, a in enumerate(bodies):
            for j in range(i + 1, len(bodies)):
                b = bodies[j]
                if not self._pair_checked(a, b):
                    continue
                ia = np.arange(starts[i], starts[i + 1])
                ib = np.arange(starts[j], starts[j + 1])
                pa.append(np.repeat(ia, len(ib)))
                pb.append(np.tile(ib, len(ia)))
                body_a.append(i)
                body_b.append(j)
                pair_start.append(pair_start[-1] + len(ia) * len(ib))
        pair_a = np.concatenate(pa) if pa else np.zeros(0, dtype=int)
        pair_b = np.concatenate(pb) if pb else np.zeros(0, dtype=int)
        all_local = np.vstack((local, np.array(b_local).reshape(-1, 3)))
        all_group = np.concatenate((group, [b.group for b in bodies])).astype(int)
        return CompiledSpheres(
            group=group,
            local=local,
            radii=radii,
            weights=weights,
            env=env,
            pair_a=pair_a,
            pair_b=pair_b,
            body_of=body_of,
            bound_radius=np.array(b_radius),
            weights_all=np.vstack(
                (
                    weights,
                    _lipschitz_weights(
                        all_group[len(group) :], all_local[len(group) :], self._chain
                    ),
                )
            ),
            body_pair_a=np.array(body_a, dtype=int),
            body_pair_b=np.array(body_b, dtype=int),
            body_pair_start=np.array(pair_start, dtype=int),
            all_group=all_group,
            local_t=np.ascontiguousarray(all_local.T),
            index=np.arange(len(all_group)),
        )

    def reach(self) -> float:
        """Bound (m) of the distance of any point of the robot from joint 1's anchor origin:
        ``|v_1| + ... + |v_{k-1}| + |c_local| + r`` over all spheres (see ``_lipschitz_weights``)."""
        c = self.compiled()
        lengths = np.concatenate(
            ([0.0], np.cumsum(np.linalg.norm(self._chain.c_trans[1:], axis=1)))
        )
        k = np.maximum(c.group, 1)
        return float(np.max(lengths[k - 1] + np.linalg.norm(c.local, axis=1) + c.radii))

    def origin_1(self) -> np.ndarray:
        """Joint 1's anchor origin (3,) m, base frame: fixed, the centre of ``reach``."""
        return self._chain.base[:3, :3] @ self._chain.c_trans[0] + self._chain.base[:3, 3]

    def _pair_checked(self, a: Body, b: Body) -> bool:
        if a.attached and b.attached:
            return False
        if a.attached or b.attached:
            other = b if a.attached else a
            return other.group != self.last_group
        if tuple(sorted((a.name, b.name))) in self.disabled_pairs:
            return False
        return (a.name, b.name) in self.kept_pairs or (b.name, a.name) in self.kept_pairs

    # ------------------------------------------------------------------------------ batched
    def anchor_frames(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rotations (N, G, 3, 3) and translations (N, G, 3) m of every group's anchor."""
        return self._chain.frames(np.atleast_2d(q))

    def centers(self, q: np.ndarray, compiled: CompiledSpheres | None = None) -> np.ndarray:
        """Centres (N, S + B, 3) m in the base frame for configurations q (N, n) rad: the S
        spheres, then the B body bounds (see ``CompiledSpheres``)."""
        c = compiled or self.compiled()
        rot, trans = self.anchor_frames(q)
        return self._centers_from(rot, trans, c)

    @staticmethod
    def _centers_from(rot: np.ndarray, trans: np.ndarray, c: CompiledSpheres) -> np.ndarray:
        count, groups = rot.shape[:2]
        # Every group's transform applied to every sphere (G x cheaper than gathering when
        # there are few groups), then each sphere's own group picked out.
        moved = rot.reshape(count, groups * 3, 3) @ c.local_t  # (N, G*3, S)
        moved = moved.reshape(count, groups, 3, -1)[:, c.all_group, :, c.index]  # (S+B, N, 3)
        return moved.transpose(1, 0, 2) + trans[:, c.all_group]


class AnchorChain:
    """Batched FK of the group anchors: ``base_T_anchor_k = base_T_anchor_{k-1} C_k Rot(a_k, q_k)``
    with ``C_k`` the constant transform between consecutive anchors at ``q = 0`` and ``a_k`` the
    joint axis in anchor ``k``'s frame, both read from the model's FK and Jacobian once.
    ``Rot(a, q) = P + cos(q) (I - P) + sin(q) [a]x`` with ``P = a a^T``."""

    def __init__(self, model, anchors: list[str]) -> None:
        n = len(model.joint_names)
        zero = np.zeros(n)
        frames = [np.asarray(model.fk(zero, a)) for a in anchors]
        self.base = frames[0]
        c_rot, c_trans, p, ac, as_, axes = [], [], [], [], [], []
        for k in range(1, n + 1):
            c = np.linalg.solve(frames[k - 1], frames[k])
            axis_base = np.asarray(model.jacobian(zero, anchors[k]))[3:, k - 1]
            a = frames[k][:3, :3].T @ axis_base
            a = a / np.linalg.norm(a)
            outer = np.outer(a, a)
            skew = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
            axes.append(a)
            c_rot.append(c[:3, :3])
            c_trans.append(c[:3, 3])
            p.append(c[:3, :3] @ outer)
            ac.append(c[:3, :3] @ (np.eye(3) - outer))
            as_.append(c[:3, :3] @ skew)
        self.axes = np.array(axes)  # (n, 3) joint k's axis in anchor k's frame
        self.c_trans = np.array(c_trans)  # (n, 3)
        self.p, self.ac, self.as_ = np.array(p), np.array(ac), np.array(as_)  # (n, 3, 3) each

    def frames(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rotations (N, n+1, 3, 3) and translations (N, n+1, 3) of the anchors (base first)."""
        count, n = q.shape
        local = (
            self.p + np.cos(q)[:, :, None, None] * self.ac + np.sin(q)[:, :, None, None] * self.as_
        )
        rot = np.empty((count, n + 1, 3, 3))
        rot[:, 0] = self.base[:3, :3]
        for k in range(n):
            np.matmul(rot[:, k], local[:, k], out=rot[:, k + 1])
        steps = np.einsum("nkij,kj->nki", rot[:, :n], self.c_trans)
        trans = np.empty((count, n + 1, 3))
        trans[:, 0] = self.base[:3, 3]
        np.cumsum(steps, axis=1, out=trans[:, 1:])
        trans[:, 1:] += self.base[:3, 3]
        return rot, trans


def _at(center: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, 3] = center
    return out


def _mesh_files(model, link: str) -> tuple:
    """The mesh file of each collision shape of ``link`` (None for primitives); a model without
    ``collision_mesh_files`` has primitives only."""
    count = len(model.collision_shapes(link))
    get = getattr(model, "collision_mesh_files", None)
    return tuple(get(link)) if get is not None else (None,) * count


def _groups_and_anchors(model) -> tuple[dict[str, int], list[str]]:
    """Group index of every link (0 for the base) and the anchor link of every group.

    A link is in group ``k`` when joint ``k`` (1-based) is the last joint whose axis moves it
    (non-zero angular column of its Jacobian); the anchor of group ``k`` is the link of the group
    whose origin lies on joint ``k``'s axis (zero linear column), i.e. the joint's child link.
    """
    n = len(model.joint_names)
    q = np.asarray(model.home_q, dtype=float)
    groups: dict[str, int] = {}
    on_axis: dict[int, list[tuple[float, str]]] = {}
    for link in model.link_names:
        jac = np.asarray(model.jacobian(q, link))
        moved = [j for j in range(n) if np.linalg.norm(jac[3:, j]) > 0.5]
        g = (max(moved) + 1) if moved else 0
        groups[link] = g
        if g > 0:
            on_axis.setdefault(g, []).append((float(np.linalg.norm(jac[:3, g - 1])), link))
    anchors = [next(lk for lk in model.link_names if groups[lk] == 0)]
    for g in range(1, n + 1):
        dist, link = min(on_axis[g])
        if dist > 1e-9:
            raise ValueError(f"group {g}: no link origin on joint {g}'s axis (off by {dist} m)")
        anchors.append(link)
    return groups, anchors


def _lipschitz_weights(group: np.ndarray, local: np.ndarray, chain: AnchorChain) -> np.ndarray:
    """Bound (S, n) m of each sphere centre's distance from each joint axis, any configuration.

    Joint ``j`` (1-based) turns a centre ``c`` of group ``k >= j`` about an axis through anchor
    ``j``'s origin ``o_j``. For ``j = k`` the distance is constant: ``|perp_k(c_local)|``. For
    ``j < k``: ``c - o_j = v_j + (c - o_{j+1})`` with ``v_j = o_{j+1} - o_j`` fixed in anchor
    ``j``'s frame, so ``dist <= |perp_j(v_j)| + |v_{j+1}| + ... + |v_{k-1}| + |c_local|``.
    """
    n = len(chain.axes)
    v = chain.c_trans[1:]  # v[j - 1] = v_j = o_{j+1} - o_j in anchor j's frame, j = 1..n-1
    lengths = np.linalg.norm(v, axis=1)
    perp_v = [float(np.linalg.norm(_perp(v[j - 1], chain.axes[j - 1]))) for j in range(1, n)]
    w = np.zeros((len(group), n))
    for s, (k, c) in enumerate(zip(group, local)):
        if k == 0:
            continue
        w[s, k - 1] = np.linalg.norm(_perp(c, chain.axes[k - 1]))
        for j in range(1, k):
            w[s, j - 1] = perp_v[j - 1] + float(np.sum(lengths[j : k - 1])) + np.linalg.norm(c)
    return w


def _perp(vec: np.ndarray, axis: np.ndarray) -> np.ndarray:
    return vec - np.dot(vec, axis) * axis


if __name__ == "__main__":  # pragma: no cover - regeneration of the shipped self-collision matrix
    from twin.kinematics import ArmModel

    arm = ArmModel.default()
    print(self_collision.write(arm, RobotSpheres(arm, matrix=False)))
