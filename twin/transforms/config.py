"""Transformer configuration: ``Translation`` / ``Rotation`` entries, ``TfConfig`` and the JSON
loader for the vendor SDK's file format (``docs/formats/transformer-config.md``).

A file may hold the sections ``tf_wrench_config``, ``tf_twist_config``, ``tf_imu_config`` and
``tf_pose_config``; each transformer reads its own. Keys of a section: ``name``, ``policy``,
``set_input_reference_point``, ``set_input_expression_axes``, ``set_output_reference_point``,
``set_output_expression_axes`` and (our extension) ``max_tf_age_s``. Every error names the file,
the section and the field, and says what was expected.
"""

from __future__ import annotations

import enum
import json
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from twin.transforms.codes import Policy

#: A quaternion whose norm is off 1 by at most this is unit (normalised silently); at run time a
#: moving-frame or input quaternion off by more is ``Condition.OFF_NORM``.
QUATERNION_NORM_TOLERANCE = 1e-6
#: A configured quaternion off unit norm by more than ``QUATERNION_NORM_TOLERANCE`` and at most
#: this (4-decimal hand-written values such as ``[0.7071, 0, 0, 0.7071]``, off by 1e-5) is
#: normalised with a ``TfConfigWarning``; one off by more is refused (``TfConfigError``).
QUATERNION_NORM_NORMALISE_LIMIT = 1e-3


class TfConfigError(ValueError):
    """A configuration (file or ``TfConfig``) is invalid; the message names where and why."""


class TfConfigWarning(UserWarning):
    """A configuration problem that has a safe fallback (unknown policy, unknown key, refused
    override of a config-loaded entry, a quaternion slightly off unit norm normalised)."""


class Origin(str, enum.Enum):
    """The frame an entry is given in; ``UNSET`` (empty) means "not set yet"."""

    FIXED = "fixed_frame"
    MOVING = "moving_frame"
    UNSET = ""


