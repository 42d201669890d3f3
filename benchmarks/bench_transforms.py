"""Frame transformers: single ``update`` latency and ``update_batch`` throughput, in one run
beside a straightforward numpy implementation of the same maths (the anchor).

Configurations: the example wrench section of ``docs/formats/transformer-config.md`` (input on the
moving frame, output on the fixed frame) for the 6-vector transformers, with a moving-frame transform that is not the identity;
``PoseTf`` from a body point to a rotated base. Measured:
* ``update``: one call with ``out`` given (the allocation-free control-loop form), median and p99;
  also ``set_fixed_to_moving_frame_tf`` + ``update`` (the per-loop cost when the moving frame
  moves every cycle). Anchors: numpy on 3-vectors with the geometry already resolved (``A``,
  ``r``): ``f = A @ x[:3]; t = A @ x[3:] - cross(r, f)`` and the like (``np.cross`` dominates it
  on numpy 2.x); for the linear wrench and twist also the numpy best case, ``np.dot(M, x,
  out=out)`` with the 6x6 map precomputed; for poses, SE3 composition of the spatial core.
* ``update_batch`` with one moving-frame transform per row (the log use case) and with one
  transform for all rows. Anchor: vectorised numpy (``einsum`` over per-row matrices from
  ``quaternion.to_matrix``; ``batch.compose_pose7`` for poses).
Targets: single update <= 10 us median; batch >= 2e6 samples/s.

Against the vendor's own library, ``bota-tf-utils`` from the package registry (C++ with Python
bindings; ``pip install bota-tf-utils`` or our ``vendor`` extra; without it those columns are
skipped and the run says so), in the same run and on the same configurations and data: its
single ``update`` (and ``set_fixed_to_moving_frame_tf`` + ``update``) against ours, and its
fastest per-sample loop (``zip`` over preallocated rows) against our ``update_batch``; the outputs
are checked to agree first. Targets: our update within 2x of the vendor's; our batch >= 10x its
loop.

How cost grows: ``update_batch`` throughput against the batch size (1 to 1e6 rows, per-row
moving-frame transforms for the 6-vector transformers) with the peak of memory allocated during
the call (``tracemalloc``, which sees numpy's allocations) beside the output's own size. The
compiled kernels write straight into ``out`` and allocate only the per-row status and codes (2
bytes a row), so memory is linear in the rows and stays within the output's size; time is linear
once the fixed cost of a call (argument checks, some microseconds) is amortised, and from
``_compiled.PARALLEL_ROWS`` rows on the rows are split over the cores. On a shared, loaded
machine the wall-clock rate of calls of tens of milliseconds (1e5 rows and more) falls: no such
call runs without being preempted, so the best of them measures the machine's share, not the
code; the rate per CPU second beside it is the code's (for split calls it adds the threads' CPU
time, so it shows the cost, not the gain, of the split). The compiled kernels' load (from numba's
disk cache, or the first compile on a machine) is timed apart and printed.

    python benchmarks/bench_transforms.py [--quick] [--seed N]
"""

from __future__ import annotations

import time
import tracemalloc
from importlib import metadata

import numpy as np
from twin.benchmarks._report import emit_json, parse_args, print_table, rate, time_calls

from twin.spatial import SE3, batch, quaternion
from twin.transforms import (
    ImuTf,
    PoseTf,
    Rotation,
    TfConfig,
    Translation,
    TwistTf,
    WrenchTf,
    _compiled,
)

try:  # the vendor's library: optional (module doc)
    import bota_tf_utils as vendor
except ImportError:
    vendor = None

VENDOR_CLASS = {"WrenchTf": "BotaTfWrench", "TwistTf": "BotaTfTwist", "ImuTf": "BotaTfImu",
                "PoseTf": "BotaTfPose"}  # fmt: skip
TARGET_VENDOR_UPDATE = 2.0  # ours / vendor's median update at most
TARGET_VENDOR_BATCH = 10.0  # our batch / the vendor's loop at least

