"""Matchers: recognise tensor names of the exploy convention and create components.

A ``Matcher`` claims single tensors (``matches`` returns ``True`` and remembers them);
a ``GroupMatcher`` claims tensors that belong together (``obj.arm.joints.pos`` and ``.vel``)
under a group name whose metadata the context looks up (``populate_group_metadata``).
``create_inputs`` / ``create_outputs`` then build the components, parsing metadata; required
metadata that is missing or malformed raises ``MetadataError`` naming the key (the reference
silently creates nothing in that case).

Names (``<id>`` is ``[a-zA-Z0-9_]+``, whole-name matches only) are listed in
``docs/formats/onnx-policy.md``.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from twin.control import components as c
from twin.control import metadata as md
from twin.control.errors import ContextError
from twin.control.interfaces import (
    BaseInfo,
    BodyInfo,
    CommandInfo,
    FloatCommandInfo,
    HeightScanInfo,
    ImuInfo,
    JointGroupInfo,
    JointPositionCommandGroupInfo,
    PinholeImageInfo,
    Se2VelocityCommandInfo,
    SphericalImageInfo,
)

__all__ = [
    "Group",
    "GroupMatcher",
    "Match",
    "Matcher",
    "default_group_matchers",
    "default_matchers",
]

ID = r"[a-zA-Z0-9_]+"
#: The four pose/velocity fields of a base or body: position (world), orientation [w,x,y,z]
#: (world), linear and angular velocity (body frame).
POSE_FIELDS = ("pos_b_rt_w_in_w", "w_Q_b", "lin_vel_b_rt_w_in_b", "ang_vel_b_rt_w_in_b")


@dataclass(frozen=True)
class Match:
    """A tensor offered to the matchers: its name, its own metadata, the model's base names."""

    name: str
    metadata: str | None = None
    base_names: Mapping[str, str] = field(default_factory=dict)


