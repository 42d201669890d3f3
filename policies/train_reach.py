"""Train the Reach policy with stable-baselines3 SAC on CPU torch, then export it to ONNX.

    pip install '.[train]'
    python -m twin.policies.train_reach --steps 240000 --seed 0 --out policies/reach.onnx
    python -m twin.policies.train_reach --randomize --init-from policies/reach.onnx \
        --steps 40000 --out reach_dr.onnx      # fine-tune with randomisation (reach.md)

The environments run in gymnasium's ``AsyncVectorEnv`` (``--vector async``, one process per
environment, ``policies/vector.py``); ``--vector sync`` steps them in this process, ``--vector
twin`` in the twin's ``TwinVectorEnv`` (one worker process per core, ``twin/env/vector.py``).
``--randomize`` turns on the environment's domain randomisation (``twin/env/randomization.py``).
``--init-from`` starts the actor from a shipped ONNX policy's MLP and trains only the critics for
``--freeze-actor-steps`` gradient steps before the actor learns too (a fresh critic would
otherwise undo the actor in its first updates).

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
    ap.add_argument("--vector", choices=("async", "sync", "twin"), default="async")
    ap.add_argument("--randomize", action="store_true", help="domain randomisation on")
    ap.add_argument("--init-from", type=pathlib.Path, default=None, help="actor from an .onnx")
    ap.add_argument("--freeze-actor-steps", type=int, default=3_000)
    ap.add_argument("--init-log-std", type=float, default=-1.5)
    ap.add_argument("--ent-coef", default="auto", help="SAC ent_coef ('auto', 'auto_0.01', 0.01)")
    ap.add_argument("--learning-starts", type=int, default=None)
    ap.add_argument(
        "--anchor-weight",
        type=float,
        default=0.0,
        help="with --init-from: weight of the pull toward the initial actor (anchor_actor)",
    )
    ap.add_argument(
        "--actor-lr-scale",
        type=float,
        default=1.0,
        help="actor learning rate = this x the critics' (fine-tuning: well below 1)",
    )
    return ap.parse_args(argv)


def make_vec_env(
    n_envs: int,
    seed: int,
    physics_dt: float | None = None,
    model_features: bool = True,
    mode: str = "async",
    randomize: bool = False,
):
    """The training environments: gymnasium vector env (``mode``) behind SB3's ``VecEnv``."""
    from twin.policies.vector import Sb3VectorEnv, make_gym_vector

    kwargs: dict = {"model_features": model_features, "randomize": randomize}
    if physics_dt is not None:
        kwargs["robot_options"] = {"physics_dt": physics_dt, "control_period_s": physics_dt}
    return Sb3VectorEnv(make_gym_vector(ENV_ID, n_envs, seed, mode, **kwargs))


def sac_class(actor_lr_scale: float = 1.0):
    """SB3's ``SAC``, or (``actor_lr_scale != 1``) a subclass whose actor learns at
    ``actor_lr_scale`` times the critics' rate (SB3 has one rate for both): a fine-tuned actor
    then moves slowly while its fresh critics are still inaccurate."""
    from stable_baselines3 import SAC

    if not actor_lr_scale > 0.0:
        raise ValueError(f"--actor-lr-scale must be > 0, got {actor_lr_scale}")
    if actor_lr_scale == 1.0:
        return SAC

    class FineTuneSAC(SAC):
        def _update_learning_rate(self, optimizers) -> None:
            super()._update_learning_rate(optimizers)
            for group in self.actor.optimizer.param_groups:
                group["lr"] *= actor_lr_scale

    return FineTuneSAC


