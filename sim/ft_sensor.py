"""A Bota-style six-axis force/torque sensor model and its ASCII-command device.

Physics source: PyBullet's joint reaction of the fixed ``ft_sensor_joint``, i.e. the wrench the
parent (flange) exerts on the child (``ft_sensor`` link), about the child's centre of mass, in the
child's inertial frame (verified in ``tests/test_sim_ft.py``). ``reaction_to_sensor`` turns it into
the product's convention:

    wrench (6,) [fx, fy, fz, tx, ty, tz] N, N m, in the sensor frame (the ``ft_sensor`` link frame),
    is the wrench that everything beyond the sensor (sensor half, IMU, tool, payload) exerts on the
    sensor, with the torque taken about the sensor frame origin.

So a tool hanging at rest reads its weight: at home with the tool pointing down (sensor z along
world -z), ``fz = +m g``; in general ``f = R^T m g_world`` and ``t = c x f`` with ``R``
world_R_sensor and ``c`` the centre of mass of the tool side in the sensor frame.

Signal chain (all in the sensor frame, per output sample):
    filtered = moving average of the physics wrench over the sinc window (``sinc_length / 51200`` s,
               i.e. ``round(window / physics_dt)`` physics steps, at least one): the sinc-like
               low-pass; off with ``FtSensorConfig(lowpass=False)``.
    gauge    = filtered + bias + thermal_bias_per_c * (T - 25 C) (unless temperature compensation
               is on) + Gaussian noise (std per axis, from the run's seeded generator).
    output   = M @ gauge - offsets   (M: calibration rows ``m0..m5``, identity by default;
               offsets: the ``b`` command), or ``gauge`` with ``FtStatus.RAW`` when calibration use
               is off (``c,<t>,0,...``).
    status   = OVER_RANGE if any |output| > range; INVALID (and clipped) beyond
               ``SATURATION_FACTOR * range``; APP_TOO_SLOW if the output rate exceeds what the
               physics rate or the serial line (37-byte frames at the configured baud) can carry.
Samples are produced at ``51200 / sinc_length`` Hz, on the first physics step at or after each
nominal instant, and held until the next one (sample-and-hold); each also goes into a bounded
queue that ``take()`` empties (every sample, for ``Robot.wrench_samples``; overflow counted).
In configuration mode (after ``C``) the sensor does not stream: the last sample is held and goes
stale.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import gt

import numpy as np

from twin.robot import FtSensorDevice, FtStatus, WrenchBatch, WrenchSample
from twin.sensors.bota_commands import BAUD_BY_CODE as BAUD_CODES
from twin.sensors.bota_commands import BotaCommandInterpreter, check_sinc
from twin.sensors.bota_commands import BotaSettings as DeviceSettings
from twin.sensors.device import MEASURING_RANGE
from twin.spatial import quaternion

ADC_CLOCK_HZ = 51200  # output rate = ADC_CLOCK_HZ / sinc_length (docs/protocols/bota-serial.md)
QUEUE_SAMPLES = 4096  # samples kept for ``take()``: 5 s at the fastest rate (800 Hz)
SATURATION_FACTOR = 1.5  # INVALID (saturation) beyond this multiple of the measuring range
REFERENCE_TEMPERATURE_C = 25.0


@dataclass(frozen=True)
class FtSensorConfig:
    """Settings of the simulated F/T sensor; the defaults are an ideal sensor (no noise, no bias).

    range: (6,) N, N m per axis (over-range above it). noise_std, bias, thermal_bias_per_c: (6,)
    in N, N m (per degree C for the thermal term). Temperature: ``temperature_c`` plus a warm-up
    ``warmup_rise_c * (1 - exp(-t / warmup_tau_s))``.
    """

    sinc_length: int = 256
    lowpass: bool = True
    noise_std: tuple[float, ...] = (0.0,) * 6
    bias: tuple[float, ...] = (0.0,) * 6
    range: tuple[float, ...] = MEASURING_RANGE
    temperature_c: float = 30.0
    warmup_rise_c: float = 0.0
    warmup_tau_s: float = 600.0
    thermal_bias_per_c: tuple[float, ...] = (0.0,) * 6
    baud_code: int = 4
    serial_number: int = 1234
    product_name: str = "SensONE-sim"

    def __post_init__(self) -> None:
        check_sinc(self.sinc_length)
        for name in ("noise_std", "bias", "range", "thermal_bias_per_c"):
            arr = np.asarray(getattr(self, name), float)
            if arr.shape != (6,) or not np.all(np.isfinite(arr)):
                raise ValueError(
                    f"FtSensorConfig.{name} must be 6 finite numbers, got {getattr(self, name)}"
                )
        if np.any(np.asarray(self.noise_std) < 0) or np.any(np.asarray(self.range) <= 0):
            raise ValueError("FtSensorConfig: noise_std must be >= 0 and range > 0 on every axis")
        if self.baud_code not in BAUD_CODES:
            raise ValueError(
                f"FtSensorConfig.baud_code {self.baud_code} not in {sorted(BAUD_CODES)}"
            )


def reaction_to_sensor(link_T_inertial: np.ndarray) -> np.ndarray:
    """(6, 6) map from PyBullet's fixed-joint reaction to the sensor-frame wrench (module doc).

    link_T_inertial: (7,) pose of the sensor link's inertial frame in the sensor link frame.
    """
    r = quaternion.to_matrix(np.asarray(link_T_inertial[3:], float))
    c = np.asarray(link_T_inertial[:3], float)
    t = np.zeros((6, 6))
    t[:3, :3] = -r
    t[3:, 3:] = -r
    t[3:, :3] = -quaternion.skew(c) @ r
    return t


class FtSensorModel:
    """Turns the per-physics-step reaction into sampled ``WrenchSample``s (module doc).

    ``observe`` is called once per physics step with the integer time (us) and the raw reaction
    tuple; ``latest`` is the held output sample. ``settings`` are the device settings in force
    (``SimFtDevice`` installs its active settings here on ``R``, ``I`` and ``#``).
    """

    def __init__(
        self,
        config: FtSensorConfig,
        physics_dt: float,
        to_sensor: np.ndarray,
        rng: np.random.Generator,
    ) -> None:
        self.config = config
        self.physics_dt = physics_dt
        self._to_sensor = np.asarray(to_sensor, float)
        self._rng = rng
        self._noise = np.asarray(config.noise_std, float)
        self._bias = np.asarray(config.bias, float)
        self._thermal = np.asarray(config.thermal_bias_per_c, float)
        self._range = np.asarray(config.range, float)
        self._saturation = SATURATION_FACTOR * self._range
        self._range_list = self._range.tolist()
        self._saturation_list = self._saturation.tolist()
        self._has_bias = bool(self._bias.any())
        self._has_thermal = bool(self._thermal.any())
        self._has_noise = bool(self._noise.any())
        self.settings = DeviceSettings(baud_code=config.baud_code, sinc_length=config.sinc_length)
        self.streaming = True
        self._ring: deque = deque(maxlen=1)
        self._average_maps: dict[int, np.ndarray] = {}
        self._constant_temperature = config.warmup_rise_c == 0.0
        self._next_k = 0
        self.latest: WrenchSample | None = None
        self._queue: deque[WrenchSample] = deque(maxlen=QUEUE_SAMPLES)
        self._emitted = 0  # samples emitted since the last take(): lost = emitted - queued
        self.apply_settings()

    # ----------------------------------------------------------- configuration
    def apply_settings(self) -> None:
        """Recompute rate and filter window from ``settings`` (run on ``R`` and at start)."""
        sinc = self.settings.sinc_length
        period_s = sinc / ADC_CLOCK_HZ
        #: The output period in force, us.
        self.period_us = sinc * 1e6 / ADC_CLOCK_HZ
        self.window = max(1, round(period_s / self.physics_dt)) if self.config.lowpass else 1
        self._ring = deque(self._ring, maxlen=self.window)
        self._instant_num = sinc * 625  # nominal instants k * sinc * 625 / 32 us
        # too slow also when the output rate exceeds the physics rate
        self._status = self.settings.status(period_s < self.physics_dt * (1.0 - 1e-9))
        self._identity_cal = bool(np.array_equal(self.settings.calibration, np.eye(6)))
        self._has_offsets = bool(self.settings.offsets.any())

    @property
    def sinc_length(self) -> int:
        return self.settings.sinc_length

    def temperature_c(self, t_us: int) -> float:
        c = self.config
        if c.warmup_rise_c == 0.0:
            return c.temperature_c
        return c.temperature_c + c.warmup_rise_c * (1.0 - math.exp(-t_us * 1e-6 / c.warmup_tau_s))

    def restart(self) -> None:
        """Forget the filter history; the next physics step emits a sample, then the nominal
        ``51200 / sinc_length`` grid resumes."""
        self._ring.clear()
        self._next_k = 0

    def _k_at_or_after(self, t_us: int) -> int:
        # nominal instants k * sinc * 1e6 / 51200 us = k * sinc * 625 / 32 us, exact in integers
        num = self.settings.sinc_length * 625
        return -(-(t_us * 32) // num)

    # ----------------------------------------------------------- hot path
    def observe(self, t_us: int, reaction: Sequence[float]) -> None:
        """Feed one physics step's raw reaction (6,); emits a sample when one falls due."""
        self._ring.append(reaction)  # a deque: the oldest value drops out of the window
        if self.streaming and t_us * 32 >= self._next_k * self._instant_num:
            self._emit(t_us)
            self._next_k = self._k_at_or_after(t_us + 1)

    def _emit(self, t_us: int) -> None:
        ring = self._ring
        n = len(ring)
        if n == 1:
            gauge = self._to_sensor @ ring[0]
        else:  # moving average (a per-axis sum) and frame change: (to_sensor / n) @ sum
            gauge = self._average_to_sensor(n) @ list(map(sum, zip(*ring)))
        temperature = (
            self.config.temperature_c if self._constant_temperature else self.temperature_c(t_us)
        )
        if self._has_bias:
            gauge += self._bias
        if self._has_thermal and not self.settings.temp_comp:
            gauge += self._thermal * (temperature - REFERENCE_TEMPERATURE_C)
        if self._has_noise:
            gauge += self._noise * self._rng.standard_normal(6)
        out, status = gauge, self._status
        s = self.settings
        if s.use_calibration:
            if not self._identity_cal:
                out = s.calibration @ out
            if self._has_offsets:
                out -= s.offsets
        magnitude = list(map(abs, out.tolist()))
        if any(map(gt, magnitude, self._range_list)):
            status |= FtStatus.OVER_RANGE
            if any(map(gt, magnitude, self._saturation_list)):
                status |= FtStatus.INVALID
                out = np.clip(out, -self._saturation, self._saturation)
        out.flags.writeable = False
        self.latest = sample = WrenchSample(t_us, out, status, temperature)  # positional: hot path
        self._queue.append(sample)
        self._emitted += 1

    def take(self) -> WrenchBatch:
        """Every sample emitted since the previous call, oldest first; ``lost`` those the bounded
        queue dropped meanwhile."""
        samples = tuple(self._queue)
        lost = self._emitted - len(samples)
        self._queue.clear()
        self._emitted = 0
        return WrenchBatch(samples, lost)

    def _average_to_sensor(self, n: int) -> np.ndarray:
        m = self._average_maps.get(n)
        if m is None:
            m = self._average_maps[n] = self._to_sensor / n
        return m


class SimFtDevice(BotaCommandInterpreter, FtSensorDevice):
    """The simulated sensor's ASCII configuration interface (``docs/protocols/bota-serial.md``).

    The commands and replies are ``twin.sensors.bota_commands``' (``p?`` answers
    ``p,0,<serial>,0,0,<product>`` from the ``FtSensorConfig``; both data formats are accepted).
    The sensor model follows: it stops streaming on ``C``; on ``R``, ``I`` and ``#`` it takes the
    active settings, restarts its filter and output grid and streams again.
    ``sinc_length`` is the configured (pending) value, as the ``w`` dump shows it.
    """

    def __init__(self, model: FtSensorModel, clock_us: Callable[[], int]) -> None:
        c = model.config
        super().__init__(model.settings, serial_number=c.serial_number, product_name=c.product_name)
        self._model = model
        self._clock_us = clock_us  # () -> current simulated time (us)
        self._restarts_seen = self.restarts
        model.settings = self.active

    @property
    def sinc_length(self) -> int:
        return self.pending.sinc_length

    def command(self, text: str, timeout_s: float = 1.0) -> str:
        reply = self.reply(text)
        model = self._model
        model.streaming = self.streaming
        if self.restarts != self._restarts_seen:  # R, I or #: the active settings take effect
            self._restarts_seen = self.restarts
            model.settings = self.active
            model.apply_settings()
            model.restart()
        return reply
