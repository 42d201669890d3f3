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

    python benchmarks/bench_transforms.py [--quick] [--seed N]
"""

from __future__ import annotations

import numpy as np
from twin.benchmarks._report import emit_json, parse_args, print_table, rate, time_calls

from twin.spatial import SE3, batch, quaternion
from twin.transforms import ImuTf, PoseTf, Rotation, TfConfig, Translation, TwistTf, WrenchTf

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
    rows, figures = [], {}
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
    print_table(
        "Transformer update latency (us) and batch throughput (million samples/s)",
        ["transformer", "update med", "p99", "numpy med", "speed-up", "np.dot 6x6", "set+update med",
         "numpy set+upd", "batch/row tf", "numpy batch", "speed-up", "batch 1 tf"],
        rows,
    )  # fmt: skip
    single_ok = all(f["update_median_us"] <= 10.0 for f in figures.values())
    batch_ok = all(f["batch_per_row_msps"] >= 2.0 for f in figures.values())
    print(f"\ntargets: update median <= 10 us: {single_ok}; batch >= 2e6 samples/s: {batch_ok}")
    emit_json(
        "transforms",
        {"figures": figures, "target_update_us_met": single_ok, "target_batch_met": batch_ok},
    )


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
