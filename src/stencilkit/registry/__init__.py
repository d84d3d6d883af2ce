"""The backend registry: one module per backend, availability, and the default choice.

Each module of this package declares one backend (``base.Backend``: name, probe,
capabilities, pieces: the stage functions the compile driver runs); ``REGISTRY`` lists them
in contract.md's order (section 4). Nothing outside this package compares backend names:
the rest of the package asks the chosen ``Backend`` for its capabilities and stages.
``sk.backends()`` (contract.md section 4) reports, for every backend, whether it runs here
and why not.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from .. import config
from ..config import current
from ..errors import BackendError
from . import c, cuda, numba, numpy, opencl
from .base import KINDS, Backend, Capabilities, KindStages, PerKind, Pieces, Stages

__all__ = ["KINDS", "REGISTRY", "Backend", "BackendStatus", "Capabilities", "KindStages",
           "PerKind", "Pieces", "Stages", "available", "backends", "exporter", "gt4py_names",
           "implemented", "resolve"]

REGISTRY: dict[str, Backend] = {m.BACKEND.name: m.BACKEND
                                for m in (numpy, c, numba, cuda, opencl)}

#: The default when none is configured: the first available one in this order.
_PREFERRED = ("c", "numpy")


@dataclass(frozen=True)
class BackendStatus:
    """What ``sk.backends()`` says of one backend; true when it can run here."""

    name: str
    available: bool
    reason: str | None  # why it cannot run here; None when it can
    description: str
    needs: str
    detail: str | None = None  # what else the probe found (e.g. "gcc has no OpenMP: ...")

    def __bool__(self) -> bool:
        return self.available

    def __str__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        if self.available and self.detail:
            state += f" ({self.detail})"
        return f"{self.name:8} {state}  ({self.description}; needs {self.needs})"


def backends() -> dict[str, BackendStatus]:
    """Every backend of contract.md section 4: whether it can run here and, if not, why. A
    backend with a run-time compiler is available only once it built and ran a one-line
    kernel here (``base.Backend.probe``)."""
    out = {}
    for name, b in REGISTRY.items():
        reason = b.probe()
        detail = b.detail() if reason is None else None
        out[name] = BackendStatus(name, reason is None, reason, b.description, b.needs, detail)
    return out


def available() -> list[str]:
    return [n for n, b in REGISTRY.items() if b.available]


def implemented() -> list[str]:
    """Backends this version generates code for, available here or not: the parametrized
    test suite runs on each (skipped, with the probe's reason, where it cannot run)."""
    return [n for n, b in REGISTRY.items() if b.built]


def gt4py_names() -> dict[str, str]:
    """GT4Py's backend names (and ours) -> the stencilkit backend that runs them."""
    out = {}
    for name, b in REGISTRY.items():
        out[name] = name
        out.update((alias, name) for alias in b.gt4py_names)
    return out


config.set_backend_names(gt4py_names)  # what configure(backend=...) checks names against


def exporter() -> str:
    """The backend whose generated source ``sk.export`` writes out (a C translation unit)."""
    return next(n for n, b in REGISTRY.items()
                if b.built and b.capabilities.exports_c)  # type: ignore[union-attr]


_warned_fallback = False


def resolve(name: str | None, stencil: str | None = None, *, generate: bool = False) -> Backend:
    """The backend to use: explicit name, else configured, else the preferred available one
    (a C compiler found: "c"; else "numpy", with a warning once). ``generate``: only its
    source is wanted, which a built backend generates even where it cannot run (e.g.
    "cuda" without a GPU)."""
    global _warned_fallback
    chosen = name or current().backend
    if chosen is None:
        first = next(n for n in _PREFERRED if REGISTRY[n].available)
        if first != _PREFERRED[0] and not _warned_fallback:
            warnings.warn(f"stencilkit: {REGISTRY[_PREFERRED[0]].probe()}; using the "
                          f"{first!r} backend", RuntimeWarning, stacklevel=3)
            _warned_fallback = True
        return REGISTRY[first]
    if chosen not in REGISTRY:
        chosen = gt4py_names().get(chosen, chosen)  # GT4Py's names, wherever one is named
    if chosen not in REGISTRY:
        import difflib

        close = difflib.get_close_matches(str(chosen).lower(), [*REGISTRY, *gt4py_names()], 1)
        raise BackendError(f"unknown backend {chosen!r}" + (
            f"; did you mean {close[0]!r}?" if close else ""), stencil=stencil,
            hint=f"use one of {sorted(REGISTRY)}")
    backend = REGISTRY[chosen]
    reason = backend.probe()
    if reason is not None and not (generate and backend.built):
        raise BackendError(f"backend {chosen!r} is not available: {reason}", stencil=stencil,
                           hint="install what it needs, or choose another backend")
    return backend
