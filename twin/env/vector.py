"""``TwinVectorEnv``: a Gymnasium vector env of worker processes that exchange through shared
memory, for throughput on a few cores.

    envs = gymnasium.make_vec("twin/Reach-v0", num_envs=4, vectorization_mode="vector_entry_point")
    envs = TwinVectorEnv([lambda: gymnasium.make("twin/Reach-v0")] * 4, num_workers=2)

Each worker process steps a contiguous block of the environments (``num_workers`` defaults to
one per core, at most one per environment). Per vector step the main process writes the actions
(num_envs, *action_shape) into shared memory and posts each worker's semaphore; the worker
steps its environments, writes observations, rewards, terminations, truncations and the scalar
``info`` values into shared memory, and the last worker to finish posts the main's semaphore
(``twin/env/handoff.py``: each side polls for ``spin_s`` before it blocks, so that in a steady
loop nobody sleeps and no idle core has to be woken). Only what does not fit that layout
travels pickled through each worker's pipe: an ``info`` whose keys change or whose
values are not scalars (e.g. ``final_info`` / ``final_obs`` of ``AutoresetMode.SAME_STEP``),
resets, ``call`` / ``get_attr`` / ``set_attr`` and errors. The results are gymnasium's: the
same autoreset modes (``AutoresetMode``, default ``NEXT_STEP``), the seeding rule (``reset(seed=s)``
seeds environment ``i`` with ``s + i``) and the info layout (``info[key]`` (num_envs,) with
the boolean mask ``info["_" + key]``), so a seed gives bit for bit the observations, rewards and
infos of single environments and of gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv``.

Why not ``AsyncVectorEnv`` (one environment per process, pickled step results and infos merged
per key in the main process): ``python -m twin.benchmarks.bench_env`` measures both against one
environment and against independent processes, in the same run.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing as mp
import os
import pickle
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import (
    CloudpickleWrapper,
    batch_space,
    create_shared_memory,
    iterate,
    read_from_shared_memory,
)

from twin.env.handoff import SPIN_S, Handoff

#: Scalar ``info`` values per environment that travel through shared memory (more go pickled).
INFO_SLOTS = 16
#: Seconds ``close`` waits for a worker to exit before terminating it.
CLOSE_TIMEOUT_S = 5.0
#: Largest ``spin_s`` (s): a longer poll would only burn the cores.
MAX_SPIN_S = 0.1
#: ``TwinVectorEnv``'s own keywords (``make_vector_env`` passes the others to the envs).
_OPTIONS = ("num_workers", "in_main", "autoreset_mode", "copy", "context", "spin_s", "pin")
#: Thread pools of the numeric libraries, set to one thread in the workers: a worker is one
#: core's share (read by a worker that imports them afresh: the ``spawn`` / ``forkserver``
#: start methods; a forked worker keeps none of the parent's threads).
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                     "NUMBA_NUM_THREADS")  # fmt: skip
#: Info values that go through shared memory, as gymnasium batches them into typed arrays (it
#: batches a ``numpy.bool_`` into an object array: those go pickled).
_SCALARS = (bool, int, float, np.integer, np.floating)


class VectorWorkerError(RuntimeError):
    """An environment in a worker process raised; the message carries the worker's traceback."""


def _views(space: gym.Space, memory: Any, n: int) -> Any:
    return read_from_shared_memory(space, memory, n)


def _assign(views: Any, index: int, value: Any) -> None:
    """Write one environment's observation (Box, Dict or Tuple of them) into the batch views."""
    if isinstance(views, dict):
        for key, view in views.items():
            _assign(view, index, value[key])
    elif isinstance(views, tuple):
        for view, item in zip(views, value):
            _assign(view, index, item)
    else:
        views[index] = value


def _info_schema(info: dict) -> tuple | None:
    """(keys, types) of an info of at most ``INFO_SLOTS`` scalar values, else ``None``."""
    types = tuple(map(type, info.values()))
    if len(info) > INFO_SLOTS or not all(issubclass(t, _SCALARS) for t in types):
        return None
    return tuple(info), types


