"""The gtscript vocabulary: a drop-in for ``from gt4py.cartesian import gtscript``.

Field types, axes, vertical policies, ``computation``/``interval``/``horizontal``/``region``,
``__INLINED``, ``compile_assert``, the math functions in gtscript's spellings, ``function``
and ``stencil`` (with GT4Py's backend names). The vocabulary lives in
:mod:`stencilkit.frontend.dsl` (a leaf the frontend reads) and is re-exported here, name
for name; this module adds the user entry point ``stencil()``, which builds on the whole
library, so that the frontend never imports it.
"""

from __future__ import annotations

# The F401 imports: names this module's namespace had before the vocabulary moved out (the
# modules and helpers it used), kept so that `from stencilkit.gtscript import *` still brings
# exactly what it brought.
import functools
import math  # noqa: F401
from dataclasses import dataclass  # noqa: F401
from enum import Enum  # noqa: F401
from types import FunctionType

import numpy as np  # noqa: F401

from . import dtypes, registry  # noqa: F401
from .errors import BackendError, StencilError, StencilSyntaxError, definition_trimmed, did_you_mean
from .frontend.dsl import (  # noqa: F401  (the vocabulary, re-exported)
    __INLINED,
    BACKWARD,
    DSL_NAMES,
    FORWARD,
    IJ,
    IJK,
    IK,
    JK,
    PARALLEL,
    Axis,
    AxisIndex,
    Field,
    FieldType,
    GTFunction,
    I,
    J,
    K,
    Policy,
    abs,
    absolute,
    acos,
    acosh,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctanh,
    asin,
    asinh,
    atan,
    atanh,
    cbrt,
    ceil,
    compile_assert,
    computation,
    cos,
    cosh,
    erf,
    erfc,
    exp,
    floor,
    function,
    gamma,
    horizontal,
    interval,
    isfinite,
    isinf,
    isnan,
    log,
    log10,
    max,
    maximum,
    min,
    minimum,
    mod,
    pi,
    pow,
    power,
    region,
    round,
    round_away_from_zero,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
    vocabulary,
)

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
            dtypes: dict[str, object] | None = None,  # noqa: F811 (GT4Py's keyword)
            **options: object):
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
        from .api.multistage import ComputationStencil
        from .frontend.computation import is_computation

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
