"""ONNX controller latency: ``update()`` of a 2x256 MLP policy against a bare ``session.run``.

Anchor (same model, same session, same run): ``InferenceSession.run(output_names, feed)`` with
a feed dict of numpy arrays built once, called back to back: the plain onnxruntime call a user
would write, with no IO binding. The feed is the controller's own input buffers, so the anchor
infers on the same values as the measured cycles (the time depends on them: the growing step
count costs about 10 %); the earlier anchor, a zero feed, is printed beside it. (The controller's own inference, ``OnnxRuntime.evaluate``,
runs the same session through an IO binding on preallocated buffers; it is timed alone too.)
Measured: ``OnnxRLController.update`` on the sim backend's state (``sim.PyBulletRobot``; the
in-memory test robot if PyBullet is missing), every call a full cycle: robot.read, inputs,
inference, NaN check, outputs, one robot.write (which validates the command). The two are
measured in interleaved blocks so that both see the same machine load. Targets: median update
<= 1.5x the bare run (the cycle's data path is compiled once at ``init``: every component a
zero-argument call with its buffers and joint indices bound), update p99 < 100 us; the bare
run's own p99 and the p99 ratio are printed beside it, since on a shared machine preemption
sets both tails. The controller's own overhead per cycle (update minus the inference inside it,
median and p99) is printed too.

Then: where an update's time goes, from a second (instrumented) pass that times robot.read,
robot.write and the inference inside each cycle, beside the same calls timed alone (back to
back, caches warm); ``update()`` with policies that also read the TCP pose and twist (forward
kinematics and Jacobian every cycle); and the async worker under a deliberately slow model
(inference longer than the period): overruns counted over a real-time run.

    python -m twin.benchmarks.bench_controller [--quick] [--seed N]
"""

from __future__ import annotations

import itertools
import logging
import pathlib
import sys
import tempfile
import time

import numpy as np
from twin.benchmarks._report import emit_json, parse_args, print_table, time_calls

from twin.control import CommandSource, OnnxRLController, RobotStateAdapter, WorkerMode
from twin.control.export import TensorSpec, export_mlp, joint_targets_metadata
from twin.robot import JointCommand

HIDDEN = 256
RATIO_TARGET = 1.5  # median update() / median bare session.run
BLOCKS = 40  # measurements interleave in this many blocks (each about 20 ms of calls)
SLOW_HIDDEN = 2048  # the deliberately slow model: 3 x 2048 hidden layers
SLOW_RATE_HZ = 1000.0  # a 1 ms period, shorter than the slow model's inference
US = 1e6
#: Extra inputs of the body-reading policies: TCP position and twist, then also orientation.
TCP_TWIST = (
    TensorSpec("obj.arm.tcp.pos_b_rt_w_in_w", 3),
    TensorSpec("obj.arm.tcp.lin_vel_b_rt_w_in_b", 3),
    TensorSpec("obj.arm.tcp.ang_vel_b_rt_w_in_b", 3),
)
TCP_ORIENTATION = (TensorSpec("obj.arm.tcp.w_Q_b", 4),)


def open_robot():
    """The sim backend, else the in-memory test robot (``tests/control_fakes.py``)."""
    try:
        from twin.sim import PyBulletRobot

        return PyBulletRobot(seed=0), "sim.PyBulletRobot"
    except ImportError:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
        from control_fakes import IdealArmRobot

        return IdealArmRobot(), "in-memory IdealArmRobot"


