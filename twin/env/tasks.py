"""Tasks of the environments: goal sampling, observation, reward and success.

A task never sees the robot (docs/style.md #2): it gets the arm model (limits, FK), a random
generator from the environment's ``reset(seed=...)``, and per step the robot state and the TCP
pose. The environment (``twin/env/core.py``) wires a task and a robot into the Gymnasium API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from twin.env import features
from twin.robot import RobotState

#: Nominal start configuration of Reach and Press episodes (6,) rad: elbow up, the tool pointing
#: forward and down, TCP about 0.5 m in front of the base at 0.31 m height.
START_Q = np.array([0.0, 0.3, 1.2, 0.0, 1.1, 0.0])
#: Joint-space half-widths (rad) around the start configuration in which Reach targets are
#: sampled (FK of a uniformly drawn in-limit configuration), joints 1..6.
REACH_SAMPLE_HALF_WIDTH_RAD = np.array([1.0, 0.45, 0.55, 1.0, 0.7, 1.0])
#: Half-width (rad) of the random perturbation of the start configuration at each reset.
START_NOISE_RAD = 0.05
#: Lowest TCP height (m, world z) of a Reach target: well clear of the floor and the base.
REACH_MIN_TCP_Z_M = 0.15
#: Lowest radial distance (m) of a Reach target from the base axis (keeps clear of the column).
REACH_MIN_RADIUS_M = 0.15
#: Success tolerances of Reach (issue 9).
REACH_POS_TOL_M = 0.02
REACH_ROT_TOL_RAD = 0.1


@dataclass(frozen=True)
class PdGains:
    """PD gains of the joint-target action: kp (6,) N m/rad, kd (6,) N m s/rad."""

    kp: np.ndarray
    kd: np.ndarray


#: Gains the environments and the exported policies use (the ``stiffness`` and ``damping``
#: of the ONNX metadata). Tuned on the shipped arm: settles a 0.1 rad step in ~0.2 s without
#: overshoot, within the effort limits.
DEFAULT_GAINS = PdGains(
    kp=np.array([60.0, 120.0, 60.0, 12.0, 12.0, 8.0]),
    kd=np.array([3.0, 6.0, 3.0, 0.3, 0.3, 0.2]),
)


def pose_error(tcp_pose: np.ndarray, target_pose: np.ndarray) -> tuple[float, float]:
    """Position error (m) and rotation angle (rad, 2 atan2) between two (7,) poses."""
    dp, ang = pose_errors(tcp_pose, target_pose)
    return float(dp), float(ang)


def pose_errors(achieved: np.ndarray, desired: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position errors (...,) m and rotation angles (...,) rad (``2 atan2(|v|, |w|)`` of the
    relative quaternion) of poses (..., 7) (and more columns, ignored) [px, py, pz, qw, qx, qy,
    qz]: the batched ``pose_error``.

    Bit for bit the same numbers for one pair and for any batch holding it (so a relabelled
    reward equals the step reward exactly): the same IEEE operations in the same order as
    ``_pose_errors_one``, and ``math.atan2`` per element (numpy's SIMD ``arctan2`` differs from
    libm's in the last bit).
    """
    a, d = np.asarray(achieved, float), np.asarray(desired, float)
    if a.ndim == 1 and d.ndim == 1:  # one pair (every env step): plain floats
        return _pose_errors_one(a.tolist(), d.tolist())
    a, d = np.broadcast_arrays(a, d)
    dx, dy, dz = (d[..., k] - a[..., k] for k in range(3))
    dp = np.sqrt(dx * dx + dy * dy + dz * dz)
    w, v = _relative_w_v(
        a[..., 3], a[..., 4], a[..., 5], a[..., 6], *np.moveaxis(d[..., 3:7], -1, 0)
    )
    angle = [2.0 * math.atan2(s, abs(c)) for s, c in zip(v.ravel().tolist(), w.ravel().tolist())]
    return dp, np.array(angle, dtype=float).reshape(np.shape(w))


def _relative_w_v(w1, x1, y1, z1, w2, x2, y2, z2):
    """``w`` and ``|v|`` of ``conj(q1) q2`` (not renormalised: the atan2 ratio is scale-free),
    of floats or arrays alike."""
    w = w1 * w2 + x1 * x2 + y1 * y2 + z1 * z2
    x = w1 * x2 - x1 * w2 - y1 * z2 + z1 * y2
    y = w1 * y2 + x1 * z2 - y1 * w2 - z1 * x2
    z = w1 * z2 - x1 * y2 + y1 * x2 - z1 * w2
    v2 = x * x + y * y + z * z
    return w, (np.sqrt(v2) if isinstance(v2, np.ndarray) else math.sqrt(v2))


