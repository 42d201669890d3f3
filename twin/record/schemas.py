"""The channels of a twin recording and their JSON schemas (``docs/formats/recording.md``).

Every message is JSON (``message_encoding="json"``, ``schema encoding "jsonschema"``). Where a
Foxglove well-known schema fits, its name and field layout are used, so that Foxglove shows the
arm moving: ``foxglove.FrameTransforms`` on ``/tf`` (every link from forward kinematics) and
``foxglove.PoseInFrame`` on ``/tcp``. The twin's own messages carry the robot time ``t_us`` and
the number of ``step()`` calls made before them (``step``), which is what replay keys on.
"""

from __future__ import annotations

from typing import Any

_VEC6 = {"type": "array", "items": {"type": "number"}, "minItems": 6, "maxItems": 6}
#: A command field: six numbers, or null when the command was not numbers (refused).
_VEC6_OR_NULL = {"anyOf": [_VEC6, {"type": "null"}]}
_VEC3 = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}
#: The largest step counter and time stamp a recording may hold: an int64, as numpy keeps them.
INT64_MAX = 2**63 - 1
_STEP = {
    "type": "integer",
    "minimum": 0,
    "maximum": INT64_MAX,
    "description": "step() calls made before this message",
}
_T_US = {
    "type": "integer",
    "minimum": 0,
    "maximum": INT64_MAX,
    "description": "robot time, microseconds",
}
_XYZ = {
    "type": "object",
    "properties": {k: {"type": "number"} for k in "xyz"},
}
_XYZW = {
    "type": "object",
    "properties": {k: {"type": "number"} for k in "xyzw"},
}
_TIME = {
    "type": "object",
    "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}},
}


def _object(description: str, **properties: Any) -> dict:
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": sorted(properties),
    }


#: Schema name -> JSON schema.
SCHEMAS: dict[str, dict] = {
    "twin.RobotState": _object(
        "One robot.read(): joints (rad, rad/s, N m, in model.joint_names order), health flags, "
        "and the sensor samples new since the previous read (null when none)",
        step=_STEP,
        t_us=_T_US,
        q=_VEC6,
        qd=_VEC6,
        tau=_VEC6,
        health={"type": "integer", "description": "twin.robot.Health bits"},
        wrench={
            "anyOf": [
                {"type": "null"},
                _object(
                    "An F/T sample: [fx, fy, fz, tx, ty, tz] N, N m in the sensor frame",
                    t_us=_T_US,
                    wrench=_VEC6,
                    status={"type": "integer", "description": "twin.robot.FtStatus bits"},
                    temperature_c={"type": "number"},
                ),
            ]
        },
        imu={
            "anyOf": [
                {"type": "null"},
                _object(
                    "An IMU sample: specific force m/s^2, angular rate rad/s, IMU frame",
                    t_us=_T_US,
                    specific_force=_VEC3,
                    angular_rate=_VEC3,
                ),
            ]
        },
    ),
    "twin.JointCommand": _object(
        "One robot.write(): the command asked for; accepted false when the robot refused it",
        step=_STEP,
        q_des=_VEC6_OR_NULL,
        qd_des=_VEC6_OR_NULL,
        tau_ff=_VEC6_OR_NULL,
        kp=_VEC6_OR_NULL,
        kd=_VEC6_OR_NULL,
        accepted={"type": "boolean"},
        error={"type": "string"},
    ),
    "twin.Call": _object(
        "A call on the robot that changes what it does (reset, payload, external force)",
        step=_STEP,
        call={"type": "string"},
        args={"type": "object"},
    ),
    "twin.Event": _object(
        "What a layer above the robot published (controller, planner, F/T service, live twin, "
        "health changes)",
        step=_STEP,
        t_us=_T_US,
        source={"type": "string"},
        kind={"type": "string"},
        detail={"type": "object"},
    ),
    "foxglove.FrameTransforms": {
        "type": "object",
        "properties": {
            "transforms": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "timestamp": _TIME,
                        "parent_frame_id": {"type": "string"},
                        "child_frame_id": {"type": "string"},
                        "translation": _XYZ,
                        "rotation": _XYZW,
                    },
                },
            }
        },
    },
    "foxglove.PoseInFrame": {
        "type": "object",
        "properties": {
            "timestamp": _TIME,
            "frame_id": {"type": "string"},
            "pose": {
                "type": "object",
                "properties": {"position": _XYZ, "orientation": _XYZW},
            },
        },
    },
}

