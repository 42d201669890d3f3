"""The subcommands on the sim backend, as a user runs them (subprocesses): ``twin run`` tracks its
targets with the shipped policy, ``twin shadow`` reports a payload change as it happens, ``twin ft``
tares, measures and sets the rate, filters and logs, ``twin scenes`` and ``twin bench`` list."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from cli_helpers import stderr_lines, twin

from twin.scenes import SHIPPED_SCENES, load_scene


def _floats(pattern: str, text: str) -> list[float]:
    return [float(x) for x in re.findall(pattern, text)]


def test_run_reaches_targets_from_flags_and_a_file(tmp_path):
    steps = tmp_path / "steps.json"
    steps.write_text(
        json.dumps(
            {"steps": [{"duration_s": 2.0, "se3_pose.target": [0.35, -0.15, 0.25, 0, 0, 1, 0]}]}
        )
    )
    done = twin(
        "run", "--target", "0.40", "0.10", "0.30", "--duration", "2", "--targets", str(steps)
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "policy reach.onnx at 25 Hz" in done.stdout and "se3_pose.target" in done.stdout
    final_mm = _floats(r"final ([0-9.]+) mm", done.stdout)
    assert len(final_mm) == 2 and max(final_mm) < 20.0, done.stdout  # the policy card's bound
    reached = _floats(r"rad: ([0-9.]+) s", done.stdout)
    assert len(reached) == 2 and max(reached) < 2.0
    assert (
        "200 Hz configured: 800 cycles at 200.0 Hz achieved" in done.stdout
    )  # 2 steps of 2 s, 5 ms periods


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("se3pose.target=1,2,3", ["unknown command kind 'se3pose'", "did you mean 'se3_pose'"]),
        ("se3_pose.goal=0.4,0,0.3", ["unknown se3_pose command 'goal'", "target"]),
        ("speed", ["expected KIND.NAME=VALUE"]),
    ],
)
def test_run_refuses_a_command_the_policy_does_not_read(command, words):
    done = twin("run", "--target", "0.4", "0", "0.3", "--command", command, "--duration", "0.1")
    lines = stderr_lines(done.stderr)
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines


def test_shadow_reports_a_payload_change_as_it_happens():
    done = twin("shadow", "--duration", "4", "--payload", "0.3", "--payload-at", "2", timeout=600)
    assert done.returncode == 0, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    welded = next(i for i, x in enumerate(lines) if "payload of 0.3 kg welded" in x)
    events = [x for x in lines if "event:" in x]
    assert "+TARING" in events[0] and "-TARING" in events[1]
    assert not any("+" in x and "TARING" not in x for x in lines[:welded] if "event:" in x)
    assert any("+PAYLOAD" in x for x in lines[welded:])  # after the weld, not before
    last = [x for x in lines if re.match(r"^\s+\d+\.\d+\s+\d", x)][-1]
    payload_kg = float(last.split()[5])
    assert payload_kg == pytest.approx(0.3, rel=0.1)
    assert last.split()[-1] == "PAYLOAD"


def test_ft_tare_zeroes_the_reading():
    done = twin("ft", "tare", "--duration", "0.5")
    assert done.returncode == 0, done.stderr
    offset = _floats(r"[-+]\d+\.\d+", next(x for x in done.stdout.splitlines() if "offset" in x))
    assert abs(offset[2]) > 1.0  # the tool's weight along the sensor's z axis, N
    mean = _floats(r"[-+]\d+\.\d+", next(x for x in done.stdout.splitlines() if "mean" in x))
    np.testing.assert_allclose(mean, 0.0, atol=0.02)


def test_ft_hz_sets_and_measures_the_rate():
    done = twin("ft", "hz", "--set", "400", "--duration", "1.5")
    assert done.returncode == 0, done.stderr
    assert "the device runs at 400 Hz" in done.stdout
    measured = _floats(r"measured ([0-9.]+) Hz", done.stdout)[0]
    assert measured == pytest.approx(400.0, rel=0.02)


def test_ft_filter_sets_the_cutoffs():
    done = twin("ft", "filter", "--force", "20", "--torque", "5", "6", "7")
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("set:"))
    assert _floats(r"[-+]\d+\.\d+", line) == [20, 20, 20, 5, 6, 7]
    bad = twin("ft", "filter", "--force", "20", "30")
    assert bad.returncode == 2 and "expected 1 or 3 cut-offs" in bad.stderr


def test_ft_log_writes_every_due_sample(tmp_path):
    path = tmp_path / "wrench.csv"
    done = twin("ft", "log", str(path), "--duration", "1", "--decimation", "2")
    assert done.returncode == 0, done.stderr
    written, total = map(int, re.search(r"logged (\d+) of (\d+)", done.stdout).groups())
    rows = path.read_text().splitlines()
    assert rows[1] == "t_us,fx_N,fy_N,fz_N,tx_Nm,ty_Nm,tz_Nm"
    assert written == total == len(rows) - 2  # every due sample logged, none missed
    assert abs(written - 100) <= 1  # 200 samples in 1 s, every second one (+1 at the boundary)


def test_scenes_lists_every_shipped_scene_and_one_scenes_items():
    done = twin("scenes")
    assert done.returncode == 0, done.stderr
    for name in SHIPPED_SCENES:
        row = next(x for x in done.stdout.splitlines() if x.startswith(name + " "))
        assert int(row.split()[1]) == len(load_scene(name).items)
    done = twin("scenes", "table")
    assert all(item.name in done.stdout for item in load_scene("table").items)


def test_bench_prints_one_table_and_the_figures():
    done = twin("bench", "--quick", "--only", "kinematics", "--json", timeout=600)
    assert done.returncode == 0, done.stderr
    table = done.stdout.splitlines()
    header = next(i for i, x in enumerate(table) if x.startswith("benchmark"))
    assert table[header].split() == ["benchmark", "wall", "s", "figure", "value"]
    figures = json.loads(table[-1])["benchmarks"]["kinematics"]
    row = next(x for x in table if " fk_ratio " in x)
    assert float(row.split()[-1]) == pytest.approx(figures["fk_ratio"], rel=1e-3)
