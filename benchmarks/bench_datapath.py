"""What the data-path checks and the every-sample F/T services cost.

1. The Bota driver's receive path (parse, plausibility checks, device-clock check, publish into
   the latest sample, the history and the queue) against its anchor, the parser alone, on the same
   bytes: frames per second and the ratio. The line carries at most about 1245 frames/s.
2. ``FtSensorService.update`` per control cycle on the sim, with an exported frame and a log,
   when the sensor gives 1 sample per cycle (200 Hz) and 4 (800 Hz, every one processed and
   logged): the batch costs far less than four single cycles.

    python -m twin.benchmarks.bench_datapath [--quick]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from twin.benchmarks._report import emit_json, parse_args, print_table, rate, time_calls
from twin.hardware.drivers.bota_sensor import BotaSensor
from twin.hardware.protocols import bota
from twin.sim import PyBulletRobot

from twin.sensors import FtSensorService

LINE_RATE_FPS = 460800 / (10 * bota.FRAME_LENGTH)


def _wire(n: int, rng: np.random.Generator) -> bytes:
    frames = [
        bota.BotaFrame(0, tuple(rng.normal(0.0, 5.0, 6).tolist()), 1000 + 5000 * k, 30.0)
        for k in range(n)
    ]
    return b"".join(bota.encode_frame(f) for f in frames)


def receive_rates(n: int, min_time_s: float, rng: np.random.Generator) -> tuple[float, float]:
    """Frames per second of the parser alone and of the driver's whole receive path."""
    wire = _wire(n, rng)
    chunks = [wire[i : i + 4096] for i in range(0, len(wire), 4096)]

    def parse() -> None:
        parser = bota.BotaStreamParser()
        for c in chunks:
            parser.feed(c)

    sensor = BotaSensor("/dev/null", sinc_length=256)  # never opened: fed directly
    sensor._run_mode = True

    def receive() -> None:
        sensor.parser.reset()
        sensor._clock_check.restart()
        for c in chunks:
            sensor.data_received(c)
        sensor.take_samples()

    return rate(parse, n, min_time_s), rate(receive, n, min_time_s)


def service_cycle_us(rate_hz: float, cycles: int, log_dir: Path) -> float:
    """Median wall time (us) of one ``FtSensorService.update`` on the sim at ``rate_hz``."""
    with PyBulletRobot(seed=1) as robot, FtSensorService(robot) as svc:
        svc.connect()
        svc.set_rate(rate_hz)
        svc.export_frame("tool", z=0.1)
        svc.set_ft_filter([10.0] * 3, [10.0] * 3)
        svc.log_frame("tool", str(log_dir / f"tool_{int(rate_hz)}.csv"))
        times = []

        def cycle() -> None:
            robot.step()
            times.append(time_calls(svc.update, 1, warmup=0)[0])

        for _ in range(cycles):
            cycle()
        svc.log_stop()
        assert svc.log_info()[0] == 0
    return float(np.median(times[cycles // 10 :]) * 1e6)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(args.seed)
    n, min_time_s, cycles = (2000, 0.5, 400) if args.quick else (20000, 3.0, 4000)
    parse_fps, receive_fps = receive_rates(n, min_time_s, rng)
    with tempfile.TemporaryDirectory() as tmp:
        one = service_cycle_us(200.0, cycles, Path(tmp))
        four = service_cycle_us(800.0, cycles, Path(tmp))
    print_table(
        "Bota receive path, frames/s (anchor: the parser alone)",
        ["path", "frames/s", "x line rate", "ratio to parser"],
        [
            ["parser alone", parse_fps, parse_fps / LINE_RATE_FPS, 1.0],
            ["driver: parse + checks + publish + queue", receive_fps, receive_fps / LINE_RATE_FPS,
             receive_fps / parse_fps],
        ],
    )  # fmt: skip
    print_table(
        "FtSensorService.update per control cycle (sim, exported frame, log), median us",
        ["samples per cycle", "median us", "ratio to 1 sample"],
        [["1 (200 Hz)", one, 1.0], ["4 (800 Hz)", four, four / one]],
    )
    emit_json(
        "datapath",
        {
            "parser_fps": parse_fps,
            "driver_receive_fps": receive_fps,
            "ratio_driver_to_parser": receive_fps / parse_fps,
            "driver_x_line_rate": receive_fps / LINE_RATE_FPS,
            "service_update_1_sample_us": one,
            "service_update_4_samples_us": four,
            "ratio_4_to_1_samples": four / one,
        },
    )


if __name__ == "__main__":
    main()
