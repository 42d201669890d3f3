"""Environment throughput: each env alone against the bare PyBullet physics it runs, and
gymnasium's sync and async vector envs at 1, 2 and 4 workers, in the same run.

Anchor (one per env, in the same rounds as the env): a hand-written loop on its own PyBullet
client with the same URDF, physics step (1 ms) and joint friction/damping, doing per env step
what the env's physics does: 40 physics steps, each with one ``getJointStates`` of the six
joints, the PD law in numpy (the env's gains, clamped to the effort limits) and
``setJointMotorControlArray`` in torque control, the joint target moved by a random action; a
reset (``resetJointState``) every 100 steps as the env's time limit. Press's anchor also has the
table top the tool presses on (a static box from the ``table`` scene), starts where Press starts
(the task's start above the contact point of the env's first episode: the tool pushed into the
table by random actions makes the contacts the env's physics solves) and has PyBullet's reaction
of the F/T joint switched on (``enableJointForceTorqueSensor``: the physics' own computation the
F/T model reads, not the model). The previous Press anchor (start at ``START_Q``, no joint
reaction) is still measured, as ``press_cost_over_physics_start_q_no_ft_joint``.

Also in the same rounds: the env's robot alone (``open_robot("sim")`` with the env's sim
options, one PD command and the policy period's 8 control steps per env step), which splits the
env's cost into the sim layer's (robot / bare) and the env's own (env / robot).

Figures: env, robot and anchor steps/s (random actions drawn alike for all three, ``gymnasium.make``
for the env), the cost ratio env / anchor (target <= 1.5) from CPU time per step (this process's
``time.process_time``: what a step costs whatever else the shared machine runs) and from wall
time, vector env steps/s (all workers) over one env (async at 2 workers: target >= 1.7 on 2
cores), the CPU time per env step of one env, of the vector env's main process and of its
workers (``/proc``; sync has none: the workers' overhead is theirs minus one env's) and the
times the workers went to sleep per vector step (voluntary context switches: each is a wake-up
the step waited for). Every rate
is a median over rounds that alternate what is compared (a vector env and one
env alternate too), with the 1-minute load average beside the vector figures.

    python -m twin.benchmarks.bench_env [--quick] [--seed N]
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import gymnasium as gym
import numpy as np
import pybullet as pb
from twin.benchmarks._report import emit_json, parse_args, print_table

import twin  # noqa: F401  (registers the environment ids)
from twin.backends import open_robot
from twin.env.core import ACTION_SCALE_RAD, POLICY_RATE_HZ
from twin.env.tasks import DEFAULT_GAINS, START_Q
from twin.kinematics import ArmModel
from twin.robot import JointCommand
from twin.scenes import load_scene

PHYSICS_DT_S = 1e-3
PHYSICS_STEPS = round(1.0 / (POLICY_RATE_HZ * PHYSICS_DT_S))  # 40 per env step
EPISODE_STEPS = 100


class BareLoop:
    """The anchor (module doc): the env's physics with no robot, task or env around it."""

    def __init__(
        self,
        model: ArmModel,
        table: bool,
        seed: int,
        start_q: np.ndarray = START_Q,
        ft_joint: bool = False,
    ) -> None:
        self.cid = pb.connect(pb.DIRECT)
        cid = self.cid
        pb.setPhysicsEngineParameter(
            fixedTimeStep=PHYSICS_DT_S,
            numSubSteps=0,
            deterministicOverlappingPairs=1,
            physicsClientId=cid,
        )
        pb.setGravity(0, 0, -9.81, physicsClientId=cid)
        self.body = pb.loadURDF(
            str(model.urdf_path),
            useFixedBase=True,
            flags=pb.URDF_USE_INERTIA_FROM_FILE,
            physicsClientId=cid,
        )
        names = {
            pb.getJointInfo(self.body, j, physicsClientId=cid)[1].decode(): j
            for j in range(pb.getNumJoints(self.body, physicsClientId=cid))
        }
        self.joints = [names[n] for n in model.joint_names]
        infos = [pb.getJointInfo(self.body, j, physicsClientId=cid) for j in self.joints]
        for j, info in zip(self.joints, infos):
            pb.changeDynamics(self.body, j, jointDamping=info[6], physicsClientId=cid)
        for link in range(-1, len(names)):  # as the engine: no default link damping
            pb.changeDynamics(
                self.body, link, linearDamping=0.0, angularDamping=0.0, physicsClientId=cid
            )
        pb.setJointMotorControlArray(
            self.body,
            self.joints,
            pb.VELOCITY_CONTROL,
            targetVelocities=[0.0] * 6,
            forces=[info[7] for info in infos],
            physicsClientId=cid,
        )
        if table:
            top = next(i for i in load_scene("table").items if i.name == "table_top")
            col = pb.createCollisionShape(
                pb.GEOM_BOX, halfExtents=(np.asarray(top.dims) / 2).tolist(), physicsClientId=cid
            )
            pb.createMultiBody(0.0, col, -1, list(top.pose[:3]), physicsClientId=cid)
        if ft_joint:
            pb.enableJointForceTorqueSensor(
                self.body, names["ft_sensor_joint"], True, physicsClientId=cid
            )
        self.start_q = np.asarray(start_q, float)
        self.effort = np.asarray(model.effort_limits, float)
        self.lower, self.upper = model.lower, model.upper
        self.rng = np.random.default_rng(seed)
        self.n = 0
        self.reset()

    def reset(self) -> None:
        for j, q in zip(self.joints, self.start_q):
            pb.resetJointState(self.body, j, float(q), 0.0, physicsClientId=self.cid)
        self.q_des = self.start_q.copy()

    def step(self) -> None:
        """One env step's worth of physics: 40 physics steps under the PD law."""
        kp, kd, cid, body, joints = (
            DEFAULT_GAINS.kp,
            DEFAULT_GAINS.kd,
            self.cid,
            self.body,
            self.joints,
        )
        a = self.rng.uniform(-1.0, 1.0, 6)
        s = pb.getJointStates(body, joints, physicsClientId=cid)
        q = np.array([x[0] for x in s])
        self.q_des = np.clip(q + ACTION_SCALE_RAD * a, self.lower, self.upper)
        for _ in range(PHYSICS_STEPS):
            s = pb.getJointStates(body, joints, physicsClientId=cid)
            x = np.array([j[0] for j in s] + [j[1] for j in s])
            u = np.clip(kp * (self.q_des - x[:6]) - kd * x[6:], -self.effort, self.effort)
            pb.setJointMotorControlArray(
                body, joints, pb.TORQUE_CONTROL, forces=u.tolist(), physicsClientId=cid
            )
            pb.stepSimulation(physicsClientId=cid)
        self.n += 1
        if self.n % EPISODE_STEPS == 0:
            self.reset()

    def close(self) -> None:
        pb.disconnect(self.cid)


