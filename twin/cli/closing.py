"""The ``twin`` command's closing line: what is known of the robots it opened, and its errors in
the order they happened (``twin.cli``'s module doc).

    robots_left(robots)    "no robot was opened" / "the servos were parked and read back ..." /
                           "the servos were NOT parked: servo 1: torque on, ..., servo 3: ..."
    after_errors(r, e)     the same for an error line, where servos were opened and no error
                           names their states already
    errors_in_order(e)     e's chain of errors, the first one first (``raise ... from`` keeps
                           only the error raised: its message says the cause)

A robot with a park (``park_report``: servo id -> read-back state with ``safe``, as the serial
backend keeps it) is called parked only when every servo read back safe; one without (the sim)
is only said to be closed.
"""

from __future__ import annotations

from collections.abc import Iterable

_NO_PARK = object()  # a robot that has no park (no ``park_report`` attribute)


def robot_left(robot: object) -> str:
    """How ``robot`` was left, as far as its close read back."""
    report = getattr(robot, "park_report", _NO_PARK)
    if report is _NO_PARK:
        return f"the {type(robot).__name__} was closed (it has no servos to park)"
    if not report:
        return "the servos were NOT parked: no servo was read back (the park did not run)"
    states = servo_states(report)
    if all(st.safe for st in report.values()):
        return f"the servos were parked and read back ({states}), every port is closed"
    return f"the servos were NOT parked: {states}"


def servo_states(report: dict) -> str:
    """Each servo's read-back state, servos in the same state together: ``servos 1, 2, 4, 5, 6:
    torque on, mode CURRENT_BASED_POSITION (5); servo 3: torque no reply, mode no reply``."""
    groups: dict[str, list[str]] = {}
    for pid, state in report.items():
        groups.setdefault(str(state), []).append(str(pid))
    return "; ".join(
        f"servo{'s' * (len(ids) > 1)} {', '.join(ids)}: {state}" for state, ids in groups.items()
    )


def robots_left(robots: Iterable[object]) -> str:
    """How the robots of the run were left, in the order they were opened (repeats once). A
    robot without a park (the sim, also the one behind the emulators) is named only when no
    robot with servos was opened."""
    robots = list(robots)
    with_park = [r for r in robots if getattr(r, "park_report", _NO_PARK) is not _NO_PARK]
    said = list(dict.fromkeys(robot_left(r) for r in with_park or robots))
    return "; ".join(said) if said else "no robot was opened"


def after_errors(robots: Iterable[object], errors: Iterable[BaseException]) -> str:
    """What an error line adds about the servos: how the robots with servos were left, unless
    none was opened or an error already names every servo's state (a failed park's ``states``)."""
    robots = [r for r in robots if getattr(r, "park_report", _NO_PARK) is not _NO_PARK]
    if not robots or any(getattr(e, "states", None) for e in errors):
        return ""
    return robots_left(robots)


def errors_in_order(error: BaseException) -> list[BaseException]:
    """``error`` and the errors it was raised while handling (its ``__context__`` chain, not
    past a ``raise ... from``), the first one first; interrupts are left out."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = None if seen.__suppress_context__ else seen.__context__
    return [e for e in reversed(chain) if not isinstance(e, KeyboardInterrupt)]
