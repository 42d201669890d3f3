"""Results of many scenario runs: a table, JUnit XML, and expectations rewritten on purpose."""

from __future__ import annotations

import difflib
import os
import pathlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from twin.scenario.format import Scenario
from twin.scenario.runner import ScenarioResult

#: Relative widening of a bound when ``--update-expectations`` rewrites it around a measured value.
UPDATE_MARGIN = 0.2


#: The longest cause a table cell shows (characters); the whole line is in ``failures``.
CAUSE_CHARS = 160


def table(results: Sequence[ScenarioResult]) -> str:
    """One row per run: scenario, backend, seed, verdict, wall time, failed metrics, and the
    first cause of a failure (the error, or the step that failed and why)."""
    head = ("scenario", "backend", "seed", "result", "wall s", "failed", "cause")
    rows = [head]
    for r in results:
        failed = [c.expectation.metric for c in r.checks if not c.ok]
        if r.error is not None:
            failed.append("error")
        why = r.why() or ""
        if len(why) > CAUSE_CHARS:
            why = why[: CAUSE_CHARS - 3] + "..."
        rows.append(
            (
                r.scenario.name,
                r.backend,
                str(r.seed),
                "ok" if r.ok else "FAIL",
                f"{r.wall_s:.1f}",
                ", ".join(failed),
                why,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def write_junit(results: Sequence[ScenarioResult], path: str | os.PathLike) -> pathlib.Path:
    """JUnit XML: one ``testsuite`` ("twin scenarios"), one ``testcase`` per run (class name the
    scenario file, name ``<scenario>[<backend>, seed <n>]``), a ``failure`` (or ``error``) per
    failed run whose message is its first cause (the error, or the step that failed and why;
    else the first failed metric) and whose text lists every failed metric, the recording path
    in ``system-out``."""
    suite = ET.Element(
        "testsuite",
        name="twin scenarios",
        tests=str(len(results)),
        failures=str(sum(1 for r in results if r.error is None and not r.ok)),
        errors=str(sum(1 for r in results if r.error is not None)),
        time=f"{sum(r.wall_s for r in results):.3f}",
    )
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=r.scenario.path.stem,
            name=r.id,
            time=f"{r.wall_s:.3f}",
        )
        if not r.ok:
            tag = "error" if r.error is not None else "failure"
            failures = r.failures()
            node = ET.SubElement(case, tag, message=failures[0] if failures else "failed")
            node.text = "\n".join(failures)
        if r.recording is not None:
            ET.SubElement(case, "system-out").text = f"recording: {r.recording}"
    out = pathlib.Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(out, encoding="utf-8", xml_declaration=True)
    return out


_EXPECT_HEADER = re.compile(r"^\[expect\]\s*$", re.M)


def update_expectations(scenario: Scenario, results: Sequence[ScenarioResult]) -> str:
    """Rewrite ``scenario``'s ``[expect]`` section around what ``results`` measured (the worst
    value over the runs: the largest for an upper bound, the smallest for a lower one); returns
    the unified diff (empty if nothing changed). The rest of the file is kept as it is."""
    text = scenario.path.read_text(encoding="utf-8")
    match = _EXPECT_HEADER.search(text)
    if match is None:
        return ""
    end = re.search(r"^\[", text[match.end() :], re.M)
    stop = match.end() + end.start() if end else len(text)
    lines = ["[expect]"]
    for e in scenario.expect:
        measured = [r.metrics.get(e.metric) for r in results if r.metrics.get(e.metric) is not None]
        if not measured:
            lines.append(f"{e.metric} = {e.as_toml()}")
            continue
        if e.equals is not None:
            value = measured[0]
        elif e.value is not None:
            value = sum(measured) / len(measured)
        elif e.max is not None:
            value = max(measured)
        else:
            value = min(measured)
        lines.append(f"{e.metric} = {e.updated(value, UPDATE_MARGIN).as_toml()}")
    rest = text[stop:].lstrip("\n")
    new = text[: match.start()] + "\n".join(lines) + ("\n\n" + rest if rest else "\n")
    if new == text:
        return ""
    diff = difflib.unified_diff(
        text.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=str(scenario.path),
        tofile=str(scenario.path),
    )
    scenario.path.write_text(new, encoding="utf-8")
    return "".join(diff)