class _Shared:
    """The shared arrays of ``n`` environments: actions, observations, rewards (float64),
    terminations and truncations (bool), and ``INFO_SLOTS`` scalar info values (float64) each."""

    def __init__(self, ctx, observation_space: gym.Space, action_space: gym.Space, n: int) -> None:
        self.spaces = (observation_space, action_space)
        self.n = n
        self.memory = (
            create_shared_memory(observation_space, n, ctx),
            create_shared_memory(action_space, n, ctx),
            ctx.RawArray("d", n),
            ctx.RawArray("b", n),
            ctx.RawArray("b", n),
            ctx.RawArray("d", n * INFO_SLOTS),
        )
        self.attach()

    def attach(self) -> None:
        """Numpy views of the arrays (after unpickling in a worker too)."""
        obs, act, rew, term, trunc, info = self.memory
        self.observations = _views(self.spaces[0], obs, self.n)
        self.actions = _views(self.spaces[1], act, self.n)
        self.rewards = np.frombuffer(rew, dtype=np.float64)
        self.terminations = np.frombuffer(term, dtype=np.bool_)
        self.truncations = np.frombuffer(trunc, dtype=np.bool_)
        self.info = np.frombuffer(info, dtype=np.float64).reshape(self.n, INFO_SLOTS)

    def __getstate__(self) -> dict:
        return {"spaces": self.spaces, "n": self.n, "memory": self.memory}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.attach()


class _WorkerEnvs:
    """A worker's block of environments (indices ``first`` .. ``first + len(envs) - 1`` of the
    vector env) and its side of the step protocol (module doc)."""

    def __init__(self, envs: list[gym.Env], first: int, shared: _Shared, mode: AutoresetMode):
        self.envs, self.first, self.shared, self.mode = envs, first, shared, mode
        self.autoreset = [False] * len(envs)
        self.schemas: list[tuple | None] = [None] * len(envs)

    def reset(self, seeds: list, options: dict | None) -> list:
        """Reset each environment; observations to shared memory, infos returned."""
        infos = []
        for k, (env, seed) in enumerate(zip(self.envs, seeds)):
            obs, info = env.reset(seed=seed, options=options)
            _assign(self.shared.observations, self.first + k, obs)
            self.autoreset[k] = False
            infos.append(info)
        return infos

    def step(self) -> dict:
        """Step each environment with its action in shared memory; what did not fit the shared
        layout, by vector index: ``("info", info)`` or ``("schema", (keys, types))``."""
        s, mode, unusual = self.shared, self.mode, {}
        for k, env in enumerate(self.envs):
            i = self.first + k
            if mode == AutoresetMode.NEXT_STEP and self.autoreset[k]:
                obs, info = env.reset()
                reward, terminated, truncated = 0.0, False, False
            else:
                obs, reward, terminated, truncated, info = env.step(s.actions[i])
                if mode == AutoresetMode.SAME_STEP and (terminated or truncated):
                    final_obs, final_info = obs, info
                    obs, reset_info = env.reset()
                    info = {"final_info": final_info, "final_obs": final_obs, **reset_info}
            self.autoreset[k] = terminated or truncated
            _assign(s.observations, i, obs)
            s.rewards[i], s.terminations[i], s.truncations[i] = reward, terminated, truncated
            schema = _info_schema(info)
            if schema is None:
                unusual[i] = ("info", info)
                self.schemas[k] = None  # the main forgets it too: announce it again next time
                continue
            s.info[i, : len(info)] = list(info.values())
            if schema != self.schemas[k]:
                self.schemas[k] = schema
                unusual[i] = ("schema", schema)
        return unusual

    def call(self, name: str, args: tuple, kwargs: dict) -> list:
        results = []
        for env in self.envs:
            attribute = env.get_wrapper_attr(name)
            results.append(attribute(*args, **kwargs) if callable(attribute) else attribute)
        return results

    def set_attr(self, values: list, name: str) -> list:
        for env, value in zip(self.envs, values):
            env.set_wrapper_attr(name, value)
        return [None] * len(self.envs)

    def close(self) -> list:
        for env in self.envs:
            env.close()
        return [None] * len(self.envs)


