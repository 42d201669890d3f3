"""Example configuration files (package data of ``assets``, found with ``importlib.resources``).

``tf_example.json``: transformer configuration in the vendor SDK's format
(``docs/formats/transformer-config.md``): that page's ``tf_wrench_config`` section verbatim and a
``tf_imu_config`` section for its IMU worked example (input and output axes on the moving
frame, output point 1 m along x from the input point).
"""

from __future__ import annotations

import pathlib
from importlib import resources

__all__ = ["tf_example_path"]


def tf_example_path() -> pathlib.Path:
    """Path of ``assets/config/tf_example.json``."""
    return pathlib.Path(str(resources.files("twin.assets.config").joinpath("tf_example.json")))
