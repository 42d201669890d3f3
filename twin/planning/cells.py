"""Robot cells: configuration directories, generated cell data, packaging and installing.

A cell is a directory ``<name>/`` holding ``cell.json`` (layout and keys: ``assets/cells/README.md``):
the robot URDF (a path relative to the cell directory, or ``asset:<path>`` inside the shipped
``assets`` package), the attachments that ``set_attachments`` may enable (box elements in the
flange frame), execution limits and planner parameters per profile. Cells are looked up in the
user cells directory (``cells_dir`` argument, else ``$TWIN_CELLS_DIR``, else
``~/.local/share/twin/cells``) first, then among the shipped cells (``assets/cells``).

``generate`` precomputes the cell data of a profile into ``<user cells dir>/<name>/generated/
<profile>/`` (never into the installed package), stage by stage, reporting progress as a
percentage and a stage text. ``package_cell`` zips a cell (its URDF included, so the package is
self-contained) and ``install_package`` unpacks one into the user cells directory after checking
every entry: no absolute paths, no ``..``, no links or special files, nothing outside the target.

Containment: every path a cell names (its URDF, relative or ``asset:``, and every mesh file the
URDF names: ``<mesh filename>``, plain, ``file://`` or ``package://``) goes through one check,
``_contained``: a portable relative path without ``..`` that, links resolved, stays inside its base
directory (the cell directory, or the shipped ``assets`` for an ``asset:`` URDF), so neither
``install_package``, ``load_cell`` nor ``package_cell`` ever reads a host file from outside. A mesh
path is taken relative to the URDF's folder and must stay inside the base (``../meshes/x.stl``
beside a ``robot/`` folder is fine; ``/abs/x.stl``, ``file:///etc/hostname`` and anything leaving
the base are refused); ``package://<pkg>/<rest>`` is looked for as the model loader does, in the
URDF's folder and each parent up to the base, never above it. Packages are bounded: at most
``MAX_PACKAGE_ENTRIES`` entries, ``MAX_PATH_DEPTH`` path components, ``MAX_PACKAGE_BYTES``
unpacked and an expansion ratio (unpacked / packed) of ``MAX_EXPANSION_RATIO``; an entry that
unpacks to more than its header says, duplicate names and every other zip failure raise
``PackageError``.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import stat
import tempfile
import xml.etree.ElementTree as ET
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from twin.planning.errors import PlanningInputError
from twin.planning.requests import Profile, _enum
from twin.planning.settings import PlannerSettings
from twin.planning.types import ToolBoxElement, TransformedBox

CELL_FILE = "cell.json"
FORMAT_NAME = "twin-cell"
FORMAT_VERSION = 1
ASSET_PREFIX = "asset:"
PACKAGE_SCHEME = "package://"
FILE_SCHEME = "file://"
ENV_CELLS_DIR = "TWIN_CELLS_DIR"
GENERATED = "generated"
MANIFEST = "manifest.json"
MAX_PACKAGE_BYTES = 64 * 1024 * 1024  # unpacked total accepted by install_package
MAX_PACKAGE_ENTRIES = 1000
MAX_PATH_DEPTH = 8  # components of an entry's path, the cell directory included
#: Unpacked / packed bytes, over the package (deflated JSON and URDF text packs 5-20x).
MAX_EXPANSION_RATIO = 100
_RATIO_FLOOR_BYTES = 1024 * 1024  # below this many unpacked bytes the ratio is not checked
_COPY_CHUNK = 64 * 1024
_UNPACK_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    OSError,
    EOFError,
    RuntimeError,
    ValueError,
    NotImplementedError,
)

ProgressCallback = Callable[[float, str], None]


class CellError(PlanningInputError):
    """A cell is missing or its configuration is malformed."""


class PackageError(PlanningInputError):
    """A cell package (zip) is malformed or unsafe."""


def user_cells_dir(cells_dir: str | Path | None = None) -> Path:
    """The user cells directory (see the module doc); not created here."""
    if cells_dir is not None:
        return Path(cells_dir)
    env = os.environ.get(ENV_CELLS_DIR)
    return Path(env) if env else Path.home() / ".local" / "share" / "twin" / "cells"


def shipped_cells_dir() -> Path:
    return Path(str(resources.files("twin.assets") / "cells"))


def _name(cell_name: object) -> str:
    if not isinstance(cell_name, str) or not cell_name or cell_name in (".", ".."):
        raise CellError(f"cell name: expected a non-empty name, got {cell_name!r}")
    if any(c in cell_name for c in "/\\:") or cell_name != cell_name.strip():
        raise CellError(f"cell name {cell_name!r}: expected a plain directory name")
    return cell_name


@dataclass(frozen=True)
class Cell:
    """A loaded cell: ``directory``, ``config`` (the parsed ``cell.json``) and helpers."""

    name: str
    directory: Path
    config: dict[str, Any] = field(repr=False)

    @property
    def urdf_path(self) -> Path:
        """The URDF, inside the cell directory (or inside the shipped assets for ``asset:``);
        ``PackageError`` for a reference that leaves it."""
        return _urdf_path(self.directory, self.config["robot"]["urdf"], f"cell {self.name!r}")

    @property
    def attachment_names(self) -> tuple[str, ...]:
        return tuple(self.config.get("attachments", {}))

    def attachment_elements(self, names: Sequence[str]) -> list[ToolBoxElement]:
        """The box elements (flange frame) of the named attachments; every name must be defined
        in the cell (``PlanningInputError`` otherwise). An empty list: no attachments."""
        if isinstance(names, str):
            raise PlanningInputError("attachments: expected a list of names, got one string")
        defined = self.config.get("attachments", {})
        unknown = [n for n in names if n not in defined]
        if unknown:
            raise PlanningInputError(
                f"attachments {unknown} are not defined in cell {self.name!r}; "
                f"expected some of {sorted(defined)}"
            )
        return [_element(e, n) for n in dict.fromkeys(names) for e in defined[n]["elements"]]

    def planner_parameters(self, profile: Profile | str) -> dict[str, Any]:
        p = _enum(Profile, profile, "profile")
        return dict(self.config.get("planner", {}).get(p.value, {}))

    def settings(
        self, profile: Profile | str = Profile.TESTING, **overrides: Any
    ) -> PlannerSettings:
        """``PlannerSettings`` of this cell and profile: the cell's parameters, then overrides."""
        p = _enum(Profile, profile, "profile")
        params = {k: v for k, v in self.planner_parameters(p).items() if k in _SETTINGS_FIELDS}
        return replace(PlannerSettings(self.name, p), **params, **overrides)

    @property
    def limits(self) -> dict[str, Any]:
        return dict(self.config.get("limits", {}))


