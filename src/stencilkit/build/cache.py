"""Code caches: in memory per process, and on disk shared by one user's processes.

Layout of the disk cache (format ``FORMAT``), all directories private to the user (0700)::

    <cache dir>/v<FORMAT>/<key[:2]>/<key>/   an entry: the library, its C source, meta.json
    <cache dir>/v<FORMAT>/locks/<key>.lock   per-key file locks (kept: unlinking a held lock
                                             would split its waiters over two files)
    <cache dir>/v<FORMAT>/staging/<key>-*/   builds under way

An entry is built in a staging directory, loaded from there, and moved into place with
``os.replace`` while holding the key's lock, so another process sees a complete entry or
none, and ``clear()`` in another process cannot pull a build from under its feet (it leaves
staging directories whose lock is held). Staging directories left by a killed build are
removed by the next process that takes their key's lock.

Trust. Loading a library runs its code, so an entry is loaded only once verified:

* the shard and entry directories are real directories owned by this user and not writable
  by others; the versioned root was made so when the process first used it, and the cache
  directory's ancestors are owned by this user or root and not writable by others unless
  sticky (checked once per process);
* ``meta.json`` and the library are regular files owned by this user, not writable by others;
* ``meta.json`` names this format, this key, this Python ABI and the artifact, and records
  the library's size and sha256, which the bytes read must match.

Verify-then-load by path has no window another user can exploit: the bytes hashed are read
through a descriptor whose owner and mode were checked, and no other non-root user can
rename anything on the path between the check and ``dlopen``, because every directory on it
is owned by us (or root) and closed to others (or sticky, like /tmp, where only an owner may
rename). Our own processes only replace a whole entry
with one they built and loaded themselves. A private copy per load would add a file write to
every warm start and close no further hole.

An entry that fails verification gives one warning and is discarded and rebuilt. A cache
directory that cannot be used (a file, read-only, someone else's, a foreign lock) gives one
warning and a private temporary cache for the rest of the process.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import stat
import sys
import sysconfig
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from filelock import FileLock, Timeout

from .._version import __version__
from ..config import current
from ..errors import BackendError
from ..log import logger

FORMAT = 2
META = "meta.json"
_LOCK_TIMEOUT = 900.0  # seconds; a build of one kernel takes seconds, so this means a stuck holder
_META_LIMIT = 1 << 16

T = TypeVar("T")


class CacheWarning(RuntimeWarning):
    """The disk cache could not be used as configured, or one of its entries was rebuilt."""


@dataclass
class _Stats:
    memory_hits: int = 0
    disk_hits: int = 0
    builds: int = 0


_stats = _Stats()
_memory: dict[str, object] = {}
_roots: dict[Path, Path] = {}  # configured cache directory -> versioned root in use
_warned: set[str] = set()
_swept: set[Path] = set()


class _Unusable(Exception):
    """The cache directory cannot hold entries (the message says why)."""


class _Untrusted(Exception):
    """An entry exists but fails verification (the message says why)."""


# ----------------------------------------------------------------------------- keys

@functools.cache
def python_abi() -> str:
    """What a compiled extension depends on in the interpreter (part of every key and entry)."""
    return " ".join([sys.implementation.cache_tag or sys.implementation.name,
                     str(sysconfig.get_config_var("SOABI")), extension_filename(""),
                     f"{sys.hexversion:x}"])


# C string literals are skipped so that only comments lose their line numbers
_C_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/', re.S)
_LINE_NUMBER = re.compile(r"(\.py):\d+(?::\d+)?")


def _without_line_numbers(text: str) -> str:
    """``text`` with ``file.py:LINE`` in C comments reduced to ``file.py``: generated code keeps
    its source locations for readers, but moving a kernel within its file must not rebuild it."""
    def strip(m: re.Match[str]) -> str:
        s = m.group(0)
        return _LINE_NUMBER.sub(r"\1", s) if s.startswith("/*") else s

    return _C_TOKENS.sub(strip, text) if "/*" in text else text


def key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in (f"stencilkit {__version__} cache v{FORMAT}", python_abi(), *parts):
        h.update(_without_line_numbers(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def extension_filename(stem: str) -> str:
    return stem + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")


# ----------------------------------------------------------------------------- memory

def memory_get(k: str) -> object | None:
    hit = _memory.get(k)
    if hit is not None:
        _stats.memory_hits += 1
    return hit


def memory_put(k: str, value: object) -> None:
    _memory[k] = value


# ----------------------------------------------------------------------------- the root

def _warn_once(tag: str, message: str) -> None:
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(message, CacheWarning, stacklevel=4)


def _ours(st: os.stat_result) -> bool:
    # Where there are no POSIX owners (Windows) the digest checks remain, not the owner checks.
    return not hasattr(os, "geteuid") or st.st_uid == os.geteuid()


def _owned_private_dir(path: Path, *, create: bool) -> None:
    """Make sure ``path`` is a directory of ours closed to others (creating it 0700)."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise _Unusable(f"{path} is not a directory")
    if not _ours(st):
        raise _Unusable(f"{path} belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


def _check_ancestors(base: Path) -> None:
    for p in (base, *base.parents):
        st = os.stat(p)
        if not _ours(st) and st.st_uid != 0:
            raise _Unusable(f"{p} belongs to another user (uid {st.st_uid})")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise _Unusable(f"{p} is writable by other users")


def _prepare(cache_dir: Path) -> Path:
    """The versioned root inside ``cache_dir``, created and checked; raises _Unusable."""
    try:
        base = Path(os.path.abspath(cache_dir))
        if not base.is_dir():
            os.makedirs(base, mode=0o700, exist_ok=True)
        base = base.resolve(strict=True)
        if not base.is_dir():
            raise _Unusable(f"{base} is not a directory")
        _check_ancestors(base)
        r = base / f"v{FORMAT}"
        _owned_private_dir(r, create=True)
        for sub in ("locks", "staging"):
            _owned_private_dir(r / sub, create=True)
        if not os.access(r / "staging", os.W_OK | os.X_OK):
            raise _Unusable(f"{r} is not writable")
        return r
    except OSError as exc:
        raise _Unusable(f"{exc.strerror or exc}: {exc.filename or cache_dir}") from None


def _fallback(configured: Path, reason: str) -> Path:
    try:
        tmp = Path(tempfile.mkdtemp(prefix="stencilkit-cache-"))
    except OSError as exc:
        raise BackendError(f"no directory for compiled code: the cache directory {configured} "
                           f"cannot be used ({reason}), nor a temporary one ({exc})",
                           hint="set STENCILKIT_CACHE_DIR to a directory of yours") from None
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    _warn_once(f"fallback {configured}",
               f"stencilkit: the cache directory {configured} cannot be used ({reason}); "
               f"compiled code goes to the private temporary directory {tmp} for this process "
               "(fix: set STENCILKIT_CACHE_DIR to a directory of yours)")
    try:
        return _prepare(tmp)
    except _Unusable as exc:
        raise BackendError(f"no usable directory for compiled code: {exc}",
                           hint="set STENCILKIT_CACHE_DIR to a directory of yours") from None


def root() -> Path:
    """The versioned cache directory in use: the configured one, or a private temporary one
    (with a warning) when the configured one cannot be used."""
    configured = current().cache_dir
    r = _roots.get(configured)
    if r is None:
        try:
            r = _prepare(configured)
        except _Unusable as exc:
            r = _fallback(configured, str(exc))
        _roots[configured] = r
    return r


def _abandon_root(r: Path, reason: str) -> None:
    """Stop using ``r`` (it failed while in use) for a private temporary cache."""
    configured = current().cache_dir
    if _roots.get(configured) == r:
        _roots[configured] = _fallback(configured, reason)


def entry_dir(k: str) -> Path:
    return root() / k[:2] / k


# ----------------------------------------------------------------------------- verification

def _check_node(path: Path, st: os.stat_result, kind: str) -> None:
    if kind == "dir" and not stat.S_ISDIR(st.st_mode) or kind == "file" and not stat.S_ISREG(st.st_mode):
        raise _Untrusted(f"{path.name} is not a {'directory' if kind == 'dir' else 'regular file'}")
    if not _ours(st):
        raise _Untrusted(f"{path.name} belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o022:
        raise _Untrusted(f"{path.name} is writable by other users")


def _read_checked(path: Path, limit: int | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of ``path``, read through a descriptor whose owner and mode were checked."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        _check_node(path, st, "file")
        if limit is not None and st.st_size > limit:
            raise _Untrusted(f"{path.name} is too large")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _meta(k: str, artifact: str, data: bytes) -> dict[str, object]:
    return {"format": FORMAT, "key": k, "python": python_abi(), "artifact": artifact,
            "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _verified(entry: Path, k: str, artifact: str) -> Path | None:
    """The library of the entry if it passes verification, None if there is no entry;
    raises _Untrusted when there is one that must not be loaded."""
    try:
        for d in (entry.parent, entry):
            _check_node(d, os.lstat(d), "dir")
        raw, _ = _read_checked(entry / META, _META_LIMIT)
        try:
            meta = json.loads(raw)
        except ValueError:
            raise _Untrusted("its metadata is not valid JSON") from None
        if not isinstance(meta, dict):
            raise _Untrusted("its metadata is not a JSON object")
        for field, want in (("format", FORMAT), ("key", k), ("python", python_abi()),
                            ("artifact", artifact)):
            if meta.get(field) != want:
                raise _Untrusted(f"it was built for {field} {meta.get(field)!r}, not {want!r}")
        data, _ = _read_checked(entry / artifact)
        if len(data) != meta.get("size"):
            raise _Untrusted(f"{artifact} has {len(data)} bytes, {meta.get('size')} were written")
        if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            raise _Untrusted(f"{artifact} does not match the digest recorded when it was built")
        return entry / artifact
    except FileNotFoundError:
        return None  # no entry, or clear() is removing it: a miss, not a fault
    except OSError as exc:
        raise _Untrusted(exc.strerror or str(exc)) from None


def verified_artifact(k: str, artifact: str) -> Path | None:
    """The path of ``artifact`` in the entry for ``k`` if there is one that passes
    verification (else None; an untrusted entry is left for the next build to replace)."""
    try:
        return _verified(entry_dir(k), k, artifact)
    except _Untrusted:
        return None


def _discard(path: Path) -> None:
    """Remove ``path`` (an entry, a shard or staging directory), first moving it aside so that
    nobody sees half of it; a name that cannot be moved is removed in place."""
    trash = path.parent / f".trash-{path.name}-{uuid.uuid4().hex[:12]}"
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    except OSError:
        trash = path
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            trash.unlink()


def _discard_untrusted(entry: Path) -> None:
    """Discard an entry that failed verification, or its whole shard if that is not ours."""
    try:
        _check_node(entry.parent, os.lstat(entry.parent), "dir")
    except (_Untrusted, OSError):
        _discard(entry.parent)
    else:
        _discard(entry)


_MISS = object()


def _try_load(r: Path, k: str, artifact: str, load: Callable[[Path], T],
              discard: bool) -> object:
    entry = r / k[:2] / k
    try:
        path = _verified(entry, k, artifact)
    except _Untrusted as exc:
        _warn_once(f"entry {k}", f"stencilkit: the cache entry {entry} is not loaded because "
                   f"{exc}; it is rebuilt")
        if discard:
            _discard_untrusted(entry)
        return _MISS
    if path is None:
        return _MISS
    try:
        value = load(path)
    except ImportError as exc:
        if path.exists():  # verified, yet it does not load: rebuild it rather than fail forever
            _warn_once(f"entry {k}", f"stencilkit: the cache entry {entry} does not load "
                       f"({exc}); it is rebuilt")
            if discard:
                _discard(entry)
        return _MISS
    _stats.disk_hits += 1
    return value


# ----------------------------------------------------------------------------- building

@contextlib.contextmanager
def _locked(r: Path, k: str) -> Iterator[None]:
    path = r / "locks" / f"{k}.lock"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise _Unusable(f"cannot use the lock file {path}: {exc.strerror}") from None
    else:
        if not stat.S_ISREG(st.st_mode) or not _ours(st):
            raise _Unusable(f"the lock file {path} is not a file of this user")
    lock = FileLock(str(path), mode=0o600, timeout=_LOCK_TIMEOUT)
    try:
        lock.acquire()
    except Timeout:
        raise _Unusable(f"the lock {path} was held for over {_LOCK_TIMEOUT:.0f} s") from None
    except OSError as exc:
        raise _Unusable(f"cannot take the lock {path}: {exc.strerror}") from None
    try:
        yield
    finally:
        lock.release()


def _sweep_staging(r: Path, k: str | None) -> None:
    """Remove staging directories of killed builds: those of ``k`` (whose lock we hold), or,
    with ``k`` None, those of every key whose lock is free."""
    staging = r / "staging"
    try:
        names = os.listdir(staging)
    except OSError:
        return
    for name in names:
        owner = name.split("-", 1)[0]
        if k is not None:
            if owner == k:
                _discard(staging / name)
            continue
        lock = FileLock(str(r / "locks" / f"{owner}.lock"), mode=0o600, timeout=0)
        try:
            lock.acquire()
        except (Timeout, OSError):
            continue  # a build under way (or a lock we cannot take): leave it
        try:
            _discard(staging / name)
        finally:
            lock.release()


def _publish(staging: Path, entry: Path) -> None:
    for _ in range(5):
        try:
            _owned_private_dir(entry.parent, create=True)
        except _Unusable:
            _discard(entry.parent)  # a shard that is not ours: never reuse it
            continue
        except FileNotFoundError:
            return  # the root itself is gone (cleared by hand); the build stays uncached
        if os.path.lexists(entry):
            _discard(entry)  # an entry that failed verification, or a concurrent clear's leftover
        try:
            os.replace(staging, entry)
            return
        except OSError:
            continue  # a concurrent clear() removed the shard, or another entry appeared
    _warn_once(f"publish {entry}", f"stencilkit: could not store {entry} in the cache; "
               "it was built and is used, but will be built again by the next process")


def _build_in(r: Path, k: str, artifact: str, build: Callable[[Path], None],
              load: Callable[[Path], T]) -> T:
    with _locked(r, k):
        hit = _try_load(r, k, artifact, load, discard=True)
        if hit is not _MISS:
            return hit  # type: ignore[return-value]
        _sweep_staging(r, k)
        try:
            staging = Path(tempfile.mkdtemp(prefix=f"{k}-", dir=r / "staging"))
        except OSError as exc:
            raise _Unusable(f"cannot create a build directory in {r}: {exc.strerror}") from None
        try:
            build(staging)
            data = (staging / artifact).read_bytes()
            fd = os.open(staging / META, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(_meta(k, artifact, data), f)
            # Loaded from the staging directory, which only this process writes: what is
            # loaded is what was built, and a concurrent clear() cannot remove it first.
            value = load(staging / artifact)
            _publish(staging, r / k[:2] / k)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        _stats.builds += 1
        return value


def get_or_build(k: str, artifact: str, build: Callable[[Path], None],
                 load: Callable[[Path], T]) -> T:
    """``load(path)`` of ``artifact`` in the verified entry for ``k``; when there is none (or
    it fails verification), ``build(tmpdir)`` writes every file of the entry into the
    directory it is given, and what it built is loaded, then stored.

    ``load`` may raise ImportError: from a stored entry that means rebuild it; from a
    fresh build the error propagates (and nothing is stored)."""
    r = root()
    if r not in _swept:
        _swept.add(r)
        _sweep_staging(r, None)
    hit = _try_load(r, k, artifact, load, discard=False)
    if hit is not _MISS:
        logger.debug("cache hit: %s of entry %s", artifact, k[:16])
        return hit  # type: ignore[return-value]
    logger.debug("cache miss: building %s of entry %s", artifact, k[:16])
    try:
        return _build_in(r, k, artifact, build, load)
    except _Unusable as exc:
        # Made again if it was only removed (by hand, under a running process), else given up
        # for a private temporary cache.
        configured = current().cache_dir
        _roots.pop(configured, None)
        try:
            r2 = _prepare(configured)
        except _Unusable as again:
            r2 = _fallback(configured, str(again))
        _roots[configured] = r2
        reason = str(exc)
    try:
        return _build_in(r2, k, artifact, build, load)
    except _Unusable as exc:
        reason = str(exc)
    _abandon_root(r2, reason)
    try:
        return _build_in(root(), k, artifact, build, load)
    except _Unusable as exc:
        raise BackendError(f"no usable directory for compiled code: {exc}",
                           hint="set STENCILKIT_CACHE_DIR to a directory of yours") from None


def load_extension(path: Path, module: str) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(module, str(path))
    spec = importlib.util.spec_from_file_location(module, str(path), loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------- wisdom
#
# Measured choices (build/tuning.py), one small JSON file per key under wisdom/: written
# atomically (a temporary file renamed over), read with a size limit, and a file that does
# not parse is a miss (measured again), never an error. clear() removes them with the rest.

_WISDOM = "wisdom"
_WISDOM_LIMIT = 1 << 14


def read_wisdom(k: str) -> dict[str, object] | None:
    """The record stored under ``k`` by ``write_wisdom``, or None."""
    path = root() / _WISDOM / f"{k}.json"
    try:
        data, _ = _read_checked(path, _WISDOM_LIMIT)
        record = json.loads(data)
    except (OSError, ValueError, _Untrusted):
        return None
    return record if isinstance(record, dict) else None


def write_wisdom(k: str, record: dict[str, object]) -> None:
    """Store ``record`` (JSON) under ``k``; a cache that cannot be written only warns."""
    directory = root() / _WISDOM
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{k[:16]}-", dir=directory)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(tmp, directory / f"{k}.json")
    except OSError as exc:
        _warn_once(f"wisdom {directory}", f"stencilkit: could not store a tuning choice in "
                   f"{directory} ({exc.strerror}); it is measured again by the next process")


# ----------------------------------------------------------------------------- maintenance

def info() -> dict[str, object]:
    """Where the cache is, how many entries it holds, and this process's hit counts."""
    r = root()
    entries = [p for p in r.glob("??/*") if p.is_dir() and not p.name.startswith(".")] \
        if r.exists() else []
    size = 0
    for e in entries:
        with contextlib.suppress(OSError):
            size += sum(f.stat().st_size for f in e.iterdir() if f.is_file())
    return {"directory": str(r), "disk_entries": len(entries), "disk_bytes": size,
            "memory_entries": len(_memory), "memory_hits": _stats.memory_hits,
            "disk_hits": _stats.disk_hits, "builds": _stats.builds}


def clear(memory: bool = True, disk: bool = True) -> None:
    """Remove cached code (loaded libraries stay loaded until the process ends).

    Builds under way in other processes are left to finish (their staging directories are
    kept, and they store their entry afresh)."""
    if memory:
        _memory.clear()
    if disk:
        r = root()
        with contextlib.suppress(FileNotFoundError):
            for child in os.listdir(r):
                if child not in ("locks", "staging"):
                    _discard(r / child)
        _sweep_staging(r, None)


def back_key(tag: str, source: str, toolchain: tuple[str, ...] | str, *inputs: str) -> str:
    """What decides the binary built from ``source``: the toolchain's identity and the other
    ``inputs`` compiled into it; ``tag`` names the kind of artifact ("c-point", ...)."""
    identity = (toolchain,) if isinstance(toolchain, str) else tuple(toolchain)
    return key(tag, source, *identity, *inputs)
