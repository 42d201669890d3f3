"""The shipped scenario suite on both backends: it passes, the backends agree, every run is
recorded (what users meet around it: ``test_scenario_tools``)."""

from __future__ import annotations

import pytest

from twin.record import read_recording
from twin.scenario import load_scenario
from twin.scenario.sweep import scenario_files, shipped_suite, sweep

SUITE = scenario_files([shipped_suite()])
#: How far sim and emulated-hardware figures of the same scenario may differ: the hardware's
#: quantisation (DYNAMIXEL position 2 pi / 4096 = 1.5 mrad per joint, about 1 mm at the TCP; the
#: Bota frame's float32 forces) and its real-time control loop (4 ms period against the sim's 5 ms).
AGREEMENT = {
    "final_tcp_error_m": 0.003,
    "max_tracking_error_rad": 0.02,
    "final_rotation_error_rad": 0.02,
    "weight_n": 0.1,
    "residual_force_n": 0.05,
    "max_goal_error_m": 0.003,
    "policy_max_position_error_m": 0.005,
    "policy_max_rotation_error_rad": 0.02,
    "payload_rel_error": 0.01,
}


@pytest.fixture(scope="module")
def suite_runs(tmp_path_factory):
    record_dir = tmp_path_factory.mktemp("runs")
    scenarios = [load_scenario(f) for f in SUITE]
    sim = sweep(scenarios, ("sim",), record_dir=record_dir)
    # The emulated hardware runs in lock-step with its emulators (one clock, moved one period a
    # cycle: ``twin.scenario.runner``), so the machine's load cannot change its figures and it
    # runs beside other tests under pytest-xdist (it passes at a load of 7 on two cores).
    hardware = sweep(scenarios, ("hardware",), record_dir=record_dir)
    # in the order of sweep(scenarios, ("sim", "hardware")): each scenario on both backends
    return [r for pair in zip(sim, hardware, strict=True) for r in pair], record_dir


def test_the_shipped_suite_covers_planner_controller_ft_and_live_twin():
    kinds = {load_scenario(f).task for f in SUITE}
    assert kinds == {"pick_place", "plan_execute", "policy", "ft_weigh", "shadow_contact"}
    contact = [load_scenario(f) for f in SUITE if load_scenario(f).task == "shadow_contact"]
    assert {any(s.params["contact_force_n"]) for s in contact} == {True, False}


def test_the_shipped_suite_passes_on_both_backends(suite_runs):
    results, _ = suite_runs
    assert len(results) == 2 * len(SUITE)
    failures = [line for r in results for line in r.failures()]
    assert not failures, "\n".join(failures)


def test_sim_and_emulated_hardware_agree_within_the_hardware_quantisation(suite_runs):
    results, _ = suite_runs
    by_name = {}
    for r in results:
        by_name.setdefault(r.scenario.name, {})[r.backend] = r.metrics
    compared = 0
    for name, runs in by_name.items():
        sim, hw = runs["sim"], runs["hardware"]
        for metric, bound in AGREEMENT.items():
            if sim.get(metric) is None:
                continue
            assert abs(sim[metric] - hw[metric]) <= bound, (name, metric, sim[metric], hw[metric])
            compared += 1
        for metric in (
            "plan_success",
            "contact_detected",
            "success_rate",
            "tare_ok",
            "steps_ok",
            "all_paths_collision_free",
        ):
            if metric in sim:
                assert sim[metric] == hw[metric], (name, metric)
    assert compared >= 6


def test_every_run_is_recorded_and_a_sim_run_replays(suite_runs):
    from twin.record import replay

    results, record_dir = suite_runs
    assert sorted(p.name for p in record_dir.glob("*.mcap")) == sorted(
        f"{r.scenario.name}-{r.backend}-{r.seed}.mcap" for r in results
    )
    weigh = next(r for r in results if r.scenario.task == "ft_weigh" and r.backend == "sim")
    rec = read_recording(weigh.recording)
    assert [m.data["call"] for m in rec.on("/robot/call")] == ["reset", "attach_payload"]
    report = replay(weigh.recording)
    assert report.divergences["joints"].max_size < 1e-9, report.table()
