"""Output ports of the F/T services: the ``wrench`` port in the sensor frame and one port per
exported frame, each a ``WrenchTf`` from the physical sensor frame (the ``ft_sensor`` link) to
the port's frame (see ``twin.sensors.ft_service`` for the frame semantics)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twin.robot import FtStatus
from twin.sensors.errors import InvalidArgumentError
from twin.spatial import SE3, SO3
from twin.transforms import Origin, Rotation, TfConfig, Translation, WrenchTf

SENSOR_PORT = "wrench"
NAME_MAX_CHARS = 64
_IDENTITY4 = np.eye(4)
_UPPER = np.triu_indices(3)  # cov[6] = [xx, xy, xz, yy, yz, zz]


@dataclass(frozen=True)
class WrenchState:
    """One published wrench (the reference's ``or_wrench_estimator::state``).

    force (3,) N and torque (3,) N m in the port's frame, about its origin (None when the sample
    was not finite); force_cov, torque_cov (6,) upper triangles ``[xx, xy, xz, yy, yz, zz]`` in
    N^2 and (N m)^2 (None before a tare); time stamp ``sec``/``nsec`` and ``t_us``;
    ``intrinsic``: the frame is body-fixed (else world-fixed).
    """

    t_us: int
    sec: int
    nsec: int
    intrinsic: bool
    force: np.ndarray | None
    torque: np.ndarray | None
    force_cov: np.ndarray | None
    torque_cov: np.ndarray | None
    frame: str
    status: FtStatus = FtStatus.OK

    @property
    def wrench(self) -> np.ndarray | None:
        """(6,) ``[fx, fy, fz, tx, ty, tz]`` or None."""
        if self.force is None or self.torque is None:
            return None
        return np.concatenate((self.force, self.torque))


def frame_pose(what: str, x, y, z, yaw, pitch, roll) -> SE3:
    """A frame from position m and Z-Y-X Euler angles rad; ``InvalidArgumentError`` if not finite."""
    values = np.array([x, y, z, yaw, pitch, roll], dtype=float)
    if not np.all(np.isfinite(values)):
        raise InvalidArgumentError(
            f"{what}: x, y, z, yaw, pitch, roll must be finite, got {values}"
        )
    return SE3(SO3.from_rpy(roll, pitch, yaw), values[:3])


@dataclass
class _Port:
    intrinsic: bool
    tf: WrenchTf
    latest: WrenchState | None = None
    matrix: np.ndarray | None = None  # a body-fixed port's constant (6, 6) map, once resolved


class FramePorts:
    """The sensor frame, the exported frames and their latest published wrenches."""

    def __init__(self) -> None:
        self._sensor: tuple[bool, SE3] = (True, SE3.identity())
        self._exports: dict[str, tuple[bool, SE3]] = {}
        self._ports: dict[str, _Port] = {}
        self.needs_world = False  # some port is world-fixed: publish needs world_T_sensor
        self._rebuild()

    def set_sensor_frame(self, intrinsic: bool, pose: SE3) -> None:
        self._sensor = (bool(intrinsic), pose)
        self._rebuild()

    def export(self, name: str, world: bool, pose: SE3) -> None:
        if not isinstance(name, str) or not 1 <= len(name) <= NAME_MAX_CHARS or name == SENSOR_PORT:
            raise InvalidArgumentError(
                f"a frame name has 1..{NAME_MAX_CHARS} characters and is not {SENSOR_PORT!r}, "
                f"got {name!r}"
            )
        self._exports[name] = (bool(world), pose)
        self._rebuild()

    def exported(self) -> list[str]:
        return list(self._exports)

    def check_exported(self, name: str) -> None:
        if name not in self._exports:
            raise InvalidArgumentError(f"no exported frame {name!r}; exported: {self.exported()}")

    def latest(self, name: str) -> WrenchState | None:
        return self._ports[name].latest

    def intrinsic(self, name: str) -> bool:
        return self._ports[name].intrinsic

    def _rebuild(self) -> None:
        s_intrinsic, sensor = self._sensor
        specs = {SENSOR_PORT: (s_intrinsic, sensor)}
        for name, (world, local) in self._exports.items():
            specs[name] = (False, local) if world else (s_intrinsic, sensor @ local)
        old, self._ports = self._ports, {}
        for name, (intrinsic, pose) in specs.items():
            origin = Origin.MOVING if intrinsic else Origin.FIXED
            config = TfConfig(
                name=name,
                input_ref_point=Translation(Origin.MOVING, (0.0, 0.0, 0.0)),
                input_expr_axes=Rotation(Origin.MOVING, (1.0, 0.0, 0.0, 0.0)),
                output_ref_point=Translation(origin, tuple(pose.translation)),
                output_expr_axes=Rotation(origin, tuple(pose.rotation.wxyz)),
            )
            latest = old[name].latest if name in old else None
            self._ports[name] = _Port(intrinsic, WrenchTf(config), latest)
        self.needs_world = any(not p.intrinsic for p in self._ports.values())

    def publish(
        self,
        t_us: int,
        status: FtStatus,
        wrenches: np.ndarray,
        world_T_sensor: np.ndarray | None,
        cov: np.ndarray | None,
    ) -> dict[str, np.ndarray]:
        """Publish a batch of samples on every port: ``wrenches`` (n, 6) in the physical sensor
        frame, oldest first, a row of nan where a sample was not finite; ``world_T_sensor``
        (4, 4) when ``needs_world`` (one pose for the batch); ``cov`` (6, 6) or None. Each
        port's latest state becomes the last row's (time stamp ``t_us``, ``status``). Returns
        every row in each port's frame, (n, 6) by port name (nan rows stay nan)."""
        sec, usec = divmod(t_us, 1_000_000)
        pose = _IDENTITY4 if world_T_sensor is None else world_T_sensor
        last_finite = bool(np.isfinite(wrenches[-1]).all())
        out = {}
        for name, port in self._ports.items():
            m = port.matrix
            if m is None:  # world-fixed: the map follows the sensor pose of this batch
                port.tf.set_fixed_to_moving_frame_matrix(pose, t_us)
                m = port.tf.matrix()
                if port.intrinsic:
                    port.matrix = m  # body-fixed: it never changes until the frames do
            rows = np.full_like(wrenches, np.nan) if m is None else wrenches @ m.T
            force = torque = force_cov = torque_cov = None
            if m is not None and last_finite:
                force, torque = rows[-1, :3].copy(), rows[-1, 3:].copy()
                if cov is not None:
                    c = m @ cov @ m.T
                    force_cov, torque_cov = c[:3, :3][_UPPER], c[3:, 3:][_UPPER]
            port.latest = WrenchState(
                t_us, sec, usec * 1000, port.intrinsic, force, torque, force_cov, torque_cov,
                name, status,
            )  # fmt: skip
            out[name] = rows
        return out
