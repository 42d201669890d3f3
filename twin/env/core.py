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
(PyBullet TinyRenderer, headless, sim backend only) with the task's goal drawn as a marker;
``"human"`` opens the PyBullet GUI. Without a display (Linux with neither ``DISPLAY`` nor
``WAYLAND_DISPLAY``) ``"human"`` falls back to ``"rgb_array"`` with a warning: the GUI would
otherwise end the process.

Observations are clipped into their (bounded) space, whose bounds are physical ranges the arm
does not leave in operation (``features.observation_bounds``). Domain randomisation:
``randomize=True`` (``twin/env/randomization.py``).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections import deque
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from twin.backends import BackendError, open_robot, resolve_options
from twin.env import randomization as dr
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


#: Observation terms that do not depend on the goal: the ``observation`` of the goal-conditioned
#: form (the goal terms would be stale in a transition relabelled with another goal).
GOAL_FREE_TERMS = ("joint_pos", "joint_vel", "tcp_pos", "tcp_quat", "gravity_offset", "wrench")


class EnvConfigurationError(ValueError):
    """An environment argument is wrong; the message says what was expected."""


def display_available() -> bool:
    """Whether a GUI window can open: always off Linux; on Linux, with an X or Wayland display."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def resolve_render_mode(render_mode: str | None) -> str | None:
    """``render_mode``, or ``"rgb_array"`` (with a warning) for ``"human"`` without a display."""
    if render_mode == "human" and not display_available():
        warnings.warn(
            "render_mode='human' needs a display (the PyBullet GUI) and none is set (DISPLAY, "
            "WAYLAND_DISPLAY); falling back to render_mode='rgb_array'",
            RuntimeWarning,
            stacklevel=3,
        )
        return "rgb_array"
    return render_mode


def move_to(robot: Robot, q_goal: np.ndarray, gains: PdGains = DEFAULT_GAINS) -> None:
    """Drive a robot without ``reset`` (hardware) to ``q_goal`` (6,) rad, slowly: a straight
    joint-space ramp at ``HARDWARE_RESET_SPEED_FRACTION`` of the velocity limits, PD ``gains``."""
    q_start = robot.read().q
    speed = HARDWARE_RESET_SPEED_FRACTION * np.asarray(robot.model.velocity_limits)
    duration_s = float(np.max(np.abs(q_goal - q_start) / speed))
    n = max(1, int(np.ceil(duration_s / robot.control_period_s)))
    for k in range(1, n + 1):
        q = q_start + (q_goal - q_start) * k / n
        robot.write(JointCommand(q_des=q, kp=gains.kp, kd=gains.kd))
        robot.step()


def tcp_pose7(model: Any, q: np.ndarray) -> np.ndarray:
    """TCP pose (7,) [px, py, pz, qw, qx, qy, qz] in the base (= world) frame, from FK."""
    return batch.pose7_from_matrices(np.asarray(model.fk(q, link="tcp")))


class TcpKinematics:
    """TCP pose (7,) [px, py, pz, qw, qx, qy, qz] world and geometric Jacobian (6, n) [v; w]
    (base frame) of a configuration ``q`` (n,) rad, from one evaluation of the TCP chain
    (``model.fk_jacobian``), kept for the last ``q``: a step's observation, model terms, reward
    and success check all ask about the same state. The arrays returned are read-only."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._key: bytes | None = None
        self._value: tuple[np.ndarray, np.ndarray] | None = None

    def __call__(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = np.asarray(q, dtype=float)
        key = q.tobytes()
        if key != self._key:
            matrix, jacobian = self.model.fk_jacobian(q, link="tcp")
            pose = batch.pose7_from_matrices(matrix)
            pose.flags.writeable = jacobian.flags.writeable = False
            self._key, self._value = key, (pose, jacobian)
        return self._value


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
        randomize: bool | dr.Randomization = False,
        goal_conditioned: bool = False,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise EnvConfigurationError(
                f"render_mode {render_mode!r} is not supported; expected None or one of "
                f"{self.metadata['render_modes']}"
            )
        render_mode = resolve_render_mode(render_mode)
        if randomize is True:
            randomize = dr.DEFAULT_RANDOMIZATION
        if randomize is not False and not isinstance(randomize, dr.Randomization):
            raise EnvConfigurationError(
                f"randomize must be True, False or a twin.env.randomization.Randomization; "
                f"got {randomize!r}"
            )
        self.randomization: dr.Randomization | None = randomize or None
        self._draw: dr.EpisodeDraw | None = None
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
            self.kinematics = TcpKinematics(self.model)
            self.task = self._make_task(self.model)
        except Exception:
            self.close()
            raise
        self._decimation = max(1, round(1.0 / (POLICY_RATE_HZ * self.robot.control_period_s)))
        low, high = self.task.observation_bounds()
        self._low, self._high = low.astype(np.float32), high.astype(np.float32)
        self.observation_space = gym.spaces.Box(self._low, self._high, dtype=np.float32)
        g_low, g_high = self.task.goal_bounds()
        self._goal_low, self._goal_high = g_low.astype(np.float32), g_high.astype(np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32)
        self._state: RobotState | None = None
        self._tcp: np.ndarray | None = None
        self._history: deque[RobotState] = deque(maxlen=1)
        self.goal_conditioned = goal_conditioned
        if goal_conditioned:
            self._goal_spaces()
            # only the goal forms have it: Stable-Baselines3 takes any env with a
            # ``compute_reward`` for a goal env (its ``check_env``, ``HerReplayBuffer``)
            self.compute_reward = self._compute_reward

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

    def _read(self) -> RobotState:
        """The state the task sees: the robot's, delayed and perturbed by the episode's draw."""
        state = self.robot.read()
        if self._draw is None:
            return state
        self._history.append(state)
        return dr.perturb(self._history[0], self._draw, self.np_random)

    def _observe(self) -> np.ndarray:
        self._state = self._read()
        self._tcp = self.kinematics(self._state.q)[0]
        obs = self.task.observe(self._state, self._tcp)
        return np.clip(obs, self._low, self._high, out=obs)

    def _command(self, q_des: np.ndarray) -> JointCommand:
        return JointCommand(q_des=q_des, kp=self.gains.kp, kd=self.gains.kd)

    # -- Gymnasium API --------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rng = self.np_random
        goal = self.task.sample_goal(rng)
        q0 = self.task.initial_q(rng)
        if self.randomization is not None:
            self._draw = dr.draw(self.randomization, rng)
            self._history = deque(maxlen=self._draw.observation_delay_periods + 1)
            dr.apply_physics(self.robot, self._draw)  # before the reset: a payload is re-welded
        self._reset_robot(q0)
        marker = getattr(self.robot, "set_marker", None)
        if self.render_mode is not None and callable(marker):
            marker("goal", goal, radius=0.025, color=(0.9, 0.1, 0.1, 1.0))
        obs = self._observe()
        info = self.task.info(self._state, self._tcp)
        info["effort_penalty"] = 0.0
        return self._output(obs), info

    def _reset_robot(self, q0: np.ndarray) -> None:
        reset = getattr(self.robot, "reset", None)
        if callable(reset):
            reset(q=q0)
        else:
            self._move_to(q0)
        self.robot.write(self._command(q0))

    def _move_to(self, q_goal: np.ndarray) -> None:
        move_to(self.robot, q_goal, self.gains)

    def step(self, action):
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        a = np.clip(np.asarray(action, dtype=float).reshape(6), -1.0, 1.0)
        q_des = np.clip(self._state.q + ACTION_SCALE_RAD * a, self.model.lower, self.model.upper)
        command = self._command(q_des)
        latency = 0 if self._draw is None else self._draw.actuation_latency_periods
        for k in range(self._decimation):
            if k == min(latency, self._decimation - 1):
                self.robot.write(command)
            self.robot.step()
            if self._draw is not None and k < self._decimation - 1:
                self._history.append(self.robot.read())
        obs = self._observe()
        info = self.task.info(self._state, self._tcp)
        info["effort_penalty"] = self.task.effort_penalty(self._state, a)
        terminated = self.task.terminated(self._state, self._tcp)
        # both forms: the reward of the goals as the goal form observes them, as HER relabels
        reward = float(self.task.compute_reward(*self._goals(), info))
        return self._output(obs), reward, terminated, False, info

    # -- goal-conditioned form ------------------------------------------------------------
    def _goal_spaces(self) -> None:
        """``goal_conditioned=True``: a ``Dict`` observation (``observation``: the terms that do
        not depend on the goal, ``achieved_goal``, ``desired_goal``), the convention of HER
        replay buffers (SB3's ``HerReplayBuffer``, panda-gym)."""
        names = np.concatenate([[n] * size for n, size, _ in self.task.layout])
        self._free = np.isin(names, GOAL_FREE_TERMS)
        goal = gym.spaces.Box(self._goal_low, self._goal_high)
        self.observation_space = gym.spaces.Dict(
            {
                "observation": gym.spaces.Box(self._low[self._free], self._high[self._free]),
                "achieved_goal": goal,
                "desired_goal": goal,
            }
        )

    def _goals(self) -> tuple[np.ndarray, np.ndarray]:
        """The achieved and desired goals (g,) float32 as observed: clipped to the goal
        bounds, then rounded to float32 (``task.goal_bounds`` says their units and frame)."""
        low, high = self._goal_low, self._goal_high
        achieved = self.task.achieved_goal(self._state, self._tcp)
        desired = self.task.desired_goal()
        return (
            np.clip(achieved, low, high).astype(np.float32),
            np.clip(desired, low, high).astype(np.float32),
        )

    def _output(self, obs: np.ndarray):
        if not self.goal_conditioned:
            return obs
        achieved, desired = self._goals()
        return {"observation": obs[self._free], "achieved_goal": achieved, "desired_goal": desired}

    def _compute_reward(self, achieved_goal, desired_goal, info) -> np.ndarray:
        """``env.compute_reward`` of the goal forms: the reward of goals (..., g)
        ``achieved_goal`` and ``desired_goal``, with the ``effort_penalty`` of ``info`` (one dict
        or an array of them), vectorised. The step reward (of either form) is this function of
        the step's observed (float32) goals, bit for bit; a batch gives each pair's reward bit
        for bit."""
        return np.asarray(self.task.compute_reward(achieved_goal, desired_goal, info), float)

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
