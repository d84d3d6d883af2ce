"""Type inference with Numba's rules, and insertion of explicit casts.

Requires: a single-exit point kernel (no ``Return``) and the argument types of a call.
Ensures: every expression has a dtype; operands of every operator have the operator's operand
type (casts are explicit ``Cast`` nodes); conditions are bool; each local variable has one
type, the unification of everything assigned to it (iterated to a fixed point, as Numba does);
``return_type`` is the type of the result variable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..dtypes import DType
from ..errors import StencilTypeError
from ..ir import definition as d
from ..ir.core import Location, StrEnum
from ..ir.definition import RESULT


@dataclass(frozen=True)
class ArgType:
    """The type of one argument: an array (``ndim >= 1``) or a scalar (``ndim == 0``)."""

    dtype: DType
    ndim: int = 0

    @property
    def is_array(self) -> bool:
        return self.ndim > 0

    def __str__(self) -> str:
        return f"array({self.dtype}, {self.ndim}d)" if self.ndim else str(self.dtype)


class TypeLike(StrEnum):
    """Calls the frontend writes where a value's type depends on types known only here (the
    reductions over ``np.array([...])`` in a kernel, ``frontend.local_arrays``). Typing
    replaces each by a constant or a cast, so no later pass or printer sees one."""

    ACC_ZERO = "sk.acc_zero"  # 0 in Numba's accumulator type of sum(x): ints widen to int64
    MEAN_ZERO = "sk.mean_zero"  # 0 in the type of mean(x): float64 for ints, else x's type
    CAST_LIKE = "sk.cast_like"  # (x, ref): x converted to ref's type (ref is not evaluated)


def _accumulator(t: DType) -> DType:
    """Numba's ``get_accumulator_type``: bools and narrower integers sum in the 64-bit one."""
    if dtypes.is_bool(t):
        return dtypes.INT64
    if t.kind in "iu" and t.itemsize < 8:
        return np.dtype(np.int64 if t.kind == "i" else np.uint64)
    return t


def _type_like(func: TypeLike, args: tuple[d.Expr, ...], loc: Location | None) -> d.Expr:
    t = args[-1].dtype
    assert t is not None, "typed before the frontend expands it"
    if func is TypeLike.CAST_LIKE:
        return cast(args[0], t)
    if func is TypeLike.MEAN_ZERO and (dtypes.is_bool(t) or t.kind in "iu"):
        t = dtypes.FLOAT64
    elif func is TypeLike.ACC_ZERO:
        t = _accumulator(t)
    return d.Const(np.zeros((), t).item(), dtype=t, loc=loc)


# Function typing ------------------------------------------------------------------------

_MATH_BOOL = {"math.isnan", "math.isinf", "math.isfinite"}
_MATH_TO_INT = {"math.floor", "math.ceil", "math.trunc"}
_SKIPPED_LOOP_CHARS = set("egGOmMSUVa")  # float16, long double, objects, datetimes, strings


def _ufunc_loop(func: np.ufunc, args: list[DType]) -> tuple[list[DType], DType] | None:
    """The first loop of ``func`` whose inputs every argument casts to safely (Numba's choice)."""
    for sig in func.types:
        ins, out = sig.split("->")
        if _SKIPPED_LOOP_CHARS & set(sig):
            continue
        in_types = [np.dtype(c) for c in ins]
        if all(np.can_cast(a, t, "safe") for a, t in zip(args, in_types)):
            return in_types, np.dtype(out[0])
    return None


def call_signature(func: str, args: list[DType]) -> tuple[list[DType], DType]:
    """(operand types the arguments are cast to, result type) of a call."""
    if func in ("min", "max"):
        t = args[0]
        for a in args[1:]:
            t = dtypes.unify(t, a)
        if dtypes.is_complex(t):
            raise StencilTypeError(f"{func}() is not defined for complex numbers")
        return [t] * len(args), t
    if func == "abs":
        (a,) = args
        if dtypes.is_bool(a):
            return [dtypes.INT64], dtypes.INT64
        if dtypes.is_complex(a):
            return [a], np.dtype(f"f{a.itemsize // 2}")
        return [a], a
    module, _, name = func.partition(".")
    if module == "math":
        if any(dtypes.is_complex(a) for a in args):
            raise StencilTypeError(f"{func}() does not accept complex numbers",
                                   hint="use the numpy function (np.sqrt, ...) for complex values")
        if func in _MATH_BOOL:
            return list(args), dtypes.BOOL
        if func in _MATH_TO_INT:
            (a,) = args
            return [a], dtypes.INT64
        t = args[0]
        for a in args[1:]:
            t = dtypes.unify(t, a)
        t = t if dtypes.is_float(t) else dtypes.FLOAT64
        return [t] * len(args), t
    ufunc = getattr(np, name)
    found = _ufunc_loop(ufunc, args)
    if found is None:
        raise StencilTypeError(f"{func}() has no implementation for {', '.join(map(str, args))}")
    return found


