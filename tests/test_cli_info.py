"""``twin info`` prints the shipped arm model: joints, limits, home, home TCP pose, masses."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from twin.cli import build_parser, main
from twin.kinematics import ArmModel
from twin.spatial import SE3, SO3

MODEL = ArmModel.default()


def _numbers(text: str) -> np.ndarray:
    return np.array([float(x) for x in re.findall(r"-?\d+\.\d+", text)])


def _line(out: str, prefix: str) -> str:
    matches = [line for line in out.splitlines() if line.strip().startswith(prefix)]
    assert len(matches) == 1, (prefix, out)
    return matches[0]


@pytest.fixture(scope="module")
def info_output():
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["info"])
    assert code == 0
    return buffer.getvalue()


def test_info_lists_every_joint_with_its_limits(info_output):
    for i, name in enumerate(MODEL.joint_names):
        lower_deg, upper_deg, lower, upper, velocity, effort = _numbers(_line(info_output, name))
        assert lower_deg == pytest.approx(np.degrees(MODEL.lower[i]), abs=1e-3)
        assert upper_deg == pytest.approx(np.degrees(MODEL.upper[i]), abs=1e-3)
        assert (lower, upper) == pytest.approx((MODEL.lower[i], MODEL.upper[i]), abs=1e-6)
        assert velocity == pytest.approx(MODEL.velocity_limits[i], rel=1e-3)
        assert effort == pytest.approx(MODEL.effort_limits[i], rel=1e-3)
    assert "joint_6" in info_output and "270.000" in info_output


def test_info_prints_the_home_configuration_and_tcp_pose(info_output):
    np.testing.assert_allclose(_numbers(_line(info_output, "q deg")), [0, 20, 90, 0, 70, 0])
    np.testing.assert_allclose(_numbers(_line(info_output, "q rad")), MODEL.home_q, atol=1e-6)
    assert "posture (shoulder, elbow, wrist) = (+1, +1, +1)" in info_output
    pose7 = _numbers(_line(info_output, "[px, py, pz, qw, qx, qy, qz]"))
    expected = SE3.from_matrix(MODEL.fk(MODEL.home_q)).pose7()
    np.testing.assert_allclose(pose7, expected, atol=1e-6)
    np.testing.assert_allclose(pose7, [0.387169, 0, 0.16765, 0, 0, 1, 0], atol=1e-6)
    rpy = np.radians(_numbers(_line(info_output, "RPY deg")))
    rotation = SO3.from_rpy(*rpy)
    assert rotation.angle_to(SE3.from_matrix(MODEL.fk(MODEL.home_q)).rotation) < 1e-4


def test_info_prints_link_masses_and_their_total(info_output):
    assert f"total mass {MODEL.total_mass:.3f} kg" in info_output
    masses = {name: _numbers(_line(info_output, f"{name} "))[-1] for name in ("tool", "ft_sensor")}
    assert masses == {"tool": pytest.approx(0.25), "ft_sensor": pytest.approx(0.1)}


def test_info_accepts_another_urdf(tmp_path, capsys):
    path = tmp_path / "other.urdf"
    path.write_text(MODEL.urdf_path.read_text().replace('name="twin_arm"', 'name="other_arm"'))
    assert main(["info", "--urdf", str(path)]) == 0
    assert "arm model: other_arm" in capsys.readouterr().out


def test_a_subcommand_is_required():
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([])
    assert exc.value.code == 2


def test_info_runs_as_a_program():
    runs = [[sys.executable, "-m", "twin.cli", "info"], [sys.executable, "-m", "twin", "info"]]
    console = shutil.which("twin")
    if console is not None:  # the console script, where the environment puts it on PATH
        runs.append([console, "info"])
    for cmd in runs:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, (cmd, done.stderr)
        assert "home TCP pose" in done.stdout and "joint_6" in done.stdout


def test_the_cli_starts_without_the_planner_or_the_sims_heavy_libraries():
    """Every ``twin`` command builds the whole parser first: building it must not import the
    planner, the scenario runner or the libraries only some commands need (scipy alone took
    about 2 s of each start-up when ``twin test``'s module imported the scenario runner)."""
    heavy = ("scipy", "twin.planning", "twin.scenario", "pybullet", "onnxruntime", "numba")
    code = (
        "import sys, twin.cli; twin.cli.build_parser(); "
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