def anchor_actor(model, weight: float, batch_size: int) -> None:
    """Keep a fine-tuned actor near the one it started from: every actor update adds the
    gradient of ``weight * |mu(s) - mu_0(s)|^2`` (pre-tanh action means, summed over the 6
    joints, averaged over a replay batch of ``batch_size``) to SAC's own actor loss, ``mu_0``
    a frozen copy of the actor as it is now (a behaviour-cloning anchor, as in TD3+BC: without
    it the critics' early errors walk the actor away from a precise policy)."""
    import copy

    import torch

    if not weight > 0.0:
        return
    reference = copy.deepcopy(model.actor)
    for p in reference.parameters():
        p.requires_grad_(False)
    optimizer = model.actor.optimizer
    step = optimizer.step

    def anchored_step(closure=None):
        if any(p.requires_grad for p in model.actor.parameters()):
            obs = model.replay_buffer.sample(batch_size).observations
            mean = model.actor.get_action_dist_params(obs)[0]
            with torch.no_grad():
                target = reference.get_action_dist_params(obs)[0]
            (weight * ((mean - target) ** 2).sum(dim=-1).mean()).backward()
        return step(closure)

    optimizer.step = anchored_step


class FreezeActor:
    """An SB3 callback factory: the actor's parameters take no gradient for the first
    ``steps`` gradient steps (the critics learn the inherited actor's values first)."""

    def __new__(cls, steps: int):
        from stable_baselines3.common.callbacks import BaseCallback

        class _Freeze(BaseCallback):
            def _set(self, trainable: bool) -> None:
                for p in self.model.actor.parameters():
                    p.requires_grad_(trainable)

            def _on_training_start(self) -> None:
                self._set(steps <= 0)

            def _on_step(self) -> bool:
                if self.model._n_updates >= steps:
                    self._set(True)
                return True

        return _Freeze()


def export(model, out: pathlib.Path, info: dict) -> None:
    from twin.policies.export import export_reach_policy, mlp_from_sb3_sac

    layers = mlp_from_sb3_sac(model)
    export_reach_policy(layers, out, model_source=json.dumps(info))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    from stable_baselines3.common.callbacks import CallbackList, CheckpointCallback

    torch.set_num_threads(args.threads)
    SAC = sac_class(args.actor_lr_scale)
    ckpt = args.out.with_suffix(".zip")
    if args.export_only is not None:
        model = SAC.load(args.export_only, device="cpu")
        export(model, args.out, {"checkpoint": str(args.export_only)})
        print(f"exported {args.export_only} -> {args.out}")
        return 0
    env = make_vec_env(
        args.n_envs,
        args.seed,
        args.physics_dt,
        not args.no_model_features,
        args.vector,
        args.randomize,
    )
    sac_kwargs = dict(SAC_KWARGS, gradient_steps=args.gradient_steps)
    sac_kwargs["policy_kwargs"] = dict(net_arch=list(args.net))
    ent = args.ent_coef
    sac_kwargs["ent_coef"] = ent if str(ent).startswith("auto") else float(ent)
    if args.learning_starts is not None:
        sac_kwargs["learning_starts"] = args.learning_starts
    if args.resume is not None:
        model = SAC.load(args.resume, env=env, device="cpu")
        model.set_random_seed(args.seed)
    else:
        model = SAC("MlpPolicy", env, seed=args.seed, device="cpu", verbose=1, **sac_kwargs)
    callbacks = []
    if args.init_from is not None:
        from twin.policies.export import load_mlp_into_sb3_sac, mlp_from_onnx

        load_mlp_into_sb3_sac(model, mlp_from_onnx(args.init_from), args.init_log_std)
        anchor_actor(model, args.anchor_weight, sac_kwargs["batch_size"])
        callbacks.append(FreezeActor(args.freeze_actor_steps))
    every = max(1, args.checkpoint_every // args.n_envs)
    callbacks.append(CheckpointCallback(every, str(ckpt.parent / (ckpt.stem + "_ckpt")), ckpt.stem))
    callback = CallbackList(callbacks)
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
        "randomize": args.randomize,
        "init_from": None if args.init_from is None else str(args.init_from),
        "freeze_actor_steps": args.freeze_actor_steps if args.init_from is not None else 0,
        "actor_lr_scale": args.actor_lr_scale,
        "anchor_weight": args.anchor_weight if args.init_from is not None else 0.0,
        "vector": args.vector,
        "torch": torch.__version__,
    }
    export(model, args.out, info)
    print(json.dumps(info))
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
