"""The hardware configuration: a documented TOML file (``assets/hardware/serial_robot.toml``).

``load_config(path)`` reads and checks it: an unknown key is refused (with the closest known key as
a hint), every number is range-checked, and every error names the file, the section and key, and
what was expected.
``default_config_path()`` is the shipped example. Ports can be overridden (``with_ports``), which is
how the emulators' pseudo-terminals are plugged in.
"""

from __future__ import annotations

import math
import pathlib
import warnings
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

import numpy as np
from twin.hardware.errors import ConfigError, WireBoundWarning
from twin.hardware.joint_map import JointMap
from twin.hardware.protocols import bota, witmotion
from twin.hardware.protocols import dynamixel_cycle as cycle
from twin.hardware.protocols import dynamixel_table as dxl_table
from twin.hardware.protocols.dynamixel_table import MAX_ID, Units

from twin.names import closest

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
    attempts: int = 4  # tries of each set-up, park and verification transaction
    #: The emulators model the wire's transmission time at ``baudrate`` (the real bus is never
    #: without it; off only to run the emulators faster than a bus could).
    emulate_wire_time: bool = True


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
class StartupConfig:
    """Opening each device at construction: ``attempts`` tries, waiting ``backoff_initial_s``
    (doubling up to ``backoff_max_s``) between them."""

    attempts: int = 4
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 1.0


