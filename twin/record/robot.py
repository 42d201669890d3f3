"""``RecordingRobot``: any ``Robot`` recorded at the seam, every ``read`` and ``write``.

    with RecordingRobot(open_robot("sim", seed=1), "run.mcap", metadata=...) as robot:
        ...                       # the same Robot API; layers above add robot.event(...)

What is recorded (topics and schemas: ``twin.record.schemas``, ``docs/formats/recording.md``):

- ``/robot/state`` every ``read()``: joints, health, and the F/T and IMU samples that are new
  since the previous read (``null`` when none); an ``/events`` message ``robot/health`` when the
  health flags change;
- ``/robot/command`` every ``write()``, with ``accepted: false`` and the error when refused;
- ``/robot/call`` every call that changes what the robot does (``reset``, ``attach_payload``,
  ``detach_payload``, ``set_external_force``), with its arguments;
- ``/tf`` (every link, ``foxglove.FrameTransforms``) and ``/tcp`` (``foxglove.PoseInFrame``) from
  forward kinematics of the read joints, at ``tf_rate_hz`` of robot time.

Every twin message carries ``step``, the number of ``step()`` calls made before it: replay
(``twin.record.replay``) re-issues commands and calls at the same steps.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Any

import numpy as np

from twin import events
from twin.record.writer import McapWriter, _identity
from twin.robot import (
    COMMAND_FIELDS,
    ControlDiagnostics,
    FtSensorDevice,
    Health,
    JointCommand,
    Robot,
    RobotState,
    WrenchBatch,
)
from twin.spatial import quaternion as quat

#: Calls on a (sim) robot that change its physics; recorded so that replay can re-issue them.
RECORDED_CALLS = ("reset", "attach_payload", "detach_payload", "set_external_force")
#: Default rate of the ``/tf`` and ``/tcp`` channels (Hz of robot time).
DEFAULT_TF_RATE_HZ = 50.0


def _json_value(value: Any) -> Any:
    """``value`` as JSON-able values (arrays as lists, enums and other objects by name)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


