"""twin: a simulation-first digital twin of a six-axis arm.

Importing ``twin`` registers the Gymnasium environment ids ``twin.env.ENV_IDS``.

The backends and data live beside this folder in the repository (``sim/``, ``hardware/``,
``policies/``, ``assets/``, ``benchmarks/``) and are installed inside this package
(``twin.sim``, ``twin.hardware``, ...; see ``setup.py``). When ``twin`` is imported from a source
checkout (the repository root on ``sys.path``, as with ``python -m`` there), the checkout's root
joins this package's search path so that the same names resolve to those folders.
"""

import pathlib as _pathlib

_checkout = _pathlib.Path(__file__).resolve().parent.parent
if (_checkout / "setup.py").is_file() and (_checkout / "sim" / "__init__.py").is_file():
    __path__.append(str(_checkout))

from twin.interrupts import hold_from_start as _hold  # noqa: E402

_hold()  # the twin command holds SIGINT / SIGTERM back from here on (twin.cli.signals)

from twin.env.registration import register_envs as _register_envs  # noqa: E402

_register_envs()
