"""From emulators to a hardware run: ``twin emulate`` writes a hardware TOML for its ports, and
``TWIN_BACKEND=hardware`` (or ``--backend hardware --emulate``) makes the subcommands drive the
emulated devices; Ctrl-C holds the arm, closes every port and exits 130. Subprocesses throughout."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import serial
from cli_helpers import (
    TWIN,
    clean_env,
    emulators,
    processes_with_env,
    stderr_lines,
    twin,
)
from cli_signal_helper import parked_servos
from twin.hardware.config import load_config
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import OperatingMode, XTable

from twin.kinematics import ArmModel
from twin.kinematics.gravity import gravity_torques

SERVO_IDS = range(1, 7)


def _replies(lines: list[str]) -> dict[str, int]:
    """The replies and frames each emulator sent, from ``twin emulate``'s closing line."""
    line = next(x for x in lines if x.startswith("emulators stopped"))
    return {name: int(n) for name, n in re.findall(r"(servo_bus|ft_sensor|imu) (\d+)", line)}


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    with emulators(tmp_path_factory.mktemp("ports")) as emu:
        yield emu


def test_emulate_writes_a_hardware_toml_for_its_ports(emulated):
    assert emulated.config == emulated.link_dir / "hardware.toml"
    config = load_config(emulated.config)
    assert config.bus.port == emulated.ports["servo_bus"] == str(emulated.link_dir / "servo_bus")
    assert config.ft.port == emulated.ports["ft_sensor"]
    assert config.imu.port == emulated.ports["imu"]
    assert "source: sim" in "\n".join(emulated.lines)  # the physics-backed source by default
    text = emulated.config.read_text()
    assert "# Written by `twin emulate`" in text and "/dev/ttyUSB0" not in text


def test_twin_backend_hardware_makes_the_demo_drive_the_emulators(tmp_path):
    with emulators(tmp_path) as emu:
        env = clean_env(TWIN_BACKEND="hardware", TWIN_HARDWARE_CONFIG=str(emu.config))
        done = twin("demo", env=env, timeout=600, cwd=tmp_path)  # its default --out: ./twin-report
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert (tmp_path / "twin-report" / "figures.json").is_file()
    assert re.search(r"demo: (\d+) of \1 steps ok", done.stdout), done.stdout
    # every demo cycle (4 ms; over 1.6 s of motion and a 0.5 s tare) reads the six servos
    replies = _replies(emu.lines)
    assert replies["servo_bus"] > 400, replies  # one write of six status packets per sync read
    assert replies["ft_sensor"] > 100 and replies["imu"] > 100, replies


#: One READ of Torque Enable (64) .. Present Position (132..135): torque, gains, goal and present
#: values of one servo from one instant; Operating Mode (11) is read alone (another length, so a
#: late reply to the one is never taken for the other).
_BLOCK = (XTable.TORQUE_ENABLE.address, XTable.PRESENT_POSITION.end - XTable.TORQUE_ENABLE.address)
#: After a park the arm holds where it was: the goal is the present position plus the gravity
#: torque the hold folds in over the servo's P gain (q_goal - q = g(q) / kp), to this (rad).
PARK_TOL_RAD = 0.01
PARK_ERROR = (
    "SerialRobot.close(): the arm could not be left in its safe state (every servo torque on, "
    "current-based position mode): "
)
#: The read-back waits for the arm to settle and for a loaded emulator (PING p99 2-4 s at load
#: 8-17): every read is tried again until this much time has passed in all.
READ_BACK_S = 90.0


def _read_once(port: serial.Serial, pid: int, address: int, length: int) -> bytes | None:
    """One READ of ``length`` bytes at ``address`` of servo ``pid``; None for no reply, a
    damaged one, or one that is not this READ's (another servo, another length)."""
    port.reset_input_buffer()
    port.write(dxl.encode_instruction(dxl.read(pid, address, length)))
    raw = port.read(11 + length)
    try:
        status = dxl.decode_packet(raw)
    except dxl.ProtocolError:
        return None
    if status.id != pid or status.error != 0 or len(status.params) != length:
        return None
    return bytes(status.params)


