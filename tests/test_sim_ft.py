"""The simulated F/T sensor: physics convention, signal model, status bits, ASCII device."""

from __future__ import annotations

import numpy as np
import pytest
from twin.sim import FtSensorConfig, PyBulletRobot
from twin.sim.engine import Engine
from twin.sim.ft_sensor import FtSensorModel, reaction_to_sensor

from twin.robot import FtStatus, Health, JointCommand
from twin.safety import limits_for
from twin.spatial import SE3

G = 9.81
TOOL_SIDE = ("ft_sensor", "imu", "tool", "tcp")  # every link beyond ft_sensor_joint
N_CONFIGS = 20


def expected_wrench(
    model, q: np.ndarray, extra: tuple[float, np.ndarray] | None = None
) -> np.ndarray:
    """Weight of the tool side (URDF masses, FK of the kinematics package), in the sensor frame.

    extra: (mass kg, centre of mass (3,) m in the TCP frame) of a payload.
    """
    frames = model.fk_all(q)
    world_T_sensor = frames["ft_sensor"]
    masses, coms = [], []
    for link in TOOL_SIDE:
        inertial = model.link_inertial(link)
        masses.append(inertial.mass)
        coms.append(frames[link][:3, :3] @ inertial.com + frames[link][:3, 3])
    if extra is not None:
        masses.append(extra[0])
        coms.append(frames["tcp"][:3, :3] @ extra[1] + frames["tcp"][:3, 3])
    m = sum(masses)
    com_world = sum(mi * ci for mi, ci in zip(masses, coms)) / m
    r = world_T_sensor[:3, :3]
    force = r.T @ np.array([0.0, 0.0, -m * G])
    com_sensor = r.T @ (com_world - world_T_sensor[:3, 3])
    return np.concatenate([force, np.cross(com_sensor, force)])


def payload_gravity_torque(model, q: np.ndarray, mass: float, com: np.ndarray) -> np.ndarray:
    """Joint torques (6,) N m that carry a point mass at ``com`` (3,) m in the TCP frame."""
    tcp = model.fk(q, link="tcp")
    force = np.array([0.0, 0.0, -mass * G])
    lever = tcp[:3, :3] @ com
    return -model.jacobian(q, link="tcp").T @ np.concatenate([force, np.cross(lever, force)])


def hold_at(
    robot: PyBulletRobot, q: np.ndarray, steps: int, extra_ff: np.ndarray | None = None
) -> None:
    """Hold ``q`` with the default gains plus exact gravity feedforward; ``steps`` control steps."""
    robot.reset(q)
    ff = robot.engine.inverse_dynamics("arm", q, np.zeros(6), np.zeros(6))
    if extra_ff is not None:
        ff = ff + extra_ff
    robot.write(
        JointCommand(q_des=q, tau_ff=ff, kp=np.array(robot._hold_kp), kd=np.array(robot._hold_kd))
    )
    for _ in range(steps):
        robot.step()


@pytest.fixture(scope="module")
def ideal_robot():
    with PyBulletRobot(ft=FtSensorConfig(lowpass=False)) as robot:
        yield robot


def test_tool_hanging_at_home_reads_its_weight_along_plus_z(ideal_robot):
    """The documented convention: tool pointing down at home => fz = +m g, no lateral force."""
    model = ideal_robot.model
    hold_at(ideal_robot, model.home_q, 4)
    wrench = ideal_robot.read().wrench.wrench
    mass = sum(model.link_mass(link) for link in TOOL_SIDE)
    assert model.fk(model.home_q, link="ft_sensor")[2, 2] == pytest.approx(-1.0)  # sensor z down
    assert wrench[2] == pytest.approx(mass * G, rel=1e-6)
    np.testing.assert_allclose(wrench[:2], 0.0, atol=1e-6)


