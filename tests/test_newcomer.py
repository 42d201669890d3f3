"""A newcomer's first minutes: ``twin --version``; the LICENSE (the Apache 2.0 text) and
``docs/`` in the source distribution; classifiers that agree with ``requires-python``; every
``--help`` page plain text with a description; no PyBullet build banner on stderr; ``twin scenes``
lists every scene ``--scene`` accepts; the README's Python snippets run as written."""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata

import pytest
import tomllib
from test_cli_packaging import _tracked_files

from twin.cli import build_parser, main
from twin.scenes import SHIPPED_SCENES, load_scene, scenes_dir

REPO = pathlib.Path(__file__).resolve().parent.parent
#: MD5 of the Apache License 2.0 text as apache.org publishes it (LICENSE-2.0.txt).
APACHE_2_MD5 = "3b83ef96387f14655fc854ddc3c6bd57"
#: reStructuredText inline markup that must not reach a terminal.
RAW_MARKUP = re.compile(r"`|:(?:func|class|meth|mod|attr|ref|doc):|\*\*")


def _python(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    """This interpreter run with ``args`` (its environment, so PYTHONPATH too), output captured."""
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def test_version_prints_the_installed_distribution_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"twin {metadata.version('twin')}"


def test_license_is_the_apache_2_text_and_the_metadata_says_so():
    assert hashlib.md5((REPO / "LICENSE").read_bytes()).hexdigest() == APACHE_2_MD5
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]


def test_python_classifiers_agree_with_requires_python():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    versions = [
        c.rsplit(" ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert versions
    spec = project["requires-python"]
    for version in versions:  # ">=3.10,<3.12" style bounds, checked by hand (no packaging dep)
        minor = int(version.split(".")[1])
        for bound in spec.split(","):
            op, value = re.fullmatch(r"\s*([<>=!]=?)\s*3\.(\d+)\s*", bound).groups()
            assert {">=": minor >= int(value), "<": minor < int(value)}.get(op, True), (
                version,
                spec,
            )


@pytest.mark.slow
def test_sdist_holds_license_and_docs(tmp_path):
    pytest.importorskip("build")
    if shutil.which("git") is None:
        pytest.skip("needs git to list the repository's files")
    source = tmp_path / "source"
    for name in _tracked_files():  # a copy: the build must not write into the checkout
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    done = _python(
        "-m", "build", "--sdist", "--no-isolation", "-o", str(tmp_path / "d"), cwd=source
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (sdist,) = (tmp_path / "d").glob("twin-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    docs = {str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md")}
    assert "LICENSE" in names
    assert docs and docs <= names, sorted(docs - names)


def _parsers(parser: argparse.ArgumentParser, path: str = "twin"):
    """``(command line, parser)`` of the parser and every subcommand below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_help_page_is_plain_text_with_a_description():
    pages = dict(_parsers(build_parser()))
    assert len(pages) >= 12  # twin and its eleven subcommands, plus twin ft's actions
    for command, parser in pages.items():
        text = parser.format_help()  # what `command --help` prints
        assert not RAW_MARKUP.search(text), (command, RAW_MARKUP.search(text), text)
        assert parser.description and len(parser.description.split()) >= 4, command
        assert not re.search(r"\w\.\.(\s|$)", text), (command, text)  # no "backend.."


def test_help_runs_from_the_command_line_and_prints_no_banner():
    done = _python("-m", "twin.cli", "run", "--help")
    assert done.returncode == 0 and done.stderr == ""
    assert "twin run: an ONNX policy through the controller (twin.control)" in " ".join(
        done.stdout.split()
    )


def test_the_engine_prints_no_banner_and_restores_stderr():
    code = (
        "import os, sys\n"
        "from twin.sim.engine import Engine\n"
        "Engine().close(); Engine().close()\n"
        "print('python stderr', file=sys.stderr, flush=True)\n"
        "os.write(2, b'fd 2\\n')\n"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "python stderr\nfd 2\n"


def test_scenes_lists_every_scene_file_and_each_loads(capsys):
    files = sorted(p.stem for p in scenes_dir().glob("*.json"))
    assert sorted(SHIPPED_SCENES) == files
    assert "pick_place" in SHIPPED_SCENES
    assert main(["scenes"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:] if line.strip()]
    assert [r for r in rows if r in files] == list(SHIPPED_SCENES)
    assert main(["scenes", "pick_place"]) == 0
    out = capsys.readouterr().out
    scene = load_scene("pick_place")
    assert out.startswith("scene pick_place (")
    assert all(item.name in out for item in scene.items) and len(scene.items) >= 5


def _readme_python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


@pytest.mark.parametrize("index", range(len(_readme_python_blocks())))
def test_readme_python_snippet_runs_as_written(index, tmp_path):
    block = _readme_python_blocks()[index]
    done = _python("-c", block, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""  # no banner, no warning
    if "open_robot(" in block:
        error = float(done.stdout.rsplit(":", 1)[1])
        assert abs(error) < 0.01  # rad: the base joint reached its target
    if "gym.make(" in block:
        assert re.fullmatch(r"reward -?\d+\.\d{3}, success (True|False)\n", done.stdout)


def test_readme_states_python_versions_before_the_install_command():
    text = (REPO / "README.md").read_text()
    assert text.index("Python 3.10") < text.index("pip install . && twin demo")
    assert len(_readme_python_blocks()) >= 2
