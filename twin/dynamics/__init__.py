"""Rigid-body dynamics of the arm from its URDF inertials (single states and batches).

Modules: ``model`` (the moving bodies, payloads), ``codegen`` (generated inverse dynamics and
mass matrix: what ``ArmDynamics`` runs), ``compiled`` (that code compiled by numba when it is
installed, ``pip install 'twin[fast]'``; else it runs as Python and numpy), ``rnea``
(vectorised reference kernels), ``derived``
(gravity, Coriolis, forward dynamics, regressor), ``observer`` (generalized-momentum observer of
external joint torques).

from twin.dynamics import ArmDynamics
dyn = ArmDynamics.default()                 # the shipped arm; .with_payload(0.5, com, link=...)
tau = dyn.inverse_dynamics(q, qd, qdd)      # (6,) or (N, 6) N m, recursive Newton-Euler
M = dyn.mass_matrix(q)                      # (6, 6) or (N, 6, 6) kg m^2, composite rigid bodies
qdd = dyn.forward_dynamics(q, qd, tau)
Y = dyn.regressor(q, qd, qdd)               # tau = Y @ dyn.parameters()
"""

from twin.dynamics.arm import ArmDynamics
from twin.dynamics.model import GRAVITY, PARAMETER_NAMES, BodyInertial, RigidBodyModel

__all__ = ["GRAVITY", "PARAMETER_NAMES", "ArmDynamics", "BodyInertial", "RigidBodyModel"]