def test_static_wrench_matches_urdf_weight_on_random_configurations(ideal_robot):
    model = ideal_robot.model
    rng = np.random.default_rng(3)
    soft = limits_for(model)  # commands stop at the soft limits (twin.safety)
    for q in rng.uniform(soft.lower, soft.upper, (N_CONFIGS, 6)):
        hold_at(ideal_robot, q, 3)
        state = ideal_robot.read()
        exp = expected_wrench(model, state.q)
        got = state.wrench.wrench
        assert np.max(np.abs(state.qd)) < 1e-3
        assert np.linalg.norm(got[:3] - exp[:3]) <= 0.01 * np.linalg.norm(exp[:3])
        assert np.linalg.norm(got[3:] - exp[3:]) <= 0.01 * np.linalg.norm(exp[3:]) + 1e-9


def test_payload_changes_the_reading_by_exactly_its_weight(ideal_robot):
    model = ideal_robot.model
    q = model.home_q + np.array([0.3, -0.2, 0.1, 0.4, -0.3, 0.5])
    com = np.array([0.01, -0.02, 0.03])
    hold_at(ideal_robot, q, 5)
    before = ideal_robot.read()
    ideal_robot.attach_payload(0.5, com)
    try:  # feedforward for the payload too, so that the arm keeps exactly the same pose
        hold_at(ideal_robot, q, 25, payload_gravity_torque(model, q, 0.5, com))
        after = ideal_robot.read()
    finally:
        ideal_robot.detach_payload()
    assert ideal_robot.payload is None
    np.testing.assert_allclose(after.q, before.q, atol=1e-6)
    delta = after.wrench.wrench - before.wrench.wrench
    exp = expected_wrench(model, q, (0.5, com)) - expected_wrench(model, q)
    np.testing.assert_allclose(np.linalg.norm(delta[:3]), 0.5 * G, rtol=1e-5)
    np.testing.assert_allclose(delta, exp, atol=1e-4)


def test_reaction_conversion_with_a_rotated_inertial_frame(tmp_path):
    """PyBullet reports the reaction about the child's com in its inertial axes; check the map
    on a link whose inertial frame is offset and rotated."""
    urdf = tmp_path / "toy.urdf"
    inertia = '<inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/>'
    urdf.write_text(f"""<robot name="toy">
 <link name="base"><inertial><mass value="1"/>{inertia}</inertial></link>
 <joint name="j" type="fixed"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.5"/></joint>
 <link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="2"/>{inertia}</inertial></link>
 <joint name="ft" type="fixed"><parent link="arm"/><child link="s"/><origin xyz="0.4 0 0" rpy="0.3 0.5 0.2"/></joint>
 <link name="s"><inertial><origin xyz="0.01 0.02 0.03" rpy="0.7 -0.4 1.1"/><mass value="0.3"/>{inertia}</inertial></link>
 <joint name="t" type="fixed"><parent link="s"/><child link="tool"/><origin xyz="0 0 0.1" rpy="0.1 0 0"/></joint>
 <link name="tool"><inertial><origin xyz="0.03 -0.02 0.05"/><mass value="0.7"/>{inertia}</inertial></link>
</robot>""")
    with Engine() as eng:
        eng.load_urdf("toy", urdf)
        ft = eng.joint_index("toy", "ft")
        eng.enable_ft_sensor("toy", ft)
        eng.step()
        reaction = eng.joint_states("toy", [ft])[0][2]
        wrench = reaction_to_sensor(eng.link_inertial("toy", ft).link_T_inertial) @ np.array(
            reaction
        )
        sensor = eng.link_pose("toy", ft)
        tool = eng.link_pose("toy", eng.link_index("toy", "tool"))
    world_T_s = SE3.from_pose7(sensor)
    c_s = np.array([0.01, 0.02, 0.03])  # the sensor link's com, sensor frame
    c_tool = (world_T_s.inverse() @ SE3.from_pose7(tool)).act(np.array([0.03, -0.02, 0.05]))
    com = (0.3 * c_s + 0.7 * c_tool) / 1.0
    force = world_T_s.rotation.inverse().act(np.array([0.0, 0.0, -1.0 * G]))
    np.testing.assert_allclose(wrench[:3], force, atol=1e-5)  # PyBullet: float precision
    np.testing.assert_allclose(wrench[3:], np.cross(com, force), atol=1e-5)


