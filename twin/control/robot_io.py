"""``RobotStateAdapter``: the controller's state interface on any ``twin.robot.Robot``.

Written once against the robot interface, so the controller runs unchanged on the sim and the
hardware backend (and on test robots). Per cycle it takes one ``robot.read()`` snapshot
(``begin_cycle``) and sends one ``JointCommand`` with ``robot.write`` (``end_cycle``). The
command is one object built at construction whose fields are the rows of the staging array
(``Robot.write`` validates into its own copy, so reusing it costs no per-cycle allocation).

What it serves, for this fixed-base arm:

* joints: ``q`` (rad), ``qd`` (rad/s), ``tau`` (N m) of ``RobotState``, mapped by name to
  ``robot.model.joint_names``; joint targets become ``JointCommand(q_des=pos, qd_des=vel,
  tau_ff=effort, kp=stiffness, kd=damping)`` in the robot's joint order.
* base: fixed at the world origin (identity pose, zero velocity); world = base frame.
* bodies: any link of ``robot.model``: pose from ``model.fk(q, link)``, velocities from
  ``model.jacobian(q, link) @ qd`` rotated into the body frame, from one evaluation per link
  and cycle of the model's generated single-configuration code (``model.chain(link)``); a
  non-finite joint reading makes these inputs unavailable (a failed cycle), not an exception.
* IMU ``imu`` (the IMU link): angular rate measured (``RobotState.imu``); orientation measured
  when the sample has one, else from forward kinematics; linear velocity from kinematics (an
  IMU does not measure it).
* no SE(2) velocity sink, height scanner or camera: their ``init`` fails with a message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from operator import attrgetter

import numpy as np

from twin.control.errors import ComponentInitError
from twin.control.interfaces import (
    BaseInfo,
    BodyInfo,
    ImuInfo,
    JointGroupInfo,
    JointInfo,
    RobotStateInterface,
)
from twin.robot import Health, JointCommand, Robot, RobotState
from twin.spatial import quaternion

__all__ = ["RobotStateAdapter"]

_ZERO3 = np.zeros(3)
_IDENTITY_Q = np.array([1.0, 0.0, 0.0, 0.0])
for _a in (_ZERO3, _IDENTITY_Q):
    _a.flags.writeable = False
#: Health flags that make a snapshot unusable for control.
BAD_HEALTH = Health.DISCONNECTED | Health.JOINTS_STALE
_Q_DES, _QD_DES, _TAU_FF, _KP, _KD = range(5)
#: The joint index of a group that is all of the robot's joints in order.
_ALL = slice(None)


class RobotStateAdapter(RobotStateInterface):
    """The state interface on ``robot``; see the module docstring.

    articulation: the articulation name policies use for this arm, or ``None`` to accept any
    (the robot has one articulation). imus: IMU name -> IMU link. hold_kp/hold_kd: (n,) gains
    that hold joints no joint-target output commands at the position measured at ``init``;
    without them such joints are an init error.
    """

    def __init__(
        self,
        robot: Robot,
        articulation: str | None = None,
        imus: Mapping[str, str] | None = None,
        hold_kp: np.ndarray | None = None,
        hold_kd: np.ndarray | None = None,
    ) -> None:
        self.robot = robot
        self.model = robot.model
        self.articulation = articulation
        self.imus = dict(imus) if imus is not None else {"imu": "imu"}
        self._index = {name: i for i, name in enumerate(self.model.joint_names)}
        n = len(self.model.joint_names)
        self._hold = (
            None if hold_kp is None else (np.asarray(hold_kp, float), np.asarray(hold_kd, float))
        )
        self._pending = np.zeros((5, n))
        self._last_sent = self._pending.copy()
        self._command = JointCommand.from_rows(self._pending)  # fields: the staging rows
        self._commanded = np.zeros(n, dtype=bool)
        self._dirty = False
        self._groups: dict[int, tuple[JointGroupInfo, np.ndarray | slice]] = {}
        self._state: RobotState | None = None
        self._cycle = 0
        self._kin_cache: dict[str, list] = {}  # link -> this cycle's kinematics (_kinematics)
        self._twist_links: set[str] = set()  # links whose velocities some input reads
        #: The reason of the last refused read or write, else ``None``.
        self.last_error: str | None = None

    # ------------------------------------------------------------------ checks
    def _check_articulation(self, name: str) -> None:
        if self.articulation is not None and name != self.articulation:
            raise ComponentInitError(
                f"articulation {name!r} is not this robot's; it serves articulation {self.articulation!r}"
            )

    def _joint(self, info: JointInfo) -> int:
        self._check_articulation(info.articulation_name)
        index = self._index.get(info.joint_name)
        if index is None:
            raise ComponentInitError(
                f"unknown joint {info.joint_name!r}; the robot's joints are {self.model.joint_names}"
            )
        return index

    def _group(self, group: JointGroupInfo) -> np.ndarray | slice:
        """Robot indices of the group's joints: a slice when they are all joints in robot order.

        Cached by object identity (components keep their group record), checked by ``is``.
        """
        entry = self._groups.get(id(group))
        if entry is None or entry[0] is not group:
            index = np.array([self._joint(j) for j in group.joints()], dtype=np.intp)
            if np.array_equal(index, np.arange(len(self._index))):
                index = _ALL
            entry = (group, index)
            self._groups[id(group)] = entry
        return entry[1]

    def _link(self, articulation: str, link: str) -> None:
        self._check_articulation(articulation)
        if link not in self.model.link_names:
            raise ComponentInitError(
                f"unknown body {link!r}; the robot's links are {self.model.link_names}"
            )

    def _imu_link(self, info: ImuInfo) -> str:
        link = self.imus.get(info.imu_name)
        if link is None:
            raise ComponentInitError(
                f"unknown IMU {info.imu_name!r}; this robot has IMU(s) {tuple(self.imus)}"
            )
        if link not in self.model.link_names:
            raise ComponentInitError(
                f"IMU {info.imu_name!r} is on link {link!r}, which the robot model lacks"
            )
        return link

    # ------------------------------------------------------------------ cycle hooks
    def finish_init(self) -> None:
        """Joints that no output commands are held (``hold_kp``/``hold_kd``) or an error.

        Ends one ``init``: the next ``init`` (e.g. after a reload) starts from no commanded joints.
        """
        commanded, self._commanded = self._commanded, np.zeros_like(self._commanded)
        if not commanded.any():
            return
        free = [n for n, on in zip(self.model.joint_names, commanded) if not on]
        if free and self._hold is None:
            raise ComponentInitError(
                f"joints {free} are commanded by no joint-target output; give the adapter "
                "hold_kp/hold_kd to hold them, or export targets for every joint"
            )
        if free:
            q = np.asarray(self.robot.read().q, float)
            mask = ~commanded
            self._pending[_Q_DES, mask] = q[mask]
            self._pending[_KP, mask] = self._hold[0][mask]
            self._pending[_KD, mask] = self._hold[1][mask]
        self._last_sent = self._pending.copy()

    def begin_cycle(self, t_us: int) -> bool:
        try:
            state = self.robot.read()
        except Exception as e:  # a backend's transport error is an ordinary failed cycle
            self.last_error = f"robot.read() failed: {e}"
            return False
        if state.health and state.health & BAD_HEALTH:  # Health.OK is 0: skip the flag maths
            self.last_error = f"robot state unusable: health {state.health!r}"
            return False
        self._state = state
        self._cycle += 1
        return True

    def end_cycle(self, t_us: int) -> bool:
        if not self._dirty:
            return True
        self._dirty = False
        try:
            self.robot.write(self._command)
        except ValueError as e:  # refused (non-finite, negative gain): previous command kept
            self.last_error = f"robot.write refused the command: {e}"
            self._pending[:] = self._last_sent
            return False
        self._last_sent[:] = self._pending
        return True

    # ------------------------------------------------------------------ joints
    def init_joint_position(self, info: JointInfo) -> None:
        self._joint(info)

    def init_joint_velocity(self, info: JointInfo) -> None:
        self._joint(info)

    def init_joint_effort(self, info: JointInfo) -> None:
        self._joint(info)

    def init_joint_output(self, info: JointInfo) -> None:
        self._commanded[self._joint(info)] = True

    def joint_position(self, info: JointInfo) -> float | None:
        return None if self._state is None else float(self._state.q[self._index[info.joint_name]])

    def joint_velocity(self, info: JointInfo) -> float | None:
        return None if self._state is None else float(self._state.qd[self._index[info.joint_name]])

    def joint_effort(self, info: JointInfo) -> float | None:
        return None if self._state is None else float(self._state.tau[self._index[info.joint_name]])

    def joint_positions(self, group: JointGroupInfo, out: np.ndarray) -> bool:
        if self._state is None:
            return False
        index = self._group(group)
        out[:] = self._state.q if index is _ALL else self._state.q[index]
        return True

    def joint_velocities(self, group: JointGroupInfo, out: np.ndarray) -> bool:
        if self._state is None:
            return False
        index = self._group(group)
        out[:] = self._state.qd if index is _ALL else self._state.qd[index]
        return True

    def joint_positions_reader(self, group: JointGroupInfo, out: np.ndarray) -> Callable[[], bool]:
        return self._snapshot_reader(attrgetter("q"), self._group(group), out)

    def joint_velocities_reader(self, group: JointGroupInfo, out: np.ndarray) -> Callable[[], bool]:
        return self._snapshot_reader(attrgetter("qd"), self._group(group), out)

    def _snapshot_reader(self, field, index: np.ndarray | slice, out: np.ndarray):
        """A call filling ``out`` with ``field(snapshot)`` at ``index`` (robot joint indices)."""

        def read_all() -> bool:
            state = self._state
            if state is None:
                return False
            out[:] = field(state)
            return True

        def read_some() -> bool:
            state = self._state
            if state is None:
                return False
            out[:] = field(state)[index]
            return True

        return read_all if index is _ALL else read_some

    def _set(self, row: int, info: JointInfo, value: float) -> bool:
        self._pending[row, self._index[info.joint_name]] = value
        self._dirty = True
        return True

    def set_joint_position(self, info: JointInfo, position: float) -> bool:
        return self._set(_Q_DES, info, position)

    def set_joint_velocity(self, info: JointInfo, velocity: float) -> bool:
        return self._set(_QD_DES, info, velocity)

    def set_joint_effort(self, info: JointInfo, effort: float) -> bool:
        return self._set(_TAU_FF, info, effort)

    def set_joint_p_gain(self, info: JointInfo, p_gain: float) -> bool:
        return self._set(_KP, info, p_gain)

    def set_joint_d_gain(self, info: JointInfo, d_gain: float) -> bool:
        return self._set(_KD, info, d_gain)

    def set_joint_targets(self, group, position, velocity, effort, p_gain, d_gain) -> bool:
        index, p = self._group(group), self._pending
        if index is _ALL:  # the robot's joints in order: whole rows (the common case)
            rows = self._command  # its fields are the staging rows
            rows.q_des[:] = position
            rows.qd_des[:] = velocity
            rows.tau_ff[:] = effort
            rows.kp[:] = p_gain
            rows.kd[:] = d_gain
            self._dirty = True
            return True
        p[_Q_DES, index] = position
        p[_QD_DES, index] = velocity
        p[_TAU_FF, index] = effort
        p[_KP, index] = p_gain
        p[_KD, index] = d_gain
        self._dirty = True
        return True

    def joint_targets_writer(
        self,
        group: JointGroupInfo,
        position: np.ndarray,
        velocity: np.ndarray,
        effort: np.ndarray,
        p_gain: np.ndarray,
        d_gain: np.ndarray,
    ) -> Callable[[], bool]:
        """Per call: the targets into the staging rows. For a group of all the robot's joints in
        order the gains, the policy's constants, are staged once, here, also as the last command
        sent (which a refused write restores)."""
        index = self._group(group)
        if index is not _ALL:  # some of the robot's joints, or another order
            return partial(
                self.set_joint_targets, group, position, velocity, effort, p_gain, d_gain
            )
        for rows in (self._pending, self._last_sent):
            rows[_KP] = p_gain
            rows[_KD] = d_gain
        q_des, qd_des, tau_ff = (
            self._pending[_Q_DES],
            self._pending[_QD_DES],
            self._pending[_TAU_FF],
        )

        def write() -> bool:
            q_des[:] = position
            qd_des[:] = velocity
            tau_ff[:] = effort
            self._dirty = True
            return True

        return write

    # ------------------------------------------------------------------ base (fixed)
    def init_base_pos_w(self, info: BaseInfo) -> None:
        self._check_articulation(info.articulation_name)

    init_base_quat_w = init_base_lin_vel_b = init_base_ang_vel_b = init_base_pos_w

    def base_pos_w(self, info: BaseInfo) -> np.ndarray:
        return _ZERO3

    def base_quat_w(self, info: BaseInfo) -> np.ndarray:
        return _IDENTITY_Q

    def base_lin_vel_b(self, info: BaseInfo) -> np.ndarray:
        return _ZERO3

    def base_ang_vel_b(self, info: BaseInfo) -> np.ndarray:
        return _ZERO3

    # ------------------------------------------------------------------ bodies
    def init_body_position_w(self, info: BodyInfo) -> None:
        self._link(info.articulation_name, info.body_name)

    init_body_orientation_w = init_body_position_w

    def init_body_linear_velocity_b(self, info: BodyInfo) -> None:
        self._link(info.articulation_name, info.body_name)
        self._twist_links.add(info.body_name)

    init_body_angular_velocity_b = init_body_linear_velocity_b

    def _kinematics(self, link: str, twist: bool) -> list | None:
        """This cycle's ``[cycle, base_T_link (4, 4), velocity (2, 3), quaternion (4,)]`` of
        ``link``: velocity rows ``[linear m/s; angular rad/s]`` in the link frame (``None``
        until a twist is asked for, computed with the pose for links whose velocities were
        registered at init), the ``[w, x, y, z]`` orientation ``None`` until asked for.

        One evaluation of the link's generated chain per cycle. ``None`` without a state or
        when ``q`` is not finite (a failed cycle, reason in ``last_error``)."""
        state = self._state
        if state is None:
            return None
        entry = self._kin_cache.get(link)
        if entry is not None and entry[0] == self._cycle and (entry[2] is not None or not twist):
            return entry
        q = np.asarray(state.q, dtype=float).tolist()
        if not all(map(math.isfinite, q)):
            self.last_error = f"kinematics of {link!r}: joint positions {q} are not all finite"
            return None
        chain = self.model.chain(link)
        if twist or link in self._twist_links:
            pose, jac = chain.pose_jacobian(q)
            rot_t = pose[:3, :3].T  # base -> link frame
            velocity = (rot_t @ (jac @ state.qd).reshape(2, 3).T).T
            entry = [self._cycle, pose, velocity, None]
        else:
            entry = [self._cycle, chain.pose(q), None, None]
        self._kin_cache[link] = entry
        return entry

    def _pose(self, link: str) -> np.ndarray | None:
        entry = self._kinematics(link, twist=False)
        return None if entry is None else entry[1]

    def _velocity(self, link: str, row: int) -> np.ndarray | None:
        entry = self._kinematics(link, twist=True)
        return None if entry is None else entry[2][row]

    def _orientation(self, link: str) -> np.ndarray | None:
        entry = self._kinematics(link, twist=False)
        if entry is None:
            return None
        if entry[3] is None:
            entry[3] = quaternion.from_matrix(entry[1][:3, :3])
        return entry[3]

    def body_position_w(self, info: BodyInfo) -> np.ndarray | None:
        pose = self._pose(info.body_name)
        return None if pose is None else pose[:3, 3]

    def body_orientation_w(self, info: BodyInfo) -> np.ndarray | None:
        return self._orientation(info.body_name)

    def body_linear_velocity_b(self, info: BodyInfo) -> np.ndarray | None:
        return self._velocity(info.body_name, 0)

    def body_angular_velocity_b(self, info: BodyInfo) -> np.ndarray | None:
        return self._velocity(info.body_name, 1)

    # ------------------------------------------------------------------ IMU
    def init_imu_linear_velocity_imu(self, info: ImuInfo) -> None:
        self._twist_links.add(self._imu_link(info))

    def init_imu_angular_velocity_imu(self, info: ImuInfo) -> None:
        self._imu_link(info)

    init_imu_orientation_w = init_imu_angular_velocity_imu

    def imu_linear_velocity_imu(self, info: ImuInfo) -> np.ndarray | None:
        return self._velocity(self.imus[info.imu_name], 0)

    def imu_angular_velocity_imu(self, info: ImuInfo) -> np.ndarray | None:
        state = self._state
        if state is None or state.imu is None or (state.health and state.health & Health.IMU_STALE):
            return None
        return state.imu.angular_rate

    def imu_orientation_w(self, info: ImuInfo) -> np.ndarray | None:
        state = self._state
        if state is not None and state.imu is not None and state.imu.orientation is not None:
            return state.imu.orientation
        return self._orientation(self.imus[info.imu_name])
