"""The shared Bota ASCII command interpreter (``twin.sensors.bota_commands``) and its two owners."""

from __future__ import annotations

import numpy as np
import pytest
from twin.hardware.emulator.ft_device import IdealFtDevice
from twin.sim.ft_sensor import FtSensorConfig, FtSensorModel, SimFtDevice

from twin.robot import FtStatus
from twin.sensors.bota_commands import (
    BAUD_BY_CODE,
    BotaCommandInterpreter,
    BotaSettings,
    check_sinc,
    line_rate_hz,
)
from twin.sensors.errors import InvalidArgumentError

ROW2 = "m2,0.000000,0.000000,2.000000,0.000000,0.000000,0.000000"
OFFSETS = "b,1.000,-2.000,0.500,0.000,0.000,0.250"


def make(**kw) -> BotaCommandInterpreter:
    return BotaCommandInterpreter(BotaSettings(), serial_number=77, product_name="Unit", **kw)


def configured() -> BotaCommandInterpreter:
    dev = make()
    assert dev.reply("C") == "r,0,C,0"
    return dev


def test_mode_commands_and_resets():
    dev = make()
    assert dev.streaming and not dev.in_config_mode and dev.restarts == 0
    assert dev.reply("C") == "r,0,C,0" and dev.in_config_mode
    assert dev.reply("C") == "r,0,C,0" and dev.restarts == 0  # C starts no grid
    assert dev.reply("R") == "r,0,R,0" and dev.streaming and dev.restarts == 1
    assert dev.reply("R") == "r,0,R,0" and dev.restarts == 2  # R in run mode restarts too
    dev.reply("C")
    assert dev.reply("I") == "App Init" and dev.streaming and dev.restarts == 3
    dev.reply("C")
    assert dev.reply("#") == "" and dev.streaming and dev.restarts == 4
    assert dev.reply("  C\r\n") == "r,0,C,0"  # surrounding whitespace is ignored


def test_each_setting_command_reply_and_effect_on_pending():
    dev = configured()
    assert dev.reply("c,1,0,1,2") == "r,0,c,0"
    assert dev.reply("f,512,1,1,0") == "r,0,f,0"
    assert dev.reply(OFFSETS) == "r,0,b,0"
    assert dev.reply(ROW2) == "r,0,m,0"
    p = dev.pending
    assert (p.temp_comp, p.use_calibration, p.data_format, p.baud_code) == (1, 0, 1, 2)
    assert (p.sinc_length, p.chop, p.fast, p.fir_disable) == (512, 1, 1, 0)
    np.testing.assert_array_equal(p.offsets, [1.0, -2.0, 0.5, 0.0, 0.0, 0.25])
    np.testing.assert_array_equal(p.calibration[2], [0, 0, 2, 0, 0, 0])
    np.testing.assert_array_equal(np.delete(p.calibration, 2, 0), np.delete(np.eye(6), 2, 0))


def test_settings_take_effect_only_on_R():
    dev = configured()
    dev.reply("f,1024,0,0,1")
    dev.reply(OFFSETS)
    assert dev.active.sinc_length == 256 and not dev.active.offsets.any()
    assert dev.reply("R") == "r,0,R,0"
    assert dev.active.sinc_length == 1024 and dev.active.offsets[0] == 1.0
    assert dev.active is not dev.pending  # later changes stay pending again
    dev.reply("C")
    dev.reply("f,64,0,0,1")
    assert dev.active.sinc_length == 1024


def test_setting_commands_are_rejected_in_run_mode():
    dev = make()
    before = dev.pending.describe()
    for cmd in ("c,0,1,0,4", "f,512,0,0,1", OFFSETS, ROW2, "s", "l", "w", "p?"):
        assert dev.reply(cmd) == f"r,0,{cmd[0]},1", cmd
    assert dev.pending.describe() == before and dev.streaming


@pytest.mark.parametrize(
    "cmd",
    [
        "c,0,1,0,6",  # no baud code 6
        "c,2,1,0,4",  # temp_comp is 0 or 1
        "c,0,1,0",  # too few values
        "c,0,1,0,4,1",  # too many
        "c0,1,0,4",  # the command character stands alone before its comma
        "f,63,0,0,1",  # sinc below 64
        "f,2049,0,0,1",
        "f,512.0,0,0,1",
        "b,1,2,3,4,5",
        "b,1,2,3,4,5,nan",
        "b,1,2,3,4,5,x",
        "m6,1,0,0,0,0,0",  # rows 0..5
        "m,1,0,0,0,0,0",  # no row
        "m+1,1,0,0,0,0,0",
        "m1,1,0,0,0,0,inf",
    ],
)
def test_bad_arguments_answer_code_2_and_change_nothing(cmd):
    dev = configured()
    before = dev.pending.describe()
    assert dev.reply(cmd) == f"r,0,{cmd[0]},2"
    assert dev.pending.describe() == before


def test_unknown_commands_answer_code_2_in_either_mode():
    dev = make()
    assert dev.reply("x,1") == "r,0,x,2"
    dev.reply("C")
    assert dev.reply("?") == "r,0,?,2"


@pytest.mark.parametrize("text", ["", "   ", "b," + "1," * 40])
def test_empty_or_overlong_command_is_an_input_error(text):
    with pytest.raises(InvalidArgumentError, match=r"1\.\.64 characters"):
        make().reply(text)