def export_policy(
    path: pathlib.Path,
    joints: tuple[str, ...],
    hidden: int,
    layers: int,
    rate_hz: float,
    rng,
    extra_inputs: tuple[TensorSpec, ...] = (),
) -> pathlib.Path:
    """An ELU MLP: joint pos/vel, a joint goal, the last action (memory), the step count and
    ``extra_inputs`` -> joint targets and the next memory."""
    n = len(joints)
    inputs = [
        TensorSpec("obj.arm.joints.pos", n),
        TensorSpec("obj.arm.joints.vel", n),
        TensorSpec("cmd.joint_pos.goal", n),
        TensorSpec("memory.last_action.in", n),
        TensorSpec("ctx.step_count", 1, "int32"),
        *extra_inputs,
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


def bare_run(runtime, q: np.ndarray | None = None):
    """The anchor: ``session.run`` of every output of ``runtime``'s session, as a plain
    onnxruntime user would call it, on a feed dict built once.

    The feed holds the controller's own input buffers (live views): each call runs on the inputs
    of the controller's latest cycle, since the inference time depends on the values (the step
    count drives the hidden layers far into the ELU's saturation, about 10 % slower than at 0).
    With ``q`` (6,) rad instead: zeros and ``q``, the anchor before the two were told apart."""
    session = runtime.session
    if q is None:
        feed = {
            n: runtime.input_buffer(n, runtime.input_info(n).dtype).reshape(
                runtime.input_info(n).shape
            )
            for n in runtime.input_names()
        }
    else:
        feed = {
            i.name: np.zeros(
                [d if isinstance(d, int) else 1 for d in i.shape],
                np.int32 if "int32" in i.type else np.float32,
            )
            for i in session.get_inputs()
        }
        feed["obj.arm.joints.pos"][:] = q
    names = [o.name for o in session.get_outputs()]
    return lambda: session.run(names, feed)


def cycler(controller, robot):
    """A call that runs one full ``update`` cycle: the clock advances one period per call.

    Resets the controller first (the next update fires at once); ``check()`` afterwards
    confirms from the step count that every call ran a cycle (none was a skipped tick)."""
    controller.reset()
    period_us = controller.worker.period_ms * 1000
    state = {"t": robot.read().t_us, "calls": 0}

    def one_cycle():
        state["t"] += period_us
        state["calls"] += 1
        if not controller.update(state["t"]):
            raise SystemExit(f"update failed: {controller.fault}")

    def check():
        ran = int(controller.runtime.input_buffer("ctx.step_count", np.int32)[0])
        if ran != state["calls"]:
            raise SystemExit(f"only {ran} of {state['calls']} update calls ran a cycle")

    one_cycle.check = check
    return one_cycle


def in_cycle_parts(controller, robot, repeats: int) -> dict[str, np.ndarray]:
    """Per cycle (s): the update, and inside it robot.read, robot.write and the inference.

    robot.read/write are wrapped by timers for this pass only (the wrappers' own cost, well
    under a microsecond per call, lands in the controller's share)."""
    clock = time.perf_counter
    spent = {"read": 0.0, "write": 0.0}
    read, write = robot.read, robot.write

    def timed_read():
        t0 = clock()
        try:
            return read()
        finally:
            spent["read"] = clock() - t0

    def timed_write(command):
        t0 = clock()
        try:
            return write(command)
        finally:
            spent["write"] = clock() - t0

    cycle = cycler(controller, robot)
    out = np.empty((repeats, 4))
    robot.read, robot.write = timed_read, timed_write
    try:
        for _ in range(200):
            cycle()
        for i in range(repeats):
            t0 = clock()
            cycle()
            total = clock() - t0
            out[i] = (total, controller.inference_duration_s[0], spent["read"], spent["write"])
    finally:
        del robot.read, robot.write  # back to the class's methods
    cycle.check()
    return {"update": out[:, 0], "inference": out[:, 1], "read": out[:, 2], "write": out[:, 3]}


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


def interleaved(measures: dict, repeats: int) -> dict[str, np.ndarray]:
    """Each measure ``repeats`` times, in ``BLOCKS`` rounds so all see the same load."""
    samples = {k: [] for k in measures}
    for _ in range(BLOCKS):
        for key, fn in measures.items():
            samples[key].append(time_calls(fn, repeats // BLOCKS, warmup=50))
    return {k: np.concatenate(v) for k, v in samples.items()}


def med(x: np.ndarray) -> float:
    return float(np.median(x) * US)


def p99(x: np.ndarray) -> float:
    return float(np.percentile(x, 99) * US)


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
        q = robot.read().q
        cmd = JointCommand(q_des=q, kp=np.full(6, 100.0), kd=np.full(6, 5.0))
        cycle = cycler(controller, robot)
        t = interleaved(
            {
                "bare": bare_run(controller.runtime),
                "bare_zero": bare_run(controller.runtime, q),
                "update": cycle,
                "evaluate": controller.runtime.evaluate,
                "read": robot.read,
                "write": lambda: robot.write(cmd),
            },
            repeats,
        )
        cycle.check()
        parts = in_cycle_parts(controller, robot, repeats // 2)
        controller.close()

        body = {}
        for label, extra in (
            ("TCP position + twist", TCP_TWIST),
            ("TCP position + twist + orientation", TCP_TWIST + TCP_ORIENTATION),
        ):
            p = export_policy(tmp / "body.onnx", joints, HIDDEN, 2, 250.0, rng, extra)
            c = controller_for(robot, p)
            cycle = cycler(c, robot)
            body[label] = interleaved({"bare": bare_run(c.runtime), "update": cycle}, repeats // 4)
            cycle.check()
            c.close()

        slow_path = export_policy(tmp / "slow.onnx", joints, SLOW_HIDDEN, 3, SLOW_RATE_HZ, rng)
        overrun = async_overruns(robot, slow_path, 1.0 if args.quick else 3.0)

    bare, update = t["bare"], t["update"]
    ratio, ratio_p99 = med(update) / med(bare), p99(update) / p99(bare)
    ratio_zero = med(update) / med(t["bare_zero"])
    ratio_zero_p99 = p99(update) / p99(t["bare_zero"])
    print_table(
        f"2x{HIDDEN} MLP policy on {backend} ({repeats} calls each, {BLOCKS} interleaved blocks)",
        ["measure", "median us", "p99 us"],
        [
            ("bare session.run on the controller's inputs (anchor)", med(bare), p99(bare)),
            ("controller.update()", med(update), p99(update)),
            ("ratio update / bare", f"{ratio:.2f}", f"{ratio_p99:.2f}"),
            ("bare session.run on a zero feed", med(t["bare_zero"]), p99(t["bare_zero"])),
            ("ratio update / zero-feed bare", f"{ratio_zero:.2f}", f"{ratio_zero_p99:.2f}"),
        ],
    )
    print(
        f"\nupdate/bare median ratio: {ratio:.2f} (target <= {RATIO_TARGET}), p99 ratio "
        f"{ratio_p99:.2f}   update p99: {p99(update):.1f} us (target < 100; the bare "
        f"session.run's own p99 here: {p99(bare):.1f} us)"
    )
    rest = parts["update"] - parts["inference"] - parts["read"] - parts["write"]
    overhead = parts["update"] - parts["inference"]  # per cycle: what update adds to inference
    print(
        f"controller overhead per cycle (update minus its own inference, instrumented pass): "
        f"median {med(overhead):.1f} us, p99 {p99(overhead):.1f} us"
    )
    print_table(
        f"where update() spends its time: in the cycle (instrumented pass, {repeats // 2} cycles) "
        "vs the same call alone, back to back",
        ["part", "in cycle median us", "alone median us", "alone p99 us"],
        [
            ("update() total", med(parts["update"]), "-", "-"),
            ("  inference (OnnxRuntime.evaluate)", med(parts["inference"]), med(t["evaluate"]), p99(t["evaluate"])),
            ("  robot.read()", med(parts["read"]), med(t["read"]), p99(t["read"])),
            ("  robot.write() (validates)", med(parts["write"]), med(t["write"]), p99(t["write"])),
            ("  the controller's own work (rest)", med(rest), "-", "-"),
        ],
    )  # fmt: skip
    print_table(
        "update() with policies that read TCP body states (FK + Jacobian every cycle)",
        ["policy inputs (besides the joint policy's)", "bare median us", "update median us",
         "ratio", "update p99 us"],
        [
            (label, med(b["bare"]), med(b["update"]), med(b["update"]) / med(b["bare"]),
             p99(b["update"]))
            for label, b in body.items()
        ],
    )  # fmt: skip
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
            "bare_median_us": med(bare),
            "bare_p99_us": p99(bare),
            "update_median_us": med(update),
            "update_p99_us": p99(update),
            "ratio_update_to_bare": ratio,
            "ratio_p99_update_to_bare": ratio_p99,
            "ratio_target": RATIO_TARGET,
            "bare_zero_feed_median_us": med(t["bare_zero"]),
            "bare_zero_feed_p99_us": p99(t["bare_zero"]),
            "ratio_update_to_zero_feed_bare": ratio_zero,
            "ratio_p99_update_to_zero_feed_bare": ratio_zero_p99,
            "in_cycle_inference_median_us": med(parts["inference"]),
            "in_cycle_read_median_us": med(parts["read"]),
            "in_cycle_write_median_us": med(parts["write"]),
            "in_cycle_controller_median_us": med(rest),
            "overhead_median_us": med(overhead),
            "overhead_p99_us": p99(overhead),
            "evaluate_alone_median_us": med(t["evaluate"]),
            "update_tcp_twist_median_us": med(body["TCP position + twist"]["update"]),
            "update_tcp_pose_twist_median_us": med(
                body["TCP position + twist + orientation"]["update"]
            ),
            "async_overruns": overrun["overruns"],
            "async_cycles_due": overrun["cycles_due"],
            "async_dispatched": overrun["dispatched"],
            "slow_inference_ms": overrun["inference_ms"],
        },
    )


if __name__ == "__main__":
    main()
