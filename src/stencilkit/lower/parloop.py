"""Lower a ParLoop to kernel IR: its kernel, and the loop over the set that calls it.

Requires: the typed kernel (or the name of a user-supplied C kernel) and each argument's
structure (``ArgSpec``: kind, access mode, dtype, dim, local shape, map arity and index
type), and the race mode. Ensures: two ``KernelFunction``s. The kernel takes one row-major
local array per argument. The loop function runs, in parallel, blocks of elements
``[blocks[2b], blocks[2b + 1])``, each block's elements in order; per element it gathers
indirect arguments through their maps into local arrays, calls the kernel, and scatters
the results back: through ``AtomicUpdate`` when ``atomic`` (else the caller colours the
blocks so that blocks run together never share a target), into ``Reduction`` buffers for
Globals, and ``SetError`` when the kernel reported an out-of-range index.

The kernel stays a separate function called from the loop (a ``Call``), not inlined into
it: a kernel may be user-supplied C (``sk.Kernel(code, name)``), which the loop must call
through the same convention, and the kernel's own status and locals stay scoped to it. It
is ``internal`` (C: ``static inline``), so the compiler inlines it anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..ir import definition as d
from ..ir import kernel as k
from ..ir.abi import Access, ArgKind
from ..ir.core import rewrite
from .point import PointLowering, free_parameters, function_name

# argument keys of the loop function (every key of it is the compiler's: a{i}, m{i}, blocks)
NBLOCKS = k.BlockCount()
BLOCKS = "blocks"


@dataclass(frozen=True)
class ArgSpec:
    """The structure of one argument, as far as code generation is concerned (``kind`` and
    ``mode`` may be given by their values, "indirect" and "INC")."""

    kind: ArgKind
    mode: Access
    dtype: np.dtype
    dim: int
    local_shape: tuple[int, ...]
    arity: int = 0  # map arity (entry, indirect); rows x cols for mat
    entry: int = 0  # the map entry of an "entry" argument
    index: np.dtype = np.dtype(np.int32)  # the map's values: int64 for targets >= 2**31

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", ArgKind(self.kind))
        object.__setattr__(self, "mode", Access(self.mode))

    @property
    def local_size(self) -> int:
        return int(np.prod(self.local_shape))

    @property
    def writes_shared(self) -> bool:
        return self.kind.shares_targets and self.mode.writes


class KernelLowering(PointLowering):
    """Lowers a typed ParLoop kernel: each parameter is a row-major local array."""

    def __init__(self, kernel: d.PointKernel, specs: tuple[ArgSpec, ...], line_text,
                 filename: str) -> None:
        super().__init__(kernel, (), None, line_text, filename)  # type: ignore[arg-type]
        for p, t, spec in zip(kernel.params, kernel.param_types, specs):
            shape = spec.local_shape
            strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
            props: set[k.Property] = {k.BasePointer(p), k.Restrict()}
            if spec.mode is Access.READ:
                props.add(k.ReadOnly())
            base = self.ctx.user_symbol(p, t, pointer=True, properties=frozenset(props))
            self.buffers[p] = k.Buffer(p, t, base, tuple(k.index_const(n) for n in shape),
                                       tuple(k.index_const(s) for s in strides))

    def expr(self, e: d.Expr) -> k.Expr:
        if isinstance(e, d.Index):
            assert e.dtype is not None, f"untyped expression {e!r} after the typing pass"
            return k.Load(self.buffers[e.array], self.indices(e.array, e.index), dtype=e.dtype)
        return super().expr(e)

    def indices(self, array: str, index: tuple[d.Expr, ...]) -> tuple[k.Expr, ...]:
        buf = self.buffers[array]
        out: list[k.Expr] = []
        for x, n in zip(index, buf.shape):
            size = int(n.value)  # type: ignore[attr-defined]
            if isinstance(x, d.Const) and isinstance(x.value, int):  # (typing: indices are ints)
                v = int(x.value)
                out.append(k.index_const(v + size if v < 0 else v))
            else:
                self.uses_error_flag = True
                out.append(k.Op("wrap_index", (self.expr(x), n), dtype=k.INDEX))
        return tuple(out)

    def stmts(self, body: tuple[d.Stmt, ...]) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        for s in body:
            if isinstance(s, d.Store):
                out.append(k.Store(self.buffers[s.array], self.indices(s.array, s.index),
                                   self.expr(s.value), loc=s.loc, source=self.comment(s)))
            else:
                out.extend(super().stmts((s,)))
        return tuple(out)

    def lower_kernel(self) -> k.KernelFunction:
        self.declare_locals()
        decls = tuple(k.Declare(s, None) for _, s in sorted(self.locals.items()))
        body = decls + self.stmts(self.kernel.body)
        params = tuple(b.base for b in self.buffers.values())
        return k.KernelFunction(function_name("kernel", self.kernel.name), params, body,
                                tuple(self.buffers.values()), self.kernel.name,
                                self.uses_error_flag, internal=True, status=self.status)


def loop_function_name(kernel: str) -> str:
    """The C name of the loop over the set (internal: no other name starts like it)."""
    return f"sk_parloop_{k.user_stem(kernel.strip('<>'))}"


# ---------------------------------------------------------------- the loop over the set


def _mul(a: k.Expr, n: int) -> k.Expr:
    return a if n == 1 else k.Op("*", (a, k.index_const(n)), dtype=k.INDEX)


def _add(*terms: k.Expr) -> k.Expr:
    kept = [t for t in terms if not (isinstance(t, k.Constant) and int(t.value) == 0)]
    out = kept[0] if kept else k.index_const(0)
    for t in kept[1:]:
        out = k.Op("+", (out, t), dtype=k.INDEX)
    return out


def _less(a: k.Expr, b: k.Expr) -> k.Expr:
    return k.Op("<", (a, b), dtype=dtypes.BOOL)


@dataclass(frozen=True)
class _Pieces:
    """What one argument contributes to the loop function."""

    arg: k.Expr  # what the kernel gets
    pre: tuple[k.Stmt, ...] = ()  # before the loop
    body: tuple[k.Stmt, ...] = ()  # per element, before the call
    post: tuple[k.Stmt, ...] = ()  # per element, after the call
    after: tuple[k.Stmt, ...] = ()  # after the loop
    reductions: tuple[k.Reduction, ...] = ()


class LoopLowering:
    """Builds the loop function of one ParLoop (see the module docstring)."""

    def __init__(self, name: str, title: str, kernel: str, specs: tuple[ArgSpec, ...],
                 atomic: bool, kernel_returns_status: bool, *, private: bool = False) -> None:
        """``name``: the loop function's; ``title``: the ParLoop kernel's name as the user
        gave it; ``kernel``: the name of the function to call per element. ``private``:
        the kernel gets local arrays for every argument, direct ones and read Globals too
        (OpenCL: a function's pointer parameters are private, not pointers into global
        memory), gathered before the call and written back after it."""
        self.name, self.title, self.kernel, self.specs = name, title, kernel, specs
        self.atomic, self.returns_status = atomic, kernel_returns_status
        self.private = private
        self.ctx = k.KernelContext()
        self.status = self.ctx.symbol("sk_error", k.STATUS)
        self.q = self.ctx.symbol("q", k.INDEX)  # the counter over a local array
        self.e = self.ctx.symbol("e", k.INDEX)  # the element
        self.buffers: list[k.Buffer] = []  # the argument arrays

    def array(self, name: str, dtype: np.dtype, *, read_only: bool = False,
              key: str | None = None, what: k.Property | None = None) -> k.Buffer:
        """A flat argument array (the Dat's values, a map, ...); ``key``: its argument;
        ``what``: what it is (``LoopArgument``, ``BlockList``)."""
        key = key or name
        props: set[k.Property] = {k.BasePointer(key), k.Restrict()}
        if what is not None:
            props.add(what)
        if read_only:
            props.add(k.ReadOnly())
        base = self.ctx.symbol(name, dtype, pointer=True, properties=frozenset(props))
        rows = self.ctx.symbol(f"{name}_size", k.INDEX,
                               properties=frozenset({k.ShapeOf(key, 0)}))
        buf = k.Buffer(key, np.dtype(dtype), base, (k.ref(rows),), (k.index_const(1),))
        self.buffers.append(buf)
        return buf

    def local(self, key: str, dtype: np.dtype, size: int) -> tuple[k.Buffer, k.Stmt]:
        base = self.ctx.symbol(key, dtype, pointer=True)
        buf = k.Buffer(key, np.dtype(dtype), base, (k.index_const(size),), (k.index_const(1),))
        return buf, k.DeclareArray(buf, k.index_const(size))

    def over(self, n: int, *body: k.Stmt) -> tuple[k.Stmt, ...]:
        """``body`` for q < n (``q``: the counter over local arrays)."""
        if not body:
            return ()
        if n == 1:  # q is 0
            return tuple(rewrite(s, self._q_is_zero) for s in body)
        return (k.Loop(self.q, k.index_const(0), k.index_const(n), k.index_const(1), body),)

    def _q_is_zero(self, x: object) -> k.Expr | None:
        if isinstance(x, k.Sym) and x.symbol == self.q:
            return k.index_const(0)
        if isinstance(x, k.Op) and x.op == "+" and isinstance(x.args[1], k.Constant) \
                and int(x.args[1].value) == 0:
            return x.args[0]
        return None

    def load(self, buf: k.Buffer, index: k.Expr) -> k.Load:
        return k.Load(buf, (index,), dtype=buf.element_type)

    def lower(self) -> k.KernelFunction:
        parts = [self.argument(i, s) for i, s in enumerate(self.specs)]
        pre = tuple(x for p in parts for x in p.pre)
        body = [x for p in parts for x in p.body]
        call = k.Call(self.kernel, tuple(p.arg for p in parts), dtype=k.STATUS)
        if self.returns_status:
            failed = k.Op("!=", (call, k.Literal("0", dtype=k.STATUS)), dtype=dtypes.BOOL)
            body.append(k.Branch(failed, (k.SetError(k.STATUS_INDEX),)))
        else:
            body.append(k.Evaluate(call))
        body += [x for p in parts for x in p.post]
        return self.function(pre, tuple(body), tuple(x for p in parts for x in p.after),
                             tuple(r for p in parts for r in p.reductions))

    def argument(self, i: int, s: ArgSpec) -> _Pieces:
        """What argument ``i`` adds before the loop, per element before and after the
        kernel call, and after the loop; and what the kernel gets for it."""
        e = k.ref(self.e)
        a = self.array(f"a{i}", s.dtype, read_only=s.mode is Access.READ, what=k.LoopArgument(i))
        if s.kind is ArgKind.DIRECT and not s.mode.reduces and not self.private:
            ptr = self.ctx.symbol(f"l{i}", s.dtype, pointer=True, properties=frozenset(
                {k.ReadOnly()} if s.mode is Access.READ else set()))
            return _Pieces(k.ref(ptr), body=(
                k.Declare(ptr, k.Address(a, (_mul(e, s.dim),), dtype=s.dtype)),))
        if s.kind is ArgKind.GLOBAL and s.mode is Access.READ and not self.private:
            ptr = self.ctx.symbol(f"l{i}", s.dtype, pointer=True,
                                  properties=frozenset({k.ReadOnly()}))
            return _Pieces(k.ref(ptr), body=(k.Declare(ptr, k.ref(a.base)),))
        size = s.local_size  # dim; map arity x dim; the matrix block
        decl: k.Stmt
        loc, decl = self.local(f"l{i}", s.dtype, size)
        q = k.ref(self.q)
        value = self.load(loc, q)
        if s.kind is ArgKind.DIRECT:  # MIN/MAX: the kernel sees the current value; what it
            at = _add(_mul(e, s.dim), q)  # leaves is reduced into the Dat
            if s.mode.reduces:
                back = self.keep(s.mode, a, at, value)
            else:  # private: every mode sees the current values (WRITE keeps unwritten ones)
                back = () if s.mode is Access.READ else (k.Store(a, (at,), value),)
            return _Pieces(k.ref(loc.base), body=(decl, *self.over(size, k.Store(
                loc, (q,), self.load(a, at)))), post=self.over(size, *back))
        if s.kind is ArgKind.GLOBAL and s.mode is Access.READ:  # private: a copy of the Global
            return _Pieces(k.ref(loc.base), body=(decl, *self.over(size, k.Store(
                loc, (q,), self.load(a, q)))))
        if s.kind is ArgKind.GLOBAL:
            red, red_decl = self.local(f"r{i}", s.dtype, s.dim)
            init = _zero(s.dtype) if s.mode is Access.INC else self.load(a, q)
            op = {Access.INC: "+", Access.MIN: "min", Access.MAX: "max"}[s.mode]
            post: k.Stmt
            if s.mode is Access.INC:
                post = k.Store(red, (q,), _plus(self.load(red, q), value))
                after = k.Store(a, (q,), _plus(self.load(a, q), self.load(red, q)))
            else:
                (post,) = self.keep(s.mode, red, q, value)
                after = k.Store(a, (q,), self.load(red, q))
            return _Pieces(k.ref(loc.base), pre=(red_decl, *self.over(size, k.Store(
                red, (q,), init))), body=(decl, *self.over(size, k.Store(loc, (q,), init))),
                post=self.over(size, post), after=self.over(size, after),
                reductions=(k.Reduction(op, red, s.dim),))
        index = np.dtype(np.int64) if s.kind is ArgKind.MAT else s.index
        m = self.array(f"m{i}", index, read_only=True, what=k.LoopArgument(i, map=True))
        if s.kind is ArgKind.MAT:  # the kernel's block is added (INC) or written into CSR values
            at = self.load(m, _add(_mul(e, s.local_size), q))
            fill: k.Expr = _zero(s.dtype)
        else:
            # entry q / dim of the element's map row (from ``entry`` on), component q % dim
            ent, comp = (q, k.index_const(0)) if s.dim == 1 else (
                k.Op("/", (q, k.index_const(s.dim)), dtype=k.INDEX), k.Op("%", (q, k.index_const(s.dim)),
                                                               dtype=k.INDEX))
            first = 0 if s.kind is ArgKind.INDIRECT else s.entry
            row = k.Convert(self.load(m, _add(_mul(e, s.arity), k.index_const(first), ent)), dtype=k.INDEX)
            at = _add(_mul(row, s.dim), comp)
            gather = s.mode in (Access.READ, Access.RW, Access.MIN, Access.MAX)
            fill = self.load(a, at) if gather else _zero(s.dtype)
        return _Pieces(k.ref(loc.base), body=(decl, *self.over(size, k.Store(loc, (q,), fill))),
                       post=self.over(size, *self.scatter(s.mode, a, at, value)))

    def function(self, pre: tuple[k.Stmt, ...], per_element: tuple[k.Stmt, ...],
                 after: tuple[k.Stmt, ...], reductions: tuple[k.Reduction, ...]
                 ) -> k.KernelFunction:
        nblocks = self.ctx.symbol("nblocks", k.INDEX,
                                  properties=frozenset({k.ScalarArgument(NBLOCKS)}))
        blocks = self.array("blocks", dtypes.INT64, read_only=True, key=BLOCKS,
                            what=k.BlockList())
        b = self.ctx.symbol("b", k.INDEX)
        start = self.load(blocks, _mul(k.ref(b), 2))
        stop = self.load(blocks, _add(_mul(k.ref(b), 2), k.index_const(1)))
        elements = k.Loop(self.e, start, stop, k.index_const(1), per_element)
        several = k.Op(">", (k.ref(nblocks), k.index_const(1)), dtype=dtypes.BOOL)
        over_blocks = k.Loop(b, k.index_const(0), k.ref(nblocks), k.index_const(1), (elements,),
                             parallel=k.Parallel(reductions=reductions, only_if=several))
        body = pre + (over_blocks,) + after
        order: list[k.ArgumentKey] = [NBLOCKS, BLOCKS]
        for i in range(len(self.specs)):
            order += [f"a{i}", f"m{i}"]
        return k.KernelFunction(self.name, free_parameters(body, order), body,
                                tuple(self.buffers),
                                loop_doc(self.name, self.title, self.specs),
                                self.returns_status, status=self.status)

    def keep(self, mode: Access, buf: k.Buffer, index: k.Expr, value: k.Expr
             ) -> tuple[k.Stmt, ...]:
        """``buf[index] = value`` where ``value`` is below (MIN) or above (MAX) it."""
        cmp = "<" if mode is Access.MIN else ">"
        better = k.Op(cmp, (value, self.load(buf, index)), dtype=dtypes.BOOL)
        return (k.Branch(better, (k.Store(buf, (index,), value),)),)

    def scatter(self, mode: Access, buf: k.Buffer, index: k.Expr, value: k.Expr
                ) -> tuple[k.Stmt, ...]:
        """A local value back into a shared target (race-free by colouring or atomics)."""
        if mode.reduces:  # always coloured: no atomic min/max
            return self.keep(mode, buf, index, value)
        if mode is Access.READ:
            return ()
        if self.atomic:
            return (k.AtomicUpdate(buf, (index,), "+" if mode is Access.INC else None, value),)
        if mode is Access.INC:
            value = _plus(self.load(buf, index), value)
        return (k.Store(buf, (index,), value),)


def _plus(a: k.Expr, b: k.Expr) -> k.Expr:
    return k.Op("+", (a, b), dtype=a.dtype)


def _zero(t: np.dtype) -> k.Constant:
    return k.Constant(t.type(0), dtype=t)


def loop_doc(name: str, kernel_name: str, specs: tuple[ArgSpec, ...]) -> str:
    """The loop function's documentation: its calling convention, argument by argument."""
    lines = [f"ParLoop of kernel '{kernel_name}'.", "",
             f"int {name}(nblocks, blocks, ...) runs, in parallel, the blocks of elements",
             "[blocks[2b], blocks[2b + 1]) for b < nblocks, each block's elements in order",
             "(blocks that write shared entries must not run together: call once per",
             "colour). Returns 0, or 2 when the kernel indexed a local array out of range.",
             "Arguments after the blocks, in order:"]
    for i, s in enumerate(specs):
        t = dtypes.c_name(s.dtype)
        if s.kind is ArgKind.DIRECT:
            what = f"a{i}: {t}[set size * {s.dim}], the Dat's values ({s.mode.value})"
        elif s.kind is ArgKind.INDIRECT:
            what = (f"a{i}: {t}[target size * {s.dim}] ({s.mode.value}), m{i}: {s.index}[set size * "
                    f"{s.arity}] the map; the kernel sees a gathered ({s.arity}, {s.dim}) block")
        elif s.kind is ArgKind.ENTRY:
            what = (f"a{i}: {t}[target size * {s.dim}] ({s.mode.value}), m{i}: {s.index}[set size * "
                    f"{s.arity}] the map, of which entry {s.entry} is used")
        elif s.kind is ArgKind.GLOBAL:
            what = f"a{i}: {t}[{s.dim}], a Global ({s.mode.value})"
        else:
            what = (f"a{i}: {t}[nnz] CSR values ({s.mode.value}), m{i}: int64[set size * "
                    f"{s.local_size}] the position in the values of each local block entry")
        lines.append(f"  {what}")
    return "\n".join(lines)
