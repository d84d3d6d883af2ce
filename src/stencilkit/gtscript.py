"""The gtscript vocabulary: field types, axes, vertical policies, ``computation``/``interval``.

These objects are only *read* by the frontend (as annotations and in ``with`` statements);
calling a computation's definition as plain Python is not supported, as in GT4Py.
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass
from enum import Enum
from types import FunctionType

import numpy as np

from . import dtypes


class Axis(Enum):
    I = "I"  # noqa: E741
    J = "J"
    K = "K"

    def __getitem__(self, index: int) -> AxisIndex:
        """``I[0]``: the first index of the compute domain along I; ``I[-1]`` the last."""
        if self is Axis.K or index not in (0, -1):
            raise ValueError(f"write {self.value}[0] or {self.value}[-1] (then add or subtract "
                             f"an integer), got {self.value}[{index!r}]")
        return AxisIndex(self.value, index)


@dataclass(frozen=True)
class AxisIndex:
    """A position along I or J relative to the compute domain, as in gtscript: ``I[0] + 2`` is
    two points after its first index, ``I[-1] + 1`` the first point after its last."""

    axis: str
    index: int  # 0: from the start of the domain; -1: from its last point
    offset: int = 0

    def __add__(self, n: int) -> AxisIndex:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            return NotImplemented
        return AxisIndex(self.axis, self.index, self.offset + int(n))

    __radd__ = __add__

    def __sub__(self, n: int) -> AxisIndex:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            return NotImplemented
        return AxisIndex(self.axis, self.index, self.offset - int(n))

    def __str__(self) -> str:
        return f"{self.axis}[{self.index}]" + (f" {'+-'[self.offset < 0]} {abs(self.offset)}"
                                                if self.offset else "")


I, J, K = Axis.I, Axis.J, Axis.K
IJ = (Axis.I, Axis.J)
IJK = (Axis.I, Axis.J, Axis.K)


class Policy(Enum):
    PARALLEL = "PARALLEL"
    FORWARD = "FORWARD"
    BACKWARD = "BACKWARD"


PARALLEL, FORWARD, BACKWARD = Policy.PARALLEL, Policy.FORWARD, Policy.BACKWARD


@dataclass(frozen=True)
class FieldType:
    """``Field[dtype]`` (I, J, K), ``Field[IJ, dtype]`` or ``Field[K, dtype]``."""

    axes: tuple[Axis, ...]
    dtype: np.dtype
    data_dims: tuple[int, ...] = ()  # a vector (matrix, ...) per point: Field[(float, (8,))]

    def __repr__(self) -> str:
        dt = f"({self.dtype}, {self.data_dims})" if self.data_dims else str(self.dtype)
        return f"Field[{''.join(a.value for a in self.axes)}, {dt}]"


def _data_type(spec: object) -> bool:
    """Whether ``spec`` is gtscript's ``(dtype, (n, ...))``: a dtype with data dimensions."""
    return isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], tuple) \
        and all(isinstance(n, (int, np.integer)) for n in spec[1]) \
        and not isinstance(spec[0], (Axis, tuple, str))


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
        return FieldType(tuple(axes), dtypes.as_dtype(dtype), dims)


Field = _FieldFactory()


def computation(policy: Policy) -> None:
    raise RuntimeError("computation() is only meaningful inside an @sk.stencil definition")


def interval(*bounds: object) -> None:
    raise RuntimeError("interval() is only meaningful inside an @sk.stencil definition")


def horizontal(*regions: object) -> None:
    raise RuntimeError("horizontal() is not supported by stencilkit")


@dataclass(frozen=True)
class GTFunction:
    """A helper marked with ``@sk.function``; calls to it are inlined."""

    func: FunctionType
    externals: tuple[tuple[str, object], ...] = ()

    def __call__(self, *args: object) -> object:
        return self.func(*args)


def function(func: FunctionType) -> GTFunction:
    """``@sk.function``: a helper inlined into the computations that call it."""
    return GTFunction(func)


# gtscript's math names, so that definitions run unchanged after replacing the import.
sqrt, exp, log, log10, sin, cos, tan = np.sqrt, np.exp, np.log, np.log10, np.sin, np.cos, np.tan
arcsin, arccos, arctan = np.arcsin, np.arccos, np.arctan
sinh, cosh, tanh = np.sinh, np.cosh, np.tanh
arcsinh, arccosh, arctanh = np.arcsinh, np.arccosh, np.arctanh
floor, ceil, trunc = np.floor, np.ceil, np.trunc
isnan, isfinite, isinf = np.isnan, np.isfinite, np.isinf
mod = np.mod
abs = builtins.abs  # noqa: A001
min = builtins.min  # noqa: A001
max = builtins.max  # noqa: A001
pi = math.pi