# The typer ---------------------------------------------------------------------------------


def _t(e: d.Expr) -> DType:
    """The dtype of an expression this pass has typed (every ``Typer.expr`` result is)."""
    assert e.dtype is not None, f"untyped expression {e!r}"
    return e.dtype


def cast(e: d.Expr, t: DType) -> d.Expr:
    """``e`` converted to ``t`` (constants are converted now, exactly, as NumPy would)."""
    if e.dtype == t:
        return e
    if isinstance(e, d.Const):
        with np.errstate(all="ignore"):
            v = np.array(e.value, dtype=e.dtype).astype(t).item()
        return d.Const(v, dtype=t, loc=e.loc)
    return d.Cast(e, dtype=t, loc=e.loc)


def truth(e: d.Expr) -> d.Expr:
    """``e`` as a bool condition (Python truthiness)."""
    if e.dtype == dtypes.BOOL:
        return e
    zero = d.Const(np.zeros((), e.dtype).item(), dtype=e.dtype, loc=e.loc)
    return d.Compare("!=", e, zero, dtype=dtypes.BOOL, loc=e.loc)


_TYPE_LIKE = frozenset(TypeLike)


class PendingType(Exception):
    """A temporary is read before any assignment to it has been typed."""


def is_weak(e: d.Expr) -> bool:
    """A Python literal: under NumPy's rules it does not widen the other operand."""
    return isinstance(e, d.Const) and e.dtype in (dtypes.INT64, dtypes.FLOAT64,
                                                  dtypes.COMPLEX128, dtypes.BOOL)


