"""A per-machine cache of computed arrays: what costs tens of milliseconds to build and is the same in every run
(the anchor tables of `table_family`), kept so that a new process does not build it again.

Location: ``$RESPROP_CACHE_DIR``, else ``$XDG_CACHE_HOME/resprop``, else ``~/.cache/resprop``; ``RESPROP_CACHE=0``
turns it off.  An entry is one ``.npz`` file (never unpickled) named by the sha256 of its key, which holds the
namespace, the inputs, the versions of NumPy and resprop, and the sha256 of the source files that compute it.
Changing the code or the inputs therefore makes a new entry, and nothing is ever read stale.  Files are written
atomically through `resprop.numeric.engine.output.write_cache_file`.  A file that cannot be read, or whose arrays
do not have the expected names, is ignored and rewritten.  A cache directory that cannot be created or written
(read-only home, a file in its place) turns the cache off for the process with one warning.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import warnings
from pathlib import Path

import numpy as np

_DISABLED: set[str] = set()
_LOCK = threading.Lock()


def cache_dir() -> Path | None:
    """The cache directory, or None when the cache is off."""
    if os.environ.get("RESPROP_CACHE", "1").strip() in ("0", "false", "no", "off"):
        return None
    root = os.environ.get("RESPROP_CACHE_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "resprop"


@functools.lru_cache(maxsize=32)
def source_hash(*modules: str) -> str:
    """sha256 of the source files of the named modules (what computes an entry)."""
    import importlib

    h = hashlib.sha256()
    for name in modules:
        mod = importlib.import_module(name)
        path = getattr(mod, "__file__", None)
        h.update(name.encode())
        if path and os.path.exists(path):
            h.update(Path(path).read_bytes())
    return h.hexdigest()


def _path(namespace: str, key: dict) -> Path | None:
    root = cache_dir()
    if root is None or str(root) in _DISABLED:
        return None
    from resprop import __version__

    full = {"namespace": namespace, "numpy": np.__version__, "resprop": __version__, **key}
    digest = hashlib.sha256(json.dumps(full, sort_keys=True, default=str).encode()).hexdigest()
    return root / namespace / f"{digest[:40]}.npz"


def load(namespace: str, key: dict, names: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """The arrays stored under (namespace, key), or None (absent, off, unreadable or not these arrays)."""
    path = _path(namespace, key)
    if path is None or not path.is_file() or path.is_symlink():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if set(data.files) != set(names):
                return None
            return {n: np.array(data[n]) for n in names}
    except (OSError, ValueError, EOFError, KeyError):
        return None


def store(namespace: str, key: dict, arrays: dict[str, np.ndarray]) -> None:
    """Keep ``arrays`` under (namespace, key); a directory that cannot be written turns the cache off."""
    path = _path(namespace, key)
    if path is None:
        return
    from resprop.numeric.engine.output import OutputPathError, write_cache_file

    try:
        write_cache_file(path, arrays)
    except (OSError, OutputPathError) as exc:
        with _LOCK:
            root = str(cache_dir())
            if root not in _DISABLED:
                _DISABLED.add(root)
                warnings.warn(f"resprop: the cache directory {root} cannot be written ({exc}); continuing without "
                              "it (set RESPROP_CACHE_DIR, or RESPROP_CACHE=0)", RuntimeWarning, stacklevel=2)


__all__ = ["cache_dir", "load", "store", "source_hash"]
