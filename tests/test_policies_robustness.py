"""The shipped Reach policy off its training distribution, through the ONNX controller: on
domain-randomised sim physics and on the emulated hardware backend (``SerialRobot`` through the
device emulators over pseudo-terminals). The bounds are those stated in ``policies/reach.md``."""

from __future__ import annotations

import pytest
from twin.policies import evaluate

#: policies/reach.md, "Robustness": seeds and the success rates required of them.
RANDOMISED_SIM_SEEDS = list(range(1000, 1010))
RANDOMISED_SIM_MIN_SUCCESS = 0.8
HARDWARE_SEEDS = list(range(1000, 1004))
HARDWARE_MIN_SUCCESS = 0.75


def test_reach_policy_on_randomised_sim_physics():
    results = evaluate.run_episodes("reach", RANDOMISED_SIM_SEEDS, randomize=True)
    summary = evaluate.summarize(results)
    assert summary["episodes"] == len(RANDOMISED_SIM_SEEDS)
    assert summary["success_rate"] >= RANDOMISED_SIM_MIN_SUCCESS, summary


def test_reach_policy_on_the_emulated_hardware_backend():
    results = evaluate.run_episodes_hardware("reach", HARDWARE_SEEDS)
    summary = evaluate.summarize(results)
    assert summary["episodes"] == len(HARDWARE_SEEDS)
    assert summary["success_rate"] >= HARDWARE_MIN_SUCCESS, summary
    for r in results:
        assert r.success == (r.position_error_m <= 0.02 and r.rotation_error_rad <= 0.1)


def test_randomised_evaluation_differs_from_the_nominal_one():
    nominal = evaluate.run_episodes("reach", RANDOMISED_SIM_SEEDS[:1])
    randomised = evaluate.run_episodes("reach", RANDOMISED_SIM_SEEDS[:1], randomize=True)
    assert nominal[0].position_error_m != pytest.approx(randomised[0].position_error_m, abs=1e-6)
