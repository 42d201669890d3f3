"""No import circle anywhere in the project: a module never imports, directly or through others,
a module that imports it back.

The graph is read from the source (``ast``), not from ``sys.modules``: every ``import`` and
``from ... import`` counts, at module level, inside functions (a lazy import is still a
dependency) and under ``if TYPE_CHECKING:`` (a module that needs another's types to be read is
tied to it as much as one that calls it). ``from pkg import name`` is an edge to the
submodule ``pkg.name`` when that is a module, else to the package ``pkg`` itself (its
``__init__``). Circles are the strongly connected components of more than one module, or a module
that imports itself.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
#: Repository folder -> its import name (setup.py installs these inside ``twin``).
PACKAGE_ROOTS = {
    "twin": "twin",
    "sim": "twin.sim",
    "hardware": "twin.hardware",
    "policies": "twin.policies",
    "assets": "twin.assets",
    "benchmarks": "twin.benchmarks",
}


def module_files(roots: dict[pathlib.Path, str]) -> dict[str, pathlib.Path]:
    """Every module under ``roots`` (folder -> import name), by dotted name."""
    modules = {}
    for folder, name in roots.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((name, *parts))] = path
    return modules


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, tuple[str, ...]]]:
    """(base module, imported names) for every import statement in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            found.append((base, tuple(alias.name for alias in node.names)))
    return found


def import_graph(modules: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for base, names in _imports(tree, name, path.name == "__init__.py"):
            targets = [f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
            if len(targets) < len(names) or not names:  # some names are not submodules
                # ``import a.b.c`` imports a, a.b and a.b.c; the deepest project module counts.
                parts = base.split(".")
                while parts and ".".join(parts) not in modules:
                    parts.pop()
                if parts:
                    targets.append(".".join(parts))
            graph[name].update(t for t in targets if t != name or names == ())
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph``: strongly connected components (Tarjan) of two or more modules,
    and modules that import themselves; each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    counter = 0
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))

    def connect(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(cycles)


def test_the_project_has_no_import_circle():
    roots = {REPO / folder: name for folder, name in PACKAGE_ROOTS.items()}
    graph = import_graph(module_files(roots))
    assert len(graph) > 150  # the whole project was read
    assert import_cycles(graph) == []


@pytest.fixture
def fixture_package(tmp_path: pathlib.Path) -> pathlib.Path:
    """A small package with one deliberate circle (a -> b -> c -> a) and modules outside it."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": '"""Fixture."""\n',
        "a.py": "from pkg.b import thing\n",
        "b.py": "def thing():\n    from pkg.sub import c\n    return c\n",
        "sub/__init__.py": "",
        "sub/c.py": "from .. import a\n",
        "clean.py": "import pkg.a\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import clean\n",
    }
    for rel, text in files.items():
        (pkg / rel).write_text(text)
    return pkg


def test_a_deliberate_circle_is_found(fixture_package):
    graph = import_graph(module_files({fixture_package: "pkg"}))
    assert graph["pkg.b"] == {"pkg.sub.c"}  # a lazy import counts
    assert graph["pkg.sub.c"] == {"pkg.a"}  # relative import resolved to the submodule
    assert graph["pkg.typed"] == {"pkg.clean"}  # a TYPE_CHECKING import counts
    assert graph["pkg.clean"] == {"pkg.a"}  # ``import pkg.a``: the deepest module
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


def test_breaking_the_circle_clears_it(fixture_package):
    (fixture_package / "sub" / "c.py").write_text("import json\n")
    graph = import_graph(module_files({fixture_package: "pkg"}))
    assert import_cycles(graph) == []
