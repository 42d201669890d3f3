"""Cells against bad files (issue 13 item 13): ``asset:`` paths through the containment check,
bounded packages (expansion ratio, entry count, path depth, size), and every zip failure
(duplicate names, lying size headers, broken archives) as a ``PackageError``. Real files in
tmp_path; nothing may be written or read outside the cell."""

from __future__ import annotations

import json
import struct
import warnings
import zipfile
from pathlib import Path

import pytest

from twin import assets
from twin.kinematics import UrdfError
from twin.planning import PlannerSettings
from twin.planning import cells as cells_mod
from twin.planning.cells import PackageError, generate, install_package, load_cell, package_cell

SECRET = "host secret: must never reach a package"


def cell_json(name: str, urdf: str) -> str:
    return json.dumps({"format": "twin-cell", "version": 1, "name": name, "robot": {"urdf": urdf}})


def make_zip(path: Path, entries, compression=zipfile.ZIP_DEFLATED) -> Path:
    """A zip of ``entries``: (name, data) pairs, written as given (duplicates included)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about duplicate names
        with zipfile.ZipFile(path, "w", compression=compression) as z:
            for name, data in entries:
                z.writestr(name, data)
    return path


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def host(tmp_path):
    """A host file outside every cell directory, and the relative ``asset:`` path to it."""
    secret = tmp_path / "secret.urdf"
    secret.write_text(SECRET)
    assets_dir = Path(str(assets.__path__[0])).resolve()
    depth = len(assets_dir.parts) - 1  # up to the file system root, then down to the secret
    return secret, "asset:" + "../" * depth + str(secret.resolve()).lstrip("/")


def test_an_asset_path_that_escapes_does_not_install(tmp_path, host):
    _secret, ref = host
    pkg = make_zip(tmp_path / "evil.zip", [("evil/cell.json", cell_json("evil", ref))])
    target = tmp_path / "cells"
    target.mkdir()
    with pytest.raises(PackageError, match=r"robot\.urdf.*escapes its directory"):
        install_package(pkg, target)
    assert files_under(target) == []


def test_package_cell_never_copies_a_host_file(tmp_path, host):
    _secret, ref = host
    root = tmp_path / "cells"
    for name, urdf in (("evil", ref), ("dotdot", "../../secret.urdf")):
        (root / name).mkdir(parents=True)
        (root / name / "cell.json").write_text(cell_json(name, urdf))
        with pytest.raises(PackageError, match="escapes its directory"):
            package_cell(name, tmp_path / f"{name}.zip", cells_dir=root)
        assert not (tmp_path / f"{name}.zip").exists()
    # a link inside the cell that points at the host file: refused too
    (root / "linked" / "robot").mkdir(parents=True)
    (root / "linked" / "robot" / "arm.urdf").symlink_to(host[0])
    (root / "linked" / "cell.json").write_text(cell_json("linked", "robot/arm.urdf"))
    with pytest.raises(PackageError, match=r"leads outside .*\(through a link\)"):
        load_cell("linked", root)
    with pytest.raises(PackageError, match="through a link"):
        package_cell("linked", tmp_path / "linked.zip", cells_dir=root)
    assert not (tmp_path / "linked.zip").exists()


def test_shipped_asset_references_still_resolve(tmp_path):
    cell = load_cell("twin_arm", tmp_path)
    assert cell.urdf_path.is_file() and cell.urdf_path.name == "twin_arm.urdf"


def test_a_zip_bomb_is_refused_before_anything_is_written(tmp_path):
    pkg = make_zip(
        tmp_path / "bomb.zip",
        [("bomb/cell.json", cell_json("bomb", "a.urdf")), ("bomb/a.urdf", bytes(8 << 20))],
    )
    assert pkg.stat().st_size < 64 * 1024  # 8 MiB of zeros deflate to a few KiB
    target = tmp_path / "cells"
    with pytest.raises(
        PackageError, match=r"unpacks .* to 8388\d+ \(\d+x\); expected at most 100x"
    ):
        install_package(pkg, target)
    assert not target.exists() or files_under(target) == []


def test_the_unpacked_size_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(cells_mod, "MAX_PACKAGE_BYTES", 1000)
    pkg = make_zip(
        tmp_path / "big.zip",
        [("big/cell.json", cell_json("big", "a.urdf")), ("big/a.urdf", b"x" * 2000)],
        compression=zipfile.ZIP_STORED,
    )
    with pytest.raises(PackageError, match=r"unpacks to 20\d\d bytes; at most 1000"):
        install_package(pkg, tmp_path / "cells")


def test_entry_count_and_path_depth_are_bounded(tmp_path):
    many = [("many/cell.json", cell_json("many", "a.urdf"))]
    many += [(f"many/f{i}.txt", "x") for i in range(cells_mod.MAX_PACKAGE_ENTRIES)]
    with pytest.raises(PackageError, match=r"1001 entries; expected at most 1000"):
        install_package(make_zip(tmp_path / "many.zip", many), tmp_path / "cells")
    deep = "deep/" + "/".join("abcdefgh") + ".txt"  # 9 components
    pkg = make_zip(
        tmp_path / "deep.zip", [("deep/cell.json", cell_json("deep", "a.urdf")), (deep, "x")]
    )
    with pytest.raises(PackageError, match=r"is 9 levels deep; expected at most 8"):
        install_package(pkg, tmp_path / "cells")


@pytest.mark.parametrize(
    "entries",
    [
        [("dup/a.urdf", "one"), ("dup/a.urdf", "two")],
        [("dup/a.urdf", "one"), ("dup/./a.urdf", "two")],  # the same path once normalised
    ],
)
def test_duplicate_names_are_a_package_error(tmp_path, entries):
    pkg = make_zip(tmp_path / "dup.zip", [("dup/cell.json", cell_json("dup", "a.urdf")), *entries])
    with pytest.raises(PackageError, match="appears more than once"):
        install_package(pkg, tmp_path / "cells")


def test_a_file_and_a_directory_of_the_same_name_is_a_package_error(tmp_path):
    pkg = make_zip(
        tmp_path / "clash.zip",
        [("clash/cell.json", cell_json("clash", "a.urdf")), ("clash/x", "f"), ("clash/x/y", "g")],
    )
    target = tmp_path / "cells"
    with pytest.raises(PackageError, match=r"'clash/x/y': cannot unpack"):
        install_package(pkg, target)
    assert files_under(target) == []


def _lie_about_size(path: Path, entry: str, size: int) -> None:
    """Rewrite the uncompressed size of ``entry`` in its local and central headers."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(entry)
    struct.pack_into("<I", data, info.header_offset + 22, size)  # local header: usize
    central = data.find(b"PK\x01\x02")
    while central >= 0:
        name_len = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46 : central + 46 + name_len] == entry.encode():
            struct.pack_into("<I", data, central + 24, size)  # central header: usize
            break
        central = data.find(b"PK\x01\x02", central + 4)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("declared", [10, 5000])
