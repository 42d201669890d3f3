"""F/T sensor services over any ``twin.robot.Robot`` (after ``docs/reference/ft-services.md``).

The service processes samples on ``update()``, called once per control cycle: every sample the
backend received since the previous call (``Robot.wrench_samples``, several per cycle when the
sensor runs faster than the loop) goes through

    calibrated = G @ raw + b      only if the device flags the sample RAW (calibration use off);
                                  otherwise the device has applied its own G, b already
    filtered   = per-axis 2nd-order Butterworth low-pass (``twin.sensors.filters``), 0 Hz = off
    published  = filtered - tare offset          (physical sensor frame)

and is then published on the ``wrench`` port (in the sensor frame set by ``set_sensor_frame``) and
on one port per exported frame (``export_frame``), each a ``WrenchTf``, and written to the logs
(every received sample, so ``log_info`` is exact). ``health()`` counts what did not make it:
samples lost to the backend's queue overflow, samples the backend rejected as implausible, and
log write failures (a full disk is a fault of the log, never an exception in ``update``).

Frames: the *physical* sensor frame is the ``ft_sensor`` link frame. ``set_sensor_frame(intrinsic,
x, y, z, yaw, pitch, roll)`` defines the published sensor frame: relative to the physical sensor
(``intrinsic=True``, body-fixed) or to the world (``intrinsic=False``, fixed in the world, i.e. the
robot base frame). Exported frames are relative to that sensor frame (so body-fixed or world-fixed
alike), or, with ``world=True``, relative to the world directly. Angles are Z-Y-X Euler (rad).
World-fixed frames need ``world_T_sensor`` at each sample: by default the robot model's FK of the
``ft_sensor`` link at the joint state read with the sample; pass ``sensor_pose`` (a callable of
the ``RobotState`` returning a (4, 4) matrix, a (7,) pose or an ``SE3``, e.g. from a frame graph)
to use another source. The torque of a port is about its frame's origin.

Calibration: ``get_calibration()`` returns the device's ``G`` (6, 6) (rows ``m0..m5``) and
``b = -offsets`` (6,) (the ``b`` command), read with the ``w`` command at ``connect``, so that the
device output is ``G @ gauge + b``. Its use here is the RAW case above.

Tare: ``tare(duration)`` averages ``calibrated`` over ``duration`` seconds of *sensor* time (sample
time stamps) and subtracts the mean from then on. It drives the robot itself: each cycle calls
``step()`` (default ``robot.step``: one physics period in sim, a real-time wait on hardware) and
then ``update()``. A control loop that owns the robot uses ``begin_tare`` and keeps calling
``update()``. The tare window also gives the covariances published with each sample (sample
covariance of the filtered wrench, rotated into each port's frame); they are None before a tare.
A tare over too few samples (``sampling.tare_min_samples``: at least 16, and half of what the
duration gives at the device rate) fails (``TareResult.ok`` False, the reason naming the count and
the minimum) and changes nothing; a duration that cannot give 16 samples is refused at once.

Rate: ``hz()`` is measured from the time stamps of the last second of received samples
(``sampling.SampleCounter``): samples lost on the way lower it.
The low-pass is designed for the device rate (every sample goes through it); a cut-off that a
rate change puts at or above Nyquist switches that axis off (with a logged warning).
Payload: ``set_payload_compensation(PayloadCompensation | None)`` (``twin.sensors.payload``)
subtracts an identified load's weight (and offsets) from every published wrench, using the
sensor pose of the cycle (the joint state read with the samples), so the ports carry the contact
wrench.

Single-threaded: call every method from the thread that runs the control loop.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from twin import events
from twin.robot import FtStatus, Robot, RobotState, WrenchBatch, WrenchSample
from twin.sensors import device as dev
from twin.sensors.errors import (
    BadDeviceError,
    InvalidArgumentError,
    NoDeviceError,
    NotConnectedError,
)
from twin.sensors.filters import LowPassBank
from twin.sensors.ports import SENSOR_PORT, FramePorts, WrenchState, frame_pose
from twin.sensors.sampling import (
    TARE_MIN_SAMPLES,
    SampleCounter,
    TareResult,
    TareWindow,
    tare_expected_samples,
)
from twin.sensors.wrench_log import WrenchLog
from twin.spatial import SE3, batch

_log = logging.getLogger("twin.sensors")
SENSOR_LINK = "ft_sensor"


@dataclass(frozen=True)
class Calibration:
    """``G`` (6, 6) and ``b`` (6,) N, N m: device output = ``G @ gauge + b``; ``source`` says
    where they came from."""

    G: np.ndarray
    b: np.ndarray
    source: str


@dataclass(frozen=True)
class FtServiceHealth:
    """What the F/T service saw since ``connect`` (``FtSensorService.health()``).

    processed: samples filtered and published. lost: samples the backend received but could not
    hand over (queue overflow). rejected: samples the backend dropped as implausible.
    log_missed / log_total: as ``log_info``. log_fault: the first log write failure of the current
    (or last) logging session, or None.
    """

    processed: int
    lost: int
    rejected: int
    log_missed: int
    log_total: int
    log_fault: str | None

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.rejected == 0 and self.log_fault is None


class FtSensorService:
    """F/T services over ``robot`` (module doc). Use as a context manager or call ``close()``."""

    def __init__(
        self,
        robot: Robot,
        *,
        sensor_pose: Callable[[RobotState], object] | None = None,
        publish_covariance: bool = True,
    ) -> None:
        self._robot = robot
        self._sensor_pose = sensor_pose or self._fk_sensor_pose
        self._publish_cov = publish_covariance
        self._device = None
        self._connected = False
        self._config_mode = False
        self._calibration = Calibration(np.eye(6), np.zeros(6), "not read yet")
        self._calibration_stale = False
        self._filter_flags = dev.DEFAULT_FILTER_FLAGS
        self._lowpass = LowPassBank()
        self._cutoffs = np.zeros(6)
        self._offset = np.zeros(6)
        self._cov: np.ndarray | None = None
        self._tare: TareWindow | None = None
        self._tare_result: TareResult | None = None
        self._ports = FramePorts()
        self._logs: list[WrenchLog] = []
        self._counter = SampleCounter()
        self._payload = None  # twin.sensors.payload.PayloadCompensation
        self._processed = self._lost = self._rejected = 0
        self._carry: tuple[WrenchSample, ...] = ()
        self._last_t_us: int | None = None
        # A backend with a queue overrides Robot.wrench_samples; without one the service takes
        # the latest sample of the state it reads anyway (no second read per cycle).
        self._queued = type(robot).wrench_samples is not Robot.wrench_samples

    # ----------------------------------------------------------------- connection
    def connect(self) -> None:
        """Probe the robot's F/T device (``C``, ``w``, ``R``) and read its calibration.

        Raises ``NoDeviceError`` if the robot has none, ``BadDeviceError`` if it does not answer
        as expected. Connecting twice is a no-op.
        """
        if self._connected:
            return
        device = self._robot.ft_device
        if device is None:
            raise NoDeviceError(
                f"{type(self._robot).__name__} has no F/T sensor device (its ft_device is None: "
                "no F/T sensor configured, or a sim robot opened without its F/T model, e.g. "
                "sensors={'imu'}); expected a robot with an F/T sensor"
            )
        dev.command(device, "C", "C")
        self._device = device
        try:
            self._read_configuration()
        finally:
            dev.command(device, "R", "R")  # back to streaming whatever the dump said
        self._connected = True
        self._config_mode = False
        self._processed = self._lost = self._rejected = 0
        # Of what arrived before the connection only the latest sample is processed.
        self._carry = self._robot.wrench_samples().samples[-1:] if self._queued else ()
        self._reconfigure()

    def disconnect(self) -> None:
        """Stop logging and forget the device; safe to call twice."""
        self.log_stop()
        self._connected = False
        self._device = None

    close = disconnect

    @property
    def connected(self) -> bool:
        return self._connected

    def __enter__(self) -> FtSensorService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require_connected(self):
        if not self._connected:
            raise NotConnectedError("the F/T service is not connected; call connect() first")
        return self._device

    def _read_configuration(self) -> None:
        """``w`` (in configuration mode): calibration rows, offsets and filter flags."""
        reply = dev.command(self._device, "w")
        matrix, offsets, flags = dev.parse_config_dump(reply)
        if matrix is None or offsets is None:
            self._calibration = Calibration(
                np.eye(6), np.zeros(6), "default (the device gave no m0..m5 / b in its w dump)"
            )
        else:
            self._calibration = Calibration(matrix, -offsets, "device (w command)")
        self._filter_flags = flags or dev.DEFAULT_FILTER_FLAGS
        self._calibration_stale = False

    def _reconfigure(self) -> None:
        """After a rate change: redesign the low-pass, restart the rate estimate."""
        fs = self._filter_rate_hz()
        nyquist = 0.5 * fs
        too_high = self._cutoffs >= nyquist
        if np.any(too_high):
            _log.warning(
                "F/T low-pass cut-offs %s Hz are at or above Nyquist (%g Hz) at %g Hz: "
                "those axes are now unfiltered",
                self._cutoffs[too_high],
                nyquist,
                fs,
            )
            self._cutoffs = np.where(too_high, 0.0, self._cutoffs)
        self._lowpass.design(self._cutoffs, fs)
        self._counter.reset()

    def _filter_rate_hz(self) -> float:
        return self._device.rate_hz

    # ----------------------------------------------------------------- cycle
    def update(self, state: RobotState | None = None) -> bool:
        """Process every sample received since the last call (``robot.wrench_samples()``; for a
        backend without a queue, the state's sample if its time stamp is new): filter, tare,
        publish, log. ``state`` (default ``robot.read()``) gives the joint state
        for world-fixed frames. Returns True if a new sample was processed. Never raises for a
        log write failure (``health()`` reports it)."""
        self._require_connected()
        if not self._queued:  # a backend without a queue: the latest sample of the state
            if state is None:
                state = self._robot.read()
            new = state.wrench is not None and state.wrench.t_us != self._last_t_us
            batch = WrenchBatch((state.wrench,) if new else ())
        else:
            batch = self._robot.wrench_samples()
        if batch.lost or batch.rejected:
            self._lost += batch.lost
            self._rejected += batch.rejected
            for log in self._logs:
                log.skip(batch.lost)
        samples = batch.samples
        if self._carry:
            samples, self._carry = self._carry + samples, ()
        if not samples:
            return False
        self._last_t_us = samples[-1].t_us
        if state is None:
            state = self._robot.read()
        payload = self._payload
        needs_pose = self._ports.needs_world or payload is not None
        pose = self._world_T_sensor(state) if needs_pose else None
        published = np.empty((len(samples), 6))
        finite = []  # which samples had a value (a non-finite one is published without)
        for row, sample in zip(published, samples):
            self._counter.advance(sample.t_us)
            wrench = self._condition(sample)
            if wrench is not None and payload is not None:
                wrench = payload.apply(wrench, pose)
            row[:] = np.nan if wrench is None else wrench
            finite.append(wrench is not None)
        self._processed += len(samples)
        last = samples[-1]
        cov = self._cov if self._publish_cov else None
        rows = self._ports.publish(last.t_us, last.status, published, pose, cov)
        if events.listening():  # for a recording: the newest wrench of every published frame
            events.publish(
                "ft",
                "frames",
                t_us=last.t_us,
                samples=len(samples),
                frames={name: frame_rows[-1] for name, frame_rows in rows.items()},
            )
        for log in self._logs:
            frame_rows = rows[log.frame].tolist()
            for sample, ok, row in zip(samples, finite, frame_rows):
                if ok:
                    log.record(sample.t_us, row)
        return True

    def _condition(self, sample) -> np.ndarray | None:
        """Calibrate (RAW samples), low-pass, tare: the published wrench (6,) in the physical
        sensor frame, or None for a non-finite sample (which does not enter the filter)."""
        raw = np.asarray(sample.wrench, dtype=float)
        if sample.status & FtStatus.RAW:
            raw = self._calibration.G @ raw + self._calibration.b
        if not np.all(np.isfinite(raw)):
            return None
        filtered = self._lowpass.step(raw)
        tare = self._tare
        valid = not sample.status & FtStatus.INVALID
        if tare is not None and valid and tare.add(sample.t_us, raw, filtered):
            self._finish_tare()  # the window spans the duration
        return filtered - self._offset

    def _world_T_sensor(self, state: RobotState) -> np.ndarray:
        """world_T_sensor (4, 4) from ``sensor_pose`` (a matrix, a (7,) pose or an SE3)."""
        pose = self._sensor_pose(state)
        if isinstance(pose, SE3):
            return pose.matrix()
        pose = np.asarray(pose, dtype=float)
        return batch.matrices_from_pose7(pose) if pose.shape == (7,) else pose

    def _fk_sensor_pose(self, state: RobotState) -> np.ndarray:
        return self._robot.model.fk(state.q, link=SENSOR_LINK)

    def set_payload_compensation(self, compensation) -> None:
        """Subtract a load's weight from every published wrench from now on
        (``twin.sensors.payload.PayloadCompensation``; None switches it off)."""
        self._payload = compensation

    # ----------------------------------------------------------------- ports and frames
    @property
    def wrench(self) -> WrenchState | None:
        """The latest wrench in the sensor frame (port ``wrench``), or None before a sample."""
        return self._ports.latest(SENSOR_PORT)

    def frame(self, name: str) -> WrenchState | None:
        """The latest wrench of exported frame ``name`` (port ``frame``), or None."""
        self._ports.check_exported(name)
        return self._ports.latest(name)

    def frames(self) -> list[str]:
        """Names of the exported frames."""
        return self._ports.exported()

    def set_sensor_frame(
        self,
        intrinsic: bool = True,
        x: float = 0.0,
        y: float = 0.0,
        z: float = 0.0,
        yaw: float = 0.0,
        pitch: float = 0.0,
        roll: float = 0.0,
    ) -> None:
        """Define the published sensor frame: relative to the physical sensor (``intrinsic``)
        or to the world; position m, Z-Y-X angles rad."""
        pose = frame_pose("sensor frame", x, y, z, yaw, pitch, roll)
        self._ports.set_sensor_frame(intrinsic, pose)

    def export_frame(
        self,
        name: str,
        x: float = 0.0,
        y: float = 0.0,
        z: float = 0.0,
        yaw: float = 0.0,
        pitch: float = 0.0,
        roll: float = 0.0,
        *,
        world: bool = False,
    ) -> None:
        """Export a frame (and its port) relative to the sensor frame, or to the world with
        ``world=True`` (a world-aligned frame for zero angles). Re-exporting a name moves it."""
        pose = frame_pose(f"frame {name!r}", x, y, z, yaw, pitch, roll)
        self._ports.export(name, world, pose)

    # ----------------------------------------------------------------- filter, calibration, rate
    def get_ft_filter(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ffc (3,), tfc (3,))`` force and torque X, Y, Z cut-offs in Hz (0 = off)."""
        return self._cutoffs[:3].copy(), self._cutoffs[3:].copy()

    def set_ft_filter(self, ffc, tfc) -> None:
        """Set the per-axis cut-offs (Hz, 0 = off) of the 2nd-order Butterworth low-pass.

        Raises ``InvalidArgumentError`` for a wrong length, a negative or non-finite value, or
        (when connected) a cut-off at or above Nyquist of the sample rate the service sees.
        """
        cut = np.concatenate((_three("ffc", ffc), _three("tfc", tfc)))
        if self._connected:
            fs = self._filter_rate_hz()
            too_high = np.flatnonzero(cut >= 0.5 * fs)
            if too_high.size:
                i = int(too_high[0])
                raise InvalidArgumentError(
                    f"cut-off {cut[i]} Hz on axis {i} is at or above Nyquist ({0.5 * fs} Hz) of "
                    f"the {fs} Hz sample rate; expected 0 (off) or less than {0.5 * fs} Hz"
                )
            self._lowpass.design(cut, fs)
        self._cutoffs = cut

    def get_calibration(self) -> Calibration:
        """The device calibration ``G`` (6, 6), ``b`` (6,) (module doc). Re-read after a raw
        command that may change it (a brief ``C``/``w``/``R`` exchange)."""
        device = self._require_connected()
        if self._calibration_stale:
            if self._config_mode:
                self._read_configuration()
            else:
                dev.command(device, "C", "C")
                self._read_configuration()
                dev.command(device, "R", "R")
        return self._calibration

    def hz(self) -> float:
        """Measured sample rate (Hz) over the last second of time stamps (0 before two samples)."""
        self._require_connected()
        return self._counter.hz()

    def set_rate(self, rate_hz: float) -> float:
        """Set the output rate to the nearest device setting (sinc length 64..2048, rate
        51200 / sinc Hz); returns the rate obtained (Hz)."""
        device = self._require_connected()
        if not (isinstance(rate_hz, (int, float)) and math.isfinite(rate_hz) and rate_hz > 0):
            raise InvalidArgumentError(f"rate must be a positive number of Hz, got {rate_hz!r}")
        sinc = dev.nearest_sinc(float(rate_hz))
        chop, fast, fir = self._filter_flags
        dev.command(device, "C", "C")
        dev.command(device, f"f,{sinc},{chop},{fast},{fir}", "f")
        dev.command(device, "R", "R")
        self._config_mode = False
        if device.sinc_length != sinc:
            raise BadDeviceError(f"sinc length {sinc} was acknowledged but the device reports "
                                 f"{device.sinc_length}")  # fmt: skip
        self._reconfigure()
        return device.rate_hz

    def raw_cmd(self, text: str) -> str:
        """Send a raw configuration command (1..64 printable ASCII characters); returns the
        device's reply."""
        device = self._require_connected()
        dev.validate_command(text)
        rate = device.rate_hz
        reply = dev.command(device, text)
        head = text.strip()[:1]
        if head == "C":
            self._config_mode = True
        elif head in ("R", "I", "#"):
            self._config_mode = False
        if head in ("m", "b", "c", "l", "I", "#"):
            self._calibration_stale = True
        if device.rate_hz != rate:
            self._reconfigure()
        return reply

    # ----------------------------------------------------------------- tare
    def begin_tare(self, duration: float = 2.0) -> None:
        """Start a tare over ``duration`` s of sensor time; it completes inside ``update()``."""
        self._require_connected()
        if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration > 0):
            raise InvalidArgumentError(f"tare duration must be > 0 s, got {duration!r}")
        rate = self._filter_rate_hz()
        expected = tare_expected_samples(duration, rate)
        if expected < TARE_MIN_SAMPLES:
            raise InvalidArgumentError(
                f"a tare of {duration:g} s gives {expected} samples at {rate:g} Hz; a tare needs "
                f"at least {TARE_MIN_SAMPLES}: expected a duration >= "
                f"{(TARE_MIN_SAMPLES - 1) / rate:g} s at this rate"
            )
        self._tare = TareWindow(round(duration * 1e6), rate)

    @property
    def tare_result(self) -> TareResult | None:
        """The last completed tare (``ok`` False if it had too few samples), or None."""
        return self._tare_result

    def tare(
        self,
        duration: float = 2.0,
        step: Callable[[], None] | None = None,
        max_cycles: int | None = None,
    ) -> TareResult:
        """Zero the current readings: average ``duration`` s of sensor time (module doc).

        ``step``: advances the robot one control period (default ``robot.step``). Gives up after
        ``max_cycles`` cycles (default: three times the expected count, plus 100) and returns a
        result with ``ok=False``; the previous offset then stays, as after a window with too few
        samples (module doc).
        """
        self.begin_tare(duration)
        step = step or self._robot.step
        if max_cycles is None:
            max_cycles = 3 * math.ceil(duration / self._robot.control_period_s) + 100
        for _ in range(max_cycles):
            step()
            self.update()
            if self._tare is None:
                return self._tare_result
        window, self._tare = self._tare, None
        return TareResult(
            False, self._offset.copy(), len(window.raw), 0.0,
            f"no {duration} s of valid samples within {max_cycles} control cycles "
            "(sensor stale or invalid?)",
        )  # fmt: skip

    def _finish_tare(self) -> None:
        """Apply the window's tare; one over too few samples fails and changes nothing."""
        window, self._tare = self._tare, None
        self._tare_result, cov = window.result(self._offset)
        if self._tare_result.ok:
            self._offset = self._tare_result.offset.copy()
            self._cov = cov

    # ----------------------------------------------------------------- logging
    def log(self, path: str = "/tmp/wrench.log", decimation: int = 1) -> None:
        """Log the wrench in the sensor frame to CSV ``path`` every ``decimation`` samples."""
        doc = _frame_doc("sensor frame", self._ports.intrinsic(SENSOR_PORT))
        self._start_log(path, decimation, SENSOR_PORT, doc)

    def log_frame(self, frame: str, path: str = "/tmp/wrench.log", decimation: int = 1) -> None:
        """Log the wrench in exported frame ``frame``."""
        self._ports.check_exported(frame)
        self._start_log(
            path, decimation, frame, _frame_doc("exported", self._ports.intrinsic(frame))
        )

    def _start_log(self, path: str, decimation: int, frame: str, doc: str) -> None:
        active = [lg for lg in self._logs if not lg.closed]
        if any(WrenchLog.same_file(lg.path, path) for lg in active if isinstance(path, str)):
            raise InvalidArgumentError(f"{path!r} is already being logged to")
        log = WrenchLog(path, decimation, frame, doc)
        self._logs = [*active, log] if active else [log]

    def log_stop(self) -> None:
        """Stop all logging (flush and close the files)."""
        for log in self._logs:
            log.close()

    def log_info(self) -> tuple[int, int]:
        """``(missed, total)`` log entries of the current (or last) logging session, exact: every
        due sample is counted, and missed are those not on disk (module doc of ``wrench_log``)."""
        return sum(lg.missed for lg in self._logs), sum(lg.total for lg in self._logs)

    def health(self) -> FtServiceHealth:
        """Samples processed, lost and rejected since ``connect``, and the logs' state."""
        missed, total = self.log_info()
        fault = next((lg.fault for lg in self._logs if lg.fault is not None), None)
        return FtServiceHealth(self._processed, self._lost, self._rejected, missed, total, fault)


def _three(name: str, values) -> np.ndarray:
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)) or np.any(arr < 0.0):
        raise InvalidArgumentError(
            f"{name} must be 3 cut-off frequencies >= 0 Hz (X, Y, Z; 0 = off), got {values!r}"
        )
    return arr


def _frame_doc(kind: str, intrinsic: bool) -> str:
    return f"{kind}, {'intrinsic: body-fixed' if intrinsic else 'world-fixed'}"