class EnvLoop:
    """One environment from ``gymnasium.make``, random actions, reset at the end of episodes.

    The actions are drawn as the anchor draws them (``rng.uniform``, float32), not by
    ``action_space.sample()``: the user's sampler is not the environment's cost."""

    def __init__(self, env_id: str, seed: int) -> None:
        self.env = gym.make(env_id)
        self.env.reset(seed=seed)
        self.rng = np.random.default_rng(seed)

    def step(self) -> None:
        action = self.rng.uniform(-1.0, 1.0, 6).astype(np.float32)
        _, _, terminated, truncated, _ = self.env.step(action)
        if terminated or truncated:
            self.env.reset()

    def close(self) -> None:
        self.env.close()


class RobotLoop:
    """The environment's robot alone (``open_robot("sim")`` with the env's sim options): per env
    step one PD command to ``q + ACTION_SCALE_RAD a`` and the policy period's control steps,
    no task and no env (splits the env's cost into the robot's and its own)."""

    def __init__(self, sim_options: dict, seed: int, start_q: np.ndarray = START_Q) -> None:
        self.robot = open_robot("sim", sim_options=sim_options)
        self.start_q = np.asarray(start_q, float)
        self.lower, self.upper = self.robot.model.lower, self.robot.model.upper
        self.decimation = round(1.0 / (POLICY_RATE_HZ * self.robot.control_period_s))
        self.rng = np.random.default_rng(seed)
        self.n = 0
        self.robot.reset(q=self.start_q)

    def step(self) -> None:
        a = self.rng.uniform(-1.0, 1.0, 6)
        q_des = np.clip(self.robot.read().q + ACTION_SCALE_RAD * a, self.lower, self.upper)
        self.robot.write(JointCommand(q_des=q_des, kp=DEFAULT_GAINS.kp, kd=DEFAULT_GAINS.kd))
        for _ in range(self.decimation):
            self.robot.step()
        self.n += 1
        if self.n % EPISODE_STEPS == 0:
            self.robot.reset(q=self.start_q)

    def close(self) -> None:
        self.robot.close()


