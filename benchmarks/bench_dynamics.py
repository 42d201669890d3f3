"""Dynamics: inverse dynamics and the mass matrix (``twin.dynamics``) against PyBullet, in one run.

Anchors, measured here on the same random states (in-limit configurations, velocities up to
twice the limits, accelerations up to 20 rad/s^2): PyBullet's ``calculateInverseDynamics`` and
``calculateMassMatrix`` on the shipped URDF, one state per call (they take no batch).

Figures: the median single call of ours (a (6,) state) and of PyBullet; per state of a batch of
N, on one thread and split over the cores (``code.THREADS``, forced whatever the load), the best
and the median of several calls (the machine may be shared), against PyBullet's per-call time;
the largest relative difference of the results (rounding: about 1e-15). Targets from the issue:
single call faster than PyBullet's, batch >= 50x PyBullet's per-call rate; the ``TARGET`` lines
give the judged figures (batch N per state on one thread and split, which of them the default
path takes at the load of the moment: ``code.threads_for``), then the load average. The full run
adds batch sizes and a table of the split against one thread per size (the evidence for
``code.PARALLEL_STATES``). Ours is the generated code of ``twin.dynamics.codegen``, compiled by
numba (``twin.dynamics.compiled``) when it is installed, else Python on floats or numpy arrays
(the "backend" figure); PyBullet's is one C++ call. The warm-up (building the code, and numba's
load from its disk cache or first compile) is timed apart, once, and is not in any per-call
figure. For the batches the floating-point operations per state of the compiled kernels
(``compiled.flop_counts``: additions, multiplications and the like, sin and cos by their
polynomials; a fused multiply-add counts two) give the achieved GFLOP/s.

    python -m twin.benchmarks.bench_dynamics [--quick] [--seed N]
"""

from __future__ import annotations

import os
import time

import numpy as np
import pybullet as pb
from twin.benchmarks._report import emit_json, parse_args, print_table, time_calls

