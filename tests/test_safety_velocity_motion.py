"""Rule 6 of the safety layer (``twin.safety``): velocity limits hold on the motion, not only on
the command field. The ``q_des`` ramp and the law-speed bound as properties; stiff gains on the
sim; the demo and the shipped scenarios on both backends (sim; hardware through the emulators in
lock-step), their measured joint speeds asserted from their traces and recordings; a push is
reported as a velocity-limit event."""

from __future__ import annotations

import json
import pathlib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twin.kinematics import ArmModel
from twin.robot import JointCommand
from twin.safety import (
    DAMPING_RATIO_BOUNDED,
    LAW_SPEED_MARGIN,
    VELOCITY_MARGIN,
    VELOCITY_WINDOW_S,
    TargetRamp,
    limits_for,
    velocity_events_seen,
    velocity_summary,
)

MODEL = ArmModel.default()
LIMITS = limits_for(MODEL)
VMAX = np.asarray(MODEL.velocity_limits, float)
BOUND = VMAX * (1.0 + VELOCITY_MARGIN)
PERIOD_S = 0.005
#: The shipped reach policy's gains (policies/reach.md): under-damped on joints 1-5.
POLICY_KP = np.array([60.0, 120.0, 60.0, 12.0, 12.0, 8.0])
POLICY_KD = np.array([3.0, 6.0, 3.0, 0.3, 0.3, 0.2])
START = np.array([0.0, 0.3, 1.2, 0.0, 1.1, 0.0])


