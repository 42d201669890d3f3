"""``TwinEnv``: a task and a robot wired into the Gymnasium API.

The robot comes from ``twin.backends.open_robot`` (the switch the CLI uses), so the same
environment runs on the PyBullet twin (``backend="sim"``) or on the real arm
(``backend="hardware", hardware_config=<path of the hardware TOML file>``). The precedence rule is
the CLI's: ``backend=``, then ``$TWIN_BACKEND``, then sim; ``hardware_config=``, then
``$TWIN_HARDWARE_CONFIG``.

Action: bounded joint-position deltas ``a`` (6,) in [-1, 1]; the joint target is
``q_des = clip(q + ACTION_SCALE_RAD * a, lower, upper)`` with ``q`` the joint positions just
observed, held by the robot's PD law (``twin.robot.joint_torque``) with the task's gains for
one policy period (``POLICY_RATE_HZ`` = 25 Hz, i.e. 40 ms). The exported ONNX policies compute
the same target (``pos = q + scale * tanh(mlp)``), so the controller's output is absolute.

Rendering: ``render_mode="rgb_array"`` returns ``RENDER_HEIGHT x RENDER_WIDTH x 3`` uint8 frames
(PyBullet TinyRenderer, headless, sim backend only); ``"human"`` opens the PyBullet GUI.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from twin.backends import BackendError, open_robot, resolve_options
from twin.env.tasks import DEFAULT_GAINS, PdGains
from twin.robot import JointCommand, Robot, RobotState
from twin.spatial import batch

#: Policy (action) rate of every environment, Hz.
POLICY_RATE_HZ = 25.0
#: Largest joint-target offset per action component (rad): a = +-1 sets q_des = q +- this.
ACTION_SCALE_RAD = 0.25
#: Size of ``rgb_array`` frames (pixels).
RENDER_WIDTH = 320
RENDER_HEIGHT = 240
#: Joint speed (fraction of each joint's velocity limit) used to move a hardware arm to the
#: start configuration on reset (a simulated arm is reset in place).
HARDWARE_RESET_SPEED_FRACTION = 0.25


class EnvConfigurationError(ValueError):
    """An environment argument is wrong; the message says what was expected."""


def tcp_pose7(model: Any, q: np.ndarray) -> np.ndarray:
    """TCP pose (7,) [px, py, pz, qw, qx, qy, qz] in the base (= world) frame, from FK."""
    return batch.pose7_from_matrices(np.asarray(model.fk(q, link="tcp")))


class TwinEnv(gym.Env):
    """Base environment: one robot, one task, actions as PD joint-target deltas.

    Subclasses set ``self.task`` (see ``twin/env/tasks.py``) in ``_make_task(model)``.
    """

    metadata: ClassVar[dict] = {
        "render_modes": ["rgb_array", "human"],
        "render_fps": int(POLICY_RATE_HZ),
    }

    def __init__(
        self,
        *,
        backend: str | None = None,
        hardware_config: str | None = None,
        render_mode: str | None = None,
        robot_options: dict | None = None,
        gains: PdGains = DEFAULT_GAINS,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise EnvConfigurationError(
                f"render_mode {render_mode!r} is not supported; expected None or one of "
                f"{self.metadata['render_modes']}"
            )
        self.render_mode = render_mode
        self.gains = gains
        self.backend, self._robot_options = self._backend_options(
            backend, hardware_config, robot_options
        )
        self.robot: Robot | None = open_robot(self.backend, **self._robot_options)
        try:
            if render_mode == "rgb_array" and not callable(getattr(self.robot, "render", None)):
                raise EnvConfigurationError(
                    f"render_mode 'rgb_array' needs a robot that renders (the sim backend); the "
                    f"{self.backend!r} backend's does not: use backend='sim' or render_mode=None"
                )
            self.model = self.robot.model
            self.task = self._make_task(self.model)
        except Exception:
            self.close()
            raise
        self._decimation = max(1, round(1.0 / (POLICY_RATE_HZ * self.robot.control_period_s)))
        n = self.task.observation_size
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32)
        self._state: RobotState | None = None
        self._tcp: np.ndarray | None = None

    # -- wiring ---------------------------------------------------------------------------
    def _make_task(self, model: Any) -> Any:
        raise NotImplementedError

    def _backend_options(
        self, backend: str | None, hardware_config: str | None, robot_options: dict | None
    ) -> tuple[str, dict]:
        """The backend and ``open_robot``'s keyword arguments: ``robot_options`` are sim
        options (ignored on hardware), ``hardware_config`` (else ``$TWIN_HARDWARE_CONFIG``) the
        hardware's."""
        try:
            chosen = resolve_options(
                backend,
                config=hardware_config,
                config_how="hardware_config=<path of the hardware TOML file>",
            )
        except BackendError as e:
            raise EnvConfigurationError(str(e)) from e
        sim_options = dict(robot_options or {})
        if self.render_mode == "human":
            sim_options["gui"] = True
        options: dict = {"sim_options": sim_options} if sim_options else {}
        if chosen["config"] is not None:
            options["config"] = chosen["config"]
        return chosen["backend"], options

    @property
    def policy_period_s(self) -> float:
        """Time one ``step`` advances (s): ``decimation`` control periods of the robot."""
        return self._decimation * self.robot.control_period_s

    def _observe(self) -> np.ndarray:
        self._state = self.robot.read()
        self._tcp = tcp_pose7(self.model, self._state.q)
        return self.task.observe(self._state, self._tcp)

    def _command(self, q_des: np.ndarray) -> JointCommand:
        return JointCommand(q_des=q_des, kp=self.gains.kp, kd=self.gains.kd)

    # -- Gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rng = self.np_random
        self.task.sample_goal(rng)
        q0 = self.task.initial_q(rng)
        self._reset_robot(q0)
        obs = self._observe()
        return obs, self.task.info(self._state, self._tcp)

    def _reset_robot(self, q0: np.ndarray) -> None:
        reset = getattr(self.robot, "reset", None)
        if callable(reset):
            reset(q=q0)
        else:
            self._move_to(q0)
        self.robot.write(self._command(q0))

    def _move_to(self, q_goal: np.ndarray) -> None:
        """Drive a robot without ``reset`` (hardware) to ``q_goal`` (6,) rad, slowly."""
        q_start = self.robot.read().q
        speed = HARDWARE_RESET_SPEED_FRACTION * np.asarray(self.model.velocity_limits)
        duration_s = float(np.max(np.abs(q_goal - q_start) / speed))
        n = max(1, int(np.ceil(duration_s / self.robot.control_period_s)))
        for k in range(1, n + 1):
            self.robot.write(self._command(q_start + (q_goal - q_start) * k / n))
            self.robot.step()

    def step(self, action):
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        a = np.clip(np.asarray(action, dtype=float).reshape(6), -1.0, 1.0)
        q_des = np.clip(self._state.q + ACTION_SCALE_RAD * a, self.model.lower, self.model.upper)
        self.robot.write(self._command(q_des))
        for _ in range(self._decimation):
            self.robot.step()
        obs = self._observe()
        reward = self.task.reward(self._state, self._tcp, a)
        terminated = self.task.terminated(self._state, self._tcp)
        info = self.task.info(self._state, self._tcp)
        return obs, reward, terminated, False, info

    def render(self):
        if self.render_mode != "rgb_array":
            return None  # "human": the GUI draws itself as the simulation steps
        render = getattr(self.robot, "render", None)
        if render is None:
            raise EnvConfigurationError(
                f"the {self.backend!r} backend's robot cannot render; rgb_array needs backend='sim'"
            )
        return render(RENDER_WIDTH, RENDER_HEIGHT)

    def close(self) -> None:
        if self.robot is not None:
            self.robot.close()
            self.robot = None
        super().close()
