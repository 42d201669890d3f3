"""Serial backend: parser throughput per protocol against its line rate, the cycle's joint read
with SYNC_READ and with FAST_SYNC_READ, and the control-cycle rate ``SerialRobot`` sustains
through the device emulators with each.

Anchors, computed in this run: the line rate of each protocol (8N1: 10 bits per byte) at its
configured baud rate; the target control rate (250 Hz). Targets: every parser >= 20x its line
rate; >= 250 Hz of six-joint control with F/T and IMU streaming. The emulators run in their own
process, as ``twin emulate`` does, with the servo replies taking their wire time at the bus baud
rate (``serve_emulators``). The joint read is timed both ways on one robot, call by call in
turn, and so is the control rate, in blocks of cycles in turn.

    python benchmarks/bench_serial.py [--quick] [--seed N]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit_json, parse_args, print_table, rate
from twin.hardware import SerialRobot, load_config
from twin.hardware.emulator.testing import emulator_config
from twin.hardware.errors import TransportError
from twin.hardware.protocols import bota, witmotion
from twin.hardware.protocols import dynamixel as dxl
from twin.hardware.protocols.dynamixel_table import PRESENT_BLOCK_LENGTH

from twin.robot import JointCommand

TARGET_RATIO = 20.0
TARGET_HZ = 250.0


def _line_rate(baud: int, packet_bytes: int) -> float:
    return baud / (10.0 * packet_bytes)


def _chunks(wire: bytes, size: int = 4096) -> list[bytes]:
    return [wire[i : i + size] for i in range(0, len(wire), size)]


def _corrupt(wire: bytes, rate_per_byte: float, rng: np.random.Generator) -> bytes:
    arr = np.frombuffer(wire, np.uint8).copy()
    hit = rng.random(arr.size) < rate_per_byte
    arr[hit] ^= rng.integers(1, 256, int(hit.sum()), dtype=np.uint8)
    return arr.tobytes()


def parser_rows(n: int, min_time_s: float, rng: np.random.Generator) -> list[dict]:
    cfg = load_config()
    wrench = rng.normal(0, 10, (n, 6)).astype(np.float32)
    bota_wire = b"".join(
        bota.encode_frame(bota.BotaFrame(0, tuple(map(float, w)), 1250 * k, 30.0))
        for k, w in enumerate(wrench)
    )
    present = [
        dxl.StatusPacket(1 + k % 6, 0, rng.integers(0, 256, 10, dtype=np.uint8).tobytes())
        for k in range(n)
    ]
    dxl_wire = b"".join(dxl.encode_status(p) for p in present)
    wit_wire = b"".join(
        witmotion.encode_packet(0x51 + k % 3, rng.integers(-30000, 30000, 4).tolist())
        for k in range(n)
    )
    reply = len(dxl.encode_status(present[0]))
    cases = [
        ("bota 37 B frames", bota.BotaStreamParser, bota_wire, cfg.ft.baudrate, bota.FRAME_LENGTH),
        (
            "bota, 1% bytes corrupted",
            bota.BotaStreamParser,
            _corrupt(bota_wire, 0.01, rng),
            cfg.ft.baudrate,
            bota.FRAME_LENGTH,
        ),
        (
            "dynamixel, one 6-servo reply per feed",
            dxl.DynamixelStreamParser,
            dxl_wire,
            cfg.bus.baudrate,
            reply,
            6 * reply,
        ),
        (
            "dynamixel 21 B status",
            dxl.DynamixelStreamParser,
            dxl_wire,
            cfg.bus.baudrate,
            reply,
        ),
        (
            "witmotion 11 B packets",
            witmotion.WitmotionStreamParser,
            wit_wire,
            cfg.imu.baudrate,
            witmotion.PACKET_LENGTH,
        ),
        (
            "witmotion at 921600 baud",
            witmotion.WitmotionStreamParser,
            wit_wire,
            921600,
            witmotion.PACKET_LENGTH,
        ),
    ]
    rows = []
    for name, factory, wire, baud, size, *feed in cases:
        chunks = _chunks(wire, *feed)  # 4 KiB reads unless the case says otherwise

        def run(factory=factory, chunks=chunks):
            parser = factory()
            for c in chunks:
                parser.feed(c)

        packets_per_s = rate(run, n, min_time_s)
        line = _line_rate(baud, size)
        rows.append(
            dict(
                name=name,
                baud=baud,
                line_rate=line,
                parsed_per_s=packets_per_s,
                ratio=packets_per_s / line,
            )
        )
    return rows


def serve_emulators(link_dir: str) -> None:
    """The emulators as ``twin emulate --source ideal`` runs them, with the servo chain's replies
    taking their wire time at the configured bus baud rate (a pty has none of its own: without
    it, six status packets would cost no more than one). Runs until stdin closes."""
    from twin.hardware.emulator import IdealSource
    from twin.hardware.emulator.stack import EmulatorStack

    from twin.kinematics import ArmModel

    config, model = load_config(), ArmModel.default()
    source = IdealSource(
        model.home_q, effort_limits=model.effort_limits, sinc_length=config.ft.sinc_length
    )
    sys.setswitchinterval(0.0005)  # this process is all I/O threads: switch promptly
    with EmulatorStack(config, source, link_dir=link_dir) as stack:
        stack.servos.wire_baud = config.bus.baudrate
        print("ready", flush=True)
        sys.stdin.read()


def _start_emulators(link_dir: str) -> subprocess.Popen:
    code = (
        f"from twin.benchmarks.bench_serial import serve_emulators; serve_emulators({link_dir!r})"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    for line in proc.stdout:
        if "ready" in line:
            return proc
    raise RuntimeError("the emulator process exited before it was ready")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: Joint reads compared: SYNC_READ (one status packet per servo) and FAST_SYNC_READ (one for all).
READ_MODES = {"sync read": False, "fast sync read": True}


def _bus_read_ms(robot, repeats: int) -> dict[str, np.ndarray]:
    """Wall time (ms) of the cycle's joint read (``ArmBus.read_state``) in each mode, the modes
    interleaved call by call so that the machine's load falls on both alike."""
    out = {name: np.empty(repeats) for name in READ_MODES}
    clock = time.perf_counter
    for i in range(repeats):
        for name, fast in READ_MODES.items():
            robot.bus.fast_read = fast
            t0 = clock()
            try:
                robot.arm.read_state()
            except TransportError:  # a reply lost on a loaded machine: not a time of the read
                out[name][i] = np.nan
                continue
            out[name][i] = (clock() - t0) * 1e3
    robot.bus.fast_read = None
    return {name: times[np.isfinite(times)] for name, times in out.items()}


