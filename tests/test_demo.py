"""``twin demo`` on the sim backend: every step succeeds and reports real figures."""

import re

from twin.cli import main
from twin.demo import run_demo


def test_demo_steps_all_succeed_with_their_figures():
    lines: list[str] = []
    steps = run_demo("sim", seed=0, print_fn=lines.append)
    assert [s.name for s in steps] == [
        "open",
        "tare",
        "ik",
        "plan and execute to target",
        "payload",
        "plan and execute home",
    ]
    assert all(s.ok for s in steps), lines
    final_mm = [float(m) for m in re.findall(r"final ([0-9.]+) mm", "\n".join(lines))]
    assert len(final_mm) == 2 and max(final_mm) < 2.0
    fz = float(re.search(r"world Fz ([-+0-9.]+) N", "\n".join(lines)).group(1))
    assert abs(fz - (-0.5 * 9.81)) < 0.05 * 0.5 * 9.81


def test_demo_command_exits_zero(capsys):
    assert main(["demo"]) == 0
    assert "demo: 6 of 6 steps ok" in capsys.readouterr().out