@dataclass(frozen=True)
class HardwareConfig:
    """The whole configuration; ``joints`` in the model's joint order."""

    joints: tuple[JointConfig, ...]
    bus: BusConfig
    ft: FtConfig
    imu: ImuConfig
    reconnect: ReconnectConfig = field(default_factory=ReconnectConfig)
    startup: StartupConfig = field(default_factory=StartupConfig)
    control_period_s: float = 0.004
    control_mode: str = "servo"
    watchdog_s: float | None = 0.5
    stale_after_s: float = 0.05
    stale_fault_cycles: int = 3  # consecutive failed joint reads that make the stale fault
    rate_warning_fraction: float = 0.9  # warn once below this fraction of the configured rate
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
    """Build a ``HardwareConfig`` from parsed TOML ``data`` (module doc: unknown keys and values
    out of range raise ``ConfigError``)."""
    r = _Reader(data, source)
    r.known_tables(("robot", "bus", "ft_sensor", "imu", "reconnect", "startup", "joint"))
    robot = r.table("robot")
    joints_raw = data.get("joint")
    if not isinstance(joints_raw, list) or not joints_raw:
        raise ConfigError(f"{source}: expected [[joint]] tables, one per joint")
    joints = tuple(_joint(r, j, k) for k, j in enumerate(joints_raw))
    ids = [j.id for j in joints]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{source}: servo ids must be distinct, got {ids}")
    n = len(joints)
    bus_t, ft_t, imu_t, rec_t, start_t = (
        r.table(k) for k in ("bus", "ft_sensor", "imu", "reconnect", "startup")
    )
    mode = r.get(robot, "robot.control_mode", str, "servo")
    if mode not in CONTROL_MODES:
        raise ConfigError(
            f"{source}: robot.control_mode must be one of {CONTROL_MODES}, got {mode!r}"
        )
    period = r.number(robot, "robot.control_period_s", float, (1e-4, 1.0, "s"), 0.004)
    watchdog = r.number(
        robot, "robot.watchdog_s", float, (0.0, 60.0, "s, 0 disables"), 0.5, closed=True
    )
    if 0 < watchdog < period:
        raise ConfigError(
            f"{source}: robot.watchdog_s must be 0 (off) or at least robot.control_period_s "
            f"({period} s), got {watchdog}"
        )
    sinc = r.get(ft_t, "ft_sensor.sinc_length", int, 256)
    if not bota.SINC_MIN <= sinc <= bota.SINC_MAX:
        raise ConfigError(
            f"{source}: ft_sensor.sinc_length must be {bota.SINC_MIN}..{bota.SINC_MAX}, got {sinc}"
        )
    imu_rate = r.get(imu_t, "imu.rate_hz", float, 200.0)
    if imu_rate not in witmotion.RATE_CODES.values():
        raise ConfigError(
            f"{source}: imu.rate_hz must be one of {sorted(witmotion.RATE_CODES.values())}, got {imu_rate}"
        )
    backoff = r.number(rec_t, "reconnect.backoff_initial_s", float, (0.0, 60.0, "s"), 0.05)
    startup_backoff = r.number(start_t, "startup.backoff_initial_s", float, (0.0, 10.0, "s"), 0.05)
    config = HardwareConfig(
        joints=joints,
        bus=BusConfig(
            port=r.get(bus_t, "bus.port", str),
            baudrate=r.choice(bus_t, "bus.baudrate", dxl_table.BAUD_CODES.values(), 1_000_000),
            reply_timeout_s=r.number(bus_t, "bus.reply_timeout_s", float, (0.0, 1.0, "s"), 0.02),
            return_delay_time_us=r.number(
                bus_t, "bus.return_delay_time_us", int, (0, 508, "us"), 0
            ),
            servo_loop_period_s=r.number(
                bus_t, "bus.servo_loop_period_s", float, (0.0, 0.1, "s"), 0.001
            ),
            current_unit_a=r.number(
                bus_t, "bus.current_unit_a", float, (0.0, 0.1, "A"), Units.CURRENT_A
            ),
            attempts=r.number(bus_t, "bus.attempts", int, (1, 20, "tries"), 4),
            emulate_wire_time=r.get(bus_t, "bus.emulate_wire_time", bool, True),
        ),
        ft=FtConfig(
            port=r.get(ft_t, "ft_sensor.port", str, ""),
            enabled=r.get(ft_t, "ft_sensor.enabled", bool, True),
            baudrate=r.choice(ft_t, "ft_sensor.baudrate", bota.BAUD_CODES, 460800),
            sinc_length=sinc,
            boot_timeout_s=r.number(ft_t, "ft_sensor.boot_timeout_s", float, _TIMEOUT, 3.0),
            ack_timeout_s=r.number(ft_t, "ft_sensor.ack_timeout_s", float, _TIMEOUT, 0.5),
            activation_timeout_s=r.number(
                ft_t, "ft_sensor.activation_timeout_s", float, _TIMEOUT, 1.0
            ),
            read_metadata=r.get(ft_t, "ft_sensor.read_metadata", bool, True),
        ),
        imu=ImuConfig(
            port=r.get(imu_t, "imu.port", str, ""),
            enabled=r.get(imu_t, "imu.enabled", bool, True),
            baudrate=r.choice(imu_t, "imu.baudrate", witmotion.BAUD_CODES.values(), 115200),
            rate_hz=imu_rate,
            configure=r.get(imu_t, "imu.configure", bool, True),
            first_sample_timeout_s=r.number(
                imu_t, "imu.first_sample_timeout_s", float, _TIMEOUT, 1.0
            ),
        ),
        reconnect=ReconnectConfig(
            backoff_initial_s=backoff,
            backoff_max_s=r.number(
                rec_t, "reconnect.backoff_max_s", float, (backoff, 600.0, "s"), 2.0, closed=True
            ),
        ),
        startup=StartupConfig(
            attempts=r.number(start_t, "startup.attempts", int, (1, 20, "tries"), 4),
            backoff_initial_s=startup_backoff,
            backoff_max_s=r.number(
                start_t,
                "startup.backoff_max_s",
                float,
                (startup_backoff, 60.0, "s"),
                1.0,
                closed=True,
            ),
        ),
        control_period_s=period,
        control_mode=mode,
        watchdog_s=None if watchdog == 0 else watchdog,
        stale_after_s=r.number(
            robot, "robot.stale_after_s", float, (period, 10.0, "s"), 0.05, closed=True
        ),
        stale_fault_cycles=r.number(
            robot, "robot.stale_fault_cycles", int, (1, 1000, "control periods"), 3
        ),
        rate_warning_fraction=r.number(
            robot,
            "robot.rate_warning_fraction",
            float,
            (0.0, 1.0, "of the rate, 0 never"),
            0.9,
            closed=True,
        ),
        hold_kp=r.vector(robot, "robot.hold_kp", n),
        hold_kd=r.vector(robot, "robot.hold_kd", n),
        hold_gravity_compensation=r.get(robot, "robot.hold_gravity_compensation", bool, True),
        source=source,
    )
    r.refuse_unknown()
    check_wire_bound(config)
    return config


