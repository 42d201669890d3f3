"""The sim backend's full control cycle against a raw PyBullet loop doing the same engine calls.

Twin cycle: ``robot.write(command)`` (validated), ``robot.step()`` (the law, one physics step and
both sensor models per substep), ``robot.read()`` (state with the latest F/T and IMU samples).

Anchor (same run, cycles alternating with the twin's): a hand-written loop on its own PyBullet client with the same
URDF and setup, making per physics step the same calls (``joint_torque`` of the same command,
``setJointMotorControlArray``, ``stepSimulation``, one ``getJointStates`` of the six joints and
the F/T joint) and ``getLinkState`` of the IMU link on the same steps as the IMU model; no
validation, no sensor models, no state objects.

The twin evaluates the same law per physics step as ``twin.robot.torque_law`` (Python floats,
bit for bit ``joint_torque``'s result) and builds its state arrays once per ``step()``; the
anchor keeps the plain numpy calls a user would write (``joint_torque`` and two arrays per step).

Figures: cycles/s of both, the overhead ratio (twin cycle time / anchor cycle time; target <= 1.2)
and the twin's real-time factor at 1 kHz physics (simulated seconds per wall second; target >= 10).
Rates come from the median cycle time (the machine is shared: a mean includes cycles pre-empted by
other processes; the mean-based figures are printed too).

    python -m twin.benchmarks.bench_sim [--quick] [--seed N]
"""

from __future__ import annotations

import time

import numpy as np
import pybullet as pb
from twin.benchmarks._report import emit_json, parse_args, print_table
from twin.sim import DEFAULT_CONTROL_PERIOD_S, HOLD_KD, HOLD_KP, PyBulletRobot

from twin.robot import JointCommand, joint_torque

N_COMMANDS = 500
OVERHEAD_TARGET = 1.2  # twin cycle time / anchor cycle time at the default period
OTHER_PERIODS_S = (0.001, 0.01)  # to show how the per-cycle overhead amortises


def commands(q0: np.ndarray, period_s: float, rng: np.random.Generator) -> list[JointCommand]:
    """A slow sinusoid about ``q0`` (6,) rad with the default gains, one command per cycle."""
    phase = rng.uniform(0.0, 2.0 * np.pi, 6)
    t = np.arange(N_COMMANDS)[:, None] * period_s
    q_des = q0 + 0.2 * np.sin(2.0 * np.pi * 0.5 * t + phase)
    return [JointCommand(q_des=q, kp=np.array(HOLD_KP), kd=np.array(HOLD_KD)) for q in q_des]


class RawLoop:
    """The anchor: the same PyBullet calls without the twin's wrapper."""

    def __init__(self, robot: PyBulletRobot) -> None:
        self.cid = pb.connect(pb.DIRECT)
        pb.setPhysicsEngineParameter(
            fixedTimeStep=robot.physics_dt,
            numSubSteps=0,
            deterministicOverlappingPairs=1,
            physicsClientId=self.cid,
        )
        pb.setGravity(0, 0, -9.81, physicsClientId=self.cid)
        self.body = pb.loadURDF(
            str(robot.model.urdf_path),
            useFixedBase=True,
            flags=pb.URDF_USE_INERTIA_FROM_FILE,
            physicsClientId=self.cid,
        )
        names = {
            pb.getJointInfo(self.body, j, physicsClientId=self.cid)[1].decode(): j
            for j in range(pb.getNumJoints(self.body, physicsClientId=self.cid))
        }
        links = {
            pb.getJointInfo(self.body, j, physicsClientId=self.cid)[12].decode(): j
            for j in names.values()
        }
        self.joints = [names[n] for n in robot.model.joint_names]
        self.state_joints = [*self.joints, names["ft_sensor_joint"]]
        self.imu = links["imu"]
        pb.setJointMotorControlArray(
            self.body, self.joints, pb.VELOCITY_CONTROL, forces=[0.0] * 6, physicsClientId=self.cid
        )
        pb.enableJointForceTorqueSensor(
            self.body, names["ft_sensor_joint"], True, physicsClientId=self.cid
        )
        for j, q in zip(self.joints, robot.model.home_q):
            pb.resetJointState(self.body, j, q, 0.0, physicsClientId=self.cid)
        self.effort = robot.model.effort_limits
        self.substeps = round(robot.control_period_s / robot.physics_dt)
        self.imu_every = round(1.0 / (robot._imu.config.rate_hz * robot.physics_dt))
        self.n = 0
        self.q, self.qd = np.array(robot.model.home_q), np.zeros(6)

    def cycle(self, cmd: JointCommand) -> None:
        body, cid = self.body, self.cid
        for _ in range(self.substeps):
            u = joint_torque(cmd, self.q, self.qd, self.effort)
            pb.setJointMotorControlArray(
                body, self.joints, pb.TORQUE_CONTROL, forces=u.tolist(), physicsClientId=cid
            )
            pb.stepSimulation(physicsClientId=cid)
            self.n += 1
            s = pb.getJointStates(body, self.state_joints, physicsClientId=cid)
            self.q = np.array([x[0] for x in s[:6]])
            self.qd = np.array([x[1] for x in s[:6]])
            if self.n % self.imu_every in (0, self.imu_every - 1):
                pb.getLinkState(
                    body,
                    self.imu,
                    computeLinkVelocity=1,
                    computeForwardKinematics=1,
                    physicsClientId=cid,
                )

    def close(self) -> None:
        pb.disconnect(physicsClientId=self.cid)