SIX = {"WrenchTf": WrenchTf, "TwistTf": TwistTf, "ImuTf": ImuTf}
IN_POINT, OUT_POINT = np.array([0.0, 0.0, 0.05]), np.array([0.1, 0.0, 0.0])
SIX_CONFIG = TfConfig(
    input_ref_point=Translation("moving_frame", tuple(IN_POINT)),
    input_expr_axes=Rotation("moving_frame", (1.0, 0.0, 0.0, 0.0)),
    output_ref_point=Translation("fixed_frame", tuple(OUT_POINT)),
    output_expr_axes=Rotation("fixed_frame", (1.0, 0.0, 0.0, 0.0)),
)
POSE_AXES = np.array([0.5, 0.5, 0.5, 0.5])
POSE_CONFIG = TfConfig(
    input_ref_point=Translation("moving_frame", (0.0, 0.0, 0.0)),
    input_expr_axes=Rotation("fixed_frame", (1.0, 0.0, 0.0, 0.0)),
    output_ref_point=Translation("moving_frame", (0.0, 0.0, 0.1)),
    output_expr_axes=Rotation("fixed_frame", tuple(POSE_AXES)),
)


# ------------------------------------------------------------------ numpy anchor
def np_geometry(tf7: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (3, 3) and r (3,) of SIX_CONFIG for one moving-frame transform."""
    rot = quaternion.to_matrix(tf7[3:])
    p_in = tf7[:3] + rot @ IN_POINT
    return rot, OUT_POINT - p_in  # output axes = fixed identity


def np_single(name: str, a: np.ndarray, r: np.ndarray, x: np.ndarray) -> np.ndarray:
    if name == "WrenchTf":
        f = a @ x[:3]
        return np.concatenate((f, a @ x[3:] - np.cross(r, f)))
    w = a @ x[3:]
    shift = np.cross(w, r) if name == "TwistTf" else np.cross(w, np.cross(w, r))
    return np.concatenate((a @ x[:3] + shift, w))


def np_matrix(name: str, a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The 6x6 linear map of the wrench or twist transform (numpy best case)."""
    m = np.zeros((6, 6))
    m[:3, :3] = m[3:, 3:] = a
    if name == "WrenchTf":
        m[3:, :3] = -quaternion.skew(r) @ a
    else:
        m[:3, 3:] = -quaternion.skew(r) @ a
    return m


def np_batch(name: str, x: np.ndarray, tfs: np.ndarray) -> np.ndarray:
    rot = quaternion.to_matrix(tfs[:, 3:])
    r = OUT_POINT - (tfs[:, :3] + rot @ IN_POINT)
    lin, ang = np.einsum("nij,nj->ni", rot, x[:, :3]), np.einsum("nij,nj->ni", rot, x[:, 3:])
    if name == "WrenchTf":
        return np.hstack((lin, ang - np.cross(r, lin)))
    shift = np.cross(ang, r) if name == "TwistTf" else np.cross(ang, np.cross(ang, r))
    return np.hstack((lin + shift, ang))


POSE_LEFT = SE3.from_pose7([0.0, 0.0, 0.0, *POSE_AXES]).inverse()
POSE_RIGHT = SE3.from_translation([0.0, 0.0, 0.1])


def np_pose_single(x: np.ndarray) -> np.ndarray:
    return (POSE_LEFT @ SE3.from_pose7(x) @ POSE_RIGHT).pose7()


def np_pose_batch(x: np.ndarray) -> np.ndarray:
    n = len(x)
    left = np.broadcast_to(POSE_LEFT.pose7(), (n, 7))
    right = np.broadcast_to(POSE_RIGHT.pose7(), (n, 7))
    return batch.compose_pose7(batch.compose_pose7(left, x), right)


# ------------------------------------------------------------------ the vendor's library
def vendor_tf(name: str, config: TfConfig):
    """The vendor's transformer of ``name`` built from the same configuration."""
    cfg = vendor.BotaTfConfig()
    for attr in ("input_ref_point", "output_ref_point", "input_expr_axes", "output_expr_axes"):
        entry = getattr(config, attr)
        if attr.endswith("point"):
            v = vendor.Translation()
            v.translation = [float(c) for c in entry.translation]
        else:
            v = vendor.Rotation()
            v.rotation = [float(c) for c in entry.rotation]
        v.origin = str(getattr(entry.origin, "value", entry.origin))
        setattr(cfg, attr, v)
    return getattr(vendor, VENDOR_CLASS[name])(cfg)


def vendor_loop(tf, x: np.ndarray, tfs: np.ndarray | None, out: np.ndarray) -> None:
    """The vendor's per-sample loop over a log, in its fastest Python form."""
    update = tf.update
    if tfs is None:
        for xk, ok in zip(x, out):
            update(xk, ok)
        return
    push = tf.set_fixed_to_moving_frame_tf
    for xk, tk, ok in zip(x, tfs, out):
        push(tk)
        update(xk, ok)


def paired_calls(fns: dict, repeats: int, block: int = 200) -> dict[str, np.ndarray]:
    """Wall time (s) of each call of each function, measured in alternating blocks so that the
    load of a shared machine falls on all of them alike."""
    out = {k: np.empty(repeats) for k in fns}
    clock = time.perf_counter
    for fn in fns.values():
        for _ in range(10):
            fn()
    for lo in range(0, repeats, block):
        for k, fn in fns.items():
            times = out[k]
            for i in range(lo, min(lo + block, repeats)):
                t0 = clock()
                fn()
                times[i] = clock() - t0
    return out


def paired_rates(fns: dict, items: dict, calls: int) -> dict[str, float]:
    """Items per second of each function: ``items[k]`` over its best call time, the functions
    called in turn ``calls`` times. On a shared, loaded machine a call of a few milliseconds is
    often preempted; the best of several is the code's own speed. The calls should take about
    as long, so that each has the same chance of an undisturbed one."""
    times = {k: np.empty(calls) for k in fns}
    for fn in fns.values():
        fn()
    for i in range(calls):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k][i] = time.perf_counter() - t0
    return {k: items[k] / float(times[k].min()) for k in fns}


