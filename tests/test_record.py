"""Recordings (MCAP) of runs on the sim, read back, cut short by kill -9, and replayed."""

from __future__ import annotations

import errno
import io
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from mcap.reader import make_reader

from twin.record import (
    McapWriter,
    RecordingError,
    open_recorded,
    read_recording,
    recording_info,
    replay,
)
from twin.robot import JointCommand

Q0 = np.array([0.1, 0.3, 0.6, 0.0, 0.5, 0.0])
KP, KD = np.full(6, 60.0), np.full(6, 2.0)
STEPS = 300


def run_side_by_side(*commands: list[str], timeout: float = 300, cwd=None):
    """Run independent commands at once (none of them real-time); their ``CompletedProcess``
    (text) in order."""
    procs = [
        subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
        for c in commands
    ]
    done = []
    for command, proc in zip(commands, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        done.append(subprocess.CompletedProcess(command, proc.returncode, out, err))
    return done


def drive(robot, steps: int = STEPS) -> None:
    """Reset, then follow a slow sine on every joint: read, write, step."""
    robot.reset(q=Q0)
    for k in range(steps):
        robot.read()
        q = Q0 + 0.2 * np.sin(0.02 * k)
        robot.write(JointCommand(q_des=q, kp=KP, kd=KD))
        robot.step()
    robot.read()


@pytest.fixture(scope="module")
def sim_recording(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "run.mcap"
    with open_recorded(str(path), "sim", seed=3, scene="table") as robot:
        drive(robot)
        robot.event("test", "marker", value=1.5)
    return path


def test_the_mcap_reader_opens_a_recording_with_its_channels_schemas_and_counts(sim_recording):
    with open(sim_recording, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        topics = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values()}
        counts = {
            summary.channels[cid].topic: n
            for cid, n in summary.statistics.channel_message_counts.items()
        }
    assert topics == {
        "/robot/call": "twin.Call",
        "/robot/state": "twin.RobotState",
        "/robot/command": "twin.JointCommand",
        "/tf": "foxglove.FrameTransforms",
        "/tcp": "foxglove.PoseInFrame",
        "/events": "twin.Event",
    }
    assert counts["/robot/state"] == STEPS + 1  # every read in the loop, and the final one
    assert counts["/robot/command"] == STEPS
    assert counts["/robot/call"] == 1
    # 5 ms control period, 50 Hz frames: one /tf per 4 states (the first state at t = 0 counts).
    assert counts["/tf"] == counts["/tcp"] == pytest.approx((STEPS + 1) / 4, abs=1)
    assert counts["/events"] == 1


def test_metadata_carries_what_replay_needs(sim_recording):
    meta = read_recording(sim_recording).metadata
    assert meta["backend"] == "sim"
    assert meta["robot_options"] == {"seed": 3, "scene": "table"}
    assert meta["scene"] == "table" and meta["seed"] == 3
    assert len(meta["urdf_sha256"]) == 64
    assert meta["control_period_s"] == 0.005
    assert {"python", "numpy", "pybullet", "twin", "mcap"} <= set(meta["versions"])


def test_frames_use_the_foxglove_layout_and_match_forward_kinematics(sim_recording):
    from twin.kinematics import ArmModel

    rec = read_recording(sim_recording)
    states = {m.t_us: m.data["q"] for m in rec.on("/robot/state")}
    tf = rec.on("/tf")[5]
    model = ArmModel.default()
    tcp = next(t for t in tf.data["transforms"] if t["child_frame_id"] == "tcp")
    assert tcp["parent_frame_id"] == model.tree.link_names[0]
    assert set(tcp) == {"timestamp", "parent_frame_id", "child_frame_id", "translation", "rotation"}
    assert tcp["timestamp"] == {"sec": tf.t_us // 1_000_000, "nsec": (tf.t_us % 1_000_000) * 1000}
    p = model.fk(np.array(states[tf.t_us]), "tcp")[:3, 3]
    got = [tcp["translation"][k] for k in "xyz"]
    np.testing.assert_allclose(got, p, atol=1e-12)
    r = tcp["rotation"]
    assert r["x"] ** 2 + r["y"] ** 2 + r["z"] ** 2 + r["w"] ** 2 == pytest.approx(1.0)


def test_info_lists_rates_and_duration(sim_recording):
    info = {c.topic: c for c in recording_info(read_recording(sim_recording))}
    assert info["/robot/state"].rate_hz == pytest.approx(200.0, rel=1e-6)
    assert info["/tf"].rate_hz == pytest.approx(50.0, rel=0.02)
    assert info["/robot/state"].last_us == STEPS * 5000


def test_a_sim_recording_replays_exactly(sim_recording):
    report = replay(sim_recording)
    assert report.reproduced, report.table()
    assert report.divergences["joints"].max_size < 1e-9
    assert report.divergences["joints"].compared == STEPS + 1
    assert report.divergences["wrench"].compared > 0.9 * STEPS
    assert report.divergences["imu"].compared > 0.9 * STEPS


def test_an_altered_command_shows_as_a_divergence_at_its_time(sim_recording, tmp_path):
    rec = read_recording(sim_recording)
    altered = tmp_path / "altered.mcap"
    k_alter = 200
    with McapWriter(altered, rec.metadata) as out:
        for m in rec.messages:
            data = dict(m.data)
            if m.topic == "/robot/command" and data["step"] == k_alter:
                data["q_des"] = [data["q_des"][0] + 0.05, *data["q_des"][1:]]
            out.add(m.topic, m.t_us, data)
    report = replay(altered)
    joints = report.divergences["joints"]
    t_alter = k_alter * 5000
    assert joints.diverged
    assert t_alter < joints.first_t_us <= t_alter + 2 * 5000  # the next state shows it
    assert report.divergences["wrench"].first_t_us >= t_alter
    # Before the altered command everything is reproduced.
    t, diff = report.series["joints"]
    assert np.max(diff[t <= t_alter]) < 1e-9
    png = report.plot(tmp_path / "replay.png")
    assert png.stat().st_size > 5000


def test_a_refused_command_is_recorded_as_refused(tmp_path):
    path = tmp_path / "refused.mcap"
    with open_recorded(str(path), "sim", seed=0) as robot:
        robot.read()
        bad = np.array(Q0)
        bad[2] = np.nan
        with pytest.raises(ValueError, match="q_des"):
            robot.write(JointCommand(q_des=bad, kp=KP, kd=KD))
    (command,) = read_recording(path).on("/robot/command")
    assert command.data["accepted"] is False
    assert "q_des" in command.data["error"]
    assert command.data["q_des"][2] != command.data["q_des"][2]  # nan kept as recorded (NaN)


def test_a_cut_short_file_reads_up_to_its_last_complete_chunk(tmp_path):
    path = tmp_path / "chunks.mcap"
    from twin.backends import open_robot
    from twin.record import RecordingRobot

    writer = McapWriter(path, {"backend": "sim"}, flush_interval_s=1e-4)  # a chunk per drain
    with RecordingRobot(open_robot("sim", seed=0), writer) as robot:
        for _ in range(10):  # spread over several of the writer's drains: several chunks
            robot.read()
            robot.step()
            time.sleep(0.03)
    writer.close()
    data = path.read_bytes()
    cut = tmp_path / "cut.mcap"
    from twin.record.mcap_scan import scan

    last_chunk = max(m.offset for m in scan(path).messages)  # cut inside it, not the summary
    cut.write_bytes(data[: last_chunk + 40])
    rec = read_recording(cut)
    assert rec.truncated
    assert rec.metadata["backend"] == "sim"
    whole = read_recording(path)
    assert not whole.truncated
    assert 0 < len(rec.messages) < len(whole.messages)
    assert [m.data for m in rec.messages] == [m.data for m in whole.messages[: len(rec.messages)]]


def test_a_file_that_is_not_mcap_is_refused_by_name(tmp_path):
    bad = tmp_path / "notes.mcap"
    bad.write_text("not a recording\n")
    with pytest.raises(RecordingError, match="not an MCAP file"):
        read_recording(bad)
    with pytest.raises(RecordingError, match="no recording"):
        read_recording(tmp_path / "missing.mcap")
    with pytest.raises(ValueError, match=r"must end in \.mcap"):
        McapWriter(tmp_path / "run.txt")


RECORDER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from twin.record import open_recorded
    from twin.robot import JointCommand
    robot = open_recorded(sys.argv[1], "sim", seed=0)
    q0 = robot.read().q
    print("recording", flush=True)
    k = 0
    while True:  # paced in wall time: 200 cycles/s, until killed
        robot.read()
        robot.write(JointCommand(q_des=q0 + 0.1 * np.sin(0.01 * k), kp=np.full(6, 60.0),
                                 kd=np.full(6, 2.0)))
        robot.step()
        k += 1
        time.sleep(0.005)
    """
)


def test_kill_9_loses_at_most_the_last_second(tmp_path):
    path = tmp_path / "killed.mcap"
    proc = subprocess.Popen(
        [sys.executable, "-c", RECORDER_SCRIPT, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout.readline().strip() == "recording"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not path.exists() or path.stat().st_size < 20000):
            time.sleep(0.05)  # wait for some data on disk (not a synchronisation of results)
        time.sleep(1.3)
    finally:
        killed_ns = time.time_ns()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    rec = read_recording(path)
    assert rec.truncated
    states = rec.on("/robot/state")
    assert len(states) > 100
    lost_s = (killed_ns - states[-1].wall_ns) * 1e-9
    assert lost_s <= 1.0, f"the last recorded state is {lost_s:.2f} s older than the kill"
    with open(path, "rb") as f:  # the mcap library's own streaming reader opens it too
        from mcap.reader import NonSeekingReader

        first = next(iter(NonSeekingReader(f).iter_messages(log_time_order=False)))
        assert first[1].topic.startswith("/")


class FillingDisk(io.RawIOBase):
    """A real file on a disk that fills up: after ``budget`` bytes every write fails with
    ENOSPC, as the kernel's would (the full disk is what is absent here)."""

    def __init__(self, path, budget: int) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.name = str(path)
        self._left = budget

    def writable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)  # the writer asks tell(), i.e. seek(0, 1)

    def write(self, data) -> int:
        if len(data) > self._left:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.name)
        self._left -= len(data)
        return self._file.write(data)

    def close(self) -> None:
        self._file.close()
        super().close()


def test_a_full_disk_never_raises_into_the_loop_and_is_reported_at_close(tmp_path):
    from twin.backends import open_robot
    from twin.record import RecordingRobot

    disk = FillingDisk(tmp_path / "full.mcap", budget=20_000)
    writer = McapWriter(io.BufferedWriter(disk), {"backend": "sim"}, flush_interval_s=0.01)
    robot = RecordingRobot(open_robot("sim", seed=0), writer)
    for _ in range(300):  # the loop goes on: nothing raises here
        robot.read()
        robot.step()
        time.sleep(0.001)
    robot.close()
    with pytest.raises(RecordingError, match=r"were not written \(OSError: \[Errno 28\]"):
        writer.close()
    assert writer.dropped > 0
    assert sum(writer.written.values()) > 0  # what came before the disk filled was written


def test_twin_replay_reports_on_the_command_line(sim_recording, tmp_path):
    run = [sys.executable, "-m", "twin", "replay"]
    done, info, missing = run_side_by_side(
        [*run, str(sim_recording), "--plot", str(tmp_path / "r.png")],
        [*run, str(sim_recording), "--info"],
        [*run, str(tmp_path / "none.mcap")],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "reproduced" in done.stdout
    assert (tmp_path / "r.png").stat().st_size > 5000
    assert info.returncode == 0
    assert "/robot/state" in info.stdout and "twin.RobotState" in info.stdout
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1].startswith("twin replay: no recording")
    assert "Traceback" not in missing.stderr


def test_what_layers_publish_is_recorded_and_a_broken_subscriber_is_dropped(tmp_path):
    from twin import events

    path = tmp_path / "layers.mcap"
    with open_recorded(str(path), "sim", seed=0) as robot:
        robot.subscribe_layers()
        robot.read()
        events.publish("planner", "result", error=None, waypoints=np.zeros((2, 6)))
        assert events.listening()
    assert not events.listening()  # closing the robot unsubscribes it
    events.publish("planner", "unheard")  # nobody listens: nothing happens
    (event,) = read_recording(path).on("/events")
    assert event.data["source"] == "planner" and event.data["kind"] == "result"
    assert event.data["detail"] == {"error": None, "waypoints": [[0.0] * 6] * 2}

    def broken(source, kind, detail):
        raise RuntimeError("a broken recorder")

    events.subscribe(broken)
    events.publish("controller", "step", value=1)  # does not raise
    assert not events.listening()


def test_the_command_line_records_a_run_with_what_the_layers_publish(tmp_path):
    path = tmp_path / "run.mcap"
    twin_run = [sys.executable, "-m", "twin", "run", "--policy", "reach"]
    done, bad = run_side_by_side(  # the sim's time is its own: a run beside it changes nothing
        [*twin_run, "--target", "0.35", "0.1", "0.3", "--duration", "1", "--record", str(path)],
        [*twin_run, "--record", "run.csv"],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    counts = {
        summary.channels[cid].topic: n
        for cid, n in summary.statistics.channel_message_counts.items()
    }
    assert counts["/robot/state"] > 200 and counts["/robot/command"] == 25  # 1 s at 25 Hz
    steps = read_recording(path).on("/events")
    assert {(e.data["source"], e.data["kind"]) for e in steps} == {("controller", "policy_step")}
    assert len(steps) == 25
    assert "obj.arm.joints.pos" in steps[0].data["detail"]["inputs"]
    assert replay(path).reproduced
    assert bad.returncode == 2
    assert "expected a file name ending in .mcap" in bad.stderr.strip().splitlines()[-1]


def test_twin_plan_records_its_requests_and_results(tmp_path):
    path = tmp_path / "plan.mcap"
    done = subprocess.run(
        [sys.executable, "-m", "twin", "plan", "--scene", "table", "--goal", "0.4,0.1,0.3",
         "--out", str(tmp_path / "plan"), "--no-render", "--record", str(path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (event,) = read_recording(path).on("/events")
    assert (event.data["source"], event.data["kind"]) == ("planner", "path")
    assert event.data["detail"]["error"] is None and len(event.data["detail"]["waypoints"]) >= 1
