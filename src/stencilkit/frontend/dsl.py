"""The gtscript DSL's vocabulary: the objects a computation's definition names.

Field types, axes, vertical policies, ``computation``/``interval``/``horizontal``/``region``,
``__INLINED``, ``compile_assert``, the math functions in gtscript's spellings and
``function``. These objects are only *read* by the frontend (as annotations, in ``with``
statements, as callees); calling a definition as plain Python is not supported, as in GT4Py.

A leaf under the frontend (it imports only dtypes and errors), so that the frontend can read
the vocabulary without importing the user entry point: :mod:`stencilkit.gtscript`
re-exports every name here and adds ``stencil()``. How a ``function`` helper pickles is
registered by the pickling adapter (``copyreg``), which sits above this layer.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import Enum
from types import FunctionType
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import StencilSyntaxError


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
            dtype, shape = dtype
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
        obj = obj.__wrapped__
    return obj


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


def round_away_from_zero(x: Any) -> Any:
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
