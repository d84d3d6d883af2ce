"""Lower a typed point kernel to kernel IR: a loop nest over the interior, plus the border.

Requires: a typed, single-exit ``PointKernel``, its border, its border mode, and the layout
the kernel is specialized for (which arrays have a unit last stride). Ensures: a
``KernelFunction`` whose parameters are the free symbols of its body, ordered by argument;
relative accesses with a run-time offset are clamped to the neighbourhood and flag an error
instead of reading out of bounds; absolutely indexed arrays wrap negative indices and are
bounds-checked. The border is filled with ``cval`` (mode "constant") or, in the other modes,
computed by copies of the body whose relative reads have their indices remapped into each
array (``remap_index``): the two strips of each interior row inside the interior's row loop,
the other rows in a section of their own. The vectorized interior loop is the same in every
mode.
"""

from __future__ import annotations

import dataclasses
import linecache
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..ir import border_modes
from ..ir import definition as d
from ..ir import kernel as k
from ..ir.core import walk
from .single_exit import RESULT

OUT = "out"
# Outputs of at least this many bytes are written with non-temporal stores (a
# ``StreamedRow``): half this machine class's L3 (32 MB on the EPYC the benchmarks ran on);
# the C backend derives both constants from the machine instead (build/machine.py).
# Smaller outputs are likely still in cache for the next kernel, and their write-allocate
# reads hit the cache. Overridable with STENCILKIT_STREAM_MIN_BYTES (read when a kernel is
# lowered; it is part of the generated source, hence of the cache key).
STREAM_MIN_BYTES = 16 << 20
# Elements per streamed chunk: the row buffer (3.5 KB of float64) stays in L1. A multiple of 64
# bytes for every item size (chunks hold whole lines), and not of 4096 bytes for float64: at 512
# each chunk's stores to the buffer sat at the same address modulo 4 KiB relative to the loads
# of power-of-two input rows, and the CPU took the loads for dependent on them (4K aliasing:
# jacobi2d 4096^2 in hand C, 14.0 ms at 512, 12.7 at 448).
STREAM_CHUNK = 448
# Below this many points a parallel region costs more than it saves. Measured on 2 vCPUs
# (Emerald Rapids under KVM, one process, lap3d n^3 and jacobi2d m^2 with out=, interleaved,
# 2026-11-27): from 16,384 points a team of 2 ran the call 1.15-1.6x faster (lap3d 26^3-31^3,
# jacobi2d 128^2-180^2); between 10,000 and 14,000 points it was 0.75-1.17x, varying with the
# run; 2^15 left the calls from 2^14 to 2^15 points a third slower than they could be.
PARALLEL_MIN_WORK = 1 << 14
# Keys of the arguments the compiler adds (``ScalarArgument``): values, not names, so that
# no argument of the user's kernel can have them.
FILL_BORDER = k.BorderFill()
CVAL = k.FillValue()

#: ``func_or_mode`` values: Numba's "constant", and scipy.ndimage's modes (contract.md section 1).
MODES = border_modes.MODES


@dataclass(frozen=True)
class Layout:
    """Which buffers have a unit last stride (the specialization key of the C code)."""

    unit_stride: tuple[bool, ...]  # per kernel parameter (False for scalars)
    out_unit_stride: bool
    # the platform has non-temporal stores (``Platform.streaming_stores``): large outputs'
    # rows are ``StreamedRow``s
    streaming_stores: bool = False


_CANONICAL_MATH = {
    "abs": "abs", "min": "min", "max": "max", "math.fabs": "fabs", "np.fabs": "fabs",
    "np.abs": "abs", "np.absolute": "abs", "math.asin": "asin", "math.acos": "acos",
    "math.atan": "atan", "math.asinh": "asinh", "math.acosh": "acosh", "math.atanh": "atanh",
    "np.arcsin": "asin", "np.arccos": "acos", "np.arctan": "atan", "np.arcsinh": "asinh",
    "np.arccosh": "acosh", "np.arctanh": "atanh", "math.atan2": "atan2", "np.arctan2": "atan2",
    "math.pow": "pow", "np.minimum": "minimum", "np.maximum": "maximum", "np.fmin": "fmin",
    "np.fmax": "fmax", "math.fmod": "fmod", "np.fmod": "fmod", "np.rint": "rint",
}
_OPERATOR_FUNCS = {"np.add": "+", "np.subtract": "-", "np.multiply": "*", "np.true_divide": "/",
                   "np.divide": "/", "np.floor_divide": "floordiv", "np.mod": "mod",
                   "np.remainder": "mod", "np.negative": "neg"}