class Matcher(abc.ABC):
    """Claims single tensors; ``found`` maps a key (usually the tensor name) to the match."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self.found: dict[str, tuple[Match, re.Match[str] | None]] = {}

    @abc.abstractmethod
    def matches(self, match: Match) -> bool:
        """``True`` if this matcher claims ``match.name`` (and remembers it)."""

    def create_inputs(self) -> list[c.Input]:
        return []

    def create_outputs(self) -> list[c.Output]:
        return []

    def reset_matcher(self) -> None:
        """Forget every claimed tensor (called before each context creation)."""
        self.found.clear()
        self.reset()

    def reset(self) -> None:  # noqa: B027 - optional hook for subclass state
        """Subclass hook of ``reset_matcher``."""


@dataclass
class Group:
    """Tensors of one group: ``members`` maps the member (``pos``, ``vel``, ...) to its match."""

    name: str
    captures: tuple[str, ...]
    members: dict[str, Match] = field(default_factory=dict)
    metadata: str | None = None

    def describe(self) -> str:
        return f"tensor group {self.name!r} ({', '.join(m.name for m in self.members.values())})"


class GroupMatcher(Matcher):
    """Claims ``pattern`` matches: group 1 is the group name, the last group the member."""

    pattern: re.Pattern[str]

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.groups: dict[str, Group] = {}

    def matches(self, match: Match) -> bool:
        m = self.pattern.fullmatch(match.name)
        if m is None:
            return False
        group = self.groups.setdefault(m[1], Group(m[1], m.groups()))
        group.members[m[m.re.groups]] = match
        self.found[match.name] = (match, m)
        return True

    def populate_group_metadata(self, lookup: Callable[[str], str | None]) -> None:
        """Give each group the metadata stored under its name (else a member's own)."""
        for group in self.groups.values():
            group.metadata = lookup(group.name)
            if group.metadata is None:
                group.metadata = next(
                    (m.metadata for m in group.members.values() if m.metadata), None
                )

    def reset_matcher(self) -> None:
        self.groups.clear()
        super().reset_matcher()


class RegexMatcher(Matcher):
    """Claims whole-name matches of ``pattern``; ``build(match, regex_match)`` makes a component."""

    def __init__(self, name: str, pattern: str, build: Callable, output: bool = False) -> None:
        super().__init__(name)
        self.pattern = re.compile(pattern)
        self._build = build
        self._output = output

    def matches(self, match: Match) -> bool:
        m = self.pattern.fullmatch(match.name)
        if m is None:
            return False
        self.found[match.name] = (match, m)
        return True

    def _create(self) -> list:
        return [self._build(match, m) for match, m in self.found.values()]

    def create_inputs(self) -> list[c.Input]:
        return [] if self._output else self._create()

    def create_outputs(self) -> list[c.Output]:
        return self._create() if self._output else []


class BaseMatcher(Matcher):
    """``obj.<art>.<base>.<field>`` where the model's ``base_names[<art>] == <base>``."""

    def __init__(self, field_name: str, component: type) -> None:
        super().__init__(f"Base[{field_name}]")
        self.field = field_name
        self.component = component
        self._articulation: dict[str, str] = {}

    def matches(self, match: Match) -> bool:
        for art, base in match.base_names.items():
            if match.name == f"obj.{art}.{base}.{self.field}":
                self.found[match.name] = (match, None)
                self._articulation[match.name] = art
                return True
        return False

    def reset(self) -> None:
        self._articulation.clear()

    def create_inputs(self) -> list[c.Input]:
        return [self.component(name, BaseInfo(self._articulation[name])) for name in self.found]


class BodyMatcher(Matcher):
    """``obj.<art>.<body>.<field>`` for any body that is not the articulation's base."""

    def __init__(self, field_name: str, component: type) -> None:
        super().__init__(f"Body[{field_name}]")
        self.pattern = re.compile(rf"obj\.({ID})\.({ID})\.{re.escape(field_name)}")
        self.component = component

    def matches(self, match: Match) -> bool:
        m = self.pattern.fullmatch(match.name)
        if m is None or match.base_names.get(m[1]) == m[2]:
            return False
        self.found[match.name] = (match, m)
        return True

    def create_inputs(self) -> list[c.Input]:
        return [self.component(name, BodyInfo(m[1], m[2])) for name, (_, m) in self.found.items()]


# ---------------------------------------------------------------- group matchers
class JointMatcher(GroupMatcher):
    """``obj.<art>.joints.(pos|vel)``; metadata ``obj.<art>.joints``: ``{"joint_names": [...]}``."""

    pattern = re.compile(rf"(obj\.({ID})\.joints)\.(pos|vel)")

    def create_inputs(self) -> list[c.Input]:
        inputs: list[c.Input] = []
        for g in self.groups.values():
            joints = JointGroupInfo(g.captures[1], md.joint_names(g.name, g.metadata, g.describe()))
            for member, match in g.members.items():
                cls = c.JointPositionInput if member == "pos" else c.JointVelocityInput
                inputs.append(cls(match.name, joints))
        return inputs


class JointTargetMatcher(GroupMatcher):
    """``output.joint_targets.<term>.(pos|vel|effort)``; ``<term>`` names the articulation."""

    pattern = re.compile(rf"(output\.joint_targets\.({ID}))\.(pos|vel|effort)")

    def create_outputs(self) -> list[c.Output]:
        outputs: list[c.Output] = []
        for g in self.groups.values():
            meta = md.joint_targets(g.name, g.metadata, g.describe())
            outputs.append(c.JointTargetOutput(g.name, g.captures[1], meta, tuple(g.members)))
        return outputs


class _SensorGroupMatcher(GroupMatcher):
    parse: Callable
    component: type
    info: type

    def create_inputs(self) -> list[c.Input]:
        inputs: list[c.Input] = []
        for g in self.groups.values():
            meta = type(self).parse(g.name, g.metadata, g.describe())
            channels = frozenset(g.members)
            inputs.append(
                self.component(g.name, self.info(g.captures[1], meta, channels), channels)
            )
        return inputs


class HeightScanMatcher(_SensorGroupMatcher):
    """``sensor.ray_caster.<s>.(height|r|g|b)``; metadata: grid pattern."""

    pattern = re.compile(rf"(sensor\.ray_caster\.({ID}))\.(height|r|g|b)")
    parse = md.height_scan
    component = c.HeightScanInput
    info = HeightScanInfo


class SphericalImageMatcher(_SensorGroupMatcher):
    """``sensor.spherical_image.<s>.<channel>``; metadata: resolution and field of view."""

    pattern = re.compile(rf"(sensor\.spherical_image\.({ID}))\.({ID})")
    parse = md.spherical_image
    component = c.SphericalImageInput
    info = SphericalImageInfo


class PinholeImageMatcher(_SensorGroupMatcher):
    """``sensor.pinhole_image.<s>.<channel>``; metadata: size and intrinsics."""

    pattern = re.compile(rf"(sensor\.pinhole_image\.({ID}))\.({ID})")
    parse = md.pinhole_image
    component = c.PinholeImageInput
    info = PinholeImageInfo


class MemoryMatcher(GroupMatcher):
    """``memory.<name>.in`` / ``.out``: both must exist; ``.out`` is copied to ``.in``."""

    pattern = re.compile(r"memory\.(.+)\.(in|out)")

    def create_outputs(self) -> list[c.Output]:
        outputs: list[c.Output] = []
        for g in self.groups.values():
            missing = {"in", "out"} - set(g.members)
            if missing:
                have = next(iter(g.members.values())).name
                raise ContextError(
                    f"memory {g.name!r} has tensor {have!r} but no 'memory.{g.name}.{missing.pop()}'; "
                    "recurrent memory needs both .in (input) and .out (output)"
                )
            outputs.append(c.MemoryOutput(g.name))
        return outputs


# ---------------------------------------------------------------- defaults
def _cmd(kind: str) -> str:
    return rf"cmd\.{kind}\.({ID})"


def default_matchers() -> list[Matcher]:
    """Fresh instances of every built-in single-tensor matcher."""
    matchers: list[Matcher] = [
        RegexMatcher("StepCountMatcher", r"ctx\.step_count", lambda m, r: c.StepCountInput(m.name)),
    ]
    base_components = (
        c.BasePositionInput,
        c.BaseOrientationInput,
        c.BaseLinearVelocityInput,
        c.BaseAngularVelocityInput,
    )
    body_components = (
        c.BodyPositionInput,
        c.BodyOrientationInput,
        c.BodyLinearVelocityInput,
        c.BodyAngularVelocityInput,
    )
    matchers += [BaseMatcher(f, comp) for f, comp in zip(POSE_FIELDS, base_components)]
    matchers += [BodyMatcher(f, comp) for f, comp in zip(POSE_FIELDS, body_components)]
    for field_name, comp in (
        ("lin_vel_b_rt_w_in_b", c.ImuLinearVelocityInput),
        ("ang_vel_b_rt_w_in_b", c.ImuAngularVelocityInput),
        ("w_Q_b", c.ImuOrientationInput),
    ):
        matchers.append(
            RegexMatcher(
                f"Imu[{field_name}]",
                rf"sensor\.imu\.({ID})\.{field_name}",
                lambda m, r, comp=comp: comp(m.name, ImuInfo(r[1])),
            )
        )
    what = "tensor {!r}".format
    matchers += [
        RegexMatcher(
            "CommandSe2VelocityMatcher",
            _cmd("se2_velocity"),
            lambda m, r: c.CommandSe2VelocityInput(
                m.name,
                Se2VelocityCommandInfo(r[1], md.se2_ranges(m.name, m.metadata, what(m.name))),
            ),
        ),
        RegexMatcher(
            "CommandSe3PoseMatcher",
            _cmd("se3_pose"),
            lambda m, r: c.CommandSe3PoseInput(m.name, CommandInfo(r[1])),
        ),
        RegexMatcher(
            "CommandBooleanMatcher",
            _cmd("boolean"),
            lambda m, r: c.CommandBooleanInput(m.name, CommandInfo(r[1])),
        ),
        RegexMatcher(
            "CommandFloatMatcher",
            _cmd("float"),
            lambda m, r: c.CommandFloatInput(
                m.name, FloatCommandInfo(r[1], md.float_range(m.name, m.metadata, what(m.name)))
            ),
        ),
        RegexMatcher(
            "CommandJointPositionMatcher",
            _cmd("joint_pos"),
            lambda m, r: c.CommandJointPositionInput(
                m.name,
                JointPositionCommandGroupInfo(
                    r[1], md.joint_names(m.name, m.metadata, what(m.name))
                ),
            ),
        ),
        RegexMatcher(
            "Se2VelocityMatcher",
            rf"output\.se2_velocity\.({ID})",
            lambda m, r: c.Se2VelocityOutput(
                m.name, md.target_frame(m.name, m.metadata, what(m.name))
            ),
            output=True,
        ),
    ]
    return matchers


def default_group_matchers() -> list[GroupMatcher]:
    """Fresh instances of every built-in group matcher."""
    return [
        JointMatcher(),
        JointTargetMatcher(),
        HeightScanMatcher(),
        SphericalImageMatcher(),
        PinholeImageMatcher(),
        MemoryMatcher(),
    ]
