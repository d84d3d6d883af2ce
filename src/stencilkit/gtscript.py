"""The gtscript vocabulary: a drop-in for ``from gt4py.cartesian import gtscript``.

Field types, axes, vertical policies, ``computation``/``interval``/``horizontal``/``region``,
``__INLINED``, ``compile_assert``, the math functions in gtscript's spellings, ``function``
and ``stencil`` (with GT4Py's backend names). These objects are only *read* by the frontend
(as annotations, in ``with`` statements, as callees); calling a definition as plain Python
is not supported, as in GT4Py.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import Enum
from types import FunctionType

import numpy as np

from . import dtypes, registry
from .errors import BackendError, StencilError, StencilSyntaxError, definition_trimmed, did_you_mean


@dataclass(frozen=True)
class Axis:
    """``I``, ``J`` or ``K``; ``I[0]``, ``I[-1] + 1`` name positions for horizontal regions."""

    name: str

    @property
    def value(self) -> str:
        return self.name

    def __getitem__(self, index: int) -> AxisIndex:
        """``I[0]``: the first index of the compute domain along I; ``I[-1]`` the last."""
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"{self.name}[...] takes an integer position, got {index!r}")
        return AxisIndex(self.name, int(index))

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class AxisIndex:
    """Position ``index`` of the compute domain along ``axis`` (negative: from the end),
    shifted by ``offset``: ``I[0] + 2`` is two points after its first index, ``I[-1] + 1``
    (``AxisIndex("I", -1, 1)``) the first point after its last."""

    axis: str
    index: int
    offset: int = 0

    def __add__(self, shift: int) -> AxisIndex:
        if not isinstance(shift, (int, np.integer)) or isinstance(shift, bool):
            return NotImplemented
        return AxisIndex(self.axis, self.index, self.offset + int(shift))

    __radd__ = __add__

    def __sub__(self, shift: int) -> AxisIndex:
        if not isinstance(shift, (int, np.integer)) or isinstance(shift, bool):
            return NotImplemented
        return AxisIndex(self.axis, self.index, self.offset - int(shift))

    def __repr__(self) -> str:
        return f"{self.axis}[{self.index}]" + (f" {'+-'[self.offset < 0]} {abs(self.offset)}"
                                                if self.offset else "")


I, J, K = Axis("I"), Axis("J"), Axis("K")
IJ, IK, JK, IJK = (I, J), (I, K), (J, K), (I, J, K)


class Policy(Enum):
    PARALLEL = "PARALLEL"
    FORWARD = "FORWARD"
    BACKWARD = "BACKWARD"


PARALLEL, FORWARD, BACKWARD = Policy.PARALLEL, Policy.FORWARD, Policy.BACKWARD


@dataclass(frozen=True)
class FieldType:
    """``Field[dtype]`` (I, J, K), ``Field[IJ, dtype]`` or ``Field[K, dtype]``.

    ``dtype`` is a string when symbolic (``Field["dtype"]``), resolved through ``dtypes=``
    when the stencil is defined (:meth:`resolved`)."""

    axes: tuple[Axis, ...]
    dtype: np.dtype | str
    data_dims: tuple[int, ...] = ()  # a vector (matrix, ...) per point: Field[(float, (8,))]

    def resolved(self, mapping: dict[str, object]) -> FieldType:
        if not isinstance(self.dtype, str):
            return self
        if self.dtype in mapping:
            return FieldType(self.axes, dtypes.as_dtype(mapping[self.dtype]), self.data_dims)
        # "float64" and the like
        return FieldType(self.axes, dtypes.as_dtype(self.dtype), self.data_dims)

    def __repr__(self) -> str:
        dt = f"({self.dtype}, {self.data_dims})" if self.data_dims else str(self.dtype)
        return f"Field[{''.join(a.value for a in self.axes)}, {dt}]"


def _data_type(spec: object) -> bool:
    """Whether ``spec`` is gtscript's ``(dtype, (n, ...))``: a dtype with data dimensions."""
    return isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], tuple) \
        and all(isinstance(n, (int, np.integer)) for n in spec[1]) \
        and not isinstance(spec[0], (Axis, tuple))


