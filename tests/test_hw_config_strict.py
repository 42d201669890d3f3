"""The hardware TOML refuses what it does not know and every number out of range (issue 13,
item 13): a misspelt key names the closest known one, every numeric key has its interval, and
each message names the file, the section and key, and what was expected."""

from __future__ import annotations

import copy

import pytest
import tomllib
from hypothesis import given
from hypothesis import strategies as st
from twin.hardware import ConfigError, load_config
from twin.hardware.config import parse_config

SHIPPED = load_config()
SOURCE = "cfg.toml"


def _raw() -> dict:
    with open(SHIPPED.source, "rb") as fh:
        return tomllib.load(fh)


RAW = _raw()


def _refused(data: dict) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(data, source=SOURCE)
    return str(err.value)


def test_shipped_file_loads_with_every_key_known():
    assert parse_config(_raw(), source=SOURCE).source == SOURCE
    assert SHIPPED.stale_fault_cycles == 3 and SHIPPED.bus.attempts == 4
    assert SHIPPED.startup.attempts == 4 and SHIPPED.rate_warning_fraction == 0.9


@pytest.mark.parametrize(
    ("section", "wrong", "right"),
    [
        ("robot", "control_perod_s", "control_period_s"),
        ("robot", "stale_fault_cycle", "stale_fault_cycles"),
        ("bus", "reply_timout_s", "reply_timeout_s"),
        ("ft_sensor", "sinc_lenght", "sinc_length"),
        ("imu", "rate", "rate_hz"),
        ("reconnect", "backoff_max", "backoff_max_s"),
        ("startup", "attempt", "attempts"),
    ],
)
def test_a_misspelt_key_is_refused_with_the_closest_known_key(section, wrong, right):
    data = _raw()
    data[section][wrong] = data[section].pop(right, 1)
    text = _refused(data)
    assert text.startswith(f"{SOURCE}: unknown key {wrong!r} in [{section}]")
    assert f"did you mean {right!r}?" in text


def test_a_misspelt_joint_key_and_table_are_refused_with_hints():
    data = _raw()
    data["joint"][4]["curent_limit"] = data["joint"][4].pop("current_limit")
    assert "unknown key 'curent_limit' in [[joint]] 4 (did you mean 'current_limit'?)" in _refused(
        data
    )
    data = _raw()
    data["ft_senor"] = data.pop("ft_sensor")
    assert "unknown table [ft_senor] (did you mean 'ft_sensor'?)" in _refused(data)


def test_a_key_with_nothing_close_lists_the_known_keys():
    data = _raw()
    data["bus"]["xyzzy"] = 1
    text = _refused(data)
    assert "did you mean" not in text and "known keys: attempts, baudrate" in text


# (section, key, a bad value, what the message must say): every numeric key of the file.
OUT_OF_RANGE = [
    ("robot", "control_period_s", 0.0, "[0.0001, 1] (s)"),
    ("robot", "control_period_s", 2.0, "[0.0001, 1] (s)"),
    ("robot", "watchdog_s", -1.0, "[0, 60]"),
    ("robot", "watchdog_s", 0.001, "at least robot.control_period_s"),
    ("robot", "stale_after_s", 0.001, "[0.004, 10]"),
    ("robot", "stale_fault_cycles", 0, "[1, 1000]"),
    ("robot", "rate_warning_fraction", 1.5, "[0, 1]"),
    ("robot", "hold_kp", [1.0] * 5 + [1e9], "numbers in [0, 100000]"),
    ("robot", "hold_kd", [1.0] * 5 + [-1.0], "numbers in [0, 100000]"),
    ("bus", "baudrate", 12345, "one of [9600, 57600"),
    ("bus", "reply_timeout_s", 0.0, "(0, 1] (s)"),
    ("bus", "return_delay_time_us", 600, "[0, 508] (us)"),
    ("bus", "servo_loop_period_s", -0.001, "(0, 0.1]"),
    ("bus", "current_unit_a", 5.0, "(0, 0.1] (A)"),
    ("bus", "attempts", 0, "[1, 20]"),
    ("reconnect", "backoff_initial_s", 0.0, "(0, 60]"),
    ("reconnect", "backoff_max_s", 0.01, "[0.05, 600]"),
    ("startup", "attempts", 50, "[1, 20]"),
    ("startup", "backoff_initial_s", 20.0, "(0, 10]"),
    ("startup", "backoff_max_s", 0.0, "[0.05, 60]"),
    ("ft_sensor", "baudrate", 12345, "one of"),
    ("ft_sensor", "sinc_length", 10, "sinc_length must be"),
    ("ft_sensor", "boot_timeout_s", 0.0, "(0, 60]"),
    ("ft_sensor", "ack_timeout_s", 100.0, "(0, 60]"),
    ("ft_sensor", "activation_timeout_s", -1.0, "(0, 60]"),
    ("imu", "baudrate", 1000, "one of"),
    ("imu", "rate_hz", 7.0, "rate_hz must be one of"),
    ("imu", "first_sample_timeout_s", 0.0, "(0, 60]"),
    ("joint", "id", 300, "[0, 252] (servo id)"),
    ("joint", "model_number", -1, "[0, 65535]"),
    ("joint", "zero_offset_ticks", 1e9, "ticks"),
    ("joint", "ticks_per_rad", 0.0, "(0, 1e+06] (ticks/rad)"),
    ("joint", "torque_constant_nm_per_a", -2.0, "(0, 1000] (N m/A)"),
    ("joint", "current_limit", 5000, "[1, 2047]"),
    ("joint", "direction", 0, "1 or -1"),
]


@pytest.mark.parametrize(("section", "key", "bad", "expected"), OUT_OF_RANGE)
def test_every_number_is_range_checked_naming_file_section_and_key(section, key, bad, expected):
    data = _raw()
    table = data[section][2] if section == "joint" else data[section]
    table[key] = bad
    text = _refused(data)
    name = f"joint[2].{key}" if section == "joint" else f"{section}.{key}"
    assert text.startswith(f"{SOURCE}: {name} must be"), text
    assert expected in text and (repr(bad) in text or str(bad) in text), text


def test_every_numeric_key_of_the_shipped_file_is_covered():
    numeric = {
        (section, key)
        for section, table in RAW.items()
        if isinstance(table, dict)
        for key, v in table.items()
        if isinstance(v, (int, float, list)) and not isinstance(v, bool)
    } | {
        ("joint", key)
        for key, v in RAW["joint"][0].items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    assert numeric <= {(s, k) for s, k, _, _ in OUT_OF_RANGE}


@given(st.sampled_from(sorted({(s, k) for s, k, _, _ in OUT_OF_RANGE})), st.booleans())
def test_a_wrong_type_is_refused_for_every_number(entry, as_text):
    section, key = entry
    data = copy.deepcopy(RAW)
    table = data[section][0] if section == "joint" else data[section]
    table[key] = "12" if as_text else True
    with pytest.raises(ConfigError, match=key):
        parse_config(data, source=SOURCE)
