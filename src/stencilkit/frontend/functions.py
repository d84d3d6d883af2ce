"""The functions a kernel may call, by the Python object they resolve to.

Each supported callable maps to a canonical name used in the IR (``"math.sqrt"``,
``"np.minimum"``, ``"min"``); type constructors map to a cast to their dtype.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes

MATH_UNARY = ("sqrt", "exp", "log", "log10", "log2", "log1p", "expm1", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
              "fabs", "erf", "erfc", "gamma", "floor", "ceil", "trunc", "isnan", "isinf", "isfinite")
MATH_BINARY = ("pow", "atan2", "hypot", "copysign", "fmod")
NP_UNARY = ("sqrt", "exp", "exp2", "log", "log10", "log2", "log1p", "expm1", "sin", "cos",
            "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
            "arctanh", "floor", "ceil", "trunc", "rint", "fabs", "abs", "absolute", "sign",
            "isnan", "isinf", "isfinite", "square", "cbrt", "negative")
NP_BINARY = ("power", "minimum", "maximum", "fmin", "fmax", "arctan2", "hypot", "copysign",
             "fmod", "mod", "remainder", "floor_divide", "true_divide", "divide", "add",
             "subtract", "multiply")
BUILTINS = {"abs": 1, "min": -1, "max": -1}

#: canonical name -> number of arguments (-1: two or more)
ARITY: dict[str, int] = {
    **{f"math.{n}": 1 for n in MATH_UNARY},
    **{f"math.{n}": 2 for n in MATH_BINARY},
    **{f"np.{n}": 1 for n in NP_UNARY},
    **{f"np.{n}": 2 for n in NP_BINARY},
    **BUILTINS,
}

_BY_ID: dict[int, str] = {}
for _n in MATH_UNARY + MATH_BINARY:
    _BY_ID[id(getattr(math, _n))] = f"math.{_n}"
for _n in NP_UNARY + NP_BINARY:
    _BY_ID.setdefault(id(getattr(np, _n)), f"np.{_n}")
for _n in BUILTINS:
    _BY_ID[id(getattr(builtins, _n))] = _n

_CASTS: dict[int, np.dtype] = {id(float): dtypes.FLOAT64, id(int): dtypes.INT64,
                               id(bool): dtypes.BOOL, id(complex): dtypes.COMPLEX128}
for _t in dtypes.SUPPORTED:
    _CASTS[id(_t.type)] = _t

#: Constants reachable as attributes of math / numpy.
CONSTANT_ATTRS = {"pi", "e", "tau", "inf", "nan"}


def canonical_name(obj: object) -> str | None:
    """The IR name of a supported function object, or None."""
    return _BY_ID.get(id(obj))


def cast_target(obj: object) -> np.dtype | None:
    """The dtype a type constructor (``float``, ``np.float32``, ``numba.float32``,
    ``numba.types.int64``...) converts to, or None."""
    found = _CASTS.get(id(obj))
    return found if found is not None else _numba_scalar_type(obj)


def _numba_scalar_type(obj: object) -> np.dtype | None:
    """The dtype of one of Numba's scalar type objects, read from its name: numba is never
    imported here (the object in the kernel's scope shows the user's code imported it)."""
    if not type(obj).__module__.startswith("numba.core.types"):
        return None
    name = getattr(obj, "name", None)
    if not isinstance(name, str):
        return None
    try:
        t = np.dtype(name)  # 'float32', 'int64', 'bool', 'complex128' (intp is 'int64')
    except TypeError:
        return None
    return t if t in dtypes.SUPPORTED else None


def is_signbit(obj: object) -> bool:
    return obj is np.signbit


def supported_names() -> str:
    return ", ".join(sorted({n.split(".")[-1] for n in ARITY}))