class _FieldFactory:
    def __getitem__(self, spec: object) -> FieldType:
        if isinstance(spec, tuple) and len(spec) == 2 and not _data_type(spec):
            axes, dtype = spec
        else:
            axes, dtype = IJK, spec
        if isinstance(axes, Axis):
            axes = (axes,)
        if isinstance(axes, str):
            axes = tuple(Axis(c) for c in axes)
        dims: tuple[int, ...] = ()
        if _data_type(dtype):
            dtype, shape = dtype  # type: ignore[misc]
            if not shape or not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                                    and n > 0 for n in shape):
                raise ValueError(f"data dimensions must be positive integers, got {shape!r}")
            dims = tuple(int(n) for n in shape)
        if isinstance(dtype, str):  # symbolic, resolved through dtypes=
            return FieldType(tuple(axes), dtype, dims)
        return FieldType(tuple(axes), dtypes.as_dtype(dtype), dims)


Field = _FieldFactory()


def _only_in_definitions(name: str) -> StencilSyntaxError:
    return StencilSyntaxError(f"{name}() is only meaningful inside a stencil definition",
                              hint="use it inside a function given to gtscript.stencil")


def computation(policy: Policy) -> None:
    raise _only_in_definitions("computation")


def interval(*bounds: object) -> None:
    raise _only_in_definitions("interval")


def horizontal(*regions: object) -> None:
    raise _only_in_definitions("horizontal")


class _Region:
    """``region[I[0], :]``: the subscript is kept as written; the frontend reads it."""

    def __getitem__(self, key: object) -> object:
        return key


region = _Region()


def __INLINED(condition: object) -> object:  # noqa: N802 (gtscript's spelling)
    """``if __INLINED(cond):`` selects a branch when the stencil is compiled."""
    return condition


def compile_assert(condition: object) -> None:
    """Fails the definition (``StencilSyntaxError``) when ``condition`` is false."""
    raise _only_in_definitions("compile_assert")


class GTFunction:
    """A helper marked with ``@sk.function`` / ``gtscript.function``; calls are inlined.

    A plain (mutable) object, so that decorators stacked on top of it (``typing.no_type_check``
    sets an attribute) keep working; the helper's own function is ``func``."""

    def __init__(self, func: FunctionType) -> None:
        self.func = func
        functools.update_wrapper(self, func, updated=())

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<gtscript.function {self.func.__qualname__}>"

    def __reduce__(self):
        from .adapters import reduce

        return reduce(self)  # by source, as the stencils that call it


def function(func: object) -> GTFunction:
    """``@sk.function``: a helper inlined into the computations that call it."""
    if isinstance(func, GTFunction):
        return func
    target = _unwrapped(func)
    if not isinstance(target, FunctionType):
        raise StencilSyntaxError(f"@function needs a Python function, got {func!r}",
                                 hint="decorate a plain `def` helper")
    return GTFunction(target)


def _unwrapped(obj: object) -> object:
    """The innermost function behind decorators that record ``__wrapped__``."""
    seen = set()
    while hasattr(obj, "__wrapped__") and id(obj) not in seen:
        seen.add(id(obj))
        obj = obj.__wrapped__  # type: ignore[attr-defined]
    return obj


# ------------------------------------------------------------------ stencil

#: GT4Py's backend names (and ours) -> the stencilkit backend that runs them (each backend's
#: registry module declares the GT4Py names it stands in for).
BACKEND_NAMES: dict[str, str] = registry.gt4py_names()

# GT4Py options that change how it builds or caches, never the results: accepted, ignored
# (but "verbose", which prints the build events as GT4Py does).
_IGNORED_OPTIONS = {"build_info", "format_source", "name", "rebuild", "cache_settings",
                    "raise_if_not_cached", "verbose", "oir_pipeline", "device_sync",
                    "skip_passes", "literal_int_precision", "literal_float_precision",
                    "add_profile_info", "clean", "debug_mode"}


def map_backend(name: str | None) -> str | None:
    """Our backend for a GT4Py (or stencilkit) backend name; None keeps the default."""
    if name is None:
        return None
    if name not in BACKEND_NAMES:
        raise BackendError(f"unknown backend {name!r}" + did_you_mean(name, BACKEND_NAMES),
                           hint=f"use one of {sorted(BACKEND_NAMES)}")
    return BACKEND_NAMES[name]