def math_function(func: str) -> str:
    """The IR math function a canonical call maps to."""
    return _CANONICAL_MATH.get(func, func.rpartition(".")[2])


class PointLowering:
    def __init__(self, kernel: d.PointKernel, border: tuple[tuple[int, int], ...],
                 layout: Layout, line_text: Callable[[int], str], filename: str,
                 out_dtype: np.dtype | None = None,
                 mode: border_modes.Mode = "constant") -> None:
        self.kernel = kernel
        self.mode = mode
        # per axis: "constant" (the border is cval) or the mode that remaps reads along it
        self.modes = border_modes.per_axis(mode, kernel.ndim)
        self.border = border
        self.layout = layout
        self.line_text = line_text
        self.filename = filename
        out = out_dtype if out_dtype is not None else kernel.return_type
        assert out is not None, "lowering an untyped point kernel"
        self.out_dtype: np.dtype = out
        self.ctx = k.KernelContext()
        self.buffers: dict[str, k.Buffer] = {}
        self.scalars: dict[str, k.Symbol] = {}
        self.locals: dict[str, k.Symbol] = {}
        self.counters: list[k.Symbol] = []
        self.uses_error_flag = False
        self.status = self.ctx.symbol("sk_error", k.STATUS)  # the error channel
        # While the border body of a remapping mode is lowered: the remapped index of each
        # constant relative read, (buffer, dim, offset) -> (symbol, value), declared at the
        # loop level of its dimension (so a row's remapped row indices are computed once).
        self.remapped: dict[tuple[str, int, int], tuple[k.Symbol, k.Expr]] | None = None
        self.remap_dims: set[int] = set()

    # ------------------------------------------------------------ expressions

    def expr(self, e: d.Expr) -> k.Expr:
        t = e.dtype
        assert t is not None, f"untyped expression {e!r} after the typing pass"
        match e:
            case d.Const(value=v):
                return k.Constant(t.type(v), dtype=t)
            case d.Name(id=n):
                sym = self.scalars.get(n) or self.locals[n]
                return k.ref(sym)
            case d.Access(field=f, offset=off):
                buf = self.buffers[f]
                idx = []
                for dim, o in enumerate(off):
                    centre = k.Sym(self.counters[dim], dtype=k.INDEX)
                    if isinstance(o, d.Const):
                        # the frontend accepts only integer constants as offsets
                        shift: k.Expr = k.index_const(o.value)  # type: ignore[arg-type]
                    else:
                        lo, hi = self.border[dim]
                        self.uses_error_flag = True
                        shift = k.Op("checked_offset", (
                            self.expr(o), k.index_const(lo), k.index_const(hi)), dtype=k.INDEX)
                    idx.append(self.relative_index(buf, dim, o, _add(centre, shift)))
                return k.Load(buf, tuple(idx), dtype=t)
            case d.Index(array=array, index=index):
                buf = self.buffers[array]
                self.uses_error_flag = True
                wrapped = tuple(k.Op("wrap_index", (self.expr(x), buf.shape[dim]), dtype=k.INDEX)
                                for dim, x in enumerate(index))
                return k.Load(buf, wrapped, dtype=t)
            case d.Cast(value=v):
                return k.Convert(self.expr(v), dtype=t)
            case d.BinOp(op=op, left=l, right=r):
                a, b = self.expr(l), self.expr(r)
                if op == "//":
                    return k.Op("floordiv", (a, b), dtype=t)
                if op == "%":
                    return k.Op("mod", (a, b), dtype=t)
                if op == "**":
                    if r.dtype is not None and dtypes.is_int(r.dtype):
                        return k.Op("powi", (a, b), dtype=t)
                    return k.MathCall("pow", (a, b), dtype=t)
                if op in ("<<", ">>"):
                    return k.Op("shl" if op == "<<" else "shr", (a, b), dtype=t)
                return k.Op(op, (a, b), dtype=t)
            case d.Compare(op=op, left=l, right=r):
                return k.Op(op, (self.expr(l), self.expr(r)), dtype=t)
            case d.BoolOp(op=op, left=l, right=r):
                a, b = self.expr(l), self.expr(r)
                if t == dtypes.BOOL:
                    return k.Op("&&" if op == "and" else "||", (a, b), dtype=t)
                cond = _truth(a)
                return k.Select(cond, b, a, dtype=t) if op == "and" else k.Select(cond, a, b, dtype=t)
            case d.UnaryOp(op=op, operand=x):
                a = self.expr(x)
                if op == "+":
                    return a
                if op == "-":
                    return k.Op("neg", (a,), dtype=t)
                if op == "not" or (op == "~" and t == dtypes.BOOL):
                    return k.Op("!", (a,), dtype=t)
                return k.Op("~", (a,), dtype=t)
            case d.IfExp(cond=c, body=b, orelse=o):
                return k.Select(self.expr(c), self.expr(b), self.expr(o), dtype=t)
            case d.Call(func=f, args=args):
                return self.call(f, tuple(self.expr(a) for a in args), t)
        raise TypeError(f"cannot lower {e!r}")

    def call(self, func: str, args: tuple[k.Expr, ...], t: np.dtype) -> k.Expr:
        if func in _OPERATOR_FUNCS:
            return k.Op(_OPERATOR_FUNCS[func], args, dtype=t)
        if func == "np.power":
            if dtypes.is_intlike(args[1].dtype):
                return k.Op("powi", args, dtype=t)
            return k.MathCall("pow", args, dtype=t)
        if func == "np.square":
            return k.Op("*", (args[0], args[0]), dtype=t)
        name = math_function(func)
        if name in ("min", "max") and len(args) > 2:
            acc = args[0]
            for a in args[1:]:
                acc = k.MathCall(name, (acc, a), dtype=t)
            return acc
        if func in ("math.floor", "math.ceil", "math.trunc"):
            (a,) = args
            if dtypes.is_intlike(a.dtype):
                return k.Convert(a, dtype=t)
            return k.Convert(k.MathCall(name, args, dtype=a.dtype), dtype=t)
        return k.MathCall(name, args, dtype=t)

    # ------------------------------------------------------------ statements

    def comment(self, s: d.Stmt) -> str:
        if s.loc is None:
            return ""
        name = s.loc.filename.rsplit("/", 1)[-1]
        text = self.line_text(s.loc.line) if name == self.filename else ""
        if not text:  # a statement of a helper inlined from elsewhere: its own file's line
            text = linecache.getline(s.loc.filename, s.loc.line).strip()
        return f"{name}:{s.loc.line}  {text}"

    def stmts(self, body: tuple[d.Stmt, ...]) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        for s in body:
            src = self.comment(s)
            match s:
                case d.Assign(target=t, value=v):
                    out.append(k.SetSym(self.locals[t], self.expr(v), loc=s.loc, source=src))
                case d.If(cond=c, body=b, orelse=o):
                    out.append(k.Branch(self.expr(c), self.stmts(b), self.stmts(o), loc=s.loc,
                                        source=src))
                case d.For(var=v, start=a, stop=b, step=c, body=b_):
                    loop = k.Loop(self.locals[v], self.expr(a), self.expr(b), self.expr(c),
                                  self.stmts(b_), loc=s.loc)
                    if isinstance(c, d.Const):
                        out.append(dataclasses.replace(loop, source=src))
                        continue
                    # range() with a run-time step of 0: Python raises, and the loop would
                    # never end (with the GIL released, not even Ctrl-C would stop it)
                    self.uses_error_flag = True
                    zero = k.Op("==", (loop.step, _zero(loop.step.dtype)), dtype=dtypes.BOOL)
                    out.append(k.Branch(zero, (k.SetError(k.STATUS_RANGE_STEP),), (loop,),
                                        loc=s.loc, source=src))
                case d.While(cond=c, body=b_):
                    out.append(k.WhileLoop(self.expr(c), self.stmts(b_), loc=s.loc, source=src))
        return tuple(out)

    # ------------------------------------------------------------ the kernel

    def lower(self) -> k.KernelFunction:
        kern = self.kernel
        nd = kern.ndim
        # standard_indexing may name a scalar argument (as in Numba): it is then no buffer
        indexed = {n.array for n in walk(kern) if isinstance(n, d.Index)}
        for p, t, unit in zip(kern.params, kern.param_types, self.layout.unit_stride):
            if p in kern.relative or p in indexed:
                ndim = nd if p in kern.relative else _index_rank(kern, p)
                marks = frozenset({k.StandardIndexed()}) if p not in kern.relative \
                    else frozenset()
                self.buffers[p] = self.ctx.buffer(p, t, ndim, unit_stride_last=unit,
                                                  restrict=True, read_only=True, marks=marks)
            else:
                self.scalars[p] = self.ctx.user_symbol(p, t, properties=frozenset(
                    {k.ScalarArgument(p)}))
        out = self.ctx.buffer(OUT, self.out_dtype, nd,
                              unit_stride_last=self.layout.out_unit_stride, restrict=True,
                              read_only=False, user=False, marks=frozenset({k.Output()}))
        first = self.buffers[kern.params[0]]
        self.counters = [self.ctx.symbol(f"i{dim}", k.INDEX) for dim in range(nd)]
        work = self.ctx.symbol("sk_work", k.INDEX)
        work_value = first.shape[0]
        for n in first.shape[1:]:
            work_value = k.Op("*", (work_value, n), dtype=k.INDEX)
        par = k.Parallel(only_if=k.Op(">=", (k.Sym(work, dtype=k.INDEX),
                                             k.index_const(PARALLEL_MIN_WORK)), dtype=dtypes.BOOL))
        self.declare_locals()
        fill = self.ctx.symbol("fill_border", dtypes.BOOL,
                               properties=frozenset({k.ScalarArgument(FILL_BORDER)}))
        cval = self.ctx.symbol("cval", self.out_dtype,
                               properties=frozenset({k.ScalarArgument(CVAL)}))
        body = self.stmts(kern.body)
        result = self.locals[RESULT]
        decls = tuple(k.Declare(s, _zero(s.dtype)) for n, s in sorted(self.locals.items()))
        centre = tuple(k.Sym(c, dtype=k.INDEX) for c in self.counters)
        value: k.Expr = k.ref(result)
        if self.out_dtype != result.dtype:
            value = k.Convert(value, dtype=self.out_dtype)
        store = k.Store(out, centre, value)
        inner: tuple[k.Stmt, ...] = decls + body + (store,)
        # the rows of a 2-D or higher output with a unit last stride may stream (1-D: the
        # row loop is the parallel loop itself, left as is)
        streamed = nd >= 2 and self.layout.out_unit_stride and self.layout.streaming_stores
        out_item = self.out_dtype.itemsize
        for dim in reversed(range(nd)):
            lo, hi = self.border[dim]
            start = k.index_const(-lo)
            stop = _sub(first.shape[dim], k.index_const(hi))
            if dim == 0 and streamed:
                inner = inner + (k.StoreFence(),)
            plain = k.Loop(self.counters[dim], start, stop, k.index_const(1), inner,
                           parallel=par if dim == 0 else None, vectorize=(dim == nd - 1))
            loop: k.Stmt = plain
            if dim == nd - 1 and streamed:
                loop = k.StreamedRow(plain, out, STREAM_CHUNK, _cmp(
                    ">=", k.Sym(work, dtype=k.INDEX), k.index_const(-(-stream_min_bytes() // out_item))))
            inner = (loop,)
            if dim == nd - 1 and self.modes[dim] != "constant":
                # the row's two border strips, next to the unchanged loop (in cache)
                inner = self.row_strips(first, out) + inner
        interior = k.Section("interior" if self.modes[-1] == "constant" else
                             "interior rows (with their border strips)", inner)
        borders: list[k.Stmt] = []
        if "constant" in self.modes:
            borders.append(k.Section(
                "border: cval where the neighbourhood leaves the array" + (
                    "" if self.mode == "constant" else " along a 'constant' axis"),
                (k.Branch(k.Sym(fill, dtype=dtypes.BOOL),
                          self.border_fill(first, out, cval, par)),)))
        if any(m != "constant" for m in self.modes[:-1]) or (
                nd == 1 and self.modes[0] != "constant"):
            borders.append(self.border_rows(first, out, par))
        body_all = (k.Declare(work, work_value), *borders, interior)
        params = free_parameters(body_all, (*kern.params, OUT, FILL_BORDER, CVAL))
        doc = (f"point kernel '{kern.name}' ({self.filename}:{kern.loc.line if kern.loc else 0})"
               f", {nd}-D, border {list(self.border)}"
               + ("" if self.mode == "constant" else f", mode '{self.mode}'"))
        return k.KernelFunction(function_name("point", kern.name), params, body_all,
                                tuple(self.buffers.values()) + (out,), doc,
                                self.uses_error_flag, status=self.status)

    def declare_locals(self) -> None:
        """A symbol per local variable: the user's, and the compiler's (``@result``)."""
        for name, t in self.kernel.local_types:
            if name.isidentifier():
                self.locals[name] = self.ctx.user_symbol(name, t)
            else:
                self.locals[name] = self.ctx.symbol("sk_" + name.lstrip("@"), t)

    def border_fill(self, first: k.Buffer, out: k.Buffer, cval: k.Symbol,
                    par: k.Parallel) -> tuple[k.Stmt, ...]:
        """Write ``cval`` to every element whose neighbourhood leaves the array along a
        "constant" axis (every axis, in mode "constant")."""
        nd = self.kernel.ndim
        constant = [m == "constant" for m in self.modes]
        counters = [self.ctx.symbol(f"b{dim}", k.INDEX) for dim in range(nd)]
        value = k.ref(cval)
        last = nd - 1
        lo, hi = self.border[last]
        n_last = first.shape[last]

        def row(whole: bool) -> tuple[k.Stmt, ...]:
            def fill(start: k.Expr, stop: k.Expr) -> k.Stmt:
                idx = tuple(k.Sym(c, dtype=k.INDEX) for c in counters)
                return k.Loop(counters[last], start, stop, k.index_const(1),
                              (k.Store(out, idx, value),), vectorize=True)
            zero = k.index_const(0)
            if whole:
                return (fill(zero, n_last),)
            head_end = _min(k.index_const(-lo), n_last)
            tail_start = _max(head_end, _sub(n_last, k.index_const(hi)))
            return (fill(zero, head_end), fill(tail_start, n_last))

        if nd == 1:
            return row(False)
        # a row inside along every constant outer axis: its head and tail strips along a
        # constant last axis (a remapped last axis is computed whole: nothing to fill)
        partial = row(False) if constant[last] else ()
        if not any(constant[:last]):
            nest: tuple[k.Stmt, ...] = partial
            for dim in reversed(range(last)):
                nest = (k.Loop(counters[dim], k.index_const(0),
                               first.shape[dim], k.index_const(1), nest,
                               parallel=par if dim == 0 else None),)
            return nest
        inside: k.Expr | None = None
        for dim in range(nd - 1):
            if not constant[dim]:
                continue
            lo_d, hi_d = self.border[dim]
            c = k.Sym(counters[dim], dtype=k.INDEX)
            cond = k.Op("&&", (
                k.Op(">=", (c, k.index_const(-lo_d)), dtype=dtypes.BOOL),
                k.Op("<", (c, _sub(first.shape[dim], k.index_const(hi_d))),
                     dtype=dtypes.BOOL)), dtype=dtypes.BOOL)
            inside = cond if inside is None else k.Op("&&", (inside, cond), dtype=dtypes.BOOL)
        assert inside is not None  # some outer axis is constant (else returned above)
        nest = (k.Branch(inside, partial, row(True)),)
        for dim in reversed(range(nd - 1)):
            nest = (k.Loop(counters[dim], k.index_const(0),
                           first.shape[dim], k.index_const(1), nest, parallel=par if dim == 0 else None),)
        return nest

    # ------------------------------------------------------------ border modes

    def relative_index(self, buf: k.Buffer, dim: int, offset: d.Expr, index: k.Expr) -> k.Expr:
        """The index of a relative read along ``dim``: as is in the interior; remapped into
        ``buf`` (by its own extent, so larger secondary arrays are read where they have
        elements) along the dimensions being remapped while a border body is lowered."""
        if self.remapped is None or dim not in self.remap_dims:
            return index
        if not isinstance(offset, d.Const):  # a run-time offset: remapped where it is read
            return remap_index(self.modes[dim], index, buf.shape[dim])
        key = (buf.name, dim, int(offset.value))  # type: ignore[arg-type]  # an int offset
        if key not in self.remapped:
            o = key[2]
            name = f"{buf.name}_{dim}_{'m' if o < 0 else 'p'}{abs(o)}"
            sym = self.ctx.user_symbol(name, k.INDEX)
            self.remapped[key] = (sym, remap_index(self.modes[dim], index, buf.shape[dim]))
        sym = self.remapped[key][0]
        return k.Sym(sym, dtype=k.INDEX)

    def remapped_body(self, out: k.Buffer, counters: list[k.Symbol], dims: set[int]
                      ) -> tuple[tuple[k.Stmt, ...], Callable[[int], tuple[k.Stmt, ...]]]:
        """The kernel body at ``counters`` with relative reads remapped along ``dims``
        (locals, statements, the store), and, per dimension, the declarations of the
        remapped indices of constant reads (to be placed in that dimension's loop)."""
        saved = self.counters
        self.counters, self.remap_dims, self.remapped = counters, dims, {}
        try:
            body = self.stmts(self.kernel.body)
            hoisted = self.remapped
        finally:
            self.counters, self.remapped = saved, None
        result = self.locals[RESULT]
        decls = tuple(k.Declare(s, _zero(s.dtype)) for n, s in sorted(self.locals.items()))
        value: k.Expr = k.ref(result)
        if self.out_dtype != result.dtype:
            value = k.Convert(value, dtype=self.out_dtype)
        store = k.Store(out, tuple(k.Sym(c, dtype=k.INDEX) for c in counters), value)

        def remaps(dim: int) -> tuple[k.Stmt, ...]:
            return tuple(k.Declare(sym, v) for (_, dm, _), (sym, v) in sorted(
                hoisted.items(), key=lambda kv: kv[0]) if dm == dim)

        return decls + body + (store,), remaps

    def row_strips(self, first: k.Buffer, out: k.Buffer) -> tuple[k.Stmt, ...]:
        """In an interior row (every outer index inside): the points of the last dimension's
        two border strips, with reads remapped along the last dimension only. One copy of
        the body: ``t`` counts the head strip's points, then the tail strip's."""
        nd = self.kernel.ndim
        last = nd - 1
        position = self.ctx.symbol(f"b{last}", k.INDEX)
        body, remaps = self.remapped_body(out, [*self.counters[:last], position], {last})
        lo, hi = self.border[last]
        n_last = first.shape[last]
        head = self.ctx.symbol("head", k.INDEX)
        tail = self.ctx.symbol("tail", k.INDEX)
        t = self.ctx.symbol("t", k.INDEX)
        hs, ts, tv = (k.Sym(x, dtype=k.INDEX) for x in (head, tail, t))
        head_end = _min(k.index_const(-lo), n_last)
        return (k.Declare(head, head_end),
                k.Declare(tail, _max(hs, _sub(n_last, k.index_const(hi)))),
                k.Loop(t, k.index_const(0), k.Op("+", (hs, _sub(n_last, ts)), dtype=k.INDEX),
                       k.index_const(1), (
                    k.Declare(position, k.Select(_cmp("<", tv, hs), tv, _add(_sub(tv, hs), ts),
                                                 dtype=k.INDEX)),
                    *remaps(last), *body)))

    def border_rows(self, first: k.Buffer, out: k.Buffer, par: k.Parallel) -> k.Section:
        """The rows (lines along the last dimension) with an outer index in the border of a
        remapped axis and inside along every "constant" one, with reads remapped along the
        remapped axes; the remapped outer indices are computed once per loop level. A row
        is whole along a remapped last axis, its interior along a "constant" one. (In 1-D
        there are none: the strips are all.)"""
        nd = self.kernel.ndim
        last = nd - 1
        if nd == 1:
            return k.Section(f"border: mode '{self.mode}' (in the row loop)", ())
        remapping = {dim for dim, m in enumerate(self.modes) if m != "constant"}
        counters = [self.ctx.symbol(f"r{dim}", k.INDEX) for dim in range(nd)]
        body, remaps = self.remapped_body(out, counters, remapping)
        outside: k.Expr | None = None
        inside: k.Expr | None = None
        for dim in range(last):
            c = k.Sym(counters[dim], dtype=k.INDEX)
            lo_d, hi_d = self.border[dim]
            if dim in remapping:
                cond = k.Op("||", (_cmp("<", c, k.index_const(-lo_d)),
                                   _cmp(">=", c, _sub(first.shape[dim], k.index_const(hi_d)))),
                            dtype=dtypes.BOOL)
                outside = cond if outside is None else k.Op("||", (outside, cond),
                                                            dtype=dtypes.BOOL)
            else:
                cond = k.Op("&&", (_cmp(">=", c, k.index_const(-lo_d)),
                                   _cmp("<", c, _sub(first.shape[dim], k.index_const(hi_d)))),
                            dtype=dtypes.BOOL)
                inside = cond if inside is None else k.Op("&&", (inside, cond),
                                                          dtype=dtypes.BOOL)
        assert outside is not None
        where = outside if inside is None else k.Op("&&", (inside, outside), dtype=dtypes.BOOL)
        lo_l, hi_l = self.border[last]
        row = (k.index_const(0), first.shape[last]) if last in remapping else (
            k.index_const(-lo_l), _sub(first.shape[last], k.index_const(hi_l)))
        nest: tuple[k.Stmt, ...] = (k.Branch(where, (
            k.Loop(counters[last], row[0], row[1], k.index_const(1), remaps(last) + body),)),)
        # Parallel from 3-D on: in 2-D these are a few rows, less work than waking the
        # threads for a second parallel region (jacobi2d 4096^2 on 2 busy cores measured
        # 1.24-1.31x the constant-mode time with a parallel loop here).
        for dim in reversed(range(last)):
            nest = (k.Loop(counters[dim], k.index_const(0), first.shape[dim], k.index_const(1),
                           remaps(dim) + nest, parallel=par if dim == 0 and nd >= 3 else None),)
        return k.Section(f"border rows: mode {self.mode!r}, reads remapped into their arrays"
                         " along the remapped axes", nest)


def stream_min_bytes() -> int:
    """``STREAM_MIN_BYTES``, or the environment's STENCILKIT_STREAM_MIN_BYTES. (The C
    backend then fits the threshold to the machine unless the variable is set:
    ``lower.streamed_rows``.)"""
    override = stream_min_bytes_override()
    return STREAM_MIN_BYTES if override is None else override


def stream_min_bytes_override() -> int | None:
    """The environment's STENCILKIT_STREAM_MIN_BYTES, or None."""
    env = os.environ.get("STENCILKIT_STREAM_MIN_BYTES", "").strip()
    return int(env) if env.isdigit() else None


def remap_index(mode: str, j: k.Expr, n: k.Expr) -> k.Expr:
    """The index that border ``mode`` maps position ``j`` of an axis of extent ``n >= 1``
    to: ``j`` itself inside ``[0, n)``; outside, scipy.ndimage's meaning, which is
    ``np.pad``'s "edge", "symmetric", "reflect" and "wrap" repeated to any distance (a
    period of 2n, 2n - 2 and n). Built from plain operators (the conditional evaluates one
    arm, so the divisions run only outside the array), so every printer of kernel IR has it."""
    zero, one = k.index_const(0), k.index_const(1)
    if mode == "nearest":
        return k.Select(_cmp("<", j, zero), zero,
                        k.Select(_cmp("<", j, n), j, _sub(n, one), dtype=k.INDEX), dtype=k.INDEX)
    inside = _and(_cmp(">=", j, zero), _cmp("<", j, n))
    if mode == "wrap":
        return k.Select(inside, j, k.Op("mod", (j, n), dtype=k.INDEX), dtype=k.INDEX)
    if mode == "reflect":  # ... 1 0 | 0 1 ... n-1 | n-1 n-2 ...
        period: k.Expr = k.Op("+", (n, n), dtype=k.INDEX)
        m = k.Op("mod", (j, period), dtype=k.INDEX)
        folded = k.Select(_cmp("<", m, n), m, _sub(_sub(period, one), m), dtype=k.INDEX)
        return k.Select(inside, j, folded, dtype=k.INDEX)
    if mode == "mirror":  # ... 2 1 | 0 1 ... n-1 | n-2 n-3 ...; one element: always 0
        period = _sub(k.Op("+", (n, n), dtype=k.INDEX), k.index_const(2))
        m = k.Op("mod", (j, period), dtype=k.INDEX)
        folded = k.Select(_cmp("<", m, n), m, _sub(period, m), dtype=k.INDEX)
        return k.Select(inside, j, k.Select(_cmp("==", n, one), zero, folded, dtype=k.INDEX),
                        dtype=k.INDEX)
    raise ValueError(f"no index remapping for border mode {mode!r}")


def function_name(kind: str, name: str) -> str:
    """The C name of the function generated for a ``kind`` ("point", "computation",
    "kernel", "parloop") named ``name``: ``sk_blur_point``. Internal (it does not end with
    ``_``), and distinct from every other internal name (none ends with these kinds)."""
    return f"sk_{k.user_stem(name.strip('<>'))}_{kind}"


def _index_rank(kernel: d.PointKernel, array: str) -> int:
    for n in walk(kernel):
        if isinstance(n, d.Index) and n.array == array:
            return len(n.index)
    return 1


def _truth(e: k.Expr) -> k.Expr:
    if e.dtype == dtypes.BOOL:
        return e
    return k.Op("!=", (e, _zero(e.dtype)), dtype=dtypes.BOOL)


def _zero(t: np.dtype) -> k.Constant:
    return k.Constant(t.type(0), dtype=t)


def _cmp(op: str, a: k.Expr, b: k.Expr) -> k.Expr:
    return k.Op(op, (a, b), dtype=dtypes.BOOL)


def _and(a: k.Expr, b: k.Expr) -> k.Expr:
    return k.Op("&&", (a, b), dtype=dtypes.BOOL)


def _add(a: k.Expr, b: k.Expr) -> k.Expr:
    if isinstance(b, k.Constant) and b.value == 0:
        return a
    if isinstance(b, k.Constant) and int(b.value) < 0:  # an index: an integer
        return k.Op("-", (a, k.index_const(-int(b.value))), dtype=k.INDEX)
    return k.Op("+", (a, b), dtype=k.INDEX)


def _sub(a: k.Expr, b: k.Expr) -> k.Expr:
    if isinstance(b, k.Constant) and b.value == 0:
        return a
    return k.Op("-", (a, b), dtype=k.INDEX)


def _min(a: k.Expr, b: k.Expr) -> k.Expr:
    return k.MathCall("min", (a, b), dtype=k.INDEX)


def _max(a: k.Expr, b: k.Expr) -> k.Expr:
    return k.MathCall("max", (a, b), dtype=k.INDEX)


def free_parameters(body: tuple[k.Stmt, ...],
                    order: list[k.ArgumentKey] | tuple[k.ArgumentKey, ...]
                    ) -> tuple[k.Symbol, ...]:
    """A kernel's parameters: every symbol the body uses but does not declare or loop over,
    ordered by the argument it belongs to (``order``: buffer and scalar names), then by role
    (pointer, shape, stride) and dimension."""
    used: dict[str, k.Symbol] = {}
    bound: set[str] = set()
    for stmt in body:
        for n in walk(stmt):
            match n:
                case k.Sym(symbol=s):
                    used.setdefault(s.name, s)
                case k.Load(buffer=b) | k.Store(buffer=b) | k.Address(buffer=b) | \
                        k.AtomicUpdate(buffer=b):
                    used.setdefault(b.base.name, b.base)
                    for e in b.strides:  # printed inside every index expression
                        if isinstance(e, k.Sym):
                            used.setdefault(e.symbol.name, e.symbol)
                case k.Declare(symbol=s) | k.Loop(counter=s):
                    bound.add(s.name)
                case k.DeclareArray(buffer=b):
                    bound.add(b.base.name)
    rank = {name: i for i, name in enumerate(order)}

    def key(s: k.Symbol) -> tuple[int, int, int]:
        for p in s.properties:
            match p:
                case k.BasePointer(buffer=b):
                    return rank[b], 0, 0
                case k.ShapeOf(buffer=b, dim=dim):
                    return rank[b], 1, dim
                case k.StrideOf(buffer=b, dim=dim):
                    return rank[b], 2, dim
                case k.ScalarArgument(key=n):
                    return rank.get(n, len(rank)), 0, 0
        raise AssertionError(f"free symbol {s.name} has no origin")

    return tuple(sorted((s for n, s in used.items() if n not in bound), key=key))
