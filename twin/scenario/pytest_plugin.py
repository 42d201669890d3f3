"""The pytest plugin (entry point ``pytest11: twin``): scenario files as test items.

    pytest --twin-backend=both scenarios/
    pytest -n 4 --twin-backend=hardware scenarios/        # with pytest-xdist

A ``.toml`` file with a ``[task]`` table in a collected folder is a scenario; it becomes one item
per backend (``<file>::<scenario>[sim]``, ``[hardware]``). A failing item shows the same lines as
``twin test``: its first cause (the error, or the step that failed and why), each failed metric
with the expected and measured values, and the recording (``--twin-record-dir``); the cause is
also a ``cause`` property of the item (in pytest's JUnit XML).
"""

from __future__ import annotations

import pytest
import tomllib

from twin.scenario.format import ScenarioError, load_scenario
from twin.scenario.runner import run_scenario
from twin.scenario.sweep import expand_backends


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("twin", "twin regression scenarios")
    group.addoption(
        "--twin-backend",
        default="sim",
        help="backend(s) scenario files run on: sim, hardware or both (default sim)",
    )
    group.addoption(
        "--twin-record-dir", default=None, help="record every scenario run here (.mcap)"
    )


def _is_scenario(path) -> bool:
    try:
        return "task" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def pytest_collect_file(parent: pytest.Collector, file_path):
    if file_path.suffix == ".toml" and _is_scenario(file_path):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self):

        try:
            scenario = load_scenario(self.path)
        except ScenarioError as e:
            raise self.CollectError(str(e)) from e
        try:
            backends = expand_backends(self.config.getoption("twin_backend"))
        except ScenarioError as e:
            raise pytest.UsageError(f"--twin-backend: {e}") from e
        for backend in backends:
            yield ScenarioItem.from_parent(
                self, name=f"{scenario.name}[{backend}]", scenario=scenario, backend=backend
            )


class ScenarioFailed(Exception):
    """A scenario run failed one or more of its expectations."""


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario, backend: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scenario, self.backend = scenario, backend

    def runtest(self) -> None:

        result = run_scenario(
            self.scenario, self.backend, record_dir=self.config.getoption("twin_record_dir")
        )
        for check in result.checks:
            self.user_properties.append((check.expectation.metric, repr(check.measured)))
        if result.why() is not None:  # the first cause of a failure, in the JUnit XML too
            self.user_properties.append(("cause", result.why()))
        if not result.ok:
            raise ScenarioFailed("\n".join(result.failures()))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"scenario {self.scenario.name} [{self.backend}]"