def _pose_errors_one(a: list[float], d: list[float]) -> tuple[float, float]:
    """``pose_errors`` of one pair of poses (lists of 7 or more floats), the same operations as
    the batched path in plain floats."""
    dx, dy, dz = d[0] - a[0], d[1] - a[1], d[2] - a[2]
    dp = math.sqrt(dx * dx + dy * dy + dz * dz)
    w, v = _relative_w_v(*a[3:7], *d[3:7])
    return dp, 2.0 * math.atan2(v, abs(w))


def info_values(info, key: str) -> np.ndarray | float:
    """``info[key]`` of one info dict, or the array of it over a sequence of info dicts (what
    HER replay buffers pass to ``compute_reward``); 0 without info."""
    if info is None:
        return 0.0
    if isinstance(info, dict):
        return float(info.get(key, 0.0))
    return np.array([float(i.get(key, 0.0)) for i in np.ravel(info)]).reshape(np.shape(info))


def reach_reward(achieved: np.ndarray, desired: np.ndarray, info=None) -> np.ndarray:
    """Reach reward (...,) of TCP poses ``achieved`` and targets ``desired`` (..., 7):
    ``-(2 d + 0.5 angle) + 1 [success] - info["effort_penalty"]`` (see ``ReachTask.reward``)."""
    d, ang = pose_errors(achieved, desired)
    success = (d <= REACH_POS_TOL_M) & (ang <= REACH_ROT_TOL_RAD)
    return -(2.0 * d + 0.5 * ang) + success - info_values(info, "effort_penalty")


def press_reward(achieved: np.ndarray, desired: np.ndarray, info=None) -> np.ndarray:
    """Press reward (...,) of ``achieved`` = [TCP pose (7), pushed force N] and ``desired`` =
    [contact pose (7), target force N] (..., 8):
    ``-2 d - 0.5 angle - min(|F - F*| / F*, 2) + 1 [in band] - info["effort_penalty"]``."""
    a, g = np.asarray(achieved, float), np.asarray(desired, float)
    d, ang = pose_errors(a, g)
    rel = np.abs(a[..., 7] - g[..., 7]) / g[..., 7]
    in_band = rel <= PRESS_FORCE_TOL
    return (
        -2.0 * d - 0.5 * ang - np.minimum(rel, 2.0) + in_band - info_values(info, "effort_penalty")
    )


class _Bounds:
    """The spaces' bounds of a task with ``layout``, ``lower``/``upper`` joint limits (rad)."""

    GOAL_HAS_FORCE = False

    def observation_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return features.observation_bounds(self.layout, self.lower, self.upper)

    def goal_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return features.goal_bounds(with_force=self.GOAL_HAS_FORCE)


