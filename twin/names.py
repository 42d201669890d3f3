"""The hint for a misspelt name, the same everywhere a user types one (a backend, a scene, a
scenario field, a configuration key), and a value quoted in a message, cut to a readable length
(a fuzzed or damaged file can hold megabytes in one field)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: object, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to ``name``, or ``""``."""
    match = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def quoted(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (``...`` marks the cut)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
