"""Code caches: in memory per process, and on disk shared by processes.

Disk entries live in ``<cache dir>/v<FORMAT>/<key[:2]>/<key>/``. An entry is built in a
temporary directory beside it and moved into place with ``os.replace`` while holding a
per-key file lock, so a concurrent process either waits for the lock or sees a complete
entry, never half of one. The key hashes the front (IR, options, package version) and the
back (generated code, compiler identity and flags).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from filelock import FileLock

from .. import __version__
from ..config import current

FORMAT = 1


@dataclass
class _Stats:
    memory_hits: int = 0
    disk_hits: int = 0
    builds: int = 0


_stats = _Stats()
_memory: dict[str, object] = {}


def key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in (f"stencilkit {__version__} cache v{FORMAT}", *parts):
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


def root() -> Path:
    return current().cache_dir / f"v{FORMAT}"


def entry_dir(k: str) -> Path:
    return root() / k[:2] / k


def memory_get(k: str) -> object | None:
    hit = _memory.get(k)
    if hit is not None:
        _stats.memory_hits += 1
    return hit


def memory_put(k: str, value: object) -> None:
    _memory[k] = value


def extension_filename(stem: str) -> str:
    return stem + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def get_or_build(k: str, artifact: str, build: Callable[[Path], None]) -> Path:
    """Path of ``artifact`` in the entry for ``k``, running ``build(tmpdir)`` if it is missing.

    ``build`` writes every file of the entry into the directory it is given.
    """
    final = entry_dir(k)
    if (final / artifact).exists():
        _stats.disk_hits += 1
        return final / artifact
    final.parent.mkdir(parents=True, exist_ok=True)
    lock_dir = root() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_dir / f"{k}.lock")):
        if (final / artifact).exists():
            _stats.disk_hits += 1
            return final / artifact
        tmp = Path(tempfile.mkdtemp(prefix=f".{k[:8]}-", dir=final.parent))
        try:
            build(tmp)
            if final.exists():  # an incomplete entry from a crashed process
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        _stats.builds += 1
    return final / artifact


def load_extension(path: Path, module: str) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(module, str(path))
    spec = importlib.util.spec_from_file_location(module, str(path), loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def info() -> dict[str, object]:
    """Where the cache is, how many entries it holds, and this process's hit counts."""
    r = root()
    entries = [p for p in r.glob("??/*") if p.is_dir() and not p.name.startswith(".")] \
        if r.exists() else []
    size = sum(f.stat().st_size for e in entries for f in e.iterdir() if f.is_file())
    return {"directory": str(r), "disk_entries": len(entries), "disk_bytes": size,
            "memory_entries": len(_memory), "memory_hits": _stats.memory_hits,
            "disk_hits": _stats.disk_hits, "builds": _stats.builds}


def clear(memory: bool = True, disk: bool = True) -> None:
    """Remove cached code (loaded libraries stay loaded until the process ends)."""
    if memory:
        _memory.clear()
    if disk and root().exists():
        shutil.rmtree(root(), ignore_errors=True)
