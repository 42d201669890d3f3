"""``EmulatorStack``: the servo chain, the F/T sensor and the IMU of one configuration, on
pseudo-terminals with stable names in a temporary directory, driven by one physics source. The
servo chain models its wire at ``bus.baudrate`` unless ``bus.emulate_wire_time`` is false or
the run is lock-step (``ServoChainEmulator.wire_baud``).

Real time by default (a ``RealTimeRunner`` advances the source from a monotonic clock); with a
shared ``ManualClock`` the source only advances when the servo bus is read (lock-step).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from twin.hardware.clock import ManualClock, MonotonicClock
from twin.hardware.config import HardwareConfig
from twin.hardware.emulator.bota import BotaEmulator
from twin.hardware.emulator.faults import FaultInjector, dynamixel_status_frames
from twin.hardware.emulator.quiet import QuietWindow
from twin.hardware.emulator.servo_chain import ServoChainEmulator
from twin.hardware.emulator.sources import PhysicsSource, RealTimeRunner
from twin.hardware.emulator.witmotion import WitmotionEmulator
from twin.hardware.protocols.dynamixel_table import XTable

BUS, FT, IMU = "servo_bus", "ft_sensor", "imu"


class EmulatorStack:
    """All emulated devices of ``config`` (module doc). ``faults`` maps a port name (``servo_bus``,
    ``ft_sensor``, ``imu``) to its injector; every port gets one (inactive unless set). The bus's
    also drops the replies of one servo: ``faults[BUS].silence(id)``, ``.drop_next(id, n)``,
    ``.restore(id)``."""

    def __init__(
        self,
        config: HardwareConfig,
        source: PhysicsSource,
        *,
        clock: ManualClock | MonotonicClock | None = None,
        link_dir: str | Path | None = None,
        seed: int = 0,
        boot_delay_s: float = 0.05,
    ) -> None:
        self.config, self.source = config, source
        self.clock = clock if clock is not None else MonotonicClock()
        self._own_dir = link_dir is None
        self.link_dir = (
            Path(tempfile.mkdtemp(prefix="twin-emu-")) if link_dir is None else Path(link_dir)
        )
        splitters = {BUS: dynamixel_status_frames}  # servo replies can be dropped per servo id
        self.faults = {
            name: FaultInjector(seed + k, split=splitters.get(name))
            for k, name in enumerate((BUS, FT, IMU))
        }
        wire_timed = self._wire_timed()
        #: The servo chain's paced replies, which the physics and the streams keep clear of
        #: (None in lock-step, where nothing is paced).
        self.quiet = None if isinstance(self.clock, ManualClock) else QuietWindow()
        self.runner = (
            None
            if isinstance(self.clock, ManualClock)
            else RealTimeRunner(source, self.clock, quiet=self.quiet)
        )
        self.servos: ServoChainEmulator | None = None
        self.ft: BotaEmulator | None = None
        self.imu: WitmotionEmulator | None = None
        try:
            self.servos = ServoChainEmulator(
                source,
                config.joint_map(),
                self.clock,
                model_numbers=[j.model_number for j in config.joints],
                link_dir=self.link_dir,
                faults=self.faults[BUS],
                wire_baud=config.bus.baudrate if wire_timed else None,
                quiet=self.quiet,
            )
            if config.ft.enabled:
                self.ft = BotaEmulator(
                    source,
                    link_dir=self.link_dir,
                    faults=self.faults[FT],
                    boot_delay_s=boot_delay_s,
                    quiet=self.quiet,
                )
            if config.imu.enabled:
                self.imu = WitmotionEmulator(
                    source,
                    link_dir=self.link_dir,
                    faults=self.faults[IMU],
                    baudrate=config.imu.baudrate,
                    quiet=self.quiet,
                )
        except Exception:
            self.close()
            raise
        for (
            servo
        ) in self.servos.servos.values():  # the factory default would exceed the XH540's 1193
            servo.set(
                XTable.CURRENT_LIMIT,
                max(servo.get(XTable.CURRENT_LIMIT), 2047 if servo.model_number == 1100 else 1193),
            )

    def _wire_timed(self) -> bool:
        """Whether the servo chain holds its wire for each packet's transmission time: as
        configured (``bus.emulate_wire_time``), and never in lock-step, where the shared
        ``ManualClock`` is the only time there is (a real-time wait would only slow the run)."""
        return self.config.bus.emulate_wire_time and not isinstance(self.clock, ManualClock)

    @property
    def ports(self) -> dict[str, str]:
        """Port name -> path to open (stable across unplug / replug)."""
        out = {BUS: self.servos.port.path}
        if self.ft is not None:
            out[FT] = self.ft.port.path
        if self.imu is not None:
            out[IMU] = self.imu.port.path
        return out

    @contextlib.contextmanager
    def clock_running(self, step_us: int, interval_s: float = 0.002) -> Iterator[None]:
        """Lock-step only: while the block runs, advance the ``ManualClock`` by ``step_us`` (and
        the physics with it) every ``interval_s`` of wall time, as during a bring-up where drivers
        wait in real time for their first frames. Leaves the clock on a multiple of ``step_us``."""
        if not isinstance(self.clock, ManualClock):
            raise TypeError("clock_running needs the stack's clock to be a ManualClock")
        stop = threading.Event()

        def pump() -> None:
            while not stop.wait(interval_s):
                self.clock.advance(step_us)
                self.source.advance_to(self.clock.now_us())

        thread = threading.Thread(target=pump, name="emu-clock-pump", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def port(self, name: str):
        return {BUS: self.servos, FT: self.ft, IMU: self.imu}[name].port

    def robot_config(self) -> HardwareConfig:
        """``config`` with the emulated ports plugged in."""
        p = self.ports
        return self.config.with_ports(bus=p[BUS], ft=p.get(FT), imu=p.get(IMU))

    def close(self) -> None:
        """Stop every device and the physics; safe to call twice."""
        for dev in (self.imu, self.ft, self.servos):
            if dev is not None:
                dev.close()
        self.imu = self.ft = None
        if self.runner is not None:
            self.runner.close()
            self.runner = None
        if self._own_dir:
            shutil.rmtree(self.link_dir, ignore_errors=True)
        self.source.close()

    def __enter__(self) -> EmulatorStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
