"""A tree of named frames; lookups are routed through the lowest common ancestor.

Each frame has one parent and the edge ``parent_T_frame``; a frame may be re-posed with
``set_transform``. ``lookup(a, b)`` returns ``a_T_b`` (pose of b in a) composed only from the
edges between a, b and their lowest common ancestor, or a reason why it cannot: an unknown frame
is a different answer from two frames in separate trees (disconnected).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from twin.spatial.so3 import SE3


class LookupFailure(enum.Enum):
    UNKNOWN_FRAME = "unknown_frame"
    DISCONNECTED = "disconnected"


@dataclass(frozen=True)
class LookupResult:
    """Either ``value`` (an ``SE3``) or ``failure`` with a human-readable ``reason``."""

    value: SE3 | None
    failure: LookupFailure | None = None
    reason: str = ""

    def __bool__(self) -> bool:
        return self.failure is None


class FrameGraph:
    """Named frames in a forest; each tree has one root declared with ``declare_root``."""

    def __init__(self) -> None:
        self._parent: dict[str, str | None] = {}
        self._parent_T_frame: dict[str, SE3] = {}

    def declare_root(self, name: str) -> str:
        """Declare a root frame (no parent). Several roots make several separate trees."""
        self._check_new(name)
        self._parent[name] = None
        self._parent_T_frame[name] = SE3.identity()
        return name

    def declare_frame(self, name: str, parent: str, parent_T_frame: SE3) -> str:
        """Declare ``name`` as a child of ``parent``, posed by ``parent_T_frame``."""
        self._check_new(name)
        if parent not in self._parent:
            raise ValueError(f"parent frame {parent!r} of {name!r} is not declared")
        if not isinstance(parent_T_frame, SE3):
            raise TypeError(f"parent_T_frame must be an SE3, got {type(parent_T_frame).__name__}")
        self._parent[name] = parent
        self._parent_T_frame[name] = parent_T_frame
        return name

    def set_transform(self, name: str, parent_T_frame: SE3) -> None:
        """Re-pose a declared, non-root frame relative to its parent."""
        if name not in self._parent:
            raise ValueError(f"frame {name!r} is not declared")
        if self._parent[name] is None:
            raise ValueError(f"frame {name!r} is a root; a root has no parent transform")
        if not isinstance(parent_T_frame, SE3):
            raise TypeError(f"parent_T_frame must be an SE3, got {type(parent_T_frame).__name__}")
        self._parent_T_frame[name] = parent_T_frame

    def frames(self) -> list[str]:
        return list(self._parent)

    def parent(self, name: str) -> str | None:
        return self._parent[name]

    def lookup(self, a: str, b: str) -> LookupResult:
        """``a_T_b``: the pose of frame b expressed in frame a."""
        for name in (a, b):
            if name not in self._parent:
                return LookupResult(None, LookupFailure.UNKNOWN_FRAME, f"unknown frame {name!r}")
        chain_a = self._chain_to_root(a)
        chain_b = self._chain_to_root(b)
        ancestors_a = {frame: i for i, frame in enumerate(chain_a)}
        lca_index_b = next((i for i, f in enumerate(chain_b) if f in ancestors_a), None)
        if lca_index_b is None:
            return LookupResult(
                None,
                LookupFailure.DISCONNECTED,
                f"frames {a!r} and {b!r} are in separate trees "
                f"(roots {chain_a[-1]!r} and {chain_b[-1]!r})",
            )
        lca = chain_b[lca_index_b]
        lca_T_a = self._compose_down(chain_a[: ancestors_a[lca]])
        lca_T_b = self._compose_down(chain_b[:lca_index_b])
        return LookupResult(lca_T_a.inverse() @ lca_T_b)

    def _compose_down(self, chain_up: list[str]) -> SE3:
        """Transform of the first frame of ``chain_up`` in the parent of its last frame."""
        if not chain_up:
            return SE3.identity()
        result = self._parent_T_frame[chain_up[0]]
        for frame in chain_up[1:]:
            result = self._parent_T_frame[frame] @ result
        return result

    def _chain_to_root(self, name: str) -> list[str]:
        chain = [name]
        while (parent := self._parent[chain[-1]]) is not None:
            chain.append(parent)
        return chain

    def _check_new(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"frame name must be a non-empty string, got {name!r}")
        if name in self._parent:
            raise ValueError(f"frame {name!r} is already declared")
