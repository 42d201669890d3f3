"""``TraceRecorder``: a ``Robot`` that forwards to another one and keeps every control cycle.

It sits between a program and any backend (it only uses the robot interface), so the same
trace comes out of the sim and the serial hardware. Per cycle (after each ``step``) it keeps:

- ``t_us`` (int, robot time), ``phase`` (the label the program set with ``phase = ...``);
- ``q`` (6,) rad measured, ``q_des`` (6,) rad of the command in force (nan before the first);
- ``wrench`` (6,) ``[fx, fy, fz, tx, ty, tz]`` N, N m, sensor frame, raw (nan without a sample);
- ``specific_force`` (3,) m/s^2 and ``angular_rate`` (3,) rad/s, IMU frame (nan without one);
- the values of channels (``add_channel``): named callables of the ``RobotState`` returning a
  (k,) array (e.g. an F/T service's tared wrench in a world-aligned frame), called every
  ``every``-th cycle; nan on the other cycles and where they return None.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from twin.robot import ControlDiagnostics, FtSensorDevice, JointCommand, Robot, RobotState

Channel = Callable[[RobotState], "np.ndarray | None"]


class TraceRecorder(Robot):
    """Forwards ``read``/``write``/``step`` to ``robot`` and records each cycle (module doc)."""

    def __init__(self, robot: Robot):
        self.robot = robot
        self.model = robot.model
        self.control_period_s = robot.control_period_s
        self.phase = ""
        self._channels: dict[str, tuple[int, Channel, int]] = {}
        self._command: JointCommand | None = None
        self._state = robot.read()
        names = ("t_us", "phase", "q", "q_des", "wrench", "specific_force", "angular_rate")
        self._rows: dict[str, list] = {k: [] for k in names}

    def add_channel(self, name: str, size: int, fn: Channel, every: int = 1) -> None:
        """Record ``fn(state)`` (size,) every ``every``-th cycle from the next one on."""
        self._channels[name] = (size, fn, max(1, int(every)))
        self._rows[name] = [np.full(size, np.nan)] * len(self._rows["t_us"])

    # ------------------------------------------------------------------ Robot API
    def read(self) -> RobotState:
        """The state read after the last ``step`` (or at construction)."""
        return self._state

    def write(self, command: JointCommand) -> None:
        """Forward ``command`` (the wrapped robot validates it) and keep it for the trace."""
        self.robot.write(command)
        self._command = command

    def _apply(self, command: JointCommand) -> None:  # not reached: ``write`` forwards
        self.robot.write(command)

    def step(self) -> None:
        self.robot.step()
        state = self._state = self.robot.read()
        rows = self._rows
        rows["t_us"].append(int(state.t_us))
        rows["phase"].append(self.phase)
        rows["q"].append(np.array(state.q, dtype=float))
        q_des = self._command.q_des if self._command is not None else np.full(6, np.nan)
        rows["q_des"].append(np.array(q_des, dtype=float))
        w = state.wrench
        rows["wrench"].append(np.full(6, np.nan) if w is None else np.array(w.wrench, float))
        imu = state.imu
        rows["specific_force"].append(
            np.full(3, np.nan) if imu is None else np.array(imu.specific_force, float)
        )
        rows["angular_rate"].append(
            np.full(3, np.nan) if imu is None else np.array(imu.angular_rate, float)
        )
        k = len(rows["t_us"])
        for name, (size, fn, every) in self._channels.items():
            value = fn(state) if k % every == 0 else None
            rows[name].append(np.full(size, np.nan) if value is None else np.asarray(value, float))

    @property
    def ft_device(self) -> FtSensorDevice | None:
        return self.robot.ft_device

    def diagnostics(self) -> ControlDiagnostics:
        return self.robot.diagnostics()

    def close(self) -> None:
        """Closes nothing: the wrapped robot belongs to whoever opened it."""

    # ------------------------------------------------------------------ the trace
    def __len__(self) -> int:
        return len(self._rows["t_us"])

    def arrays(self) -> dict[str, np.ndarray]:
        """The trace: ``t_s`` (K,) s from the first cycle, ``phase`` (K,) str and every
        recorded row stacked, e.g. ``q`` (K, 6) rad (module doc)."""
        rows = self._rows
        t = np.array(rows["t_us"], dtype=np.int64)
        out = {"t_s": (t - (t[0] if len(t) else 0)) * 1e-6, "phase": np.array(rows["phase"])}
        for name, values in rows.items():
            if name not in ("t_us", "phase"):
                out[name] = np.array(values, dtype=float).reshape(len(t), -1)
        return out
