"""``pip install .`` into a fresh, plain virtual environment adds one top-level import name,
``twin``: from a folder outside the repository ``import sim`` (or ``hardware``, ``policies``,
``assets``) fails, while the ``twin`` command works with its shipped data (URDF, scenes).

Slow (about 30 s with pip's cache: a wheel build and an install), marked ``slow``; it stays in
the suite (``pytest -m "not slow"`` leaves it out)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _tracked_files() -> list[str]:
    done = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [f for f in done.stdout.splitlines() if (REPO / f).is_file()]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A plain venv with ``pip install <a copy of the repository's files>``; its bin folder."""
    if shutil.which("git") is None:
        pytest.skip("needs git to list the repository's files")
    root = tmp_path_factory.mktemp("pkg")
    source = root / "source"
    for name in _tracked_files():  # a copy: the build must not write into the checkout
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / "bin"
    done = subprocess.run(
        # --no-compile: no byte-compiling of every dependency's files (the imports compile the
        # ones they use); the same install otherwise
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-compile", str(source)],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return bin_dir


def _run(bin_dir: pathlib.Path, cwd: pathlib.Path, *cmd: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TWIN_", "PYTHON"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        list(cmd), cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.parametrize("name", ["sim", "hardware", "policies", "assets", "benchmarks"])
def test_no_generic_top_level_name_is_installed(installed, tmp_path, name):
    done = _run(installed, tmp_path, str(installed / "python"), "-c", f"import {name}")
    assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr, done.stderr
    done = _run(installed, tmp_path, str(installed / "python"), "-c", f"import twin.{name}")
    assert done.returncode == 0, done.stderr


def test_the_installed_command_works_outside_the_repository(installed, tmp_path):
    info = _run(installed, tmp_path, str(installed / "twin"), "info")
    assert info.returncode == 0, info.stderr
    assert "home TCP pose" in info.stdout and "site-packages" in info.stdout  # the installed URDF
    demo_help = _run(installed, tmp_path, str(installed / "twin"), "demo", "--help")
    assert demo_help.returncode == 0 and "--backend" in demo_help.stdout, demo_help.stderr
    scenes = _run(installed, tmp_path, str(installed / "twin"), "scenes")
    assert scenes.returncode == 0 and "table" in scenes.stdout, scenes.stderr
    where = _run(
        installed, tmp_path, str(installed / "python"), "-c", "import twin; print(twin.__file__)"
    )
    assert str(REPO) not in where.stdout and "site-packages" in where.stdout
