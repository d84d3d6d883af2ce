"""The backend registry: names, availability probes, and the default choice.

``sk.backends()`` (API.md section 4) reports, for every backend name, whether it runs here
and why not; it lives here so that no other module needs to know the backends' names.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from .config import current
from .errors import BackendError


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    needs: str
    probe: Callable[[], str | None]  # None when available, else the reason it is not

    @property
    def available(self) -> bool:
        return self.probe() is None


def _always() -> str | None:
    return None


@functools.cache
def _probe_c() -> str | None:
    from .build.toolchain import find_compiler

    cfg = current()
    return None if find_compiler(cfg.cc) else "no C compiler found ($CC, gcc, clang, cc)"


def _not_built() -> str | None:
    return "not built yet in this version of stencilkit (see README, Status)"


REGISTRY: dict[str, Backend] = {
    "numpy": Backend("numpy", "vectorized NumPy reference", "NumPy", _always),
    "c": Backend("c", "C99 + OpenMP via the system compiler, loaded in-process", "gcc or clang",
                 _probe_c),
    "numba": Backend("numba", "generated loops compiled by Numba", "numba", _not_built),
    "cuda": Backend("cuda", "CUDA C on CuPy arrays", "cupy, an NVIDIA GPU", _not_built),
    "opencl": Backend("opencl", "OpenCL C via PyOpenCL", "pyopencl", _not_built),
}

#: Backends that generate code today; the parametrized test suite runs over these.
IMPLEMENTED = ("numpy", "c")


@dataclass(frozen=True)
class BackendStatus:
    """What ``sk.backends()`` says of one backend; true when it can run here."""

    name: str
    available: bool
    reason: str | None  # why it cannot run here; None when it can
    description: str
    needs: str

    def __bool__(self) -> bool:
        return self.available

    def __str__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return f"{self.name:8} {state}  ({self.description}; needs {self.needs})"


def backends() -> dict[str, BackendStatus]:
    """Every backend of API.md section 4: whether it can run here and, if not, why."""
    out = {}
    for name, b in REGISTRY.items():
        reason = b.probe()
        out[name] = BackendStatus(name, reason is None, reason, b.description, b.needs)
    return out


def available() -> list[str]:
    return [n for n, b in REGISTRY.items() if b.available]


_warned_fallback = False


def resolve(name: str | None, stencil: str | None = None) -> str:
    """The backend to use: explicit name, else configured, else "c" when a compiler exists."""
    global _warned_fallback
    chosen = name or current().backend
    if chosen is None:
        if REGISTRY["c"].available:
            return "c"
        if not _warned_fallback:
            warnings.warn("stencilkit: no C compiler found; using the 'numpy' backend",
                          RuntimeWarning, stacklevel=3)
            _warned_fallback = True
        return "numpy"
    if chosen not in REGISTRY:
        raise BackendError(f"unknown backend {chosen!r}", stencil=stencil,
                           hint=f"use one of {sorted(REGISTRY)}")
    reason = REGISTRY[chosen].probe()
    if reason is not None:
        raise BackendError(f"backend {chosen!r} is not available: {reason}", stencil=stencil,
                           hint="install what it needs, or choose another backend")
    return chosen