# --------------------------------------------------------------------------- signal model
def feed(model: FtSensorModel, values: np.ndarray, dt_us: int = 1000, t0_us: int = 1000) -> list:
    """Feed one reaction (6,) per physics step; returns the emitted samples in order."""
    out, last = [], None
    for k, v in enumerate(values):
        model.observe(t0_us + k * dt_us, tuple(v))
        if model.latest is not last:
            out.append(model.latest)
            last = model.latest
    return out


def make_model(**kw) -> FtSensorModel:
    # identity inertial frame: the sensor wrench is minus the reaction
    return FtSensorModel(
        FtSensorConfig(**kw),
        1e-3,
        reaction_to_sensor(np.array([0, 0, 0, 1, 0, 0, 0])),
        np.random.default_rng(0),
    )


@pytest.mark.parametrize("sinc, period_us", [(256, 5000), (512, 10000), (64, 1250)])
def test_rate_is_51200_over_sinc_with_sample_and_hold(sinc, period_us):
    model = make_model(sinc_length=sinc)
    samples = feed(model, np.zeros((200, 6)))  # physics steps at t = 1, 2, ..., 200 ms
    times = [s.t_us for s in samples]
    # a sample on the first step, then on every step whose interval (t - 1 ms, t] holds an instant
    steps = range(2000, 200_001, 1000)
    expected = [1000] + [t for t in steps if t // period_us > (t - 1000) // period_us]
    assert times == expected
    assert abs(len(samples) - 200_000 / period_us) <= 1


def test_lowpass_is_a_moving_average_over_the_sinc_window():
    model = make_model(sinc_length=256)  # 5 ms window = 5 physics steps
    values = np.zeros((40, 6))
    values[12:, 2] = -10.0  # a step in the reaction => +10 N on fz after the window
    samples = feed(model, values)
    by_time = {s.t_us: s.wrench[2] for s in samples}
    assert by_time[15000] == pytest.approx(10.0 * 3 / 5)  # steps 13..15 of 11..15 see the step
    assert by_time[20000] == pytest.approx(10.0)
    raw = make_model(sinc_length=256, lowpass=False)
    assert {s.t_us: s.wrench[2] for s in feed(raw, values)}[15000] == 10.0


def test_noise_and_bias_statistics_and_exactness_without_them():
    values = np.tile(np.arange(1.0, 7.0) / 3.0, (3000, 1))
    for s in feed(make_model(lowpass=False), values):
        np.testing.assert_array_equal(s.wrench, -values[0])  # bit for bit
    for s in feed(make_model(), values):  # the moving average of a constant: exact up to rounding
        np.testing.assert_allclose(s.wrench, -values[0], rtol=1e-15)
    std = (0.1, 0.2, 0.3, 0.01, 0.02, 0.03)
    bias = (1.0, -2.0, 0.5, 0.1, -0.1, 0.05)
    noisy = make_model(noise_std=std, bias=bias, lowpass=False)
    w = np.array([s.wrench for s in feed(noisy, values)])
    assert np.all(np.abs(w.mean(0) - (-values[0] + bias)) <= 4 * np.array(std) / np.sqrt(len(w)))
    np.testing.assert_allclose(w.std(0), std, rtol=0.15)


def test_over_range_and_invalid_status_bits():
    model = make_model(range=(10, 10, 10, 1, 1, 1), lowpass=False)
    values = np.zeros((30, 6))
    values[5:15, 0] = -12.0  # 12 N > 10 N range
    values[15:25, 3] = -2.0  # 2 N m > 1.5 x 1 N m: saturated
    by_time = {s.t_us: s for s in feed(model, values)}
    assert by_time[5000].status == FtStatus.OK
    assert by_time[10000].status == FtStatus.OVER_RANGE
    assert by_time[10000].wrench[0] == 12.0
    assert by_time[20000].status == FtStatus.OVER_RANGE | FtStatus.INVALID
    assert by_time[20000].wrench[3] == 1.5  # clipped at saturation


def test_temperature_warmup():
    model = make_model(temperature_c=25.0, warmup_rise_c=10.0, warmup_tau_s=1.0)
    assert model.temperature_c(0) == 25.0
    assert model.temperature_c(1_000_000) == pytest.approx(25.0 + 10.0 * (1 - np.exp(-1)))


# --------------------------------------------------------------------------- ASCII device
def test_device_commands_match_the_bota_replies(ideal_robot):
    dev = ideal_robot.ft_device
    assert dev.command("f,512,0,0,1") == "r,0,f,1"  # rejected in run mode
    assert dev.command("C") == "r,0,C,0"
    assert dev.command("p?") == "p,0,1234,0,0,SensONE-sim\r\nr,0,p,0"
    assert dev.command("c,0,1,0,4") == "r,0,c,0"
    assert dev.command("f,512,0,0,1") == "r,0,f,0"
    assert dev.command("f,5,0,0,1") == "r,0,f,2"  # sinc outside 64..2048
    assert dev.command("b,1.000,0.000,0.000,0.000,0.000,0.000") == "r,0,b,0"
    assert dev.command("m0,2.000000,0.000000,0.000000,0.000000,0.000000,0.000000") == "r,0,m,0"
    assert dev.command("m7,1,0,0,0,0,0") == "r,0,m,2"
    assert "f,512,0,0,1" in dev.command("w").splitlines()
    assert dev.sinc_length == 512
    hold_at(ideal_robot, ideal_robot.model.home_q, 1)  # reset restarts; config mode persists
    ideal_robot.step()
    assert dev.command("R") == "r,0,R,0"
    for _ in range(10):
        ideal_robot.step()
    w = ideal_robot.read().wrench
    mass_g = sum(ideal_robot.model.link_mass(link) for link in TOOL_SIDE) * G
    assert w.wrench[0] == pytest.approx(-1.0, abs=1e-6)  # 2 * fx(=0) - 1 offset
    assert w.wrench[2] == pytest.approx(mass_g, rel=1e-6)
    assert dev.rate_hz == 100.0
    assert dev.command("C") == "r,0,C,0"
    assert dev.command("l") == "r,0,l,0"  # back to the saved (factory) settings
    assert dev.command("R") == "r,0,R,0"
    assert dev.sinc_length == 256


def test_config_mode_stops_streaming_and_flags_stale(ideal_robot):
    hold_at(ideal_robot, ideal_robot.model.home_q, 2)
    dev = ideal_robot.ft_device
    assert dev.command("C") == "r,0,C,0"
    t_last = ideal_robot.read().wrench.t_us
    for _ in range(10):
        ideal_robot.step()
    state = ideal_robot.read()
    assert state.wrench.t_us == t_last
    assert state.health & Health.FT_STALE
    assert dev.command("R") == "r,0,R,0"
    ideal_robot.step()
    assert not ideal_robot.read().health & state.health.FT_STALE


def test_raw_mode_and_too_slow_status():
    model = make_model(lowpass=False)
    dev_settings = model.settings
    dev_settings.use_calibration = 0
    dev_settings.calibration[:] = 2 * np.eye(6)
    model.apply_settings()
    s = feed(model, np.ones((3, 6)))[-1]
    assert s.status == FtStatus.RAW
    np.testing.assert_array_equal(s.wrench, -np.ones(6))  # calibration not applied
    slow_line = make_model(sinc_length=128, baud_code=2)  # 400 Hz > 311 frames/s at 115200
    assert feed(slow_line, np.zeros((2, 6)))[-1].status == FtStatus.APP_TOO_SLOW
    ok = make_model(sinc_length=128)
    assert feed(ok, np.zeros((2, 6)))[-1].status == FtStatus.OK


def test_thermal_bias_and_its_compensation():
    model = make_model(
        temperature_c=35.0, thermal_bias_per_c=(0.1, 0, 0, 0, 0, 0.01), lowpass=False
    )
    values = np.zeros((3, 6))
    np.testing.assert_allclose(feed(model, values)[-1].wrench, [1.0, 0, 0, 0, 0, 0.1])
    model.settings.temp_comp = 1  # what ``c,1,...`` selects
    np.testing.assert_array_equal(feed(model, values, t0_us=10_000)[-1].wrench, np.zeros(6))
    assert feed(model, values, t0_us=20_000)[-1].temperature_c == 35.0
