"""Dynamics: inverse dynamics and the mass matrix (``twin.dynamics``) against PyBullet, in one run.

Anchors, measured here on the same random states (in-limit configurations, velocities up to
twice the limits, accelerations up to 20 rad/s^2): PyBullet's ``calculateInverseDynamics`` and
``calculateMassMatrix`` on the shipped URDF, one state per call (they take no batch).

Figures: the median single call of ours (a (6,) state) and of PyBullet; our batched rate
(states/s over a batch of N) against PyBullet's per-call rate; the largest relative difference
of the results (rounding: about 1e-15). Targets from the issue: single call faster than
PyBullet's, batch >= 50x PyBullet's per-call rate. Single calls are medians; batch rates the best
of several rounds (the machine may be shared). Ours is the generated code of
``twin.dynamics.codegen``, compiled by numba (``twin.dynamics.compiled``) when it is installed,
else Python on floats or numpy arrays (the "backend" figure); PyBullet's is one C++ call. The
warm-up (building the code, and numba's load from its disk cache or first compile) is timed
apart, once, and is not in any per-call figure. For the batches the floating-point operations per
state of the compiled kernels (``compiled.flop_counts``: additions, multiplications and the
like, sin and cos by their polynomials) give the achieved GFLOP/s. Batches below
``code.PARALLEL_STATES`` run on one thread (the reason is there).

    python -m twin.benchmarks.bench_dynamics [--quick] [--seed N]
"""

from __future__ import annotations

import time

import numpy as np
import pybullet as pb
from twin.benchmarks._report import emit_json, parse_args, print_table, time_calls

from twin.dynamics import ArmDynamics, compiled
from twin.dynamics.code import PARALLEL_STATES, code_for