@dataclass(frozen=True)
class Translation:
    """A reference-point entry: ``translation`` (3,) m from the ``origin`` frame, in its axes."""

    origin: Origin | str = Origin.UNSET
    translation: Sequence[float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Rotation:
    """An expression-axes entry: unit quaternion ``rotation`` (4,) ``[qw, qx, qy, qz]`` of the
    axes relative to the ``origin`` frame (``v_origin = R(q) v_axes``)."""

    origin: Origin | str = Origin.UNSET
    rotation: Sequence[float] = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class TfConfig:
    """Configuration of one transformer, the same meaning as a JSON section.

    ``max_tf_age_s``: if set, a fixed-to-moving-frame transform older than this (s) when
    ``update`` runs is stale (see the policy table in ``twin.transforms``).
    """

    name: str = ""
    policy: Policy | str = Policy.BEST_EFFORT
    input_ref_point: Translation = field(default_factory=Translation)
    input_expr_axes: Rotation = field(default_factory=Rotation)
    output_ref_point: Translation = field(default_factory=Translation)
    output_expr_axes: Rotation = field(default_factory=Rotation)
    max_tf_age_s: float | None = None


#: (TfConfig attribute, JSON key / setter name, entry type) of the four entries.
ENTRY_FIELDS = (
    ("input_ref_point", "set_input_reference_point", Translation),
    ("input_expr_axes", "set_input_expression_axes", Rotation),
    ("output_ref_point", "set_output_reference_point", Translation),
    ("output_expr_axes", "set_output_expression_axes", Rotation),
)
_SECTION_KEYS = {"name", "policy", "max_tf_age_s"} | {key for _, key, _ in ENTRY_FIELDS}


class _Where:
    """Builds error messages that name the file (or TfConfig), the section and the field."""

    def __init__(self, source: str, section: str | None) -> None:
        self.source = source
        self.section = section

    def error(self, fld: str | None, what: str) -> TfConfigError:
        parts = [self.source]
        if self.section is not None:
            parts.append(f"section {self.section!r}")
        if fld is not None:
            parts.append(f"field {fld!r}")
        return TfConfigError(": ".join(parts) + ": " + what)


def parse_origin(value: object, where: _Where, fld: str) -> Origin:
    """The ``Origin`` of a string; raises ``TfConfigError`` naming ``fld`` otherwise."""
    if isinstance(value, Origin):
        return value
    if isinstance(value, str):
        for origin in Origin:
            if value == origin.value:
                return origin
    raise where.error(
        fld, f"unknown origin {value!r}; expected 'fixed_frame', 'moving_frame' or '' (not set)"
    )


def parse_vector(value: object, length: int, where: _Where, fld: str, unit: str) -> tuple:
    """A tuple of ``length`` finite floats; raises ``TfConfigError`` naming ``fld`` otherwise."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise where.error(fld, f"got {value!r}; expected a list of {length} numbers ({unit})")
    if len(value) != length:
        raise where.error(
            fld, f"has length {len(value)}; expected a list of {length} numbers ({unit})"
        )
    out = []
    for v in value:
        if isinstance(v, bool) or (not isinstance(v, (int, float)) and not hasattr(v, "__float__")):
            raise where.error(fld, f"element {v!r} is not a number; expected {length} numbers")
        f = float(v)
        if not math.isfinite(f):
            raise where.error(fld, f"element {v!r} is not finite; expected finite numbers")
        out.append(f)
    return tuple(out)


def parse_quaternion(value: object, where: _Where, fld: str) -> tuple:
    """A unit quaternion tuple, normalised. A norm off 1 by more than 1e-6 and at most 1e-3 warns
    (``TfConfigWarning`` naming file, section and field); by more than 1e-3 it is refused."""
    q = parse_vector(value, 4, where, fld, "[qw, qx, qy, qz]")
    norm = math.sqrt(sum(c * c for c in q))
    off = abs(norm - 1.0)
    if off > QUATERNION_NORM_NORMALISE_LIMIT:
        raise where.error(
            fld,
            f"quaternion {list(q)} has norm {norm:.9g}; expected a unit quaternion "
            f"[qw, qx, qy, qz] (norm within {QUATERNION_NORM_NORMALISE_LIMIT:g} of 1)",
        )
    if off > QUATERNION_NORM_TOLERANCE:
        msg = where.error(fld, f"quaternion {list(q)} has norm {norm:.9g}; normalised to unit norm")
        warnings.warn(str(msg), TfConfigWarning, stacklevel=4)
    return tuple(c / norm for c in q)


def parse_policy(value: object, where: _Where, fld: str = "policy") -> Policy:
    """The ``Policy``; an unknown name warns and falls back to best effort (vendor behaviour)."""
    if isinstance(value, Policy):
        return value
    if not isinstance(value, str):
        raise where.error(fld, f"got {value!r}; expected a policy name string")
    for policy in Policy:
        if value == policy.value:
            return policy
    msg = where.error(
        fld,
        f"unknown policy {value!r}; expected one of "
        f"{[p.value for p in Policy]}; falling back to 'best_effort'",
    )
    warnings.warn(str(msg), TfConfigWarning, stacklevel=4)
    return Policy.BEST_EFFORT


def parse_max_age(value: object, where: _Where, fld: str = "max_tf_age_s") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.error(fld, f"got {value!r}; expected a positive number of seconds or null")
    if not (math.isfinite(value) and value > 0.0):
        raise where.error(fld, f"got {value!r}; expected a positive number of seconds or null")
    return float(value)


def validate_config(config: TfConfig, where: _Where | None = None) -> TfConfig:
    """A ``TfConfig`` with every entry checked and normalised (origins as ``Origin``,
    vectors as float tuples, quaternions unit). Raises ``TfConfigError``."""
    if not isinstance(config, TfConfig):
        raise TypeError(f"expected a TfConfig, got {type(config).__name__}")
    where = where or _Where("TfConfig", None)
    if not isinstance(config.name, str):
        raise where.error("name", f"got {config.name!r}; expected a string")
    entries = {}
    for attr, key, kind in ENTRY_FIELDS:
        entry = getattr(config, attr)
        fld = key if where.section is not None else attr
        if not isinstance(entry, kind):
            raise where.error(fld, f"got {type(entry).__name__}; expected a {kind.__name__}")
        origin = parse_origin(entry.origin, where, f"{fld}.origin")
        if kind is Translation:
            value = parse_vector(entry.translation, 3, where, f"{fld}.translation", "[x, y, z] m")
            entries[attr] = Translation(origin, value)
        else:
            value = parse_quaternion(entry.rotation, where, f"{fld}.rotation")
            entries[attr] = Rotation(origin, value)
    return TfConfig(
        name=config.name,
        policy=parse_policy(config.policy, where),
        max_tf_age_s=parse_max_age(config.max_tf_age_s, where),
        **entries,
    )


def _no_duplicates(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise ValueError(f"duplicate key(s) {sorted(dup)}")
    return dict(pairs)


def load_tf_config(path: str | os.PathLike, section: str) -> TfConfig:
    """Read ``section`` of the JSON file at ``path`` into a validated ``TfConfig``.

    Entries absent from the section (or with an empty origin) are "not set". Raises
    ``TfConfigError`` naming the file, section and field for bad JSON, a missing section, an
    unknown origin, a wrong length or type, a non-finite number, or a quaternion whose norm is
    off 1 by more than 1e-3 (one off by more than 1e-6 is normalised with a ``TfConfigWarning``).
    An unknown policy or key warns (``TfConfigWarning``).
    """
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise TfConfigError(f"{source}: cannot read the configuration file: {e}") from e
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise TfConfigError(
            f"{source}: not valid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from e
    except ValueError as e:
        raise TfConfigError(f"{source}: not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise TfConfigError(
            f"{source}: expected a JSON object of sections, got {type(doc).__name__}"
        )
    if section not in doc:
        raise TfConfigError(
            f"{source}: section {section!r} is missing; sections present: {sorted(doc)}"
        )
    where = _Where(source, section)
    body = doc[section]
    if not isinstance(body, dict):
        raise where.error(None, f"expected an object, got {type(body).__name__}")
    for key in sorted(set(body) - _SECTION_KEYS):
        warnings.warn(
            str(where.error(key, f"unknown key ignored; expected one of {sorted(_SECTION_KEYS)}")),
            TfConfigWarning,
            stacklevel=2,
        )
    entries = {}
    for attr, key, kind in ENTRY_FIELDS:
        if key not in body:
            continue
        entries[attr] = _entry_from_json(body[key], kind, where, key)
    config = TfConfig(
        name=body.get("name", ""),
        policy=body.get("policy", Policy.BEST_EFFORT.value),
        max_tf_age_s=body.get("max_tf_age_s"),
        **entries,
    )
    return validate_config(config, where)


def _entry_from_json(value: object, kind: type, where: _Where, key: str) -> Translation | Rotation:
    value_key = "translation" if kind is Translation else "rotation"
    if not isinstance(value, dict):
        raise where.error(key, f"got {value!r}; expected an object with 'origin' and '{value_key}'")
    extra = sorted(set(value) - {"origin", value_key})
    if extra:
        raise where.error(
            f"{key}.{extra[0]}", f"unexpected key; expected only 'origin' and '{value_key}'"
        )
    for needed in ("origin", value_key):
        if needed not in value:
            raise where.error(f"{key}.{needed}", "is missing")
    origin = parse_origin(value["origin"], where, f"{key}.origin")
    return kind(origin, value[value_key])