@dataclass(frozen=True)
class WireBound:
    """What one bus cycle puts on the wire (``docs/protocols/dynamixel.md``, "The bus cycle"):
    bytes of the goal SYNC_WRITE, of the read instruction and of its answer, with FAST_SYNC_READ
    and with SYNC_READ; ``*_hz`` the highest rate the wire allows (10 bits a byte, plus the
    servos' return delays)."""

    baudrate: int
    write_bytes: int
    read_bytes: int
    fast_reply_bytes: int
    sync_reply_bytes: int
    fast_hz: float
    sync_hz: float


def wire_bound(config: HardwareConfig) -> WireBound:
    """The servo bus's wire bound for ``config`` (its mode's goal register, its servos, its baud
    rate and return delay). The gains a servo-side command changes are written only when they
    change, so they are not counted."""
    n, bus = len(config.joints), config.bus
    table = dxl_table.XTable
    size = table.GOAL_POSITION.size  # both modes write Goal Position (``arm_bus``)
    write, read = cycle.sync_write_length(n, size), cycle.read_request_length(n)
    fast, sync = cycle.present_reply_length(n, True), cycle.present_reply_length(n, False)
    byte_s, delay_s = 10.0 / bus.baudrate, bus.return_delay_time_us * 1e-6
    return WireBound(
        bus.baudrate,
        write,
        read,
        fast,
        sync,
        1.0 / ((write + read + fast) * byte_s + delay_s),  # the aggregate waits for one delay
        1.0 / ((write + read + sync) * byte_s + n * delay_s),
    )


def check_wire_bound(config: HardwareConfig) -> WireBound:
    """``WireBoundWarning`` (one line) if ``config``'s control rate exceeds its bus's wire bound
    with FAST_SYNC_READ (the best the bus can do); returns the bound."""
    b = wire_bound(config)
    rate = 1.0 / config.control_period_s
    if rate > b.fast_hz:
        warnings.warn(
            WireBoundWarning(
                f"{config.source or 'hardware config'}: robot.control_period_s = "
                f"{config.control_period_s} s asks for {rate:.0f} Hz, above the servo bus's wire "
                f"bound of {b.fast_hz:.0f} Hz at bus.baudrate = {b.baudrate} "
                f"({b.write_bytes + b.read_bytes + b.fast_reply_bytes} bytes a cycle: goal "
                f"SYNC_WRITE {b.write_bytes}, FAST_SYNC_READ {b.read_bytes} and its reply "
                f"{b.fast_reply_bytes}, 10 bits a byte, return delay "
                f"{config.bus.return_delay_time_us} us; {b.sync_hz:.0f} Hz with SYNC_READ); "
                "raise bus.baudrate or robot.control_period_s"
            ),
            stacklevel=3,
        )
    return b


_TIMEOUT = (0.0, 60.0, "s")
_CURRENT_LIMIT_MAX = (
    2047  # the widest Current Limit range of the X series (XH540; docs/protocols/dynamixel.md)
)
_MAX_GAIN_SI = 1e5  # N m/rad or N m s/rad: far above any servo's reach


def _joint(r: _Reader, j: Any, k: int) -> JointConfig:
    if not isinstance(j, dict):
        raise ConfigError(f"{r.source}: joint[{k}] must be a table")
    r.track(j, f"[[joint]] {k}")
    key = f"joint[{k}]"
    direction = r.get(j, f"{key}.direction", int, 1)
    if direction not in (-1, 1):
        raise ConfigError(f"{r.source}: {key}.direction must be 1 or -1, got {direction}")
    return JointConfig(
        name=r.get(j, f"{key}.name", str),
        id=r.number(j, f"{key}.id", int, (0, MAX_ID, "servo id")),
        model_number=r.number(j, f"{key}.model_number", int, (0, 65535, "model number"), 1020),
        zero_offset_ticks=r.number(
            j,
            f"{key}.zero_offset_ticks",
            float,
            (-Units.EXTENDED_POSITION_LIMIT, Units.EXTENDED_POSITION_LIMIT, "ticks"),
            Units.CENTER_TICKS,
        ),
        direction=direction,
        ticks_per_rad=r.number(j, f"{key}.ticks_per_rad", float, (0.0, 1e6, "ticks/rad")),
        torque_constant_nm_per_a=r.number(
            j, f"{key}.torque_constant_nm_per_a", float, (0.0, 1000.0, "N m/A")
        ),
        current_limit=r.number(
            j, f"{key}.current_limit", int, (1, _CURRENT_LIMIT_MAX, "2.69 mA units"), 1193
        ),
    )


