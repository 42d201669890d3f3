"""The official DYNAMIXEL SDK (PyPI ``dynamixel-sdk``, optional: skipped when absent) reads the
servo emulator with ``GroupSyncRead.fastSyncRead`` and ``GroupBulkRead.fastBulkRead``."""

from __future__ import annotations

import numpy as np
import pytest
from twin.hardware.clock import ManualClock
from twin.hardware.config import load_config
from twin.hardware.emulator import IdealSource, ServoChainEmulator
from twin.hardware.protocols.dynamixel_table import XTable

sdk = pytest.importorskip("dynamixel_sdk")

IDS = [1, 2, 3, 4, 5, 6]


@pytest.fixture()
def sdk_port(tmp_path):
    config = load_config()
    q0 = np.array([0.1, -0.2, 0.3, -0.4, 0.5, -0.6])
    emu = ServoChainEmulator(IdealSource(q0), config.joint_map(), ManualClock(), link_dir=tmp_path)
    port = sdk.PortHandler(emu.port.path)
    assert port.openPort() and port.setBaudRate(1_000_000)
    yield emu, port, sdk.PacketHandler(2.0)
    port.closePort()
    emu.close()


def test_official_fast_sync_read(sdk_port):
    emu, port, handler = sdk_port
    group = sdk.GroupSyncRead(port, handler, 126, 10)
    for pid in IDS:
        assert group.addParam(pid)
    assert group.fastSyncRead() == sdk.COMM_SUCCESS
    for pid in IDS:
        table = emu.servos[pid].table
        position = group.getData(pid, XTable.PRESENT_POSITION.address, 4)
        assert position == int.from_bytes(table[132:136], "little")
        assert group.getData(pid, XTable.PRESENT_CURRENT.address, 2) == int.from_bytes(
            table[126:128], "little"
        )
    positions = [group.getData(pid, 132, 4) for pid in IDS]
    assert len(set(positions)) == 6  # six different joints, not one block six times


def test_official_fast_bulk_read(sdk_port):
    emu, port, handler = sdk_port
    group = sdk.GroupBulkRead(port, handler)
    assert group.addParam(3, XTable.PRESENT_POSITION.address, 4)
    assert group.addParam(1, XTable.MODEL_NUMBER.address, 2)
    assert group.addParam(5, XTable.ID.address, 1)
    assert group.fastBulkRead() == sdk.COMM_SUCCESS
    assert group.getData(3, 132, 4) == int.from_bytes(emu.servos[3].table[132:136], "little")
    assert group.getData(1, 0, 2) == emu.servos[1].model_number
    assert group.getData(5, 7, 1) == 5
