"""What the layers above the robot publish, for whoever records: a tiny publish/subscribe hub.

The controller (inputs and outputs of each policy step), the planner (requests and results), the
F/T service (the frames it publishes) and the live twin (residuals and events) call
``publish(source, kind, **detail)``; a recorder (``RecordingRobot.subscribe_layers()``) receives
them. With no subscriber a publish costs a function call: layers may guard a costly detail with
``if events.listening():``. Subscribers run on the publishing thread and must not raise; one that
does is removed, so a recorder's fault never reaches a control loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Subscriber = Callable[[str, str, dict[str, Any]], None]

_subscribers: tuple[Subscriber, ...] = ()
_lock = threading.Lock()


def listening() -> bool:
    """Whether anybody receives what is published (skip building a costly detail otherwise)."""
    return bool(_subscribers)


def publish(source: str, kind: str, **detail: Any) -> None:
    """Hand ``detail`` (JSON-able values, numpy arrays allowed) to every subscriber."""
    for subscriber in _subscribers:
        try:
            subscriber(source, kind, detail)
        except Exception:  # a broken subscriber is dropped, never raised into the caller
            unsubscribe(subscriber)


def subscribe(subscriber: Subscriber) -> None:
    """Receive every ``publish(source, kind, **detail)`` as ``subscriber(source, kind, detail)``."""
    global _subscribers
    with _lock:
        _subscribers = (*_subscribers, subscriber)


def unsubscribe(subscriber: Subscriber) -> None:
    """Stop receiving; unknown subscribers are ignored."""
    global _subscribers
    with _lock:
        _subscribers = tuple(s for s in _subscribers if s != subscriber)  # bound methods: ==
