"""The dynamics of a model as code that runs: ``code_for(model)`` gives its ``DynamicsCode``,
the generated source of ``codegen`` executed on Python floats and numpy arrays, or the kernels
``compiled`` makes of it with numba; built once per model and kept with it."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from twin.dynamics import codegen
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
      (N, n) arrays -> (N, n);
    * ``mass(q)`` -> (n, n) kg m^2 (or None), ``mass_batch`` for (N, n) -> (N, n, n).

    With numba (``compiled.enabled``, or ``compiled=True``) these run the compiled kernels of
    ``twin.dynamics.compiled``; otherwise the generated Python source on floats (one state) or
    on numpy arrays (batches). ``self.compiled`` says which.
    """

    def __init__(self, model: RigidBodyModel, compiled: bool | None = None) -> None:
        self.n = model.n
        self.compiled = machine.enabled() if compiled is None else compiled
        if self.compiled:
            self._kernels = machine.kernels(model)
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

    def _tau_batch_python(self, q, qd, qdd, gravity) -> np.ndarray:
        return _chunked(lambda *x: self._tau_batch(*x, *gravity), q, qd, qdd)

    def _mass_batch_python(self, q) -> np.ndarray:
        return _chunked(self._mass_batch, q)

    # ------------------------------------------------------------ compiled kernels
    def _tau_compiled(self, q, qd, qdd, gravity) -> np.ndarray | None:
        q, qd, qdd = _rows(q), _rows(qd), _rows(qdd)
        if not q.shape == qd.shape == qdd.shape == (self.n,):
            return None
        out = np.empty(self.n)
        return out if self._kernels.tau_one(q, qd, qdd, self._par(gravity), out) else None

    def _mass_compiled(self, q) -> np.ndarray | None:
        q = _rows(q)
        if q.shape != (self.n,):
            return None
        out = np.empty((self.n, self.n))
        return out if self._kernels.mass_one(q, self._par(_NO_GRAVITY), out) else None

    def _tau_batch_compiled(self, q, qd, qdd, gravity) -> np.ndarray:
        out = np.empty((self.n, len(q)))
        self._kernels.tau_many(*map(_columns, (q, qd, qdd)), self._par(gravity), out)
        return np.ascontiguousarray(out.T)

    def _mass_batch_compiled(self, q) -> np.ndarray:
        out = np.empty((len(q), self.n * self.n))
        self._kernels.mass_many(_columns(q), self._par(_NO_GRAVITY), out)
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


def _columns(a: np.ndarray) -> np.ndarray:
    """(N, n) -> the (n, N) C-contiguous float64 copy the batched kernels take."""
    return np.ascontiguousarray(np.asarray(a, float).T)


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
    """``a`` as a writable C-contiguous float64 array: the one array type the kernels are
    compiled for (a read-only or strided array would be another type, another compile)."""
    a = np.ascontiguousarray(a, float)
    return a if a.flags.writeable else a.copy()


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
