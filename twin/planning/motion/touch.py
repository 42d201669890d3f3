"""Touch motions: the linear approach at the end of a touch path and the linear retract at the
start of a path leaving a touch (the reference's ``PathRequest.Type.touch``).

Two validity checks are used (each a ``curve.MotionChecker``, or a plain callable
``free(q (N, n)) -> (N,) bool`` sampled every ``CALLABLE_STEP`` rad):

* ``strict``: the ordinary collision model (everything rigid);
* ``compliant``: contact allowed for the tool's compliant boxes and for the carried object up to
  the compression distance; everything else still checked (``touch_checker`` builds it from a
  planner).

Approach (``approach``): from the touch configuration ``q_touch`` the TCP backs off by
``distance`` m against the tool direction (``Tcp.tool_direction`` in the TCP frame, turned into
the base frame at ``q_touch``); the pre-touch configuration (posture of ``q_touch``) must be free
under ``strict``; the straight line from it to ``q_touch`` (``linear.linear_motion``) must be free
under ``compliant``.

Retract (``retract``): from ``q_touch`` the TCP moves ``distance`` m along ``direction`` (base
frame) when given; otherwise the direction is derived from the geometry around the tool: the
candidates are the reverse tool direction, then directions tilted from it by 30, 45, 60 and 90
degrees towards 8 azimuths; for each, the smallest distance along it (in steps of
``distance / RETRACT_PROBES``) where the configuration is free under ``strict`` is found, and the
candidate whose line is feasible (compliant-free up to ``distance``, strictly free at the end)
with the smallest such distance wins (ties: the earlier candidate). The retract line must be
free under ``compliant`` and its end free under ``strict``.

The conservative model calls a configuration blocked within its margin of an obstacle
(``Planner.margins()``), so contact at the end of a touch is only accepted when the compliant
boxes are longer, and the compression distance larger, than that margin.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from twin.planning import _validate as v
from twin.planning.errors import PlanningInputError
from twin.planning.motion.curve import MotionChecker, curve_free
from twin.planning.motion.linear import (
    CartesianPath,
    LinearMotion,
    linear_motion,
    resolve_flange_T_tcp,
)

APPROACH_DISTANCE = 0.05  # m, default approach length
RETRACT_DISTANCE = 0.05  # m, default retract length
RETRACT_PROBES = 10  # distances probed along each candidate retract direction
CLEARING_PROBES = 4  # longer approach distances tried when the pre-touch configuration is blocked
TILTS_DEG = (30.0, 45.0, 60.0, 90.0)
AZIMUTHS = 8
CALLABLE_STEP = 0.005  # rad, sample spacing used with a plain validity callable


class TouchFailure(enum.Enum):
    """Why a touch approach or retract was refused."""

    LINEAR = "linear"  # the straight line cannot be followed (singularity, limits, reach)
    BLOCKED_CLEAR = "blocked_clear"  # the pre-touch / retracted configuration is blocked
    BLOCKED_CONTACT = "blocked_contact"  # the line hits more than the allowed contact
    NO_DIRECTION = "no_direction"  # no candidate retract direction is feasible


@dataclass(frozen=True)
class TouchMotion:
    """An approach (configurations from the pre-touch configuration to ``q_touch``) or a retract
    (from ``q_touch`` out): ``motion`` the linear motion, ``direction`` (3,) unit, base frame,
    the TCP's direction of travel; ``distance`` m. Truthy when ``error`` is None."""

    error: TouchFailure | None
    motion: LinearMotion | None
    direction: np.ndarray
    distance: float
    reason: str = ""

    def __bool__(self) -> bool:
        return self.error is None

    @property
    def configurations(self) -> np.ndarray:
        """(K, n) rad along the line (empty on failure)."""
        return np.zeros((0, 0)) if self.motion is None else self.motion.configurations