def windowed_speeds(t_s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """(K, n) rad/s: each reading's displacement over the last ``VELOCITY_WINDOW_S`` (what
    ``VelocityWatch`` measures) from times ``t_s`` (K,) s and positions ``q`` (K, n) rad;
    readings less than a window from the first are 0."""
    start = np.searchsorted(t_s, t_s - VELOCITY_WINDOW_S + 1e-9, side="right") - 1
    ok = start >= 0
    out = np.zeros_like(q)
    i = np.flatnonzero(ok)
    out[i] = np.abs(q[i] - q[start[i]]) / (t_s[i] - t_s[start[i]])[:, None]
    return out


def assert_within_bound(t_s, q, what: str, tick_rad=None) -> np.ndarray:
    """Every measured speed within the URDF limit plus the margin (plus, on the hardware, one
    encoder tick per window: the position's resolution); returns the peak ratios (n,)."""
    speeds = windowed_speeds(np.asarray(t_s, float), np.asarray(q, float))
    slack = 0.0 if tick_rad is None else np.asarray(tick_rad) / VELOCITY_WINDOW_S
    peak = speeds.max(axis=0)
    assert np.all(peak <= BOUND + slack), (what, np.round(peak / VMAX, 3))
    return peak / VMAX


# ----------------------------------------------------------------------- the rules as properties
def _ramp(ref) -> TargetRamp:
    ramp = TargetRamp(MODEL, LIMITS, PERIOD_S)
    ramp.ref = list(map(float, ref))
    return ramp


def _validated(**fields) -> JointCommand:
    base = dict(q_des=START, kp=POLICY_KP, kd=POLICY_KD)
    return JointCommand(**(base | fields)).validated(MODEL.joint_names, MODEL.effort_limits, LIMITS)


joint_q = st.lists(st.floats(-1.0, 1.0), min_size=6, max_size=6).map(
    lambda d: np.clip(START + np.array(d), LIMITS.lower, LIMITS.upper)  # inside the soft limits
)


@given(joint_q, joint_q)
def test_q_des_moves_one_period_step_at_most_and_reaches_its_target(ref, target):
    ramp = _ramp(ref)
    cmd = _validated(q_des=target)
    now = ramp.limit(cmd, None)
    ramp.accept(now, cmd)
    step = VMAX * PERIOD_S
    assert np.all(np.abs(now.q_des - ref) <= step + 1e-12)
    assert ramp.advance(None, None) is None  # the step() after the write keeps its command
    steps = 1
    while (nxt := ramp.advance(None, None)) is not None:  # one step()'s advance each
        assert np.all(np.abs(nxt.q_des - np.array(ramp.ref)) <= step + 1e-12)
        ramp.ref = nxt.q_des.tolist()
        steps += 1
        assert steps < 1000
    assert nxt is None and ramp.ref == cmd.q_des.tolist()  # arrived: the command itself
    # the number of periods a ramp at the limits takes, to one period
    assert steps <= int(np.ceil(np.max(np.abs(cmd.q_des - ref) / step))) + 1


@given(joint_q)
def test_a_target_within_one_periods_step_is_applied_unchanged(ref):
    target = ref + 0.9 * VMAX * PERIOD_S * np.sign(np.arange(6) - 2.5)
    cmd = _validated(q_des=np.clip(target, LIMITS.lower, LIMITS.upper))
    assert _ramp(ref).limit(cmd, None) is cmd  # the planner's trajectories: not even copied


def _law_speed(cmd: JointCommand, q: np.ndarray) -> np.ndarray:
    from twin.kinematics.gravity import gravity_torques

    load = cmd.tau_ff - gravity_torques(MODEL, q)
    return cmd.qd_des + (load + cmd.kp * (cmd.q_des - q)) / cmd.kd


@settings(max_examples=200)
@given(joint_q, joint_q, st.floats(1.0, 20.0), st.lists(st.floats(-1, 1), min_size=6, max_size=6))
def test_the_law_never_aims_faster_than_the_limit_on_an_under_damped_joint(q, target, stiff, v):
    """Stiff gains (kp up to 20x the policy's, its damping): the speed the applied command's law
    aims for stays within the limit (plus the headroom of the command's own ``qd_des``)."""
    from twin.dynamics import ArmDynamics

    cmd = _validated(q_des=target, kp=POLICY_KP * stiff, qd_des=np.array(v) * VMAX)
    ramp = _ramp(target)  # the ramp's step does not limit: the bound alone
    now = ramp._towards(cmd, ramp.ref, q.tolist(), cmd.qd_des.tolist())
    m = np.diagonal(ArmDynamics(MODEL).mass_matrix(q))
    under = cmd.kd**2 < 4 * DAMPING_RATIO_BOUNDED**2 * cmd.kp * m
    aim = _law_speed(now, q)
    cap = VMAX + LAW_SPEED_MARGIN * np.abs(cmd.qd_des)
    inside = (now.q_des > LIMITS.lower) & (now.q_des < LIMITS.upper)  # rule 1 clamps first
    assert np.all(np.abs(aim[under & inside]) <= cap[under & inside] * (1 + 1e-9) + 1e-9)


def test_a_far_target_written_every_period_moves_one_step_a_period():
    """A caller that writes the same far target every period (a user's loop): ``q_des`` moves
    one period's step at the limit per period, not one for the write and one for the step."""
    from twin.sim import HOLD_KD, HOLD_KP, PyBulletRobot

    with PyBulletRobot(watchdog_s=None) as robot:
        robot.reset(START)
        target = START.copy()
        target[0] += 1.0
        cmd = JointCommand(q_des=target, kp=np.array(HOLD_KP), kd=np.array(HOLD_KD))
        ramp, _ = robot._rate_rules()
        refs = []
        for _ in range(round(1.2 / robot.control_period_s)):
            robot.write(cmd)
            robot.step()
            refs.append(ramp.ref[0])
        moves = np.diff(refs)
        step = VMAX[0] * robot.control_period_s
        assert moves.max() <= step + 1e-12 and moves.max() >= step * (1 - 1e-9)
        arrived = int(np.argmax(np.array(refs) >= target[0] - 1e-12))
        assert arrived * robot.control_period_s >= 1.0 / VMAX[0] - 2 * robot.control_period_s
        assert not robot.velocity_events()


# ------------------------------------------------------------------------- stiff gains, the sim
@pytest.mark.parametrize("stiff", [1.0, 4.0])
def test_stiff_steps_on_every_joint_stay_within_the_bound_and_still_arrive(stiff):
    """A 0.6 rad step on each joint in turn, written once and held (the command stays in force:
    the ramp brings it), with the policy's gains and 4x its stiffness (damping ratio 0.15-0.3)."""
    from twin.sim import PyBulletRobot

    from twin.kinematics.gravity import gravity_torques

    with PyBulletRobot(watchdog_s=None) as robot:  # written once, in force until replaced
        for j in range(6):
            robot.reset(START)
            target = START.copy()
            target[j] += 0.6
            tau = gravity_torques(MODEL, target)
            robot.write(JointCommand(q_des=target, tau_ff=tau, kp=POLICY_KP * stiff, kd=POLICY_KD))
            t, q = [], []
            for _ in range(round(2.0 / robot.control_period_s)):
                robot.step()
                s = robot.read()
                t.append(s.t_us * 1e-6)
                q.append(s.q)
            assert_within_bound(t, q, f"joint {j + 1}, stiffness x{stiff}")
            assert abs(q[-1][j] - target[j]) < 0.01  # arrived (a written command stays in force)
            assert not robot.velocity_events()


def test_a_push_is_reported_as_a_velocity_limit_event():
    """An unmodelled force on the TCP while a soft hold is in force: the watch measures the
    joints run away faster than their limit plus the margin and publishes an event per joint."""
    from twin.sim import PyBulletRobot

    with PyBulletRobot() as robot, velocity_events_seen() as seen:
        robot.reset(START)
        hold = JointCommand(q_des=START, kp=POLICY_KP / 20, kd=POLICY_KD / 20)
        robot.set_external_force(np.array([0.0, 300.0, 0.0]))
        for _ in range(60):
            robot.write(hold)
            robot.step()
    events = robot.velocity_events()
    assert events and seen
    assert [e["joint"] for e in seen] == [e.joint for e in events]
    first = events[0]
    assert first.peak_rad_s > first.bound_rad_s == pytest.approx(VMAX[first.index] * 1.25)
    line = velocity_summary(seen)
    assert line.startswith(f"velocity limit exceeded {len(seen)} times: joint {first.joint} at")
    assert velocity_summary([]).startswith("velocity limits held")


# ------------------------------------------------------------------- the demo on both backends
def _demo_trace(out) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    trace = np.load(out / "trace.npz")
    return trace["t_s"], trace["q"], trace["phase"]


@pytest.fixture(scope="module")
def sim_demo(tmp_path_factory):
    from twin.demo import run_demo

    out = tmp_path_factory.mktemp("demo-sim")
    return run_demo("sim", out=out, plots=False), out


def test_the_sim_demo_moves_every_joint_within_its_velocity_limit(sim_demo):
    steps, out = sim_demo
    assert all(s.ok for s in steps), [(s.name, s.figure) for s in steps if not s.ok]
    assert not any("velocity_events" in s.data for s in steps)
    t, q, phase = _demo_trace(out)
    ratio = assert_within_bound(t, q, "sim demo")
    policy = np.array([p.startswith("policy:") for p in phase])
    # before rule 6 the policy drove joint 2 at 3.7x its limit; now at most the margin
    assert assert_within_bound(t[policy], q[policy], "policy").max() <= 1.0 + VELOCITY_MARGIN
    assert ratio.max() > 0.9  # the planner's moves still run at their limits


def test_the_hardware_demo_moves_every_joint_within_its_velocity_limit(tmp_path):
    from twin.hardware import ManualClock
    from twin.hardware.emulator import EmulatorStack, make_sim_source
    from twin.hardware.emulator.testing import emulator_config

    from twin.backends import open_robot
    from twin.demo import SCENE, PayloadGripper, run_demo

    config = emulator_config(stale_after_s=1.0)  # replies may wait for the sim to step
    config = replace(config, bus=replace(config.bus, reply_timeout_s=2.0))
    clock = ManualClock()
    with (
        EmulatorStack(config, make_sim_source(seed=0, scene=SCENE), clock=clock) as stack,
        stack.clock_running(200),  # bring-up waits see time pass (as in test_demo)
        open_robot("hardware", config=stack.robot_config(), clock=clock) as robot,
    ):
        gripper = PayloadGripper(stack.source.robot, stack.source.lock)
        steps = run_demo("hardware", out=tmp_path, gripper=gripper, robot=robot, plots=False)
    assert all(s.ok for s in steps), [(s.name, s.figure) for s in steps if not s.ok]
    tick = np.array([1.0 / j.ticks_per_rad for j in config.joints])
    t, q, _ = _demo_trace(tmp_path)
    assert_within_bound(t, q, "hardware demo", tick_rad=tick)
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert figures["ok"]


# ---------------------------------------------------------- the shipped scenarios, both backends
def test_the_shipped_scenarios_move_within_the_velocity_limits_on_both_backends(tmp_path):
    from twin.hardware.emulator.testing import emulator_config

    from twin.record import read_recording
    from twin.scenario import load_scenario
    from twin.scenario.sweep import scenario_files, shipped_suite, sweep

    scenarios = [load_scenario(f) for f in scenario_files([shipped_suite()])]
    with velocity_events_seen() as seen:
        results = sweep(scenarios, ("sim", "hardware"), record_dir=tmp_path)
    assert all(r.ok for r in results), [r.failures() for r in results if not r.ok]
    tick = np.array([1.0 / j.ticks_per_rad for j in emulator_config().joints])
    for r in results:
        states = {
            m.data["t_us"]: m.data["q"] for m in read_recording(r.recording).on("/robot/state")
        }
        t = np.array(sorted(states)) * 1e-6
        q = np.array([states[k] for k in sorted(states)], float)
        assert len(t) > 100, r.id
        assert_within_bound(t, q, r.id, tick_rad=tick if r.backend == "hardware" else None)
    assert not seen, velocity_summary(seen)


# ------------------------------------------------------------------------------ what the CLI says
def test_twin_run_and_twin_test_say_whether_the_velocity_limits_held(tmp_path):
    from cli_helpers import clean_env, twin

    run = twin("run", "--policy", "reach", "--target", "0.35", "0.1", "0.35", "--duration", "1",
               env=clean_env(), cwd=tmp_path)  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    assert "velocity limits held: no joint above its URDF limit + 25%" in run.stdout.splitlines()
    scenario = str(pathlib.Path(__file__).parents[1] / "scenarios" / "plan_around_table.toml")
    test = twin("test", scenario, "--backend", "sim", env=clean_env(), cwd=tmp_path)
    assert test.returncode == 0, test.stdout
    assert "velocity limits held: no joint above its URDF limit + 25%" in test.stdout.splitlines()
