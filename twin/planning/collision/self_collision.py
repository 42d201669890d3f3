"""The generated self-collision matrix: which pairs of robot bodies are checked against each other.

Adjacent bodies (groups joined by one joint) are never checked. For every other pair of URDF
bodies the exact distance between their collision primitives is measured on ``SAMPLES`` random
configurations of the joints between them (the only joints that move one relative to the other):
surface points of each body, spaced ``SPACING``, are evaluated in the other body's exact signed
distance, and the minimum less the spacing is a lower bound of the distance at that sample. The sphere model
(which covers the geometry) screens the samples first: only samples where the spheres come within
``CLEARANCE`` need the exact evaluation (at most ``EXACT_SAMPLES`` of them, drawn at random).
A pair that never comes within ``CLEARANCE`` is dropped; the rest are kept. Like MoveIt's
"never in collision" pairs this is a sampled decision, made with a safety distance; the exact
PyBullet comparison in the tests and benchmarks checks it (every pair not adjacent, exactly).

The result is stored per URDF (keyed by the file's SHA-256) in ``assets/planning`` so planners
load it instead of regenerating it; ``python -m twin.planning.collision.robot_model`` rewrites it
(``write``; the robot model is its caller, so this module does not import it back).
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np

from twin.planning.collision import geometry
from twin.spatial import batch

SAMPLES = 20_000
SPACING = 0.005  # m, surface sample spacing (every surface point within this of a sample)
CLEARANCE = 0.01  # m, pairs ever closer than this (lower bound) are kept
EXACT_SAMPLES = 3_000  # at most this many close samples per pair get the exact evaluation
SEED = 7


def matrix_path(model) -> Path:
    """Where the generated matrix of ``model``'s URDF is stored (package data)."""
    stem = Path(model.urdf_path).stem
    return Path(str(resources.files("twin.assets") / "planning" / f"{stem}_self_collision.json"))


def urdf_digest(model) -> str:
    return hashlib.sha256(Path(model.urdf_path).read_bytes()).hexdigest()


def load_or_generate(model, robot) -> frozenset:
    """Kept pairs of body names: from the stored file when it matches the URDF, else generated.

    robot: the ``RobotSpheres`` of ``model`` (its URDF bodies and sphere covers).
    """
    path = matrix_path(model)
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("urdf_sha256") == urdf_digest(model) and data.get("clearance") == CLEARANCE:
            return frozenset(tuple(p) for p in data["kept_pairs"])
    return frozenset(generate(model, robot)[0])


def generate(
    model, robot, samples: int = SAMPLES
) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """(kept pairs, minimum measured distance lower bound per non-adjacent pair "a|b", m)."""
    rng = np.random.default_rng(SEED)
    lower, upper = np.asarray(model.lower), np.asarray(model.upper)
    home = np.asarray(model.home_q, dtype=float)
    prims = {name: p for name, _, p in robot.primitive_bodies()}
    spheres = {b.name: b for b in robot.urdf_bodies}
    surface = {name: _body_surface(p) for name, p in prims.items()}
    kept, closest = [], {}
    bodies = robot.urdf_bodies
    for i, a in enumerate(bodies):
        for b in bodies[i + 1 :]:
            if abs(a.group - b.group) < 2:
                continue
            lo, hi = sorted((a.group, b.group))
            q = np.repeat(home[None], samples, axis=0)
            q[:, lo:hi] = rng.uniform(lower[lo:hi], upper[lo:hi], size=(samples, hi - lo))
            bound = _sphere_distance(robot, q, spheres[a.name], spheres[b.name])
            close = np.flatnonzero(bound < CLEARANCE)
            d = float(bound.min())
            if len(close):
                if len(close) > EXACT_SAMPLES:
                    close = rng.choice(close, EXACT_SAMPLES, replace=False)
                d = _pair_distance(
                    model, q[close],
                    robot.anchors[a.group], surface[a.name], prims[a.name],
                    robot.anchors[b.group], surface[b.name], prims[b.name],
                )  # fmt: skip
            closest[f"{a.name}|{b.name}"] = d
            if d < CLEARANCE:
                kept.append((a.name, b.name))
    return kept, closest


def _sphere_distance(robot, q: np.ndarray, a, b, chunk: int = 2000) -> np.ndarray:
    """Lower bound (N,) m of the distance between two bodies from their sphere covers."""
    out = np.empty(len(q))
    for s in range(0, len(q), chunk):
        rot, trans = robot.anchor_frames(q[s : s + chunk])
        ca = np.einsum("nij,sj->nsi", rot[:, a.group], a.spheres.centers) + trans[:, a.group, None]
        cb = np.einsum("nij,sj->nsi", rot[:, b.group], b.spheres.centers) + trans[:, b.group, None]
        d = np.linalg.norm(ca[:, :, None] - cb[:, None], axis=-1)
        gap = d - a.spheres.radii[:, None] - b.spheres.radii[None, :]
        out[s : s + chunk] = gap.reshape(len(gap), -1).min(axis=1)
    return out


