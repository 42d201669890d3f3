"""The shipped Reach policy, run by the ONNX controller on the sim backend (no torch)."""

from __future__ import annotations

import pytest
from twin.policies import evaluate

#: Seeds and the success rate the shipped policy reaches on them (policies/reach.md has the
#: figure over 100 seeds). The sim is deterministic, so this is a fixed, replayable check.
TEST_SEEDS = list(range(10))
MIN_SUCCESS_RATE = 0.9


@pytest.fixture(scope="module")
def results():
    path = evaluate.policy_path("reach")
    if not path.exists():
        pytest.fail(f"the shipped policy {path} is missing")
    return evaluate.run_episodes("reach", TEST_SEEDS)


def test_shipped_reach_policy_reaches_seeded_targets(results):
    summary = evaluate.summarize(results)
    assert summary["episodes"] == len(TEST_SEEDS)
    assert summary["success_rate"] >= MIN_SUCCESS_RATE, summary


def test_successes_are_within_the_tolerances(results):
    for r in results:
        assert r.success == (r.position_error_m <= 0.02 and r.rotation_error_rad <= 0.1)
        if r.success:
            assert r.time_to_tolerance_s is not None and 0.0 < r.time_to_tolerance_s <= 4.0


def test_evaluation_is_replayable():
    again = evaluate.run_episodes("reach", TEST_SEEDS[:1])
    first = evaluate.run_episodes("reach", TEST_SEEDS[:1])
    assert again == first
