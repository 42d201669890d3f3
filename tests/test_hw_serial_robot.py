"""``SerialRobot`` and its configuration: unit conversions, the servo-side mapping of the robot
law, command validation, both control modes and the watchdog, through the ideal emulators."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twin.hardware import ConfigError, InvalidArgumentError, SerialRobot, load_config
from twin.hardware.arm_bus import ArmBus
from twin.hardware.config import parse_config
from twin.hardware.emulator import EmulatorStack, IdealSource
from twin.hardware.emulator.testing import emulator_config, wait_until

from twin.kinematics import ArmModel
from twin.robot import Health, JointCommand, joint_torque

MODEL = ArmModel.default()
CONFIG = load_config()
MAP = CONFIG.joint_map()
KP = np.array([120.0, 240.0, 120.0, 25.0, 25.0, 10.0])
KD = np.array([6.0, 12.0, 4.0, 0.5, 0.5, 0.2])


def test_shipped_config_matches_the_model():
    assert tuple(j.name for j in CONFIG.joints) == MODEL.joint_names
    assert CONFIG.control_mode == "servo" and CONFIG.control_period_s == 0.004
    # every joint can reach its effort limit within the servo's current limit
    assert np.all(
        np.array([j.current_limit for j in CONFIG.joints]) * MAP.torque_unit >= MODEL.effort_limits
    )


def _raw() -> dict:
    import tomllib

    with open(CONFIG.source, "rb") as fh:
        return tomllib.load(fh)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["bus"].pop("port"), "bus.port"),
        (lambda d: d["joint"][2].update(direction=2), r"joint\[2\]\.direction"),
        (lambda d: d["joint"][1].update(id=1), "distinct"),
        (lambda d: d["robot"].update(control_mode="pwm"), "control_mode"),
        (lambda d: d["ft_sensor"].update(sinc_length=10), "sinc_length"),
        (lambda d: d["robot"].update(hold_kp=[1.0, 2.0]), "hold_kp"),
        (lambda d: d["joint"][0].update(ticks_per_rad="many"), "ticks_per_rad"),
    ],
)
def test_config_errors_name_the_key(edit, message):
    data = _raw()
    edit(data)
    with pytest.raises(ConfigError, match=message):
        parse_config(data)


def test_config_joint_names_must_match_the_model():
    data = _raw()
    data["joint"][0]["name"] = "shoulder"
    with pytest.raises(ConfigError, match="must match"):
        SerialRobot(parse_config(data))


@given(
    st.lists(st.floats(-3.0, 3.0), min_size=6, max_size=6),
    st.lists(st.floats(-5, 5), min_size=6, max_size=6),
)
def test_joint_map_round_trips_within_quantisation(q, qd):
    q, qd = np.array(q), np.array(qd)
    assert np.all(
        np.abs(MAP.q_from_ticks(MAP.ticks_from_q(q)) - q) <= 0.5 / MAP.ticks_per_rad + 1e-12
    )
    assert np.all(
        np.abs(MAP.qd_from_units(MAP.units_from_qd(qd)) - qd) <= MAP.velocity_unit / 2 + 1e-12
    )
    tau = qd  # any torques
    assert np.all(
        np.abs(MAP.tau_from_current(MAP.current_from_tau(tau)) - tau) <= MAP.torque_unit / 2 + 1e-12
    )


finite = st.floats(-1.0, 1.0)


@settings(max_examples=100)
@given(st.data())
def test_servo_side_mapping_reproduces_the_robot_law(data):
    """The emulated servo's loop with the written registers applies the law within quantisation."""
    arm = ArmBus(None, CONFIG, MODEL.effort_limits)
    vec = lambda lo, hi: np.array(data.draw(st.lists(st.floats(lo, hi), min_size=6, max_size=6)))  # noqa: E731
    cmd = JointCommand(
        q_des=vec(-1, 1),
        qd_des=vec(-1, 1),
        tau_ff=vec(-2, 2),
        kp=KP * vec(0.2, 1.5),
        kd=KD * vec(0, 1.5),
    )
    q, qd = vec(-1, 1), vec(-2, 2)
    t = arm.servo_targets(cmd)
    kp_s, kd_s = MAP.kp_kd_from_gains(t.p_gain, t.d_gain)
    servo = kp_s * (MAP.q_from_ticks(t.goal_ticks) - q) - kd_s * qd
    law = joint_torque(cmd, q, qd, np.full(6, np.inf))
    bound = (
        kp_s * 0.5 / MAP.ticks_per_rad
        + np.abs(kd_s - cmd.kd) * np.abs(qd)
        + np.abs(kp_s - cmd.kp) * np.abs(cmd.q_des - q)
    )
    assert np.all(np.abs(servo - law) <= bound + 1e-9)


