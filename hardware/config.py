"""The hardware configuration: a documented TOML file (``assets/hardware/serial_robot.toml``).

``load_config(path)`` reads and checks it; every error names the key and says what was expected.
``default_config_path()`` is the shipped example. Ports can be overridden (``with_ports``), which is
how the emulators' pseudo-terminals are plugged in.
"""

from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

import numpy as np
from twin.hardware.errors import ConfigError
from twin.hardware.joint_map import JointMap
from twin.hardware.protocols import bota, witmotion
from twin.hardware.protocols.dynamixel_table import MAX_ID, Units

CONTROL_MODES = ("servo", "current")


@dataclass(frozen=True)
class JointConfig:
    name: str
    id: int
    model_number: int
    zero_offset_ticks: float
    direction: int
    ticks_per_rad: float
    torque_constant_nm_per_a: float
    current_limit: int  # servo Current Limit register units (2.69 mA)


@dataclass(frozen=True)
class BusConfig:
    port: str
    baudrate: int = 1_000_000
    reply_timeout_s: float = 0.02
    return_delay_time_us: int = 0
    servo_loop_period_s: float = 0.001
    current_unit_a: float = Units.CURRENT_A


@dataclass(frozen=True)
class FtConfig:
    port: str
    enabled: bool = True
    baudrate: int = 460800
    sinc_length: int = 256
    boot_timeout_s: float = 3.0
    ack_timeout_s: float = 0.5
    activation_timeout_s: float = 1.0
    read_metadata: bool = True


@dataclass(frozen=True)
class ImuConfig:
    port: str
    enabled: bool = True
    baudrate: int = 115200
    rate_hz: float = 200.0
    configure: bool = True
    first_sample_timeout_s: float = 1.0


@dataclass(frozen=True)
class ReconnectConfig:
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 2.0


@dataclass(frozen=True)
class HardwareConfig:
    """The whole configuration; ``joints`` in the model's joint order."""

    joints: tuple[JointConfig, ...]
    bus: BusConfig
    ft: FtConfig
    imu: ImuConfig
    reconnect: ReconnectConfig = field(default_factory=ReconnectConfig)
    control_period_s: float = 0.004
    control_mode: str = "servo"
    watchdog_s: float | None = 0.5
    stale_after_s: float = 0.05
    hold_kp: tuple[float, ...] = (120.0, 240.0, 120.0, 25.0, 25.0, 10.0)
    hold_kd: tuple[float, ...] = (6.0, 12.0, 4.0, 0.5, 0.5, 0.2)
    hold_gravity_compensation: bool = True
    source: str = ""

    def joint_map(self) -> JointMap:
        return JointMap(
            ids=tuple(j.id for j in self.joints),
            zero_ticks=np.array([j.zero_offset_ticks for j in self.joints]),
            direction=np.array([j.direction for j in self.joints], float),
            ticks_per_rad=np.array([j.ticks_per_rad for j in self.joints]),
            torque_constant=np.array([j.torque_constant_nm_per_a for j in self.joints]),
            current_unit_a=self.bus.current_unit_a,
            servo_loop_period_s=self.bus.servo_loop_period_s,
        )

    def with_ports(
        self, bus: str | None = None, ft: str | None = None, imu: str | None = None
    ) -> HardwareConfig:
        """A copy with the given port names replaced (e.g. emulator pseudo-terminals)."""
        return replace(
            self,
            bus=replace(self.bus, port=bus or self.bus.port),
            ft=replace(self.ft, port=ft or self.ft.port),
            imu=replace(self.imu, port=imu or self.imu.port),
        )


def default_config_path() -> pathlib.Path:
    """The shipped, documented example: ``assets/hardware/serial_robot.toml``."""
    return pathlib.Path(str(resources.files("twin.assets.hardware").joinpath("serial_robot.toml")))