def _relative(ours: np.ndarray, ref: np.ndarray, axes) -> float:
    return float(np.max(np.linalg.norm(ours - ref, axis=axes) / np.linalg.norm(ref, axis=axes)))


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(args.seed)
    dyn = ArmDynamics.default()
    arm = dyn.arm
    batch = 2000 if args.quick else 20000
    repeats = 200 if args.quick else 2000
    q = rng.uniform(arm.lower, arm.upper, (batch, 6))
    qd = rng.uniform(-2.0, 2.0, (batch, 6)) * arm.velocity_limits
    qdd = rng.uniform(-20.0, 20.0, (batch, 6))
    client = pb.connect(pb.DIRECT)
    try:
        pb.setGravity(0.0, 0.0, -9.81, physicsClientId=client)
        body = pb.loadURDF(
            str(arm.urdf_path), useFixedBase=True, flags=pb.URDF_USE_INERTIA_FROM_FILE
        )
        lists = [(a.tolist(), b.tolist(), c.tolist()) for a, b, c in zip(q, qd, qdd)]
        a, b, c = lists[0]
        pb_id = float(
            np.median(time_calls(lambda: pb.calculateInverseDynamics(body, a, b, c), repeats))
        )
        pb_mm = float(np.median(time_calls(lambda: pb.calculateMassMatrix(body, a), repeats)))
        check = min(batch, 2000)
        tau_ref = np.array([pb.calculateInverseDynamics(body, *x) for x in lists[:check]])
        m_ref = np.array([pb.calculateMassMatrix(body, x[0]) for x in lists[:check]])
    finally:
        pb.disconnect(client)
    one = (q[0], qd[0], qdd[0])
    warm = time.perf_counter()
    for x in (one, (q[:2], qd[:2], qdd[:2])):
        dyn.inverse_dynamics(*x)
        dyn.mass_matrix(x[0])
    warm = time.perf_counter() - warm
    backend = "numba" if code_for(dyn.bodies).compiled else "python"
    our_id = float(np.median(time_calls(lambda: dyn.inverse_dynamics(*one), repeats)))
    our_mm = float(np.median(time_calls(lambda: dyn.mass_matrix(one[0]), repeats)))
    rounds = 5 if args.quick else 20
    id_rate = batch / time_calls(lambda: dyn.inverse_dynamics(q, qd, qdd), rounds, 2).min()
    mm_rate = batch / time_calls(lambda: dyn.mass_matrix(q), rounds, 2).min()
    split = None
    if backend == "numba" and not args.quick:  # the cores' split against one thread
        import numba

        big = [np.resize(a, (PARALLEL_STATES, 6)) for a in (q, qd, qdd)]
        split = PARALLEL_STATES / time_calls(lambda: dyn.inverse_dynamics(*big), rounds, 2).min()
        threads = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            one = PARALLEL_STATES / time_calls(lambda: dyn.inverse_dynamics(*big), rounds, 2).min()
        finally:
            numba.set_num_threads(threads)
        split = {"states": PARALLEL_STATES, "threads": threads, "split_per_s": split,
                 "one_thread_per_s": one}  # fmt: skip
    err_id = _relative(dyn.inverse_dynamics(q[:check], qd[:check], qdd[:check]), tau_ref, 1)
    err_mm = _relative(dyn.mass_matrix(q[:check]), m_ref, (1, 2))
    flops = compiled.flop_counts(dyn.bodies) if backend == "numba" else None
    gflops = {} if flops is None else {"id": flops["tau"] * id_rate / 1e9,
                                       "mm": flops["mass"] * mm_rate / 1e9}  # fmt: skip
    threads = "1 thread" if batch < PARALLEL_STATES else "all cores"
    rows = [
        ("inverse dynamics", "single call", 1e6 * our_id, 1e6 * pb_id, pb_id / our_id, "-"),
        (
            "inverse dynamics",
            f"batch {batch} (per state, {threads})",
            1e6 / id_rate,
            1e6 * pb_id,
            id_rate * pb_id,
            gflops.get("id", "-"),
        ),
        ("mass matrix", "single call", 1e6 * our_mm, 1e6 * pb_mm, pb_mm / our_mm, "-"),
        (
            "mass matrix",
            f"batch {batch} (per state, {threads})",
            1e6 / mm_rate,
            1e6 * pb_mm,
            mm_rate * pb_mm,
            gflops.get("mm", "-"),
        ),
    ]
    print_table(
        "Dynamics of the shipped arm vs PyBullet (us; speed-up = PyBullet time / ours)",
        ["what", "how", "ours us", "PyBullet us", "speed-up", "GFLOP/s"],
        rows,
    )
    if split is not None:
        print(
            f"inverse dynamics, batch {split['states']}: split over {split['threads']} threads "
            f"{split['split_per_s'] / 1e6:.3g} M states/s, one thread "
            f"{split['one_thread_per_s'] / 1e6:.3g} M states/s (a loaded machine slows the split)"
        )
    if flops is not None:
        print(
            f"flops per state: inverse dynamics {flops['tau']}, mass matrix {flops['mass']}; "
            "targets: single call faster than PyBullet, batch >= 50x its per-call rate"
        )
    print(f"max relative difference: inverse dynamics {err_id:.2g}, mass matrix {err_mm:.2g}")
    print(f"backend {backend}; warm-up (build, load or compile; once per process) {warm:.3g} s")
    emit_json(
        "dynamics",
        {
            "backend": backend,
            "warmup_s": warm,
            "batch": batch,
            "id_single_us": rows[0][2],
            "id_pybullet_us": rows[0][3],
            "id_single_speedup": rows[0][4],
            "id_batch_rate_per_s": id_rate,
            "id_batch_over_pybullet_rate": rows[1][4],
            "mm_single_us": rows[2][2],
            "mm_pybullet_us": rows[2][3],
            "mm_single_speedup": rows[2][4],
            "mm_batch_rate_per_s": mm_rate,
            "mm_batch_over_pybullet_rate": rows[3][4],
            "flops_per_state": flops,
            "id_split_over_cores": split,
            "id_batch_gflops": gflops.get("id"),
            "mm_batch_gflops": gflops.get("mm"),
            "max_rel_error_id": err_id,
            "max_rel_error_mm": err_mm,
        },
    )


if __name__ == "__main__":
    main()
