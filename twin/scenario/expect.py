"""Expected metrics with tolerances, and the check of a measured value against one.

An expectation is a TOML inline table under ``[expect]``, one per metric:

    final_tcp_error_m = { max = 0.001 }          # measured <= 0.001
    plan_time_s = { max = 0.5 }
    success_rate = { min = 0.9 }                 # measured >= 0.9
    weight_n = { value = 4.905, tol = 0.25 }     # |measured - 4.905| <= 0.25
    contact_detected = { equals = true }         # measured == true (also integers)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The keys an expectation may have, and which combinations are allowed.
FORMS = ({"max"}, {"min"}, {"min", "max"}, {"value", "tol"}, {"equals"})


class ExpectationError(ValueError):
    """An ``[expect]`` entry is malformed; the message names file, metric and what was expected."""


@dataclass(frozen=True)
class Expectation:
    """One metric's expectation: bounds (``max``, ``min``), a value with an absolute tolerance,
    or an exact value (``equals``: booleans and counts)."""

    metric: str
    max: float | None = None
    min: float | None = None
    value: float | None = None
    tol: float | None = None
    equals: bool | int | None = None

    @classmethod
    def parse(cls, metric: str, spec: Any, where: str) -> Expectation:
        """From the TOML value of ``metric``; ``where`` names the file for messages."""
        if not isinstance(spec, dict) or set(spec) not in FORMS:
            forms = ", ".join("{" + ", ".join(f"{k} = ..." for k in sorted(f)) + "}" for f in FORMS)
            raise ExpectationError(
                f"{where}: [expect] {metric} = {spec!r}: expected one of {forms}"
            )
        for key, v in spec.items():
            if key == "equals":
                if not isinstance(v, (bool, int)):
                    raise ExpectationError(
                        f"{where}: [expect] {metric}.equals = {v!r}: expected true, false or an integer"
                    )
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ExpectationError(
                    f"{where}: [expect] {metric}.{key} = {v!r}: expected a finite number"
                )
        if spec.get("tol", 0) < 0 or (
            "min" in spec and "max" in spec and spec["min"] > spec["max"]
        ):
            raise ExpectationError(
                f"{where}: [expect] {metric} = {spec!r}: expected tol >= 0 and min <= max"
            )
        return cls(metric, **{k: v for k, v in spec.items()})

    def holds(self, measured: Any) -> bool:
        """Whether ``measured`` meets this expectation (a missing or nan value never does)."""
        if measured is None:
            return False
        if self.equals is not None:
            return measured == self.equals and type(measured) is type(self.equals)
        x = float(measured)
        if not math.isfinite(x):
            return False
        if self.value is not None:
            return abs(x - self.value) <= self.tol
        return (self.max is None or x <= self.max) and (self.min is None or x >= self.min)

    def describe(self) -> str:
        """The expectation in words: ``<= 0.001``, ``4.905 +- 0.25``, ``== true``."""
        if self.equals is not None:
            return (
                f"== {str(self.equals).lower() if isinstance(self.equals, bool) else self.equals}"
            )
        if self.value is not None:
            return f"{self.value:g} +- {self.tol:g}"
        parts = []
        if self.min is not None:
            parts.append(f">= {self.min:g}")
        if self.max is not None:
            parts.append(f"<= {self.max:g}")
        return " and ".join(parts)

    def as_toml(self) -> str:
        """The inline-table text of this expectation."""
        if self.equals is not None:
            v = str(self.equals).lower() if isinstance(self.equals, bool) else str(self.equals)
            return f"{{ equals = {v} }}"
        if self.value is not None:
            return f"{{ value = {self.value!r}, tol = {self.tol!r} }}"
        keys = [k for k in ("min", "max") if getattr(self, k) is not None]
        return "{ " + ", ".join(f"{k} = {getattr(self, k)!r}" for k in keys) + " }"

    def updated(self, measured: Any, margin: float) -> Expectation:
        """This expectation rewritten around ``measured``: an exact value becomes it, a value
        keeps its tolerance, a bound moves to ``measured`` widened by ``margin`` (a fraction)."""
        if self.equals is not None:
            return Expectation(self.metric, equals=measured)
        x = float(measured)
        if self.value is not None:  # rounded well inside the tolerance, so it holds again
            digits = 12 if self.tol <= 0 else max(0, 1 - math.floor(math.log10(self.tol)))
            return Expectation(self.metric, value=round(x, digits), tol=self.tol)
        up, down = x + margin * abs(x), x - margin * abs(x)
        return Expectation(
            self.metric,
            max=None if self.max is None else _round(up),
            min=None if self.min is None else _round(down),
        )


def _round(x: float) -> float:
    return float(f"{x:.4g}")


@dataclass(frozen=True)
class Check:
    """One metric checked: the expectation, the measured value, and whether it held."""

    expectation: Expectation
    measured: Any

    @property
    def ok(self) -> bool:
        return self.expectation.holds(self.measured)

    def message(self, scenario: str, backend: str) -> str:
        """``scenario [backend] metric: expected ..., measured ...``."""
        m = self.measured
        shown = f"{m:.6g}" if isinstance(m, float) else repr(m)
        return (
            f"{scenario} [{backend}] {self.expectation.metric}: expected "
            f"{self.expectation.describe()}, measured {shown}"
        )