@dataclass
class ReachTask(_Bounds):
    """Move the TCP to a sampled target pose (position and orientation).

    ``fk(q) -> (7,)`` pose of the TCP in the world [px, py, pz, qw, qx, qy, qz];
    ``lower``/``upper`` (6,) rad joint limits; ``start_q`` (6,) rad the nominal start.
    """

    fk: object
    lower: np.ndarray
    upper: np.ndarray
    start_q: np.ndarray = field(default_factory=lambda: START_Q.copy())
    target_pose: np.ndarray = field(default_factory=lambda: np.array([0, 0, 0, 1.0, 0, 0, 0]))
    #: ``model_terms(q) -> (jacobian (6, 6), gravity_offset (6,) rad)``; when set, the
    #: observation has the model-based terms (``features.REACH_MODEL_TERMS``).
    model_terms: object = None

    @property
    def observation_size(self) -> int:
        return sum(size for _, size, _ in features.reach_layout(self.model_terms is not None))

    def initial_q(self, rng: np.random.Generator) -> np.ndarray:
        """The start configuration of an episode: (6,) rad, nominal plus small noise."""
        noise = rng.uniform(-START_NOISE_RAD, START_NOISE_RAD, size=6)
        return np.clip(self.start_q + noise, self.lower, self.upper)

    def sample_goal(self, rng: np.random.Generator) -> np.ndarray:
        """Draw a reachable target: FK of a random in-limit configuration; (7,) world pose."""
        lo = np.maximum(self.start_q - REACH_SAMPLE_HALF_WIDTH_RAD, self.lower)
        hi = np.minimum(self.start_q + REACH_SAMPLE_HALF_WIDTH_RAD, self.upper)
        while True:  # acceptance is high (> 70 %), so this ends after a few draws
            pose = np.asarray(self.fk(rng.uniform(lo, hi)), dtype=float)
            if pose[2] >= REACH_MIN_TCP_Z_M and np.hypot(pose[0], pose[1]) >= REACH_MIN_RADIUS_M:
                self.target_pose = pose
                return pose

    @property
    def layout(self) -> tuple[tuple[str, int, float], ...]:
        return features.reach_layout(self.model_terms is not None)

    def observe(self, state: RobotState, tcp_pose: np.ndarray) -> np.ndarray:
        terms = None if self.model_terms is None else self.model_terms(state.q)
        return features.reach_observation(state.q, state.qd, tcp_pose, self.target_pose, terms)

    def errors(self, tcp_pose: np.ndarray) -> tuple[float, float]:
        return pose_error(tcp_pose, self.target_pose)

    def achieved_goal(self, state: RobotState, tcp_pose: np.ndarray) -> np.ndarray:
        """The TCP pose (7,) world."""
        return np.asarray(tcp_pose, float)

    def desired_goal(self) -> np.ndarray:
        """The target pose (7,) world."""
        return self.target_pose

    @staticmethod
    def effort_penalty(state: RobotState, action: np.ndarray) -> float:
        """``0.01 |a|^2 + 0.005 |qd|^2``: the part of the reward that is not the goal's."""
        return 0.01 * float(np.dot(action, action)) + 0.005 * float(np.dot(state.qd, state.qd))

    compute_reward = staticmethod(reach_reward)

    def reward(
        self, state: RobotState, tcp_pose: np.ndarray, action: np.ndarray, info: dict | None = None
    ) -> float:
        """Dense: ``-(2 d + 0.5 angle) + 1 [success] - 0.01 |a|^2 - 0.005 |qd|^2``."""
        info = {"effort_penalty": self.effort_penalty(state, action)} if info is None else info
        return float(reach_reward(tcp_pose, self.target_pose, info))

    def is_success(self, tcp_pose: np.ndarray) -> bool:
        d, ang = self.errors(tcp_pose)
        return d <= REACH_POS_TOL_M and ang <= REACH_ROT_TOL_RAD

    def terminated(self, state: RobotState, tcp_pose: np.ndarray) -> bool:
        return False

    def info(self, state: RobotState, tcp_pose: np.ndarray) -> dict:
        d, ang = self.errors(tcp_pose)
        return {
            "is_success": self.is_success(tcp_pose),
            "position_error_m": d,
            "rotation_error_rad": ang,
        }


#: Press: region of the table (world x, y ranges, m) where the contact point is drawn; clear of
#: the objects of the shipped ``table`` scene.
PRESS_REGION_XY_M = ((0.34, 0.46), (-0.06, 0.06))
#: Press: target normal force range (N).
PRESS_FORCE_RANGE_N = (5.0, 15.0)
#: Press: start height of the TCP above the surface (m), tool pointing down.
PRESS_START_HEIGHT_M = 0.05
#: Press: relative force tolerance and how long the force must stay within it (s).
PRESS_FORCE_TOL = 0.10
PRESS_HOLD_S = 1.0
#: Tool pointing down (TCP z axis along world -z): a half turn about world y, [w, x, y, z].
TOOL_DOWN_QUAT = np.array([0.0, 0.0, 1.0, 0.0])