class _Reader:
    """Typed access to the parsed tables that remembers every key asked for, so that the keys
    nobody asked for can be refused (``refuse_unknown``)."""

    _MISSING = object()

    def __init__(self, data: dict[str, Any], source: str) -> None:
        self.data, self.source = data, source
        self._tables: dict[int, tuple[dict[str, Any], str, set[str]]] = {}

    def known_tables(self, names: tuple[str, ...]) -> None:
        unknown = [k for k in self.data if k not in names]
        if unknown:
            raise ConfigError(
                f"{self.source}: unknown table [{unknown[0]}]{_hint(unknown[0], names)}; "
                f"expected one of {', '.join(names)}"
            )

    def track(self, table: dict[str, Any], section: str) -> None:
        self._tables.setdefault(id(table), (table, section, set()))

    def table(self, name: str) -> dict[str, Any]:
        t = self.data.get(name, {})
        if not isinstance(t, dict):
            raise ConfigError(f"{self.source}: [{name}] must be a table")
        self.track(t, f"[{name}]")
        return t

    def _asked(self, table: dict[str, Any], leaf: str) -> None:
        entry = self._tables.get(id(table))
        if entry is not None:
            entry[2].add(leaf)

    def refuse_unknown(self) -> None:
        for table, section, known in self._tables.values():
            for key in table:
                if key not in known:
                    raise ConfigError(
                        f"{self.source}: unknown key {key!r} in {section}"
                        f"{_hint(key, sorted(known))}; known keys: {', '.join(sorted(known))}"
                    )

    def get(self, table: dict[str, Any], key: str, kind: type, default: Any = _MISSING) -> Any:
        leaf = key.rsplit(".", 1)[-1]
        self._asked(table, leaf)
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

    def number(
        self,
        table: dict[str, Any],
        key: str,
        kind: type,
        bounds: tuple[float, float, str],
        default: Any = _MISSING,
        *,
        closed: bool = False,
    ) -> Any:
        """A number within ``bounds`` (low, high, unit), both inclusive, except that a float
        bounded below by 0 must be positive unless ``closed``."""
        value = self.get(table, key, kind, default)
        lo, hi, unit = bounds
        open_lo = kind is float and lo == 0 and not closed
        if not ((lo < value) if open_lo else (lo <= value)) or value > hi:
            interval = f"{'(' if open_lo else '['}{lo:g}, {hi:g}]"
            raise ConfigError(
                f"{self.source}: {key} must be a {kind.__name__} in {interval} ({unit}), got {value!r}"
            )
        return value

    def choice(self, table: dict[str, Any], key: str, allowed, default: Any) -> int:
        value = self.get(table, key, int, default)
        if value not in allowed:
            raise ConfigError(f"{self.source}: {key} must be one of {sorted(allowed)}, got {value}")
        return value

    def vector(self, table: dict[str, Any], key: str, n: int) -> tuple[float, ...]:
        leaf = key.rsplit(".", 1)[-1]
        self._asked(table, leaf)
        if leaf not in table:
            return HardwareConfig.__dataclass_fields__[leaf].default
        value = table[leaf]
        arr = None
        if isinstance(value, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
        ):
            arr = np.asarray(value, dtype=float)
        if (
            arr is None
            or arr.shape != (n,)
            or not np.all(np.isfinite(arr))
            or np.any(arr < 0)
            or np.any(arr > _MAX_GAIN_SI)
        ):
            raise ConfigError(
                f"{self.source}: {key} must be a list of {n} numbers in [0, {_MAX_GAIN_SI:g}], "
                f"got {value!r}"
            )
        return tuple(float(v) for v in arr)


def _hint(word: str, candidates) -> str:
    return closest(word, candidates)
