"""Shipped data of the twin project (URDF, scenes, example configs), found with importlib.resources.

Works after a plain, non-editable install: the files are package data of ``assets``.
"""

from __future__ import annotations

import pathlib
from importlib import resources

__all__ = ["arm_urdf_path"]


def arm_urdf_path() -> pathlib.Path:
    """Path of the shipped arm URDF, ``assets/arm/twin_arm.urdf`` (see ``assets/arm/README.md``)."""
    return pathlib.Path(str(resources.files("twin.assets.arm").joinpath("twin_arm.urdf")))
