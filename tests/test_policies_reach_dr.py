"""The domain-randomised Reach policy (``policies/reach_dr.onnx``), run by the ONNX controller
on domain-randomised sim physics and on the emulated hardware backend (``SerialRobot`` through
the device emulators over pseudo-terminals). Seeds and bounds are those of
``policies/reach_dr.md``."""

from __future__ import annotations

import json

import onnx
from twin.policies import evaluate

#: policies/reach_dr.md, "Evaluation": seeds and the success rates required of them.
RANDOMISED_SIM_SEEDS = list(range(1000, 1010))
RANDOMISED_SIM_MIN_SUCCESS = 0.8
HARDWARE_SEEDS = list(range(1000, 1004))
HARDWARE_MIN_SUCCESS = 0.75


def test_reach_dr_is_shipped_and_was_trained_with_randomisation():
    path = evaluate.policy_path("reach_dr")
    meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    source = json.loads(json.loads(meta["model_source"]))  # a JSON string of the JSON info
    assert source["randomize"] is True and source["env"] == "twin/Reach-v0"
    assert source["init_from"].endswith("reach.onnx")


def test_reach_dr_policy_on_randomised_sim_physics():
    results = evaluate.run_episodes("reach_dr", RANDOMISED_SIM_SEEDS, randomize=True)
    summary = evaluate.summarize(results)
    assert summary["episodes"] == len(RANDOMISED_SIM_SEEDS)
    assert summary["success_rate"] >= RANDOMISED_SIM_MIN_SUCCESS, summary
    for r in results:
        assert r.success == (r.position_error_m <= 0.02 and r.rotation_error_rad <= 0.1)


def test_reach_dr_policy_on_the_emulated_hardware_backend():
    results = evaluate.run_episodes_hardware("reach_dr", HARDWARE_SEEDS)
    summary = evaluate.summarize(results)
    assert summary["episodes"] == len(HARDWARE_SEEDS)
    assert summary["success_rate"] >= HARDWARE_MIN_SUCCESS, summary