_SETTINGS_FIELDS = set(PlannerSettings.__dataclass_fields__) - {"cell_name", "profile"}


def _element(spec: dict, name: str) -> ToolBoxElement:
    try:
        compliant = spec.get("compliant_box")
        box = None
        if compliant is not None:
            box = TransformedBox(np.array(compliant["transform"]), compliant["dimensions"])
        return ToolBoxElement(np.array(spec["transform"]), spec["rigid_box_dimensions"], box)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        if isinstance(e, PlanningInputError):
            raise PlanningInputError(f"attachment {name!r}: {e}") from None
        raise CellError(f"attachment {name!r}: malformed element {str(spec)[:200]} ({e})") from e


def find_cell(cell_name: str, cells_dir: str | Path | None = None) -> Path:
    """The directory of ``cell_name``: the user cells directory first, then the shipped cells.
    Raises ``CellError`` naming where it looked."""
    name = _name(cell_name)
    roots = [user_cells_dir(cells_dir), shipped_cells_dir()]
    for root in roots:
        if (root / name / CELL_FILE).is_file():
            return root / name
    raise CellError(f"no cell {name!r}: looked for {name}/{CELL_FILE} in {[str(r) for r in roots]}")


def load_cell(cell_name: str, cells_dir: str | Path | None = None) -> Cell:
    directory = find_cell(cell_name, cells_dir)
    return Cell(cell_name, directory, _read_config(directory / CELL_FILE, cell_name))


