"""One switch with one precedence rule (an explicit argument, then ``TWIN_BACKEND``, then sim;
``config``, then ``TWIN_HARDWARE_CONFIG``), honoured by ``open_robot``, the CLI's options and the
Gymnasium environments; the hardware TOML ``twin emulate`` writes for its ports."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from twin.hardware.config import default_config_path, load_config
from twin.hardware.emulator.cli import (
    _set_key,
    _toml_value,
    start_emulators,
    write_hardware_toml,
)

from twin import backends
from twin.backends import BackendError, resolve_backend, resolve_hardware_config
from twin.env.core import EnvConfigurationError
from twin.sessions import backend_session


@pytest.fixture(autouse=True)
def no_twin_variables(monkeypatch):
    monkeypatch.delenv(backends.BACKEND_ENV_VAR, raising=False)
    monkeypatch.delenv(backends.HARDWARE_CONFIG_ENV_VAR, raising=False)


def test_explicit_then_variable_then_sim(monkeypatch):
    assert resolve_backend() == "sim"
    monkeypatch.setenv("TWIN_BACKEND", "hardware")
    assert resolve_backend() == "hardware"
    assert resolve_backend("sim") == "sim"  # the argument wins over the variable
    monkeypatch.setenv("TWIN_BACKEND", "")
    assert resolve_backend() == "sim"  # an empty variable is no choice


def test_an_unknown_backend_lists_the_choices_and_the_closest(monkeypatch):
    with pytest.raises(BackendError, match=r"'hardwar'.*did you mean 'hardware'.*sim, hardware"):
        resolve_backend("hardwar")
    monkeypatch.setenv("TWIN_BACKEND", "nonsense")
    with pytest.raises(BackendError, match=r"'nonsense' in TWIN_BACKEND; expected one of: sim"):
        resolve_backend()
    with pytest.raises(BackendError, match="nonsense"):
        backends.open_robot()


def test_hardware_config_explicit_then_variable(monkeypatch):
    with pytest.raises(BackendError, match=r"pass --config FILE or set TWIN_HARDWARE_CONFIG"):
        resolve_hardware_config(how="--config FILE")
    monkeypatch.setenv("TWIN_HARDWARE_CONFIG", "/from/env.toml")
    assert resolve_hardware_config() == "/from/env.toml"
    assert resolve_hardware_config("/explicit.toml") == "/explicit.toml"


def test_sim_refuses_a_hardware_configuration_and_the_emulators(monkeypatch):
    with pytest.raises(BackendError, match=r"backend is 'sim' \(the default\)"):
        backends.open_robot(config="arm.toml")
    with pytest.raises(BackendError, match=r"'sim' \(the default\)"), backend_session(emulate=True):
        pass
    monkeypatch.setenv("TWIN_BACKEND", "sim")
    with (
        pytest.raises(BackendError, match=r"'sim' \(from TWIN_BACKEND\)"),
        backend_session(config="arm.toml"),
    ):
        pass


def test_sim_options_apply_on_the_sim_only():
    with backend_session() as options:
        assert options == {"backend": "sim", "config": None}
        with backends.open_robot(**options, sim_options={"seed": 3, "initial_q": np.zeros(6)}) as r:
            np.testing.assert_allclose(r.read().q, np.zeros(6), atol=1e-9)


def test_gym_make_follows_the_variable(monkeypatch):
    monkeypatch.setenv("TWIN_BACKEND", "nonsense")
    with pytest.raises(EnvConfigurationError, match="unknown backend 'nonsense'"):
        gym.make("twin/Reach-v0")
    monkeypatch.setenv("TWIN_BACKEND", "hardware")
    with pytest.raises(EnvConfigurationError, match=r"hardware_config=<path.*TWIN_HARDWARE_CONFIG"):
        gym.make("twin/Reach-v0")
    with gym.make("twin/Reach-v0", backend="sim") as env:  # the argument wins
        assert env.unwrapped.backend == "sim"


def test_gym_make_opens_the_emulated_hardware_from_the_variables(monkeypatch, tmp_path):
    with start_emulators(link_dir=tmp_path, source="ideal") as stack:
        toml = tmp_path / "hardware.toml"
        write_hardware_toml(stack, None, toml)
        monkeypatch.setenv("TWIN_BACKEND", "hardware")
        monkeypatch.setenv("TWIN_HARDWARE_CONFIG", str(toml))
        with gym.make("twin/Press-v0") as env:  # its scene is a sim option: ignored here
            robot = env.unwrapped.robot
            assert env.unwrapped.backend == "hardware"
            assert type(robot).__name__ == "SerialRobot"
            assert robot.config.bus.port == stack.ports["servo_bus"]
            np.testing.assert_allclose(robot.read().q, robot.model.home_q, atol=2e-3)


def test_the_written_toml_names_the_emulated_ports_and_keeps_the_rest(tmp_path):
    with start_emulators(link_dir=tmp_path, source="ideal") as stack:
        out = tmp_path / "hw.toml"
        text = write_hardware_toml(stack, None, out)
        written, shipped = load_config(out), load_config(default_config_path())
    assert written.bus.port == str(tmp_path / "servo_bus")
    assert written.ft.port == str(tmp_path / "ft_sensor")
    assert written.imu.port == str(tmp_path / "imu")
    assert written.joints == shipped.joints and written.control_mode == shipped.control_mode
    assert written.bus.reply_timeout_s >= shipped.bus.reply_timeout_s
    assert text.count("# ") >= default_config_path().read_text().count("# ")  # comments kept


def test_emulate_prints_the_config_when_asked(tmp_path):
    from twin.cli import main

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = main(
            ["emulate", "--source", "ideal", "--duration", "0.1", "--link-dir", str(tmp_path)]
            + ["--print-config", "--write-config", str(tmp_path / "x.toml")]
        )
    out = buffer.getvalue()
    assert code == 0
    assert f"config     {tmp_path / 'x.toml'}" in out
    assert f'port = "{tmp_path / "servo_bus"}"' in out
    assert load_config(tmp_path / "x.toml").hold_gravity_compensation is False  # ideal: no gravity
    assert "emulators stopped" in out


PATHS = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


@given(port=PATHS, key=st.sampled_from(["port", "baudrate_x", "new_key"]))
def test_setting_a_key_reads_back_and_touches_nothing_else(port, key):
    text = default_config_path().read_text()
    for table in ("bus", "imu", "absent_table"):
        out = _set_key(text, table, key, _toml_value(port))
        data, before = tomllib.loads(out), tomllib.loads(text)
        assert data[table][key] == port
        data[table].pop(key)
        before.get(table, {}).pop(key, None)
        if table == "absent_table":
            data.pop(table)
        assert data == before
