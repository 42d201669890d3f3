"""Issue 8 must-show: a touch pick from the bin and a touch place on the shelf with a carried
box, planned with the planner and executed on the sim backend (``assets/scenes/pick_place.json``
loaded in both).

The tool is a suction cup: a small rigid block at the URDF's TCP and a 6 cm compliant box beyond
it; the planner's TCP is the cup's tip. The cup is longer, and the allowed compression of the
carried box larger, than the conservative model's margins (``Planner.margins()``), as
``twin.planning.motion.touch`` requires for contact at the end of a touch. The simulated arm has the URDF
geometry only (the cup and the carried box are not simulated bodies; the payload is a point mass
without collision geometry), so the allowed compliant contact cannot appear in the sim and the
sim must report no arm-scene contact at all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from twin.sim import PyBulletRobot
from twin.sim.robot import ARM
from twin.sim.scene import SCENE_PREFIX

from twin.kinematics.gravity import gravity_torques
from twin.planning import (
    CarriedObject,
    InitialState,
    Movement,
    PathRequest,
    Planner,
    PlannerSettings,
    ReplaceableTool,
    Tcp,
    ToolBoxElement,
    TransformedBox,
)
from twin.planning.collision.scene_obstacles import obstacles_from_scene
from twin.planning.motion.execute import follow, prepare
from twin.robot import JointCommand, Robot
from twin.scenes import load_scene
from twin.spatial.quaternion import skew

SCENE = Path(__file__).resolve().parents[1] / "assets" / "scenes" / "pick_place.json"
CUP = 0.06  # m, compliant cup beyond the URDF TCP
#: The carried box (the picked object's part below the cup), TCP frame: bottom-centred at the
#: cup tip, extending along the tool direction.
CARRIED = (0.04, 0.04, 0.06)
COMPRESSION = 0.055  # m the carried box may be compressed (> the primitive margin)
PRESS = 0.002  # m the carried box is pressed onto the shelf board at the place
PAYLOAD_KG = 0.15
PICK_XY = (0.385, 0.325)  # the tallest object in the bin (top at z 0.0867 m)
PICK_Z = 0.086  # m, cup tip: just into the object's top
BOARD_XY, BOARD_TOP = (0.34, -0.28), 0.12
TOUCH_SPEED = 0.15  # velocity/acceleration scale of the touch approach and retract
GOAL_TOL = 1e-3
LINE_TOL = 0.5e-3


def _translation(x, y, z):
    m = np.eye(4)
    m[:3, 3] = [x, y, z]
    return m


class ContactWatch(Robot):
    """Wraps the sim robot; after every control step records the smallest distance (m, capped at
    ``CAP``) between the arm's links and every scene body, from the engine's closest-point query
    (negative: penetration)."""

    CAP = 0.10

    def __init__(self, sim: PyBulletRobot, bodies: list[str]) -> None:
        self.sim, self.bodies = sim, bodies
        self.model, self.control_period_s = sim.model, sim.control_period_s
        self.min_distance = {b: self.CAP for b in bodies}

    def read(self):
        return self.sim.read()

    def _apply(self, command: JointCommand) -> None:
        self.sim.write(command)

    def step(self) -> None:
        self.sim.step()
        engine = self.sim.engine
        for b in self.bodies:
            d = engine.closest_distance(ARM, b, max_distance=self.CAP)
            self.min_distance[b] = min(self.min_distance[b], d)


@pytest.fixture(scope="module")
def cell():
    planner = Planner(PlannerSettings(seed=1))
    model = planner.model
    planner.set_obstacles(obstacles_from_scene(SCENE))
    f_T_urdf_tcp = np.linalg.inv(model.fk(model.home_q, "flange")) @ model.fk(model.home_q)
    cup = TransformedBox(_translation(0, 0, 0.01), [0.03, 0.03, CUP])
    element = ToolBoxElement(f_T_urdf_tcp @ _translation(0, 0, -0.01), [0.03, 0.03, 0.01], cup)
    planner.set_replaceable_tool(ReplaceableTool.from_box_elements([element]))
    planner.set_tcp(Tcp(f_T_urdf_tcp @ _translation(0, 0, CUP)))
    sim = PyBulletRobot(watchdog_s=None, scene=SCENE)
    bodies = [SCENE_PREFIX + it.name for it in load_scene(SCENE).items]
    yield planner, sim, ContactWatch(sim, bodies)
    sim.close()


def _feedforward(model, payload_com_tcp=None):
    """Gravity torques of the arm (URDF) plus, if given, of the payload point mass at
    ``payload_com_tcp`` (3,) m in the URDF TCP frame."""

    def ff(q, qd, qdd):
        tau = gravity_torques(model, q)
        if payload_com_tcp is not None:
            t = model.fk(q)
            jac = model.jacobian(q)
            r = t[:, :3, :3] @ payload_com_tcp
            jv = jac[:, :3] - skew(r) @ jac[:, 3:]
            tau = tau + np.einsum("kij,i->kj", jv, [0.0, 0.0, 9.81 * PAYLOAD_KG])
        return tau

    return ff


def _run(planner, watch, waypoints, q_start, ff, scale=1.0):
    """Prepare (from q_start, at ``scale`` of the limits) and follow on the sim."""
    f_T_t = planner.get_tcp().transform
    prepared = prepare(
        planner.model,
        q_start,
        waypoints,
        f_T_t,
        velocity_scale=scale,
        acceleration_scale=scale,
    )
    return follow(watch, prepared.trajectory, planner.model, feedforward=ff, flange_T_tcp=f_T_t)


def _line_deviation(planner, measured, a, b):
    """Largest distance (m) of the planner TCP of ``measured`` (K, 6) from the line through a
    and b (3,) m, and the largest overshoot (m) past b along it."""
    f_T_t = planner.get_tcp().transform
    p = (planner.model.fk(measured, "flange") @ f_T_t)[:, :3, 3]
    length = np.linalg.norm(b - a)
    u = (b - a) / length
    rel = p - a
    s = rel @ u
    off_line = float(np.max(np.linalg.norm(rel - np.outer(s, u), axis=1)))
    return off_line, float(max(0.0, np.max(s) - length))


def _execute_touch_path(planner, watch, result, q_start, ff, touch_start, touch_end):
    """Execute ``result`` split into the (slow) leading retract, the free part and the (slow)
    final approach; returns {segment: (report, q_from)}."""
    path = result.path()
    segments = []
    rest = list(path)
    if touch_start:
        assert rest[0].movement is Movement.LINEAR
        segments.append(("retract", [rest.pop(0)], TOUCH_SPEED))
    approach = None
    if touch_end:
        assert rest[-1].movement is Movement.LINEAR
        approach = rest.pop()
    if rest:
        segments.append(("free", rest, 1.0))
    if approach is not None:
        segments.append(("approach", [approach], TOUCH_SPEED))
    out = {}
    q = np.asarray(q_start, float)
    for name, w, scale in segments:
        out[name] = (_run(planner, watch, w, q, ff, scale), q)
        q = w[-1].configuration
    return out


def test_touch_pick_from_the_bin_and_place_on_the_shelf_on_the_sim(cell):
    planner, sim, watch = cell
    model = planner.model
    home = np.array(model.home_q)
    down = planner.tcp_pose(home)[:3, :3]
    assert down[:, 2] @ [0, 0, -1] == pytest.approx(1.0)  # tool pointing down
    sim.reset(home)

    # ---- pick: a touch from home onto the object's top.
    pick = np.eye(4)
    pick[:3, :3] = down
    pick[:3, 3] = [*PICK_XY, PICK_Z]
    q_pick = planner.compute_inverse_kinematics(pick, home)
    assert q_pick is not None
    assert not planner.configurations_free([q_pick])[0]  # rigidly, the cup is in the object
    picked = planner.path(InitialState(home), PathRequest([q_pick], type="touch"))
    assert picked, picked
    runs = _execute_touch_path(planner, watch, picked, home, _feedforward(model), False, True)
    q_meas = sim.read().q
    pick_err = np.linalg.norm(planner.tcp_pose(q_meas)[:3, 3] - pick[:3, 3])
    assert pick_err < GOAL_TOL
    report, q_pre = runs["approach"]
    a, b = planner.tcp_pose(q_pre)[:3, 3], pick[:3, 3]
    assert np.linalg.norm(b - a) == pytest.approx(0.05, abs=1e-6)
    assert (b - a) @ [0, 0, -1] == pytest.approx(0.05, abs=1e-6)  # straight down the tool
    approach_dev, approach_over = _line_deviation(planner, report.measured, a, b)
    assert approach_dev < LINE_TOL
    assert approach_over < GOAL_TOL

    # ---- grasp: the object leaves the cloud and is carried (planner box, sim payload).
    region = TransformedBox(_translation(*PICK_XY, 0.0), [0.12, 0.12, 0.11])
    assert planner.clip_point_cloud_with_box(region) > 0
    box = TransformedBox(np.eye(4), CARRIED)
    planner.set_carried_object(CarriedObject.from_box(box))
    com = np.array([0.0, 0.0, CUP + 0.5 * CARRIED[2]])  # URDF TCP frame
    sim.attach_payload(PAYLOAD_KG, com)

    # ---- place: leave the touch (linear retract), touch the carried box onto the board.
    place = pick.copy()
    place[:3, 3] = [*BOARD_XY, BOARD_TOP + CARRIED[2] - PRESS]
    q_place = planner.compute_inverse_kinematics(place, home)
    assert q_place is not None
    assert not planner.configurations_free([q_place])[0]
    request = PathRequest(
        [q_place], type="touch", max_carried_object_compression_distance=COMPRESSION
    )
    placed = planner.path(InitialState(picked), request)
    assert placed, placed
    ff = _feedforward(model, com)
    runs2 = _execute_touch_path(planner, watch, placed, q_meas, ff, True, True)
    q_end = sim.read().q
    place_err = np.linalg.norm(planner.tcp_pose(q_end)[:3, 3] - place[:3, 3])
    assert place_err < GOAL_TOL
    report = runs2["retract"][0]
    a, b = planner.tcp_pose(q_pick)[:3, 3], planner.tcp_pose(placed.path()[0].configuration)[:3, 3]
    assert np.linalg.norm(b - a) == pytest.approx(0.05, abs=1e-6)
    a_r, b_r = a, b
    retract_dev, retract_over = _line_deviation(planner, report.measured, a, b)
    assert retract_dev < LINE_TOL
    assert retract_over < GOAL_TOL
    report, q_pre = runs2["approach"]
    a, b = planner.tcp_pose(q_pre)[:3, 3], place[:3, 3]
    place_dev, place_over = _line_deviation(planner, report.measured, a, b)
    assert place_dev < LINE_TOL
    assert place_over < GOAL_TOL

    # ---- no contact between the simulated arm and any scene body, throughout.
    clearance = min(watch.min_distance.values())
    print(
        f"pick err {pick_err * 1e3:.3f} mm, place err {place_err * 1e3:.3f} mm; approach "
        f"{approach_dev * 1e3:.3f} mm, retract {retract_dev * 1e3:.3f} mm, place approach "
        f"{place_dev * 1e3:.3f} mm (retract direction {np.round((b_r - a_r) / 0.05, 3)}); overshoot {approach_over * 1e3:.3f} / {retract_over * 1e3:.3f}"
        f" / {place_over * 1e3:.3f} mm; clearance {clearance * 1e3:.2f} mm {watch.min_distance}"
    )
    assert clearance > 0.0, watch.min_distance
