"""``twin demo``: the command (a subprocess, sim backend) writes the report folder and meets its
own thresholds; the same demo on the hardware backend against the sim-backed emulators passes
every step and ends each planned move within one encoder tick of the sim run.

One sim run (module fixture) and one hardware run (module fixture) serve every assertion.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from twin.demo import STEP_NAMES, PayloadGripper, run_demo

ROOT = Path(__file__).resolve().parents[1]
PUMP_US = 200  # virtual time the lock-step pump adds every 2 ms of wall time
PNGS = ("joints.png", "tcp_path.png", "ft.png", "imu.png", "snapshot.png")


def assert_png_not_blank(path: Path) -> None:
    """A PNG that exists and shows something: pixel variance, and more than 2 % of the pixels
    away from the most common colour (a plot is not just its background)."""
    assert path.is_file(), path
    rgb = imread(path)[..., :3].reshape(-1, 3)
    assert rgb.var(axis=0).sum() > 1e-3, (path, rgb.var(axis=0))
    levels = np.round(rgb * 255).astype(np.int64)
    packed = (levels[:, 0] << 16) | (levels[:, 1] << 8) | levels[:, 2]
    top = np.argmax(np.bincount(packed))
    background = np.array([top >> 16, (top >> 8) & 255, top & 255])
    away = np.any(np.abs(levels - background) > 8, axis=1).mean()
    assert away > 0.02, (path, away)


def card_bounds() -> tuple[float, float]:
    """The reach policy card's success bound: (position m, rotation rad)."""
    card = (ROOT / "policies" / "reach.md").read_text(encoding="utf-8")
    m = re.search(r"within ([0-9.]+) cm \*\*and\*\* ([0-9.]+) rad", card)
    assert m, "policies/reach.md no longer states the success bound"
    return float(m.group(1)) * 1e-2, float(m.group(2))


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "report"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "twin",
            "demo",
            "--out",
            str(out),
            "--no-progress",
            "--record",
            str(out.parent / "demo.mcap"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path_factory.getbasetemp(),
        # one line for the summary and its report path (rich wraps at 80 columns off a terminal;
        # pytest-xdist's temporary paths are longer)
        env={**os.environ, "COLUMNS": "200"},
    )
    return proc, out, json.loads((out / "figures.json").read_text()) if proc.returncode == 0 else {}


def test_demo_command_passes_every_step_and_prints_the_table(sim_report):
    proc, out, _ = sim_report
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"demo: {len(STEP_NAMES)} of {len(STEP_NAMES)} steps ok; report in {out}/" in proc.stdout
    for name in STEP_NAMES:  # one table row per step
        assert re.search(rf"\b{name}\b.*\bok\b", proc.stdout), name
    assert "Traceback" not in proc.stderr


def test_a_recording_of_the_demo_opens_with_the_mcap_reader_and_replays(sim_report):
    from mcap.reader import make_reader

    from twin.record import read_recording, replay

    _, out, _ = sim_report
    path = out.parent / "demo.mcap"
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    schemas = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values()}
    counts = {
        summary.channels[cid].topic: n
        for cid, n in summary.statistics.channel_message_counts.items()
    }
    assert schemas == {
        "/robot/state": "twin.RobotState",
        "/robot/command": "twin.JointCommand",
        "/robot/call": "twin.Call",
        "/events": "twin.Event",
        "/tf": "foxglove.FrameTransforms",
        "/tcp": "foxglove.PoseInFrame",
    }
    assert counts["/robot/state"] > 20 / 0.005  # every read of a run of more than 20 s at 200 Hz
    assert counts["/tf"] == pytest.approx(counts["/robot/state"] / 4, rel=0.05)  # 50 Hz frames
    assert counts["/robot/call"] == 2  # the payload attached at the grasp, detached at the place
    rec = read_recording(path)
    sources = {(e.data["source"], e.data["kind"]) for e in rec.on("/events")}
    assert {("planner", "path"), ("controller", "policy_step"), ("ft", "frames")} <= sources
    assert rec.metadata["backend"] == "sim" and rec.metadata["command"] == "demo"
    report = replay(path)
    assert report.divergences["joints"].max_size < 1e-9, report.table()


def test_report_folder_has_non_blank_figures(sim_report):
    _, out, report = sim_report
    for name in PNGS:
        assert_png_not_blank(out / name)
    assert set(report["plots"]) == set(PNGS)
    trace = np.load(out / "trace.npz")
    k = report["trace"]["samples"]
    assert trace["q"].shape == (k, 6) and trace["ft_world"].shape == (k, 6) and k > 2000
    assert np.all(np.diff(trace["t_s"]) > 0)


