"""Return codes, policies and the policy table that decides what ``update`` outputs.

The names and string values are the vendor SDK's (``docs/formats/transformer-config.md``); the table
``POLICY_TABLE`` is ours and is documented in the package docstring (``twin.transforms``).
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class ReturnCode(enum.IntEnum):
    """Result of ``update``; ordered by severity (a larger value is worse)."""

    OK = 0
    Stale = 1
    Degraded = 2
    DeadlineMissed = 3
    NonFatalError = 4
    FatalError = 5


class Policy(str, enum.Enum):
    """Error-handling policy of a transformer (the JSON ``policy`` values)."""

    BEST_EFFORT = "best_effort"
    SOFT_RT = "soft_rt"
    HARD_RT = "hard_rt"
    STRICT_RT = "strict_rt"


class Condition(enum.Enum):
    """What can be wrong in one ``update`` (several may hold; the worst code wins)."""

    NOT_SET = "an entry is not set"
    TF_MISSING = "no fixed-to-moving-frame transform since construction"
    NON_FINITE = "non-finite input"
    STALE = "fixed-to-moving-frame transform older than max_tf_age_s"
    OFF_NORM = "quaternion off unit norm by more than 1e-6 (normalised)"


class Outcome(NamedTuple):
    """What ``update`` does under a condition: the code, and whether the output is computed
    (from the best data available) or zeros."""

    code: ReturnCode
    computed: bool


_RC = ReturnCode
_ZEROS = False
_COMPUTED = True

#: POLICY_TABLE[policy][condition] -> Outcome. This table is the whole policy logic.
POLICY_TABLE: dict[Policy, dict[Condition, Outcome]] = {
    Policy.BEST_EFFORT: {
        Condition.NOT_SET: Outcome(_RC.NonFatalError, _ZEROS),
        Condition.TF_MISSING: Outcome(_RC.NonFatalError, _ZEROS),
        Condition.NON_FINITE: Outcome(_RC.NonFatalError, _ZEROS),
        Condition.STALE: Outcome(_RC.Stale, _COMPUTED),
        Condition.OFF_NORM: Outcome(_RC.Degraded, _COMPUTED),
    },
    Policy.SOFT_RT: {
        Condition.NOT_SET: Outcome(_RC.NonFatalError, _ZEROS),
        Condition.TF_MISSING: Outcome(_RC.NonFatalError, _ZEROS),
        Condition.NON_FINITE: Outcome(_RC.NonFatalError, _ZEROS),
        Condition.STALE: Outcome(_RC.DeadlineMissed, _COMPUTED),
        Condition.OFF_NORM: Outcome(_RC.Degraded, _COMPUTED),
    },
    Policy.HARD_RT: {
        Condition.NOT_SET: Outcome(_RC.FatalError, _ZEROS),
        Condition.TF_MISSING: Outcome(_RC.FatalError, _ZEROS),
        Condition.NON_FINITE: Outcome(_RC.FatalError, _ZEROS),
        Condition.STALE: Outcome(_RC.DeadlineMissed, _ZEROS),
        Condition.OFF_NORM: Outcome(_RC.Degraded, _COMPUTED),
    },
    Policy.STRICT_RT: {
        Condition.NOT_SET: Outcome(_RC.FatalError, _ZEROS),
        Condition.TF_MISSING: Outcome(_RC.FatalError, _ZEROS),
        Condition.NON_FINITE: Outcome(_RC.FatalError, _ZEROS),
        Condition.STALE: Outcome(_RC.FatalError, _ZEROS),
        Condition.OFF_NORM: Outcome(_RC.FatalError, _ZEROS),
    },
}
