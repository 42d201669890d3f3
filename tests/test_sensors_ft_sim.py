"""F/T services on the simulated arm (``sim.PyBulletRobot`` and its Bota-style sensor)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from twin.sim import FtSensorConfig, PyBulletRobot

from twin.robot import FtStatus
from twin.sensors import FtSensorService
from twin.spatial import SE3

NOISE = (0.05, 0.05, 0.05, 0.002, 0.002, 0.002)  # N, N m (std per axis)
BIAS = (1.5, -2.0, 0.7, 0.02, -0.01, 0.03)
GRAVITY_DOWN = np.array([0.0, 0.0, -1.0])


def run(robot, service, seconds: float, port=None) -> np.ndarray:
    """Step for ``seconds``; the published wrenches (one per new sample) of ``port``."""
    out = []
    for _ in range(round(seconds / robot.control_period_s)):
        robot.step()
        if service.update():
            state = service.wrench if port is None else service.frame(port)
            out.append(state.wrench)
    return np.array(out)


@pytest.fixture
def rig():
    robot = PyBulletRobot(seed=11, ft=FtSensorConfig(noise_std=NOISE, bias=BIAS))
    service = FtSensorService(robot)
    service.connect()
    yield robot, service
    service.close()
    robot.close()


def test_tare_zeroes_a_static_arm_then_a_1kg_payload_reads_its_weight_in_a_world_frame(rig):
    robot, service = rig
    service.export_frame("world", world=True)
    run(robot, service, 0.5)  # the arm settles on its hold controller
    before = run(robot, service, 0.5)
    assert np.abs(before.mean(axis=0)[:3]).max() > 1.0  # bias and tool weight before the tare
    steps = []
    result = service.tare(1.0, step=lambda: (steps.append(1), robot.step()))
    assert result.ok and result.duration_s == pytest.approx(1.0)
    assert result.samples == 201  # 200 Hz over 1 s of sensor time, both ends included
    assert len(steps) == math.ceil(1.0 / robot.control_period_s) + 1
    after = run(robot, service, 1.0)
    sigma = np.asarray(NOISE)
    assert np.all(np.abs(after.mean(axis=0)) < 4 * sigma / np.sqrt(10))  # zero within noise
    assert np.all(np.abs(after) < 5 * sigma)
    robot.attach_payload(1.0)
    run(robot, service, 1.5)  # sag and settle
    world = run(robot, service, 0.5, port="world")
    force = world[:, :3].mean(axis=0)
    assert float(force @ GRAVITY_DOWN) == pytest.approx(9.81, abs=0.03)
    assert (
        np.linalg.norm(force - (force @ GRAVITY_DOWN) * GRAVITY_DOWN) < 0.15
    )  # sag tilts a little
    state = service.frame("world")
    assert state.intrinsic is False and state.frame == "world"
    assert state.t_us == state.sec * 1_000_000 + state.nsec // 1000


def test_covariances_come_from_the_tare_and_follow_the_frame(rig):
    robot, service = rig
    service.set_ft_filter([10.0, 10.0, 10.0], [10.0, 10.0, 10.0])
    assert service.wrench is None or service.wrench.force_cov is None
    service.tare(1.0)
    run(robot, service, 0.1)
    cov = service.wrench.force_cov  # [xx, xy, xz, yy, yz, zz]
    variances = cov[[0, 3, 5]]
    assert np.all(variances > 0) and np.all(variances < NOISE[0] ** 2)  # filtered noise
    service.export_frame("turned", yaw=math.pi / 2)  # x' = y, y' = -x
    run(robot, service, 0.1)
    turned = service.frame("turned").force_cov
    np.testing.assert_allclose(turned[[0, 3, 5]], cov[[3, 0, 5]], rtol=1e-9)


def test_exported_and_sensor_frames_are_wrench_transforms(rig):
    robot, service = rig
    service.export_frame("tool", z=0.1, roll=math.pi)
    run(robot, service, 0.2)
    w, tool = service.wrench.wrench, service.frame("tool").wrench
    pose = SE3.from_pose7([0.0, 0.0, 0.1, 0.0, 1.0, 0.0, 0.0])  # roll pi about x
    r_t = pose.rotation.matrix().T
    np.testing.assert_allclose(tool[:3], r_t @ w[:3], atol=1e-12)
    np.testing.assert_allclose(
        tool[3:], r_t @ (w[3:] - np.cross(pose.translation, w[:3])), atol=1e-12
    )
    # a world-fixed sensor frame: the force in world axes is R f
    service.set_sensor_frame(False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    run(robot, service, 0.05)
    state = robot.read()
    world_r = robot.model.fk(state.q, link="ft_sensor")[:3, :3]
    sensor_frame = service.frame("tool")  # exported frames follow the sensor frame
    assert service.wrench.intrinsic is False and sensor_frame.intrinsic is False
    np.testing.assert_allclose(
        service.wrench.force, world_r @ np.asarray(state.wrench.wrench[:3]), atol=1e-9
    )


@pytest.mark.parametrize("rate", [200.0, 400.0, 800.0])
def test_hz_matches_the_configured_rate(rig, rate):
    robot, service = rig
    obtained = service.set_rate(rate)
    assert obtained == rate == robot.ft_device.rate_hz
    run(robot, service, 1.2)
    assert service.hz() == pytest.approx(obtained, rel=0.02)


def test_set_rate_picks_the_nearest_sinc_length(rig):
    robot, service = rig
    assert service.set_rate(333.0) == pytest.approx(51200 / 154)  # 332.5 is nearer than 334.6
    assert robot.ft_device.sinc_length == 154
    assert service.set_rate(5000.0) == 800.0  # shortest sinc (64)
    assert service.set_rate(1.0) == 25.0  # longest sinc (2048)


def test_log_at_decimation_10_holds_a_tenth_of_the_samples(rig, tmp_path):
    robot, service = rig
    service.export_frame("tool", z=0.1)
    run(robot, service, 0.1)
    path, frame_path = tmp_path / "w.csv", tmp_path / "tool.csv"
    service.log(str(path), 10)
    service.log_frame("tool", str(frame_path), 10)
    before = service.health().processed
    samples = len(run(robot, service, 2.0))
    service.log_stop()
    run(robot, service, 0.2)  # nothing more is written
    assert samples == 400 == service.health().processed - before - 40
    rows = np.loadtxt(path, delimiter=",", skiprows=2)
    assert len(rows) == samples // 10
    assert service.log_info() == (0, 2 * samples // 10)
    lines = path.read_text().splitlines()
    assert "sensor frame" in lines[0] and "force N" in lines[0] and "torque N m" in lines[0]
    assert lines[1] == "t_us,fx_N,fy_N,fz_N,tx_Nm,ty_Nm,tz_Nm"
    assert np.all(np.diff(rows[:, 0]) == 50_000)  # every 10th 200 Hz sample
    assert "frame: tool" in frame_path.read_text().splitlines()[0]


def test_log_keeps_every_sample_of_a_sensor_faster_than_the_control_loop(rig, tmp_path):
    robot, service = rig
    service.set_rate(800.0)  # faster than the 200 Hz control loop: 4 samples per step
    run(robot, service, 0.1)
    path = tmp_path / "fast.csv"
    service.log(str(path), 1)
    before = service.health().processed
    run(robot, service, 1.0)
    service.log_stop()
    received = service.health().processed - before
    rows = np.loadtxt(path, delimiter=",", skiprows=2)
    assert received == 800  # 800 Hz for 1 s: every sample handed over, none lost
    assert service.log_info() == (0, received) and len(rows) == received
    assert np.all(np.diff(rows[:, 0]) > 0)  # each sample once, in order
    assert service.health().ok


def test_calibration_is_read_from_the_device_and_applied_to_raw_samples():
    with PyBulletRobot(seed=2, ft=FtSensorConfig(bias=BIAS)) as robot:  # noise-free sensor
        service = FtSensorService(robot)
        service.connect()
        check_calibration(robot, service)


def check_calibration(robot, service):
    cal = service.get_calibration()
    np.testing.assert_array_equal(cal.G, np.eye(6))
    np.testing.assert_array_equal(cal.b, np.zeros(6))
    assert service.raw_cmd("C") == "r,0,C,0"
    rows = np.eye(6) * [1.1, 0.9, 1.05, 1.0, 1.2, 0.8]
    rows[0, 1] = 0.02
    for i, row in enumerate(rows):
        assert service.raw_cmd(f"m{i}," + ",".join(f"{v:9.6f}" for v in row)) == "r,0,m,0"
    assert service.raw_cmd("b,0.500,-0.250,1.000,0.010,0.000,-0.020") == "r,0,b,0"
    cal = service.get_calibration()
    np.testing.assert_allclose(cal.G, rows, atol=1e-6)
    np.testing.assert_allclose(cal.b, [-0.5, 0.25, -1.0, -0.01, 0.0, 0.02], atol=1e-6)
    assert service.raw_cmd("R") == "r,0,R,0"
    calibrated = run(robot, service, 0.3)[-1]
    # calibration use off: the device sends raw gauge values, the service applies G and b
    for text in ("C", "c,0,0,0,4", "R"):
        service.raw_cmd(text)
    run(robot, service, 0.3)
    assert robot.read().wrench.status & FtStatus.RAW
    np.testing.assert_allclose(service.wrench.wrench, calibrated, atol=1e-6)


def test_raw_command_reply_is_returned(rig):
    _, service = rig
    assert service.raw_cmd("C") == "r,0,C,0"
    assert service.raw_cmd("p?").splitlines()[-1] == "r,0,p,0"
    assert service.raw_cmd("R") == "r,0,R,0"


def test_connect_on_a_sim_robot_without_its_ft_model_names_what_is_missing():
    """Issue 31 item 15: ``sensors={"imu"}`` gave an AttributeError from the service."""
    from twin.sensors import NoDeviceError

    with PyBulletRobot(seed=1, sensors={"imu"}) as robot:
        assert robot.ft_device is None
        with pytest.raises(NoDeviceError, match=r"no F/T sensor device.*sensors=\{'imu'\}"):
            FtSensorService(robot).connect()
