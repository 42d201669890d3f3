"""Package layout of the distribution (metadata is in pyproject.toml).

The repository keeps the backends and data beside ``twin/`` (``sim/``, ``hardware/``,
``policies/``, ``assets/``, ``benchmarks/``); the distribution installs each of them inside the
``twin`` package (``twin.sim``, ``twin.hardware``, ...), so an install adds exactly one top-level
import name, ``twin``, to site-packages. ``twin/__init__.py`` gives a source checkout the same
names.
"""

from setuptools import find_namespace_packages, find_packages, setup

#: Repository folder -> its import name inside ``twin``.
SUBPACKAGE_FOLDERS = {
    "sim": "twin.sim",
    "hardware": "twin.hardware",
    "policies": "twin.policies",
    "assets": "twin.assets",
    "benchmarks": "twin.benchmarks",
    "scenarios": "twin.scenarios",  # the shipped regression scenarios (data only)
}

packages = find_packages(include=["twin", "twin.*"])
package_dir = {"twin": "twin"}
for folder, name in SUBPACKAGE_FOLDERS.items():
    package_dir[name] = folder
    packages.append(name)
    # assets/planning holds data only: namespace discovery keeps it in the wheel.
    found = find_namespace_packages(folder, exclude=["*__pycache__*"])
    packages += [f"{name}.{sub}" for sub in found]

setup(packages=packages, package_dir=package_dir)
