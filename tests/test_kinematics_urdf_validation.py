"""The URDF reader refuses files the twin cannot use safely (issue 13 item 13): kinematic cycles,
non-positive masses, inertias that are not positive definite, non-finite or negative limits and
efforts. Each error is a ``UrdfError`` (a ``ValueError``) naming the link or joint."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from twin import assets
from twin.kinematics import ArmModel, UrdfError

SHIPPED = Path(assets.arm_urdf_path()).read_text(encoding="utf-8")


def variant(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    """The shipped URDF with the first ``count`` matches of regex ``old`` replaced by ``new``."""
    text, n = re.subn(old, new, SHIPPED, count=count, flags=re.S)
    assert n == count, f"pattern {old!r} matched {n} times"
    path = tmp_path / "arm.urdf"
    path.write_text(text, encoding="utf-8")
    return path


def joint_limit(joint: str, attribute: str, value: str) -> tuple[str, str]:
    """(pattern, replacement) setting ``attribute`` of ``joint``'s <limit>."""
    pattern = (
        rf'(<joint name="{joint}" type=[^>]*>(?:(?!</joint>).)*?<limit[^>]*?{attribute}=")[^"]*'
    )
    return pattern, rf"\g<1>{value}"


def test_the_shipped_urdf_passes():
    model = ArmModel.default()
    assert model.n_joints == 6


def test_a_kinematic_cycle_is_refused_and_named(tmp_path):
    """joint_1's child set to base_link: this hung ``twin info --urdf`` at 100 % CPU."""
    path = variant(tmp_path, r'<child link="link_1"/>', '<child link="base_link"/>')
    with pytest.raises(UrdfError, match=r"kinematic cycle through joints \['joint_1'\]"):
        ArmModel.from_urdf(path)


def test_a_longer_cycle_names_its_joints_in_order(tmp_path):
    # joint_3's child becomes link_1: link_1 -> joint_2 -> link_2 -> joint_3 -> link_1
    text = SHIPPED.replace('<child link="link_3"/>', '<child link="link_1"/>', 1)
    text = text.replace('<child link="link_1"/>', '<child link="link_3"/>', 1)  # joint_1 -> link_3
    path = tmp_path / "arm.urdf"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UrdfError, match=r"cycle through joints \['joint_2', 'joint_3'\]"):
        ArmModel.from_urdf(path)


def test_twin_info_on_a_cycle_ends_with_the_error(tmp_path):
    path = variant(tmp_path, r'<child link="link_1"/>', '<child link="base_link"/>')
    done = subprocess.run(
        [sys.executable, "-m", "twin", "info", "--urdf", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "kinematic cycle" in done.stderr


@pytest.mark.parametrize("mass", ["0", "-0.5", "inf"])
def test_a_non_positive_or_infinite_mass_is_refused(tmp_path, mass):
    path = variant(tmp_path, r'<mass value="0.7"/>', f'<mass value="{mass}"/>')
    with pytest.raises(UrdfError, match=rf"link 'link_2': mass is {mass}.* kg; expected a finite"):
        ArmModel.from_urdf(path)


@pytest.mark.parametrize(
    "inertia",
    [
        'ixx="-1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"',  # a negative moment
        'ixx="1e-3" ixy="2e-3" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"',  # products too large
        'ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"',  # a point mass: singular
        'ixx="inf" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"',
    ],
)
def test_an_inertia_that_is_not_positive_definite_is_refused(tmp_path, inertia):
    path = variant(tmp_path, r'ixx="6\.9533e-03"[^/]*', inertia + " ")
    with pytest.raises(UrdfError, match=r"link 'link_2': inertia .* not positive definite"):
        ArmModel.from_urdf(path)


@pytest.mark.parametrize(
    ("joint", "attribute", "value", "message"),
    [
        ("joint_4", "effort", "-4.1", r"joint 'joint_4': limit effort=-4.1 N m; expected a finite"),
        ("joint_4", "effort", "0", r"joint 'joint_4': limit effort=0.0 N m"),
        ("joint_2", "effort", "inf", r"joint 'joint_2': limit effort=inf"),
        ("joint_5", "velocity", "-1", r"joint 'joint_5': limit velocity=-1.0 rad/s"),
        ("joint_5", "velocity", "nan", r"joint 'joint_5'.*velocity is NaN"),
        ("joint_1", "upper", "inf", r"joint 'joint_1': limit lower=-2.96.*upper=inf rad; expected"),
        ("joint_1", "lower", "-inf", r"joint 'joint_1': limit lower=-inf"),
        ("joint_3", "lower", "3.0", r"joint 'joint_3': limit lower=3.0 must be below"),
    ],
)
def test_bad_limits_and_efforts_are_refused(tmp_path, joint, attribute, value, message):
    path = variant(tmp_path, *joint_limit(joint, attribute, value))
    with pytest.raises(UrdfError, match=message):
        ArmModel.from_urdf(path)


def test_a_movable_joint_without_effort_or_limit_is_refused(tmp_path):
    path = variant(tmp_path, r' effort="4\.1"', "")  # joint_4's
    with pytest.raises(UrdfError, match=r"joint 'joint_4' <limit>: missing attribute 'effort'"):
        ArmModel.from_urdf(path)
    text = re.sub(r'(<joint name="joint_6" )type="revolute"', r'\1type="continuous"', SHIPPED)
    text = re.sub(
        r'(<joint name="joint_6" type=(?:(?!</joint>).)*?)<limit[^>]*/>', r"\1", text, flags=re.S
    )
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UrdfError, match=r"joint 'joint_6': a continuous joint needs <limit"):
        ArmModel.from_urdf(path)


def test_errors_are_value_errors():
    assert issubclass(UrdfError, ValueError)


def test_a_hand_built_robot_with_a_cycle_is_refused_by_the_model():
    """``ArmModel`` takes a ``UrdfRobot`` directly too: it must not loop on a cycle either."""
    from dataclasses import replace

    from twin.kinematics.urdf import parse_urdf

    robot = parse_urdf(assets.arm_urdf_path())
    joints = list(robot.joints)
    joints[0] = replace(joints[0], parent="link_3")  # link_1 <- joint_1 <- link_3 <- ... <- link_1
    with pytest.raises(UrdfError, match="kinematic cycle at joint"):
        ArmModel(replace(robot, joints=tuple(joints)), Path("hand-built.urdf"))
