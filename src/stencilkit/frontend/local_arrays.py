"""``np.array([...])`` of values inside a point kernel, and the reductions Numba allows on it.

SAR speckle filters and image filters gather a window into an array and reduce it:
``v = np.array([a[-1, 0], a[0, 0], a[1, 0]]); return np.nanmean(v)``. Numba compiles this
inside ``@njit`` code (its Python-mode stencils reject ``np.array``). A kernel has no arrays
of its own here, so the elements become locals and each reduction becomes the scalar code
of Numba's implementation (``numba/np/arraymath.py``), in its order of operations:

- ``nanmean``: a float64 sum from 0.0 of the non-NaN elements, ``np.divide`` by their count;
- ``nansum``/``sum``: a sum from 0 in Numba's accumulator type (ints widen to int64);
- ``mean``: a sum from 0 (float64 for ints, else the element type), divided by the length,
  converted to that type;
- ``nanmin``/``nanmax``: the first element, replaced by each later non-NaN element unless
  the running value is strictly smaller (larger);
- ``min``/``max``: the first NaN met, else the smallest (largest) element;
- ``median``: an odd-even transposition sort, the middle element or the mean of the two
  middle ones, as float64; NaN when any element is NaN (NumPy's answer; Numba's quickselect returns an
  arbitrary element then, docs/numerics.md).

The element types unify to one array type, as ``np.array`` does in Numba. Reductions are
pure, so the statements computing one run just before the statement that uses it.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import dtypes
from ..analysis.typing import TypeLike
from ..ir import definition as d
from ..ir.core import Location, StrEnum


class Reduction(StrEnum):
    SUM = "sum"
    NANSUM = "nansum"
    MEAN = "mean"
    NANMEAN = "nanmean"
    MIN = "min"
    MAX = "max"
    NANMIN = "nanmin"
    NANMAX = "nanmax"
    MEDIAN = "median"


#: NumPy function names (``np.amax`` is ``np.max``) and array methods, by reduction
NUMPY_NAMES = {**{r.value: r for r in Reduction}, "amin": Reduction.MIN, "amax": Reduction.MAX}
METHODS = {"sum": Reduction.SUM, "mean": Reduction.MEAN, "min": Reduction.MIN,
           "max": Reduction.MAX}

Fresh = Callable[[str], str]  # a new local name, never a user's


def elements(values: list[d.Expr], fresh: Fresh, loc: Location | None
             ) -> tuple[list[d.Stmt], tuple[d.Name, ...]]:
    """Statements that evaluate ``values`` once, in order, into locals of their unified
    type; and those locals."""
    raw = [fresh("elt") for _ in values]
    stmts: list[d.Stmt] = [d.Assign(n, v, loc=loc) for n, v in zip(raw, values)]
    unified: d.Expr = d.Name(raw[-1], loc=loc)
    for n in reversed(raw[:-1]):  # typed, never evaluated: the unification of all elements
        unified = d.IfExp(d.Const(True, dtype=dtypes.BOOL), d.Name(n, loc=loc), unified, loc=loc)
    names = [fresh("elt") for _ in values]
    stmts += [d.Assign(n, d.Call(TypeLike.CAST_LIKE, (d.Name(r, loc=loc), unified), loc=loc),
                       loc=loc) for n, r in zip(names, raw)]
    return stmts, tuple(d.Name(n, loc=loc) for n in names)


def reduce(kind: Reduction, items: tuple[d.Name, ...], fresh: Fresh, loc: Location | None
           ) -> tuple[list[d.Stmt], d.Expr]:
    """Statements computing ``kind`` over ``items``, and the expression of the result."""
    out: list[d.Stmt] = []

    def var(prefix: str, value: d.Expr) -> d.Name:
        name = fresh(prefix)
        out.append(d.Assign(name, value, loc=loc))
        return d.Name(name, loc=loc)

    def update(acc: d.Name, value: d.Expr) -> None:
        out.append(d.Assign(acc.id, value, loc=loc))

    def isnan(x: d.Expr) -> d.Expr:  # also for integers, where it is always False
        return d.Compare("!=", x, x, loc=loc)

    def plus(a: d.Expr, b: d.Expr) -> d.Expr:
        return d.BinOp("+", a, b, loc=loc)

    def select(c: d.Expr, a: d.Expr, b: d.Expr) -> d.Expr:
        return d.IfExp(c, a, b, loc=loc)

    first = items[0]
    n = d.Const(len(items), dtype=dtypes.INT64, loc=loc)
    match kind:
        case Reduction.SUM | Reduction.NANSUM:
            acc = var("sum", d.Call(TypeLike.ACC_ZERO, (first,), loc=loc))
            for v in items:
                update(acc, plus(acc, v) if kind is Reduction.SUM
                       else select(isnan(v), acc, plus(acc, v)))
            return out, acc
        case Reduction.NANMEAN:
            acc = var("sum", d.Const(0.0, dtype=dtypes.FLOAT64, loc=loc))
            count = var("count", d.Const(0, dtype=dtypes.INT64, loc=loc))
            for v in items:
                update(acc, select(isnan(v), acc, plus(acc, v)))
                update(count, select(isnan(v), count,
                                     plus(count, d.Const(1, dtype=dtypes.INT64, loc=loc))))
            return out, d.Call("np.true_divide", (acc, count), loc=loc)
        case Reduction.MEAN:
            acc = var("sum", d.Call(TypeLike.MEAN_ZERO, (first,), loc=loc))
            for v in items:
                update(acc, plus(acc, v))
            return out, d.Call(TypeLike.CAST_LIKE, (d.Call("np.true_divide", (acc, n), loc=loc),
                                                    acc), loc=loc)
        case Reduction.MIN | Reduction.MAX:
            op = "<" if kind is Reduction.MIN else ">"
            best = var(kind.value, first)
            for v in items[1:]:
                better = d.BoolOp("or", isnan(v), d.Compare(op, v, best, loc=loc), loc=loc)
                update(best, select(isnan(best), best, select(better, v, best)))
            return out, best
        case Reduction.NANMIN | Reduction.NANMAX:
            op = "<" if kind is Reduction.NANMIN else ">"
            best = var(kind.value, first)
            for v in items[1:]:
                update(best, select(isnan(v), best,
                                    select(d.Compare(op, best, v, loc=loc), best, v)))
            return out, best
        case Reduction.MEDIAN:
            return _median(items, var, update, isnan, select, out, loc)
    raise AssertionError(kind)


def _median(items, var, update, isnan, select, out, loc):
    s = [var("sorted", v) for v in items]
    for p in range(len(s)):  # odd-even transposition: len(s) rounds sort any input
        for i in range(p % 2, len(s) - 1, 2):
            lo, hi = s[i], s[i + 1]
            keep = var("swap", d.Compare("<", hi, lo, loc=loc))
            low_value = var("low", select(keep, hi, lo))
            update(hi, select(keep, lo, hi))
            update(lo, low_value)
    half = len(s) // 2
    if len(s) % 2:
        middle: d.Expr = d.Cast(s[half], dtype=dtypes.FLOAT64, loc=loc)  # both of Numba's
        # branches return one type: float64 (the even one divides by an int)
    else:
        middle = d.BinOp("/", d.BinOp("+", s[half - 1], s[half], loc=loc),
                         d.Const(2, dtype=dtypes.INT64, loc=loc), loc=loc)
    any_nan: d.Expr = isnan(items[0])
    for v in items[1:]:
        any_nan = d.BoolOp("or", any_nan, isnan(v), loc=loc)
    nan = d.Const(float("nan"), dtype=dtypes.FLOAT64, loc=loc)
    return out, select(any_nan, nan, middle)