def test_report_figures_meet_the_demo_thresholds(sim_report):
    _, _, report = sim_report
    assert report["ok"] and [s["name"] for s in report["steps"]] == list(STEP_NAMES)
    moves = {m["name"]: m for m in report["moves"]}
    assert list(moves) == ["pick", "lift", "place", "to policy start", "home"]
    for m in moves.values():
        assert m["goal_error_m"] < 1e-3, m
        assert m["collision_free"] and all(p["collision_free"] for p in m["parts"].values()), m
    # Touch motions: the pick ends in an approach, the place leaves with a retract and ends in an
    # approach; the free parts had to go around (the straight joint segment collides).
    assert list(moves["pick"]["parts"]) == ["free", "approach"]
    assert list(moves["lift"]["parts"]) == ["retract"]
    assert list(moves["place"]["parts"]) == ["free", "approach"]
    assert moves["pick"]["direct_segment_blocked"] and moves["place"]["direct_segment_blocked"]
    position_bound, rotation_bound = card_bounds()
    assert report["thresholds"]["policy_position_error_m"] == position_bound
    assert len(report["policy"]) == 3
    for reach in report["policy"]:
        assert reach["position_error_m"] < position_bound, reach
        assert reach["rotation_error_rad"] < rotation_bound, reach
    weigh = next(s for s in report["steps"] if s["name"] == "weigh")["data"]
    assert weigh["rel_error"] < 0.05 and weigh["mass_kg"] == pytest.approx(0.15, rel=0.05)
    s = report["summary"]
    assert s["max_goal_error_m"] < 1e-3 and s["all_paths_collision_free"]
    assert s["imu_gravity_angle_rad"] < 0.02


@pytest.fixture(scope="module")
def hardware_run(tmp_path_factory):
    """The demo on ``SerialRobot`` (``open_robot("hardware")``) against the emulators, their
    physics the sim (with the scene); the gripper attaches the payload to that sim, as a suction
    cup would lift the object. Lock-step (a ``ManualClock`` shared by the robot and the
    emulators, as in ``test_hw_hil``): every byte crosses the pseudo-terminals, and a busy
    machine slows the run down instead of making the real-time loop miss its periods."""
    from twin.hardware import ManualClock
    from twin.hardware.emulator import EmulatorStack, make_sim_source
    from twin.hardware.emulator.testing import emulator_config

    from twin.backends import open_robot
    from twin.demo import SCENE

    config = emulator_config(stale_after_s=1.0)  # replies may wait for the sim to step
    config = replace(config, bus=replace(config.bus, reply_timeout_s=2.0))
    out = tmp_path_factory.mktemp("demo-hw")
    clock = ManualClock()
    with (
        EmulatorStack(config, make_sim_source(seed=0, scene=SCENE), clock=clock) as stack,
        # Drivers that wait in real time for a device (bring-up, the F/T sensor's activation)
        # see time pass: 0.2 ms every 2 ms of wall time, little beside the robot's 4 ms steps.
        stack.clock_running(PUMP_US),
        open_robot("hardware", config=stack.robot_config(), clock=clock) as robot,
    ):
        source = stack.source
        gripper = PayloadGripper(source.robot, source.lock)
        # figures.json is what the hardware tests read (the sim run's PNGs are checked)
        steps = run_demo("hardware", out=out, gripper=gripper, robot=robot, plots=False)
    ticks = np.array([j.ticks_per_rad for j in config.joints])
    return steps, json.loads((out / "figures.json").read_text()), 1.0 / ticks


def test_hardware_demo_passes_every_step(hardware_run):
    steps, report, _ = hardware_run
    assert all(s.ok for s in steps), [(s.name, s.figure, s.data) for s in steps if not s.ok]
    assert [s.name for s in steps] == list(STEP_NAMES)
    assert not any(s.data.get("skipped") for s in steps)
    policy = next(s for s in steps if s.name == "policy").data
    assert policy["failed_cycles"] <= 0.02 * policy["cycles"]
    assert report["summary"]["all_paths_collision_free"]
    assert report["plots"] == {} and report["trace"]["samples"] > 2000  # plots=False: no PNG


def test_hardware_demo_agrees_with_the_sim_run_within_quantisation(sim_report, hardware_run):
    _, _, sim = sim_report
    _, hw, tick = hardware_run
    for a, b in zip(sim["moves"], hw["moves"], strict=True):
        assert a["name"] == b["name"]
        diff = np.abs(np.array(a["final_q"]) - np.array(b["final_q"]))
        assert np.all(diff <= tick), (a["name"], diff / tick)  # within one encoder tick
    # Same targets (drawn from the seed), reached as well as on the sim.
    for a, b in zip(sim["policy"], hw["policy"], strict=True):
        assert a["target"] == pytest.approx(b["target"], abs=1e-12)
        assert abs(a["position_error_m"] - b["position_error_m"]) < 1e-3
    fz = [
        next(s for s in r["steps"] if s["name"] == "weigh")["data"]["force_z_n"] for r in (sim, hw)
    ]
    assert fz[0] == pytest.approx(fz[1], abs=0.01)  # a tick of tilt on the tool's weight: mN


def test_camera_projection_matches_the_look_at_convention():
    from twin.report import Camera

    cam = Camera(eye=(1.0, -0.5, 0.8), target=(0.2, 0.1, 0.1), width=320, height=240)
    px, front = cam.project(np.array([cam.target, (0.2, 0.1, 0.3), (1.5, -0.9, 1.0)]))
    assert px[0] == pytest.approx([160.0, 120.0])  # the target at the centre
    assert px[1, 1] < px[0, 1]  # higher in the world: higher in the image (smaller row)
    assert front.tolist() == [True, True, False]  # behind the eye
    with pytest.raises(ValueError, match="vertical"):
        Camera(eye=(0, 0, 1), target=(0, 0, 0)).project(np.zeros((1, 3)))
