"""F/T service behaviour that needs no physics: errors, validation, tare failure, non-finite
samples. A scripted robot and device stand in for a backend."""

from __future__ import annotations

import numpy as np
import pytest

from twin.robot import FtSensorDevice, FtStatus, Robot, RobotState, WrenchSample
from twin.sensors import (
    BadDeviceError,
    FtError,
    FtSensorService,
    FtSystemError,
    InvalidArgumentError,
    NoDeviceError,
    NotConnectedError,
)


class ScriptedDevice(FtSensorDevice):
    """Answers the Bota commands the service uses; ``replies`` overrides per command head."""

    def __init__(self, replies: dict[str, str] | None = None, obey_filter: bool = True) -> None:
        self.sent: list[str] = []
        self._sinc = 256
        self._replies = replies or {}
        self._obey = obey_filter

    @property
    def sinc_length(self) -> int:
        return self._sinc

    def command(self, text: str, timeout_s: float = 1.0) -> str:
        self.sent.append(text)
        head = text[0]
        if head in self._replies:
            return self._replies[head]
        if head == "f" and self._obey:
            self._sinc = int(text.split(",")[1])
        if head == "w":
            return "c,0,1,0,4\r\nf,256,0,0,1\r\nr,0,w,0"  # no m rows, no b line
        return f"r,0,{head},0"


class ScriptedRobot(Robot):
    """Wrench samples at 200 Hz from ``wrench_of(k)``, one control period of 4 ms per step."""

    control_period_s = 0.004

    def __init__(self, device=None, wrench_of=None, frozen: bool = False) -> None:
        self._device = device
        self._wrench_of = wrench_of or (lambda k: np.array([1.0, 2.0, 3.0, 0.1, 0.2, 0.3]))
        self._t_us = 0
        self._frozen = frozen

    @property
    def ft_device(self):
        return self._device

    def read(self) -> RobotState:
        k = 0 if self._frozen else self._t_us // 5000
        sample = WrenchSample(k * 5000, self._wrench_of(k), FtStatus.OK)
        z = np.zeros(6)
        return RobotState(self._t_us, z, z, z, wrench=sample)

    def _apply(self, command) -> None:
        pass

    def step(self) -> None:
        self._t_us += 4000


def connected(robot=None) -> FtSensorService:
    service = FtSensorService(robot or ScriptedRobot(ScriptedDevice()))
    service.connect()
    return service


def test_error_classes_are_distinct():
    classes = [
        NoDeviceError,
        BadDeviceError,
        InvalidArgumentError,
        NotConnectedError,
        FtSystemError,
    ]
    for a in classes:
        assert issubclass(a, FtError)
        assert not any(issubclass(a, b) for b in classes if b is not a)


def test_connect_errors():
    with pytest.raises(NoDeviceError):
        FtSensorService(ScriptedRobot(None)).connect()
    with pytest.raises(BadDeviceError, match="expected the acknowledgement 'r,0,C,0'"):
        FtSensorService(ScriptedRobot(ScriptedDevice({"C": "garbage"}))).connect()

    class Broken(ScriptedDevice):
        def command(self, text, timeout_s=1.0):
            raise TimeoutError("no reply")

    with pytest.raises(BadDeviceError, match="no reply"):
        FtSensorService(ScriptedRobot(Broken())).connect()


def test_connect_probes_and_reads_the_configuration():
    device = ScriptedDevice()
    service = connected(ScriptedRobot(device))
    assert device.sent == ["C", "w", "R"]
    cal = service.get_calibration()
    assert "default" in cal.source
    np.testing.assert_array_equal(cal.G, np.eye(6))
    service.connect()  # no-op
    assert device.sent == ["C", "w", "R"]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.hz(),
        lambda s: s.update(),
        lambda s: s.tare(0.1),
        lambda s: s.begin_tare(0.1),
        lambda s: s.raw_cmd("C"),
        lambda s: s.set_rate(100.0),
        lambda s: s.get_calibration(),
    ],
)
def test_not_connected(call):
    service = FtSensorService(ScriptedRobot(ScriptedDevice()))
    with pytest.raises(NotConnectedError):
        call(service)
    service.connect()
    call(service)
    service.disconnect()
    service.disconnect()  # idempotent
    with pytest.raises(NotConnectedError):
        call(service)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.raw_cmd(""), "1..64 characters"),
        (lambda s: s.raw_cmd("f" * 65), "1..64 characters"),
        (lambda s: s.raw_cmd("C\n"), "printable ASCII"),
        (lambda s: s.raw_cmd("b,é"), "printable ASCII"),
        (lambda s: s.raw_cmd(7), "string"),
        (lambda s: s.set_rate(0.0), "positive"),
        (lambda s: s.set_rate(float("nan")), "positive"),
        (lambda s: s.set_ft_filter([1, 2], [1, 2, 3]), "3 cut-off"),
        (lambda s: s.set_ft_filter([1, -2, 3], [1, 2, 3]), "3 cut-off"),
        (lambda s: s.set_ft_filter([1, 2, 3], [1, 2, 125.0]), "Nyquist"),
        (lambda s: s.tare(0.0), "duration"),
        (lambda s: s.log("/tmp/x.csv", 0), "decimation"),
        (lambda s: s.log_frame("nope", "/tmp/x.csv"), "no exported frame"),
        (lambda s: s.frame("nope"), "no exported frame"),
        (lambda s: s.export_frame("", 0, 0, 0), "frame name"),
        (lambda s: s.export_frame("x" * 65), "frame name"),
        (lambda s: s.export_frame("a", float("inf")), "finite"),
        (lambda s: s.set_sensor_frame(True, 0, 0, float("nan")), "finite"),
    ],
)
def test_invalid_arguments(call, match):
    service = connected()
    with pytest.raises(InvalidArgumentError, match=match):
        call(service)
    assert service.raw_cmd("C") == "r,0,C,0"  # the service still works