def test_save_load_and_resets_restore_the_saved_settings():
    dev = configured()
    dev.reply("f,512,0,0,1")
    assert dev.reply("s") == "r,0,s,0"
    dev.reply("f,2048,0,0,1")
    assert dev.reply("l") == "r,0,l,0" and dev.pending.sinc_length == 512
    dev.reply("f,2048,0,0,1")
    dev.reply("R")
    assert dev.active.sinc_length == 2048
    dev.reply("I")  # soft reset: saved settings pending and active
    assert dev.active.sinc_length == dev.pending.sinc_length == 512
    dev.reply("C")
    dev.reply(OFFSETS)
    dev.reply("#")
    assert not dev.active.offsets.any() and not dev.pending.offsets.any()
    dev.reply("C")
    dev.reply(OFFSETS)
    dev.reply("s")
    dev.pending.offsets[0] = 9.0  # saved is a copy, not the pending object
    assert dev.saved.offsets[0] == 1.0


def test_print_config_and_metadata_replies():
    dev = configured()
    dev.reply(OFFSETS)
    dev.reply(ROW2)
    assert dev.reply("w").split("\r\n") == [
        "c,0,1,0,4",
        "f,256,0,0,1",
        "b, 1.000,-2.000, 0.500, 0.000, 0.000, 0.250",
        "m0, 1.000000, 0.000000, 0.000000, 0.000000, 0.000000, 0.000000",
        "m1, 0.000000, 1.000000, 0.000000, 0.000000, 0.000000, 0.000000",
        "m2, 0.000000, 0.000000, 2.000000, 0.000000, 0.000000, 0.000000",
        "m3, 0.000000, 0.000000, 0.000000, 1.000000, 0.000000, 0.000000",
        "m4, 0.000000, 0.000000, 0.000000, 0.000000, 1.000000, 0.000000",
        "m5, 0.000000, 0.000000, 0.000000, 0.000000, 0.000000, 1.000000",
        "r,0,w,0",
    ]
    assert dev.reply("p?") == "p,0,77,0,0,Unit\r\nr,0,p,0"


def test_data_formats_and_identity_checks():
    binary_only = make(data_formats=(0,))
    binary_only.reply("C")
    assert binary_only.reply("c,0,1,1,4") == "r,0,c,2"
    assert binary_only.reply("c,0,1,0,4") == "r,0,c,0"
    with pytest.raises(InvalidArgumentError, match="no commas"):
        BotaCommandInterpreter(BotaSettings(), serial_number=1, product_name="a,b")


def test_sinc_check_line_rate_and_status_bits():
    assert check_sinc(np.int64(64)) == 64
    for bad in (63, 2049, 256.0, "256"):
        with pytest.raises(InvalidArgumentError, match=r"\[64, 2048\]"):
            check_sinc(bad)
    assert line_rate_hz(4) == pytest.approx(460800 / 370)
    assert sorted(BAUD_BY_CODE) == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    assert BotaSettings(sinc_length=128, baud_code=4).status() == FtStatus.OK  # 400 Hz
    assert BotaSettings(sinc_length=128, baud_code=2).status() == FtStatus.APP_TOO_SLOW
    assert BotaSettings(use_calibration=0).status(True) == FtStatus.APP_TOO_SLOW | FtStatus.RAW


SCRIPT = [
    "f,512,0,0,1",
    "C",
    "c,0,1,0,2",
    "f,128,0,0,1",
    "f,5,0,0,1",
    OFFSETS,
    ROW2,
    "m9,1,0,0,0,0,0",
    "w",
    "s",
    "R",
    "C",
    "f,1024,0,0,1",
    "l",
    "w",
    "I",
    "#",
    "z",
]


def test_sim_and_emulator_devices_answer_alike():
    model = FtSensorModel(FtSensorConfig(), 0.001, np.eye(6), np.random.default_rng(0))
    sim, emu = SimFtDevice(model, lambda: 0), IdealFtDevice()
    for cmd in SCRIPT:
        assert sim.command(cmd) == emu.command(cmd), cmd
    assert sim.command("C") == emu.command("C")
    assert sim.command("c,0,1,1,4") == "r,0,c,0"  # CSV: the sim accepts it,
    assert emu.command("c,0,1,1,4") == "r,0,c,2"  # the emulator does not emulate it
    assert sim.command("p?") == "p,0,1234,0,0,SensONE-sim\r\nr,0,p,0"
    assert emu.command("p?") == "p,0,4242,0,0,BotaEmu\r\nr,0,p,0"


def test_owners_follow_the_active_settings():
    model = FtSensorModel(FtSensorConfig(), 0.001, np.eye(6), np.random.default_rng(0))
    sim, emu = SimFtDevice(model, lambda: 0), IdealFtDevice()
    for dev in (sim, emu):
        dev.command("C")
        dev.command("f,512,0,0,1")
        dev.command("c,0,0,0,4")
    assert not model.streaming and model.sinc_length == 256  # nothing in force before R
    assert sim.sinc_length == 512 and emu.sinc_length == 256  # the sim reports the pending value
    assert emu.status_bits() == FtStatus.OK
    for dev in (sim, emu):
        assert dev.command("R") == "r,0,R,0"
    assert model.streaming and model.settings is sim.active and model.sinc_length == 512
    assert emu.sinc_length == 512 and emu.status_bits() == FtStatus.RAW
    np.testing.assert_array_equal(emu.output(np.arange(6.0)), np.arange(6.0))  # raw: no M, b
