"""Soak: ``SerialRobot`` through the device emulators at its configured rate with 1 % of the bytes
of every port corrupted (servo bus, F/T sensor, IMU), against a clean run (the anchor, same code,
same machine, same run).

Each run: open clean (start-up under noise is ``tests/test_hw_failsafe_startup.py``), connect the
F/T services layer and log the sensor frame to CSV, switch the corruption on, then 40 % of the time
along a 0.5 Hz joint trajectory (a new command every period, one period further along it: a slow
loop traces it slower instead of jumping, and it pauses while commands are refused), 60 % with no new command (one hold written once). A supervisor
clears a stale-readings fault once readings are back, as an operator would. Figures: achieved rate and overruns (``diagnostics()``), the peak joint speed with no new
command (emulated physics, after 1 s to settle), joint limit violations of the emulated arm
(must be 0), stale faults, and F/T and IMU frames sent, received, logged and counted bad. The
ideal emulator source (independent joints, no gravity) runs in this process, in real time.

    python -m twin.benchmarks.soak_hardware [--quick] [--seed N]
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
from twin.benchmarks._report import emit_json, parse_args, print_table
from twin.hardware import (
    ControlRateWarning,
    DeviceFaultError,
    SerialRobot,
    TransportError,
    load_config,
)
from twin.hardware.emulator import BUS, FT, IMU, EmulatorStack, IdealSource
from twin.hardware.emulator.testing import emulator_config

from twin.kinematics import ArmModel
from twin.robot import Health, JointCommand
from twin.sensors.ft_service import FtSensorService

CORRUPT_RATE = 0.01
SETTLE_S = 1.0
AMPLITUDE = 0.2  # rad: peak speed 0.63 rad/s, within every joint's URDF velocity limit
KP = np.array([120.0, 240.0, 120.0, 25.0, 25.0, 10.0]) / 4
INERTIA = 0.05  # kg m^2, every joint of the ideal source
KD = 1.4 * np.sqrt(KP * INERTIA)  # damping ratio 0.7 on every joint


def _command(t: float) -> JointCommand:
    phase = np.arange(6) * np.pi / 3
    return JointCommand(
        q_des=AMPLITUDE * (np.sin(np.pi * t + phase) - np.sin(phase)),
        qd_des=AMPLITUDE * np.pi * np.cos(np.pi * t + phase),
        kp=KP,
        kd=KD,
    )


def _config():
    """The shipped configuration (rate, reply timeout, staleness, stale-fault threshold, retries),
    with the emulators' slower boot allowances, no watchdog (the no-command phase is the point)
    and no gravity."""
    shipped = load_config()
    config = emulator_config(
        shipped,
        watchdog_s=None,
        hold_gravity_compensation=False,
        stale_after_s=shipped.stale_after_s,
        stale_fault_cycles=shipped.stale_fault_cycles,
    )
    return replace(config, bus=shipped.bus)


def soak(seconds: float, corrupt_rate: float, seed: int) -> dict:
    model = ArmModel.default()
    config = _config()
    lower, upper, vmax = model.lower, model.upper, model.velocity_limits
    out: dict = {"seconds": seconds, "corrupt_rate": corrupt_rate}
    with (
        tempfile.TemporaryDirectory(prefix="twin-soak-") as tmp,
        EmulatorStack(
            config, IdealSource(inertia=INERTIA, effort_limits=model.effort_limits), seed=seed
        ) as stack,
        SerialRobot(stack.robot_config(), model=model) as robot,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always", ControlRateWarning)
        service = FtSensorService(robot)
        service.connect()
        log_path = Path(tmp) / "wrench.csv"
        service.log(str(log_path))
        for name in (BUS, FT, IMU):
            stack.faults[name].set(corrupt_rate=corrupt_rate)
        ft0, imu0 = robot.ft.frames_received, robot.imu.samples_received
        ft_sent0, imu_sent0 = stack.ft.frames_sent, stack.imu.groups_sent
        d0 = robot.diagnostics()
        position_violations = speed_violations = stale_faults = refused = 0
        hold_phase_violations = 0
        peak = peak_read = 0.0
        t0 = time.monotonic()
        moving_until, hold = t0 + 0.4 * seconds, None
        t_path = 0.0  # along the trajectory: one period per accepted command (see module doc)
        while (now := time.monotonic()) - t0 < seconds:
            try:
                if now < moving_until:
                    robot.write(_command(t_path))
                    t_path += robot.control_period_s
                elif hold is None:
                    hold = JointCommand(q_des=_command(t_path).q_des, kp=KP, kd=KD)
                    robot.write(hold)  # the last command of the run
            except DeviceFaultError:
                refused += 1
            robot.step()
            state = robot.read()
            service.update(state)
            if Health.FAULT in state.health and Health.JOINTS_STALE not in state.health:
                stale_faults += 1  # a stale-readings fault whose readings are back: clear it
                with contextlib.suppress(TransportError):  # not this time: the fault stays
                    robot.clear_fault()
            q, qd, _ = stack.source.joint_state()
            bad_q, bad_qd = np.any((q < lower) | (q > upper)), np.any(np.abs(qd) > vmax)
            position_violations += int(bad_q)
            speed_violations += int(bad_qd)
            hold_phase_violations += int(hold is not None and (bad_q or bad_qd))
            if hold is not None and now > moving_until + SETTLE_S:
                peak = max(peak, float(np.max(np.abs(qd))))
                peak_read = max(peak_read, float(np.max(np.abs(state.qd))))
        service.log_stop()
        missed, total = service.log_info()
        d = robot.diagnostics()
        ft_stats, imu_stats = robot.ft.parser_stats, robot.imu.parser_stats
        with open(log_path) as fh:
            rows = sum(1 for line in fh if line and line[0].isdigit())
        out.update(
            achieved_hz=(d.cycles - d0.cycles) / (time.monotonic() - t0),
            diagnostics_hz=d.achieved_rate_hz,
            overruns=d.overruns - d0.overruns,
            failed_reads=d.failed_reads - d0.failed_reads,
            worst_cycle_ms=d.worst_cycle_s * 1e3,
            rate_warnings=sum(issubclass(w.category, ControlRateWarning) for w in caught),
            max_speed_no_command=peak,
            max_speed_no_command_read=peak_read,
            limit_violations=position_violations + speed_violations,
            position_limit_violations=position_violations,
            velocity_limit_violations=speed_violations,
            violations_no_command=hold_phase_violations,
            stale_faults=stale_faults,
            refused_writes=refused,
            bus_replies_damaged=stack.faults[BUS].stats.writes_affected,
            bus_crc_errors=robot.bus.parser_stats.crc_errors,
            ft_sent=stack.ft.frames_sent - ft_sent0,
            ft_damaged=stack.ft.frames_damaged,
            ft_received=robot.ft.frames_received - ft0,
            ft_logged=rows,
            ft_log_missed=missed,
            ft_log_total=total,
            ft_bad=ft_stats.crc_errors,
            ft_dropped=ft_stats.dropped_frames,
            imu_sent=stack.imu.groups_sent - imu_sent0,
            imu_damaged=stack.faults[IMU].stats.writes_affected,
            imu_received=robot.imu.samples_received - imu0,
            imu_bad=imu_stats.crc_errors,
            imu_dropped=imu_stats.dropped_frames,
        )
        for name in (BUS, FT, IMU):  # a clean line for the park
            stack.faults[name].set(corrupt_rate=0.0)
    return out


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    seconds = 4.0 if args.quick else 60.0
    anchor = soak(min(seconds, 15.0), 0.0, args.seed)
    noisy = soak(seconds, CORRUPT_RATE, args.seed)
    configured = 1.0 / load_config().control_period_s
    rows = [
        ("achieved rate, Hz", anchor["achieved_hz"], noisy["achieved_hz"]),
        ("  (configured)", configured, configured),
        ("overruns (periods missed)", anchor["overruns"], noisy["overruns"]),
        ("failed joint reads", anchor["failed_reads"], noisy["failed_reads"]),
        ("worst cycle, ms", anchor["worst_cycle_ms"], noisy["worst_cycle_ms"]),
        ("ControlRateWarning issued", anchor["rate_warnings"], noisy["rate_warnings"]),
        (
            "max joint speed, no new command, rad/s",
            anchor["max_speed_no_command"],
            noisy["max_speed_no_command"],
        ),
        (
            "  as read by the robot, rad/s",
            anchor["max_speed_no_command_read"],
            noisy["max_speed_no_command_read"],
        ),
        (
            "limit violations, position / velocity (must be 0)",
            f"{anchor['position_limit_violations']} / {anchor['velocity_limit_violations']}",
            f"{noisy['position_limit_violations']} / {noisy['velocity_limit_violations']}",
        ),
        (
            "  of which with no new command",
            anchor["violations_no_command"],
            noisy["violations_no_command"],
        ),
        ("stale faults (cleared when back)", anchor["stale_faults"], noisy["stale_faults"]),
        ("writes refused (fault)", anchor["refused_writes"], noisy["refused_writes"]),
        (
            "bus replies damaged / CRC errors",
            f"{anchor['bus_replies_damaged']} / {anchor['bus_crc_errors']}",
            f"{noisy['bus_replies_damaged']} / {noisy['bus_crc_errors']}",
        ),
        (
            "F/T frames sent / damaged",
            f"{anchor['ft_sent']} / {anchor['ft_damaged']}",
            f"{noisy['ft_sent']} / {noisy['ft_damaged']}",
        ),
        ("F/T frames received", anchor["ft_received"], noisy["ft_received"]),
        (
            "F/T rows logged (log_info missed/total)",
            f"{anchor['ft_logged']} ({anchor['ft_log_missed']}/{anchor['ft_log_total']})",
            f"{noisy['ft_logged']} ({noisy['ft_log_missed']}/{noisy['ft_log_total']})",
        ),
        (
            "F/T counted bad: CRC / dropped",
            f"{anchor['ft_bad']} / {anchor['ft_dropped']}",
            f"{noisy['ft_bad']} / {noisy['ft_dropped']}",
        ),
        (
            "IMU cycles sent / writes damaged",
            f"{anchor['imu_sent']} / {anchor['imu_damaged']}",
            f"{noisy['imu_sent']} / {noisy['imu_damaged']}",
        ),
        ("IMU samples received", anchor["imu_received"], noisy["imu_received"]),
        (
            "IMU counted bad: checksum / dropped",
            f"{anchor['imu_bad']} / {anchor['imu_dropped']}",
            f"{noisy['imu_bad']} / {noisy['imu_dropped']}",
        ),
    ]
    print_table(
        f"SerialRobot soak through the emulators ({noisy['seconds']:g} s at {CORRUPT_RATE:.0%} corrupted "
        f"bytes on every port; anchor: {anchor['seconds']:g} s clean)",
        ["figure", "clean (anchor)", f"{CORRUPT_RATE:.0%} corrupted"],
        rows,
    )
    emit_json(
        "soak_hardware",
        {
            "configured_hz": configured,
            "clean": anchor,
            "noisy": noisy,
            "rate_ratio": noisy["achieved_hz"] / anchor["achieved_hz"],
            "rate_vs_configured": noisy["achieved_hz"] / configured,
            "speed_ratio": noisy["max_speed_no_command"]
            / max(anchor["max_speed_no_command"], 1e-9),
            "limit_violations": noisy["limit_violations"] + anchor["limit_violations"],
        },
    )


if __name__ == "__main__":
    main()