def test_raw_cmd_is_passed_to_the_device_and_its_reply_returned():
    device = ScriptedDevice({"p": "p,0,1234,0,0,Rokubi\r\nr,0,p,0"})
    service = connected(ScriptedRobot(device))
    assert service.raw_cmd("p?") == "p,0,1234,0,0,Rokubi\r\nr,0,p,0"
    assert device.sent[-1] == "p?"


def test_set_rate_needs_the_device_to_follow():
    service = connected(ScriptedRobot(ScriptedDevice(obey_filter=False)))
    with pytest.raises(BadDeviceError, match="sinc length"):
        service.set_rate(100.0)


def test_log_to_an_impossible_path_is_a_system_error(tmp_path):
    service = connected()
    with pytest.raises(FtSystemError) as info:
        service.log(str(tmp_path / "missing" / "w.csv"))
    assert info.value.code != 0 and "missing" in info.value.what
    service.log(str(tmp_path / "w.csv"))
    with pytest.raises(InvalidArgumentError, match="already"):
        service.log(str(tmp_path / "w.csv"))


def test_tare_gives_up_on_a_stale_sensor_and_keeps_the_offset():
    robot = ScriptedRobot(ScriptedDevice(), frozen=True)
    service = connected(robot)
    result = service.tare(0.5, max_cycles=50)
    assert not result.ok and "50 control cycles" in result.reason
    np.testing.assert_array_equal(result.offset, np.zeros(6))
    assert service.tare_result is None


def test_begin_tare_completes_inside_the_callers_loop():
    robot = ScriptedRobot(ScriptedDevice())
    service = connected(robot)
    service.begin_tare(0.1)
    for _ in range(30):
        robot.step()
        service.update()
    assert service.tare_result.ok and service.tare_result.samples == 21
    np.testing.assert_allclose(service.wrench.wrench, np.zeros(6), atol=1e-12)


def test_non_finite_sample_is_published_without_values_and_does_not_poison_the_filter():
    robot = ScriptedRobot(
        ScriptedDevice(), wrench_of=lambda k: np.full(6, np.nan) if k == 3 else np.ones(6)
    )
    service = connected(robot)
    service.set_ft_filter([5.0, 5.0, 5.0], [5.0, 5.0, 5.0])
    seen = []
    for _ in range(10):
        robot.step()
        if service.update():
            seen.append(service.wrench)
    assert [s.t_us // 5000 for s in seen] == list(range(9))
    assert [s.force is None for s in seen] == [k == 3 for k in range(9)]
    assert seen[3].wrench is None and seen[3].torque is None
    np.testing.assert_allclose(seen[-1].wrench, np.ones(6), atol=1e-12)


def test_update_processes_each_time_stamp_once():
    robot = ScriptedRobot(ScriptedDevice())
    service = connected(robot)
    assert service.update() is True
    assert service.update() is False  # same sample
    robot.step()  # 4 ms later the 200 Hz sensor still holds the sample of t = 0
    assert service.update() is False
    robot.step()
    assert service.update() is True


class StarvedRobot(ScriptedRobot):
    """Its samples stop after the first and resume at ``resume_us`` (a reader starved under
    load, then a late burst): the tare window spans its duration with a handful of samples."""

    def __init__(self, resume_us: int) -> None:
        super().__init__(ScriptedDevice())
        self._resume_us = resume_us

    def read(self) -> RobotState:
        state = super().read()
        if 0 < state.wrench.t_us < self._resume_us:
            return RobotState(state.t_us, state.q, state.qd, state.tau, wrench=self._first)
        self._first = getattr(self, "_first", state.wrench)
        return state


def test_a_tare_over_too_few_samples_fails_naming_the_count_and_the_minimum():
    """Issue 31: a 2-sample tare reported ok under load. 0.5 s at 200 Hz gives 101 samples; a
    window that spans 0.5 s with 12 of them fails and leaves the offset as it was."""
    service = connected(StarvedRobot(resume_us=450_000))
    result = service.tare(0.5)
    assert not result.ok and result.samples == 12
    assert "tare over 12 samples" in result.reason and "at least 51 are needed" in result.reason
    assert "the 101 that 0.5 s at 200 Hz gives" in result.reason
    np.testing.assert_array_equal(result.offset, np.zeros(6))
    assert service.tare_result is result
    assert service.wrench.force_cov is None  # no covariance from a failed window
    np.testing.assert_allclose(service.wrench.force, [1.0, 2.0, 3.0])  # nothing subtracted


def test_a_tare_with_enough_samples_is_ok_at_the_minimum():
    """At 200 Hz, 0.075 s gives exactly the 16 samples a tare needs; it zeroes the readings."""
    service = connected(ScriptedRobot(ScriptedDevice()))
    result = service.tare(0.075)
    assert result.ok and result.samples == 16
    np.testing.assert_allclose(service.wrench.wrench, np.zeros(6), atol=1e-12)


def test_a_tare_too_short_to_give_the_minimum_is_refused_at_once():
    service = connected()
    with pytest.raises(
        InvalidArgumentError, match=r"gives 11 samples at 200 Hz.*at least 16.*>= 0\.075 s"
    ):
        service.begin_tare(0.05)
    assert service.tare_result is None