def rows_for(make, n_max: int, call_s: float = 0.003) -> int:
    """Rows (at most ``n_max``) for which a call of ``make(rows)`` takes about ``call_s``."""
    k = min(256, n_max)
    fn = make(k)
    best = min(_timed(fn) for _ in range(5))
    return int(min(n_max, max(k, k * call_s / best)))


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def vendor_figures(name, ours_tf, config, x, tfs, repeats, n_loop, calls) -> dict:
    """Ours against the vendor's, measured in turn (``paired_calls``, ``paired_rates``): update
    and set + update latency (us, median), our batch against its loop (samples/s); first its
    outputs are checked to agree with ours on the first ``n_loop`` rows. For the rates each side
    gets as many rows as it handles in about 3 ms a call (``rows_for``), so that both have the
    same chance of an undisturbed call."""
    tf = vendor_tf(name, config)
    xin, out, mine = x[0].copy(), np.empty(x.shape[1]), np.empty(x.shape[1])
    loop_tfs = None if tfs is None else tfs[:n_loop]
    yv = np.empty_like(x[:n_loop])
    vendor_loop(tf, x[:n_loop], loop_tfs, yv)
    args = (x[:n_loop],) if tfs is None else (x[:n_loop], loop_tfs)
    ours = ours_tf.update_batch(*args)[1]
    if name == "PoseTf":  # the vendor does not canonicalise quaternions
        yv[:, 3:] *= np.where(yv[:, 3:4] < 0.0, -1.0, 1.0)
    assert np.allclose(yv, ours, atol=1e-9), f"{name}: the vendor's output differs from ours"
    fns = {"ours": lambda: ours_tf.update(xin, mine), "vendor": lambda: tf.update(xin, out)}
    if tfs is not None:
        tf0 = tfs[0].copy()
        fns["ours_set"] = lambda: (
            ours_tf.set_fixed_to_moving_frame_tf(tf0),
            ours_tf.update(xin, mine),
        )
        fns["vendor_set"] = lambda: (tf.set_fixed_to_moving_frame_tf(tf0), tf.update(xin, out))
    med = {k: float(np.median(v) * 1e6) for k, v in paired_calls(fns, repeats).items()}
    yb = np.empty_like(x)

    def ours_rows(k: int):
        return lambda: ours_tf.update_batch(x[:k], *(() if tfs is None else (tfs[:k],)), out=yb[:k])

    def vendor_rows(k: int):
        return lambda: vendor_loop(tf, x[:k], None if tfs is None else tfs[:k], yv[:k])

    k_ours, k_vendor = rows_for(ours_rows, len(x)), rows_for(vendor_rows, n_loop)
    rates = paired_rates(
        {"ours": ours_rows(k_ours), "vendor": vendor_rows(k_vendor)},
        {"ours": k_ours, "vendor": k_vendor},
        calls,
    )
    fig = {
        "ours_update_median_us": med["ours"],
        "vendor_update_median_us": med["vendor"],
        "update_ours_over_vendor": med["ours"] / med["vendor"],
        "ours_batch_msps": rates["ours"] / 1e6,
        "vendor_loop_msps": rates["vendor"] / 1e6,
        "batch_over_vendor_loop": rates["ours"] / rates["vendor"],
    }
    if tfs is not None:
        fig["ours_set_and_update_median_us"] = med["ours_set"]
        fig["vendor_set_and_update_median_us"] = med["vendor_set"]
        fig["set_and_update_ours_over_vendor"] = med["ours_set"] / med["vendor_set"]
    return fig


