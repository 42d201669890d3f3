"""Scenario files: validation messages that name file, section and field; expectations."""

from __future__ import annotations

import math
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from twin.scenario import Expectation, ExpectationError, ScenarioError, load_scenario
from twin.scenario.runner import check_metrics

GOOD = """
[scenario]
scene = "table"
seed = 3
[start]
q = [0.0, 0.35, 0.9, 0.0, 0.6, 0.0]
[payload]
mass_kg = 0.5
[task]
kind = "ft_weigh"
[expect]
weight_n = { value = 4.905, tol = 0.25 }
"""


def write(tmp_path, text: str, name: str = "case.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_good_file_loads_with_defaults(tmp_path):
    s = load_scenario(write(tmp_path, GOOD))
    assert s.name == "case" and s.scene == "table" and s.seed == 3
    assert s.start_q == (0.0, 0.35, 0.9, 0.0, 0.6, 0.0)
    assert s.payload == (0.5, (0.0, 0.0, 0.0))
    assert s.task == "ft_weigh"
    assert s.params == {"tare_s": 0.5, "weigh_s": 0.5, "settle_s": 0.5}
    assert s.expect == (Expectation("weight_n", value=4.905, tol=0.25),)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("[expect]", "[expcet]"), r"unknown section \[expcet\] \(did you mean 'expect'\?\)"),
        (("seed = 3", "sede = 3"), r"\[scenario\] unknown field 'sede' \(did you mean 'seed'\?\)"),
        (("seed = 3", "seed = -1"), r"\[scenario\] seed: expected an integer >= 0, got -1"),
        (
            ('kind = "ft_weigh"', 'kind = "ft_wiegh"'),
            r"kind = 'ft_wiegh' \(did you mean 'ft_weigh'\?\)",
        ),
        (("0.6, 0.0]", "0.6]"), r"\[start\] q: expected a list of 6 finite numbers"),
        (
            ("mass_kg = 0.5", "mass_kg = -0.5"),
            r"\[payload\] mass_kg: expected a number > 0, got -0.5",
        ),
        (
            ('kind = "ft_weigh"', 'kind = "ft_weigh"\ntare = 1.0'),
            r"\[task\] unknown field 'tare' for kind 'ft_weigh' \(did you mean 'tare_s'\?\)",
        ),
        (
            ('kind = "ft_weigh"', 'kind = "ft_weigh"\ntare_s = 0'),
            r"\[task\] tare_s: expected a number > 0, got 0",
        ),
        (("tol = 0.25", "tol = -1"), r"\[expect\] weight_n = .*expected tol >= 0"),
        (
            ("{ value = 4.905, tol = 0.25 }", '{ max = "a" }'),
            r"\[expect\] weight_n.max = 'a': expected a finite number",
        ),
        (
            ("{ value = 4.905, tol = 0.25 }", "{ below = 1 }"),
            r"\[expect\] weight_n = \{'below': 1\}: expected one of",
        ),
        (
            ('kind = "ft_weigh"', 'kind = "policy"'),
            r"\[task\] targets: missing \(needed by kind 'policy'\)",
        ),
        # Numbers beyond their stated bounds (docs/formats/scenario.md), not only durations.
        (("0.6, 0.0]", "0.6, 1e30]"), r"\[start\] q: expected values within \+-6.28319 rad"),
        (("mass_kg = 0.5", "mass_kg = 1e30"), r"mass_kg: expected a mass in \(0, 50\] kg"),
        (("mass_kg = 0.5", "mass_kg = 0.5\ncom_m = [0, 0, 2]"), r"com_m: expected .*1 m"),
        (
            ('kind = "ft_weigh"', 'kind = "shadow_contact"\ncontact_force_n = [0, 0, 1e30]'),
            r"\[task\] contact_force_n: expected values within \+-1000 N, got 1e\+30",
        ),
    ],
)
def test_every_mistake_names_file_section_and_field(tmp_path, edit, message):
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises((ScenarioError, ExpectationError), match=message) as err:
        load_scenario(path)
    assert str(err.value).startswith(str(path))


def test_a_pose_must_carry_a_unit_quaternion(tmp_path):
    text = """
    [task]
    kind = "policy"
    targets = [[0.3, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0], [0.3, 0.0, 0.3, 0.9, 0.0, 0.0, 0.0]]
    """
    with pytest.raises(ScenarioError, match=r"\[task\] targets\[1\]: expected a unit quaternion"):
        load_scenario(write(tmp_path, text))


def test_bad_toml_and_missing_files_are_errors_not_tracebacks(tmp_path):
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(write(tmp_path, "[task\nkind ="))
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "absent.toml")
    with pytest.raises(ScenarioError, match="missing \\[task\\]"):
        load_scenario(write(tmp_path, "[scenario]\nseed = 1\n"))


def test_an_expected_metric_the_task_does_not_measure_is_refused(tmp_path):
    s = load_scenario(write(tmp_path, GOOD.replace("weight_n =", "weigth_n =")))
    with pytest.raises(
        ScenarioError, match=r"'weigth_n' is not measured .*did you mean 'weight_n'"
    ):
        check_metrics(s)


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(bound=finite, x=finite)
def test_bounds_hold_exactly_on_their_side(bound, x):
    assert Expectation("m", max=bound).holds(x) == (x <= bound)
    assert Expectation("m", min=bound).holds(x) == (x >= bound)


@given(value=finite, tol=st.floats(min_value=0, max_value=1e3), x=finite)
def test_a_value_holds_within_its_tolerance(value, tol, x):
    assert Expectation("m", value=value, tol=tol).holds(x) == (abs(x - value) <= tol)


@given(x=finite, margin=st.floats(min_value=0, max_value=1))
def test_an_updated_bound_holds_for_the_value_it_was_updated_to(x, margin):
    for e in (
        Expectation("m", max=0.0),
        Expectation("m", min=0.0),
        Expectation("m", value=1.0, tol=0.5),
    ):
        updated = e.updated(x, margin)
        if e.value is None:  # bounds move to the measured value, widened, rounded to 4 digits
            assert updated.holds(x) or math.isclose(x, updated.max or updated.min, rel_tol=1e-3)


def test_missing_nan_and_type_mismatch_never_hold():
    assert not Expectation("m", max=1.0).holds(None)
    assert not Expectation("m", max=1.0).holds(float("nan"))
    assert not Expectation("m", equals=True).holds(1)  # a count is not a yes
    assert not Expectation("m", equals=0).holds(False)
    assert Expectation("m", equals=0).holds(0)