def _worker(
    env_fns: CloudpickleWrapper, first: int, shared: _Shared, mode, handoff: Handoff, w: int,
    spin_s: float, conn,
) -> None:  # fmt: skip
    """Worker process ``w``: build its environments, report their spaces, serve steps and
    commands (``twin/env/handoff.py``) until ``close`` or until the main process is gone."""
    try:
        envs = [fn() for fn in env_fns.fn]
        conn.send(("ok", _describe(envs[0])))
    except Exception as e:
        conn.send(("error", (repr(e), traceback.format_exc())))
        return
    block = _WorkerEnvs(envs, first, shared, mode)
    handlers = {"reset": block.reset, "call": block.call, "set_attr": block.set_attr,
                "close": block.close}  # fmt: skip
    parent = os.getppid()

    def check_main() -> None:
        if os.getppid() != parent:
            raise SystemExit(0)  # the main process is gone: nobody to step for

    while True:
        if handoff.wait_go(w, spin_s, check_main):
            try:
                unusual = block.step()
                answer = pickle.dumps(unusual) if unusual else None
            except Exception as e:
                answer = b"E" + pickle.dumps((repr(e), traceback.format_exc()))
            handoff.finish_step(w, answer is not None)
            if answer is not None:  # after ``done``: the main reads it, a full pipe cannot block
                conn.send_bytes(answer)
            continue
        message = conn.recv_bytes()
        try:
            command, *args = pickle.loads(message)
            conn.send(("ok", handlers[command](*args)))
            if command == "close":
                return
        except Exception as e:
            conn.send_bytes(b"E" + pickle.dumps((repr(e), traceback.format_exc())))


