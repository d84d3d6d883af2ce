"""Arrays a point kernel reads from its closure or module globals (``c[i]``, ``w[1, 2]``).

Numba freezes such an array into the compiled code as a constant. Here it is frozen when
the kernel is first translated (its first call, ``generate`` or ``ir``): a constant index
reads the element now (an index outside the array is a ``StencilTypeError`` naming the
array, its shape and the line); an index computed in the kernel (a loop variable) selects
among the elements by a balanced tree of comparisons, which every backend prints as plain
code (C, CUDA and OpenCL compilers fold it into a table or a few compares). Negative indices
count from the end, as in Numba. Numba reads a later change to the array's contents in its
Python-mode calls (it recompiles on each call) but not in ``@njit`` callers (compiled once);
a stencilkit stencil, compiled once, behaves as the latter (docs/site/point-kernels.md).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import dtypes
from ..errors import StencilError, StencilTypeError
from ..ir import definition as d
from ..ir.core import Location

#: the most elements a table indexed by a computed index may hold (the selection is code)
MAX_SELECT = 4096

ErrorAt = Callable[..., StencilError]


def element(table: np.ndarray, name: str, index: tuple[d.Expr, ...], loc: Location | None,
            error: ErrorAt) -> d.Expr:
    """``name[index]`` of the captured array ``table`` as kernel IR."""
    if table.dtype not in dtypes.SUPPORTED:
        raise error(f"'{name}' is an array of {table.dtype}, a type stencils do not compute "
                    "in", f"convert it first, e.g. {name} = {name}.astype(np.float64)",
                    cls=StencilTypeError)
    if len(index) != table.ndim:
        raise error(f"'{name}' is {table.ndim}-dimensional (shape {table.shape}) but is "
                    f"indexed with {len(index)} index(es)", f"use {table.ndim} indices",
                    cls=StencilTypeError)
    frozen = table  # read into constants now: later changes are not seen
    constant = [_int_constant(i) for i in index]
    for k, (i, n) in enumerate(zip(constant, frozen.shape)):
        if i is not None and not -n <= i < n:
            raise error(f"index {i} is out of bounds for axis {k} of '{name}' (shape "
                        f"{frozen.shape})", f"use an index from {-n} to {n - 1}",
                        cls=StencilTypeError)
    if all(i is not None for i in constant):
        return d.Const(frozen[tuple(constant)].item(), dtype=frozen.dtype, loc=loc)
    if frozen.size > MAX_SELECT:
        raise error(f"'{name}' has {frozen.size} elements, too many to index with a computed "
                    f"index in a kernel (at most {MAX_SELECT})",
                    f"pass {name} as an argument and list it in standard_indexing",
                    cls=StencilTypeError)
    flat: d.Expr | None = None
    for k, (e, i, n) in enumerate(zip(index, constant, frozen.shape)):
        component = d.Const(i % n, dtype=dtypes.INT64, loc=loc) if i is not None \
            else _wrapped(e, n, loc)
        stride = int(np.prod(frozen.shape[k + 1:], dtype=np.int64))
        term = component if stride == 1 else d.BinOp(
            "*", component, d.Const(stride, dtype=dtypes.INT64, loc=loc), loc=loc)
        flat = term if flat is None else d.BinOp("+", flat, term, loc=loc)
    values = [d.Const(v, dtype=frozen.dtype, loc=loc) for v in frozen.ravel().tolist()]
    assert flat is not None, "an indexed array has at least one dimension"
    return _select(flat, values, 0, len(values), loc)


def _int_constant(e: d.Expr) -> int | None:
    if isinstance(e, d.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _wrapped(e: d.Expr, n: int, loc: Location | None) -> d.Expr:
    """``e``, or ``e + n`` where it is negative (Numba's wraparound)."""
    zero = d.Const(0, dtype=dtypes.INT64, loc=loc)
    return d.IfExp(d.Compare("<", e, zero, loc=loc),
                   d.BinOp("+", e, d.Const(n, dtype=dtypes.INT64, loc=loc), loc=loc), e, loc=loc)


def _select(flat: d.Expr, values: list[d.Const], lo: int, hi: int, loc: Location | None
            ) -> d.Expr:
    """The element ``flat`` of ``values[lo:hi]`` by bisection (log2 deep); an index outside
    the array, which Numba does not check either, gets the nearest end's element."""
    if hi - lo == 1:
        return values[lo]
    mid = (lo + hi) // 2
    return d.IfExp(d.Compare("<", flat, d.Const(mid, dtype=dtypes.INT64, loc=loc), loc=loc),
                   _select(flat, values, lo, mid, loc), _select(flat, values, mid, hi, loc),
                   loc=loc)