def _cycles(robot, cmd, proc_pid: int, n: int) -> dict:
    """Run ``n`` control cycles (write, step, read); what they took and cost."""
    e0, o0, f0 = robot.stats.bus_errors, robot.stats.overruns, robot.bus.stats.fast_reads
    cpu0, emu0 = time.process_time(), _cpu_s(proc_pid)
    times = np.empty(n)
    for i in range(n):
        t1 = time.perf_counter()
        robot.write(cmd)
        robot.step()
        robot.read()
        times[i] = time.perf_counter() - t1
    return dict(
        times=times,
        bus_errors=robot.stats.bus_errors - e0,
        overruns=robot.stats.overruns - o0,
        fast_reads=robot.bus.stats.fast_reads - f0,
        cpu=time.process_time() - cpu0,
        cpu_emu=_cpu_s(proc_pid) - emu0,
    )


def control_rows(seconds: float, read_repeats: int) -> tuple[list[dict], dict[str, np.ndarray]]:
    """Per control period, one robot runs blocks of cycles with each joint read in turn (so that
    the load of a shared machine falls on both alike); a row per period and read."""
    rows, read_ms, block = [], {}, 25
    with tempfile.TemporaryDirectory(prefix="twin-bench-") as d:
        proc = _start_emulators(d)
        try:
            for label, period in (
                ("free-running (period 0.5 ms)", 0.0005),
                ("at the 4 ms period", 0.004),
            ):
                config = emulator_config(
                    control_period_s=period, watchdog_s=None, hold_gravity_compensation=False
                )
                config = config.with_ports(f"{d}/servo_bus", f"{d}/ft_sensor", f"{d}/imu")
                with SerialRobot(config) as robot:
                    if not read_ms:
                        read_ms = _bus_read_ms(robot, read_repeats)
                    cmd = JointCommand(
                        q_des=np.full(6, 0.1), kp=np.full(6, 5.0), kd=np.full(6, 0.5)
                    )
                    _cycles(robot, cmd, proc.pid, 50)  # warm-up
                    runs = {mode: [] for mode in READ_MODES}
                    f0, i0 = robot.ft.frames_received, robot.imu.samples_received
                    t0 = time.perf_counter()
                    while time.perf_counter() - t0 < 2 * seconds:
                        for mode, fast in READ_MODES.items():
                            robot.bus.fast_read = fast
                            runs[mode].append(_cycles(robot, cmd, proc.pid, block))
                    elapsed = time.perf_counter() - t0
                    robot.bus.fast_read = None
                    ft_hz = (robot.ft.frames_received - f0) / elapsed
                    imu_hz = (robot.imu.samples_received - i0) / elapsed
                    for mode, fast in READ_MODES.items():
                        part = runs[mode]
                        times = np.concatenate([r["times"] for r in part])
                        n = len(times)
                        fast_reads = sum(r["fast_reads"] for r in part)
                        assert (fast_reads > 0) == fast, "the mode measured is the mode used"
                        rows.append(
                            dict(
                                name=label,
                                read=mode,
                                control_hz=n / times.sum(),
                                median_cycle_ms=float(np.median(times) * 1e3),
                                p99_cycle_ms=float(np.percentile(times, 99) * 1e3),
                                ft_hz=ft_hz,
                                imu_hz=imu_hz,
                                bus_errors=sum(r["bus_errors"] for r in part),
                                overruns=sum(r["overruns"] for r in part),
                                cpu_robot_ms=sum(r["cpu"] for r in part) / n * 1e3,
                                cpu_emulators_ms=sum(r["cpu_emu"] for r in part) / n * 1e3,
                            )
                        )
        finally:
            proc.stdin.close()
            proc.terminate()
            proc.wait(timeout=10)
    return rows, read_ms