def _pair_distance(model, q, la, sa, pa, lb, sb, pb, chunk: int = 100) -> float:
    """Minimum over configurations q (N, n) of a lower bound of the exact body distance.

    la, lb: anchor links; sa, sb: surface points (K, 3) and pa, pb: primitives, anchor frames.
    """
    best = np.inf
    for s in range(0, len(q), chunk):
        frames = model.fk_all(q[s : s + chunk])
        a_T_b = batch.invert_matrices(frames[la]) @ frames[lb]
        b_T_a = batch.invert_matrices(a_T_b)
        in_a = batch.transform_points(a_T_b[:, None], sb[None])  # B's surface in A's frame
        in_b = batch.transform_points(b_T_a[:, None], sa[None])
        d = min(float(_body_sdf(pa, in_a).min()), float(_body_sdf(pb, in_b).min()))
        best = min(best, d - SPACING)
    return best


def _body_sdf(prims: list, points: np.ndarray) -> np.ndarray:
    """Signed distance lower bound (...,) to the union of primitives (exact outside)."""
    flat = points.reshape(-1, 3)
    out = np.full(len(flat), np.inf)
    for kind, dims, pose in prims:
        if kind == "box":
            d = geometry.box_signed_distance(pose, 0.5 * np.asarray(dims), flat)
        elif kind == "cylinder":
            d = geometry.cylinder_signed_distance(pose, dims[0], dims[1], flat)
        else:
            d = np.linalg.norm(flat - pose[:3, 3], axis=1) - dims[0]
        np.minimum(out, d, out=out)
    return out.reshape(points.shape[:-1])


def _body_surface(prims: list) -> np.ndarray:
    pts = [batch.transform_points(pose, surface_points(kind, dims)) for kind, dims, pose in prims]
    return np.concatenate(pts)


def surface_points(kind: str, dims, spacing: float = SPACING) -> np.ndarray:
    """Points (K, 3) on a primitive's surface (shape frame, centred) such that every surface
    point lies within ``spacing`` m of one: grids of step ``spacing * sqrt(2)`` on flat faces,
    (projected onto discs), and on the cylinder's side in arc length and height."""
    t = spacing * np.sqrt(2.0)
    if kind == "box":
        half = 0.5 * np.asarray(dims, dtype=float)
        out = []
        for ax in range(3):
            u, v = [a for a in range(3) if a != ax]
            gu = _grid(-half[u], half[u], t)
            gv = _grid(-half[v], half[v], t)
            uu, vv = np.meshgrid(gu, gv, indexing="ij")
            for sign in (-1.0, 1.0):
                p = np.zeros((uu.size, 3))
                p[:, u], p[:, v], p[:, ax] = uu.ravel(), vv.ravel(), sign * half[ax]
                out.append(p)
        return np.concatenate(out)
    if kind == "cylinder":
        r, length = float(dims[0]), float(dims[1])
        n_arc = max(8, int(np.ceil(2.0 * np.pi * r / t)))
        a = 2.0 * np.pi * np.arange(n_arc) / n_arc
        z = _grid(-0.5 * length, 0.5 * length, t)
        aa, zz = np.meshgrid(a, z, indexing="ij")
        side = np.stack((r * np.cos(aa.ravel()), r * np.sin(aa.ravel()), zz.ravel()), axis=-1)
        g = _grid(-r, r, t)
        xx, yy = np.meshgrid(g, g, indexing="ij")
        disc = np.stack((xx.ravel(), yy.ravel()), axis=-1)
        norm = np.linalg.norm(disc, axis=1, keepdims=True)
        disc = np.where(norm > r, disc * (r / np.maximum(norm, 1e-12)), disc)
        caps = [np.column_stack((disc, np.full(len(disc), s * 0.5 * length))) for s in (-1, 1)]
        return np.concatenate([side, *caps])
    r = float(dims[0])
    count = max(32, int(np.ceil(8.0 * np.pi * r * r / (spacing * spacing))))
    i = np.arange(count) + 0.5
    zc = 1.0 - 2.0 * i / count
    phi = np.pi * (1.0 + 5.0**0.5) * i
    rho = np.sqrt(1.0 - zc * zc)
    return r * np.stack((rho * np.cos(phi), rho * np.sin(phi), zc), axis=-1)


def _grid(lo: float, hi: float, step: float) -> np.ndarray:
    n = max(1, int(np.ceil((hi - lo) / step)))
    return np.linspace(lo, hi, n + 1)


def write(model, robot) -> Path:
    """Generate and store the matrix of ``model`` (see the module doc)."""
    kept, closest = generate(model, robot)
    path = matrix_path(model)
    data = {
        "urdf": Path(model.urdf_path).name,
        "urdf_sha256": urdf_digest(model),
        "samples": SAMPLES,
        "exact_samples": EXACT_SAMPLES,
        "spacing_m": SPACING,
        "clearance": CLEARANCE,
        "kept_pairs": [list(p) for p in kept],
        "min_distance_m": {k: round(v, 6) for k, v in closest.items()},
    }
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path
