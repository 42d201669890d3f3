"""The calibration workflow on the twin: the sim arm visits poses through the robot interface, a
simulated camera (computed from the measured joints and the model, with noise) observes a
marker, and TCP, base-frame and hand-eye calibration recover the truth within bounds that
follow from the noise; degenerate data are reported; recordings round-trip through a file."""

from __future__ import annotations

import numpy as np
import pytest
from twin.sim import PyBulletRobot

from twin.calibration.base import calibrate_base
from twin.calibration.camera import CameraNoise, SimulatedCamera
from twin.calibration.handeye import hand_eye_fixed, hand_eye_wrist
from twin.calibration.recording import Recording
from twin.calibration.rigid import invert, rotation_angle
from twin.calibration.tcp import calibrate_tcp
from twin.calibration.workflow import pivot_configurations, record
from twin.kinematics import ArmModel
from twin.spatial import quaternion as quat

MODEL = ArmModel.default()
HOME = MODEL.home_q
FLANGE_T_TCP = invert(MODEL.fk(HOME, "flange")) @ MODEL.fk(HOME, "tcp")  # the sim's truth
TOUCH_STD_M = 5e-4  # how well the tip is put on the divot, per axis
NOISE = CameraNoise(position_std_m=5e-4, rotation_std_rad=2e-3)
TILTS = np.array(
    [[0.35, 0, 0], [-0.35, 0, 0], [0, 0.35, 0], [0, -0.35, 0], [0.25, 0.25, 0], [-0.25, 0.25, 0.5]]
)
POSES = HOME + np.random.default_rng(8).uniform(-0.3, 0.3, (12, 6))  # varied wrist poses


def pose(rv, p) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = quat.to_matrix(quat.exp(np.asarray(rv, float)))
    out[:3, 3] = p
    return out


FLANGE_T_CAM = pose([0.0, 0.0, 0.3], [0.05, 0.0, 0.03])  # wrist camera
BASE_T_MARKER = pose([np.pi, 0.0, 0.0], MODEL.fk(HOME, "tcp")[:3, 3] - [0.0, 0.0, 0.25])
BASE_T_CAM = pose([2.5, 0.0, 0.0], [0.8, 0.0, 0.4])  # fixed camera, looking at the arm


@pytest.fixture(scope="module")
def robot():
    with PyBulletRobot(seed=3, watchdog_s=None) as r:
        yield r


def _pose_bounds(recording: Recording) -> tuple[float, float]:
    """(rad, m): 3 sigma of one relative pose's noise (two observations, hence sqrt 2; averaging
    over the pairs only lowers it). Positions: the camera's noise plus its rotation noise over
    the largest camera-marker distance."""
    distance = np.linalg.norm(recording.cam_T_marker[:, :3, 3], axis=1).max()
    rot_bound = 3 * np.sqrt(2) * NOISE.rotation_std_rad
    pos_bound = 3 * np.sqrt(2) * (NOISE.position_std_m + NOISE.rotation_std_rad * distance)
    return rot_bound, pos_bound


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    return float(rotation_angle(a[:3, :3].T @ b[:3, :3]))


def test_tcp_by_pivoting_recovers_the_urdf_tip(robot):
    tip, point = FLANGE_T_TCP[:3, 3], MODEL.fk(HOME, "tcp")[:3, 3]
    rng = np.random.default_rng(1)
    configs = pivot_configurations(MODEL, tip, point, TILTS, HOME, TOUCH_STD_M, rng)
    est = calibrate_tcp(record(robot, configs).flange_poses(MODEL))
    assert est.warning == ""
    # bound: 4 standard deviations of the least-squares estimate for the placement noise
    bound = 4.0 * TOUCH_STD_M * np.sqrt(np.diag(est.unit_covariance))
    err = np.concatenate((est.flange_p_tcp - tip, est.pivot - point))
    assert np.all(np.abs(err) < bound), (err, bound)
    assert est.rms < 3 * TOUCH_STD_M * np.sqrt(3)  # the residuals are the placement noise


def test_tcp_pivoting_about_the_vertical_only_is_reported(robot):
    tip, point = FLANGE_T_TCP[:3, 3], MODEL.fk(HOME, "tcp")[:3, 3]
    tilts = np.array([[0, 0, a] for a in (-0.6, -0.2, 0.2, 0.6)])
    configs = pivot_configurations(MODEL, tip, point, tilts, HOME)
    est = calibrate_tcp(record(robot, configs).flange_poses(MODEL))
    assert "one axis" in est.warning


