"""``ArmDynamics``: the rigid-body dynamics of an ``ArmModel``, single configurations or batches.

Every method takes joint arrays (n,) or (N, n) in ``model.joint_names`` order (rad, rad/s,
rad/s^2, N m) and returns the same leading shape; gravity is (3,) m/s^2 in the base frame
(default ``GRAVITY``, the sim's). No joint friction or damping is modelled. The generated code
(``codegen``) runs compiled by numba when it is installed (``compiled``: about a microsecond a
call), else as Python on floats (one state: tens of microseconds) or numpy arrays (batches).
"""

from __future__ import annotations

import functools

import numpy as np

from twin.dynamics import derived, rnea
from twin.dynamics.code import code_for
from twin.dynamics.model import GRAVITY, RigidBodyModel
from twin.kinematics.validate import as_configurations


class ArmDynamics:
    """``M(q) qdd + C(q, qd) qd + g(q) = tau`` of ``arm`` (an ``ArmModel``), optionally with a
    payload (``with_payload``)."""

    def __init__(self, arm, bodies: RigidBodyModel | None = None, gravity=GRAVITY) -> None:
        self.arm = arm
        self.bodies = _urdf_bodies(arm) if bodies is None else bodies
        g = np.asarray(gravity, float)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"gravity must be 3 finite numbers (m/s^2, base frame), got {gravity}")
        self.gravity = g.copy()
        self.gravity.flags.writeable = False  # fixed: the compiled code keys on it
        self.n = arm.n_joints
        self._code = None  # code_for(self.bodies), on first use

    @classmethod
    def default(cls) -> ArmDynamics:
        """Dynamics of the shipped arm (``ArmModel.default()``)."""
        from twin.kinematics import ArmModel

        return cls(ArmModel.default())

    def with_payload(
        self, mass: float, com=(0.0, 0.0, 0.0), inertia=None, link: str = "flange"
    ) -> ArmDynamics:
        """The arm carrying a rigid payload: ``mass`` kg, ``com`` (3,) m and ``inertia``
        (3, 3) kg m^2 about its centre of mass (default: a point mass), ``link`` frame."""
        return ArmDynamics(
            self.arm, self.bodies.with_payload(mass, com, inertia, link), self.gravity
        )

    # ------------------------------------------------------------------ the equations
    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """Joint torques (n,) or (N, n) N m (recursive Newton-Euler)."""
        return self._torques(q, qd, qdd, self.gravity)

    def mass_matrix(self, q) -> np.ndarray:
        """``M(q)`` (n, n) or (N, n, n) kg m^2."""
        code = self._code or self._load_code()
        out = code.mass(q)  # None unless one state of n finite numbers
        if out is not None:
            return out
        if np.ndim(q) == 1:
            self._refuse((q,))
        return self._batch(code.mass_batch, (q,))

    def gravity_torques(self, q) -> np.ndarray:
        """``g(q)`` (n,) or (N, n) N m."""
        zero = np.zeros_like(np.asarray(q, float))
        return self._torques(q, zero, zero, self.gravity)

    def coriolis_torques(self, q, qd) -> np.ndarray:
        """``C(q, qd) qd`` (n,) or (N, n) N m."""
        return self._torques(q, qd, np.zeros_like(np.asarray(q, float)), np.zeros(3))

    def coriolis_matrix(self, q, qd) -> np.ndarray:
        """Christoffel ``C(q, qd)`` (n, n) or (N, n, n); ``dM/dt - 2 C`` is skew-symmetric."""
        return self._call(derived.coriolis_matrix, (q, qd))

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """Joint accelerations ``qdd`` (n,) or (N, n) rad/s^2 under joint torques ``tau``."""
        if np.ndim(q) == 1:
            bias = self.inverse_dynamics(q, qd, np.zeros_like(np.asarray(q, float)))
            return np.linalg.solve(self.mass_matrix(q), np.asarray(tau, float) - bias)
        return self._call(derived.forward_dynamics, (q, qd, tau), self.gravity)

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """``Y`` (n, 10 n) or (N, n, 10 n): ``inverse_dynamics = Y @ parameters()``."""
        return self._call(derived.regressor, (q, qd, qdd), self.gravity)

    def parameters(self) -> np.ndarray:
        """(10 n,) body inertial parameters, ``model.PARAMETER_NAMES`` per body."""
        return self.bodies.parameters().ravel()

    def energy(self, q, qd) -> np.ndarray:
        """Kinetic plus potential energy, J: () or (N,)."""
        qs = self._inputs((q, qd))
        e = rnea.kinetic_energy(self.bodies, *qs) + rnea.potential_energy(
            self.bodies, qs[0], self.gravity
        )
        return e[0] if np.ndim(q) == 1 else e

    # ------------------------------------------------------------------ plumbing
    def _inputs(self, arrays: tuple) -> list[np.ndarray]:
        names = ("q", "qd", "qdd/tau")
        out = [as_configurations(a, self.n, names[k]) for k, a in enumerate(arrays)]
        shapes = {a.shape for a in out}
        if len(shapes) != 1:
            raise ValueError(f"joint arrays must share one shape, got {[a.shape for a in out]}")
        return [np.atleast_2d(a) for a in out]

    def _refuse(self, arrays: tuple) -> None:
        """Raise the message of ``_inputs`` for a single state the generated code refused (not
        n finite numbers each)."""
        self._inputs(arrays)
        raise ValueError(f"expected {self.n} finite joint values per array, got {arrays}")

    def _load_code(self):
        self._code = code_for(self.bodies)
        return self._code

    def _batch(self, fn, arrays: tuple, *extra) -> np.ndarray:
        """``fn`` on the (N, n) arrays. Shapes are checked first; values by ``fn`` (None: an
        input is not finite; the compiled kernels look at each input as they read it), and
        only then are the inputs inspected (``_inputs`` raises, naming the array and the
        index)."""
        try:
            xs = [np.asarray(a, dtype=float) for a in arrays]
        except (TypeError, ValueError):
            xs = self._inputs(arrays)  # raises, naming the array
        shape = xs[0].shape
        if len(shape) != 2 or shape[1] != self.n or any(a.shape != shape for a in xs):
            xs = self._inputs(arrays)  # raises, or the (1, n) form of (n,) arrays
        out = fn(*xs, *extra)
        if out is None:
            self._inputs(arrays)  # raises on the non-finite input
            raise ValueError(f"joint arrays must be finite, got {arrays}")
        return out

    def _torques(self, q, qd, qdd, gravity: np.ndarray) -> np.ndarray:
        code = self._code or self._load_code()
        out = code.tau(q, qd, qdd, gravity)  # None unless one state of n finite numbers each
        if out is not None:
            return out
        if np.ndim(q) == 1 and np.ndim(qd) == 1 and np.ndim(qdd) == 1:
            self._refuse((q, qd, qdd))
        return self._batch(code.tau_batch, (q, qd, qdd), gravity)

    def _call(self, fn, arrays: tuple, *extra) -> np.ndarray:
        out = fn(self.bodies, *self._inputs(arrays), *extra)
        return out[0] if np.ndim(arrays[0]) == 1 else out


@functools.lru_cache(maxsize=8)
def _urdf_bodies(arm) -> RigidBodyModel:
    """The arm's bodies from its URDF, shared (with their generated code) by every
    ``ArmDynamics`` of that arm."""
    return RigidBodyModel(arm)