def _wire_ms(baud: int, n_bytes: int) -> float:
    return n_bytes * 10.0 / baud * 1e3


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(args.seed)
    n = 2000 if args.quick else 10000
    prow = parser_rows(n, 0.3 if args.quick else 1.0, rng)
    print_table(
        "Parser throughput against the line rate (8N1)",
        ["protocol", "baud", "line rate /s", "parsed /s", "ratio", "target"],
        [
            [
                r["name"],
                r["baud"],
                r["line_rate"],
                r["parsed_per_s"],
                r["ratio"],
                f">= {TARGET_RATIO:g}",
            ]
            for r in prow
        ],
    )
    cfg = load_config()
    n_servos = len(cfg.joints)
    sync_bytes = n_servos * len(
        dxl.encode_status(dxl.StatusPacket(1, 0, bytes(PRESENT_BLOCK_LENGTH)))
    )
    fast_bytes = 7 + dxl.fast_status_length([PRESENT_BLOCK_LENGTH] * n_servos)
    crow, read_ms = control_rows(2.0 if args.quick else 5.0, 300 if args.quick else 2000)
    med = {k: float(np.median(v)) for k, v in read_ms.items()}
    print_table(
        f"The cycle's joint read ({n_servos} servos, Present Current/Velocity/Position, "
        f"{cfg.bus.baudrate} baud; modes interleaved)",
        ["read", "status packets", "reply bytes", "wire ms at baud", "median ms", "p99 ms"],
        [
            [
                name,
                1 if fast else n_servos,
                fast_bytes if fast else sync_bytes,
                _wire_ms(cfg.bus.baudrate, fast_bytes if fast else sync_bytes),
                med[name],
                float(np.percentile(read_ms[name], 99)),
            ]
            for name, fast in READ_MODES.items()
        ],
    )
    print_table(
        "SerialRobot through the emulators (6 servos, F/T 200 Hz, IMU 200 Hz; emulators in their own process, servo replies at the wire rate)",
        [
            "loop",
            "joint read",
            "control Hz",
            "median cycle ms",
            "p99 cycle ms",
            "F/T Hz",
            "IMU Hz",
            "bus errors",
            "overruns",
            "CPU ms/cycle robot",
            "CPU ms/cycle emulators",
            "target",
        ],
        [
            [
                r["name"],
                r["read"],
                r["control_hz"],
                r["median_cycle_ms"],
                r["p99_cycle_ms"],
                r["ft_hz"],
                r["imu_hz"],
                r["bus_errors"],
                r["overruns"],
                r["cpu_robot_ms"],
                r["cpu_emulators_ms"],
                f">= {TARGET_HZ:g} Hz",
            ]
            for r in crow
        ],
    )
    sync_free, fast_free = crow[0], crow[1]
    free = fast_free["control_hz"]
    emit_json(
        "bench_serial",
        {
            **{f"parser_ratio[{r['name']}]": r["ratio"] for r in prow},
            "min_parser_ratio": min(r["ratio"] for r in prow),
            "joint_read_ms_sync": med["sync read"],
            "joint_read_ms_fast": med["fast sync read"],
            "joint_read_fast_over_sync": med["fast sync read"] / med["sync read"],
            "wire_ms_sync": _wire_ms(cfg.bus.baudrate, sync_bytes),
            "wire_ms_fast": _wire_ms(cfg.bus.baudrate, fast_bytes),
            "cycle_ms_sync": sync_free["median_cycle_ms"],
            "cycle_ms_fast": fast_free["median_cycle_ms"],
            "control_hz_free_running_sync": sync_free["control_hz"],
            "control_hz_free_running": free,
            "control_hz_fast_over_sync": free / sync_free["control_hz"],
            "control_hz_at_4ms_sync": crow[2]["control_hz"],
            "control_hz_at_4ms": crow[3]["control_hz"],
            "control_ratio_vs_250hz": free / TARGET_HZ,
            "cpu_ms_per_cycle_robot": fast_free["cpu_robot_ms"],
            "cpu_ms_per_cycle_emulators": fast_free["cpu_emulators_ms"],
            "load_average_1min": os.getloadavg()[0],
            "targets_met": bool(
                min(r["ratio"] for r in prow) >= TARGET_RATIO and free >= TARGET_HZ
            ),
        },
    )


if __name__ == "__main__":
    main()