def stencil(backend: str | None = None, definition: FunctionType | None = None, *,
            externals: dict[str, object] | None = None,
            dtypes: dict[str, object] | None = None, **options: object):
    """``gtscript.stencil(backend, definition, externals=, dtypes=)``, also as a decorator."""
    unknown = sorted(set(options) - _IGNORED_OPTIONS)
    if unknown:
        raise StencilError(f"unknown stencil option(s) {unknown}" + did_you_mean(
            unknown[0], ["backend", "definition", "externals", "dtypes", *_IGNORED_OPTIONS]),
                           hint="use backend=, definition=, externals=, dtypes=")
    for precision in ("literal_int_precision", "literal_float_precision"):
        if options.get(precision, 64) != 64:
            raise StencilError(f"{precision}={options[precision]} is not supported",
                               hint="literals are 64-bit, as in GT4Py's default")
    chosen = map_backend(backend)

    def wrap(func: FunctionType):
        from .frontend.computation import is_computation
        from .multistage import ComputationStencil

        if not isinstance(func, FunctionType) or not is_computation(func):
            raise StencilSyntaxError(
                f"gtscript.stencil needs a definition made of `with computation(...)` blocks, "
                f"got {func!r}", hint="define `def name(a: Field[float], ...): with "
                                      "computation(PARALLEL), interval(...): ...`")
        comp = ComputationStencil(func, backend=chosen, externals=externals, dtypes=dtypes)
        comp.verbose = bool(options.get("verbose", False))  # build events on stderr, as GT4Py
        functools.update_wrapper(comp, func, updated=())
        return comp

    trimmed = definition_trimmed(wrap)
    return trimmed(definition) if definition is not None else trimmed


# ------------------------------------------------------------------ math

# gtscript's math functions, as the NumPy ufuncs GT4Py's "numpy" backend calls, so that
# definitions run unchanged after replacing the import (the frontend maps each to C).
sqrt, exp, log, log10 = np.sqrt, np.exp, np.log, np.log10
sin, cos, tan, sinh, cosh, tanh = np.sin, np.cos, np.tan, np.sinh, np.cosh, np.tanh
asin = arcsin = np.arcsin
acos = arccos = np.arccos
atan = arctan = np.arctan
asinh = arcsinh = np.arcsinh
acosh = arccosh = np.arccosh
atanh = arctanh = np.arctanh
floor, ceil, trunc, cbrt = np.floor, np.ceil, np.trunc, np.cbrt
round = np.rint  # noqa: A001  round half to even, as GT4Py (np.round) and C's rint
isnan, isfinite, isinf = np.isnan, np.isfinite, np.isinf
mod = np.mod  # floored, as GT4Py's np.remainder
pow = power = np.power  # noqa: A001
abs = absolute = np.abs  # noqa: A001
min = minimum = np.minimum  # noqa: A001  NaN-propagating, as GT4Py's np.minimum
max = maximum = np.maximum  # noqa: A001
erf, erfc, gamma = math.erf, math.erfc, math.gamma
pi = math.pi


def round_away_from_zero(x: object) -> object:
    """Nearest integer, halfway cases away from zero (the frontend expands it inline)."""
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


#: The names a definition sees even when its module did not import them (as in GT4Py).
DSL_NAMES = ("Field", "I", "J", "K", "IJ", "IK", "JK", "IJK", "PARALLEL", "FORWARD",
             "BACKWARD", "computation", "interval", "horizontal", "region", "__INLINED",
             "compile_assert", "sqrt", "exp", "log", "log10", "sin", "cos", "tan", "asin",
             "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "abs", "min",
             "max", "mod", "floor", "ceil", "trunc", "round", "round_away_from_zero", "cbrt",
             "erf", "erfc", "gamma", "isnan", "isinf", "isfinite", "pow", "arcsin", "arccos",
             "arctan", "arcsinh", "arccosh", "arctanh")


def vocabulary() -> dict[str, object]:
    """Name -> object for every DSL name (the fallback scope of definitions and helpers)."""
    g = globals()
    return {n: g[n] for n in DSL_NAMES}