@dataclass
class PressTask(_Bounds):
    """Bring the tool onto the table surface and hold a target normal force.

    ``fk(q) -> (7,)`` TCP pose (world); ``ik(pose7, q_ref) -> (6,) | None``; ``surface_z_m`` the
    height of the table top (world z, m); ``policy_period_s`` the time between two ``observe``
    calls (s), used to time the hold. The force is the F/T reading minus the reading taken by
    ``tare`` (tool in free air), pushed = ``-fz`` in the sensor frame (the table pushes the
    tool back along its -z axis).
    """

    fk: object
    ik: object
    lower: np.ndarray
    upper: np.ndarray
    surface_z_m: float
    policy_period_s: float
    target_pose: np.ndarray = field(default_factory=lambda: np.array([0, 0, 0, 1.0, 0, 0, 0]))
    target_force_n: float = 10.0
    observation_size: int = features.PRESS_OBS_SIZE

    def __post_init__(self) -> None:
        self._bias = np.zeros(6)
        self._wrench = np.zeros(6)
        self._in_band_s = 0.0
        self._start_q = START_Q.copy()

    def sample_goal(self, rng: np.random.Generator) -> np.ndarray:
        """Contact pose (7,) on the surface, tool down; target force; the start above it."""
        (x0, x1), (y0, y1) = PRESS_REGION_XY_M
        xy = rng.uniform((x0, y0), (x1, y1))
        self.target_pose = np.concatenate((xy, [self.surface_z_m], TOOL_DOWN_QUAT))
        self.target_force_n = float(rng.uniform(*PRESS_FORCE_RANGE_N))
        above = self.target_pose.copy()
        above[2] += PRESS_START_HEIGHT_M
        q = self.ik(above, START_Q)
        if q is None:  # the region is chosen inside the workspace: this is a model error
            raise RuntimeError(f"no IK solution above the press target {above}")
        self._start_q = np.asarray(q, dtype=float)
        self._in_band_s = 0.0
        return self.target_pose

    @property
    def start_q(self) -> np.ndarray:
        """(6,) rad: the start above the contact point of the last ``sample_goal``, no noise."""
        return self._start_q.copy()

    def initial_q(self, rng: np.random.Generator) -> np.ndarray:
        """The start above the contact point (after ``sample_goal``), plus small noise."""
        noise = rng.uniform(-START_NOISE_RAD, START_NOISE_RAD, size=6) * 0.2
        return np.clip(self._start_q + noise, self.lower, self.upper)

    def tare(self, wrench: np.ndarray | None) -> None:
        """Take the current F/T reading (6,) as the zero (tool in free air)."""
        self._bias = np.zeros(6) if wrench is None else np.asarray(wrench, dtype=float).copy()

    def _update_force(self, state: RobotState) -> float:
        raw = np.zeros(6) if state.wrench is None else np.asarray(state.wrench.wrench, float)
        self._wrench = raw - self._bias
        return float(-self._wrench[2])

    def pushed_force_n(self) -> float:
        return float(-self._wrench[2])

    def observe(self, state: RobotState, tcp_pose: np.ndarray) -> np.ndarray:
        force = self._update_force(state)
        if abs(force - self.target_force_n) <= PRESS_FORCE_TOL * self.target_force_n:
            self._in_band_s += self.policy_period_s
        else:
            self._in_band_s = 0.0
        return features.press_observation(
            state.q, state.qd, tcp_pose, self.target_pose, self._wrench, self.target_force_n
        )

    layout = features.PRESS_TERMS

    GOAL_HAS_FORCE = True

    def achieved_goal(self, state: RobotState, tcp_pose: np.ndarray) -> np.ndarray:
        """[TCP pose (7,) world, pushed force N] (8,)."""
        return np.append(np.asarray(tcp_pose, float), self.pushed_force_n())

    def desired_goal(self) -> np.ndarray:
        """[contact pose (7,) world, target force N] (8,)."""
        return np.append(self.target_pose, self.target_force_n)

    @staticmethod
    def effort_penalty(state: RobotState, action: np.ndarray) -> float:
        """``0.01 |a|^2``: the part of the reward that is not the goal's."""
        return 0.01 * float(np.dot(action, action))

    compute_reward = staticmethod(press_reward)

    def reward(
        self, state: RobotState, tcp_pose: np.ndarray, action: np.ndarray, info: dict | None = None
    ) -> float:
        """``-2 d - 0.5 angle - min(|F - F*| / F*, 2) + 1 [in band] - 0.01 |a|^2``."""
        info = {"effort_penalty": self.effort_penalty(state, action)} if info is None else info
        return float(press_reward(self.achieved_goal(state, tcp_pose), self.desired_goal(), info))

    def is_success(self, tcp_pose: np.ndarray) -> bool:
        return self._in_band_s >= PRESS_HOLD_S - 1e-9

    def terminated(self, state: RobotState, tcp_pose: np.ndarray) -> bool:
        return self.is_success(tcp_pose)

    def info(self, state: RobotState, tcp_pose: np.ndarray) -> dict:
        d, ang = pose_error(tcp_pose, self.target_pose)
        return {
            "is_success": self.is_success(tcp_pose),
            "force_n": self.pushed_force_n(),
            "target_force_n": self.target_force_n,
            "time_in_band_s": self._in_band_s,
            "position_error_m": d,
            "rotation_error_rad": ang,
        }
