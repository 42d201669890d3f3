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
_VEC3 = {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3}
_STEP = {"type": "integer", "description": "step() calls made before this message"}
_T_US = {"type": "integer", "description": "robot time, microseconds"}
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
        q_des=_VEC6,
        qd_des=_VEC6,
        tau_ff=_VEC6,
        kp=_VEC6,
        kd=_VEC6,
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