def test_hand_eye_with_a_wrist_camera_recovers_its_mount(robot, tmp_path):
    camera = SimulatedCamera(MODEL, "wrist", FLANGE_T_CAM, BASE_T_MARKER, NOISE, seed=2)
    recording = record(robot, POSES, camera.observe, mount="wrist")
    recording.save(tmp_path / "wrist.npz")
    loaded = Recording.load(tmp_path / "wrist.npz")  # the same code runs on recorded data
    np.testing.assert_array_equal(loaded.q, recording.q)
    est = hand_eye_wrist(loaded.flange_poses(MODEL), loaded.cam_T_marker)
    assert est.warning == "" and loaded.mount == "wrist"
    rot_bound, pos_bound = _pose_bounds(loaded)
    assert _angle(est.X, FLANGE_T_CAM) < rot_bound
    assert np.linalg.norm(est.X[:3, 3] - FLANGE_T_CAM[:3, 3]) < pos_bound
    assert np.linalg.norm(est.other[:3, 3] - BASE_T_MARKER[:3, 3]) < pos_bound
    assert est.position_residuals.max() < pos_bound


def test_hand_eye_with_a_fixed_camera_and_the_base_frame_from_its_points(robot):
    camera = SimulatedCamera(MODEL, "fixed", BASE_T_CAM, FLANGE_T_TCP, NOISE, seed=3)
    recording = record(robot, POSES, camera.observe, mount="fixed")
    flange = recording.flange_poses(MODEL)
    est = hand_eye_fixed(flange, recording.cam_T_marker)
    assert est.warning == ""
    rot_bound, pos_bound = _pose_bounds(recording)
    assert _angle(est.other, BASE_T_CAM) < rot_bound
    assert np.linalg.norm(est.other[:3, 3] - BASE_T_CAM[:3, 3]) < pos_bound
    assert np.linalg.norm(est.X[:3, 3] - FLANGE_T_TCP[:3, 3]) < pos_bound
    # base frame: the camera as a point tracker of the TCP marker (positions only)
    points_base = (flange @ FLANGE_T_TCP)[:, :3, 3]
    base = calibrate_base(points_base, recording.cam_T_marker[:, :3, 3])
    assert base.warning == ""
    truth = invert(BASE_T_CAM)  # cam_T_base
    k, sigma = len(points_base), NOISE.position_std_m
    s = base.spread
    # bounds: 4 sigma of the rigid fit: rotation about the worst axis sigma / sqrt(K (s2^2 +
    # s3^2)) (sqrt 3 for three axes), translation the centroid's sigma sqrt(3 / K) plus that
    # rotation over the distance of the centroid
    rot_bound = 4 * np.sqrt(3) * sigma / np.sqrt(k * (s[1] ** 2 + s[2] ** 2))
    lever = np.linalg.norm(points_base.mean(axis=0))
    pos_bound = 4 * sigma * np.sqrt(3 / k) + rot_bound * lever
    assert _angle(base.meas_T_base, truth) < rot_bound
    assert np.linalg.norm(base.meas_T_base[:3, 3] - truth[:3, 3]) < pos_bound
    assert base.rms < 3 * sigma * np.sqrt(3)


def test_wrist_turns_alone_are_reported_as_degenerate(robot):
    configs = np.tile(HOME, (5, 1))
    configs[:, 5] = np.linspace(-1.0, 1.0, 5)  # only joint 6: one axis, the TCP on it
    camera = SimulatedCamera(MODEL, "wrist", FLANGE_T_CAM, BASE_T_MARKER, NOISE, seed=4)
    recording = record(robot, configs, camera.observe)
    flange = recording.flange_poses(MODEL)
    assert "one axis" in hand_eye_wrist(flange, recording.cam_T_marker).warning
    points = (flange @ FLANGE_T_TCP)[:, :3, 3]
    assert "one line" in calibrate_base(points, points + 0.1).warning


def test_recordings_refuse_other_files(tmp_path):
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="not a calibration recording"):
        Recording.load(tmp_path / "other.npz")
    rec = Recording(np.zeros((1, 6)), np.zeros((1, 4, 4)), ("a",) * 6)
    with pytest.raises(ValueError, match="not the model's"):
        rec.flange_poses(MODEL)
    with pytest.raises(ValueError, match="mount"):
        SimulatedCamera(MODEL, "ceiling", np.eye(4), np.eye(4))
    with pytest.raises(ValueError, match="position_std_m"):
        CameraNoise(position_std_m=-1.0)