# ------------------------------------------------------------------ how cost grows
SCALING_SIZES = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)


def scaling_rows(rng: np.random.Generator, sizes: tuple[int, ...], min_time: float) -> list:
    """Per transformer and batch size: samples/s (best of calls over ``min_time``; by the wall
    clock and by the process's CPU time, all threads), and the peak of memory allocated during
    one call (MB) beside the output's size (MB)."""
    n_max = max(sizes)
    x6 = rng.normal(size=(n_max, 6))
    tfs = np.hstack((rng.uniform(-1, 1, (n_max, 3)), unit_rows(rng, n_max)))
    x7 = np.hstack((rng.uniform(-1, 1, (n_max, 3)), unit_rows(rng, n_max)))
    rows = []
    for name, cls in (*SIX.items(), ("PoseTf", PoseTf)):
        tf = cls(POSE_CONFIG if cls is PoseTf else SIX_CONFIG)
        for n in sizes:
            out = np.empty((n, 7 if cls is PoseTf else 6))
            args = (x7[:n],) if cls is PoseTf else (x6[:n], tfs[:n])

            def call(tf=tf, args=args, out=out):
                tf.update_batch(*args, out=out)

            call()
            best, best_cpu, spent, calls = float("inf"), float("inf"), 0.0, 0
            while spent < min_time or calls < 3:
                t0, c0 = time.perf_counter(), time.process_time()
                call()
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                best, spent, calls = min(best, dt), spent + dt, calls + 1
                best_cpu = min(best_cpu, dc)
            tracemalloc.start()
            call()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            cpu = n / best_cpu / 1e6 if best_cpu > 0.0 else "-"  # below the clock's resolution
            rows.append([name, n, n / best / 1e6, cpu, best * 1e6, peak / 1e6, out.nbytes / 1e6])
    return rows


