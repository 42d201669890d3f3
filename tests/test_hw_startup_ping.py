"""Start-up identifies each servo by a reply that is its PING's answer (``ArmBus.initialise``): a
late reply to an earlier request (another servo's, another length, or one of PING's own length
from a previous session) is flushed and the PING sent again, a bounded number of times; a real
model mismatch still fails with its one clear message. The late replies are real bytes on the
emulated bus (``FaultInjector.delay_next``: the reply leaves just ahead of the next one). Real
time through the ideal emulators."""

from __future__ import annotations

from dataclasses import replace

import pytest
from twin.hardware import SerialRobot
from twin.hardware.drivers.dynamixel_bus import DynamixelBus
from twin.hardware.emulator import BUS, EmulatorStack, IdealSource
from twin.hardware.emulator.faults import FaultInjector, dynamixel_status_frames
from twin.hardware.emulator.testing import emulator_config, wait_until
from twin.hardware.errors import ReplyTimeoutError, StartupError
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import PRESENT_BLOCK_ADDRESS, PRESENT_BLOCK_LENGTH

from twin.kinematics import ArmModel
from twin.robot import Health

MODEL = ArmModel.default()
#: Return Delay Time .. Operating Mode (9..11): the set-up's first read; three data bytes, as a
#: PING's answer has, and read back as model number 0 (``servo 1 is model 0`` at load 8-17).
SETUP_BLOCK = (9, 3)


def _config(**bus):
    config = emulator_config(watchdog_s=None, hold_gravity_compensation=False)
    return replace(
        config,
        ft=replace(config.ft, enabled=False),
        imu=replace(config.imu, enabled=False),
        bus=replace(config.bus, **bus),
    )


@pytest.fixture
def stack(tmp_path):
    with EmulatorStack(
        _config(), IdealSource(effort_limits=MODEL.effort_limits), link_dir=tmp_path
    ) as stack:
        yield stack


def _leave_a_late_reply(stack, pid: int, address: int, length: int) -> None:
    """An earlier session on the bus READs ``length`` bytes at ``address`` of servo ``pid`` and
    gives up waiting; the reply is held back and leaves just ahead of the bus's next reply."""
    stack.faults[BUS].delay_next(pid)
    with (
        DynamixelBus(stack.ports[BUS], reply_timeout_s=0.05) as bus,
        pytest.raises(ReplyTimeoutError),
    ):
        bus.read_block(pid, address, length)
    # held once the emulator has answered (it may do so after the host gave up: a loaded machine)
    wait_until(lambda: stack.faults[BUS].stats.frames_delayed == 1, 30)


def _opens_healthy(stack) -> SerialRobot:
    robot = SerialRobot(stack.robot_config(), model=MODEL)
    robot.step()
    assert robot.read().health == Health.OK
    return robot


@pytest.mark.parametrize(
    "late",
    [
        pytest.param((1, *SETUP_BLOCK), id="a 3-byte reply of the same servo (model 0)"),
        pytest.param((1, PRESENT_BLOCK_ADDRESS, PRESENT_BLOCK_LENGTH), id="another length"),
        pytest.param((2, *SETUP_BLOCK), id="another servo"),
    ],
)
def test_a_late_reply_in_the_ping_s_place_is_flushed_and_the_ping_sent_again(stack, late):
    pid, address, length = late
    _leave_a_late_reply(stack, pid, address, length)
    before = stack.servos.instructions
    robot = _opens_healthy(stack)  # before the fix: "servo 1 (joint_1) is model 0, ..."
    try:
        # the late reply came first, ahead of servo 1's PING answer, and was not taken for it
        assert robot.bus.stats.stray_packets >= 1
        assert stack.faults[BUS].active is False  # nothing held back any more
        pings = 6 + (pid == 1)  # one PING more for servo 1 when the late reply was its own
        assert stack.servos.instructions - before > pings  # the set-up after the PINGs ran
        assert robot.arm.map.ids == tuple(range(1, 7))
    finally:
        robot.close()


def _mismatched(stack, **bus):
    """The robot's configuration of ``stack`` with joint 1 said to be an XM430 (1020), while
    the emulated servo 1 is an XH540 (1100); one start-up attempt (``SerialRobot`` opens a device
    ``startup.attempts`` times, each with its own PINGs)."""
    config = stack.robot_config()
    config = replace(
        config,
        bus=replace(config.bus, **bus),
        startup=replace(config.startup, attempts=1),
        joints=(replace(config.joints[0], model_number=1020), *config.joints[1:]),
    )
    return config


HOW = "(startup.attempts, back-off from 0.05 s)"
MISMATCH = "servo 1 (joint_1) is model 1100, the config says 1020"


@pytest.mark.parametrize(("attempts", "pings"), [(4, 2), (1, 1)])
def test_a_real_model_mismatch_fails_with_its_message_once_two_answers_agree(
    stack, attempts, pings
):
    config = _mismatched(stack, attempts=attempts)
    before = stack.servos.instructions
    with pytest.raises(StartupError) as err:
        SerialRobot(config, model=MODEL)
    assert str(err.value).endswith(
        f"set up in 1 attempts {HOW}; last error: servo_bus: device "
        f"initialisation on {stack.ports[BUS]} failed: {MISMATCH}"
    )
    # confirmed by a second PING when there is a try left; never more than two
    assert stack.servos.instructions - before == pings


def test_a_late_reply_before_a_real_mismatch_does_not_hide_it(stack):
    _leave_a_late_reply(stack, 1, *SETUP_BLOCK)  # first answer "model 0", then 1100 twice
    before = stack.servos.instructions
    with pytest.raises(StartupError) as err:
        SerialRobot(_mismatched(stack), model=MODEL)
    assert str(err.value).endswith(f"failed: {MISMATCH}")
    assert stack.servos.instructions - before == 3


def test_delay_next_holds_a_frame_back_until_the_next_write_unchanged():
    faults = FaultInjector(split=dynamixel_status_frames)
    one = dxl.encode_status(dxl.ping_status(1, 1100, 46))
    two = dxl.encode_status(dxl.ping_status(2, 1020, 46))
    faults.delay_next(1)
    assert faults.apply(one + two) == (two, True)  # servo 1's frame held, servo 2's goes
    assert faults.active
    assert faults.apply(two) == (one + two, False)  # ahead of the next write, byte for byte
    assert faults.apply(one) == (one, False) and not faults.active
    assert faults.stats.frames_delayed == 1
    with pytest.raises(ValueError, match="frames >= 1"):
        faults.delay_next(1, 0)
    with pytest.raises(ValueError, match="split="):
        FaultInjector().delay_next(1)
