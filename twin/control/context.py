"""``OnnxContext``: match a model's tensors to components using registered matchers."""

from __future__ import annotations

import logging
import warnings

from twin.control import metadata as md
from twin.control.components import Input, Output
from twin.control.errors import ContextError, ControlError, UnclaimedTensorWarning
from twin.control.matchers import GroupMatcher, Match, Matcher
from twin.control.runtime import OnnxRuntime

__all__ = ["INFORMATIONAL_OUTPUTS", "OnnxContext"]

logger = logging.getLogger(__name__)

#: Outputs that no matcher is asked about (informational only).
INFORMATIONAL_OUTPUTS = frozenset({"actions", "obs"})


class OnnxContext:
    """Parses model metadata, asks every matcher about every tensor, creates the components.

    Matchers stay registered across ``create_context`` calls (their claims are reset each time).
    """

    def __init__(self) -> None:
        self._matchers: list[Matcher] = []
        self._group_matchers: list[GroupMatcher] = []
        #: Input components of the last successful ``create_context``.
        self.inputs: list[Input] = []
        #: Output components of the last successful ``create_context``.
        self.outputs: list[Output] = []
        #: Control rate from the ``update_rate`` metadata (Hz), 0 before a context exists.
        self.update_rate: float = 0.0
        self.exploy_version: tuple[int, int] | None = None
        self.base_names: dict[str, str] = {}
        #: Tensors no matcher claimed in the last lenient creation.
        self.unclaimed: tuple[str, ...] = ()

    def register_matcher(self, matcher: Matcher) -> None:
        """Add a single-tensor matcher (kept across ``create_context`` calls)."""
        if not isinstance(matcher, Matcher):
            raise TypeError(f"register_matcher expects a Matcher, got {type(matcher).__name__}")
        self._matchers.append(matcher)

    def register_group_matcher(self, matcher: GroupMatcher) -> None:
        """Add a group matcher (its groups get metadata looked up by group name)."""
        if not isinstance(matcher, GroupMatcher):
            raise TypeError(
                f"register_group_matcher expects a GroupMatcher, got {type(matcher).__name__}"
            )
        self._group_matchers.append(matcher)

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        """Every registered matcher, group matchers first (the order tensors are offered in)."""
        return (*self._group_matchers, *self._matchers)

    def create_context(self, runtime: OnnxRuntime, strict: bool = True) -> None:
        """Match every tensor of ``runtime``'s model and create the bound components.

        Raises ``MetadataError`` (missing/malformed ``exploy_version``, ``update_rate`` or a
        component's required metadata) or ``ContextError`` (a tensor claimed twice, unclaimed
        tensors in strict mode, no matchers), naming the tensors. In lenient mode an unclaimed
        tensor is an ``UnclaimedTensorWarning``. On error the context holds no components.
        """
        self.inputs, self.outputs = [], []
        if not runtime.is_initialized:
            raise ContextError(
                "the OnnxRuntime has no model; initialize it before creating a context"
            )
        if not self.matchers:
            raise ContextError(
                "no matchers registered; register matchers before creating a context"
            )
        self.exploy_version = md.parse_exploy_version(runtime.get_custom_metadata("exploy_version"))
        self.update_rate = md.parse_update_rate(runtime.get_custom_metadata("update_rate"))
        self.base_names = md.parse_base_names(runtime.get_custom_metadata("base_names"))
        for matcher in self.matchers:
            matcher.reset_matcher()

        names = [
            *runtime.input_names(),
            *(n for n in runtime.output_names() if n not in INFORMATIONAL_OUTPUTS),
        ]
        unclaimed = [n for n in names if not self._offer(n, runtime)]
        self.unclaimed = tuple(unclaimed)
        if unclaimed:
            message = _unclaimed_message(unclaimed)
            if strict:
                raise ContextError(
                    message + " (strict mode; create the context with strict=False to ignore them)"
                )
            logger.warning(message)
            warnings.warn(message, UnclaimedTensorWarning, stacklevel=2)

        for matcher in self._group_matchers:
            matcher.populate_group_metadata(runtime.get_custom_metadata)
        inputs: list[Input] = []
        outputs: list[Output] = []
        for matcher in (*self._matchers, *self._group_matchers):
            inputs += matcher.create_inputs()
        for matcher in (*self._matchers, *self._group_matchers):
            outputs += matcher.create_outputs()
        for component in (*inputs, *outputs):
            try:
                component.bind(runtime)
            except ControlError as e:
                raise type(e)(f"component {component!r}: {e}") from e
        self.inputs, self.outputs = inputs, outputs

    def _offer(self, name: str, runtime: OnnxRuntime) -> bool:
        match = Match(name, runtime.get_custom_metadata(name), self.base_names)
        claimed = [m.name for m in self.matchers if m.matches(match)]
        if len(claimed) > 1:
            raise ContextError(
                f"tensor {name!r} is claimed by {len(claimed)} matchers ({', '.join(claimed)}); "
                "each tensor must be claimed by exactly one"
            )
        return bool(claimed)


def _unclaimed_message(names: list[str]) -> str:
    message = f"no matcher claims tensor(s) {', '.join(repr(n) for n in names)}"
    if "obs" in names:
        message += (
            "; 'obs' looks like a plain obs->actions export (Isaac Lab), which carries no exploy "
            "naming: register a custom matcher that maps its slices explicitly"
        )
    return message
