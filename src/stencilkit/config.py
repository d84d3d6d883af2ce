"""Frozen options and ``configure()``: the only place that reads ``STENCILKIT_*`` variables."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import errors
from .errors import StencilError
from .ir.core import StrEnum

_DUMP_STAGES = frozenset({"ir", "typed", "kernel", "plan", "code", "tune", "abi"})


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


#: How a ParLoop with indirect increments avoids races: ``race=`` of ``configure`` and of a loop
RACE_MODES = ("auto", "color", "atomic")


class Autotune(StrEnum):
    """``autotune=`` of ``configure``: whether the C backend measures its machine-dependent
    variants (build/tuning.py, docs/performance.md "Autotuning")."""

    OFF = "off"  # the machine-derived defaults only, nothing measured
    ON = "on"  # calls of at least tuning.MIN_WORK points: measured once per machine, then
    # the stored choice ("wisdom" in the cache directory)
    MEASURE = "measure"  # measured again now, whatever is stored (and the choice stored)


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
    #: an ``Autotune`` value (STENCILKIT_AUTOTUNE); "on" measures only calls large enough to
    #: matter, so small calls (and the test suite) never pay for it
    autotune: str = field(
        default_factory=lambda: os.environ.get("STENCILKIT_AUTOTUNE", "on").strip().lower())
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


def _full_tracebacks() -> bool:
    return _current.full_tracebacks


errors.set_full_tracebacks(_full_tracebacks)
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


def checked_autotune(value: object, stencil: str | None = None, loc: object = None
                     ) -> str | None:
    """``autotune=`` as given to a stencil: an ``Autotune`` value, or None (the configured
    ``autotune``, read at each call), or a StencilError naming the stencil and where it is
    defined."""
    if value is None:
        return None
    if not isinstance(value, str) or value not in {a.value for a in Autotune}:
        raise StencilError(f"autotune={value!r} is not a tuning mode", stencil=stencil,
                           loc=loc,  # type: ignore[arg-type]
                           hint="pass autotune='off' (the machine's defaults), 'on' "
                                "(measured once per machine, then remembered) or 'measure' "
                                "(measured again now), or leave it out for sk.configure's")
    return Autotune(value).value


def current() -> Config:
    """The configuration in force."""
    return _current


# ---------------------------------------------------------------- checking a change
#
# Every field is checked by its annotation (``_by_type``), so a new field of a plain type
# needs no code here; ``_FIELD_CHECKS`` adds what a type cannot say (the names a field
# allows). Each check returns the normalized value or raises ``_Bad`` with what it expects.


class _Bad(Exception):
    """A value a field does not take; the message says what it takes."""


def _strings(value: object, sep: str | None) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(sep) if p.strip())
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _Bad("a string or a sequence of strings")


def _by_type(hint: object, value: object) -> object:
    """``value`` as the annotated type ``hint`` takes it (strings split where the type is a
    collection); ``_Bad`` if it does not fit."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in options:
        return None
    for t in options:
        origin = typing.get_origin(t) or t
        if t is bool and isinstance(value, (bool, np.bool_)):
            return bool(value)
        if t is int and isinstance(value, (int, np.integer)) and not isinstance(
                value, (bool, np.bool_)):
            return int(value)
        if t is float and isinstance(value, (int, float, np.integer, np.floating)) and not \
                isinstance(value, (bool, np.bool_)):
            return float(value)
        if t is str and isinstance(value, str):
            return value
        if t is Path and isinstance(value, (str, os.PathLike)) and str(value):
            return Path(value).expanduser()
        if origin is tuple:
            return _strings(value, None)
        if origin is frozenset:
            return frozenset(_strings(value, ","))
    raise _Bad(" or ".join(_KINDS.get(t, getattr(t, "__name__", str(t))) for t in options))


_KINDS = {bool: "True or False", int: "an int", float: "a number", str: "a string",
          Path: "a path (a str or os.PathLike)", type(None): "None"}


#: The backend names ``backend=`` takes (GT4Py's too) -> the backend each one means. The
#: registry installs its table with :func:`set_backend_names` when it is imported (it imports
#: this module, so this module cannot import it; the package's ``__init__`` imports both).
_backend_names: Callable[[], Mapping[str, str]] | None = None


