"""The dynamics of a model as code that runs: ``code_for(model)`` gives its ``DynamicsCode``,
the generated source of ``codegen`` executed on Python floats and numpy arrays, or the kernels
``compiled`` makes of it with numba; built once per model and kept with it."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from twin.dynamics import codegen, threads
from twin.dynamics import compiled as machine
from twin.dynamics.model import RigidBodyModel


def code_for(model: RigidBodyModel) -> DynamicsCode:
    """``model``'s ``DynamicsCode``, built on first use (about 0.1 s; with numba, loading its
    compiled kernels about a second, and compiling them tens of seconds the first time on a
    machine) and kept with the (frozen) model."""
    code = model.__dict__.get("_code")
    if code is None:
        code = DynamicsCode(model)
        object.__setattr__(model, "_code", code)
    return code


def _stack(values: list) -> np.ndarray:
    return np.stack(np.broadcast_arrays(*values), axis=-1)


def _square_one(values: list) -> np.ndarray:
    n = math.isqrt(len(values))
    return np.array(values).reshape(n, n)


def _square_batch(values: list) -> np.ndarray:
    n = math.isqrt(len(values))
    return _stack(values).reshape(-1, n, n)


class DynamicsCode:
    """The generated dynamics of ``model`` (inputs not checked here):

    * ``tau(q, qd, qdd, gravity)``: one state (n,) each (rad, rad/s, rad/s^2; gravity (3,)
      m/s^2) -> (n,) N m, or None unless every input is finite; ``tau_batch`` the same for
      (N, n) arrays -> (N, n) (or None);
    * ``mass(q)`` -> (n, n) kg m^2 (or None), ``mass_batch`` for (N, n) -> (N, n, n) (or None).

    With numba (``compiled.enabled``, or ``compiled=True``) these run the compiled kernels of
    ``twin.dynamics.compiled``; otherwise the generated Python source on floats (one state) or
    on numpy arrays (batches). ``self.compiled`` says which.
    """

    def __init__(self, model: RigidBodyModel, compiled: bool | None = None) -> None:
        self.n = model.n
        self.compiled = machine.enabled() if compiled is None else compiled
        if self.compiled:
            self._kernels = machine.kernels(model)
            k = self._kernels
            self._tau_one, self._mass_one, self._tau_many, self._mass_many = (
                _entry(k.tau_one),
                _entry(k.mass_one),
                _entry(k.tau_many),
                _entry(k.mass_many),
            )
            self._parameters = model.parameters().ravel()
            self._packed: dict[bytes, np.ndarray] = {}
            self._last: tuple = (None, None)
            self.tau, self.mass = self._tau_compiled, self._mass_compiled
            self.tau_batch, self.mass_batch = self._tau_batch_compiled, self._mass_batch_compiled
            return
        self.source = codegen.source(model)
        code = compile(self.source, "<twin.dynamics generated>", "exec")
        scalar = {"_cos": math.cos, "_sin": math.sin, "_out": np.array, "_square": _square_one}
        vector = {"_cos": np.cos, "_sin": np.sin, "_out": _stack, "_square": _square_batch}
        exec(code, scalar)
        exec(code, vector)
        self._tau, self._tau_batch = scalar["tau"], vector["tau"]
        self._mass, self._mass_batch = scalar["mass"], vector["mass"]
        self.tau, self.mass = self._tau_python, self._mass_python
        self.tau_batch, self.mass_batch = self._tau_batch_python, self._mass_batch_python

    # ------------------------------------------------------------ generated Python
    def _tau_python(self, q, qd, qdd, gravity) -> np.ndarray | None:
        lists = _finite_lists((q, qd, qdd), self.n)
        return None if lists is None else self._tau(*lists, *gravity.tolist())

    def _mass_python(self, q) -> np.ndarray | None:
        lists = _finite_lists((q,), self.n)
        return None if lists is None else self._mass(*lists)

    def _tau_batch_python(self, q, qd, qdd, gravity) -> np.ndarray | None:
        return _finite(_chunked(lambda *x: self._tau_batch(*x, *gravity), q, qd, qdd), q, qd, qdd)

    def _mass_batch_python(self, q) -> np.ndarray | None:
        return _finite(_chunked(self._mass_batch, q), q)

    # ------------------------------------------------------------ compiled kernels
    def _tau_compiled(self, q, qd, qdd, gravity) -> np.ndarray | None:
        if not (
            type(q) is _ND
            and type(qd) is _ND
            and type(qdd) is _ND
            and _F64 is q.dtype is qd.dtype is qdd.dtype
            and q.ndim == qd.ndim == qdd.ndim == 1
        ):
            q, qd, qdd = _rows(q), _rows(qd), _rows(qdd)
            if not q.ndim == qd.ndim == qdd.ndim == 1:
                return None
        out = np.empty(self.n)  # the kernel checks the lengths and the values
        return out if self._tau_one(q, qd, qdd, self._par(gravity), out) else None

    def _mass_compiled(self, q) -> np.ndarray | None:
        if not (type(q) is _ND and q.dtype is _F64 and q.ndim == 1):
            q = _rows(q)
            if q.ndim != 1:
                return None
        out = np.empty((self.n, self.n))
        return out if self._mass_one(q, self._par(_NO_GRAVITY), out) else None

    def _tau_batch_compiled(self, q, qd, qdd, gravity) -> np.ndarray | None:
        q, qd, qdd = _states(q), _states(qd), _states(qdd)
        out = np.empty((len(q), self.n))
        return out if _run(self._tau_many, (q, qd, qdd), self._par(gravity), out) else None

    def _mass_batch_compiled(self, q) -> np.ndarray | None:
        q = _states(q)
        out = np.empty((len(q), self.n * self.n))
        if not _run(self._mass_many, (q,), self._par(_NO_GRAVITY), out):
            return None
        return out.reshape(-1, self.n, self.n)

    def _par(self, gravity) -> np.ndarray:
        """The kernels' ``par``: parameters then ``gravity`` (3,), one array per gravity (the
        last read-only gravity array also by identity: ``ArmDynamics`` keeps its own)."""
        if gravity is self._last[0]:
            return self._last[1]
        key = np.asarray(gravity, float).tobytes()
        par = self._packed.get(key)
        if par is None:
            par = self._packed[key] = np.concatenate([self._parameters, np.frombuffer(key)])
        if isinstance(gravity, np.ndarray) and not gravity.flags.writeable:
            self._last = (gravity, par)
        return par


_NO_GRAVITY = np.zeros(3)


_ND = np.ndarray
_F64 = np.dtype(np.float64)
#: Batches of at least this many states are split over the idle cores (``threads.split``:
#: chunks handed out to whichever thread is free; ``threads.usable``: no split on a loaded
#: machine); fewer run on the calling thread. The split's fixed cost on an idle core is waking a
#: worker (microseconds to tens of them) against about 50 us of work per 1000 states on one
#: thread. ``bench_dynamics`` measures the split against one thread per batch size: on the idle
#: 2-core machine it paid from 8192 states (inverse dynamics 1.23-1.46x one thread at 8192-20000;
#: 0.45-1.05x at 512-4096, where the worker's wake-up and the slower thread dominate).
PARALLEL_STATES = 8192
#: Threads for the split batches (the cores of this process; ``TWIN_DYNAMICS_THREADS``).
THREADS = threads.cores()
#: Whether splits follow the load (``threads.usable``); off: always ``THREADS`` (benchmarks).
FOLLOW_LOAD = True


def threads_for(states: int) -> int:
    """The threads a batch of ``states`` runs on now."""
    if states < PARALLEL_STATES or THREADS < 2:
        return 1
    return threads.usable(THREADS) if FOLLOW_LOAD else THREADS


def _entry(dispatcher):
    """The compiled function of a kernel's one signature (``compiled.SIGNATURES``), called
    without numba's type dispatch (the callers pass exactly those types)."""
    return dispatcher.overloads[dispatcher.signatures[0]].entry_point