def _servo_state(port: serial.Serial, pid: int) -> dict[str, int] | None:
    """Torque, mode, P gain, goal and present position and velocity of servo ``pid`` (raw), or
    None if either READ went unanswered."""
    block = _read_once(port, pid, *_BLOCK)
    mode = _read_once(port, pid, XTable.OPERATING_MODE.address, 1)
    if block is None or mode is None:
        return None
    regs = (
        XTable.TORQUE_ENABLE,
        XTable.POSITION_P_GAIN,
        XTable.GOAL_POSITION,
        XTable.PRESENT_VELOCITY,
        XTable.PRESENT_POSITION,
    )
    out = {r.name: dxl.decode_register(r, block, offset=_BLOCK[0]) for r in regs}
    out["mode"] = mode[0]
    return out


def _park_gaps(config, states: dict[int, dict[str, int]]) -> np.ndarray:
    """(6,) rad per joint: how far each goal is from where the hold should put it (the present
    position plus the folded-in gravity torque over the servo's P gain)."""
    jmap = config.joint_map()
    ids = list(jmap.ids)
    goal = jmap.q_from_ticks([states[p]["goal_position"] for p in ids])
    q = jmap.q_from_ticks([states[p]["present_position"] for p in ids])
    kp = jmap.kp_kd_from_gains([states[p]["position_p_gain"] for p in ids], np.zeros(6))[0]
    gravity = gravity_torques(ArmModel.default(), q) if config.hold_gravity_compensation else 0.0
    return np.abs(goal - q - gravity / kp)


def _parked_state(config, port_name: str) -> dict[int, dict[str, int]]:
    """Every servo's state once the arm holds (torque on, the park's mode, each goal within
    ``PARK_TOL_RAD`` of its hold), read again until then for at most ``READ_BACK_S``; the last
    complete reading either way."""
    deadline = time.monotonic() + READ_BACK_S
    last: dict[int, dict[str, int]] = {}
    with serial.Serial(port_name, config.bus.baudrate, timeout=2.0) as port:
        while time.monotonic() < deadline:
            states = {pid: _servo_state(port, pid) for pid in SERVO_IDS}
            if any(st is None for st in states.values()):
                continue  # a reply lost to the load: ask again
            last = states
            held = all(
                st["torque_enable"] == 1 and st["mode"] == OperatingMode.CURRENT_BASED_POSITION
                for st in states.values()
            )
            if held and np.all(_park_gaps(config, states) < PARK_TOL_RAD):
                break
    return last


def _lines(stream) -> queue.Queue:
    """The lines of ``stream`` as they come, from a reader thread (``None`` at the end)."""
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _wait_for_line(lines: queue.Queue, pattern: str, timeout_s: float) -> list[str]:
    """The lines up to and including the first that matches ``pattern``."""
    seen, deadline = [], time.monotonic() + timeout_s
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.001))
        if line is None:
            raise AssertionError(f"no line matching {pattern!r}: {seen}")
        seen.append(line)
        if re.match(pattern, line):
            return seen


