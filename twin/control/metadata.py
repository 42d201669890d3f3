"""Parsing of the exploy metadata convention (``docs/formats/onnx-policy.md``).

Model-level keys: ``exploy_version`` (a JSON string, ``"0.1.0"`` with the quotes),
``update_rate`` (Hz, decimal string), optional ``base_names`` (JSON object art -> base body).
Group/tensor keys hold JSON objects; the key is the group name (``obj.arm.joints``), not the
tensor name. Every parser raises ``MetadataError`` naming the key and what it expected.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from twin.control.errors import MetadataError
from twin.names import quoted

__all__ = [
    "MIN_EXPLOY_VERSION",
    "HeightScanMetadata",
    "JointTargetsMetadata",
    "PinholeImageMetadata",
    "Range",
    "Se2VelocityRanges",
    "SphericalImageMetadata",
]

#: Oldest exporter version whose files this controller reads (MAJOR, MINOR).
MIN_EXPLOY_VERSION = (0, 0)
_VERSION = re.compile(r"^(\d{1,9})\.(\d{1,9})")
MetadataLookup = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Range:
    """A closed interval ``[lo, hi]`` (JSON ``[lo, hi]``)."""

    lo: float
    hi: float

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi


@dataclass(frozen=True)
class Se2VelocityRanges:
    """Ranges of a commanded SE(2) velocity: m/s, m/s, rad/s."""

    lin_vel_x: Range
    lin_vel_y: Range
    ang_vel_z: Range

    def as_tuple(self) -> tuple[Range, Range, Range]:
        return (self.lin_vel_x, self.lin_vel_y, self.ang_vel_z)


@dataclass(frozen=True)
class JointTargetsMetadata:
    """``{"type": "joint_targets", "names", "stiffness", "damping"}``; gains (n,) float64."""

    names: tuple[str, ...]
    stiffness: np.ndarray
    damping: np.ndarray


@dataclass(frozen=True)
class HeightScanMetadata:
    """Grid of a ray-caster height scan (m); the grid is centred on the base."""

    pattern_type: str
    resolution: float
    size_x: float
    size_y: float
    offset_x: float = 0.0
    offset_y: float = 0.0
    articulation_name: str = ""


@dataclass(frozen=True)
class SphericalImageMetadata:
    """A spherical (LiDAR-like) range image: resolution (px), vertical FOV (deg)."""

    pattern_type: str
    v_res: int
    h_res: int
    v_fov_min_deg: float
    v_fov_max_deg: float
    unobserved_value: float


@dataclass(frozen=True)
class PinholeImageMetadata:
    """A pinhole camera: size (px) and intrinsics (px)."""

    pattern_type: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float


# ---------------------------------------------------------------- model level
def parse_exploy_version(text: str | None) -> tuple[int, int]:
    """``exploy_version`` -> (MAJOR, MINOR); it must be present, a JSON string, and supported."""
    if text is None:
        raise MetadataError(
            "the model has no 'exploy_version' metadata; expected a JSON string such as "
            '"0.1.0" (with the quotes) written by the exploy exporter'
        )
    try:
        version = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, nested too deeply, a 5000-digit number
        version = None
    if not isinstance(version, str):
        raise MetadataError(
            f"metadata 'exploy_version' is {quoted(text)}; expected a JSON string such as "
            "'\"0.1.0\"'"
        )
    match = _VERSION.match(version)
    if match is None:
        raise MetadataError(
            f"metadata 'exploy_version' is {quoted(version)}; expected MAJOR.MINOR[...]"
        )
    parsed = (int(match[1]), int(match[2]))
    if parsed < MIN_EXPLOY_VERSION:
        raise MetadataError(
            f"exploy_version {version!r} is older than the oldest supported "
            f"{MIN_EXPLOY_VERSION[0]}.{MIN_EXPLOY_VERSION[1]}"
        )
    return parsed


def parse_update_rate(text: str | None) -> float:
    """``update_rate`` -> Hz (> 0, finite)."""
    if text is None:
        raise MetadataError(
            "the model has no 'update_rate' metadata; expected the control rate in Hz, e.g. '50'"
        )
    try:
        rate = float(json.loads(text)) if text.strip().startswith('"') else float(text)
    except (ValueError, TypeError, OverflowError, RecursionError):
        rate = math.nan
    if not (math.isfinite(rate) and rate > 0.0):
        raise MetadataError(
            f"metadata 'update_rate' is {quoted(text)}; expected a positive rate in Hz"
        )
    return rate


def parse_base_names(text: str | None) -> dict[str, str]:
    """``base_names`` -> {articulation: base body}; ``{}`` when absent."""
    if text is None:
        return {}
    value = _load(text, "base_names")
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise MetadataError(
            f'metadata \'base_names\' is {text!r}; expected a JSON object {{"art": "base"}}'
        )
    return dict(value)


# ---------------------------------------------------------------- group level
def joint_names(key: str, text: str | None, what: str) -> tuple[str, ...]:
    """``{"joint_names": [...]}`` (required, non-empty) for joint inputs and joint commands."""
    obj = _required_object(key, text, what, '{"joint_names": [...]}')
    names = obj.get("joint_names")
    if not _is_str_list(names) or not names:
        raise MetadataError(
            f"metadata {key!r} of {what} needs 'joint_names': a non-empty list of joint names; "
            f"got {text!r}"
        )
    return tuple(names)


def joint_targets(key: str, text: str | None, what: str) -> JointTargetsMetadata:
    """``{"type": "joint_targets", "names", "stiffness", "damping"}`` with equal lengths."""
    expected = '{"type": "joint_targets", "names": [...], "stiffness": [...], "damping": [...]}'
    obj = _required_object(key, text, what, expected)
    if obj.get("type", "joint_targets") != "joint_targets":
        raise MetadataError(
            f"metadata {key!r} of {what} has type {obj['type']!r}; expected 'joint_targets'"
        )
    names = obj.get("names")
    if not _is_str_list(names) or not names:
        raise MetadataError(
            f"metadata {key!r} of {what} needs 'names' (non-empty list); expected {expected}"
        )
    gains = {}
    for field in ("stiffness", "damping"):
        values = _float_array(obj.get(field))
        if values is None or values.shape != (len(names),) or np.any(values < 0.0):
            raise MetadataError(
                f"metadata {key!r} of {what} needs '{field}': {len(names)} finite gains >= 0, "
                f"one per name; got {obj.get(field)!r}"
            )
        gains[field] = values
    return JointTargetsMetadata(tuple(names), gains["stiffness"], gains["damping"])


def target_frame(key: str, text: str | None, what: str) -> str:
    """``{"target_frame": "..."}`` of an SE(2) velocity output."""
    obj = _required_object(key, text, what, '{"target_frame": "..."}')
    frame = obj.get("target_frame")
    if not isinstance(frame, str) or not frame:
        raise MetadataError(
            f"metadata {key!r} of {what} needs 'target_frame' (a frame name); got {text!r}"
        )
    return frame


def se2_ranges(key: str, text: str | None, what: str) -> Se2VelocityRanges | None:
    """Optional ``{"ranges": {"lin_vel_x": [lo, hi], "lin_vel_y": [...], "ang_vel_z": [...]}}``."""
    obj = _optional_object(key, text, what)
    if obj is None or "ranges" not in obj:
        return None
    ranges = obj["ranges"]
    fields = ("lin_vel_x", "lin_vel_y", "ang_vel_z")
    if not isinstance(ranges, dict) or any(f not in ranges for f in fields):
        raise MetadataError(
            f"metadata {key!r} of {what}: 'ranges' must have {fields}; got {text!r}"
        )
    return Se2VelocityRanges(*(_range(key, ranges[f], f"ranges.{f}") for f in fields))


def float_range(key: str, text: str | None, what: str) -> Range | None:
    """Optional ``{"range": [lo, hi]}`` of a float command."""
    obj = _optional_object(key, text, what)
    if obj is None or "range" not in obj:
        return None
    return _range(key, obj["range"], "range")


def height_scan(key: str, text: str | None, what: str) -> HeightScanMetadata:
    obj = _required_object(key, text, what, "{pattern_type, resolution, size_x, size_y, ...}")
    return HeightScanMetadata(
        pattern_type=_field(obj, key, "pattern_type", str),
        resolution=_field(obj, key, "resolution", float),
        size_x=_field(obj, key, "size_x", float),
        size_y=_field(obj, key, "size_y", float),
        offset_x=_field(obj, key, "offset_x", float, 0.0),
        offset_y=_field(obj, key, "offset_y", float, 0.0),
        articulation_name=_field(obj, key, "articulation_name", str, ""),
    )


def spherical_image(key: str, text: str | None, what: str) -> SphericalImageMetadata:
    obj = _required_object(key, text, what, "{pattern_type, v_res, h_res, v_fov_min_deg, ...}")
    return SphericalImageMetadata(
        pattern_type=_field(obj, key, "pattern_type", str),
        v_res=_field(obj, key, "v_res", int),
        h_res=_field(obj, key, "h_res", int),
        v_fov_min_deg=_field(obj, key, "v_fov_min_deg", float),
        v_fov_max_deg=_field(obj, key, "v_fov_max_deg", float),
        unobserved_value=_field(obj, key, "unobserved_value", float),
    )


def pinhole_image(key: str, text: str | None, what: str) -> PinholeImageMetadata:
    obj = _required_object(key, text, what, "{pattern_type, width, height, fx, fy, cx, cy}")
    return PinholeImageMetadata(
        pattern_type=_field(obj, key, "pattern_type", str),
        width=_field(obj, key, "width", int),
        height=_field(obj, key, "height", int),
        fx=_field(obj, key, "fx", float),
        fy=_field(obj, key, "fy", float),
        cx=_field(obj, key, "cx", float),
        cy=_field(obj, key, "cy", float),
    )


# ---------------------------------------------------------------- helpers
def _load(text: str, key: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, a 5000-digit number, nesting
        what = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise MetadataError(f"metadata {key!r} is not valid JSON ({what}): {quoted(text)}") from e


def read_model_metadata(modelmeta: Any, path: object) -> dict[str, str]:
    """The ``metadata_props`` of the ONNX model at ``path`` as {key: value}, from onnxruntime's
    ``session.get_modelmeta()``; ``MetadataError`` naming the file and the key whose key or
    value is not UTF-8 text (the convention's keys and values are UTF-8 strings), instead of
    the ``UnicodeDecodeError`` onnxruntime raises."""
    try:
        return dict(modelmeta.custom_metadata_map)
    except UnicodeDecodeError as e:
        raise MetadataError(
            f"{path}: metadata {_undecodable_entry(path)} is not UTF-8 text (byte "
            f"{e.object[e.start : e.start + 1]!r}); expected UTF-8 strings "
            "(docs/formats/onnx-policy.md)"
        ) from None


def _undecodable_entry(path: object) -> str:
    """``'key'`` (or ``key b'...'``) of the first metadata entry of ``path`` that is not UTF-8,
    as the ``onnx`` package reads it; ``"an entry"`` when it cannot say."""
    try:
        import onnx

        model = onnx.load(str(path), load_external_data=False)
        for prop in model.metadata_props:
            if isinstance(prop.key, bytes):
                return f"key {prop.key[:40]!r}"
            if isinstance(prop.value, bytes):
                return f"{prop.key[:80]!r}"
    except Exception:  # naming the key is a courtesy; the error stands without it
        pass
    return "an entry"


def _required_object(key: str, text: str | None, what: str, expected: str) -> dict[str, Any]:
    if text is None:
        raise MetadataError(
            f"{what} needs metadata key {key!r} with {expected}; the model has none"
        )
    obj = _load(text, key)
    if not isinstance(obj, dict):
        raise MetadataError(
            f"metadata {key!r} of {what} is {text!r}; expected a JSON object {expected}"
        )
    return obj


def _optional_object(key: str, text: str | None, what: str) -> dict[str, Any] | None:
    if text is None:
        return None
    obj = _load(text, key)
    if not isinstance(obj, dict):
        raise MetadataError(f"metadata {key!r} of {what} is {text!r}; expected a JSON object")
    return obj


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _float_array(value: object) -> np.ndarray | None:
    if not isinstance(value, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        return None
    arr = np.array(value, dtype=float)
    return arr if np.all(np.isfinite(arr)) else None


def _range(key: str, value: object, field: str) -> Range:
    arr = _float_array(value)
    if arr is None or arr.shape != (2,) or arr[0] > arr[1]:
        raise MetadataError(
            f"metadata {key!r}: {field!r} must be [lo, hi] with lo <= hi; got {value!r}"
        )
    return Range(float(arr[0]), float(arr[1]))


_MISSING = object()


def _field(obj: dict[str, Any], key: str, name: str, kind: type, default: object = _MISSING) -> Any:
    value = obj.get(name, default)
    if value is _MISSING:
        raise MetadataError(f"metadata {key!r} needs field {name!r} ({kind.__name__})")
    if kind is str and isinstance(value, str):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            pass
    raise MetadataError(
        f"metadata {key!r}: field {name!r} is {quoted(value)}; expected {kind.__name__}"
    )
