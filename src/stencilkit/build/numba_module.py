"""Generated Numba code as module files in the cache, imported like any module.

Numba caches a compiled function on disk only if it comes from a file (code made with
``exec`` has no file to key the cache by), so the generated source is stored as
``kernel.py`` of a cache entry (written in a staging directory, verified by its sha256 before
every load, like a C library) and imported from there; ``numba.njit(cache=True)`` then keeps
its machine code in that entry's ``__pycache__``, and a later process loads it instead of
compiling again. ``sk.cache.clear()`` removes both.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import io
import os
import pickletools
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from . import cache

ARTIFACT = "kernel.py"
#: Generated modules are named by their cache key: ``stencilkit_numba_<key>``.
PREFIX = "stencilkit_numba_"
_private: list[Path] = []


class _GeneratedModules(importlib.abc.MetaPathFinder):
    """Finds a generated module by name in the cache, verified, in any process: Numba's
    cache records the modules of the functions a cached function calls (our kernels, inlined
    into a user's ``cache=True`` function), and imports them by name when it loads it."""

    def find_spec(self, name, path=None, target=None):
        if not name.startswith(PREFIX):
            return None
        found = cache.verified_artifact(name[len(PREFIX):], ARTIFACT)
        if found is None:
            return None
        check_numba_cache(found.parent)
        return importlib.util.spec_from_file_location(name, found)


def install_finder() -> None:
    if not any(isinstance(f, _GeneratedModules) for f in sys.meta_path):
        sys.meta_path.append(_GeneratedModules())


def numba_version() -> str:
    import numba

    return numba.__version__


def identity() -> tuple[str, ...]:
    """What, besides the source, decides what Numba makes of a generated module."""
    return (PREFIX, numba_version())


def load_module(k: str, source: str) -> ModuleType:
    """The module ``source`` defines (memory-cached, stored in the disk cache under its back
    key ``k``: ``compile.keys.back_key`` of the source and ``identity()``)."""
    mod = cache.memory_get(k)
    if mod is None:
        def build(tmp: Path) -> None:
            (tmp / ARTIFACT).write_text(source)

        # What get_or_build loads may be the staging copy, which is renamed away right after:
        # it only checks the text; the module is imported from the published entry.
        cache.get_or_build(k, ARTIFACT, build, lambda path: path.read_text())
        path = cache.entry_dir(k) / ARTIFACT
        try:
            stored = path.read_text()
        except OSError:
            stored = None
        if stored != source:  # the entry could not be stored (or was removed meanwhile)
            path = _private_copy(k, source)
        else:
            check_numba_cache(path.parent)
        mod = _import(PREFIX + k, path)
        cache.memory_put(k, mod)
        from ..runtime.threads import sync_numba

        sync_numba()  # the module imported Numba: hand it sk.set_num_threads's count
    return mod  # type: ignore[return-value]


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, str(path))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # Numba's cache and pickling look functions up by module
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


# Numba's index file holds two pickles (its version, then the overloads), a data file one
_PICKLES = {".nbi": 2, ".nbc": 1}


def check_numba_cache(entry: Path) -> None:
    """Numba keeps the machine code of an entry's module in the entry's ``__pycache__`` and
    loads it with pickle, unverified: a file there of another user, writable by others, or
    not made of complete pickles (truncated, overwritten) would run its code or end in a raw
    UnpicklingError, EOFError or IndexError at the first call. Such a ``__pycache__`` is
    discarded (Numba compiles again and rewrites it), with a warning, as the cache does with
    an entry it does not trust. The pickles are walked, not loaded (``pickletools``)."""
    pycache = entry / "__pycache__"
    try:
        cache._check_node(pycache, os.lstat(pycache), "dir")
        for name in sorted(os.listdir(pycache)):
            path = pycache / name
            cache._check_node(path, os.lstat(path), "file")
            count = _PICKLES.get(path.suffix)
            if count is not None:
                data, _ = cache._read_checked(path)
                _walk_pickles(name, data, count)
    except FileNotFoundError:
        return  # none yet (or removed meanwhile)
    except (cache._Untrusted, OSError) as exc:
        reason = str(exc) if isinstance(exc, cache._Untrusted) else exc.strerror or str(exc)
        cache._warn_once(f"numba {entry.name}", f"stencilkit: Numba's cache in {pycache} is not "
                         f"loaded because {reason}; it is rebuilt")
        cache._discard(pycache)


def _walk_pickles(name: str, data: bytes, count: int) -> None:
    stream = io.BytesIO(data)
    try:
        for _ in range(count):
            for _op in pickletools.genops(stream):
                pass
    except Exception as exc:  # noqa: BLE001 - genops raises ValueError and others on garbage
        raise cache._Untrusted(f"{name} is not a complete pickle ({exc})") from None
    if stream.tell() != len(data):
        raise cache._Untrusted(f"{name} has {len(data) - stream.tell()} bytes after its data")


def _private_copy(k: str, source: str) -> Path:
    """A file only this process uses (Numba's cache then lives and dies with it)."""
    d = Path(tempfile.mkdtemp(prefix="stencilkit-numba-"))
    if not _private:
        atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _private])
    _private.append(d)
    path = d / f"{k[:24]}.py"
    path.write_text(source)
    return path


install_finder()  # at import of stencilkit (stencil.py imports this module)