from twin.dynamics import ArmDynamics, code, compiled
from twin.dynamics.code import code_for


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
    rounds = 7 if args.quick else 25
    sizes = (batch,) if args.quick else (2000, 8192, batch)
    kinds = {
        "id": (lambda n: dyn.inverse_dynamics(q[:n], qd[:n], qdd[:n]), pb_id),
        "mm": (lambda n: dyn.mass_matrix(q[:n]), pb_mm),
    }
    cores = code.THREADS if backend == "numba" else 1
    batches = {}  # (kind, n) -> {threads: (best s, median s)}
    for n in sizes:
        for kind, (fn, _) in kinds.items():
            batches[kind, n] = {t: _timed(fn, n, rounds, t) for t in sorted({1, cores})}
    sweep = _sweep(kinds["id"][0], cores, rounds) if backend == "numba" and not args.quick else None
    err_id = _relative(dyn.inverse_dynamics(q[:check], qd[:check], qdd[:check]), tau_ref, 1)
    err_mm = _relative(dyn.mass_matrix(q[:check]), m_ref, (1, 2))
    flops = compiled.flop_counts(dyn.bodies) if backend == "numba" else None
    rows = [
        ("inverse dynamics", "single call", 1e6 * our_id, 1e6 * pb_id, pb_id / our_id, "-"),
        ("mass matrix", "single call", 1e6 * our_mm, 1e6 * pb_mm, pb_mm / our_mm, "-"),
    ]
    print_table(
        "Dynamics of the shipped arm vs PyBullet, one state a call (speed-up = PyBullet / ours)",
        ["what", "how", "ours us", "PyBullet us", "speed-up"],
        [r[:5] for r in rows],
    )
    table, figures = [], {}
    for (kind, n), by_threads in batches.items():
        ref = kinds[kind][1]
        used = code.threads_for(n)
        for t, (best, median) in by_threads.items():
            ns = 1e9 * best / n
            gflops = "-" if flops is None else flops[_FLOPS[kind]] * n / best / 1e9
            how = f"{t} thread{'s' * (t > 1)}" + (" (default)" if t == used else " (forced)")
            table.append((_NAMES[kind], n, how, ns, 1e9 * median / n, ref * n / best, gflops))
            figures[f"{kind}_batch{n}_threads{t}_ns"] = ns
            figures[f"{kind}_batch{n}_threads{t}_median_ns"] = 1e9 * median / n
            figures[f"{kind}_batch{n}_threads{t}_over_pybullet"] = ref * n / best
    print_table(
        f"Batches, per state (best and median of {rounds} calls; x PyBullet = its per-call time"
        " / our per-state time, best)",
        ["what", "states", "threads", "best ns", "median ns", "x PyBullet", "GFLOP/s"],
        table,
    )
    if sweep is not None:
        print_table(
            f"Inverse dynamics split over {cores} threads against one (best ns per state; "
            f"the split starts at {code.PARALLEL_STATES} states)",
            ["states", "1 thread ns", f"{cores} threads ns", "gain", "median gain"],
            [(n, 1e9 * a[0] / n, 1e9 * b[0] / n, a[0] / b[0], a[1] / b[1]) for n, a, b in sweep],
        )
    load = os.getloadavg()
    if flops is not None:
        print(f"flops per state: inverse dynamics {flops['tau']}, mass matrix {flops['mass']}")
    print(f"max relative difference: inverse dynamics {err_id:.2g}, mass matrix {err_mm:.2g}")
    print(f"backend {backend}; warm-up (build, load or compile; once per process) {warm:.3g} s")
    judged = {}
    used = code.threads_for(batch)
    for kind, ref in (("id", pb_id), ("mm", pb_mm)):
        by_threads = batches[kind, batch]
        t = used if used in by_threads else cores
        best = by_threads[t][0]
        judged[kind] = {"ns_per_state": 1e9 * best / batch, "over_pybullet": ref * batch / best,
                        "threads": t, "target_ns": 1e9 * ref / 50.0}  # fmt: skip
        each = ", ".join(
            f"{k} thread{'s' * (k > 1)} {1e9 * v[0] / batch:.1f} ns = {ref * batch / v[0]:.1f}x"
            for k, v in by_threads.items()
        )
        single = 1e6 * (our_mm if kind == "mm" else our_id)
        print(
            f"TARGET {_NAMES[kind]}, batch {batch} per state: {each} PyBullet's per-call rate "
            f"({1e6 * ref:.2f} us; target >= 50x, i.e. <= {judged[kind]['target_ns']:.1f} ns); "
            f"default here {t} thread{'s' * (t > 1)}; single call {single:.2f} us (target < "
            f"{1e6 * ref:.2f} us)"
        )
    print(
        f"load average (1, 5, 15 min) {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on "
        f"{os.cpu_count()} cores; splits use {code.THREADS} threads when the load leaves a core idle"
    )
    emit_json(
        "dynamics",
        {
            "backend": backend,
            "warmup_s": warm,
            "batch": batch,
            "threads": cores,
            "parallel_states": code.PARALLEL_STATES,
            "load_average": load,
            "id_single_us": rows[0][2],
            "id_pybullet_us": rows[0][3],
            "id_single_speedup": rows[0][4],
            "mm_single_us": rows[1][2],
            "mm_pybullet_us": rows[1][3],
            "mm_single_speedup": rows[1][4],
            "id_batch_ns": judged["id"]["ns_per_state"],
            "id_batch_over_pybullet_rate": judged["id"]["over_pybullet"],
            "mm_batch_ns": judged["mm"]["ns_per_state"],
            "mm_batch_over_pybullet_rate": judged["mm"]["over_pybullet"],
            "batch_threads": judged["id"]["threads"],
            **figures,
            "flops_per_state": flops,
            "split_sweep": None
            if sweep is None
            else [
                {"states": n, "one_thread_ns": 1e9 * a[0] / n, "split_ns": 1e9 * b[0] / n}
                for n, a, b in sweep
            ],
            "max_rel_error_id": err_id,
            "max_rel_error_mm": err_mm,
        },
    )


_NAMES = {"id": "inverse dynamics", "mm": "mass matrix"}
_FLOPS = {"id": "tau", "mm": "mass"}


def _timed(fn, n: int, rounds: int, threads: int) -> tuple[float, float]:
    """(best, median) s of ``rounds`` calls of ``fn(n)`` (a batch of ``n``) on ``threads``
    threads (``code.THREADS``; more than one: split whatever the batch size)."""
    saved = code.THREADS, code.PARALLEL_STATES, code.FOLLOW_LOAD
    code.THREADS, code.FOLLOW_LOAD = threads, False
    if threads > 1:
        code.PARALLEL_STATES = 0
    try:
        times = time_calls(lambda: fn(n), rounds, 2)
    finally:
        code.THREADS, code.PARALLEL_STATES, code.FOLLOW_LOAD = saved
    return float(times.min()), float(np.median(times))


def _sweep(fn, cores: int, rounds: int) -> list:
    """Inverse dynamics per batch size on one thread and split (the threshold's evidence):
    [(states, (best, median) one thread, (best, median) split)]."""
    sizes = (512, 1024, 2048, 4096, 8192, 20000)
    return [(n, _timed(fn, n, rounds, 1), _timed(fn, n, rounds, cores)) for n in sizes]


if __name__ == "__main__":
    main()
