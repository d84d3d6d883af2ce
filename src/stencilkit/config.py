"""Frozen options and ``configure()``: the only place that reads ``STENCILKIT_*`` variables."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import StencilError

_DUMP_STAGES = frozenset({"ir", "typed", "kernel", "code"})


def _env_dump() -> frozenset[str]:
    raw = os.environ.get("STENCILKIT_DUMP", "")
    stages = frozenset(s.strip().lower() for s in raw.split(",") if s.strip())
    if "all" in stages or "1" in stages:
        return _DUMP_STAGES
    return stages & _DUMP_STAGES


def _env_cache_dir() -> Path:
    explicit = os.environ.get("STENCILKIT_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("stencilkit"))


@dataclass(frozen=True)
class Config:
    """Process-wide defaults; stencils snapshot what they need when they build."""

    backend: str | None = field(default_factory=lambda: os.environ.get("STENCILKIT_BACKEND") or None)
    cache_dir: Path = field(default_factory=_env_cache_dir)
    dump: frozenset[str] = field(default_factory=_env_dump)
    cc: str | None = field(default_factory=lambda: os.environ.get("CC") or None)
    cflags: tuple[str, ...] = field(
        default_factory=lambda: tuple(os.environ.get("STENCILKIT_CFLAGS", "").split()))
    openmp: bool = field(default_factory=lambda: os.environ.get("STENCILKIT_OPENMP", "1") != "0")
    lazy: bool = False
    race: str = field(default_factory=lambda: os.environ.get("STENCILKIT_RACE", "auto"))
    #: The OpenCL device: None (first GPU, else first CPU), "P:D", or part of its name
    opencl_device: str | None = field(
        default_factory=lambda: os.environ.get("STENCILKIT_OPENCL_DEVICE") or None)
    #: OpenCL build options added to stencilkit's own (e.g. "-cl-opt-disable", which the
    #: test suite uses: PoCL then compiles a kernel about 2.5x faster, and runs it slower)
    opencl_options: tuple[str, ...] = field(
        default_factory=lambda: tuple(os.environ.get("STENCILKIT_OPENCL_OPTIONS", "").split()))
    #: The default of stencils' ``fast_math=`` (read when a stencil or kernel is defined):
    #: False, results bit-identical to "numpy"; True lets the compiled backends contract
    #: a * b + c into fused multiply-adds and reassociate (docs/numerics.md)
    fast_math: bool = field(
        default_factory=lambda: os.environ.get("STENCILKIT_FAST_MATH", "0") not in ("", "0"))
    #: keep stencilkit's own frames in the tracebacks of its errors (they are cut, as Numba
    #: cuts its own, so that the user's line is on top): for reports of stencilkit's bugs
    full_tracebacks: bool = field(
        default_factory=lambda: os.environ.get("STENCILKIT_FULL_TRACEBACKS", "0")
        not in ("", "0"))


_current = Config()
#: fast_math of the stencil being built: the backends read it through ``fast_math()``
_building_fast_math: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "stencilkit_fast_math", default=None)


def fast_math() -> bool:
    """Whether the code being built may contract and reassociate floating-point arithmetic:
    the building stencil's ``fast_math``, else the configured default."""
    value = _building_fast_math.get()
    return _current.fast_math if value is None else value


@contextlib.contextmanager
def building(fast_math: bool) -> Iterator[None]:
    """The build of a stencil whose option is ``fast_math``: what ``fast_math()`` says
    inside (only in this thread or task: a concurrent build elsewhere keeps its own)."""
    token = _building_fast_math.set(fast_math)
    try:
        yield
    finally:
        _building_fast_math.reset(token)


def checked_fast_math(value: object, stencil: str | None = None, loc: object = None) -> bool:
    """``fast_math=`` as given to a stencil or kernel (None: the configured default, read
    now), or a StencilError naming the stencil and where it is defined."""
    if value is None:
        return _current.fast_math
    if not isinstance(value, bool):
        raise StencilError(f"fast_math={value!r} is not a bool", stencil=stencil,
                           loc=loc,  # type: ignore[arg-type]
                           hint="pass fast_math=True (contraction allowed) or False "
                                "(bit-identical to 'numpy', the default)")
    return value


def current() -> Config:
    """The configuration in force."""
    return _current


def configure(**changes: object) -> Config:
    """Change process-wide defaults, e.g. ``sk.configure(backend="numpy")``; returns the new config."""
    global _current
    names = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(changes) - names)
    if unknown:
        raise StencilError(f"unknown configuration option(s) {unknown}",
                           hint=f"use one of {sorted(names)}")
    if "cache_dir" in changes and changes["cache_dir"] is not None:
        changes["cache_dir"] = Path(str(changes["cache_dir"])).expanduser()
    if "dump" in changes:
        d = changes["dump"]
        changes["dump"] = frozenset(d.split(",")) if isinstance(d, str) else frozenset(d or ())
    if "cflags" in changes and isinstance(changes["cflags"], str):
        changes["cflags"] = tuple(changes["cflags"].split())
    if "opencl_options" in changes and isinstance(changes["opencl_options"], str):
        changes["opencl_options"] = tuple(changes["opencl_options"].split())
    if "fast_math" in changes and not isinstance(changes["fast_math"], bool):
        raise StencilError(f"fast_math={changes['fast_math']!r} is not a bool",
                           hint="sk.configure(fast_math=True) or fast_math=False")
    was_lazy = _current.lazy
    _current = dataclasses.replace(_current, **changes)  # type: ignore[arg-type]
    if was_lazy and not _current.lazy:
        from .runtime import lazy

        lazy.flush()
    return _current
