"""ONNX controller latency: ``update()`` of a 2x256 MLP policy against a bare ``session.run``.

Anchor (same model, same run): ``InferenceSession.run`` with a prebuilt feed dict. Measured:
``OnnxRLController.update`` on the sim backend's state (``sim.PyBulletRobot``; the in-memory
test robot if PyBullet is missing), every call a full cycle (robot.read, inputs, inference,
NaN check, outputs, one robot.write); the robot I/O inside it is also timed alone. Then the
async worker under a deliberately slow model (inference longer than the period): overruns
counted over a real-time run. Targets: median update <= 2x the bare run, p99 < 100 us.
"""

from __future__ import annotations

import itertools
import logging
import pathlib
import sys
import tempfile
import time

import numpy as np

from benchmarks._report import emit_json, parse_args, print_table, time_calls
from twin.control import CommandSource, OnnxRLController, RobotStateAdapter, WorkerMode
from twin.control.export import TensorSpec, export_mlp, joint_targets_metadata
from twin.robot import JointCommand

HIDDEN = 256
BLOCKS = 10  # measurements interleave in this many blocks
SLOW_HIDDEN = 2048  # the deliberately slow model: 3 x 2048 hidden layers
SLOW_RATE_HZ = 1000.0  # a 1 ms period, shorter than the slow model's inference


def open_robot():
    """The sim backend, else the in-memory test robot (``tests/control_fakes.py``)."""
    try:
        from sim import PyBulletRobot

        return PyBulletRobot(seed=0), "sim.PyBulletRobot"
    except ImportError:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
        from control_fakes import IdealArmRobot

        return IdealArmRobot(), "in-memory IdealArmRobot"


def export_policy(
    path: pathlib.Path, joints: tuple[str, ...], hidden: int, layers: int, rate_hz: float, rng
) -> pathlib.Path:
    """An ELU MLP: joint pos/vel, a joint goal and the last action (memory) -> joint targets."""
    n = len(joints)
    inputs = [
        TensorSpec("obj.arm.joints.pos", n),
        TensorSpec("obj.arm.joints.vel", n),
        TensorSpec("cmd.joint_pos.goal", n),
        TensorSpec("memory.last_action.in", n),
        TensorSpec("ctx.step_count", 1, "int32"),
    ]
    sizes = [sum(s.size for s in inputs), *([hidden] * layers), 2 * n]
    weights = [
        (rng.normal(0, 1 / np.sqrt(a), (a, b)), np.zeros(b)) for a, b in itertools.pairwise(sizes)
    ]
    weights[-1] = (weights[-1][0] * 1e-3, weights[-1][1])  # small actions: targets stay near q
    gains = joint_targets_metadata(joints, [100.0] * n, [5.0] * n)
    return export_mlp(
        path,
        inputs=inputs,
        outputs=[("output.joint_targets.arm.pos", n), ("memory.last_action.out", n)],
        layers=weights,
        update_rate_hz=rate_hz,
        metadata={
            "obj.arm.joints": {"joint_names": list(joints)},
            "cmd.joint_pos.goal": {"joint_names": list(joints)},
            "output.joint_targets.arm": gains,
        },
        constant_outputs={
            "output.joint_targets.arm.vel": np.zeros(n),
            "output.joint_targets.arm.effort": np.zeros(n),
        },
    )


def controller_for(robot, path, mode=WorkerMode.SYNC) -> OnnxRLController:
    commands = CommandSource()
    controller = OnnxRLController(RobotStateAdapter(robot), commands)
    if not controller.create(path) or not controller.init(mode=mode):
        raise SystemExit(f"controller setup failed: {controller.error}")
    commands.set_joint_positions("goal", robot.read().q)
    return controller


def latency(controller, robot, repeats: int) -> np.ndarray:
    """Wall time of ``update`` calls that each run a full cycle (the clock advances one period)."""
    period_us = controller.worker.period_ms * 1000
    clock = {"t": controller._t_us or robot.read().t_us}

    def one_cycle():
        clock["t"] += period_us
        if not controller.update(clock["t"]):
            raise SystemExit(f"update failed: {controller.fault}")

    return time_calls(one_cycle, repeats, warmup=200)