def test_servo_side_mapping_refuses_what_the_servo_cannot_do():
    arm = ArmBus(None, CONFIG, MODEL.effort_limits)
    zero = np.zeros(6)
    with pytest.raises(InvalidArgumentError, match="kp > 0"):
        arm.servo_targets(JointCommand(q_des=zero, tau_ff=np.ones(6), kp=zero, kd=zero))
    with pytest.raises(InvalidArgumentError, match="kp of joint index 3"):
        arm.servo_targets(JointCommand(q_des=zero, kp=np.array([1, 1, 1, 1e4, 1, 1.0]), kd=zero))
    t = arm.servo_targets(JointCommand(q_des=zero, kp=zero, kd=KD))  # pure damping is fine
    assert np.all(t.p_gain == 0) and np.all(t.goal_ticks == 2048)


@given(st.lists(st.floats(-3000.0, 3000.0), min_size=6, max_size=6))
def test_a_hold_goal_is_clamped_to_the_servo_range_never_refused(q):
    """``servo_targets(hold=True)`` (a park, a safe hold): every goal inside +-256 revolutions;
    where the goal was inside, the same ticks as a command's; where not, the range's edge on the
    goal's side and the servo named in ``clamped``; a command with such a goal is refused."""
    from twin.hardware.protocols.dynamixel_table import Units

    arm = ArmBus(None, CONFIG, MODEL.effort_limits)
    lim = Units.EXTENDED_POSITION_LIMIT
    cmd = JointCommand(q_des=np.array(q), kp=KP, kd=KD)
    t = arm.servo_targets(cmd, hold=True)
    wanted = np.rint(np.array(q) * MAP.direction * MAP.ticks_per_rad + MAP.zero_ticks)
    inside = np.abs(wanted) <= lim
    assert np.all(np.abs(t.goal_ticks) <= lim)
    assert np.array_equal(t.goal_ticks[inside], wanted[inside].astype(np.int64))
    assert np.array_equal(t.goal_ticks[~inside], np.sign(wanted[~inside]).astype(np.int64) * lim)
    assert sorted(t.clamped) == [MAP.ids[j] for j in np.flatnonzero(~inside)]
    if inside.all():
        assert (
            np.array_equal(arm.servo_targets(cmd).goal_ticks, t.goal_ticks) and not t.clamp_text()
        )
    else:
        assert "beyond the servo range" in t.clamp_text()
        with pytest.raises(InvalidArgumentError, match="exceed the servo range"):
            arm.servo_targets(cmd)


@pytest.fixture(scope="module", params=["servo", "current"])
def rig(request):
    config = emulator_config(
        control_mode=request.param, watchdog_s=None, hold_gravity_compensation=False
    )
    stack = EmulatorStack(config, IdealSource(effort_limits=MODEL.effort_limits))
    robot = SerialRobot(stack.robot_config(), model=MODEL)
    yield robot, stack
    robot.close()
    stack.close()


def _run(robot, cmd, seconds):
    for _ in range(round(seconds / robot.control_period_s)):
        robot.write(cmd)
        robot.step()
    return robot.read()


def test_tracks_a_step_and_reports_sensors(rig):
    robot, stack = rig
    target = np.array([0.2, -0.15, 0.1, 0.3, -0.2, 0.4])
    # The ideal joints have no gravity, inertia 0.05 kg m^2. Servo-side, the hold gains are well
    # damped; host-side at 250 Hz the damping must stay well below J / T = 12.5 N m s/rad (the
    # README's "Control mode" section), so that mode gets a quarter of them.
    kd = KD if robot.config.control_mode == "servo" else KD / 4
    # 2 s: q_des ramps at the velocity limits, one step a period (twin.safety rule 6), and the
    # law-speed bound slows the weak-gain joints' approach on this damped plant
    state = _run(robot, JointCommand(q_des=target, kp=KP / 4, kd=kd), 2.0)
    assert state.health == Health.OK, state.health
    assert np.all(np.abs(state.q - target) < 4.0 / MAP.ticks_per_rad)
    assert np.all(np.abs(state.qd) < 0.05)
    reading = robot.ft.latest  # the frame and its device time stamp, as one object
    assert state.wrench is not None
    assert reading.sample.wrench == pytest.approx(
        stack.source.true_wrench(reading.device_t_us), abs=1e-4
    )
    assert state.imu.specific_force == pytest.approx([0, 0, 9.80665], abs=0.005)
    assert robot.ft_device is robot.ft and robot.ft_device.rate_hz == 200.0