def _read_config(path: Path, name: str) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:  # not UTF-8, not JSON, nested too deeply
        what = "nested too deeply" if isinstance(e, RecursionError) else e
        raise CellError(f"{path}: not a readable JSON cell file ({what})") from e
    if not isinstance(config, dict):
        raise CellError(f"{path}: expected a JSON object, got {type(config).__name__}")
    if config.get("format") != FORMAT_NAME or config.get("version") != FORMAT_VERSION:
        raise CellError(f"{path}: expected format {FORMAT_NAME!r} version {FORMAT_VERSION}")
    if config.get("name") != name:
        raise CellError(f"{path}: names cell {config.get('name')!r}, expected {name!r}")
    robot = config.get("robot")
    urdf = robot.get("urdf") if isinstance(robot, dict) else None
    if not isinstance(urdf, str) or not urdf:
        raise CellError(f"{path}: robot.urdf must name the robot's URDF")
    for key in ("attachments", "limits", "planner"):
        if not isinstance(config.get(key, {}), dict):
            raise CellError(f"{path}: {key} must be a JSON object")
    for name, spec in config.get("attachments", {}).items():
        elements = spec.get("elements") if isinstance(spec, dict) else None
        if not isinstance(elements, list):
            raise CellError(f"{path}: attachment {name!r} needs a list of elements")
        for e in elements:
            _element(e, name)  # CellError / PlanningInputError naming the attachment
    for profile, params in config.get("planner", {}).items():
        if not isinstance(params, dict):
            raise CellError(f"{path}: planner.{profile} must be a JSON object")
    urdf_file = _urdf_path(path.parent, urdf, f"{path}: robot.urdf")
    base = _assets_dir() if urdf.startswith(ASSET_PREFIX) else path.parent
    for uri in _mesh_uris(urdf_file, f"{path}: robot.urdf"):
        _mesh_path(base, urdf_file, uri, f"{path}: robot.urdf mesh")
    return config


def _mesh_uris(urdf: Path, what: str) -> list[str]:
    """Every ``<mesh filename>`` of the URDF ``urdf`` (collision and visual); ``CellError`` for
    a URDF that is not readable XML."""
    try:
        root = ET.fromstring(urdf.read_bytes())
    except (OSError, ET.ParseError, ValueError, RecursionError) as e:
        raise CellError(f"{what}: {urdf.name} is not a readable URDF ({e})") from e
    return [m.get("filename") or "" for m in root.iter("mesh")]


def _mesh_path(base: Path, urdf: Path, uri: str, what: str) -> Path:
    """The file mesh reference ``uri`` of the URDF ``urdf`` names, through ``_contained`` in
    ``base`` (module doc); ``PackageError`` for one that leaves it, ``CellError`` for one that
    names no file inside it."""
    # the model loader resolves mesh paths from the URDF's real folder (links followed), which
    # _contained has already found inside base
    folder = urdf.resolve().parent.relative_to(Path(base).resolve())
    if uri.startswith(PACKAGE_SCHEME):
        rest = _safe_relative(uri[len(PACKAGE_SCHEME) :].lstrip("/"), f"{what} {uri!r}")
        for d in (folder, *folder.parents):
            candidate = _contained(base, (d / rest).as_posix(), f"{what} {uri!r}")
            if candidate.is_file():
                return candidate
        raise CellError(f"{what}: {uri!r} names no file inside {base}")
    name = uri[len(FILE_SCHEME) :] if uri.startswith(FILE_SCHEME) else uri
    if "://" in name or not name:
        raise PackageError(f"{what}: {uri!r} is not a file path inside the cell")
    rel = posixpath.normpath((folder / _relative_mesh(name, f"{what} {uri!r}")).as_posix())
    target = _contained(base, rel, f"{what} {uri!r}")
    if not target.is_file():
        raise CellError(f"{what}: {uri!r} names no file inside {base}")
    return target


def _relative_mesh(name: str, what: str) -> str:
    """``name`` if it is a relative path (``..`` allowed: the caller's ``_contained`` bounds
    it), else ``PackageError``."""
    if "\\" in name or PurePosixPath(name).is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise PackageError(f"{what}: an absolute path; expected a path inside the cell")
    return name


def _assets_dir() -> Path:
    return Path(str(resources.files("twin.assets")))


def _urdf_path(directory: Path, ref: str, what: str) -> Path:
    """Where URDF reference ``ref`` points: ``asset:<path>`` inside the shipped assets, else a
    path inside the cell ``directory``; both through ``_contained``."""
    if ref.startswith(ASSET_PREFIX):
        return _contained(_assets_dir(), ref[len(ASSET_PREFIX) :], what)
    return _contained(directory, ref, what)


def _contained(base: Path, name: str, what: str) -> Path:
    """``base / name`` for a portable relative ``name`` without ``..`` that, links resolved,
    stays inside ``base`` (``PackageError`` otherwise)."""
    rel = _safe_relative(name, what)
    target = Path(base) / rel
    if not target.resolve().is_relative_to(Path(base).resolve()):
        raise PackageError(f"{what}: {name!r} leads outside {base} (through a link)")
    return target