class RecordingRobot(Robot):
    """Wraps ``robot``; records to ``recording`` (an ``McapWriter`` or a ``.mcap`` path, then
    owned and closed with this robot). ``metadata`` goes into a recording this robot creates
    (add ``backend``, ``robot_options`` so that it can be replayed); the URDF's SHA-256 and the
    control period are added. Every other attribute is the wrapped robot's."""

    def __init__(
        self,
        robot: Robot,
        recording: McapWriter | str | os.PathLike,
        *,
        metadata: dict[str, Any] | None = None,
        tf_rate_hz: float = DEFAULT_TF_RATE_HZ,
    ) -> None:
        self._inner = robot
        self.model = robot.model
        self.control_period_s = robot.control_period_s
        if isinstance(recording, McapWriter):
            self.recording, self._owns_recording = recording, False
        else:
            meta = {
                "urdf": self.model.urdf_path.name,
                "urdf_sha256": urdf_sha256(self.model.urdf_path),
                "control_period_s": robot.control_period_s,
                **(metadata or {}),
            }
            self.recording, self._owns_recording = McapWriter(recording, meta), True
        self._steps = 0
        self._t_us = 0
        self._health: Health | None = None
        self._wrench_t: int | None = None
        self._imu_t: int | None = None
        self._tf_period_us = round(1e6 / tf_rate_hz) if tf_rate_hz > 0 else None
        self._next_tf_us = 0
        self._links = self.model.tree.link_names
        self._root = self._links[0]

    # ------------------------------------------------------------------------ the seam
    def read(self) -> RobotState:
        state = self._inner.read()
        self._t_us = t = state.t_us
        w, imu = state.wrench, state.imu
        if w is not None:
            if w.t_us == self._wrench_t:
                w = None  # recorded with an earlier read
            else:
                self._wrench_t = w.t_us
        if imu is not None:
            if imu.t_us == self._imu_t:
                imu = None
            else:
                self._imu_t = imu.t_us
        # The state's arrays are read-only snapshots: the writer thread encodes them later.
        self.recording.add("/robot/state", t, _state_json, self._steps, state, w, imu)
        if state.health != self._health:
            if self._health is not None or state.health != Health.OK:
                self.event("robot", "health", flags=int(state.health), names=str(state.health))
            self._health = state.health
        if self._tf_period_us is not None and t >= self._next_tf_us:
            self._next_tf_us = t + self._tf_period_us
            self.recording.add("/tf", t, self._frames_json, t, state.q)
            self.recording.add("/tcp", t, self._tcp_json, t, state.q)
        return state

    def write(self, command: JointCommand) -> None:
        try:  # a copy: a caller may reuse its arrays for the next command
            rows = np.array([getattr(command, f) for f in COMMAND_FIELDS], dtype=float)
        except (TypeError, ValueError):
            rows = None  # not numbers: the robot's own check refuses it, recorded below
        try:
            self._inner.write(command)
        except ValueError as e:
            self.recording.add(
                "/robot/command", self._t_us, _command_json, self._steps, rows, str(e)
            )
            raise
        self.recording.add("/robot/command", self._t_us, _command_json, self._steps, rows, "")

    def _apply(self, command: JointCommand) -> None:  # write() is overridden: never reached
        self._inner.write(command)

    def step(self) -> None:
        self._inner.step()
        self._steps += 1

    # ------------------------------------------------------------------ what layers add
    def subscribe_layers(self) -> None:
        """Record what the layers above publish (``twin.events``) as ``/events``, until
        this robot is closed."""
        events.subscribe(self._on_layer)

    def _on_layer(self, source: str, kind: str, detail: dict[str, Any]) -> None:
        self.event(source, kind, **detail)

    def event(self, source: str, kind: str, **detail: Any) -> None:
        """Record what a layer above published (``source``: "controller", "planner", "ft",
        "shadow", ...; ``kind``: what happened), at the last read's robot time."""
        self.recording.add(
            "/events", self._t_us, event_message(self._steps, self._t_us, source, kind, detail)
        )

    def _frames_json(self, t_us: int, q: np.ndarray) -> dict:
        """The ``/tf`` message: every link in the root link's frame, from FK of ``q`` (6,) rad."""
        frames = self.model.tree.rotations_translations(q[None])
        stamp = {"sec": t_us // 1_000_000, "nsec": (t_us % 1_000_000) * 1000}
        transforms = []
        for link in self._links[1:]:
            r, p = frames[link]
            w, x, y, z = quat.from_matrix(r[0]).tolist()
            px, py, pz = p[0].tolist()
            transforms.append(
                {
                    "timestamp": stamp,
                    "parent_frame_id": self._root,
                    "child_frame_id": link,
                    "translation": {"x": px, "y": py, "z": pz},
                    "rotation": {"x": x, "y": y, "z": z, "w": w},
                }
            )
        return {"transforms": transforms}

    def _tcp_json(self, t_us: int, q: np.ndarray) -> dict:
        """The ``/tcp`` message: the TCP pose in the root link's frame, from FK of ``q``."""
        m = self.model.fk(q, "tcp")
        w, x, y, z = quat.from_matrix(m[:3, :3]).tolist()
        px, py, pz = m[:3, 3].tolist()
        return {
            "timestamp": {"sec": t_us // 1_000_000, "nsec": (t_us % 1_000_000) * 1000},
            "frame_id": self._root,
            "pose": {
                "position": {"x": px, "y": py, "z": pz},
                "orientation": {"x": x, "y": y, "z": z, "w": w},
            },
        }

    # ---------------------------------------------------------------- delegated parts
    @property
    def ft_device(self) -> FtSensorDevice | None:
        return self._inner.ft_device

    def diagnostics(self) -> ControlDiagnostics:
        return self._inner.diagnostics()

    def wrench_samples(self) -> WrenchBatch:
        """The wrapped robot's queue of F/T samples (every frame, for the F/T service's log)."""
        return self._inner.wrench_samples()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)  # raises AttributeError as the robot would
        if name in RECORDED_CALLS and callable(value):

            def recorded(*args: Any, **kwargs: Any) -> Any:
                self.recording.add(
                    "/robot/call",
                    self._t_us,
                    _identity,
                    {
                        "step": self._steps,
                        "call": name,
                        "args": {"args": _json_value(list(args)), **_json_value(kwargs)},
                    },
                )
                return value(*args, **kwargs)

            return recorded
        return value

    def close(self) -> None:
        """Close the wrapped robot, then the recording if this robot opened it."""
        events.unsubscribe(self._on_layer)
        try:
            self._inner.close()
        finally:
            if self._owns_recording:
                self.recording.close()

    def __enter__(self) -> RecordingRobot:
        return self


def event_message(step: int, t_us: int, source: str, kind: str, detail: dict) -> dict:
    """The ``/events`` message (``twin.Event``) of one published detail."""
    return {
        "step": step,
        "t_us": t_us,
        "source": source,
        "kind": kind,
        "detail": _json_value(detail),
    }


class LayerRecording:
    """What the layers publish (``twin.events``), recorded as ``/events`` to a ``.mcap`` file
    with ``metadata``, for a run with no robot to wrap (``twin plan``); closes the file with
    ``close()`` or the ``with`` block."""

    def __init__(self, path: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
        self.recording = McapWriter(path, metadata)
        events.subscribe(self._on_layer)

    def _on_layer(self, source: str, kind: str, detail: dict[str, Any]) -> None:
        t_us = int(detail.get("t_us", 0) or 0)
        self.recording.add("/events", t_us, event_message(0, t_us, source, kind, detail))

    def close(self) -> None:
        events.unsubscribe(self._on_layer)
        self.recording.close()

    def __enter__(self) -> LayerRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _state_json(step: int, state: RobotState, w, imu) -> str:
    wrench = (
        "null"
        if w is None
        else f'{{"t_us":{w.t_us},"wrench":{_floats(w.wrench)},"status":{int(w.status)},'
        f'"temperature_c":{float(w.temperature_c)}}}'
    )
    inertial = (
        "null"
        if imu is None
        else f'{{"t_us":{imu.t_us},"specific_force":{_floats(imu.specific_force)},'
        f'"angular_rate":{_floats(imu.angular_rate)}}}'
    )
    return (
        f'{{"step":{step},"t_us":{state.t_us},"q":{_floats(state.q)},"qd":{_floats(state.qd)},'
        f'"tau":{_floats(state.tau)},"health":{int(state.health)},"wrench":{wrench},'
        f'"imu":{inertial}}}'
    )


def _command_json(step: int, rows: np.ndarray | None, error: str) -> dict:
    fields = (
        dict.fromkeys(COMMAND_FIELDS)
        if rows is None
        else {f: row.tolist() for f, row in zip(COMMAND_FIELDS, rows)}
    )
    return {"step": step, **fields, "accepted": not error, "error": error}


def _floats(values: np.ndarray) -> str:
    """JSON text of a float array (the hot path: Python's list repr is JSON for finite floats;
    nan and inf, whose reprs are not, go through ``json.dumps``)."""
    text = str(values.tolist())
    return json.dumps(values.tolist()) if "n" in text else text


def urdf_sha256(path: os.PathLike) -> str:
    """SHA-256 of the URDF file: a replay refuses a recording made with another arm."""
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