def async_overruns(robot, path, duration_s: float) -> dict[str, float]:
    """Drive the async worker in real time (a tick about every 0.25 ms) with the slow model."""
    controller = controller_for(robot, path, WorkerMode.ASYNC)
    worker = controller.worker
    ticks = 0
    t0 = time.perf_counter()
    try:
        while (now := time.perf_counter() - t0) < duration_s:
            if not controller.update(int(now * 1e6)):
                raise SystemExit(f"async update failed: {controller.fault}")
            ticks += 1
            time.sleep(0.00025)
        dispatched = int(controller.runtime.input_buffer("ctx.step_count", np.int32)[0])
    finally:
        controller.close()
    return {
        "ticks": ticks,
        "cycles_due": duration_s * 1000.0 / worker.period_ms,
        "dispatched": dispatched,
        "overruns": worker.overruns,
        "inference_ms": float(controller.inference_duration_s[0] * 1e3),
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    logging.getLogger("twin.control").setLevel(logging.ERROR)  # overruns are expected below
    rng = np.random.default_rng(args.seed)
    repeats = 2000 if args.quick else 20000
    robot, backend = open_robot()
    joints = robot.model.joint_names
    with tempfile.TemporaryDirectory() as tmp, robot:
        tmp = pathlib.Path(tmp)
        path = export_policy(tmp / "mlp.onnx", joints, HIDDEN, 2, 250.0, rng)
        controller = controller_for(robot, path)

        # Anchor: the bare session.run on the same model, with a prebuilt feed dict.
        session = controller.runtime.session
        feed = {
            i.name: np.zeros(
                [d if isinstance(d, int) else 1 for d in i.shape],
                np.int32 if "int32" in i.type else np.float32,
            )
            for i in session.get_inputs()
        }
        feed["obj.arm.joints.pos"][:] = robot.read().q
        names = [o.name for o in session.get_outputs()]
        cmd = JointCommand(q_des=robot.read().q, kp=np.full(6, 100.0), kd=np.full(6, 5.0))
        measures = {
            "bare": lambda n: time_calls(lambda: session.run(names, feed), n, warmup=50),
            "update": lambda n: latency(controller, robot, n),
            "evaluate": lambda n: time_calls(controller.runtime.evaluate, n, warmup=50),
            "read": lambda n: time_calls(robot.read, n, warmup=50),
            "write": lambda n: time_calls(lambda: robot.write(cmd), n, warmup=50),
        }
        # Interleaved blocks, so that every measure sees the same (shared) machine load.
        samples = {k: [] for k in measures}
        for _ in range(BLOCKS):
            for key, measure in measures.items():
                samples[key].append(measure(repeats // BLOCKS))
        bare, update, evaluate, read, write = (np.concatenate(samples[k]) for k in measures)
        controller.close()

        slow_path = export_policy(tmp / "slow.onnx", joints, SLOW_HIDDEN, 3, SLOW_RATE_HZ, rng)
        overrun = async_overruns(robot, slow_path, 1.0 if args.quick else 3.0)

    us = 1e6
    rows = [
        ("bare session.run (anchor)", np.median(bare) * us, np.percentile(bare, 99) * us),
        ("controller.update()", np.median(update) * us, np.percentile(update, 99) * us),
        (
            "  of which runtime.evaluate()",
            np.median(evaluate) * us,
            np.percentile(evaluate, 99) * us,
        ),
        ("  of which robot.read()", np.median(read) * us, np.percentile(read, 99) * us),
        ("  of which robot.write()", np.median(write) * us, np.percentile(write, 99) * us),
        (
            "  rest: the controller's own work",
            (np.median(update) - np.median(evaluate) - np.median(read) - np.median(write)) * us,
            "-",
        ),
    ]
    print_table(
        f"2x{HIDDEN} MLP policy on {backend} ({repeats} calls each)",
        ["measure", "median us", "p99 us"],
        rows,
    )
    ratio = float(np.median(update) / np.median(bare))
    p99_us = float(np.percentile(update, 99) * us)
    print(
        f"\nupdate/bare median ratio: {ratio:.2f} (target <= 2)   update p99: {p99_us:.1f} us (target < 100)"
    )
    print_table(
        f"async worker, slow model (3x{SLOW_HIDDEN}) at {SLOW_RATE_HZ:.0f} Hz, real time",
        ["ticks", "cycles due", "dispatched", "overruns", "last inference ms"],
        [
            (
                overrun["ticks"],
                overrun["cycles_due"],
                overrun["dispatched"],
                overrun["overruns"],
                overrun["inference_ms"],
            )
        ],
    )
    emit_json(
        "controller",
        {
            "backend": backend,
            "bare_median_us": float(np.median(bare) * us),
            "update_median_us": float(np.median(update) * us),
            "update_p99_us": p99_us,
            "ratio_update_to_bare": ratio,
            "async_overruns": overrun["overruns"],
            "async_cycles_due": overrun["cycles_due"],
            "async_dispatched": overrun["dispatched"],
            "slow_inference_ms": overrun["inference_ms"],
        },
    )


if __name__ == "__main__":
    main()
