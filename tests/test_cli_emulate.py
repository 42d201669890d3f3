"""``twin emulate`` starts the three device emulators and prints ports a serial tool can open."""

import re
import subprocess
import sys

import serial

from twin.cli import main


def test_emulate_prints_three_openable_ports(capsys, tmp_path):
    assert main(["emulate", "--duration", "0.5", "--link-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    ports = dict(re.findall(r"^(servo_bus|ft_sensor|imu)\s+(\S+)", out, flags=re.M))
    assert set(ports) == {"servo_bus", "ft_sensor", "imu"}
    for path in ports.values():
        assert path.startswith(str(tmp_path))


def test_emulate_help_belongs_to_the_emulator(capsys):
    try:
        main(["emulate", "--help"])
    except SystemExit as stop:
        assert stop.code == 0
    assert "--source {sim,ideal}" in capsys.readouterr().out


def test_emulated_servo_bus_answers_a_ping(tmp_path):
    """A running ``twin emulate`` process answers a DYNAMIXEL PING of servo 1 on its bus port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "twin", "emulate", "--duration", "20", "--link-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stdout:  # blocks until the emulators say they are ready
            if "ready" in line:
                break
        # The known-good PING of id 1 (docs/protocols/dynamixel.md).
        ping = bytes([0xFF, 0xFF, 0xFD, 0x00, 0x01, 0x03, 0x00, 0x01, 0x19, 0x4E])
        with serial.Serial(str(tmp_path / "servo_bus"), 57600, timeout=2.0) as port:
            port.write(ping)
            reply = port.read(14)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert reply[:5] == bytes([0xFF, 0xFF, 0xFD, 0x00, 0x01])
    assert reply[7] == 0x55  # the status instruction
