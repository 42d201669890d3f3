"""Shortcutting and smoothing of joint-space polylines, with every change collision-checked.

1. ``greedy_shortcut``: from each way-point jump to the farthest later way-point reachable by a
   free straight segment (candidates checked farthest first, ``_GREEDY_BATCH`` per batch, up to
   the first batch with a free one: on long RRT paths in clutter all of them cost O(K^2)).
2. ``random_shortcuts``: rounds of random pairs of points along the path (not only way-points);
   all candidates of a round are checked in one batch (with the pieces of the old segments they
   keep) and the free one saving most length is applied.
3. ``cut_corners``: move interior way-points towards the midpoint of their neighbours when both
   new segments are free (rounds over odd, then even way-points).
A path through a single via configuration (``search``) is only pulled straighter (``pull_via``).
The result starts and ends at exactly the same configurations as the input.
"""

from __future__ import annotations

import numpy as np

from twin.planning.collision.checker import CollisionChecker

#: Candidates of ``greedy_shortcut`` checked per batch.
_GREEDY_BATCH = 8


def path_length(path: np.ndarray) -> float:
    """Joint-space length (rad, L2 per segment) of a polyline (K, n)."""
    return float(np.sum(np.linalg.norm(np.diff(path, axis=0), axis=1)))


def greedy_shortcut(checker: CollisionChecker, path: np.ndarray) -> np.ndarray:
    out = [path[0]]
    i, last = 0, len(path) - 1
    while i < last:
        cand = np.arange(last, i + 1, -1)  # farthest first
        nxt = i + 1
        for lo in range(0, len(cand), _GREEDY_BATCH):  # the first free one, batch by batch
            part = cand[lo : lo + _GREEDY_BATCH]
            ok = checker.segments_free(np.repeat(path[i][None], len(part), 0), path[part])
            if np.any(ok):
                nxt = int(part[np.argmax(ok)])
                break
        out.append(path[nxt])
        i = nxt
    return np.array(out)


def _point_at(path: np.ndarray, cum: np.ndarray, s: float) -> tuple[int, np.ndarray]:
    """Segment index and point at arc length ``s`` along ``path`` (cumulative lengths ``cum``)."""
    k = int(np.clip(np.searchsorted(cum, s, side="right") - 1, 0, len(path) - 2))
    seg = cum[k + 1] - cum[k]
    t = 0.0 if seg <= 0.0 else (s - cum[k]) / seg
    return k, path[k] + t * (path[k + 1] - path[k])


def random_shortcuts(
    checker: CollisionChecker,
    path: np.ndarray,
    rng: np.random.Generator,
    rounds: int,
    candidates: int = 8,
) -> np.ndarray:
    for _ in range(rounds):
        if len(path) < 3:
            return path
        cum = np.concatenate(([0.0], np.cumsum(np.linalg.norm(np.diff(path, axis=0), axis=1))))
        total = cum[-1]
        if total <= 0.0:
            return path
        pairs = np.sort(rng.uniform(0.0, total, size=(candidates, 2)), axis=1)
        picks = [(_point_at(path, cum, s), _point_at(path, cum, e)) for s, e in pairs]
        keep = [(a, b) for a, b in picks if b[0] > a[0]]  # different segments only
        if not keep:
            continue
        qa = np.array([a[1] for a, _ in keep])
        qb = np.array([b[1] for _, b in keep])
        ok = checker.segments_free(qa, qb)
        idx = np.flatnonzero(ok)
        if len(idx):  # and the two pieces of old segments the shortcut keeps, as their own
            ka = np.array([keep[i][0][0] for i in idx])  # segments (a piece of a free segment
            kb = np.array([keep[i][1][0] for i in idx])  # is not always free checked alone)
            pieces = checker.segments_free(
                np.vstack((path[ka], qb[idx])), np.vstack((qa[idx], path[kb + 1]))
            )
            ok[idx] = pieces[: len(idx)] & pieces[len(idx) :]
        if not np.any(ok):
            continue
        saved = []
        for (a, b), free in zip(keep, ok):
            if not free:
                saved.append(-np.inf)
                continue
            old = path_length(np.vstack((a[1], path[a[0] + 1 : b[0] + 1], b[1])))
            saved.append(old - float(np.linalg.norm(b[1] - a[1])))
        best = int(np.argmax(saved))
        if saved[best] <= 1e-9:
            continue
        (ka, pa), (kb, pb) = keep[best]
        path = np.vstack((path[: ka + 1], pa, pb, path[kb + 1 :]))
        path = _drop_duplicates(path)
    return path


def cut_corners(checker: CollisionChecker, path: np.ndarray, rounds: int) -> np.ndarray:
    path = path.copy()
    for _ in range(rounds):
        changed = False
        for parity in (1, 2):
            idx = np.arange(parity, len(path) - 1, 2)
            if not len(idx):
                continue
            for alpha in (1.0, 0.5):
                mid = 0.5 * (path[idx - 1] + path[idx + 1])
                cand = path[idx] + alpha * (mid - path[idx])
                ok = checker.segments_free(path[idx - 1], cand)  # checks cand itself too
                if np.any(ok):
                    ok[ok] = checker.segments_free(cand[ok], path[idx[ok] + 1])
                if np.any(ok):
                    path[idx[ok]] = cand[ok]
                    idx = idx[~ok]
                    changed = True
                    if not len(idx):
                        break
        if not changed:
            break
    return _drop_duplicates(path)


def _drop_duplicates(path: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """The polyline without repeated consecutive way-points; both ends kept exactly."""
    out = [path[0]]
    for q in path[1:-1]:
        if np.linalg.norm(q - out[-1]) > tol:
            out.append(q)
    if len(out) > 1 and np.linalg.norm(path[-1] - out[-1]) <= tol:
        out.pop()
    out.append(path[-1])
    return np.array(out)


def pull_via(checker: CollisionChecker, path: np.ndarray) -> np.ndarray:
    """A three-point path ``[start, via, goal]`` with the via moved as far as its two segments
    stay free towards the midpoint of start and goal (fractions tried in one batch)."""
    start, via, goal = path
    fractions = np.array([0.9, 0.75, 0.5, 0.25])
    cand = via + fractions[:, None] * (0.5 * (start + goal) - via)
    k = len(cand)
    ok = checker.segments_free(
        np.vstack((np.repeat(start[None], k, 0), cand)),
        np.vstack((cand, np.repeat(goal[None], k, 0))),
    )
    both = ok[:k] & ok[k:]
    if np.any(both):
        return np.array([start, cand[int(np.argmax(both))], goal])
    return path


def simplify(
    checker: CollisionChecker, path: np.ndarray, rng: np.random.Generator, rounds: int
) -> np.ndarray:
    """A three-point path: ``pull_via``. Longer ones: greedy shortcut; then, if corners remain,
    random shortcuts, one round of corner cutting and a final greedy pass."""
    if len(path) == 3:
        return pull_via(checker, path)
    path = greedy_shortcut(checker, path)
    if len(path) <= 2:
        return path
    path = random_shortcuts(checker, path, rng, rounds)
    path = cut_corners(checker, path, rounds=1)
    return greedy_shortcut(checker, path)
