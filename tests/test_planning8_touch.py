"""Touch approach and retract (touch.py): straight lines along the tool direction, contact only
where allowed, retract direction given or derived from the geometry around the tool."""

from __future__ import annotations

import numpy as np
import pytest

from twin.kinematics import ArmModel
from twin.planning import (
    CarriedObject,
    Obstacle,
    Planner,
    PlannerSettings,
    ReplaceableTool,
    Tcp,
    ToolBoxElement,
    TransformedBox,
)
from twin.planning.motion.touch import (
    TouchFailure,
    approach,
    retract,
    retract_candidates,
    touch_checker,
)

TOL = 0.5e-3


@pytest.fixture(scope="module")
def model():
    return ArmModel.default()


def tcp_points(model, q):
    return model.fk(np.atleast_2d(q))[:, :3, 3]


class Pocket:
    """Point-TCP world: a floor at z0 and (``roof``) a roof 6 cm above it over y < y0 + 3 cm (an
    overhang open towards +y). ``strict`` keeps 2 cm from the floor and 4.5 cm from the roof (so
    nothing under the roof is strictly clear), ``compliant`` lets the TCP press into the floor
    by ``compression`` and keeps 1 cm from the roof."""

    def __init__(self, model, touch, compression=0.0, roof=True):
        self.model, self.z0, self.y0 = model, touch[2], touch[1]
        self.compression, self.roof = compression, roof

    def _ok(self, q, floor_gap, roof_gap):
        p = tcp_points(self.model, q)
        under_roof = p[:, 1] < self.y0 + 0.03
        roof_ok = ~under_roof | (p[:, 2] < self.z0 + 0.06 - roof_gap) | (not self.roof)
        return (p[:, 2] >= self.z0 + floor_gap) & roof_ok

    def strict(self, q):
        return self._ok(q, 0.02, 0.045)  # under the roof nothing is strictly clear

    def compliant(self, q):
        return self._ok(q, -self.compression, 0.01)


def touch_configuration(model):
    q0 = np.array(model.home_q)
    return q0, tcp_points(model, q0)[0]


def test_approach_is_a_straight_line_along_the_tool_direction(model):
    q_touch, p = touch_configuration(model)
    floor_only = Pocket(model, p, roof=False)
    t = approach(model, q_touch, floor_only.strict, floor_only.compliant, distance=0.05)
    assert t, t.reason
    # The shipped TCP's z axis points down at home: the tool direction (0, 0, 1) is -z.
    assert np.allclose(t.direction, [0, 0, -1], atol=1e-9)
    q = t.configurations
    assert np.allclose(q[-1], q_touch, atol=1e-9)
    pts = tcp_points(model, t.motion.curve().dense(1e-4))
    start = tcp_points(model, q[0])[0]
    assert start == pytest.approx(p + [0, 0, 0.05], abs=1e-9)
    assert np.max(np.linalg.norm(pts[:, :2] - p[:2], axis=1)) < TOL  # straight down
    assert floor_only.strict(q[:1])[0] and not floor_only.strict(q[-1:])[0]


def test_pressing_is_allowed_only_up_to_the_compression_distance(model):
    q0, p = touch_configuration(model)
    target = model.fk(q0).copy()
    target[2, 3] -= 0.005  # press 5 mm into the floor
    q_press = model.ik(target, q0)
    ok = Pocket(model, p, compression=0.01, roof=False)
    tight = Pocket(model, p, compression=0.002, roof=False)
    assert approach(model, q_press, ok.strict, ok.compliant)
    t = approach(model, q_press, tight.strict, tight.compliant)
    assert t.error is TouchFailure.BLOCKED_CONTACT


def test_pre_touch_must_be_clear(model):
    q_touch, p = touch_configuration(model)
    world = Pocket(model, p)  # the roof 6 cm above: 5 cm back is still under it
    t = approach(model, q_touch, world.strict, world.compliant, distance=0.05)
    assert t.error is TouchFailure.BLOCKED_CLEAR