def load_config(path: str | pathlib.Path | None = None) -> HardwareConfig:
    """Read and check a hardware TOML file (default: the shipped example)."""
    path = pathlib.Path(path) if path is not None else default_config_path()
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"cannot read hardware config {path}: {e}") from e
    return parse_config(data, source=str(path))


def parse_config(data: dict[str, Any], source: str = "<dict>") -> HardwareConfig:
    """Build a ``HardwareConfig`` from parsed TOML ``data``."""
    r = _Reader(data, source)
    robot = r.table("robot")
    joints_raw = data.get("joint")
    if not isinstance(joints_raw, list) or not joints_raw:
        raise ConfigError(f"{source}: expected [[joint]] tables, one per joint")
    joints = tuple(_joint(r, j, k) for k, j in enumerate(joints_raw))
    ids = [j.id for j in joints]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{source}: servo ids must be distinct, got {ids}")
    n = len(joints)
    bus_t, ft_t, imu_t, rec_t = (r.table(k) for k in ("bus", "ft_sensor", "imu", "reconnect"))
    mode = r.get(robot, "robot.control_mode", str, "servo")
    if mode not in CONTROL_MODES:
        raise ConfigError(
            f"{source}: robot.control_mode must be one of {CONTROL_MODES}, got {mode!r}"
        )
    watchdog = r.get(robot, "robot.watchdog_s", float, 0.5)
    sinc = r.get(ft_t, "ft_sensor.sinc_length", int, 256)
    if not bota.SINC_MIN <= sinc <= bota.SINC_MAX:
        raise ConfigError(
            f"{source}: ft_sensor.sinc_length must be {bota.SINC_MIN}..{bota.SINC_MAX}, got {sinc}"
        )
    ft_baud = r.get(ft_t, "ft_sensor.baudrate", int, 460800)
    if ft_baud not in bota.BAUD_CODES:
        raise ConfigError(
            f"{source}: ft_sensor.baudrate must be one of {sorted(bota.BAUD_CODES)}, got {ft_baud}"
        )
    imu_rate = r.get(imu_t, "imu.rate_hz", float, 200.0)
    if imu_rate not in witmotion.RATE_CODES.values():
        raise ConfigError(
            f"{source}: imu.rate_hz must be one of {sorted(witmotion.RATE_CODES.values())}, got {imu_rate}"
        )
    return HardwareConfig(
        joints=joints,
        bus=BusConfig(
            port=r.get(bus_t, "bus.port", str),
            baudrate=r.positive(bus_t, "bus.baudrate", int, 1_000_000),
            reply_timeout_s=r.positive(bus_t, "bus.reply_timeout_s", float, 0.02),
            return_delay_time_us=r.get(bus_t, "bus.return_delay_time_us", int, 0),
            servo_loop_period_s=r.positive(bus_t, "bus.servo_loop_period_s", float, 0.001),
            current_unit_a=r.positive(bus_t, "bus.current_unit_a", float, Units.CURRENT_A),
        ),
        ft=FtConfig(
            port=r.get(ft_t, "ft_sensor.port", str, ""),
            enabled=r.get(ft_t, "ft_sensor.enabled", bool, True),
            baudrate=ft_baud,
            sinc_length=sinc,
            boot_timeout_s=r.positive(ft_t, "ft_sensor.boot_timeout_s", float, 3.0),
            ack_timeout_s=r.positive(ft_t, "ft_sensor.ack_timeout_s", float, 0.5),
            activation_timeout_s=r.positive(ft_t, "ft_sensor.activation_timeout_s", float, 1.0),
            read_metadata=r.get(ft_t, "ft_sensor.read_metadata", bool, True),
        ),
        imu=ImuConfig(
            port=r.get(imu_t, "imu.port", str, ""),
            enabled=r.get(imu_t, "imu.enabled", bool, True),
            baudrate=r.positive(imu_t, "imu.baudrate", int, 115200),
            rate_hz=imu_rate,
            configure=r.get(imu_t, "imu.configure", bool, True),
            first_sample_timeout_s=r.positive(imu_t, "imu.first_sample_timeout_s", float, 1.0),
        ),
        reconnect=ReconnectConfig(
            backoff_initial_s=r.positive(rec_t, "reconnect.backoff_initial_s", float, 0.05),
            backoff_max_s=r.positive(rec_t, "reconnect.backoff_max_s", float, 2.0),
        ),
        control_period_s=r.positive(robot, "robot.control_period_s", float, 0.004),
        control_mode=mode,
        watchdog_s=None if watchdog == 0 else watchdog,
        stale_after_s=r.positive(robot, "robot.stale_after_s", float, 0.05),
        hold_kp=r.vector(robot, "robot.hold_kp", n),
        hold_kd=r.vector(robot, "robot.hold_kd", n),
        hold_gravity_compensation=r.get(robot, "robot.hold_gravity_compensation", bool, True),
        source=source,
    )


