"""Environment throughput: each env alone against the bare PyBullet physics it runs, and
gymnasium's sync and async vector envs at 1, 2 and 4 workers, in the same run.

Anchor (one per env, in the same rounds as the env): a hand-written loop on its own PyBullet
client with the same URDF, physics step (1 ms) and joint friction/damping, doing per env step
what the env's physics does: 40 physics steps, each with one ``getJointStates`` of the six
joints, the PD law in numpy (the env's gains, clamped to the effort limits) and
``setJointMotorControlArray`` in torque control, the joint target moved by a random action; a
reset (``resetJointState``) every 100 steps as the env's time limit. Press's anchor also has the
table top the tool presses on (a static box from the ``table`` scene).

Figures: env steps/s (random actions, ``gymnasium.make``), anchor steps/s, their cost ratio
(env time per step / anchor time per step; target <= 1.5), vector env steps/s (all workers) and
async at 2 workers over one env (target >= 1.7 on 2 cores). Rates are medians over alternating
rounds; the machine is shared, so the load average is printed with them.

    python -m twin.benchmarks.bench_env [--quick] [--seed N]
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np
import pybullet as pb
from twin.benchmarks._report import emit_json, parse_args, print_table

import twin  # noqa: F401  (registers the environment ids)
from twin.env.core import ACTION_SCALE_RAD, POLICY_RATE_HZ
from twin.env.tasks import DEFAULT_GAINS, START_Q
from twin.kinematics import ArmModel
from twin.scenes import load_scene

PHYSICS_DT_S = 1e-3
PHYSICS_STEPS = round(1.0 / (POLICY_RATE_HZ * PHYSICS_DT_S))  # 40 per env step
EPISODE_STEPS = 100


class BareLoop:
    """The anchor (module doc): the env's physics with no robot, task or env around it."""

    def __init__(self, model: ArmModel, table: bool, seed: int) -> None:
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
        self.effort = np.asarray(model.effort_limits, float)
        self.lower, self.upper = model.lower, model.upper
        self.rng = np.random.default_rng(seed)
        self.n = 0
        self.reset()

    def reset(self) -> None:
        for j, q in zip(self.joints, START_Q):
            pb.resetJointState(self.body, j, float(q), 0.0, physicsClientId=self.cid)
        self.q_des = START_Q.copy()

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
    """One environment from ``gymnasium.make``, random actions, reset at the end of episodes."""

    def __init__(self, env_id: str, seed: int) -> None:
        self.env = gym.make(env_id)
        self.env.reset(seed=seed)
        self.env.action_space.seed(seed)

    def step(self) -> None:
        _, _, terminated, truncated, _ = self.env.step(self.env.action_space.sample())
        if terminated or truncated:
            self.env.reset()

    def close(self) -> None:
        self.env.close()


def timed(loop, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        loop.step()
    return steps / (time.perf_counter() - t0)


def vector_rate(env_id: str, n: int, mode: str, steps: int, seed: int) -> float:
    """Steps/s of all ``n`` workers together (random actions, autoreset)."""
    envs = gym.make_vec(env_id, num_envs=n, vectorization_mode=mode)
    try:
        envs.reset(seed=seed)
        envs.action_space.seed(seed)
        for _ in range(3):  # warm-up: worker start, first episodes
            envs.step(envs.action_space.sample())
        t0 = time.perf_counter()
        for _ in range(steps):
            envs.step(envs.action_space.sample())
        return n * steps / (time.perf_counter() - t0)
    finally:
        envs.close()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rounds, steps = (2, 20) if args.quick else (5, 100)
    vec_steps = 15 if args.quick else 100
    load_before = os.getloadavg()
    model = ArmModel.default()
    rows, figures = [], {}
    for env_id, table in (("twin/Reach-v0", False), ("twin/Press-v0", True)):
        env, bare = EnvLoop(env_id, args.seed), BareLoop(model, table, args.seed)
        try:
            timed(env, 3), timed(bare, 3)  # warm-up
            env_rates, bare_rates = [], []
            for _ in range(rounds):
                env_rates.append(timed(env, steps))
                bare_rates.append(timed(bare, steps))
        finally:
            env.close()
            bare.close()
        e, b = float(np.median(env_rates)), float(np.median(bare_rates))
        name = env_id.split("/")[1].split("-")[0].lower()
        figures[f"{name}_steps_per_s"] = round(e, 1)
        figures[f"{name}_bare_physics_steps_per_s"] = round(b, 1)
        figures[f"{name}_cost_over_physics"] = round(b / e, 3)
        rows.append((env_id, f"{e:.1f}", f"{b:.1f}", f"{b / e:.2f}", "<= 1.5"))
    print_table(
        f"One environment vs the bare physics it runs (median of {rounds} rounds of {steps} steps)",
        ("env", "env steps/s", "bare physics steps/s", "cost ratio", "target"),
        rows,
    )
    single = figures["reach_steps_per_s"]
    vec_rows = []
    for mode in ("sync", "async"):
        for n in (1, 2, 4):
            r = vector_rate("twin/Reach-v0", n, mode, vec_steps, args.seed)
            figures[f"{mode}_{n}_steps_per_s"] = round(r, 1)
            vec_rows.append((mode, n, f"{r:.1f}", f"{r / single:.2f}"))
    print_table(
        f"twin/Reach-v0 vector envs ({vec_steps} vector steps; all workers' steps/s)",
        ("mode", "workers", "steps/s", "x one env"),
        vec_rows,
    )
    figures["async_2_over_one_env"] = round(figures["async_2_steps_per_s"] / single, 3)
    figures["cpu_count"] = os.cpu_count()
    figures["load_average_1min_before_after"] = [
        round(load_before[0], 2),
        round(os.getloadavg()[0], 2),
    ]
    print(
        f"\nmachine: {os.cpu_count()} cores, load average (1 min) {load_before[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after; async 2 workers / one env = "
        f"{figures['async_2_over_one_env']:.2f} (target >= 1.7 on an idle 2-core machine)"
    )
    emit_json("bench_env", figures)


if __name__ == "__main__":
    main()
