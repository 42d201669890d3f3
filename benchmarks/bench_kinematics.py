"""Kinematics: batched FK and closed-form IK (all postures) against PyBullet, in one run.

Anchors, measured here on the same machine and the same random poses (FK of uniformly sampled
in-limit configurations of the shipped arm):
* FK: PyBullet ``resetJointState`` x 6 + ``getLinkState(computeForwardKinematics=True)``.
* IK: PyBullet ``calculateInverseKinematics`` for the TCP (position + orientation), seeded from
  the home configuration before every call, with its defaults (20 iterations, residual 1e-4)
  and with 100 iterations (residual 1e-12). Only the IK call is timed.
* One configuration per call (what a control loop or an environment step asks): ``fk`` and
  ``jacobian`` of a (6,) q (the generated single-configuration code) against the batched
  tree with N = 1 and against PyBullet (6 resets + ``getLinkState``; ``calculateJacobian``).
* One pose per call: ``ArmModel.ik_all`` (every posture, the generated single-pose code of
  ``scalar_ik``) and ``ik`` (one posture) against one ``calculateInverseKinematics`` call and
  against the batched kernel with N = 1 (what ``ik_all`` cost before). Target: ``ik_all``
  at most 30 us.
Errors are FK(solution) against the target: position (m) and rotation angle (rad). Rates
are best-of-rounds (ours per batch, PyBullet per call), rounds interleaved, because the
machine may be shared; single-configuration figures are the median call of the best round.
Target: closed-form IK >= 20x PyBullet's default IK rate, errors >= 1e6x smaller.

How cost grows with the batch (table "Throughput ... against batch size": items per CPU
second, best of a few calls; peak is tracemalloc's over one call, numpy's allocations
included, against the bytes of the output):
* Below about 1,000 time grows far less than linearly: one batched call has a fixed cost of
  several hundred numpy calls (IK about 0.5 ms, FK about 0.1 ms) whatever N is, so
  throughput rises about 30x from N = 10 to N = 1,000. One pose (N = 1) is the exception for
  IK: ``ik_all_batch`` of a (1, 4, 4) pose runs the generated scalar code. ``fk`` of a (1, 6)
  batch still runs the tree; ``fk`` of a (6,) configuration runs the generated chain.
* From about 1,000 to 1,000,000 time is linear (flat throughput): batches beyond ``CHUNK``
  (2,048) stream through the kernels chunk by chunk. Without chunks growth was worse than
  linear: the temporaries (about 50 arrays of 8 N floats for IK) left the caches, one pass of
  65,536 poses ran about 25 % slower per pose than chunks of 2,048, and peak memory grew by
  about 2 KB of temporaries per pose.
* Peak memory is linear and, for large batches, 1.3-1.6x the output: the output, the input
  checks' copies (``validate.as_poses`` copies the (N, 4, 4) poses and their rotation
  columns; ``as_configurations`` copies q for FK) and one chunk's temporaries (a few MB, which
  is why batches near the chunk size show ratios of 2.5-10; below it the temporaries are
  proportional to N). Before chunking: 2.1 GB for 1,000,000 IK poses, 1.3 GB for FK.

    python -m twin.benchmarks.bench_kinematics [--quick] [--seed N]
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pybullet as pb
from twin.benchmarks._report import emit_json, parse_args, print_table, time_calls

from twin.kinematics import ArmModel
from twin.spatial import batch


def _pybullet_arm(model: ArmModel) -> tuple[int, int, dict[str, int]]:
    client = pb.connect(pb.DIRECT)
    body = pb.loadURDF(str(model.urdf_path), useFixedBase=True, flags=pb.URDF_USE_INERTIA_FROM_FILE)
    links = {pb.getJointInfo(body, i)[12].decode(): i for i in range(pb.getNumJoints(body))}
    return client, body, links


def _pybullet_fk(body: int, tcp: int, configs: np.ndarray) -> np.ndarray:
    """Wall time (s) of each configuration's FK: 6 joint resets and the TCP link state."""
    out = np.empty(len(configs))
    clock = time.perf_counter
    for i, q in enumerate(configs):
        t0 = clock()
        for j in range(6):
            pb.resetJointState(body, j, q[j])
        pb.getLinkState(body, tcp, computeForwardKinematics=True)
        out[i] = clock() - t0
    return out


def _pybullet_ik(
    body: int, tcp: int, targets: np.ndarray, home: np.ndarray, **options: float
) -> tuple[np.ndarray, np.ndarray]:
    """Solutions (N, 6) and the wall time (s) of each IK call (N,), seeded from ``home``."""
    out = np.empty((len(targets), 6))
    spent = np.empty(len(targets))
    clock = time.perf_counter
    for i, t in enumerate(targets):
        for j in range(6):
            pb.resetJointState(body, j, home[j])
        pos = t[:3].tolist()
        orn_xyzw = [t[4], t[5], t[6], t[3]]  # PyBullet's quaternion order
        t0 = clock()
        sol = pb.calculateInverseKinematics(body, tcp, pos, orn_xyzw, **options)
        spent[i] = clock() - t0
        out[i] = sol[:6]
    return out, spent