def set_backend_names(lookup: Callable[[], Mapping[str, str]]) -> None:
    """Install the table ``configure(backend=...)`` checks names against."""
    global _backend_names
    _backend_names = lookup


def _check_backend(value: str | None) -> str | None:
    if value is None:
        return None
    if _backend_names is None:  # no registry imported: nothing to check against yet
        return value
    names = _backend_names()
    if value not in names:
        raise _Bad(f"a backend name ({', '.join(sorted(names))}) or None")
    return names[value]


def _check_dump(value: frozenset[str]) -> frozenset[str]:
    stages = frozenset(s.lower() for s in value)
    if "all" in stages:
        return _DUMP_STAGES
    if not stages <= _DUMP_STAGES:
        raise _Bad(f"stages among {sorted(_DUMP_STAGES)} or 'all'")
    return stages


def _check_race(value: str) -> str:
    if value not in RACE_MODES:
        raise _Bad(f"one of {RACE_MODES}")
    return value


def _check_autotune(value: str) -> str:
    if value not in {a.value for a in Autotune}:
        raise _Bad(f"one of {tuple(a.value for a in Autotune)}")
    return Autotune(value).value


_FIELD_CHECKS: dict[str, typing.Callable[[typing.Any], object]] = {
    "autotune": _check_autotune,
    "backend": _check_backend,
    "dump": _check_dump,
    "race": _check_race,
}


def _checked(changes: dict[str, object]) -> dict[str, object]:
    """Every change normalized, or a StencilError naming each bad one: nothing is applied
    unless everything is valid."""
    hints = typing.get_type_hints(Config)
    unknown = sorted(set(changes) - set(hints))
    if unknown:
        raise StencilError(f"unknown configuration option(s) {unknown}",
                           hint=f"use one of {sorted(hints)}")
    out, bad = {}, []
    for name, value in changes.items():
        try:
            v = _by_type(hints[name], value)
            check = _FIELD_CHECKS.get(name)
            out[name] = v if check is None else check(v)
        except _Bad as exc:
            bad.append(f"{name}={value!r} (it takes {exc})")
    if bad:
        raise StencilError("bad configuration value(s), nothing was changed: " + "; ".join(bad),
                           hint="pass values of the kinds named")
    return out


#: Called with (previous, new) after each change: the layers above subscribe (the lazy queue
#: runs what it holds when ``lazy`` goes off), since this module imports none of them
_listeners: list[Callable[[Config, Config], None]] = []


def on_change(listener: Callable[[Config, Config], None]) -> None:
    """Have ``listener(previous, new)`` called after every configuration change."""
    _listeners.append(listener)


def _install(new: Config) -> None:
    global _current
    previous, _current = _current, new
    for listener in tuple(_listeners):
        listener(previous, new)


class ConfigChange:
    """What ``configure()`` returns: the configuration now in force (its fields read as
    attributes) and, used in a ``with`` statement, a change undone on leaving the block."""

    __slots__ = ("config", "previous")

    def __init__(self, config: Config, previous: Config) -> None:
        self.config = config
        self.previous = previous

    def __getattr__(self, name: str) -> object:
        return getattr(self.config, name)

    def __repr__(self) -> str:
        return f"ConfigChange({self.config!r})"

    def __enter__(self) -> Config:
        return self.config

    def __exit__(self, *exc_info: object) -> None:
        _install(self.previous)  # also when the block raised: the exception goes on


def configure(**changes: object) -> ConfigChange:
    """Change process-wide defaults, e.g. ``sk.configure(backend="numpy")``: for good, or,
    as ``with sk.configure(...):``, inside the block only (the configuration in force before
    the call is restored when the block ends, also when it raises). An unknown option or a
    bad value raises ``StencilError`` and changes nothing. The configuration is one per
    process, not per thread."""
    checked = _checked(changes)
    previous = _current
    _install(dataclasses.replace(previous, **checked))  # type: ignore[arg-type]
    return ConfigChange(_current, previous)