def test_a_lying_size_header_is_a_package_error(tmp_path, declared):
    """The header claims 10 bytes (an 8 MiB entry slipping past the bounds) or more than
    there is: either way, a PackageError and nothing larger than declared on disk."""
    pkg = make_zip(
        tmp_path / "liar.zip",
        [("liar/cell.json", cell_json("liar", "a.urdf")), ("liar/a.urdf", b"<robot/>" * 400)],
    )
    _lie_about_size(pkg, "liar/a.urdf", declared)
    with zipfile.ZipFile(pkg) as z:
        assert z.getinfo("liar/a.urdf").file_size == declared
    target = tmp_path / "cells"
    with pytest.raises(PackageError, match=r"'liar/a\.urdf'"):
        install_package(pkg, target)
    assert files_under(target) == []


def test_broken_archives_are_package_errors(tmp_path):
    good = make_zip(
        tmp_path / "good.zip",
        [("cut/cell.json", cell_json("cut", "a.urdf")), ("cut/a.urdf", b"<robot/>" * 4000)],
    )
    data = good.read_bytes()
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(PackageError, match="not a readable zip"):
        install_package(truncated, tmp_path / "cells")
    with zipfile.ZipFile(good) as z:
        info = z.getinfo("cut/a.urdf")
    damaged = bytearray(data)
    start = info.header_offset + 30 + len(info.filename) + 10  # inside the deflated data
    for i in range(start, start + 16):
        damaged[i] ^= 0xFF
    bad = tmp_path / "damaged.zip"
    bad.write_bytes(bytes(damaged))
    with pytest.raises(PackageError, match=r"'cut/a\.urdf': cannot unpack"):
        install_package(bad, tmp_path / "cells")
    assert files_under(tmp_path / "cells") == []


def test_generate_on_a_cyclic_urdf_fails_instead_of_hanging(tmp_path):
    text = Path(assets.arm_urdf_path()).read_text(encoding="utf-8")
    text = text.replace('<child link="link_1"/>', '<child link="base_link"/>', 1)
    root = tmp_path / "cells"
    (root / "loop" / "robot").mkdir(parents=True)
    (root / "loop" / "robot" / "arm.urdf").write_text(text)
    (root / "loop" / "cell.json").write_text(cell_json("loop", "robot/arm.urdf"))
    with pytest.raises(UrdfError, match=r"kinematic cycle through joints \['joint_1'\]"):
        generate(PlannerSettings("loop", "testing"), cells_dir=root)
    assert not (root / "loop" / "generated" / "testing").exists()
