"""What users meet around the scenario suite: failing metrics with their recordings, JUnit XML,
rewritten expectations, ``twin test``, the pytest plugin (with pytest-xdist), and a Ray sweep
(apart from ``test_scenario_runs``, so that pytest-xdist runs the two modules side by side)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from twin.scenario import load_scenario, run_scenario
from twin.scenario.report import update_expectations, write_junit
from twin.scenario.sweep import scenario_files, shipped_suite

SUITE = scenario_files([shipped_suite()])


def test_a_tightened_tolerance_fails_with_scenario_metric_values_and_recording(tmp_path):
    source = next(f for f in SUITE if load_scenario(f).task == "ft_weigh")
    tight = tmp_path / "tight.toml"
    tight.write_text(source.read_text().replace("tol = 0.25", "tol = 0.000001"))
    result = run_scenario(load_scenario(tight), "sim", record_dir=tmp_path)
    assert not result.ok
    lines = result.failures()
    assert lines[0].startswith("tight [sim] weight_n: expected 4.905 +- 1e-06, measured 4.9")
    assert lines[-1] == f"  recording: {result.recording} (twin replay {result.recording})"
    junit = write_junit([result], tmp_path / "junit.xml")
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "1" and suite.get("failures") == "1"
    (case,) = suite.findall("testcase")
    assert case.get("name") == "tight[sim, seed 0]"
    assert "weight_n: expected 4.905 +- 1e-06" in case.find("failure").get("message")
    assert str(result.recording) in case.find("system-out").text

    diff = update_expectations(load_scenario(tight), [result])
    assert "-weight_n = { value = 4.905, tol = 0.000001 }" in diff
    assert "+weight_n = { value = 4.9" in diff
    updated = load_scenario(tight)
    assert run_scenario(updated, "sim").checks[1].ok  # the rewritten value holds on a rerun
    assert tight.read_text().startswith(source.read_text().split("[expect]")[0])


def test_twin_test_on_the_command_line(tmp_path):
    source = next(f for f in SUITE if load_scenario(f).task == "shadow_contact")
    bad = tmp_path / "typo.toml"
    bad.write_text(source.read_text().replace("[expect]", "[expcet]"))
    run = [sys.executable, "-m", "twin", "test"]
    ok = subprocess.run(
        [*run, str(source), "--junit", str(tmp_path / "j.xml")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "1 passed, 0 failed" in ok.stdout
    assert ET.parse(tmp_path / "j.xml").getroot().get("tests") == "1"
    wrong = subprocess.run([*run, str(bad)], capture_output=True, text=True, timeout=600)
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == (
        f"twin test: {bad}: unknown section [expcet] (did you mean 'expect'?); expected "
        "[scenario], [start], [payload], [task], [expect]"
    )


def test_the_pytest_plugin_collects_scenarios_per_backend_and_runs_them_with_xdist(tmp_path):
    source = next(f for f in SUITE if load_scenario(f).task == "ft_weigh")
    shutil.copy(source, tmp_path / "weigh.toml")
    tight = tmp_path / "tight.toml"
    tight.write_text(source.read_text().replace("tol = 0.25", "tol = 0.000001"))
    (tmp_path / "other.toml").write_text("[tool.something]\nkey = 1\n")  # not a scenario
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--twin-backend=both"]
    # one run, in the folder (node ids relative to it); -rA lists every item it collected and
    # ran with its outcome (no separate --collect-only run: a pytest start less)
    done = subprocess.run(
        [*args, "-n", "2", "-q", "-rA", "."],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    outcomes = sorted(
        tuple(line.split(" - ")[0].split(" ", 1))
        for line in done.stdout.splitlines()
        if line.startswith(("PASSED ", "FAILED ", "ERROR ", "SKIPPED "))
    )
    assert outcomes == [
        ("FAILED", "tight.toml::tight[hardware]"),
        ("FAILED", "tight.toml::tight[sim]"),
        ("PASSED", "weigh.toml::weigh[hardware]"),
        ("PASSED", "weigh.toml::weigh[sim]"),
    ], done.stdout
    assert done.returncode == 1, done.stdout
    assert "2 failed, 2 passed" in done.stdout
    assert "tight [hardware] weight_n: expected 4.905 +- 1e-06, measured" in done.stdout


def test_a_ray_sweep_over_two_seeds_on_both_backends(tmp_path):
    """Runs farmed out to Ray workers come back as one JUnit report, one case a scenario, seed
    and backend, each emulated-hardware run on its own emulators (the whole shipped suite on
    both backends is ``test_scenario_runs``; here two of its files keep the sweep short)."""
    pytest.importorskip("ray")
    junit = tmp_path / "ray.xml"
    files = [f for f in SUITE if load_scenario(f).task in ("ft_weigh", "plan_execute")]
    run = subprocess.run(
        [sys.executable, "-m", "twin", "test", *map(str, files), "--ray", "--backend", "both",
         "--seed", "0", "--seed", "1", "--junit", str(junit)],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    cases = {c.get("name") for c in ET.parse(junit).getroot().findall("testcase")}
    names = {load_scenario(f).name for f in files}
    assert len(names) == 2, names
    assert cases == {
        f"{n}[{b}, seed {s}]" for n in names for b in ("sim", "hardware") for s in (0, 1)
    }
