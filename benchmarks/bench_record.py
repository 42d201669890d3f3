"""The recorder's cost per control cycle: a sim cycle recorded to MCAP against the same cycle
unrecorded, in the same run.

Cycle: ``robot.read()``, ``robot.write(command)``, ``robot.step()`` on the sim backend (5 ms
control period, 1 kHz physics), with a fresh slow-sinusoid command each cycle.

Anchor: the same cycle on an unrecorded ``PyBulletRobot`` built with the same options; the two
robots run in alternating blocks of cycles so that both see the same machine load.

Figures: median cycle time of both (us), the recorder's overhead per cycle (us, and as a
fraction of the unrecorded cycle; target < 10 %), the bytes written per cycle, and the
recording's throughput (cycles/s). The recording holds every read (joints, new F/T and IMU
samples), every command, and link frames at 50 Hz.

    python -m twin.benchmarks.bench_record [--quick] [--seed N]
"""

from __future__ import annotations

import pathlib
import tempfile
import time

import numpy as np
from twin.benchmarks._report import emit_json, parse_args, print_table

from twin.backends import open_robot
from twin.record import RecordingRobot
from twin.robot import JointCommand

BLOCK = 50  # cycles per alternating block


def _cycle_times(robot, commands: list[JointCommand], out: np.ndarray, start: int) -> None:
    clock = time.perf_counter
    for i, command in enumerate(commands):
        t0 = clock()
        robot.read()
        robot.write(command)
        robot.step()
        out[start + i] = clock() - t0


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    blocks = 10 if args.quick else 80
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "bench.mcap"
        plain = open_robot("sim", seed=args.seed)
        recorded = RecordingRobot(open_robot("sim", seed=args.seed), path, metadata={})
        try:
            q0 = plain.read().q
            kp, kd = np.full(6, 60.0), np.full(6, 2.0)
            phase = rng.uniform(0, 2 * np.pi, 6)
            n = blocks * BLOCK
            t = np.arange(n)[:, None] * plain.control_period_s
            cmds = [
                JointCommand(q_des=q, kp=kp, kd=kd) for q in q0 + 0.2 * np.sin(np.pi * t + phase)
            ]
            for robot in (plain, recorded):  # warm-up
                _cycle_times(robot, cmds[:BLOCK], np.empty(BLOCK), 0)
            t_plain, t_rec = np.empty(n), np.empty(n)
            for b in range(blocks):
                chunk = cmds[b * BLOCK : (b + 1) * BLOCK]
                _cycle_times(plain, chunk, t_plain, b * BLOCK)
                _cycle_times(recorded, chunk, t_rec, b * BLOCK)
        finally:
            plain.close()
            recorded.close()
        size = path.stat().st_size
    med_plain, med_rec = float(np.median(t_plain)), float(np.median(t_rec))
    overhead = med_rec - med_plain
    ratio = overhead / med_plain
    # The mean includes the writer thread's bursts (it holds the GIL while it encodes and
    # writes): all the recorder's CPU, as a free-running loop pays it.
    mean_plain, mean_rec = float(np.mean(t_plain)), float(np.mean(t_rec))
    mean_ratio = (mean_rec - mean_plain) / mean_plain
    p99 = np.percentile(t_plain, 99), np.percentile(t_rec, 99)
    rows = [
        ("unrecorded cycle (anchor)", med_plain * 1e6, mean_plain * 1e6, p99[0] * 1e6),
        ("recorded cycle", med_rec * 1e6, mean_rec * 1e6, p99[1] * 1e6),
    ]
    print_table(
        "sim control cycle, recorded to MCAP vs unrecorded",
        ("cycle", "median us", "mean us", "p99 us"),
        rows,
    )
    print(
        f"\nrecorder cost on the control thread (median): {overhead * 1e6:.1f} us per cycle = "
        f"{100 * ratio:.1f} % of the unrecorded cycle (target < 10 %)\n"
        f"all recorder CPU, writer thread included (mean): {100 * mean_ratio:.1f} %\n"
        f"{size / (n + BLOCK):.0f} bytes per cycle; {n} cycles per robot"
    )
    emit_json(
        "record",
        {
            "quick": args.quick,
            "cycles": n,
            "unrecorded_median_us": med_plain * 1e6,
            "recorded_median_us": med_rec * 1e6,
            "overhead_us": overhead * 1e6,
            "overhead_ratio": ratio,
            "unrecorded_mean_us": mean_plain * 1e6,
            "recorded_mean_us": mean_rec * 1e6,
            "overhead_ratio_mean": mean_ratio,
            "bytes_per_cycle": size / (n + BLOCK),
            "target_met": ratio < 0.10,
        },
    )


if __name__ == "__main__":
    main()
