"""The sphere pairs' motion bounds (``kernel._pair_weights``): a pair's gap never shrinks faster
than its weights times the joint speeds, also where the term of the joint next to the earlier
sphere is scaled down because that sphere sits near the joint's axis; on VAMP's UR5 the base
sphere's pairs no longer see joint 1 at all."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twin.benchmarks.bench_planner_clutter import load_ur5_spherized

from twin.planning import Planner, PlannerSettings


@pytest.fixture(scope="module")
def arms() -> dict[str, Planner]:
    model, settings = load_ur5_spherized()
    return {"ur5": Planner(settings, model=model), "ours": Planner(PlannerSettings(seed=0))}


def _gaps(planner: Planner, q: np.ndarray) -> np.ndarray:
    """Gaps (N, P) m of the checked sphere pairs at configurations q (N, n) rad."""
    k = planner.checker._kernel
    x = k.centers(q)
    r = planner.checker._spheres().radii[k.order]
    d = np.linalg.norm(x[:, k.pair_a] - x[:, k.pair_b], axis=-1)
    return d - r[k.pair_a] - r[k.pair_b]


@pytest.mark.parametrize("name", ["ur5", "ours"])
@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=25)
def test_no_pair_gap_shrinks_faster_than_its_weights(arms, name, seed):
    planner = arms[name]
    k = planner.checker._kernel
    w = k._weights[k.n_env :]  # (P, n) m/rad
    rng = np.random.default_rng(seed)
    lower, upper = planner.checker.lower, planner.checker.upper
    q = rng.uniform(lower, upper, size=(400, len(lower)))
    dq = rng.normal(size=q.shape)
    dq *= rng.uniform(0.01, 0.3, size=(len(q), 1)) / np.linalg.norm(dq, axis=1, keepdims=True)
    g0, g1 = _gaps(planner, q), _gaps(planner, q + dq)
    bound = np.abs(dq) @ w.T  # (N, P) m: how much each gap can change along the step
    apart = (g0 >= 0.0) & (g1 >= 0.0)  # the scaled terms hold while the spheres do not overlap
    assert np.all(np.abs(g1 - g0)[apart] <= bound[apart] + 1e-12)


def test_the_ur5_base_sphere_pairs_do_not_see_joint_1(arms):
    planner = arms["ur5"]
    k = planner.checker._kernel
    c = planner.checker._spheres()
    group = c.group[k.order]
    base = (group[k.pair_a] == 0) | (group[k.pair_b] == 0)
    w = k._weights[k.n_env :]
    assert base.sum() >= 10
    assert np.all(w[base, 0] == 0.0)  # the base sphere sits on joint 1's axis
    # Pairs of two moving links keep their full weights (joint 2's axis is not through them).
    later = ~base & (np.minimum(group[k.pair_a], group[k.pair_b]) == 1)
    assert np.any(w[later, 1] > 0.0)
    # Their gap is the same in every pose: joint 1 turns the arm about the base sphere.
    q = np.random.default_rng(0).uniform(planner.checker.lower, planner.checker.upper, (200, 6))
    q2 = q.copy()
    q2[:, 0] += 1.0
    g = _gaps(planner, q)[:, base]
    np.testing.assert_allclose(_gaps(planner, q2)[:, base], g, atol=1e-9)