def _run(kernel, inputs: tuple, par: np.ndarray, out: np.ndarray) -> bool:
    """``kernel(*inputs, par, out)`` on ``threads_for(len(out))`` threads: whether every input
    was finite."""
    states, used = len(out), threads_for(len(out))
    if used == 1:
        return kernel(*inputs, par, out)
    # at least two chunks a thread (whole blocks), so that no thread gets the one short chunk
    share = -(-states // (2 * used * machine.BLOCK)) * machine.BLOCK
    return all(threads.split(kernel, inputs, out, (par,), used, min(threads.CHUNK, share)))


def _finite(out: np.ndarray, *inputs: np.ndarray) -> np.ndarray | None:
    """``out``, or None if an input is not finite (looked at only when ``out`` is not)."""
    if math.isfinite(out.sum()) or all(np.isfinite(a).all() for a in inputs):
        return out
    return None


def _states(a: np.ndarray) -> np.ndarray:
    """(N, n) as the C-contiguous float64 array the batched kernels take (no copy if it is)."""
    return np.ascontiguousarray(a, dtype=float)


def _finite_lists(arrays: tuple, n: int) -> list[list[float]] | None:
    """One state's joint arrays as lists of n finite floats, or None."""
    if any(np.ndim(a) != 1 for a in arrays):
        return None
    out = []
    for a in arrays:
        values = np.asarray(a, float).tolist()
        if len(values) != n or not all(map(math.isfinite, values)):
            return None
        out.append(values)
    return out


def _rows(a) -> np.ndarray:
    """``a`` as a float64 array (any strides, read-only or not: the one-state kernels take
    them all); an empty one if it is not numbers (the caller then refuses it with its message)."""
    try:
        return np.asarray(a, dtype=float)
    except (TypeError, ValueError):
        return np.zeros(0)


#: States per pass of a batch: the generated code's few hundred temporaries then stay in the
#: cache (about 2x faster than one pass over 20000 states, ``bench_dynamics``).
CHUNK = 1024


def _chunked(fn: Callable, *arrays: np.ndarray) -> np.ndarray:
    """``fn`` on the transposed, contiguous (n, chunk) blocks of (N, n) arrays, concatenated."""
    n = arrays[0].shape[0]
    parts = [
        fn(*(np.ascontiguousarray(a[k : k + CHUNK].T) for a in arrays)) for k in range(0, n, CHUNK)
    ]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
