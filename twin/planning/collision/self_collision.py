"""The generated self-collision matrix: which pairs of robot bodies are checked against each other.

Never checked: adjacent bodies (groups joined by one joint) and bodies of link pairs the model's
SRDF disables (``disabled_body_pairs``). Every other pair of URDF bodies is screened on the same
``SAMPLES`` random configurations (fixed seed ``SEED``, uniform within the joint limits, a
continuous joint within ``[-pi, pi]``), in chunks, with one batched FK of the group anchors per
chunk: the lower bound of the pair's distance from its sphere covers (which contain the geometry)
is the smallest gap between their spheres. A pair that never comes within ``CLEARANCE`` is
dropped. A pair that does is kept at once (early acceptance, its later chunks skipped), except
when both bodies are boxes or cylinders, whose covers are loose and whose exact distance is
known (a mesh's is not: its spheres decide): then the samples where the
spheres come within ``CLEARANCE`` (at most ``EXACT_SAMPLES`` of them, the first ones) get the
exact evaluation (surface points of each body, spaced ``SPACING``, in the other body's exact
signed distance; the minimum less the spacing is a lower bound), stopping at the first chunk
below ``CLEARANCE``. Like MoveIt's "never in collision" pairs this is a sampled decision, made
with a safety distance; the exact PyBullet comparison in the tests and benchmarks checks it.
Deterministic: the same model gives the same pairs. ``min_distance_m`` records, per screened
pair, the smallest bound seen before its decision.

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


def disabled_body_pairs(model, bodies) -> frozenset:
    """Sorted body-name pairs whose links the model's SRDF disables (bodies ``"<link>#<i>"``)."""
    links = getattr(model, "disabled_collision_pairs", frozenset())
    out = set()
    for i, a in enumerate(bodies):
        la = a.name.rsplit("#", 1)[0]
        for b in bodies[i + 1 :]:
            if tuple(sorted((la, b.name.rsplit("#", 1)[0]))) in links:
                out.add(tuple(sorted((a.name, b.name))))
    return frozenset(out)


def candidate_pairs(model, robot) -> list[tuple[int, int]]:
    """Indices into ``robot.urdf_bodies`` of the pairs the matrix decides (see the module doc)."""
    bodies = robot.urdf_bodies
    disabled = disabled_body_pairs(model, bodies)
    return [
        (i, j)
        for i, a in enumerate(bodies)
        for j in range(i + 1, len(bodies))
        if abs(a.group - bodies[j].group) >= 2
        and tuple(sorted((a.name, bodies[j].name))) not in disabled
    ]


def sample_configurations(model, samples: int, seed: int = SEED) -> np.ndarray:
    """Uniform configurations (samples, n) rad within the limits (continuous: ``[-pi, pi]``)."""
    lower = np.maximum(np.asarray(model.lower, dtype=float), -np.pi)
    upper = np.minimum(np.asarray(model.upper, dtype=float), np.pi)
    return np.random.default_rng(seed).uniform(lower, upper, size=(samples, len(lower)))


def generate(
    model, robot, samples: int = SAMPLES, chunk: int = 2000
) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """(kept pairs, smallest distance lower bound seen per screened pair "a|b", m)."""
    bodies = robot.urdf_bodies
    prims = {name: p for name, _, p in robot.primitive_bodies()}
    exact_needed = {
        i: any(kind in ("box", "cylinder") for kind, _, _ in prims[b.name])
        for i, b in enumerate(bodies)
    }
    q = sample_configurations(model, samples)
    pending = candidate_pairs(model, robot)
    closest = {p: np.inf for p in pending}
    close_samples: dict[tuple[int, int], list[np.ndarray]] = {p: [] for p in pending}
    kept: set[tuple[int, int]] = set()
    for s in range(0, samples, chunk):
        rot, trans = robot.anchor_frames(q[s : s + chunk])
        centers = [
            np.einsum("nij,sj->nsi", rot[:, b.group], b.spheres.centers) + trans[:, b.group, None]
            for b in bodies
        ]
        for pair in list(pending):
            i, j = pair
            d = np.linalg.norm(centers[i][:, :, None] - centers[j][:, None], axis=-1)
            gap = d - bodies[i].spheres.radii[:, None] - bodies[j].spheres.radii[None, :]
            gap = gap.reshape(len(gap), -1).min(axis=1)
            closest[pair] = min(closest[pair], float(gap.min()))
            near = np.flatnonzero(gap < CLEARANCE)
            if not len(near):
                continue
            if not (exact_needed[i] and exact_needed[j]):
                kept.add(pair)
                pending.remove(pair)
            else:
                close_samples[pair].append(q[s + near])
    surface = {}
    for pair in pending:
        found = close_samples[pair]
        if not found:
            continue
        close = np.concatenate(found)[:EXACT_SAMPLES]
        a, b = bodies[pair[0]], bodies[pair[1]]
        for name in (a.name, b.name):
            if name not in surface:
                surface[name] = _body_surface(prims[name])
        d = _pair_distance(
            model, close,
            robot.anchors[a.group], surface[a.name], prims[a.name],
            robot.anchors[b.group], surface[b.name], prims[b.name],
        )  # fmt: skip
        closest[pair] = d
        if d < CLEARANCE:
            kept.add(pair)
    names = [(bodies[i].name, bodies[j].name) for i, j in sorted(kept)]
    return names, {f"{bodies[i].name}|{bodies[j].name}": d for (i, j), d in closest.items()}


def _pair_distance(model, q, la, sa, pa, lb, sb, pb, chunk: int = 100) -> float:
    """Minimum over configurations q (N, n) of a lower bound of the exact body distance.

    la, lb: anchor links; sa, sb: surface points (K, 3) and pa, pb: primitives, anchor frames.
    """
    best = np.inf
    for s in range(0, len(q), chunk):
        if best < CLEARANCE:  # early acceptance: the pair is kept
            break
        frames = model.fk_all(q[s : s + chunk])
        a_T_b = batch.invert_matrices(frames[la]) @ frames[lb]
        b_T_a = batch.invert_matrices(a_T_b)
        in_a = batch.transform_points(a_T_b[:, None], sb[None])  # B's surface in A's frame
        in_b = batch.transform_points(b_T_a[:, None], sa[None])
        d = min(float(_body_sdf(pa, in_a).min()), float(_body_sdf(pb, in_b).min()))
        best = min(best, d - SPACING)
    return best


def _body_sdf(prims: list, points: np.ndarray) -> np.ndarray:
    """Signed distance lower bound (...,) to the union of primitives (exact outside); a mesh's
    sphere cover stands for it (``primitive_bodies`` gives it as spheres)."""
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
