"""User mistakes at the ``twin`` command: one line on stderr naming what was wrong and what was
expected (the closest valid name where there is one), exit code 2, no traceback; ``--debug``
shows the traceback. Every case runs the CLI as a subprocess."""

from __future__ import annotations

import pathlib

import pytest
from cli_helpers import clean_env, stderr_lines, twin
from twin.hardware.config import default_config_path

TARGET = ["--target", "0.4", "0.0", "0.3"]


def _write_files(tmp):
    (tmp / "garbled.toml").write_text("[bus\nport = ")
    (tmp / "notes.txt").write_text("not a policy")
    (tmp / "fake.onnx").write_bytes(b"\x00 not a protobuf")
    (tmp / "arm.urdf").write_text("<robot name='x'><link name='a'/>")


def _cases(tmp):
    """Case name -> (argv, extra environment, words the one line must contain); the files are
    those of ``_write_files(tmp)``."""
    garbled, notes, fake_onnx, bad_urdf = (
        tmp / n for n in ("garbled.toml", "notes.txt", "fake.onnx", "arm.urdf")
    )
    shipped = str(default_config_path())  # names /dev/ttyUSB0, which this machine lacks
    return {
        "unknown backend in TWIN_BACKEND": (
            ["demo"],
            {"TWIN_BACKEND": "nonsense"},
            ["unknown backend 'nonsense'", "TWIN_BACKEND", "sim, hardware"],
        ),
        "misspelt --backend": (
            ["run", *TARGET, "--backend", "hardwre"],
            {},
            ["unknown backend 'hardwre'", "did you mean 'hardware'", "sim, hardware"],
        ),
        "no --config": (
            ["demo", "--backend", "hardware"],
            {},
            ["needs its configuration", "--config FILE", "TWIN_HARDWARE_CONFIG"],
        ),
        "config with the sim backend": (
            ["demo", "--config", shipped],
            {},
            ["backend is 'sim'", "--backend hardware"],
        ),
        "missing TOML": (
            ["demo", "--backend", "hardware", "--config", str(tmp / "absent.toml")],
            {},
            ["absent.toml", "No such file"],
        ),
        "garbled TOML": (
            ["ft", "tare", "--backend", "hardware", "--config", str(garbled)],
            {},
            ["garbled.toml"],
        ),
        "missing port": (
            ["demo"],
            {"TWIN_BACKEND": "hardware", "TWIN_HARDWARE_CONFIG": shipped},
            ["/dev/ttyUSB0", "expected the ports", "twin emulate"],
        ),
        "misspelt scene": (
            ["run", *TARGET, "--scene", "tabel"],
            {},
            ["unknown scene 'tabel'", "did you mean 'table'", "table, shelf, bin, cage"],
        ),
        "misspelt scene listed": (["scenes", "tabel"], {}, ["did you mean 'table'"]),
        "non-ONNX policy": (
            ["run", "--policy", str(notes), *TARGET],
            {},
            ["notes.txt is not an ONNX policy", "(.onnx)", "reach"],
        ),
        "misspelt policy": (["run", "--policy", "rech", *TARGET], {}, ["did you mean 'reach'"]),
        "an .onnx that is not ONNX": (
            ["run", "--policy", str(fake_onnx), *TARGET],
            {},
            ["fake.onnx", "expected an ONNX policy file"],
        ),
        "bad --urdf": (["info", "--urdf", str(bad_urdf)], {}, ["arm.urdf"]),
        "missing --urdf": (["info", "--urdf", str(tmp / "none.urdf")], {}, ["none.urdf"]),
        "bad --link-dir": (
            ["emulate", "--link-dir", str(tmp / "no" / "dir")],
            {},
            ["--link-dir", "not a directory", "expected a directory for the port links"],
        ),
        "--corrupt-rate 2": (
            ["emulate", "--corrupt-rate", "2"],
            {},
            ["--corrupt-rate", "not a probability", "0 <= p <= 1"],
        ),
        "--emulate on the sim": (["demo", "--emulate"], {}, ["backend is 'sim'"]),
        "misspelt benchmark": (
            ["bench", "--quick", "--only", "kinematic"],
            {},
            ["did you mean 'kinematics'"],
        ),
        "bad --target": (["run", "--target", "0.4", "0.0"], {}, ["[x, y, z]"]),
        "no targets": (["run"], {}, ["no targets", "--target"]),
    }


@pytest.mark.parametrize("case", list(_cases(pathlib.Path("."))))
def test_a_user_mistake_is_one_line_and_exit_code_2(case, tmp_path):
    _write_files(tmp_path)
    argv, extra, words = _cases(tmp_path)[case]
    done = twin(*argv, env=clean_env(**extra))
    lines = stderr_lines(done.stderr)
    assert done.returncode == 2, (case, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith(f"twin {argv[0]}"), line
    for word in words:
        assert word in line, (word, line)


def test_debug_shows_the_traceback(tmp_path):
    done = twin("--debug", "scenes", "tabel")
    assert done.returncode != 0
    assert "Traceback" in done.stderr and "UnknownSceneError" in done.stderr
    done = twin("scenes", "tabel", "--debug")  # after the subcommand as well
    assert "Traceback" in done.stderr


@pytest.mark.parametrize(
    "sub", ["demo", "run", "shadow", "ft", "scenes", "bench", "info", "emulate"]
)
def test_every_subcommand_has_help(sub):
    done = twin(sub, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: twin {sub}")
    if sub not in ("scenes", "bench", "info", "emulate", "ft"):
        assert "--backend" in done.stdout and "--emulate" in done.stdout


@pytest.mark.parametrize("action", ["tare", "hz", "filter", "log"])
def test_every_ft_action_has_help_and_backend_options(action):
    done = twin("ft", action, "--help")
    assert done.returncode == 0, done.stderr
    assert "--backend" in done.stdout and "--config" in done.stdout


def test_errors_are_classified_by_type():
    from twin.hardware.errors import ConfigError, ReplyTimeoutError, TransportError

    from twin.cli import classify
    from twin.sensors.errors import BadDeviceError

    assert classify(ConfigError("x.toml: missing key bus.port (str)")) == (
        2,
        "x.toml: missing key bus.port (str)",
    )
    code, line = classify(TransportError("servo_bus: cannot open /dev/ttyUSB0"))
    assert code == 2 and "twin emulate" in line
    assert classify(ReplyTimeoutError("servo_bus: no status packet\nfrom servo 1")) == (
        1,
        "servo_bus: no status packet from servo 1",  # one line
    )
    assert classify(BadDeviceError("no reply to 'R'"))[0] == 1
    assert classify(FileNotFoundError(2, "No such file or directory", "/x.csv")) == (
        2,
        "/x.csv: No such file or directory",
    )
    assert classify(TypeError("a bug")) is None  # keeps its traceback
    assert classify(KeyError("a bug")) is None