class TwinVectorEnv(VectorEnv):
    """``len(env_fns)`` environments stepped in ``num_workers`` blocks (module doc).

    env_fns: callables that each make one environment (all with the same spaces);
    num_workers: blocks of environments stepped in parallel (default
    ``min(len(env_fns), os.cpu_count())``), each by its own worker process, except the first
    with ``in_main=True``: the calling process steps it while the other workers step theirs (one
    process fewer to wake and to share the cores with; the calling process is idle during a step
    otherwise). autoreset_mode: gymnasium's ``AutoresetMode``; copy: return copies of the
    observations (else views into shared memory, overwritten by the next step); context: a
    ``multiprocessing`` start method (default: the platform's); spin_s: seconds a waiting side
    polls before it blocks (``twin/env/handoff.py``; 0: block at once); pin: pin worker process
    ``k`` to core ``(k + in_main) % os.cpu_count()`` (for an otherwise idle machine: on a
    loaded one a pinned worker cannot move off a busy core).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        num_workers: int | None = None,
        in_main: bool = False,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        context: str | None = None,
        spin_s: float = SPIN_S,
        pin: bool = False,
    ) -> None:
        n = len(env_fns)
        if n < 1:
            raise ValueError("TwinVectorEnv needs at least one environment function, got none")
        workers = min(n, os.cpu_count() or 1) if num_workers is None else num_workers
        if not (isinstance(workers, int) and 1 <= workers <= n):
            raise ValueError(
                f"num_workers must be an integer from 1 to the number of environments ({n}), "
                f"got {num_workers!r}"
            )
        if not (isinstance(spin_s, int | float) and 0.0 <= spin_s <= MAX_SPIN_S):
            raise ValueError(f"spin_s must be seconds from 0 to {MAX_SPIN_S}, got {spin_s!r}")
        self.num_envs, self.num_workers, self.copy = n, workers, copy
        self.spin_s, self.pin = float(spin_s), bool(pin)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        # blocks as even as they can be: block w holds envs bounds[w] .. bounds[w + 1] - 1
        self._bounds = [round(w * n / workers) for w in range(workers + 1)]
        self._conns, self.processes = [], []
        self._local: _WorkerEnvs | None = None
        self._closed = False
        self._lost: str | None = None
        try:
            self._start(mp.get_context(context), env_fns, in_main, self.pin)
        except Exception:
            self.close()
            raise

    def _start(self, ctx, env_fns, in_main: bool, pin: bool) -> None:
        probe = env_fns[0]()  # the spaces, for the shared memory's layout
        obs_space, act_space = probe.observation_space, probe.action_space
        self.shared = _Shared(ctx, obs_space, act_space, self.num_envs)
        described = []
        if in_main:  # the probe is the first of the main's block
            envs = [probe] + [fn() for fn in env_fns[1 : self._bounds[1]]]
            self._local = _WorkerEnvs(envs, 0, self.shared, self.autoreset_mode)
            described.append(_describe(probe))
        else:
            probe.close()
        self._handoff = Handoff(ctx, self.num_workers - int(in_main))
        for k, w in enumerate(range(int(in_main), self.num_workers)):
            lo, hi = self._bounds[w], self._bounds[w + 1]
            parent, child = ctx.Pipe()
            fns = CloudpickleWrapper(list(env_fns[lo:hi]))
            process = ctx.Process(
                target=_worker,
                args=(fns, lo, self.shared, self.autoreset_mode, self._handoff, k, self.spin_s,
                      child),
                name=f"TwinVectorEnv-{w}",
                daemon=True,
            )  # fmt: skip
            with _single_threaded_libraries():
                process.start()
            child.close()
            if pin:
                os.sched_setaffinity(process.pid, {w % (os.cpu_count() or 1)})
            self._conns.append(parent)
            self.processes.append(process)
        described += self._gather(lambda c: c.recv())
        spaces = {(repr(o), repr(a)) for o, a, _, _ in described}
        if len(spaces) > 1 or spaces != {(repr(obs_space), repr(act_space))}:
            raise ValueError(
                f"TwinVectorEnv: every environment must have the same observation and action "
                f"spaces; got {sorted(spaces)}"
            )
        _, _, metadata, self.render_mode = described[0]
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self.metadata = {**metadata, "autoreset_mode": self.autoreset_mode}
        self._schemas: list[tuple | None] = [None] * self.num_envs

    # -- protocol -------------------------------------------------------------------------
    def _gather(self, receive, workers: list[int] | None = None) -> list:
        """The answer of each worker process (``workers``, default all) in worker order,
        raising the workers' errors."""
        answers, errors = [], []
        for w in range(len(self._conns)) if workers is None else workers:
            conn = self._conns[w]
            try:
                answer = receive(conn)
            except EOFError:
                errors.append(f"worker process {w} exited (pid {self.processes[w].pid})")
                continue
            if isinstance(answer, bytes) and answer[:1] == b"E":
                answer = ("error", pickle.loads(answer[1:]))
            if isinstance(answer, tuple) and answer[0] == "error":
                errors.append(f"worker process {w}: {answer[1][0]}\n{answer[1][1]}")
            else:
                answers.append(answer[1] if isinstance(answer, tuple) else answer)
        if errors:
            raise VectorWorkerError("\n".join(errors))
        return answers

    def _command(self, command: str, per_env: list | None = None, *args) -> list:
        """Run ``command`` on every block (with its part of ``per_env``); results per env."""
        self._check_open()
        first = int(self._local is not None)
        for k, (w, conn) in enumerate(enumerate(self._conns, start=first)):
            block = [] if per_env is None else [per_env[self._bounds[w] : self._bounds[w + 1]]]
            conn.send_bytes(pickle.dumps((command, *block, *args)))
            self._handoff.send_command(k)
        results = []
        if self._local is not None:
            block = [] if per_env is None else [per_env[: self._bounds[1]]]
            results = getattr(self._local, command)(*block, *args)
        return results + [x for answer in self._gather(_recv_object) for x in answer]

    def _wait_workers(self) -> list:
        """The worker processes' answers to the step just started (what did not fit the shared
        layout). Interrupted (e.g. ``KeyboardInterrupt``), the env takes no more steps: the
        workers' answers would be read as the next step's."""
        # the main polls only once it has stepped its own block: else a third process on the cores
        spin_s = self.spin_s if self._local is not None else 0.0
        try:
            answering = self._handoff.wait_step(spin_s, self._check_workers)
            return self._gather(_recv_object, answering)
        except VectorWorkerError:
            raise
        except BaseException:
            self._lost = self._lost or "the main process stopped waiting in the middle of a step"
            raise

    def _check_workers(self) -> None:
        """Raise if a worker process has exited (called while the main waits for a step)."""
        gone = [f"worker process {w} exited (pid {p.pid}, exit code {p.exitcode})"
                for w, p in enumerate(self.processes) if not p.is_alive()]  # fmt: skip
        if gone:
            self._lost = "\n".join(gone)  # the step protocol's state is lost: no more steps
            raise VectorWorkerError(self._lost)

    def _check_open(self) -> None:
        if self._closed:
            raise gym.error.ClosedEnvironmentError("this TwinVectorEnv is closed")
        if self._lost is not None:
            raise VectorWorkerError(
                f"a worker process was lost; close this vector env:\n{self._lost}"
            )

    # -- VectorEnv API --------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict | None = None):
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(
                    f"reset seed: one per environment ({self.num_envs}) expected, got {len(seeds)}"
                )
        infos = self._command("reset", seeds, options)
        self._schemas = [None] * self.num_envs
        info: dict = {}
        for i, env_info in enumerate(infos):
            info = self._add_info(info, env_info, i)
        return self._observations(), info

    def step(self, actions):
        self._check_open()
        s = self.shared
        if isinstance(s.actions, np.ndarray):
            np.copyto(s.actions, np.asarray(actions, s.actions.dtype).reshape(s.actions.shape))
        else:
            for i, action in enumerate(iterate(self.action_space, actions)):
                _assign(s.actions, i, action)
        self._handoff.start_step()
        unusual, local_error = {}, None
        try:
            if self._local is not None:
                unusual = self._local.step()
        except Exception as e:  # raised once the workers have answered: the next step is in step
            local_error = e
        for answer in self._wait_workers():
            unusual.update(answer)
        if local_error is not None:
            raise local_error
        return (
            self._observations(),
            s.rewards.copy(),
            s.terminations.copy(),
            s.truncations.copy(),
            self._infos(unusual),
        )

    def _observations(self):
        obs = self.shared.observations
        if not self.copy:
            return obs
        return obs.copy() if isinstance(obs, np.ndarray) else copy.deepcopy(obs)

    def _infos(self, unusual: dict) -> dict:
        """The vector info (gymnasium's layout) from the shared values and the pickled rest."""
        for i, (kind, value) in unusual.items():
            self._schemas[i] = value if kind == "schema" else None
        schemas = self._schemas
        values = self.shared.info
        if not unusual and schemas[0] is not None and schemas.count(schemas[0]) == self.num_envs:
            keys, types = schemas[0]  # the usual step: one layout for all, columns as arrays
            info: dict = {}
            mask = np.ones(self.num_envs, dtype=np.bool_)
            for j, (key, kind) in enumerate(zip(keys, types)):
                info[key] = values[:, j].astype(kind)  # gymnasium's dtype: that of the type
                info["_" + key] = mask.copy()
            return info
        info = {}
        for i, schema in enumerate(schemas):
            if schema is None:
                env_info = unusual[i][1]
            else:
                row = values[i, : len(schema[0])].tolist()
                env_info = {k: kind(v) for k, kind, v in zip(*schema, row)}
            info = self._add_info(info, env_info, i)
        return info

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``name`` of every environment, called with the arguments if it is callable."""
        return tuple(self._command("call", None, name, args, kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | object) -> None:
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                f"set_attr {name!r}: one value per environment ({self.num_envs}) expected, "
                f"got {len(values)}"
            )
        self._command("set_attr", list(values), name)

    def render(self) -> tuple[Any, ...] | None:
        return self.call("render")

    def close_extras(self, **kwargs: Any) -> None:
        if self._closed:
            return
        self._closed = True
        for k, conn in enumerate(self._conns):
            with contextlib.suppress(OSError):
                conn.send_bytes(pickle.dumps(("close",)))
                self._handoff.send_command(k)
        if self._local is not None:
            self._local.close()
        for process in self.processes:
            process.join(CLOSE_TIMEOUT_S)
            if process.is_alive():
                process.terminate()
                process.join(CLOSE_TIMEOUT_S)
        for conn in self._conns:
            conn.close()


@contextlib.contextmanager
def _single_threaded_libraries():
    """``_THREAD_VARIABLES`` set to 1 (where the user set none) while a worker starts."""
    unset = [name for name in _THREAD_VARIABLES if name not in os.environ]
    os.environ.update(dict.fromkeys(unset, "1"))
    try:
        yield
    finally:
        for name in unset:
            os.environ.pop(name, None)


def _describe(env: gym.Env) -> tuple:
    return env.observation_space, env.action_space, env.metadata, env.render_mode


def _recv_object(conn):
    data = conn.recv_bytes()
    return data if data[:1] == b"E" else pickle.loads(data)


def make_vector_env(env_id: str, num_envs: int, **kwargs: Any) -> TwinVectorEnv:
    """The ``vector_entry_point`` of the twin ids (``twin/env/registration.py``): ``num_envs``
    of ``gymnasium.make(env_id, **kwargs)`` in a ``TwinVectorEnv``. Its own keywords
    (``_OPTIONS``) are taken out of ``kwargs``."""
    options = {
        key: kwargs.pop(key) for key in _OPTIONS if key in kwargs
    }  # fmt: skip
    env_fn = _EnvFn(env_id, kwargs)
    return TwinVectorEnv([env_fn] * num_envs, **options)


class _EnvFn:
    """``gymnasium.make(env_id, **kwargs)`` as a picklable callable (any start method)."""

    def __init__(self, env_id: str, kwargs: dict) -> None:
        self.env_id, self.kwargs = env_id, dict(kwargs)

    def __call__(self) -> gym.Env:
        # (in a spawned worker, unpickling this imports the package ``twin``: the ids register)
        return gym.make(self.env_id, **self.kwargs)