def _joint(r: _Reader, j: Any, k: int) -> JointConfig:
    if not isinstance(j, dict):
        raise ConfigError(f"{r.source}: joint[{k}] must be a table")
    key = f"joint[{k}]"
    pid = r.get(j, f"{key}.id", int)
    if not 0 <= pid <= MAX_ID:
        raise ConfigError(f"{r.source}: {key}.id must be 0..{MAX_ID}, got {pid}")
    direction = r.get(j, f"{key}.direction", int, 1)
    if direction not in (-1, 1):
        raise ConfigError(f"{r.source}: {key}.direction must be 1 or -1, got {direction}")
    return JointConfig(
        name=r.get(j, f"{key}.name", str),
        id=pid,
        model_number=r.get(j, f"{key}.model_number", int, 1020),
        zero_offset_ticks=r.get(j, f"{key}.zero_offset_ticks", float, Units.CENTER_TICKS),
        direction=direction,
        ticks_per_rad=r.positive(j, f"{key}.ticks_per_rad", float),
        torque_constant_nm_per_a=r.positive(j, f"{key}.torque_constant_nm_per_a", float),
        current_limit=r.positive(j, f"{key}.current_limit", int, 1193),
    )


class _Reader:
    _MISSING = object()

    def __init__(self, data: dict[str, Any], source: str) -> None:
        self.data, self.source = data, source

    def table(self, name: str) -> dict[str, Any]:
        t = self.data.get(name, {})
        if not isinstance(t, dict):
            raise ConfigError(f"{self.source}: [{name}] must be a table")
        return t

    def get(self, table: dict[str, Any], key: str, kind: type, default: Any = _MISSING) -> Any:
        leaf = key.rsplit(".", 1)[-1]
        if leaf not in table:
            if default is self._MISSING:
                raise ConfigError(f"{self.source}: missing key {key} ({kind.__name__})")
            return default
        value = table[leaf]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(f"{self.source}: {key} must be a {kind.__name__}, got {value!r}")
        if kind is float and not math.isfinite(value):
            raise ConfigError(f"{self.source}: {key} must be finite, got {value!r}")
        return value

    def positive(self, table: dict[str, Any], key: str, kind: type, default: Any = _MISSING) -> Any:
        value = self.get(table, key, kind, default)
        if value <= 0:
            raise ConfigError(f"{self.source}: {key} must be > 0, got {value!r}")
        return value

    def vector(self, table: dict[str, Any], key: str, n: int) -> tuple[float, ...]:
        leaf = key.rsplit(".", 1)[-1]
        if leaf not in table:
            return HardwareConfig.__dataclass_fields__[key.split(".")[-1]].default
        value = table[leaf]
        arr = np.asarray(value, dtype=float) if isinstance(value, list) else None
        if arr is None or arr.shape != (n,) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ConfigError(
                f"{self.source}: {key} must be a list of {n} numbers >= 0, got {value!r}"
            )
        return tuple(float(v) for v in arr)