# ------------------------------------------------------------------ measurement
def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(args.seed)
    repeats = 5_000 if args.quick else 50_000
    n_batch = 20_000 if args.quick else 200_000
    min_time = 0.3 if args.quick else 1.5
    x6 = rng.normal(size=(n_batch, 6))
    tfs = np.hstack((rng.uniform(-1, 1, (n_batch, 3)), unit_rows(rng, n_batch)))
    x7 = np.hstack((rng.uniform(-1, 1, (n_batch, 3)), unit_rows(rng, n_batch)))
    tf0 = tfs[0]
    n_vendor = n_batch // 10  # rows checked against the vendor's
    calls = 20 if args.quick else 60
    rows, figures, vendor_figs = [], {}, {}
    for name, cls in SIX.items():
        tf = cls(SIX_CONFIG)
        tf.set_fixed_to_moving_frame_tf(tf0)
        out, xin = np.empty(6), x6[0].copy()
        # correctness of the anchor against the transformer, in this run
        a, r = np_geometry(tf0)
        assert np.allclose(np_single(name, a, r, xin), tf.update(xin)[1], atol=1e-12)
        assert np.allclose(
            np_batch(name, x6[:100], tfs[:100]), tf.update_batch(x6[:100], tfs[:100])[1], atol=1e-12
        )
        ours = time_calls(lambda tf=tf, xin=xin, out=out: tf.update(xin, out), repeats) * 1e6
        loop = (
            time_calls(
                lambda tf=tf, xin=xin, out=out: (
                    tf.set_fixed_to_moving_frame_tf(tf0),
                    tf.update(xin, out),
                ),
                repeats,
            )
            * 1e6
        )
        ref = (
            time_calls(lambda a=a, r=r, xin=xin, name=name: np_single(name, a, r, xin), repeats)
            * 1e6
        )
        dot = None
        if name != "ImuTf":
            m = np_matrix(name, a, r)
            assert np.allclose(m @ xin, tf.update(xin)[1], atol=1e-12)
            dot = time_calls(lambda m=m, xin=xin, out=out: np.dot(m, xin, out=out), repeats) * 1e6
        ref_loop = (
            time_calls(lambda xin=xin, name=name: np_single(name, *np_geometry(tf0), xin), repeats)
            * 1e6
        )
        yb = np.empty_like(x6)
        b_ours = rate(lambda tf=tf, yb=yb: tf.update_batch(x6, tfs, yb), n_batch, min_time)
        b_static = rate(lambda tf=tf, yb=yb: tf.update_batch(x6, None, yb), n_batch, min_time)
        b_ref = rate(lambda name=name: np_batch(name, x6, tfs), n_batch, min_time)
        rows.append(_row(name, ours, loop, ref, dot, ref_loop, b_ours, b_static, b_ref))
        figures[name] = _figures(ours, loop, ref, dot, ref_loop, b_ours, b_static, b_ref)
        if vendor is not None:
            vendor_figs[name] = vendor_figures(
                name, tf, SIX_CONFIG, x6, tfs, repeats, n_vendor, calls
            )
    pose = PoseTf(POSE_CONFIG)
    out, xin = np.empty(7), x7[0].copy()
    assert np.allclose(np_pose_single(xin), pose.update(xin)[1], atol=1e-12)
    assert np.allclose(np_pose_batch(x7[:100]), pose.update_batch(x7[:100])[1], atol=1e-12)
    ours = time_calls(lambda: pose.update(xin, out), repeats) * 1e6
    ref = time_calls(lambda: np_pose_single(xin), repeats) * 1e6
    y7 = np.empty_like(x7)
    b_ours = rate(lambda: pose.update_batch(x7, y7), n_batch, min_time)
    b_ref = rate(lambda: np_pose_batch(x7), n_batch, min_time)
    rows.append(_row("PoseTf", ours, None, ref, None, None, b_ours, None, b_ref))
    figures["PoseTf"] = _figures(ours, None, ref, None, None, b_ours, None, b_ref)
    if vendor is not None:
        vendor_figs["PoseTf"] = vendor_figures(
            "PoseTf", pose, POSE_CONFIG, x7, None, repeats, n_vendor, calls
        )
    print_table(
        "Transformer update latency (us) and batch throughput (million samples/s)",
        ["transformer", "update med", "p99", "numpy med", "speed-up", "np.dot 6x6", "set+update med",
         "numpy set+upd", "batch/row tf", "numpy batch", "speed-up", "batch 1 tf"],
        rows,
    )  # fmt: skip
    single_ok = all(f["update_median_us"] <= 10.0 for f in figures.values())
    batch_ok = all(f["batch_per_row_msps"] >= 2.0 for f in figures.values())
    print(f"\ntargets: update median <= 10 us: {single_ok}; batch >= 2e6 samples/s: {batch_ok}")
    vs_vendor = vendor_table(vendor_figs)
    sizes = SCALING_SIZES[:-1] if args.quick else SCALING_SIZES
    scaling = scaling_rows(rng, sizes, 0.05 if args.quick else 0.3)
    print_table(
        "How cost grows: update_batch against batch size (per-row moving-frame transforms for "
        "the 6-vector transformers)",
        [
            "transformer",
            "rows",
            "M samples/s",
            "M/s per CPU s",
            "us per call",
            "peak MB (call)",
            "output MB",
        ],
        scaling,
    )
    fast = _compiled.kernels()
    load = None if fast is None else fast.load_s
    print(
        "kernels: "
        + ("Python (numba absent or TWIN_TRANSFORMS_COMPILED=0)" if fast is None else "numba")
        + ("" if load is None else f"; compiled kernels loaded in {load:.3g} s (once per process; "
           "the first compile on a machine is tens of seconds of CPU)")
    )  # fmt: skip
    emit_json(
        "transforms",
        {
            "figures": figures,
            "target_update_us_met": single_ok,
            "target_batch_met": batch_ok,
            "vendor": vs_vendor,
            "kernels": "python" if fast is None else "numba",
            "kernels_load_s": load,
            "scaling": [
                {"transformer": r[0], "rows": r[1], "msps": r[2], "msps_per_cpu_s": r[3],
                 "peak_mb": r[5], "output_mb": r[6]}
                for r in scaling
            ],
        },
    )  # fmt: skip