# ---------------------------------------------------------------------------------- generate
@dataclass
class GenerationContext:
    """What a stage gets: the cell, the settings, the output directory, the results of earlier
    stages (``data``), and ``report(fraction)`` for progress within the stage."""

    cell: Cell
    settings: PlannerSettings
    output: Path
    data: dict[str, Any]
    report: Callable[[float], None]


Stage = tuple[str, Callable[[GenerationContext], dict[str, Any]]]


def _stage_model(ctx: GenerationContext) -> dict[str, Any]:
    from twin.kinematics import ArmModel

    ctx.data["model"] = ArmModel.from_urdf(ctx.cell.urdf_path)
    return {}


def _stage_spheres(ctx: GenerationContext) -> dict[str, Any]:
    from twin.planning.collision.robot_model import RobotSpheres

    s = ctx.settings
    robot = RobotSpheres(ctx.data["model"], s.max_sphere_radius, s.max_sphere_slack, matrix=False)
    ctx.data["robot"] = robot
    bodies = {
        b.name: {
            "group": int(b.group),
            "centers": np.round(b.spheres.centers, 9).tolist(),
            "radii": np.round(b.spheres.radii, 9).tolist(),
            "slack": round(float(b.spheres.slack), 9),
        }
        for b in robot.urdf_bodies
    }
    return {"spheres.json": {"max_radius": s.max_sphere_radius, "bodies": bodies}}


def _stage_self_collision(ctx: GenerationContext) -> dict[str, Any]:
    from twin.planning.collision import self_collision

    samples = int(
        ctx.cell.planner_parameters(ctx.settings.profile).get("self_collision_samples", 2000)
    )
    model = ctx.data["model"]
    kept, closest = self_collision.generate(model, ctx.data["robot"], samples)
    ctx.report(1.0)
    return {
        "self_collision.json": {
            "urdf_sha256": self_collision.urdf_digest(model),
            "samples": samples,
            "clearance": self_collision.CLEARANCE,
            "kept_pairs": [list(p) for p in kept],
            "min_distance_m": {k: round(v, 6) for k, v in closest.items()},
        }
    }


#: The default stages: (stage text, function). Each returns {file name: JSON data}.
DEFAULT_STAGES: tuple[Stage, ...] = (
    ("Loading the robot model", _stage_model),
    ("Generating the sphere model", _stage_spheres),
    ("Generating the self-collision matrix", _stage_self_collision),
)


def generated_dir(settings: PlannerSettings, cells_dir: str | Path | None = None) -> Path:
    """Where ``generate`` writes: ``<user cells dir>/<cell>/generated/<profile>``."""
    return (
        user_cells_dir(cells_dir) / _name(settings.cell_name) / GENERATED / settings.profile.value
    )