def _per_call(fn, items) -> float:
    """Median wall time (s) of ``fn(item)`` over the items (configurations, poses), one call
    each."""
    out = np.empty(len(items))
    clock = time.perf_counter
    for i, item in enumerate(items):
        t0 = clock()
        fn(item)
        out[i] = clock() - t0
    return float(np.median(out))


def _best_round(calls: dict, items, rounds: int) -> dict[str, float]:
    """Per call: the least over ``rounds`` interleaved rounds of the median call (s)."""
    best = dict.fromkeys(calls, np.inf)
    for _ in range(rounds):
        for name, fn in calls.items():
            best[name] = min(best[name], _per_call(fn, items))
    return best


def _single_configuration(
    model: ArmModel, body: int, tcp: int, configs: np.ndarray, rounds: int
) -> dict[str, float]:
    """Median seconds per call of one-configuration FK and Jacobian (best of ``rounds``)."""
    zeros = [0.0] * 6

    def pb_fk(q):
        for j in range(6):
            pb.resetJointState(body, j, q[j])
        pb.getLinkState(body, tcp, computeForwardKinematics=True)

    def pb_jacobian(q):
        pb.calculateJacobian(body, tcp, [0.0, 0.0, 0.0], q.tolist(), zeros, zeros)

    calls = {
        "fk": model.fk,
        "fk_batched_n1": lambda q: model.fk(q[None])[0],
        "fk_pybullet": pb_fk,
        "jacobian": model.jacobian,
        "jacobian_batched_n1": lambda q: model.jacobian(q[None])[0],
        "jacobian_pybullet": pb_jacobian,
    }
    return _best_round(calls, configs, rounds)


def _single_pose_ik(model: ArmModel, poses: np.ndarray, rounds: int) -> dict[str, float]:
    """Median seconds per call of one-pose IK (best of ``rounds``), rounds interleaved."""
    home = model.home_q
    solver = model.closed_form
    calls = {
        "ik_all": model.ik_all,
        "ik": lambda pose: model.ik(pose, home),
        "kernel_n1": lambda pose: solver.solve(pose[None], home[None], "tcp").solutions(0),
        "fk": lambda pose: model.fk(home),
    }
    return _best_round(calls, list(poses), rounds)