def test_retract_direction_is_derived_from_the_geometry(model):
    q_touch, p = touch_configuration(model)
    world = Pocket(model, p)
    # Straight back (up) hits the roof:
    up = retract(model, q_touch, world.strict, world.compliant, direction=[0, 0, 1])
    assert up.error in (TouchFailure.BLOCKED_CONTACT, TouchFailure.BLOCKED_CLEAR)
    t = retract(model, q_touch, world.strict, world.compliant)
    assert t, t.reason
    assert t.direction[1] > 0.3  # out through the open side
    assert t.direction[2] > 0.0  # and off the floor
    q = t.configurations
    assert np.allclose(q[0], q_touch, atol=1e-9)
    pts = tcp_points(model, t.motion.curve().dense(1e-4))
    end = tcp_points(model, q[-1])[0]
    assert np.linalg.norm(end - p) == pytest.approx(0.05, abs=1e-9)
    d = end - p
    off = pts - p
    along = off @ d / (d @ d)
    assert np.max(np.linalg.norm(off - along[:, None] * d, axis=1)) < TOL
    assert world.strict(q[-1:])[0]
    # A given direction is used as given.
    side = retract(model, q_touch, world.strict, world.compliant, direction=[0, 1, 1])
    assert side and np.allclose(side.direction, [0, 1 / np.sqrt(2), 1 / np.sqrt(2)])


def test_candidates_start_with_the_reverse_tool_direction():
    c = retract_candidates(np.array([0.0, 0.0, 2.0]))
    assert np.allclose(c[0], [0, 0, 1])
    assert np.allclose(np.linalg.norm(c, axis=1), 1.0)
    tilts = np.degrees(np.arccos(np.clip(c[1:, 2], -1, 1)))
    assert np.allclose(np.unique(np.round(tilts, 6)), [30, 45, 60, 90])


def test_planner_compliant_checker_allows_only_the_compliant_box_and_compression(model):
    planner = Planner(PlannerSettings())
    q0 = np.array(model.home_q)
    # A suction tool beyond the URDF's 0.125 m tool: a 3 cm rigid block 2 cm below the flange
    # and a 15 cm compliant cup beyond it (tip 0.20 m from the flange).
    cup = TransformedBox(_translation(0, 0, 0.03), [0.03, 0.03, 0.15])
    element = ToolBoxElement(_translation(0, 0, 0.02), [0.03, 0.03, 0.03], cup)
    planner.set_replaceable_tool(ReplaceableTool.from_box_elements([element]))
    assert planner.configurations_free([q0])[0]
    flange = model.fk(q0, "flange")
    assert flange[:3, 2] @ [0, 0, -1] == pytest.approx(1.0)  # the flange's z points down
    tip_z = flange[2, 3] - 0.20

    def table(top_z):
        box = TransformedBox(
            _translation(flange[0, 3], flange[1, 3], top_z - 0.12), [0.3, 0.3, 0.12]
        )
        planner.set_obstacles([Obstacle.from_box("table", box)])

    # The table top 1 cm above the cup's tip: only the cup touches it.
    table(tip_z + 0.01)
    assert not planner.configurations_free([q0])[0]
    assert touch_checker(planner).free(q0[None])[0]
    # A 3 cm carried box beyond the tip, the table top 2 cm beyond the tip: 1 cm of compression.
    table(tip_z - 0.02)
    planner.set_tcp(Tcp(_translation(0, 0, 0.20)))
    planner.set_carried_object(
        CarriedObject.from_box(TransformedBox(np.eye(4), [0.04, 0.04, 0.03]))
    )
    assert not planner.configurations_free([q0])[0]
    assert not touch_checker(planner).free(q0[None])[0]
    assert not touch_checker(planner, 0.002).free(q0[None])[0]
    assert touch_checker(planner, 0.03).free(q0[None])[0]
    # Building a compliant checker leaves the planner's own model untouched.
    assert not planner.configurations_free([q0])[0]
    planner.clear_carried_object()
    assert touch_checker(planner).free(q0[None])[0]


def _translation(x, y, z):
    m = np.eye(4)
    m[:3, 3] = [x, y, z]
    return m