class _CallableChecker:
    """A validity callable as a ``MotionChecker``: samples every ``step`` rad (max-norm)."""

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray], step: float) -> None:
        self.fn, self.step = fn, step

    def free(self, q: np.ndarray) -> np.ndarray:
        return np.asarray(self.fn(np.atleast_2d(q)), dtype=bool)

    def steps(self, qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
        d = np.max(np.abs(np.atleast_2d(qb) - np.atleast_2d(qa)), axis=1)
        return np.maximum(1, np.ceil(d / self.step).astype(int))


def as_checker(check: object) -> MotionChecker:
    """``check`` itself if it has ``free`` and ``steps``, else a callable wrapped (see module)."""
    if hasattr(check, "free") and hasattr(check, "steps"):
        return check  # type: ignore[return-value]
    if callable(check):
        return _CallableChecker(check, CALLABLE_STEP)
    raise PlanningInputError(
        f"validity check: expected a checker (free, steps) or a callable, got {type(check).__name__}"
    )


def _unit(vec: object, what: str) -> np.ndarray:
    u = v.vector3(vec, what, nonzero=True)
    return u / np.linalg.norm(u)


def tool_direction_in_base(
    model, q: np.ndarray, flange_T_tcp: np.ndarray, tool_dir: object
) -> np.ndarray:
    """The tool direction (3,) unit, base frame, at configuration q."""
    r = (model.fk(q, "flange") @ flange_T_tcp)[:3, :3]
    return r @ _unit(tool_dir, "tool direction")


def _line(model, q_from, direction, distance, f_T_t):
    start = model.fk(q_from, "flange") @ f_T_t
    goal = start.copy()
    goal[:3, 3] += distance * direction
    return linear_motion(model, q_from, CartesianPath.line(start, goal), f_T_t)


def approach(
    model,
    q_touch: object,
    strict: object,
    compliant: object,
    *,
    tool_direction: object = (0.0, 0.0, 1.0),
    flange_T_tcp: object | None = None,
    distance: float = APPROACH_DISTANCE,
) -> TouchMotion:
    """The approach ending at ``q_touch`` (n,) rad (see the module doc)."""
    q = v.configuration(q_touch, "q_touch", len(model.joint_names))
    f_T_t = resolve_flange_T_tcp(model, flange_T_tcp)
    d = v.positive_scalar(distance, "approach distance")
    strict, compliant = as_checker(strict), as_checker(compliant)
    u = tool_direction_in_base(model, q, f_T_t, tool_direction)
    # Solve the line backwards (from the touch out), then reverse it: the pre-touch
    # configuration keeps the posture and joint wraps of q_touch.
    back = _line(model, q, -u, d, f_T_t)
    if not back:
        return TouchMotion(TouchFailure.LINEAR, None, u, d, back.reason)
    m = LinearMotion(
        None,
        back.configurations[::-1].copy(),
        back.path_s[-1] - back.path_s[::-1],
        back.exit[::-1].copy(),
        back.entry[::-1].copy(),
        back.max_deviation_m,
        back.min_singular_value,
    )
    if not bool(strict.free(m.configurations[:1])[0]):
        return TouchMotion(
            TouchFailure.BLOCKED_CLEAR, m, u, d, "the pre-touch configuration is blocked"
        )
    if not curve_free(m.curve(), compliant):
        return TouchMotion(
            TouchFailure.BLOCKED_CONTACT, m, u, d, "the approach hits more than the allowed contact"
        )
    return TouchMotion(None, m, u, d)


def clearing_approach(
    model,
    q_touch: object,
    strict: object,
    compliant: object,
    *,
    distance: float,
    longest: float,
    **kw,
) -> TouchMotion:
    """``approach`` over ``distance`` m; when its pre-touch configuration is blocked (the touched
    object's own geometry within the collision model's margin of the tool, since the approach is
    shorter than that margin), over the first of ``CLEARING_PROBES`` longer distances up to
    ``longest`` m whose approach works (the touch target's own geometry must not block its
    approach). The returned ``distance`` is the one used."""
    t = approach(model, q_touch, strict, compliant, distance=distance, **kw)
    if t or t.error is not TouchFailure.BLOCKED_CLEAR or longest <= distance:
        return t
    for d in np.linspace(distance, longest, CLEARING_PROBES + 1)[1:].tolist():
        longer = approach(model, q_touch, strict, compliant, distance=d, **kw)
        if longer or longer.error is not TouchFailure.BLOCKED_CLEAR:
            return longer
    return t


def retract_candidates(reverse_tool: np.ndarray) -> np.ndarray:
    """Unit directions (C, 3), base frame: ``reverse_tool`` first, then tilted (module doc)."""
    w = reverse_tool / np.linalg.norm(reverse_tool)
    helper = np.eye(3)[int(np.argmin(np.abs(w)))]
    a = np.cross(w, helper)
    a /= np.linalg.norm(a)
    b = np.cross(w, a)
    out = [w]
    for tilt in np.radians(TILTS_DEG):
        for k in range(AZIMUTHS):
            phi = 2.0 * np.pi * k / AZIMUTHS
            out.append(np.cos(tilt) * w + np.sin(tilt) * (np.cos(phi) * a + np.sin(phi) * b))
    return np.array(out)


def retract(
    model,
    q_touch: object,
    strict: object,
    compliant: object,
    *,
    direction: object | None = None,
    tool_direction: object = (0.0, 0.0, 1.0),
    flange_T_tcp: object | None = None,
    distance: float = RETRACT_DISTANCE,
) -> TouchMotion:
    """The retract leaving ``q_touch`` (n,) rad (see the module doc); ``direction`` (3,) base
    frame, or None to derive it."""
    q = v.configuration(q_touch, "q_touch", len(model.joint_names))
    f_T_t = resolve_flange_T_tcp(model, flange_T_tcp)
    d = v.positive_scalar(distance, "retract distance")
    strict, compliant = as_checker(strict), as_checker(compliant)
    if direction is not None:
        return _retract_along(
            model, q, _unit(direction, "retract direction"), d, strict, compliant, f_T_t
        )
    reverse = -tool_direction_in_base(model, q, f_T_t, tool_direction)
    best: tuple[float, TouchMotion] | None = None
    reasons = []
    for u in retract_candidates(reverse):
        t = _retract_along(model, q, u, d, strict, compliant, f_T_t)
        if not t:
            reasons.append(t.error.value)  # type: ignore[union-attr]
            continue
        clear = _first_free_distance(model, t.motion, strict, f_T_t)
        if best is None or clear < best[0] - 1e-12:
            best = (clear, t)
    if best is None:
        counts = {r: reasons.count(r) for r in sorted(set(reasons))}
        return TouchMotion(
            TouchFailure.NO_DIRECTION,
            None,
            reverse,
            d,
            f"every candidate direction fails: {counts}",
        )
    return best[1]


def _retract_along(model, q, u, d, strict, compliant, f_T_t) -> TouchMotion:
    m = _line(model, q, u, d, f_T_t)
    if not m:
        return TouchMotion(TouchFailure.LINEAR, None, u, d, m.reason)
    if not bool(strict.free(m.configurations[-1:])[0]):
        return TouchMotion(
            TouchFailure.BLOCKED_CLEAR, m, u, d, "the retracted configuration is blocked"
        )
    if not curve_free(m.curve(), compliant):
        return TouchMotion(
            TouchFailure.BLOCKED_CONTACT, m, u, d, "the retract hits more than the allowed contact"
        )
    return TouchMotion(None, m, u, d)


def _first_free_distance(model, motion: LinearMotion, strict: MotionChecker, f_T_t) -> float:
    """Smallest probed distance (m) along the retract where ``strict`` calls the robot free."""
    s = motion.path_s
    probes = np.linspace(0.0, s[-1], RETRACT_PROBES + 1)[1:]
    idx = np.minimum(np.searchsorted(s, probes), len(s) - 1)
    ok = strict.free(motion.configurations[idx])
    return float(probes[int(np.argmax(ok))]) if np.any(ok) else float("inf")


# ---------------------------------------------------------------------------------- planner
def touch_checker(
    planner,
    max_carried_object_compression_distance: float | None = None,
    field=None,
):
    """The ``compliant`` checker of a ``Planner``: its collision model with the tool's compliant
    boxes removed and the carried object (box) shortened by the compression distance at its far
    end along the tool direction (a carried mesh is moved back by it along the tool direction);
    the same obstacles (or ``field``: a distance field of other ones), margin and limits. Reads
    the planner's current tool, TCP and object."""
    from twin.planning.collision.checker import CollisionChecker
    from twin.planning.collision.robot_model import CARRIED_BODY, TOOL_BODY
    from twin.planning.collision.spheres import SphereSet, cover_mesh

    c = float(max_carried_object_compression_distance or 0.0)
    if not np.isfinite(c) or c < 0.0:
        raise PlanningInputError(f"compression distance: expected a value >= 0 m, got {c}")
    robot = copy.copy(planner._robot)
    robot.attached = dict(planner._robot.attached)
    robot._compiled = None
    tool = planner._tool
    if tool is not None:
        rigid = [
            planner._cover_box(planner._anchor_T_flange @ e.transform, e.rigid_box_dimensions)
            for e in tool.elements
        ]
        robot.set_attached(TOOL_BODY, SphereSet.concatenate(rigid))
    carried = planner._carried
    if carried is not None:
        tcp = planner.get_tcp()
        anchor_T_tcp = planner._anchor_T_flange @ tcp.transform
        u_tcp = tcp.tool_direction / np.linalg.norm(tcp.tool_direction)
        if carried.box is not None:
            spheres = _shortened_box_cover(planner, anchor_T_tcp, carried.box, u_tcp, c)
        else:
            tris = carried.triangles_in_tcp() - c * u_tcp
            tris = tris @ anchor_T_tcp[:3, :3].T + anchor_T_tcp[:3, 3]
            spheres = cover_mesh(tris, min(0.02, planner.settings.max_sphere_radius))
        robot.set_attached(CARRIED_BODY, spheres)
    checker = planner.checker
    field = checker.field if field is None else field
    return CollisionChecker(robot, field, checker.margin, checker.lower, checker.upper)


def _shortened_box_cover(planner, anchor_T_tcp, box, u_tcp, c):
    """Sphere cover (anchor frame) of a carried box shortened by ``c`` m on the face whose
    outward normal is most aligned with the tool direction ``u_tcp`` (TCP frame)."""
    from twin.planning.collision.spheres import SphereSet

    m = box.bottom_centered_transform
    dims = np.array(box.dimensions, dtype=float)
    axes_in_tcp = m[:3, :3]
    k = int(np.argmax(np.abs(axes_in_tcp.T @ u_tcp)))
    sign = float(np.sign(axes_in_tcp[:, k] @ u_tcp))
    if c >= dims[k]:
        return SphereSet.empty()
    shifted = m.copy()
    # Shortening the far face moves the centre by c/2 against the tool direction (along axis k);
    # along z the box is bottom-centred, so only the far (top or bottom) face moves.
    if k == 2:
        if sign < 0:  # the tool pushes the bottom face: move the bottom up
            shifted[:3, 3] += c * axes_in_tcp[:, 2]
    else:
        shifted[:3, 3] -= 0.5 * c * sign * axes_in_tcp[:, k]
    dims[k] -= c
    return planner._cover_box(anchor_T_tcp @ shifted, dims)