def generate(
    settings: PlannerSettings,
    progress_callback: ProgressCallback | None = None,
    *,
    stages: Sequence[Stage] = DEFAULT_STAGES,
    cells_dir: str | Path | None = None,
) -> Path:
    """Generate the cell data of ``settings`` (cell and profile); returns the output directory.

    ``progress_callback(percent, stage_text)`` is called with non-decreasing percentages from 0
    to 100 (at each stage's start, at sub-progress reports and at the end: ``"Done"``). The
    files are written into a fresh directory that replaces the previous output only when every
    stage succeeded; ``manifest.json`` lists the stages and files.
    """
    if not isinstance(settings, PlannerSettings):
        raise PlanningInputError(
            f"settings: expected PlannerSettings, got {type(settings).__name__}"
        )
    cell = load_cell(settings.cell_name, cells_dir)
    out = generated_dir(settings, cells_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".generating-", dir=out.parent))
    last = [0.0]

    def progress(percent: float, text: str) -> None:
        last[0] = max(last[0], float(percent))
        if progress_callback is not None:
            progress_callback(last[0], text)

    try:
        ctx = GenerationContext(cell, settings, work, {}, lambda f: None)
        files: list[str] = []
        for i, (text, stage) in enumerate(stages):
            lo, hi = 100.0 * i / len(stages), 100.0 * (i + 1) / len(stages)
            progress(lo, text)
            ctx.report = lambda f, lo=lo, hi=hi, text=text: progress(
                lo + (hi - lo) * min(max(float(f), 0.0), 1.0), text
            )
            for fname, data in stage(ctx).items():
                _safe_relative(fname, f"stage {text!r} output")
                (work / fname).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
                files.append(fname)
        manifest = {
            "cell": cell.name,
            "profile": settings.profile.value,
            "stages": [text for text, _ in stages],
            "files": files,
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
    finally:
        if work.exists():
            shutil.rmtree(work)
    progress(100.0, "Done")
    return out


# ---------------------------------------------------------------------------------- packaging
def package_cell(
    cell_name: str,
    output_zip: str | Path,
    include_generated: Sequence[Profile | str] = (),
    *,
    cells_dir: str | Path | None = None,
) -> Path:
    """Zip cell ``cell_name`` into ``output_zip`` (entries under ``<cell_name>/``): its
    ``cell.json`` (the URDF reference rewritten to the copy inside the package), the URDF, the
    mesh files it names (``_packaged_meshes``), and the generated data of the profiles in
    ``include_generated``.

    Raises ``CellError`` for an unknown cell or missing generated data, ``FileExistsError`` if
    ``output_zip`` exists, ``FileNotFoundError`` if its folder does not.
    """
    cell = load_cell(cell_name, cells_dir)
    out = Path(output_zip)
    if out.exists() or out.is_symlink():
        raise FileExistsError(f"{out} already exists; expected a new file name")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"the folder {out.parent} does not exist; create it first")
    profiles = [_enum(Profile, p, "include_generated") for p in include_generated]
    generated = []
    for p in profiles:
        d = _contained(user_cells_dir(cells_dir) / cell.name, f"{GENERATED}/{p.value}", "generated")
        if not (d / MANIFEST).is_file():
            raise CellError(f"cell {cell.name!r} has no generated {p.value} data; run generate()")
        generated.append((p, d))
    config = json.loads(json.dumps(cell.config))
    urdf = cell.urdf_path
    config["robot"]["urdf"] = f"robot/{urdf.name}"
    with zipfile.ZipFile(out, "x", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{cell.name}/{CELL_FILE}", json.dumps(config, indent=1) + "\n")
        z.write(urdf, f"{cell.name}/robot/{urdf.name}")
        for name, mesh in _packaged_meshes(cell, urdf).items():
            z.write(mesh, f"{cell.name}/{name}")
        for p, d in generated:
            for f in sorted(d.iterdir()):
                if f.is_file() and not f.is_symlink():
                    z.write(f, f"{cell.name}/{GENERATED}/{p.value}/{f.name}")
    return out


def _packaged_meshes(cell: Cell, urdf: Path) -> dict[str, Path]:
    """The mesh files the URDF names (each through ``_mesh_path``), by the path inside the
    packaged cell where the packaged URDF (``robot/<file>``) finds them: ``robot/<rest>`` for
    ``package://<rest>`` (its first candidate), ``robot/<path>`` for a relative path
    (normalised); ``PackageError`` for one that would land outside the packaged cell."""
    ref = cell.config["robot"]["urdf"]
    base = _assets_dir() if ref.startswith(ASSET_PREFIX) else cell.directory
    what = f"cell {cell.name!r}: robot.urdf mesh"
    out: dict[str, Path] = {}
    for uri in _mesh_uris(urdf, what):
        source = _mesh_path(base, urdf, uri, what)
        if uri.startswith(PACKAGE_SCHEME):
            rel = uri[len(PACKAGE_SCHEME) :].lstrip("/")
        else:
            rel = uri[len(FILE_SCHEME) :] if uri.startswith(FILE_SCHEME) else uri
        name = posixpath.normpath(f"robot/{rel}")
        _safe_relative(name, f"{what} {uri!r} in the package")
        if name == f"robot/{urdf.name}":
            raise PackageError(f"{what} {uri!r} would replace the URDF in the package")
        out[name] = source
    return out


def _safe_relative(name: str, what: str) -> PurePosixPath:
    """A relative POSIX path without ``..``, drive letters or backslashes."""
    if "\\" in name or (len(name) > 1 and name[1] == ":"):
        raise PackageError(f"{what}: {name!r} is not a portable relative path")
    p = PurePosixPath(name)
    if p.is_absolute():
        raise PackageError(f"{what}: {name!r} is an absolute path")
    if any(part == ".." for part in p.parts):
        raise PackageError(f"{what}: {name!r} escapes its directory ('..')")
    return p


def _check_entries(z: zipfile.ZipFile) -> tuple[str, list[zipfile.ZipInfo]]:
    """The cell name and the entries of a package, every bound checked before anything is read
    (module doc); ``PackageError`` naming the first entry that breaks one."""
    infos = z.infolist()
    if not infos:
        raise PackageError("the package is empty")
    if len(infos) > MAX_PACKAGE_ENTRIES:
        raise PackageError(
            f"the package has {len(infos)} entries; expected at most {MAX_PACKAGE_ENTRIES}"
        )
    tops, seen, total, packed = set(), set(), 0, 0
    for info in infos:
        p = _safe_relative(info.filename, "package entry")
        mode = info.external_attr >> 16
        kind = stat.S_IFMT(mode)
        if stat.S_ISLNK(mode):
            raise PackageError(f"package entry {info.filename!r} is a symbolic link")
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise PackageError(f"package entry {info.filename!r} is not a regular file")
        if not p.parts or p.parts[0] in ("", "."):
            raise PackageError(f"package entry {info.filename!r} has no cell directory")
        if len(p.parts) > MAX_PATH_DEPTH:
            raise PackageError(
                f"package entry {info.filename!r} is {len(p.parts)} levels deep; "
                f"expected at most {MAX_PATH_DEPTH}"
            )
        if p in seen:
            raise PackageError(f"package entry {info.filename!r} appears more than once")
        seen.add(p)
        tops.add(p.parts[0])
        total += info.file_size
        packed += info.compress_size
    if len(tops) != 1:
        raise PackageError(f"a package holds exactly one cell directory, got {sorted(tops)}")
    if total > MAX_PACKAGE_BYTES:
        raise PackageError(f"the package unpacks to {total} bytes; at most {MAX_PACKAGE_BYTES}")
    if total > _RATIO_FLOOR_BYTES and total > MAX_EXPANSION_RATIO * max(packed, 1):
        raise PackageError(
            f"the package unpacks {packed} bytes to {total} ({total / max(packed, 1):.0f}x); "
            f"expected at most {MAX_EXPANSION_RATIO}x"
        )
    name = _name(tops.pop())
    if PurePosixPath(name, CELL_FILE) not in seen:
        raise PackageError(f"the package has no {name}/{CELL_FILE}")
    return name, infos


def _unpack(z: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path) -> None:
    """Copy one entry to the new file ``dest``, never more bytes than its header declares."""
    left = info.file_size
    with z.open(info) as src, open(dest, "xb") as dst:
        while chunk := src.read(min(_COPY_CHUNK, left + 1)):
            left -= len(chunk)
            if left < 0:
                raise PackageError(
                    f"package entry {info.filename!r} unpacks to more than the "
                    f"{info.file_size} bytes its header declares"
                )
            dst.write(chunk)
    if left:
        raise PackageError(
            f"package entry {info.filename!r} unpacks to {info.file_size - left} bytes, "
            f"its header declares {info.file_size}"
        )


def install_package(
    package: str | Path, cells_dir: str | Path | None = None, *, overwrite: bool = False
) -> Path:
    """Install a cell package (zip) into the user cells directory; returns the cell directory.

    Every entry is checked before anything is written: absolute paths, ``..`` components,
    links and special files are rejected (``PackageError``), and every file must land inside
    ``<cells dir>/<cell>/``. The cell is unpacked into a temporary directory beside the target
    and moved into place; an existing cell is replaced only with ``overwrite``.
    """
    root = user_cells_dir(cells_dir)
    try:
        z = zipfile.ZipFile(package)
    except _UNPACK_ERRORS as e:
        raise PackageError(f"{package}: not a readable zip archive ({e})") from e
    with z:
        name, infos = _check_entries(z)
        target = root / name
        if target.exists() and not overwrite:
            raise FileExistsError(
                f"cell {name!r} is already installed in {root}; pass overwrite=True"
            )
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".installing-", dir=root)).resolve()
        try:
            for info in infos:
                dest = (work / info.filename).resolve()
                if not dest.is_relative_to(work / name):
                    raise PackageError(f"package entry {info.filename!r} lands outside the cell")
                try:
                    if info.is_dir():
                        dest.mkdir(parents=True, exist_ok=True)
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    _unpack(z, info, dest)
                except PackageError:
                    raise
                except _UNPACK_ERRORS as e:  # bad CRC, truncated or bad data, a file
                    # and a directory of the same name, an unsupported or encrypted entry
                    raise PackageError(
                        f"package entry {info.filename!r}: cannot unpack ({type(e).__name__}: {e})"
                    ) from e
            _read_config(work / name / CELL_FILE, name)  # CellError: a bad cell.json
            if target.exists():
                shutil.rmtree(target)
            (work / name).rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target
