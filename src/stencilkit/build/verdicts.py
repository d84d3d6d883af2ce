"""What the backends' probes found, remembered so that a probe costs its work once.

A probe (``registry/*.py``) builds and runs a one-line kernel with the backend's real
compiler. Its verdict is kept for the process by the caller, and here on disk when the probe
succeeded, under a key naming everything the verdict depends on: the compiler's files (path,
size and modification time, so a reinstalled or upgraded compiler has another key), its
options, the Python ABI and the CPU. A later process with the same key pays a file read.

Failures are not stored unless the caller says the key names everything a repair would
change (``failures=True``): a machine being repaired (a compiler installed, a driver fixed)
is probed again by the next process, and a stale success is harmless where a stale failure
would hide a backend for good (the build that follows a wrong success still fails with its
own error). Verdicts live in ``<cache>/probes/<key>.json``, in the cache's private directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ..errors import BackendError

_FORMAT = 1
_LOCK_TIMEOUT = 300.0  # seconds: PoCL's check starts up to three interpreters


@dataclass(frozen=True)
class Verdict:
    """A probe's finding: ``reason`` is None when the backend works here, else why it does not;
    ``detail`` is what the probe learnt on the way (for OpenCL: the CPU name PoCL needs)."""

    reason: str | None
    detail: str = ""
    lasting: bool = True  # False: true for this process only (e.g. a check timed out)


def file_identity(path: str | os.PathLike[str] | None) -> str:
    """A file's real path, size and modification time ("missing" when there is none)."""
    if path is None:
        return "missing"
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return f"{path}: missing"
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def cpu_identity() -> str:
    """The machine and its CPU's model and feature flags, hashed."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine() + platform.processor()
    model = next((ln for ln in lines if ln.startswith(("model name", "cpu model"))), "")
    flags = next((ln for ln in lines if ln.startswith(("flags", "Features"))), "")
    return platform.machine() + hashlib.sha256((model + flags).encode()).hexdigest()[:12]


def _path(kind: str, identity: Iterable[str]) -> Path:
    from .cache import key, root

    return root() / "probes" / f"{kind}-{key('probe', str(_FORMAT), kind, *identity)}.json"


def _load(path: Path) -> Verdict | None:
    try:
        st = os.lstat(path)
        if not (os.path.isfile(path) and st.st_size < 4096) or (
                hasattr(os, "geteuid") and st.st_uid != os.geteuid()):
            return None
        data = json.loads(path.read_text())
        reason = data.get("reason")
        if data.get("format") == _FORMAT and (reason is None or isinstance(reason, str)):
            return Verdict(reason, str(data.get("detail", "")))
    except (OSError, ValueError, AttributeError):
        pass
    return None


def _store(path: Path, verdict: Verdict) -> None:
    # A verdict that cannot be stored is found again by the next process: never an error.
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".verdict-")
        with os.fdopen(fd, "w") as f:
            json.dump({"format": _FORMAT, "reason": verdict.reason, "detail": verdict.detail}, f)
        os.replace(tmp, path)


def remembered(kind: str, identity: Iterable[str], probe: Callable[[], Verdict], *,
               failures: bool = False) -> Verdict:
    """The stored verdict of ``kind`` for ``identity``, else ``probe()`` (stored if it
    found the backend working, or with ``failures`` whatever it found)."""
    identity = tuple(identity)
    try:
        path = _path(kind, identity)
    except (OSError, BackendError):  # no usable cache directory: remember nothing
        return probe()
    hit = _load(path)
    if hit is not None:
        return hit
    # One process probes while the others wait and read its verdict (pytest-xdist's workers
    # all probe at collection); a lock that cannot be had is no reason not to probe.
    lock = FileLock(str(path.with_suffix(".lock")), mode=0o600, timeout=_LOCK_TIMEOUT)
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        lock.acquire()
    except (Timeout, OSError):
        return _probe_and_store(path, probe, failures)
    try:
        hit = _load(path)
        return hit if hit is not None else _probe_and_store(path, probe, failures)
    finally:
        lock.release()


def _probe_and_store(path: Path, probe: Callable[[], Verdict], failures: bool) -> Verdict:
    verdict = probe()
    if verdict.lasting and (verdict.reason is None or failures):
        _store(path, verdict)
    return verdict