def vendor_table(vendor_figs: dict) -> dict | None:
    """Print ours against the vendor's library; the figures (None when it is not installed)."""
    if vendor is None:
        print(
            "\nvendor columns skipped: the vendor's library bota-tf-utils is not installed "
            "(pip install bota-tf-utils, or pip install '.[vendor]')"
        )
        return None
    library = f"bota-tf-utils {metadata.version('bota-tf-utils')}"
    rows = []
    for name, v in vendor_figs.items():
        rows.append([
            name, v["ours_update_median_us"], v["vendor_update_median_us"],
            v["update_ours_over_vendor"], f"<= {TARGET_VENDOR_UPDATE:g}",
            v.get("ours_set_and_update_median_us", "-"),
            v.get("vendor_set_and_update_median_us", "-"),
            v.get("set_and_update_ours_over_vendor", "-"),
            v["ours_batch_msps"], v["vendor_loop_msps"], v["batch_over_vendor_loop"],
            f">= {TARGET_VENDOR_BATCH:g}",
        ])  # fmt: skip
    print_table(
        f"Against the vendor's library ({library}), measured in turn: latency (us, median), our "
        "batch vs its per-sample loop (million samples/s)",
        ["transformer", "ours update", "vendor update", "ours/vendor", "target",
         "ours set+upd", "vendor set+upd", "ours/vendor", "our batch", "vendor loop", "ratio",
         "target"],
        rows,
    )  # fmt: skip
    update_ok = all(
        v["update_ours_over_vendor"] <= TARGET_VENDOR_UPDATE for v in vendor_figs.values()
    )
    batch_ok = all(v["batch_over_vendor_loop"] >= TARGET_VENDOR_BATCH for v in vendor_figs.values())
    print(
        f"targets against the vendor: update within {TARGET_VENDOR_UPDATE:g}x: {update_ok}; "
        f"batch >= {TARGET_VENDOR_BATCH:g}x its loop: {batch_ok}"
    )
    return {"library": library, **vendor_figs, "target_update_met": update_ok,
            "target_batch_met": batch_ok}  # fmt: skip


def _row(name, ours, loop, ref, dot, ref_loop, b_ours, b_static, b_ref) -> list:
    med = float(np.median(ours))
    return [
        name,
        med,
        float(np.percentile(ours, 99)),
        float(np.median(ref)),
        float(np.median(ref)) / med,
        "-" if dot is None else float(np.median(dot)),
        "-" if loop is None else float(np.median(loop)),
        "-" if ref_loop is None else float(np.median(ref_loop)),
        b_ours / 1e6,
        b_ref / 1e6,
        b_ours / b_ref,
        "-" if b_static is None else b_static / 1e6,
    ]


def _figures(ours, loop, ref, dot, ref_loop, b_ours, b_static, b_ref) -> dict:
    fig = {
        "update_median_us": float(np.median(ours)),
        "update_p99_us": float(np.percentile(ours, 99)),
        "numpy_update_median_us": float(np.median(ref)),
        "update_speedup": float(np.median(ref) / np.median(ours)),
        "batch_per_row_msps": b_ours / 1e6,
        "numpy_batch_msps": b_ref / 1e6,
        "batch_speedup": b_ours / b_ref,
    }
    if dot is not None:
        fig["numpy_dot_6x6_median_us"] = float(np.median(dot))
    if loop is not None:
        fig["set_and_update_median_us"] = float(np.median(loop))
        fig["numpy_set_and_update_median_us"] = float(np.median(ref_loop))
    if b_static is not None:
        fig["batch_one_tf_msps"] = b_static / 1e6
    return fig


if __name__ == "__main__":
    main()