def timed(step, steps: int) -> tuple[float, float]:
    """(wall, CPU) rates of ``steps`` calls of ``step``: calls per second of wall time and per
    second of this process's CPU time (the latter is what a call costs on a shared machine,
    whatever else runs on it)."""
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return steps / wall, steps / max(cpu, 1e-9)


#: ``TwinVectorEnv`` options of the vector table's twin modes.
TWIN_MODE_OPTIONS = {"twin blocking": {"spin_s": 0.0}, "twin pinned": {"pin": True}}


class VectorLoop:
    """``n`` environments in a vector env (random actions, autoreset); ``step`` is one vector step
    (``n`` env steps). ``mode``: gymnasium's ``"sync"`` or ``"async"`` (``gymnasium.make_vec``,
    one process per env for async), or ``"twin"``: ``TwinVectorEnv`` with ``workers`` processes
    (the ids' ``vector_entry_point``), ``"twin+main"`` the same with the calling process as the
    first worker (``in_main=True``: ``workers - 1`` processes), other ``"twin ..."`` modes with
    the options of ``TWIN_MODE_OPTIONS``."""

    def __init__(self, env_id: str, n: int, mode: str, seed: int, workers: int) -> None:
        if mode.startswith("twin"):
            self.envs = gym.make_vec(
                env_id,
                num_envs=n,
                vectorization_mode="vector_entry_point",
                num_workers=workers,
                in_main=mode == "twin+main",
                **TWIN_MODE_OPTIONS.get(mode, {}),
            )
        else:
            self.envs = gym.make_vec(env_id, num_envs=n, vectorization_mode=mode)
        self.envs.reset(seed=seed)
        self.rng = np.random.default_rng(seed)
        self.n = n
        for _ in range(3):  # warm-up: worker start, first episodes
            self.step()

    def step(self) -> None:
        self.envs.step(self.rng.uniform(-1.0, 1.0, (self.n, 6)).astype(np.float32))

    def worker_cpu_s(self) -> float:
        """CPU time (s) the worker processes have used so far (0 for sync: no workers)."""
        return sum(_process_cpu_s(p.pid) for p in getattr(self.envs, "processes", ()))

    def worker_sleeps(self) -> int:
        """Times the worker processes have gone to sleep so far (voluntary context switches)."""
        return sum(_process_sleeps(p.pid) for p in getattr(self.envs, "processes", ()))

    def close(self) -> None:
        self.envs.close()


def _process_cpu_s(pid: int) -> float:
    """CPU time (s, user + system) of process ``pid`` so far (``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_sleeps(pid: int) -> int:
    """Voluntary context switches of process ``pid`` so far (``/proc``): each is a sleep and a
    wake-up."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt"))


def _independent_worker(env_id: str, seed: int, conn) -> None:
    loop = EnvLoop(env_id, seed)
    timed(loop.step, 3)
    while (steps := conn.recv()) > 0:
        c0 = time.process_time()
        for _ in range(steps):
            loop.step()
        conn.send(time.process_time() - c0)
    loop.close()


class IndependentLoop:
    """The machine's parallel capacity: ``n`` processes that share nothing, each stepping its own
    env (``EnvLoop``) ``steps`` times at the same start; ``run`` gives all their steps per second
    of wall time and their CPU time per step."""

    def __init__(self, env_id: str, n: int, seed: int) -> None:
        ctx = mp.get_context("fork")
        self.conns, self.processes = [], []
        for i in range(n):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_independent_worker, args=(env_id, seed + i, child), daemon=True)
            p.start()
            self.conns.append(parent)
            self.processes.append(p)
        self.run(1)

    def run(self, steps: int) -> tuple[float, float]:
        """(steps/s of all processes, wall time; CPU s per step) of ``steps`` steps each."""
        w0 = time.perf_counter()
        for conn in self.conns:
            conn.send(steps)
        cpu = sum(conn.recv() for conn in self.conns)
        n = len(self.conns)
        return n * steps / (time.perf_counter() - w0), cpu / (n * steps)

    def close(self) -> None:
        for conn in self.conns:
            conn.send(0)
        for p in self.processes:
            p.join(10.0)


