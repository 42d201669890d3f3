"""The parts of a MoveIt SRDF the twin reads: ``<disable_collisions link1= link2= reason=/>``.

Each element names a pair of links that the self-collision check never tests (links that
cannot touch, or touch by design). Link names must be links of the URDF; an unknown name is
refused with ``UrdfError`` naming the file, the link and the closest URDF link.
"""

from __future__ import annotations

import pathlib
import xml.etree.ElementTree as ET

from twin.kinematics.urdf import UrdfError
from twin.names import closest


def srdf_beside(urdf_path: str | pathlib.Path) -> pathlib.Path | None:
    """``<urdf stem>.srdf`` in the URDF's folder, if that file exists."""
    path = pathlib.Path(urdf_path).with_suffix(".srdf")
    return path if path.is_file() else None


def disabled_pairs(
    path: str | pathlib.Path, links: tuple[str, ...] | list[str]
) -> frozenset[tuple[str, str]]:
    """The disabled link pairs of the SRDF at ``path``, each sorted ``(a, b)``; ``links``: the
    URDF's link names (every name in the file must be one of them)."""
    path = pathlib.Path(path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise UrdfError(f"cannot read SRDF {path}: {e}") from e
    known = set(links)
    pairs = set()
    for i, el in enumerate(root.iter("disable_collisions")):
        names = (el.get("link1"), el.get("link2"))
        for key, name in zip(("link1", "link2"), names):
            if name is None:
                raise UrdfError(f"{path}: <disable_collisions> {i} has no {key} attribute")
            if name not in known:
                raise UrdfError(
                    f"{path}: <disable_collisions> {i} {key}={name!r} is not a link of the "
                    f"URDF{closest(name, known)}"
                )
        pairs.add(tuple(sorted(names)))
    return frozenset(pairs)
