"""WitMotion output cycles -> ``ImuSample``: what the IMU driver's reader thread does with each
packet that passed its 8-bit sum, in one object the driver feeds (``WitmotionImu``) and the fuzz
tests drive without a port (``tests/test_fuzz_ft_imu.py``).

One output cycle is one packet per enabled type, in type order; it becomes one sample when its
last packet arrives. A cycle that misses a packet (a new cycle begins first, or the last type
arrives without the others) is counted in ``incomplete`` and dropped. A complete cycle that cannot
be a measurement (``witmotion.implausibility``: temperature, quaternion norm) is dropped and
counted by reason in ``checks``, never published. With the time packet (0x50) in the content its
device clock is checked too (``sample_checks.DeviceClock``): a cycle whose time fields are out of
range (``time fields``) or whose clock jumps (``clock jump``) is dropped the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from twin.hardware.drivers.sample_checks import CLOCK_JUMP, DeviceClock, SampleChecks
from twin.hardware.protocols import witmotion as wit

from twin.robot import ImuSample
from twin.spatial import quaternion

#: Where the time packet's clock wraps: microseconds in a 31-day month (``witmotion.time_of``).
MONTH_US = 31 * 24 * 3600 * 1_000_000
TIME_FIELDS = "time fields"
#: Below this norm a reported quaternion is "none sent" (all zeros), not an orientation.
QUATERNION_PRESENT_NORM = 0.5


class ImuCycles:
    """Assembles and checks one IMU's output cycles (module doc).

    content: the enabled packet types (must include 0x51 and 0x52); rate_hz: the output rate.
    """

    def __init__(self, content: Sequence[int], rate_hz: float) -> None:
        self.content = tuple(sorted(int(k) for k in content))
        self.checks = SampleChecks()
        self.clock: DeviceClock[ImuSample] = DeviceClock(1e6 / rate_hz, MONTH_US)
        self.incomplete = 0
        self._cycle: dict[int, wit.Packet] = {}

    def clear(self) -> None:
        """Forget a half-received cycle (the port was lost)."""
        self._cycle.clear()

    def feed(self, p: wit.Packet, now_us: int, publish: Callable[[ImuSample], None]) -> None:
        """Take one packet of an enabled type, received at host time ``now_us``;
        ``publish(sample)`` for each sample accepted now."""
        cycle = self._cycle
        if p.kind in cycle or (cycle and p.kind < max(cycle)):
            self.incomplete += 1  # a new cycle began before the last one completed
            cycle.clear()
        cycle[p.kind] = p
        if p.kind != self.content[-1]:
            return
        complete = len(cycle) == len(self.content)
        packets = dict(cycle)
        cycle.clear()
        if not complete:
            self.incomplete += 1
            return
        self._judge(packets, now_us, publish)

    def _judge(self, cycle: dict[int, wit.Packet], now_us: int, publish) -> None:
        force, temperature = wit.accel_of(cycle[wit.PacketType.ACCEL])
        rate = wit.gyro_of(cycle[wit.PacketType.GYRO])
        q = orientation = None
        if wit.PacketType.QUATERNION in cycle:
            q = wit.quaternion_of(cycle[wit.PacketType.QUATERNION])
        reason = wit.implausibility(temperature, q)
        if reason is not None:
            self.checks.reject(reason, now_us)
            return
        if q is not None:
            if np.linalg.norm(q) > QUATERNION_PRESENT_NORM:
                orientation = quaternion.canonicalize(q)
        elif wit.PacketType.ANGLE in cycle:
            roll, pitch, yaw = wit.angle_of(cycle[wit.PacketType.ANGLE])
            orientation = quaternion.from_rpy(roll, pitch, yaw)
        sample = ImuSample(
            t_us=now_us, specific_force=force, angular_rate=rate, orientation=orientation
        )

        def accept(s: ImuSample, _device_t_us: int | None = None) -> None:
            self.checks.accept()
            publish(s)

        time_packet = cycle.get(wit.PacketType.TIME)
        if time_packet is None:
            accept(sample)
            return
        device_t = wit.time_of(time_packet)
        if device_t is None:
            self.checks.reject(TIME_FIELDS, now_us)
            return
        jumps = self.clock.offer(device_t, now_us, sample, accept)
        self.checks.reject(CLOCK_JUMP, now_us, jumps)