def single_env_rows(args, rounds: int, steps: int, figures: dict) -> list[tuple]:
    """Env, its robot alone and the bare physics, in alternating rounds, per environment."""
    model = ArmModel.default()
    rows = []
    for env_id, table, sim_options in (
        ("twin/Reach-v0", False, {"sensors": False}),
        ("twin/Press-v0", True, {"scene": "table", "sensors": ("ft",)}),  # as PressEnv's
    ):
        env = EnvLoop(env_id, args.seed)
        start = env.env.unwrapped.task.start_q if table else START_Q
        loops = {"env": env, "robot": RobotLoop(sim_options, args.seed, start)}
        if table:  # Press: its start, the F/T joint's reaction (module doc); and the old anchor
            loops["bare"] = BareLoop(model, table, args.seed, start_q=start, ft_joint=True)
            loops["bare_start_q"] = BareLoop(model, table, args.seed)
        else:
            loops["bare"] = BareLoop(model, table, args.seed)
        rates: dict[str, list] = {k: [] for k in loops}
        try:
            for loop in loops.values():
                timed(loop.step, 3)  # warm-up
            for _ in range(rounds):
                for k, loop in loops.items():
                    rates[k].append(timed(loop.step, steps))
        finally:
            for loop in loops.values():
                loop.close()
        wall = {k: float(np.median([r[0] for r in v])) for k, v in rates.items()}
        cpu = {k: float(np.median([r[1] for r in v])) for k, v in rates.items()}
        name = env_id.split("/")[1].split("-")[0].lower()
        figures[f"{name}_steps_per_s"] = round(wall["env"], 1)
        figures[f"{name}_bare_physics_steps_per_s"] = round(wall["bare"], 1)
        figures[f"{name}_robot_alone_steps_per_s"] = round(wall["robot"], 1)
        figures[f"{name}_cost_over_physics"] = round(cpu["bare"] / cpu["env"], 3)
        figures[f"{name}_cost_over_physics_wall"] = round(wall["bare"] / wall["env"], 3)
        figures[f"{name}_robot_cost_over_physics"] = round(cpu["bare"] / cpu["robot"], 3)
        figures[f"{name}_env_cost_over_robot"] = round(cpu["robot"] / cpu["env"], 3)
        if "bare_start_q" in cpu:
            figures[f"{name}_cost_over_physics_start_q_no_ft_joint"] = round(
                cpu["bare_start_q"] / cpu["env"], 3
            )
        rows.append(
            (
                env_id,
                f"{wall['env']:.1f}",
                f"{wall['robot']:.1f}",
                f"{wall['bare']:.1f}",
                f"{cpu['bare'] / cpu['env']:.2f}",
                f"{wall['bare'] / wall['env']:.2f}",
                f"{cpu['bare'] / cpu['robot']:.2f}",
                f"{cpu['robot'] / cpu['env']:.2f}",
            )
        )
    return rows


#: (mode, environments, worker processes) of the vector table. ``twin blocking``: the twin's
#: vector env with ``spin_s=0`` (each side blocks at once: a sleep and a wake-up per step);
#: ``twin pinned``: worker ``k`` pinned to core ``k``.
VECTOR_CONFIGS = (
    ("sync", 1, 0),
    ("sync", 2, 0),
    ("sync", 4, 0),
    ("async", 1, 1),
    ("async", 2, 2),
    ("async", 4, 4),
    ("twin", 1, 1),
    ("twin", 2, 2),
    ("twin", 4, 2),
    ("twin", 8, 2),
    ("twin", 4, 4),
    ("twin blocking", 2, 2),
    ("twin blocking", 4, 2),
    ("twin pinned", 2, 2),
    ("twin+main", 2, 2),
    ("twin+main", 4, 2),
)