#: Topic -> schema name: the channels a recording of a robot has.
CHANNELS: dict[str, str] = {
    "/robot/state": "twin.RobotState",
    "/robot/command": "twin.JointCommand",
    "/robot/call": "twin.Call",
    "/events": "twin.Event",
    "/tf": "foxglove.FrameTransforms",
    "/tcp": "foxglove.PoseInFrame",
}


_TYPES = {
    "object": (dict, "an object"),
    "array": (list, "an array"),
    "string": (str, "a string"),
    "boolean": (bool, "true or false"),
    "null": (type(None), "null"),
}
_NUMBER = {"type": "number"}
_KIND = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    type(None): "null",
    int: "integer",
    float: "number",
}
_NUMBERS_ONLY: dict[int, tuple[dict, bool]] = {}


def _numbers_only(properties: dict) -> bool:
    """True when every property is a plain number (cached per schema object, kept alive with
    its answer so that its id is not reused)."""
    known = _NUMBERS_ONLY.get(id(properties))
    if known is None:
        answer = bool(properties) and all(sub == _NUMBER for sub in properties.values())
        known = _NUMBERS_ONLY[id(properties)] = (properties, answer)
    return known[1]


_FLOAT_MAX = 1.7976931348623157e308


def _found(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def problem(value: Any, schema: dict, where: str = "") -> str | None:
    """The first way ``value`` (decoded JSON) breaks ``schema`` (the subset of JSON Schema that
    ``SCHEMAS`` uses), as ``"<field>: expected ..., found ..."``; None when it conforms.
    Numbers may be non-finite (a refused command keeps its NaN); integers and numbers are never
    booleans."""
    found = _check(value, schema)
    if found is None:
        return None
    path, text = found
    name = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in reversed(path))
    return f"{name.lstrip('.') or 'the message'}: {text}"


def _check(value: Any, schema: dict) -> tuple[list, str] | None:
    """``problem``'s walk: None, or (the path to the field, innermost first; what was wrong).
    Names are built only for a failure: a recording has hundreds of thousands of messages."""
    if "anyOf" in schema:
        options = schema["anyOf"]
        kind = _KIND.get(type(value))
        fitting = [
            o for o in options if o.get("type") in (kind, "number" if kind == "integer" else kind)
        ]
        found = None
        for option in fitting:  # only the options of the value's type: no message to build
            found = _check(value, option)
            if found is None:
                return None
        if found is not None and len(fitting) == 1:  # the detailed reason
            return found
        kinds = " or ".join(o.get("type", "a value") for o in options)
        return [], f"expected {kinds}, found {_found(value)}"
    kind, cls = schema.get("type"), type(value)
    if kind in ("integer", "number"):
        if cls is float and kind == "number":
            return None
        if cls is not int:
            text = "an integer" if kind == "integer" else "a number"
            return [], f"expected {text}, found {_found(value)}"
        if kind == "number" and abs(value) > _FLOAT_MAX:
            return [], f"expected a number within the float range, found {_found(value)}"
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            return [], f"expected an integer in [{low}, {high}], found {_found(value)}"
        return None
    if kind in _TYPES:
        expected, text = _TYPES[kind]
        if cls is not expected:
            return [], f"expected {text}, found {_found(value)}"
    if kind == "array":
        low, high = schema.get("minItems", 0), schema.get("maxItems", len(value))
        if not low <= len(value) <= high:
            count = str(low) if low == high else f"{low}-{high}"
            return [], f"expected {count} items, found {len(value)}"
        items = schema.get("items")
        if items is None or (items == _NUMBER and all(type(v) is float for v in value)):
            return None  # the common case, checked at C speed
        for i, item in enumerate(value):
            found = _check(item, items)
            if found is not None:
                found[0].append(i)
                return found
    elif kind == "object":
        properties = schema.get("properties", {})
        if _numbers_only(properties) and all(type(value.get(k, 0.0)) is float for k in properties):
            return None  # {x, y, z}: the common case, checked at C speed
        for key in schema.get("required", ()):
            if key not in value:
                return [], f"expected a field {key!r}, found none"
        for key, sub in properties.items():
            if key in value:
                found = _check(value[key], sub)
                if found is not None:
                    found[0].append(key)
                    return found
    return None