def test_invalid_commands_keep_the_previous_one(rig):
    robot, _ = rig
    good = JointCommand(q_des=np.zeros(6), kp=KP / 4, kd=KD)
    robot.write(good)
    in_force = robot.command_in_force.q_des[2]  # (its ramp from the measured position: rule 6)
    bad = replace(good, q_des=np.array([0, 0, np.nan, 0, 0, 0]))
    with pytest.raises(ValueError, match="joint_3"):
        robot.write(bad)
    if robot.config.control_mode == "servo":  # beyond the Position P Gain register
        with pytest.raises(InvalidArgumentError, match="16383"):
            robot.write(replace(good, kp=np.full(6, 1e5)))
    assert robot.command_in_force.q_des[2] == in_force and robot.command_in_force.kp[0] == KP[0] / 4


def test_watchdog_holds_the_measured_position(tmp_path):
    config = emulator_config(watchdog_s=0.06, hold_gravity_compensation=False)
    config = replace(
        config, ft=replace(config.ft, enabled=False), imu=replace(config.imu, enabled=False)
    )
    source = IdealSource(inertia=0.01, damping=0.5, effort_limits=MODEL.effort_limits)  # overdamped
    with (
        EmulatorStack(config, source, link_dir=tmp_path) as stack,
        SerialRobot(stack.robot_config(), model=MODEL) as robot,
    ):
        assert robot.ft_device is None
        moving = JointCommand(q_des=np.full(6, 2.0), kp=KP / 4, kd=KD)
        robot.write(moving)
        wait_until(lambda: robot.step() or Health.WATCHDOG in robot.read().health, 5.0)
        held = robot.command_in_force.q_des  # the position measured when the watchdog fired
        assert np.all(held < 1.5) and np.all(robot.command_in_force.qd_des == 0)
        for _ in range(200):  # 0.8 s: the slowest hold loop (joint 6) settles in ~0.3 s
            robot.step()
        assert Health.WATCHDOG in robot.read().health
        assert np.all(np.abs(robot.read().q - held) < 0.03)  # it stopped instead of going to 2 rad
        assert np.all(robot.read().q < 1.0)
        robot.write(moving)
        assert Health.WATCHDOG not in robot.read().health
        assert any(e.flag == Health.WATCHDOG for e in robot.health_events)


def test_ft_services_layer_runs_on_the_serial_sensor(rig):
    from twin.sensors.ft_service import FtSensorService

    robot, _stack = rig
    svc = FtSensorService(robot)
    svc.connect()  # C, w (the configuration dump), R through BotaSensor.command
    try:
        cal = svc.get_calibration()
        assert np.allclose(cal.G, np.eye(6)) and np.allclose(cal.b, 0.0)  # parsed from the "w" dump
        assert svc.set_rate(400.0) == 400.0 and robot.ft.sinc_length == 128
        wait_until(lambda: robot.step() or svc.update(), 2.0)
        n0 = robot.ft.frames_received
        wait_until(lambda: robot.ft.frames_received >= n0 + 8, 2.0)
        stamps = np.diff([r.device_t_us for r in list(robot.ft.history)[-8:]])
        assert np.all(stamps == 2500)
    finally:
        svc.set_rate(200.0)
        svc.disconnect()


@pytest.mark.parametrize("mode", ["servo", "current"])
def test_stiff_gains_stay_stable_at_a_slow_rate_in_both_modes(mode):
    """README "Control mode": at 100 Hz (a slow bus) the hold gains on joint 2 (kd = 12 N m s/rad,
    inertia 0.05 kg m^2: kd T / J = 2.4 > 2) would fall into a limit cycle at the sampling rate
    if the loop were closed over the bus alone (as Goal Current in Operating Mode 0 did). Both
    modes close a loop inside the servo (``current``: the host's torque folded into the goal
    against the hold gains, which equal the command's here), so both hold within a tick.
    Lock-step, so the rate is exact on any machine."""
    from twin.hardware import ManualClock

    config = emulator_config(
        control_mode=mode, control_period_s=0.01, watchdog_s=None, hold_gravity_compensation=False
    )
    config = replace(
        config, ft=replace(config.ft, enabled=False), imu=replace(config.imu, enabled=False)
    )
    clock = ManualClock()
    target = np.array([0.2, -0.15, 0.1, 0.3, -0.2, 0.4])
    with (
        EmulatorStack(config, IdealSource(effort_limits=MODEL.effort_limits), clock=clock) as stack,
        SerialRobot(stack.robot_config(), model=MODEL, clock=clock) as robot,
    ):
        states = [_run(robot, JointCommand(q_des=target, kp=KP, kd=KD), 0.01) for _ in range(150)]
    qd = np.array([s.qd[1] for s in states[-40:]])  # joint 2 over the last 0.4 s
    assert np.all(qd == 0.0) and abs(states[-1].q[1] - target[1]) < 1.0 / MAP.ticks_per_rad[1]
