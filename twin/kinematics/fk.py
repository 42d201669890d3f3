"""Batched forward kinematics and geometric Jacobians of a URDF tree of revolute/fixed joints.

Transforms are carried as rotation ``(N, 3, 3)`` and translation ``(N, 3)`` arrays and only
assembled into ``(N, 4, 4)`` matrices at the end. A revolute joint's ``origin @ Rot(axis, q)`` is
written as ``A0 + cos(q) Ac + sin(q) As`` with three constant matrices, so each joint costs one
batched 3x3 product.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.kinematics.urdf import REVOLUTE_TYPES, UrdfRobot
from twin.spatial import quaternion as quat


@dataclass(frozen=True, eq=False)
class _Edge:
    """The joint above link ``link`` (index into the tree's link order)."""

    link: int
    parent: int  # index of the parent link, -1 for the root
    q_index: int  # index into q, -1 for a fixed joint
    origin_r: np.ndarray  # (3, 3) parent_R_joint
    origin_p: np.ndarray  # (3,) parent_p_joint, m
    a0: np.ndarray  # (3, 3) origin_R @ a a^T
    ac: np.ndarray  # (3, 3) origin_R @ (I - a a^T)
    as_: np.ndarray  # (3, 3) origin_R @ skew(a)
    axis: np.ndarray  # (3,) unit joint axis, joint (= child link) frame


#: Configurations per pass: larger batches stream through the tree in chunks of this size, so
#: the per-edge (chunk, 3, 3) temporaries stay a few megabytes (near the caches) and peak
#: memory follows the output, not the tree's depth.
CHUNK = 2048


class KinematicTree:
    """FK of every link of a URDF tree, vectorised over configurations.

    ``joint_names`` fixes the order of ``q``; every other joint must be fixed.
    """

    def __init__(self, robot: UrdfRobot, joint_names: tuple[str, ...]) -> None:
        by_child = {j.child: j for j in robot.joints}
        children: dict[str, list[str]] = {name: [] for name in robot.links}
        for j in robot.joints:
            children[j.parent].append(j.child)
        order = [robot.root]
        for name in order:  # breadth-first: parents come before children
            order.extend(children[name])
        self.link_names: tuple[str, ...] = tuple(order)
        self.index = {name: i for i, name in enumerate(order)}
        self.n_joints = len(joint_names)
        q_of = {name: i for i, name in enumerate(joint_names)}
        edges = []
        for name in order[1:]:
            j = by_child[name]
            r, p, a = j.origin[:3, :3], j.origin[:3, 3], j.axis
            revolute = j.type in REVOLUTE_TYPES
            if revolute and j.name not in q_of:
                raise ValueError(f"movable joint {j.name!r} is not among {joint_names}")
            edges.append(
                _Edge(
                    link=self.index[name],
                    parent=self.index[j.parent],
                    q_index=q_of[j.name] if revolute else -1,
                    origin_r=r.copy(),
                    origin_p=p.copy(),
                    a0=r @ np.outer(a, a),
                    ac=r @ (np.eye(3) - np.outer(a, a)),
                    as_=r @ quat.skew(a),
                    axis=a.copy(),
                )
            )
        self._edges = tuple(edges)
        self._edge_of = {e.link: e for e in edges}
        # For each link: the edges from the root down to it (ancestors first).
        self._paths: dict[int, tuple[_Edge, ...]] = {}
        for e in edges:
            parent_path = self._paths.get(e.parent, ())
            self._paths[e.link] = (*parent_path, e)
        self._paths[0] = ()

    def path(self, link: str) -> tuple[_Edge, ...]:
        """The edges (joints) from the root down to ``link``, ancestors first; each edge has its
        ``link`` and ``parent`` indices (into ``link_names``), ``q_index`` (-1 for a fixed joint)
        and its origin and axis in the parent frame."""
        return self._paths[self.index[link]]

    def path_joints(self, link: str) -> tuple[int, ...]:
        """Indices into ``q`` of the movable joints between the root and ``link``."""
        return tuple(e.q_index for e in self._paths[self.index[link]] if e.q_index >= 0)

    def poses(self, q: np.ndarray, link: str) -> np.ndarray:
        """``base_T_link`` (N, 4, 4) for configurations ``q`` (N, n) rad, chunk by chunk."""
        n = q.shape[0]
        out = np.zeros((n, 4, 4))
        out[:, 3, 3] = 1.0
        for start in range(0, n, CHUNK):
            r, p = self._frames(q[start : start + CHUNK], (link,))[link]
            out[start : start + CHUNK, :3, :3] = r
            out[start : start + CHUNK, :3, 3] = p
        return out

    def rotations_translations(
        self, q: np.ndarray, links: tuple[str, ...] | None = None
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``{link: (base_R_link (N, 3, 3), base_p_link (N, 3) m)}`` for configurations
        ``q`` (N, n) rad; for ``links`` and their ancestors, or every link if ``None``.
        Batches beyond ``CHUNK`` run chunk by chunk into the output."""
        n = q.shape[0]
        if n <= CHUNK:
            return self._frames(q, links)
        names = self.link_names if links is None else links
        out = {name: (np.empty((n, 3, 3)), np.empty((n, 3))) for name in names}
        for start in range(0, n, CHUNK):
            part = self._frames(q[start : start + CHUNK], links)
            for name, (r, p) in part.items():
                out[name][0][start : start + CHUNK] = r
                out[name][1][start : start + CHUNK] = p
        return out

    def _frames(
        self, q: np.ndarray, links: tuple[str, ...] | None
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``rotations_translations`` of one chunk."""
        n = q.shape[0]
        if links is None:
            edges = self._edges
        else:
            needed = {e.link for name in links for e in self._paths[self.index[name]]}
            edges = tuple(e for e in self._edges if e.link in needed)
        cos = np.cos(q)
        sin = np.sin(q)
        rots = {0: np.broadcast_to(np.eye(3), (n, 3, 3))}
        trans = {0: np.zeros((n, 3))}
        for e in edges:
            r_parent = rots[e.parent]
            if e.q_index >= 0:
                c = cos[:, e.q_index, None, None]
                s = sin[:, e.q_index, None, None]
                local = e.a0 + c * e.ac + s * e.as_
            else:
                local = e.origin_r
            rots[e.link] = r_parent @ local
            trans[e.link] = trans[e.parent] + r_parent @ e.origin_p
        names = self.link_names
        wanted = range(len(names)) if links is None else [self.index[x] for x in links]
        return {names[i]: (rots[i], trans[i]) for i in wanted}

    def jacobian(self, q: np.ndarray, link: str) -> np.ndarray:
        """Geometric Jacobians (N, 6, n) ``[v; w]`` of ``link``'s origin, base frame (chunk by
        chunk beyond ``CHUNK`` configurations)."""
        if q.shape[0] > CHUNK:
            out = np.empty((q.shape[0], 6, self.n_joints))
            for start in range(0, q.shape[0], CHUNK):
                out[start : start + CHUNK] = self.jacobian(q[start : start + CHUNK], link)
            return out
        path = self._paths[self.index[link]]
        movable = [e for e in path if e.q_index >= 0]
        names = tuple(self.link_names[e.link] for e in movable) + (link,)
        frames = self.rotations_translations(q, names)
        p_end = frames[link][1]
        out = np.zeros((q.shape[0], 6, self.n_joints))
        for e in movable:
            r, p = frames[self.link_names[e.link]]
            z = r @ e.axis
            out[:, :3, e.q_index] = np.cross(z, p_end - p)
            out[:, 3:, e.q_index] = z
        return out


def assemble(rot: np.ndarray, trans: np.ndarray) -> np.ndarray:
    """Homogeneous matrices (N, 4, 4) from rotations (N, 3, 3) and translations (N, 3)."""
    out = np.zeros(rot.shape[:-2] + (4, 4))
    out[..., :3, :3] = rot
    out[..., :3, 3] = trans
    out[..., 3, 3] = 1.0
    return out