def vector_rows(args, rounds: int, env_steps: int, figures: dict) -> list[tuple]:
    """Each vector configuration against one env and against independent processes (as many as
    the vector env has workers), in alternating rounds of ``env_steps`` env steps each."""
    rows = []
    for mode, n, workers in VECTOR_CONFIGS:
        single = EnvLoop("twin/Reach-v0", args.seed)
        vector = anchor = None
        try:
            vector = VectorLoop("twin/Reach-v0", n, mode, args.seed, workers)
            anchor = IndependentLoop("twin/Reach-v0", max(workers, 1), args.seed)
            timed(single.step, 3)
            loads = []
            one, many, apart, one_cpu, main_cpu, worker_cpu, apart_cpu, sleeps = (
                [] for _ in range(8)
            )
            for _ in range(rounds):
                loads.append(os.getloadavg()[0])
                wall, cpu = timed(single.step, env_steps)
                one.append(wall)
                one_cpu.append(1.0 / cpu)
                w0, z0 = vector.worker_cpu_s(), vector.worker_sleeps()
                vec_steps = max(1, env_steps // n)
                wall, cpu = timed(vector.step, vec_steps)
                many.append(n * wall)
                main_cpu.append(1.0 / cpu / n)
                worker_cpu.append((vector.worker_cpu_s() - w0) / (n * vec_steps))
                sleeps.append((vector.worker_sleeps() - z0) / vec_steps)
                wall, cpu_per_step = anchor.run(max(1, env_steps // max(workers, 1)))
                apart.append(wall)
                apart_cpu.append(cpu_per_step)
        finally:
            for loop in (single, vector, anchor):
                if loop is not None:
                    loop.close()
        r, s, a = (float(np.median(x)) for x in (many, one, apart))
        load = float(np.median(loads))
        key = f"{mode}_{n}" if mode in ("sync", "async") else f"{mode}_{n}_envs_{workers}_workers"
        key = key.replace("+", "_").replace(" ", "_")
        figures[f"{key}_steps_per_s"] = round(r, 1)
        figures[f"{key}_over_one_env"] = round(r / s, 3)
        figures[f"{key}_independent_processes_over_one_env"] = round(a / s, 3)
        figures[f"{key}_load_average_1min"] = round(load, 2)
        cpu_ms = [1e3 * float(np.median(x)) for x in (one_cpu, main_cpu, worker_cpu, apart_cpu)]
        figures[f"{key}_cpu_ms_per_step_one_main_workers_independent"] = [
            round(c, 3) for c in cpu_ms
        ]
        figures[f"{key}_worker_sleeps_per_vector_step"] = round(float(np.median(sleeps)), 2)
        rows.append(
            (
                mode,
                n,
                workers,
                f"{r:.1f}",
                f"{s:.1f}",
                f"{r / s:.2f}",
                f"{a / s:.2f}",
                f"{load:.1f}",
            )
            + tuple(f"{c:.2f}" for c in cpu_ms)
            + (f"{np.median(sleeps):.2f}",)
        )
    return rows


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rounds, steps = (2, 20) if args.quick else (5, 100)
    vec_rounds, vec_steps = (2, 40) if args.quick else (8, 320)
    load_before = os.getloadavg()
    figures: dict = {}
    rows = single_env_rows(args, rounds, steps, figures)
    print_table(
        f"One environment, its robot alone and the bare physics they run (median of {rounds} "
        f"alternating rounds of {steps} steps; cost ratios from CPU time, and from wall time)",
        (
            "env",
            "env steps/s",
            "robot steps/s",
            "bare steps/s",
            "env/bare cost (CPU)",
            "(wall)",
            "robot/bare (CPU)",
            "env/robot (CPU)",
        ),
        rows,
    )
    print("target: env/bare cost <= 1.5")
    vec = vector_rows(args, vec_rounds, vec_steps, figures)
    print_table(
        f"twin/Reach-v0 vector envs against one env and against as many independent processes "
        f"as workers, in alternating rounds (median of {vec_rounds} rounds of {vec_steps} env "
        f"steps each; steps/s of all envs)",
        (
            "mode",
            "envs",
            "workers",
            "steps/s",
            "one env steps/s",
            "x one env",
            "independent x one env",
            "load (1 min)",
            "CPU ms/step: one env",
            "main",
            "workers",
            "independent",
            "worker sleeps/vector step",
        ),
        vec,
    )
    figures["cpu_count"] = os.cpu_count()
    figures["load_average_1min_before_after"] = [
        round(load_before[0], 2),
        round(os.getloadavg()[0], 2),
    ]
    ours = {n: figures[f"twin_{n}_envs_2_workers_over_one_env"] for n in (2, 4, 8)}
    print(
        f"\nmachine: {os.cpu_count()} cores, load average (1 min) {load_before[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; async 2 workers / one env = "
        f"{figures['async_2_over_one_env']:.2f}; twin 2 worker processes / one env = "
        f"{ours[2]:.2f} with 2 envs, {ours[4]:.2f} with 4, {ours[8]:.2f} with 8 (target >= 1.7 "
        f"on an idle 2-core machine; independent processes: "
        f"{figures['twin_2_envs_2_workers_independent_processes_over_one_env']:.2f})"
    )
    emit_json("bench_env", figures)


if __name__ == "__main__":
    main()