def measure(raw: RawLoop, robot: PyBulletRobot, cmds: list[JointCommand], n: int) -> np.ndarray:
    """Wall times (s) of ``n`` anchor and twin cycles, alternating: (n, 4) columns anchor cycle,
    twin write, twin step, twin read."""
    clock = time.perf_counter
    out = np.empty((n, 4))
    for i in range(n):
        cmd = cmds[i % N_COMMANDS]
        t0 = clock()
        raw.cycle(cmd)
        t1 = clock()
        robot.write(cmd)
        t2 = clock()
        robot.step()
        t3 = clock()
        robot.read()
        t4 = clock()
        out[i] = t1 - t0, t2 - t1, t3 - t2, t4 - t3
    return out


def run(period_s: float, n: int, seed: int) -> dict[str, float]:
    """Figures of one control period (median cycle times: robust to the odd cycle pre-empted by
    other processes on a shared machine)."""
    rng = np.random.default_rng(seed)
    with PyBulletRobot(seed=seed, control_period_s=period_s) as robot:
        raw = RawLoop(robot)
        cmds = commands(robot.model.home_q, robot.control_period_s, rng)
        measure(raw, robot, cmds, 50)  # warm-up
        times = measure(raw, robot, cmds, n)
        state = robot.read()
        if state.wrench is None or state.imu is None:
            raise RuntimeError("the twin cycle did not produce F/T and IMU samples")
        raw.close()
        dt = robot.physics_dt
    twin = times[:, 1:].sum(axis=1)
    raw_s, twin_s = float(np.median(times[:, 0])), float(np.median(twin))
    return {
        "control_period_s": period_s,
        "substeps": round(period_s / dt),
        "physics_dt_s": dt,
        "raw_cycles_per_s": 1.0 / raw_s,
        "twin_cycles_per_s": 1.0 / twin_s,
        "overhead_ratio": twin_s / raw_s,
        "overhead_ratio_mean": float(twin.mean() / times[:, 0].mean()),
        "real_time_factor": period_s / twin_s,
        "raw_real_time_factor": period_s / raw_s,
        "raw_cycle_us": raw_s * 1e6,
        "write_us": float(np.median(times[:, 1])) * 1e6,
        "step_us": float(np.median(times[:, 2])) * 1e6,
        "read_us": float(np.median(times[:, 3])) * 1e6,
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n = 1000 if args.quick else 4000
    main_fig = run(DEFAULT_CONTROL_PERIOD_S, n, args.seed)
    others = [] if args.quick else [run(p, n // 2, args.seed) for p in OTHER_PERIODS_S]
    rows = []
    for f in [main_fig, *others]:
        rows.append([
            f"{f['control_period_s'] * 1e3:g} ms ({f['substeps']} steps)",
            f["raw_cycles_per_s"], f["twin_cycles_per_s"], f["overhead_ratio"],
            f["raw_real_time_factor"], f["real_time_factor"],
            f["raw_cycle_us"], f["write_us"], f["step_us"], f["read_us"],
        ])  # fmt: skip
    print_table(
        f"sim cycle vs raw PyBullet at {1 / main_fig['physics_dt_s']:g} Hz physics "
        f"(first row: the default control period; {n} alternating cycles, median cycle times)",
        ["control period", "raw cycles/s", "twin cycles/s", "overhead", "raw RTF", "twin RTF",
         "raw cycle us", "write us", "step us", "read us"],
        rows,
    )  # fmt: skip
    print(
        f"\noverhead ratio at the default period: {main_fig['overhead_ratio']:.3f} median "
        f"({main_fig['overhead_ratio_mean']:.3f} from means)  (target <= {OVERHEAD_TARGET})"
    )
    print(f"real-time factor: {main_fig['real_time_factor']:.1f}x  (target >= 10)")
    emit_json(
        "bench_sim",
        {
            **main_fig,
            "overhead_target": OVERHEAD_TARGET,
            "real_time_target": 10.0,
            "other_periods": others,
        },
    )


if __name__ == "__main__":
    main()