def _peak_bytes(fn) -> tuple[int, object]:
    """Peak bytes allocated during ``fn()`` (tracemalloc) and its result."""
    tracemalloc.start()
    try:
        result = fn()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def _cpu_seconds(fn, repeats: int) -> float:
    """Least CPU time (s) of this process over ``repeats`` calls of ``fn`` (after one)."""
    fn()
    best = np.inf
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _scaling(model: ArmModel, rng: np.random.Generator, sizes: list[int]) -> list[dict]:
    """Throughput (items per CPU second, best of a few calls) and peak memory of batched IK
    and FK. CPU time, not wall time: a call of a second on a shared machine is preempted by
    its neighbours, which the wall clock would count as ours."""
    rows = []
    for n in sizes:
        configs = rng.uniform(model.lower, model.upper, (n, 6))
        poses = model.fk(configs)
        repeats = max(2, min(30, 30_000 // n))

        def ik(poses=poses):
            return model.ik_all_batch(poses)

        def fk(configs=configs):
            return model.fk(configs)

        ik_s, fk_s = (_cpu_seconds(fn, repeats) for fn in (ik, fk))
        ik_peak, sols = _peak_bytes(ik)
        ik_out = sols.q.nbytes + sols.valid.nbytes + sols.reachable.nbytes
        del sols
        fk_peak, frames = _peak_bytes(fk)
        fk_out = frames.nbytes
        del frames, poses
        rows.append(
            {
                "n": n,
                "ik_rate": n / ik_s,
                "ik_peak_mb": ik_peak / 1e6,
                "ik_peak_over_output": ik_peak / ik_out,
                "fk_rate": n / fk_s,
                "fk_peak_mb": fk_peak / 1e6,
                "fk_peak_over_output": fk_peak / fk_out,
            }
        )
    return rows


def _errors(model: ArmModel, q: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, ...]:
    return batch.pose_errors(model.fk(q), targets)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(args.seed)
    model = ArmModel.default()
    n = 200 if args.quick else 1000
    configs = rng.uniform(model.lower, model.upper, (n, 6))
    poses = model.fk(configs)
    pose7 = batch.pose7_from_matrices(poses)

    # The machine is shared: measure ours and PyBullet's in interleaved rounds and keep each
    # one's best round (per call for PyBullet), so a load spike hurts neither side.
    rounds = 2 if args.quick else 6
    ours_fk, ours_fk_all, ours_ik = [], [], []
    pb_fk, pb_ik20, pb_ik100 = [], [], []
    client, body, links = _pybullet_arm(model)
    tcp = links["tcp"]
    try:
        for _ in range(rounds):
            ours_fk.append(time_calls(lambda: model.fk(configs), 25, warmup=1).min())
            ours_fk_all.append(time_calls(lambda: model.fk_all(configs), 25, warmup=1).min())
            ours_ik.append(time_calls(lambda: model.ik_all_batch(poses), 25, warmup=1).min())
            pb_fk.append(_pybullet_fk(body, tcp, configs))
            pb_q20, spent = _pybullet_ik(body, tcp, pose7, model.home_q)
            pb_ik20.append(spent)
            pb_q100, spent = _pybullet_ik(
                body, tcp, pose7, model.home_q, maxNumIterations=100, residualThreshold=1e-12
            )
            pb_ik100.append(spent)
        single = _single_configuration(model, body, tcp, configs[: n // 2], rounds)
    finally:
        pb.disconnect(client)
    fk_rate = n / min(ours_fk)
    fk_all_rate = n / min(ours_fk_all)
    ik_rate = n / min(ours_ik)
    pb_fk_rate = n / np.min(pb_fk, axis=0).sum()
    pb_rate20 = n / np.min(pb_ik20, axis=0).sum()
    pb_rate100 = n / np.min(pb_ik100, axis=0).sum()
    one_pose = _single_pose_ik(model, poses[: n // 2], rounds)
    pb_call = float(np.median(np.min(pb_ik20, axis=0)))  # one PyBullet IK call, median
    ik_single_rate = 1.0 / one_pose["ik_all"]
    sizes = [1, 10, 100, 1_000, 10_000] + ([] if args.quick else [100_000, 1_000_000])
    scaling = _scaling(model, rng, sizes)
    sols = model.ik_all_batch(poses)
    flat = sols.q.reshape(-1, 6)[sols.valid.reshape(-1)]
    owner = np.repeat(np.arange(n), sols.valid.sum(axis=1))
    ours_p, ours_r = _errors(model, flat, poses[owner])
    pb20_p, pb20_r = _errors(model, pb_q20, poses)
    pb100_p, pb100_r = _errors(model, pb_q100, poses)

    print(f"{n} random poses of the shipped arm; seed {args.seed}")
    print_table(
        "Forward kinematics (configurations/s)",
        ["method", "rate/s", "x PyBullet"],
        [
            ["ArmModel.fk (batch, tcp)", fk_rate, fk_rate / pb_fk_rate],
            ["ArmModel.fk_all (batch, 12 links)", fk_all_rate, fk_all_rate / pb_fk_rate],
            ["PyBullet reset + getLinkState", pb_fk_rate, 1.0],
        ],
    )
    us = 1e6
    print_table(
        f"One configuration per call (median us of {n // 2} configurations, best round)",
        ["method", "us/call", "x batched N=1", "x PyBullet"],
        [
            [label, single[key] * us, single[f"{kind}_batched_n1"] / single[key],
             single[f"{kind}_pybullet"] / single[key]]
            for label, key, kind in (
                ("ArmModel.fk(q) (generated code)", "fk", "fk"),
                ("batched tree, N = 1", "fk_batched_n1", "fk"),
                ("PyBullet reset x6 + getLinkState", "fk_pybullet", "fk"),
                ("ArmModel.jacobian(q) (generated code)", "jacobian", "jacobian"),
                ("batched tree, N = 1", "jacobian_batched_n1", "jacobian"),
                ("PyBullet calculateJacobian", "jacobian_pybullet", "jacobian"),
            )
        ],
    )  # fmt: skip
    rows = [
        ["ArmModel.ik_all_batch (8 postures)", ik_rate, ours_p, ours_r],
        ["ArmModel.ik_all (one pose per call)", ik_single_rate, ours_p, ours_r],
        ["PyBullet IK, default (20 it)", pb_rate20, pb20_p, pb20_r],
        ["PyBullet IK, 100 it", pb_rate100, pb100_p, pb100_r],
    ]
    print_table(
        "Inverse kinematics (poses/s; errors of FK(solution): median / max)",
        ["method", "poses/s", "x PyBullet 20 it", "pos err m", "rot err rad"],
        [
            [
                name,
                r,
                r / pb_rate20,
                f"{np.median(p):.2e} / {p.max():.2e}",
                f"{np.median(a):.2e} / {a.max():.2e}",
            ]
            for name, r, p, a in rows
        ],
    )
    print_table(
        f"One pose per call (median us of {n // 2} poses, best round)",
        ["method", "us/call", "x PyBullet IK call", "x kernel N=1"],
        [
            [label, one_pose[key] * us, pb_call / one_pose[key],
             one_pose["kernel_n1"] / one_pose[key]]
            for label, key in (
                ("ArmModel.ik_all (8 postures, generated code)", "ik_all"),
                ("ArmModel.ik (one posture, generated code)", "ik"),
                ("batched kernel, N = 1 (8 postures)", "kernel_n1"),
                ("ArmModel.fk(q) (for scale)", "fk"),
            )
        ]
        + [["PyBullet calculateInverseKinematics (20 it)", pb_call * us, 1.0,
            one_pose["kernel_n1"] / pb_call]],
    )  # fmt: skip
    print_table(
        "Throughput (per CPU second) and peak memory against batch size (ik_all_batch, fk)",
        ["N", "IK poses/s", "IK peak MB", "IK peak/out", "FK conf/s", "FK peak MB",
         "FK peak/out"],
        [
            [r["n"], r["ik_rate"], r["ik_peak_mb"], r["ik_peak_over_output"], r["fk_rate"],
             r["fk_peak_mb"], r["fk_peak_over_output"]]
            for r in scaling
        ],
    )  # fmt: skip
    solutions_per_pose = sols.valid.sum(axis=1)
    print(
        f"\nclosed form: {solutions_per_pose.mean():.2f} solutions per pose in limits "
        f"(min {solutions_per_pose.min()}, max {solutions_per_pose.max()}); PyBullet's IK "
        f"ignores joint limits and returns one solution."
    )
    figures = {
        "n_poses": n,
        "fk_rate": fk_rate,
        "fk_all_rate": fk_all_rate,
        "pybullet_fk_rate": pb_fk_rate,
        "fk_ratio": fk_rate / pb_fk_rate,
        "ik_rate": ik_rate,
        "ik_single_rate": ik_single_rate,
        "pybullet_ik_rate": pb_rate20,
        "pybullet_ik100_rate": pb_rate100,
        "ik_ratio": ik_rate / pb_rate20,
        "ik_ratio_vs_100_it": ik_rate / pb_rate100,
        "ik_pos_err_max_m": float(ours_p.max()),
        "ik_rot_err_max_rad": float(ours_r.max()),
        "pybullet_pos_err_median_m": float(np.median(pb20_p)),
        "pybullet_rot_err_median_rad": float(np.median(pb20_r)),
        "pybullet100_pos_err_median_m": float(np.median(pb100_p)),
        "pybullet100_rot_err_median_rad": float(np.median(pb100_r)),
        "error_ratio_pos": float(np.median(pb100_p) / max(ours_p.max(), 1e-300)),
        "error_ratio_rot": float(np.median(pb100_r) / max(ours_r.max(), 1e-300)),
        "fk_single_us": single["fk"] * us,
        "fk_single_batched_n1_us": single["fk_batched_n1"] * us,
        "fk_single_pybullet_us": single["fk_pybullet"] * us,
        "jacobian_single_us": single["jacobian"] * us,
        "jacobian_single_batched_n1_us": single["jacobian_batched_n1"] * us,
        "jacobian_single_pybullet_us": single["jacobian_pybullet"] * us,
        "ik_single_us": one_pose["ik_all"] * us,
        "ik_nearest_single_us": one_pose["ik"] * us,
        "ik_kernel_n1_us": one_pose["kernel_n1"] * us,
        "pybullet_ik_call_us": pb_call * us,
        "ik_single_vs_pybullet_call": pb_call / one_pose["ik_all"],
        "ik_single_speedup_vs_kernel_n1": one_pose["kernel_n1"] / one_pose["ik_all"],
        "ik_single_target_us": 30.0,
        "scaling": scaling,
    }
    print(
        f"one pose: ik_all {one_pose['ik_all'] * us:.1f} us (target 30), "
        f"{pb_call / one_pose['ik_all']:.2f}x a PyBullet IK call, "
        f"{one_pose['kernel_n1'] / one_pose['ik_all']:.0f}x faster than the kernel with N = 1"
    )
    print(
        f"ratios: IK rate {figures['ik_ratio']:.1f}x PyBullet (default), "
        f"{figures['ik_ratio_vs_100_it']:.1f}x (100 it); error ratio (PyBullet 100 it median / "
        f"ours max): position {figures['error_ratio_pos']:.1e}, "
        f"rotation {figures['error_ratio_rot']:.1e}"
    )
    emit_json("kinematics", figures)


if __name__ == "__main__":
    main()
