"""Generated numba modules with a disk cache: ``load_generated(text, prefix)``.

Used by ``twin.dynamics.compiled`` and ``twin.transforms._compiled``: their kernels are Python
source text (generated or assembled from plain-arithmetic functions) with ``@njit(cache=True)``
decorators. The text is written once to ``$TWIN_CACHE_DIR`` (default ``~/.cache/twin``) under a
name made of the hash of the text, so that numba's cache beside it keeps the machine code and a
change of any part of the text is a new file (numba's own cache checks only the stamp of the one
file that holds a function, not the files of the functions it calls).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType


def enabled(variable: str) -> bool:
    """Whether compiled kernels are wanted (the environment ``variable`` not "0") and numba is
    importable."""
    if os.environ.get(variable, "1") == "0":
        return False
    return importlib.util.find_spec("numba") is not None


def cache_dir() -> Path:
    """``$TWIN_CACHE_DIR``, else ``~/.cache/twin``, else a per-user temporary directory."""
    env = os.environ.get("TWIN_CACHE_DIR")
    candidates = [Path(env)] if env else []
    candidates += [
        Path.home() / ".cache" / "twin",
        Path(tempfile.gettempdir()) / f"twin-{os.getuid()}",
    ]
    for path in candidates:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            return path
    raise OSError(f"no writable cache directory for compiled kernels among {candidates}")


def load_generated(text: str, prefix: str) -> ModuleType:
    """Import the module ``text`` (written to the cache directory as ``{prefix}_{hash}.py``);
    raises ``ImportError`` without numba."""
    import numba  # noqa: F401  (fail here, clearly, when numba is absent)

    name = f"{prefix}_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    path = cache_dir() / f"{name}.py"
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's cache re-imports it by name
    spec.loader.exec_module(module)
    return module
