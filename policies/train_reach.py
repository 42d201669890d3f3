"""Train the Reach policy with stable-baselines3 SAC on CPU torch, then export it to ONNX.

    pip install '.[train]'
    python -m policies.train_reach --steps 240000 --seed 0 --out policies/reach.onnx

Progress bar (tqdm/rich) on stderr; a checkpoint ``<out>.zip`` every ``--checkpoint-every``
steps (and at the end) so a run can be stopped and exported at any time
(``--export-only <checkpoint.zip>``). The export writes the graph of ``policies/export.py``:
observation features + the actor MLP + ``pos = q + scale * tanh(.)``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import twin  # noqa: F401  (registers the environment ids)

ENV_ID = "twin/Reach-v0"

#: SAC settings used for the shipped policy (see policies/reach.md).
SAC_KWARGS = dict(
    learning_rate=1e-3,
    buffer_size=400_000,
    learning_starts=2_000,
    batch_size=256,
    tau=0.005,
    gamma=0.95,
    train_freq=1,
    gradient_steps=1,
    policy_kwargs=dict(net_arch=[128, 128]),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=240_000, help="environment steps in total")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-envs", type=int, default=4, help="environments stepped in turn")
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("policies/reach.onnx"))
    ap.add_argument("--checkpoint-every", type=int, default=20_000)
    ap.add_argument("--resume", type=pathlib.Path, default=None, help="continue from a .zip")
    ap.add_argument("--export-only", type=pathlib.Path, default=None, help="export a .zip")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--net", type=int, nargs="+", default=[128, 128], help="hidden layer sizes")
    ap.add_argument("--gradient-steps", type=int, default=1, help="updates per vector step")
    ap.add_argument(
        "--no-model-features",
        action="store_true",
        help="observation without the ik_step and gravity_offset terms",
    )
    ap.add_argument(
        "--physics-dt", type=float, default=None, help="sim physics step (s) for training only"
    )
    ap.add_argument("--no-progress", action="store_true")
    return ap.parse_args(argv)


def make_vec_env(
    n_envs: int, seed: int, physics_dt: float | None = None, model_features: bool = True
):
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env

    kwargs: dict = {"model_features": model_features}
    if physics_dt is not None:
        kwargs["robot_options"] = {"physics_dt": physics_dt, "control_period_s": physics_dt}
    return sb3_make_vec_env(ENV_ID, n_envs=n_envs, seed=seed, env_kwargs=kwargs)


def export(model, out: pathlib.Path, info: dict) -> None:
    from twin.policies.export import export_reach_policy, mlp_from_sb3_sac

    layers = mlp_from_sb3_sac(model)
    export_reach_policy(layers, out, model_source=json.dumps(info))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import CheckpointCallback

    torch.set_num_threads(args.threads)
    ckpt = args.out.with_suffix(".zip")
    if args.export_only is not None:
        model = SAC.load(args.export_only, device="cpu")
        export(model, args.out, {"checkpoint": str(args.export_only)})
        print(f"exported {args.export_only} -> {args.out}")
        return 0
    env = make_vec_env(args.n_envs, args.seed, args.physics_dt, not args.no_model_features)
    sac_kwargs = dict(SAC_KWARGS, gradient_steps=args.gradient_steps)
    sac_kwargs["policy_kwargs"] = dict(net_arch=list(args.net))
    if args.resume is not None:
        model = SAC.load(args.resume, env=env, device="cpu")
        model.set_random_seed(args.seed)
    else:
        model = SAC("MlpPolicy", env, seed=args.seed, device="cpu", verbose=1, **sac_kwargs)
    every = max(1, args.checkpoint_every // args.n_envs)
    callback = CheckpointCallback(every, str(ckpt.parent / (ckpt.stem + "_ckpt")), ckpt.stem)
    t0 = time.perf_counter()
    model.learn(
        total_timesteps=args.steps,
        callback=callback,
        progress_bar=not args.no_progress,
        reset_num_timesteps=args.resume is None,
    )
    wall_s = time.perf_counter() - t0
    model.save(ckpt)
    info = {
        "algo": "SAC",
        "env": ENV_ID,
        "steps": int(model.num_timesteps),
        "seed": args.seed,
        "n_envs": args.n_envs,
        "wall_time_s": round(wall_s, 1),
        "sac": sac_kwargs,
        "physics_dt": args.physics_dt,
        "model_features": not args.no_model_features,
        "torch": torch.__version__,
    }
    export(model, args.out, info)
    print(json.dumps(info))
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
