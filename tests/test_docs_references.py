"""Every reference in code and docs points inside the repository (docs/README.md).

(a) No tracked ``*.py``, ``*.md`` or ``*.toml`` file mentions the reading material outside the
    repository: the ``shared`` folder, its ``specs`` and ``reference`` documents, or the design and
    style notes kept there. Two of those documents share their names with pages under
    ``docs/protocols/``; a mention of those names must resolve to a file in the repository.
(b) Every ``docs/...md`` path cited anywhere in the repository exists, every ``#anchor`` cited
    with it names a heading of that page, every ``docs/style.md #N`` names a numbered habit, and
    every relative link inside ``docs/`` resolves.
"""

from __future__ import annotations

import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
THIS = pathlib.Path(__file__).resolve()
DOCS = ROOT / "docs"
SCANNED_SUFFIXES = (".py", ".md", ".toml")

# Built from parts so that this file does not contain the strings it looks for.
OUTSIDE_FOLDER = "shared" + "/"
OUTSIDE_NAMES = (
    "dynamixel-protocol2" + ".md",
    "onnx-policy-conventions" + ".md",
    "tf-config-format" + ".md",
    "bota-tf-sdk-cpp-api" + ".txt",
    "exploy-onnx-controller-cpp-api" + ".txt",
    "ft-sensor-driver-services" + ".txt",
    "motionkit-readme" + ".txt",
    "zivid-motion-cpp-api" + ".txt",
)
UPPERCASE_NOTES = ("DESIGN" + ".md", "STYLE" + ".md")  # docs/style.md is ours, lower case
#: Outside documents whose names are also pages of ours: a mention must resolve in the repo.
SHARED_WITH_DOCS = ("bota-serial" + ".md", "witmotion-imu" + ".md")

DOCS_PATH = re.compile(r"(?<![\w./-])docs/[\w./-]*?\.md(?:#[\w-]+)?")
STYLE_NUMBER = re.compile(r"docs/style\.md #(\d+)")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _tracked_files() -> list[pathlib.Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: the reference checks run on the repository")
    files = [ROOT / p for p in out.decode().split("\0") if p]
    return [f for f in files if f.is_file()]


def _text(path: pathlib.Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


@pytest.fixture(scope="module")
def tracked() -> dict[pathlib.Path, str]:
    texts = {}
    for path in _tracked_files():
        if path.resolve() == THIS:
            continue
        text = _text(path)
        if text is not None:
            texts[path] = text
    return texts


def _hits(text: str, needle: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(needle), text)]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: pathlib.Path) -> set[str]:
    text = _text(page) or ""
    return {_slug(m[1]) for m in re.finditer(r"^#+\s+(.*)$", text, re.MULTILINE)}


def _resolves(token: str, source: pathlib.Path) -> bool:
    """A path-like token names an existing file, relative to the repository or to ``source``."""
    path = token.split("#", 1)[0]
    return any((base / path).is_file() for base in (ROOT, source.parent))


# ----------------------------------------------------------------------------------- (a)
def test_no_file_points_outside_the_repository(tracked):
    bad = []
    for path, text in tracked.items():
        if path.suffix not in SCANNED_SUFFIXES:
            continue
        rel = path.relative_to(ROOT)
        for needle in (OUTSIDE_FOLDER, *OUTSIDE_NAMES, *UPPERCASE_NOTES):
            bad += [f"{rel}:{line}: {needle}" for line in _hits(text, needle)]
        for name in SHARED_WITH_DOCS:
            for m in re.finditer(rf"[\w./-]*{re.escape(name)}", text):
                if not _resolves(m[0], path):
                    line = text.count("\n", 0, m.start()) + 1
                    bad.append(f"{rel}:{line}: {m[0]} (not a file in the repository)")
    assert not bad, "references outside the repository (point them under docs/):\n" + "\n".join(bad)


# ----------------------------------------------------------------------------------- (b)
def test_every_cited_docs_page_and_section_exists(tracked):
    cited = 0
    bad = []
    for path, text in tracked.items():
        rel = path.relative_to(ROOT)
        for m in DOCS_PATH.finditer(text):
            cited += 1
            page, _, anchor = m[0].partition("#")
            where = f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]}"
            if not (ROOT / page).is_file():
                bad.append(f"{where} (no such page)")
            elif anchor and anchor not in _anchors(ROOT / page):
                bad.append(f"{where} (no such section)")
        for m in STYLE_NUMBER.finditer(text):
            style = _text(DOCS / "style.md") or ""
            if not re.search(rf"^{m[1]}\. ", style, re.MULTILINE):
                bad.append(f"{rel}: docs/style.md #{m[1]} (no such habit)")
    assert cited > 0, "expected the code to cite docs/ pages"
    assert not bad, "cited docs that do not exist:\n" + "\n".join(bad)


def test_relative_links_inside_docs_resolve():
    pages = sorted(DOCS.rglob("*.md"))
    assert pages, "docs/ has no pages"
    bad = []
    for page in pages:
        text = _text(page) or ""
        for m in MD_LINK.finditer(text):
            target = m[1]
            if re.match(r"[a-z]+:", target):  # a URL
                continue
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if not (dest.is_file() or dest.is_dir()):
                bad.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{page.relative_to(ROOT)}: {target} (no such section)")
    assert not bad, "broken links in docs/:\n" + "\n".join(bad)


def test_the_checks_catch_what_they_look_for(tmp_path):
    """The scanners find a planted outside reference and a planted missing page."""
    planted = f"see ../{OUTSIDE_FOLDER}specs/{OUTSIDE_NAMES[0]} and docs/nowhere/missing.md"
    assert _hits(planted, OUTSIDE_FOLDER) == [1]
    assert [m[0] for m in DOCS_PATH.finditer(planted)] == ["docs/nowhere/missing.md"]
    assert not (ROOT / "docs/nowhere/missing.md").exists()
    assert not _resolves(SHARED_WITH_DOCS[0], tmp_path / "x.py")
    assert _resolves("docs/protocols/" + SHARED_WITH_DOCS[0], tmp_path / "x.py")
    assert _slug("PoseTf position semantics") == "posetf-position-semantics"
    assert _slug("The `twin` command: a b") == "the-twin-command-a-b"