def test_sigint_while_the_demo_moves_the_arm_parks_it_closes_the_ports_and_exits_130(emulated):
    """Ctrl-C once the demo's pick has started to move the arm (its progress line), before its
    summary: exit 130, the one interrupted line, no process left, and every servo holding where
    the arm was (torque on, current-based position mode, goal at the hold) as the park promises
    (``SerialRobot.close``, ``docs/faults/serial.md``). When the park's read-back cannot confirm
    it in time (the emulator starved of CPU for seconds on a loaded machine), the command says
    so instead: exit 1 and the ``ParkError`` line (``docs/faults/serial.md``, "Ctrl-C or
    SIGTERM while the arm moves"); the servos must hold all the same, as read back here."""
    marker = f"TWIN_TEST_MARKER={uuid.uuid4().hex}"
    name, value = marker.split("=")
    env = clean_env(
        TWIN_BACKEND="hardware", TWIN_HARDWARE_CONFIG=str(emulated.config), **{name: value}
    )
    proc = subprocess.Popen(
        [*TWIN, "demo", "--out", str(emulated.link_dir / "report")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines = _lines(proc.stdout)
        try:
            before = _wait_for_line(lines, r"^\[\.\.\] pick: moving", 300)
        except AssertionError as e:  # the demo ended first: say why
            raise AssertionError(f"{e}; stderr: {proc.communicate(timeout=60)[1]}") from e
        proc.send_signal(signal.SIGINT)  # the arm is moving: the pick's motion has begun
        _, err = proc.communicate(timeout=120)
        after = []
        while (line := lines.get(timeout=10)) is not None:
            after.append(line)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = before + after
    lines = stderr_lines(err)
    assert "Traceback" not in err and len(lines) == 1, err
    print(f"exit code {proc.returncode}")  # (how often each outcome comes: pytest -s)
    if proc.returncode == 1:  # the park's read-back got no answer in time (a starved emulator)
        assert lines[0].startswith(f"twin demo: error: {PARK_ERROR}") and lines[0].endswith(
            "(while stopping after an interrupt)"
        ), lines  # the rule: an unverified park is the ParkError, not "holds its position"
    else:
        assert proc.returncode == 130, (err, out)
        (line,) = lines
        assert line.startswith("twin demo: interrupted: "), lines
        assert parked_servos(line) == set(SERVO_IDS), lines
    assert [x.split(":")[0] for x in before[:2]] == ["[ok] open", "[ok] tare"], out
    assert not any(x.startswith("demo:") for x in out), out  # interrupted before its summary
    assert processes_with_env(marker) == []  # nothing left behind
    config = load_config(emulated.config)
    states = _parked_state(config, emulated.ports["servo_bus"])
    assert sorted(states) == list(SERVO_IDS), states
    for pid, st in states.items():  # parked: holding in current-based position mode, torque on
        assert st["torque_enable"] == 1, (pid, st)
        assert st["mode"] == OperatingMode.CURRENT_BASED_POSITION, (pid, st)
    gaps = _park_gaps(config, states)
    assert np.all(gaps < PARK_TOL_RAD), (gaps, states)  # goal at the hold of where the arm is


def test_emulate_in_process_for_one_run():
    """``--emulate`` runs the emulators inside the command (lock-step with the robot): the F/T
    service tares the emulated sensor and finds the same tool weight as on the sim."""
    # the two commands side by side: the hardware run is lock-step (its emulators' clock moves
    # one period per step whatever the load), so the sim beside it changes none of its figures
    with ThreadPoolExecutor(2) as pool:
        started = {
            backend: pool.submit(twin, "ft", "tare", *extra, timeout=300)
            for backend, extra in (
                ("sim", []),
                ("hardware", ["--backend", "hardware", "--emulate"]),
            )
        }
        runs = {backend: future.result() for backend, future in started.items()}
    offsets = {}
    for backend, done in runs.items():
        assert done.returncode == 0, (backend, done.stdout, done.stderr)
        line = next(x for x in done.stdout.splitlines() if "offset" in x)
        offsets[backend] = [float(x) for x in re.findall(r"[-+]\d+\.\d+", line)]
        samples = int(re.search(r"tare: (\d+) samples", done.stdout).group(1))
        # 0.5 s of the 200 Hz sensor; the service takes every sample it receives (the driver's
        # queue), so the count is the sensor's, give or take one at each end of the window
        assert 98 <= samples <= 103
    assert offsets["hardware"][2] == pytest.approx(offsets["sim"][2], abs=0.02)  # N, wire LSBs


def test_run_drives_the_emulated_arm_with_the_reach_policy():
    done = twin(
        "run",
        "--backend",
        "hardware",
        "--emulate",
        "--target",
        "0.40",
        "0.10",
        "0.30",
        "--duration",
        "2.5",
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    final_mm = float(re.search(r"final ([0-9.]+) mm", done.stdout).group(1))
    assert final_mm < 20.0, done.stdout  # the policy card's tolerance
    assert "25 Hz" in done.stdout  # the policy's own rate


def test_sigint_with_in_process_emulators_stops_everything_and_exits_130():
    marker = f"TWIN_TEST_MARKER={uuid.uuid4().hex}"
    name, value = marker.split("=")
    proc = subprocess.Popen(
        [*TWIN, "shadow", "--backend", "hardware", "--emulate", "--duration", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(**{name: value}),
    )
    try:
        for line in proc.stdout:  # the first residual line: the arm runs, followed by the twin
            if re.match(r"^\s+\d+\.\d+\s+\d", line):
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    lines = stderr_lines(err)
    (line,) = lines
    assert line.startswith("twin shadow: interrupted: "), lines
    assert parked_servos(line) == set(SERVO_IDS), lines
    assert processes_with_env(marker) == []
