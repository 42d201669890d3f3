"""Regression scenarios: a task in a scene with expected metrics, run on either backend
(``docs/formats/scenario.md``).

    scenario = load_scenario("scenarios/weigh_payload.toml")
    result = run_scenario(scenario, backend="sim", record_dir="runs/")
    assert result.ok, "\\n".join(result.failures())

``twin test`` runs scenario files from the command line (JUnit XML, recordings, both backends,
a Ray cluster); the pytest plugin (``pytest --twin-backend=both scenarios/``) collects them as
test items.
"""

from twin.scenario.expect import Check, Expectation, ExpectationError
from twin.scenario.format import TASK_FIELDS, Scenario, ScenarioError, load_scenario
from twin.scenario.runner import BACKENDS, ScenarioResult, run_scenario
from twin.scenario.tasks import METRICS

__all__ = [
    "BACKENDS",
    "METRICS",
    "TASK_FIELDS",
    "Check",
    "Expectation",
    "ExpectationError",
    "Scenario",
    "ScenarioError",
    "ScenarioResult",
    "load_scenario",
    "run_scenario",
]