class Typer:
    """Types expressions under ``rules``: "numba" (point kernels) or "numpy" (computations).

    ``fields`` names the writable fields of a computation: assignments to them are cast to
    the field's dtype instead of unifying a variable's type.
    """

    def __init__(self, name: str, scalars: dict[str, DType], arrays: dict[str, ArgType],
                 rules: str = "numba", fields: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.scalars = scalars
        self.arrays = arrays
        self.rules = rules
        self.fields = fields
        self.temporaries: frozenset[str] = frozenset()
        self.declared: dict[str, DType] = {}  # variables whose annotation fixes their type
        self.vars: dict[str, DType] = {}

    def _promote(self, l: d.Expr, r: d.Expr) -> DType:
        if self.rules == "numpy":
            return dtypes.numpy_promote(_t(l), _t(r), is_weak(l), is_weak(r))
        return dtypes.unify(_t(l), _t(r))

    def error(self, message: str, loc: Location | None, hint: str | None = None) -> StencilTypeError:
        return StencilTypeError(message, stencil=self.name, loc=loc, hint=hint)

    # -- expressions

    def expr(self, e: d.Expr) -> d.Expr:
        try:
            return self._expr(e)
        except StencilTypeError as exc:
            if exc.loc is None:
                raise self.error(exc.bare_message, e.loc, exc.hint) from None
            raise

    def _expr(self, e: d.Expr) -> d.Expr:
        match e:
            case d.Const():
                return e
            case d.Name(id=n):
                if n in self.scalars:
                    return dataclasses.replace(e, dtype=self.scalars[n])
                if n in self.vars:
                    return dataclasses.replace(e, dtype=self.vars[n])
                if n in self.arrays:
                    raise self.error(f"array '{n}' is used without an index", e.loc,
                                     f"write {n}[0, ...] for the centre element")
                raise self.error(f"local variable '{n}' is used before it is assigned", e.loc)
            case d.Access(field=f, offset=off) if f in self.temporaries:
                if f not in self.vars:
                    raise PendingType(f)
                return dataclasses.replace(e, dtype=self.vars[f])
            case d.Access(field=f, offset=off):
                arr = self.arrays.get(f)
                if arr is None:
                    raise self.error(f"'{f}' is indexed but the argument passed is a scalar",
                                     e.loc, f"pass an array for '{f}'")
                return dataclasses.replace(e, offset=tuple(self.index(o) for o in off),
                                           dtype=arr.dtype)
            case d.Index(array=a, index=idx):
                arr = self.arrays.get(a)
                if arr is None:
                    raise self.error(f"'{a}' is indexed but the argument passed is a scalar",
                                     e.loc, f"pass an array for '{a}'")
                if len(idx) != arr.ndim:
                    raise self.error(f"'{a}' is {arr.ndim}-dimensional but is indexed with "
                                     f"{len(idx)} index(es)", e.loc,
                                     f"use {arr.ndim} indices")
                return dataclasses.replace(e, index=tuple(self.index(o) for o in idx),
                                           dtype=arr.dtype)
            case d.BinOp(op=op, left=l, right=r):
                l, r = self.expr(l), self.expr(r)
                if self.rules == "numpy":
                    rt = dtypes.numpy_arithmetic(op, _t(l), _t(r), is_weak(l), is_weak(r))
                    lt = rt_ = rt
                    if op == "**" and dtypes.is_intlike(_t(r)) and not dtypes.is_intlike(rt):
                        rt_ = dtypes.INT64 if is_weak(r) else rt
                else:
                    rt = dtypes.arithmetic(op, _t(l), _t(r))
                    lt, rt_ = dtypes.operand_type(op, _t(l), _t(r), rt)
                return d.BinOp(op, cast(l, lt), cast(r, rt_), dtype=rt, loc=e.loc)
            case d.Compare(op=op, left=l, right=r):
                l, r = self.expr(l), self.expr(r)
                t = (self._promote(l, r) if self.rules == "numpy"
                     else dtypes.comparison_operand(_t(l), _t(r)))
                if dtypes.is_complex(t) and op not in ("==", "!="):
                    raise self.error(f"complex numbers cannot be compared with {op}", e.loc)
                return d.Compare(op, cast(l, t), cast(r, t), dtype=dtypes.BOOL, loc=e.loc)
            case d.BoolOp(op=op, left=l, right=r):
                l, r = self.expr(l), self.expr(r)
                t = self._promote(l, r)
                return d.BoolOp(op, cast(l, t), cast(r, t), dtype=t, loc=e.loc)
            case d.UnaryOp(op=op, operand=x):
                x = self.expr(x)
                if op == "not":
                    return d.UnaryOp("not", truth(x), dtype=dtypes.BOOL, loc=e.loc)
                t = _t(x) if self.rules == "numpy" and op != "~" else dtypes.unary(op, _t(x))
                if self.rules == "numpy" and op == "~":
                    t = _t(x)
                return d.UnaryOp(op, cast(x, t), dtype=t, loc=e.loc)
            case d.IfExp(cond=c, body=b, orelse=o):
                c, b, o = truth(self.expr(c)), self.expr(b), self.expr(o)
                t = self._promote(b, o)
                return d.IfExp(c, cast(b, t), cast(o, t), dtype=t, loc=e.loc)
            case d.Call(func=f, args=args) if f in _TYPE_LIKE:
                return _type_like(TypeLike(f), tuple(self.expr(a) for a in args), e.loc)
            case d.Call(func=f, args=args):
                args = tuple(self.expr(a) for a in args)
                ins, out = call_signature(f, [_t(a) for a in args])
                return d.Call(f, tuple(cast(a, t) for a, t in zip(args, ins)), dtype=out,
                              loc=e.loc)
            case d.Cast(value=v):
                v = self.expr(v)
                if dtypes.is_complex(_t(v)) and not dtypes.is_complex(_t(e)):
                    raise self.error(f"cannot convert complex to {e.dtype}", e.loc)
                return cast(v, _t(e))
        raise TypeError(f"unexpected node {e!r}")

    def index(self, e: d.Expr) -> d.Expr:
        e = self.expr(e)
        if not dtypes.is_int(_t(e)):
            raise self.error(f"stencil index of type {e.dtype} is not an integer", e.loc,
                             "indices must be integers")
        return cast(e, dtypes.INT64)

    # -- statements: inference of variable types to a fixed point

    def infer_vars(self, body: tuple[d.Stmt, ...]) -> None:
        for _ in range(50):
            before = dict(self.vars)
            self._infer(body)
            if before == self.vars:
                return
        raise self.error("variable types do not settle", None)

    def _bind(self, name: str, t: DType, loc: Location | None) -> None:
        if name in self.fields:
            return
        if name in self.scalars or name in self.arrays:
            raise self.error(f"assignment to argument '{name}' is not allowed", loc,
                             "assign to a new local variable")
        if name in self.declared:
            self.vars[name] = self.declared[name]
            return
        old = self.vars.get(name)
        self.vars[name] = t if old is None else dtypes.unify(old, t)

    def _infer(self, body: tuple[d.Stmt, ...]) -> None:
        for s in body:
            match s:
                case d.Assign(target=t, value=v):
                    try:
                        self._bind(t, _t(self.expr(v)), s.loc)
                    except PendingType:  # reads a temporary not typed yet: next round
                        pass
                case d.If(cond=c, body=b, orelse=o):
                    try:
                        self.expr(c)
                    except PendingType:
                        pass
                    self._infer(b)
                    self._infer(o)
                case d.For(var=v, start=a, stop=b, step=c, body=b_):
                    for bound in (a, b, c):
                        bt = _t(self.expr(bound))
                        if not dtypes.is_intlike(bt):
                            raise self.error("range() bounds must be integers", s.loc)
                    self._bind(v, dtypes.INT64, s.loc)
                    self._infer(b_)
                case d.While(cond=c, body=b_):
                    self._infer(b_)
                    try:
                        self.expr(c)
                    except PendingType:
                        pass
                case d.Store(array=a, index=idx, value=v):
                    self.expr(d.Index(a, idx, loc=s.loc))
                    self.expr(v)

    def stmts(self, body: tuple[d.Stmt, ...]) -> tuple[d.Stmt, ...]:
        out: list[d.Stmt] = []
        for s in body:
            match s:
                case d.Assign(target=t, value=v):
                    target = self.arrays[t].dtype if t in self.fields else self.vars[t]
                    out.append(d.Assign(t, cast(self.expr(v), target), loc=s.loc))
                case d.If(cond=c, body=b, orelse=o):
                    out.append(d.If(truth(self.expr(c)), self.stmts(b), self.stmts(o), loc=s.loc))
                case d.For(var=v, start=a, stop=b, step=c, body=b_):
                    lo, hi, step = (cast(self.expr(x), dtypes.INT64) for x in (a, b, c))
                    out.append(d.For(v, lo, hi, step, self.stmts(b_), loc=s.loc))
                case d.While(cond=c, body=b_):
                    out.append(d.While(truth(self.expr(c)), self.stmts(b_), loc=s.loc))
                case d.Store(array=a, index=idx, value=v):
                    ref = self.expr(d.Index(a, idx, loc=s.loc))
                    assert isinstance(ref, d.Index)
                    value = self.expr(v)
                    if dtypes.is_complex(_t(value)) and not dtypes.is_complex(_t(ref)):
                        raise self.error(f"cannot store a complex value into '{a}' of "
                                         f"{ref.dtype}", s.loc)
                    out.append(d.Store(a, ref.index, cast(value, _t(ref)), loc=s.loc))
                case _:
                    raise TypeError(f"unexpected statement {s!r}")
        return tuple(out)


def type_point_kernel(kernel: d.PointKernel, args: tuple[ArgType, ...]) -> d.PointKernel:
    """Type ``kernel`` (single-exit form) for a call with argument types ``args``."""
    name = kernel.name
    if len(args) != len(kernel.params):
        raise StencilTypeError(f"the kernel takes {len(kernel.params)} argument(s), "
                               f"{len(args)} given", stencil=name, loc=kernel.loc)
    if not args[0].is_array:
        raise StencilTypeError("the first argument to a stencil kernel must be the primary "
                               "input array", stencil=name, loc=kernel.loc,
                               hint="pass an array as the first argument")
    ndim = args[0].ndim
    arrays = {p: a for p, a in zip(kernel.params, args) if a.is_array}
    scalars = {p: a.dtype for p, a in zip(kernel.params, args) if not a.is_array}
    for p in kernel.relative:
        a = arrays.get(p)
        if a is not None and a.ndim != ndim:
            raise StencilTypeError(
                f"stencil index does not match array dimensionality: '{p}' is {a.ndim}-D, "
                f"the first argument is {ndim}-D", stencil=name, loc=kernel.loc,
                hint="relatively indexed arrays must all have the same number of dimensions")
    typer = Typer(name, scalars, arrays)
    typer.infer_vars(kernel.body)
    body = typer.stmts(kernel.body)
    ret = typer.vars[RESULT]
    locals_ = tuple(sorted((k, v) for k, v in typer.vars.items()))
    return dataclasses.replace(kernel, body=body, param_types=tuple(a.dtype for a in args),
                               local_types=locals_, ndim=ndim, return_type=ret)
