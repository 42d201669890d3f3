"""From emulators to a hardware run: ``twin emulate`` writes a hardware TOML for its ports, and
``TWIN_BACKEND=hardware`` (or ``--backend hardware --emulate``) makes the subcommands drive the
emulated devices; Ctrl-C holds the arm, closes every port and exits 130. Subprocesses throughout."""

from __future__ import annotations

import re
import signal
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import serial
from cli_helpers import (
    TWIN,
    clean_env,
    emulators,
    open_pts,
    processes_with_env,
    stderr_lines,
    twin,
)
from twin.hardware.config import load_config
from twin.hardware.emulator.testing import wait_until
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import OperatingMode, XTable

SERVO_IDS = range(1, 7)


def _replies(lines: list[str]) -> dict[str, int]:
    """The replies and frames each emulator sent, from ``twin emulate``'s closing line."""
    line = next(x for x in lines if x.startswith("emulators stopped"))
    return {name: int(n) for name, n in re.findall(r"(servo_bus|ft_sensor|imu) (\d+)", line)}


def _read_register(port: serial.Serial, pid: int, reg) -> int:
    """One DYNAMIXEL READ of ``reg`` from servo ``pid``."""
    port.reset_input_buffer()
    port.write(dxl.encode_instruction(dxl.read(pid, reg.address, reg.size)))
    raw = port.read(11 + reg.size)
    status = dxl.decode_packet(raw)
    assert status.id == pid and status.error == 0, status
    return dxl.decode_register(reg, status.params, offset=reg.address)


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
        done = twin("demo", env=env, timeout=600)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert re.search(r"demo: (\d+) of \1 steps ok", done.stdout), done.stdout
    # every demo cycle (4 ms; over 1.6 s of motion and a 0.5 s tare) reads the six servos
    replies = _replies(emu.lines)
    assert replies["servo_bus"] > 400, replies  # one write of six status packets per sync read
    assert replies["ft_sensor"] > 100 and replies["imu"] > 100, replies


def test_sigint_during_the_demo_holds_the_arm_closes_the_ports_and_exits_130(emulated):
    marker = f"TWIN_TEST_MARKER={uuid.uuid4().hex}"
    name, value = marker.split("=")
    env = clean_env(
        TWIN_BACKEND="hardware", TWIN_HARDWARE_CONFIG=str(emulated.config), **{name: value}
    )
    proc = subprocess.Popen(
        [*TWIN, "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        ports = set(emulated.pts.values())
        wait_until(lambda: ports <= open_pts(proc.pid), 120)  # the robot has every port open
        first = proc.stdout.readline()  # the demo's first report: the arm is under control
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        out = first + out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    lines = stderr_lines(err)
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0] == "twin demo: interrupted: the arm holds its position, every port is closed"
    assert processes_with_env(marker) == []  # nothing left behind
    with serial.Serial(emulated.ports["servo_bus"], 1_000_000, timeout=2.0) as port:
        for pid in SERVO_IDS:  # parked: holding in current-based position mode, torque on
            assert _read_register(port, pid, XTable.TORQUE_ENABLE) == 1
            mode = _read_register(port, pid, XTable.OPERATING_MODE)
            assert mode == OperatingMode.CURRENT_BASED_POSITION


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
    assert lines == ["twin shadow: interrupted: the arm holds its position, every port is closed"]
    assert processes_with_env(marker) == []
