"""Kernel IR, after the pystencils memory model: symbols, buffers, typed constants, loops.

One kernel IR holds the whole of what runs, for every kind (point kernel, computation,
ParLoop): loop nests with their parallel meaning, local arrays, gathers and scatters through
map buffers, atomic updates, reductions and the error channel. It comes in two layers:

- *Abstract* nodes say what is meant, not how a language says it: ``Loop.parallel`` (a
  ``Parallel``: schedule, reductions, a run-in-parallel-only-if condition, or a loop shared
  among the threads of an enclosing ``ParallelRegion``), ``Loop.vectorize``,
  ``ParallelRegion``, ``AtomicUpdate``, ``SetError`` (the error channel), ``MathCall`` (an
  IR math function). Lowerings (``lower/lower_*``) produce these and the common nodes
  (loops, branches, declarations, local arrays, loads, stores, ``Address``, ``Call``,
  ``Evaluate``, ``Op``, ``Convert``, ``Literal``, ...), never concrete ones.
- *Concrete* nodes are what a language has: ``Pragma``, ``Block``, ``Return``, ``CCall``
  (a named function of the target language). A platform (``lower/platforms``) rewrites
  every abstract node (``ABSTRACT``, and ``Loop.parallel``/``vectorize``) into concrete
  and common ones, and adds the status' declaration and return; printers print only
  platform-lowered IR (they refuse abstract nodes).

Invariants:
- Symbols are created only through a ``KernelContext``, which keeps names unique; a symbol
  is identified by its name. Names come from two disjoint namespaces, so that no user name
  can ever meet a name of the generated code: every identifier derived from a user's name
  (argument, local, field, temporary) ends with ``_`` (``a`` -> ``a_``, its shape
  ``a_shape_0_``) and never starts with ``_``; no internal name ends with ``_``. No keyword,
  macro or function of C, OpenMP, ``math.h``, ``complex.h`` or ``Python.h`` ends with ``_``
  unless it starts with ``_``. Symbol properties say what a kernel parameter *is* (the base
  pointer, a shape or a stride of which buffer, a scalar argument) and what it promises
  (``restrict``, alignment), and travel with the kernel's parameter list.
- A ``Buffer`` has one base pointer, a shape and strides (in elements) that are symbols or
  constants, all of one index type (int64).
- ``Constant`` values are stored exactly as NumPy scalars of their dtype.
- ``MathCall`` names an IR math function; the platform picks the implementation (``sqrt``
  vs ``sqrtf`` vs ``csqrt``, or a runtime helper ``Op``). ``CCall`` is a function of the
  target language, ``Call`` one of the generated (or user-supplied) kernel functions of the
  same source, ``Literal`` text printed verbatim (assumed pure and constant).
- Every expression has a dtype; operands of ``Op`` already have the operator's operand type.
- The error channel is the kernel's status: ``SetError(code)`` records one of the
  ``STATUS_*`` codes (any thread may set it; the last write wins); the kernel returns it.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import TypeVar

import numpy as np

from .core import Location, Node

DType = np.dtype
INDEX = np.dtype(np.int64)
STATUS = np.dtype(np.int32)  # the error channel's type (C's int)

# The error channel's codes (the kernel's return value; ``runtime.launch`` turns them into
# errors). 3 is the CPython entry's (an output overlaps an input), never the kernel's.
STATUS_OFFSET = 1  # a run-time relative index left the neighbourhood (clamped)
STATUS_INDEX = 2  # an absolute index was out of range (the element read as 0)
STATUS_RANGE_STEP = 4  # a range() step was 0 (the loop did not run)
STATUS_MEMORY = 8  # a local array too large for the stack could not be allocated (work skipped)


# ---------------------------------------------------------------- symbol properties


@dataclass(frozen=True, slots=True)
class BasePointer:
    buffer: str


@dataclass(frozen=True, slots=True)
class ShapeOf:
    buffer: str
    dim: int


@dataclass(frozen=True, slots=True)
class StrideOf:
    buffer: str
    dim: int


# What a scalar argument the compiler adds is: each is its own argument key (``ScalarArgument``),
# a value rather than a name, so that no user's argument (keyed by its name, a string) can
# ever be taken for one, and the launch ABI (``ir/abi.py``) reads its role from the type.


@dataclass(frozen=True, slots=True)
class OriginOf:
    """The index of a computation's domain origin in ``field`` along ``axis`` ("I", "J", "K")."""

    field: str
    axis: str


@dataclass(frozen=True, slots=True)
class DomainExtent:
    """The extent of a computation's domain along ``axis``."""

    axis: str


@dataclass(frozen=True, slots=True)
class BorderFill:
    """A point kernel's flag: write ``FillValue`` where the neighbourhood leaves the array."""


@dataclass(frozen=True, slots=True)
class FillValue:
    """A point kernel's value outside the array (``cval``)."""


@dataclass(frozen=True, slots=True)
class BlockCount:
    """The number of blocks of elements a ParLoop's loop function runs."""


GeneratedKey = OriginOf | DomainExtent | BorderFill | FillValue | BlockCount
# The key of a kernel argument: a user's name (an array or a scalar), or what a compiler-added
# scalar is
ArgumentKey = str | GeneratedKey


@dataclass(frozen=True, slots=True)
class ScalarArgument:
    """The parameter is the value of the argument ``key``."""

    key: ArgumentKey


@dataclass(frozen=True, slots=True)
class Output:
    """The base pointer of the array a point kernel writes (``out``)."""


@dataclass(frozen=True, slots=True)
class StandardIndexed:
    """The base pointer of an array a point kernel indexes absolutely (``standard_indexing``)."""


@dataclass(frozen=True, slots=True)
class Temporary:
    """The base pointer of a computation's temporary held in memory (the caller allocates it)."""


@dataclass(frozen=True, slots=True)
class BlockList:
    """The base pointer of a ParLoop's blocks: ``[start, end)`` pairs of elements, int64."""


@dataclass(frozen=True, slots=True)
class LoopArgument:
    """The base pointer of a ParLoop argument's array (``argument``: its position): its data,
    or (``map``) the map it goes through (a Mat: its local map into the CSR values)."""

    argument: int
    map: bool = False


@dataclass(frozen=True, slots=True)
class Restrict:
    """The pointer does not alias any other pointer of the kernel."""


@dataclass(frozen=True, slots=True)
class Alignment:
    byte_boundary: int


@dataclass(frozen=True, slots=True)
class ReadOnly:
    """The kernel never writes through this pointer."""


Property = (BasePointer | ShapeOf | StrideOf | ScalarArgument | Restrict | Alignment | ReadOnly
            | Output | StandardIndexed | Temporary | BlockList | LoopArgument)


P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    dtype: DType
    pointer: bool = False
    properties: frozenset[Property] = frozenset()

    def has(self, kind: type) -> bool:
        return any(isinstance(p, kind) for p in self.properties)

    def get(self, kind: type[P]) -> P | None:
        return next((p for p in self.properties if isinstance(p, kind)), None)


@dataclass(frozen=True, slots=True)
class Buffer:
    name: str
    element_type: DType
    base: Symbol
    shape: tuple[Expr, ...]
    strides: tuple[Expr, ...]
    index_type: DType = INDEX

    @property
    def ndim(self) -> int:
        return len(self.shape)


class KernelContext:
    """Owns the symbols of one kernel translation; the only way to create a symbol."""

    def __init__(self) -> None:
        self.symbols: dict[str, Symbol] = {}

    def symbol(self, name: str, dtype: DType, *, pointer: bool = False,
               properties: frozenset[Property] = frozenset(), unique: bool = True) -> Symbol:
        """An internal symbol: ``name`` is chosen by the compiler and must not end with ``_``."""
        base = _c_identifier(name)
        assert not base.endswith("_"), f"internal name {name!r} in the user namespace"
        candidate, n = base, 0
        while unique and candidate in self.symbols:
            n += 1
            candidate = f"{base}_{n}"
        return self._add(Symbol(candidate, np.dtype(dtype), pointer, properties))

    def user_symbol(self, name: str, dtype: DType, *, pointer: bool = False,
                    properties: frozenset[Property] = frozenset()) -> Symbol:
        """A symbol for a name the user wrote (or one derived from it): ``x`` -> ``x_``."""
        stem = user_stem(name)
        candidate, n = stem + "_", 0
        while candidate in self.symbols:
            n += 1
            candidate = f"{stem}_{n}_"
        return self._add(Symbol(candidate, np.dtype(dtype), pointer, properties))

    def _add(self, sym: Symbol) -> Symbol:
        self.symbols[sym.name] = sym
        return sym

    def buffer(self, name: str, element_type: DType, ndim: int, *, unit_stride_last: bool,
               restrict: bool, read_only: bool, unit_dim: int | None = None,
               user: bool = True, marks: frozenset[Property] = frozenset()) -> Buffer:
        """A buffer with symbolic shape and strides; the stride of ``unit_dim`` (default: the
        last dimension when ``unit_stride_last``) is the constant 1. ``user``: ``name`` is
        the user's (an argument or field), else the compiler's. ``marks``: more properties of
        the base pointer (what the array is: ``Output``, ``StandardIndexed``)."""
        if unit_dim is None and unit_stride_last:
            unit_dim = ndim - 1
        props: set[Property] = {BasePointer(name), *marks}
        if restrict:
            props.add(Restrict())
        if read_only:
            props.add(ReadOnly())
        make = self.user_symbol if user else self.symbol
        base = make(name, element_type, pointer=True, properties=frozenset(props))
        shape = tuple(Sym(make(f"{name}_shape_{k}", INDEX,
                               properties=frozenset({ShapeOf(name, k)})), dtype=INDEX)
                      for k in range(ndim))
        strides: list[Expr] = []
        for k in range(ndim):
            if k == unit_dim:
                strides.append(Constant(np.int64(1), dtype=INDEX))
            else:
                strides.append(Sym(make(f"{name}_stride_{k}", INDEX,
                                        properties=frozenset({StrideOf(name, k)})),
                                   dtype=INDEX))
        return Buffer(name, np.dtype(element_type), base, shape, tuple(strides))


def user_stem(name: str) -> str:
    """A user's name as the stem of a C identifier: never empty, never starting with ``_``
    (reserved to the implementation in C), so that the stem plus ``_`` is a user name."""
    base = _c_identifier(name)
    return "u" + base if base.startswith("_") else base


def _c_identifier(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "v" + out


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Expr(Node):
    _: KW_ONLY
    dtype: DType


@dataclass(frozen=True, slots=True)
class Constant(Expr):
    value: np.generic


@dataclass(frozen=True, slots=True)
class Sym(Expr):
    symbol: Symbol


def index_const(value: int) -> Constant:
    """An index constant: loop bounds, offsets and sizes are ``INDEX`` (int64) throughout."""
    return Constant(np.int64(value), dtype=INDEX)


def ref(symbol: Symbol) -> Sym:
    """``symbol`` read in an expression, of its own type."""
    return Sym(symbol, dtype=symbol.dtype)


@dataclass(frozen=True, slots=True)
class Load(Expr):
    buffer: Buffer
    indices: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Op(Expr):
    """An operator of the C family: arithmetic, comparison, logic, or a runtime helper
    with the same semantics on every platform (``floordiv``, ``mod``, ``powi``)."""

    op: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Select(Expr):
    cond: Expr
    then: Expr
    orelse: Expr


@dataclass(frozen=True, slots=True)
class MathCall(Expr):
    func: str  # an IR math function: "sqrt", "exp", "floor", "minimum", ...
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class CCall(Expr):
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    text: str


@dataclass(frozen=True, slots=True)
class Convert(Expr):
    value: Expr


# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Stmt(Node):
    _: KW_ONLY
    loc: Location | None = field(default=None, compare=False)
    source: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Declare(Stmt):
    symbol: Symbol
    value: Expr | None


@dataclass(frozen=True, slots=True)
class DeclareArray(Stmt):
    """A local array of ``size`` elements (a C99 variable-length array), named by the
    buffer's base pointer."""

    buffer: Buffer
    size: Expr


@dataclass(frozen=True, slots=True)
class SetSym(Stmt):
    symbol: Symbol
    value: Expr


@dataclass(frozen=True, slots=True)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, slots=True)
class Reduction(Node):
    """Each thread accumulates into a private copy of ``buffer``'s first ``size`` elements
    (initialized to the identity of ``op``); the copies are combined with ``op`` into the
    shared one when the loop ends."""

    op: str  # "+", "min", "max"
    buffer: Buffer
    size: int


@dataclass(frozen=True, slots=True)
class Parallel(Node):
    """The parallel meaning of a loop: its iterations may run concurrently.

    ``schedule``: how iterations are dealt to threads ("static": contiguous chunks);
    ``reductions``: buffers combined across threads; ``only_if``: run in parallel only
    when this holds (small work runs serially); ``shared``: the loop is inside a
    ``ParallelRegion`` and its iterations are shared among that region's threads (an
    implicit barrier follows it) instead of starting threads of its own; ``serial_copy``:
    below ``only_if`` a target may run a serial copy of the loop (compiled twice, for
    kernels whose calls are often short) instead of testing the condition where the team
    would start; ``collapse``: this loop and the ``collapse - 1`` loops nested directly in
    it (each the only statement of its parent's body, bounds independent of the outer
    counters) share out their iterations as one space (OpenMP's ``collapse``; a target
    without it runs only this loop in parallel)."""

    schedule: str = "static"
    reductions: tuple[Reduction, ...] = ()
    only_if: Expr | None = None
    shared: bool = False
    serial_copy: bool = True
    collapse: int = 1


@dataclass(frozen=True, slots=True)
class Loop(Stmt):
    counter: Symbol
    start: Expr
    stop: Expr
    step: Expr
    body: tuple[Stmt, ...]
    parallel: Parallel | None = None
    vectorize: bool = False  # iterations are independent: a hint to vectorize


@dataclass(frozen=True, slots=True)
class Branch(Stmt):
    cond: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True, slots=True)
class WhileLoop(Stmt):
    cond: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Section(Stmt):
    """A named block, printed with a marker comment (``/* --- interior --- */``)."""

    title: str
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class ParallelRegion(Stmt):
    """A team of threads runs ``body``, each all of it, except the loops marked
    ``Parallel(shared=True)`` whose iterations the team shares; ``only_if``: a team only
    when this holds (small work runs on the calling thread alone)."""

    body: tuple[Stmt, ...]
    only_if: Expr | None = None


@dataclass(frozen=True, slots=True)
class AtomicUpdate(Stmt):
    """``buffer[indices] = buffer[indices] op value`` (``op`` "+"), or ``= value``
    (``op`` None), indivisibly with respect to other threads' updates of that element."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    op: str | None
    value: Expr


@dataclass(frozen=True, slots=True)
class SetError(Stmt):
    """The error channel: the kernel will return ``code`` (a ``STATUS_*``)."""

    code: int


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A call of another kernel function of the same source (``KernelFunction.name``), or
    of a user-supplied one; pointer arguments are ``Sym`` of pointer symbols."""

    function: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Address(Expr):
    """A pointer to ``buffer[indices]`` (dtype: the element type)."""

    buffer: Buffer
    indices: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Evaluate(Stmt):
    """An expression evaluated for its effect (a call)."""

    value: Expr


@dataclass(frozen=True, slots=True)
class StreamedRow(Stmt):
    """``loop`` (a vectorizable loop over the unit-stride last dimension whose only writes
    are the stores to ``buffer``), run so that those stores bypass the caches when ``when``
    holds: a platform that has non-temporal stores computes ``chunk`` elements at a time
    into a small local buffer with the unchanged loop and streams them out; any other runs
    ``loop`` as is. Why: a store that misses the cache first reads its line
    (write-allocate), a third of the traffic of a two-array stencil whose output does not
    fit in cache."""

    loop: Loop
    buffer: Buffer
    chunk: int
    when: Expr


@dataclass(frozen=True, slots=True)
class StoreFence(Stmt):
    """Orders this thread's earlier non-temporal stores before its later ones and before
    the end of the parallel loop (a no-op where stores are never non-temporal)."""


# ---------------------------------------------------------------- concrete (platform) nodes


@dataclass(frozen=True, slots=True)
class Pragma(Stmt):
    """``#pragma`` followed by ``parts`` (text, and expressions printed in place, such as
    a condition or a reduction's array), applying to the statement after it."""

    parts: tuple[str | Expr, ...]


@dataclass(frozen=True, slots=True)
class Block(Stmt):
    """A brace-enclosed block (a scope, or the statement a pragma applies to)."""

    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Return(Stmt):
    value: Expr


ABSTRACT = (ParallelRegion, AtomicUpdate, SetError, MathCall, StreamedRow, StoreFence)


@dataclass(frozen=True, slots=True)
class KernelFunction(Node):
    """A lowered kernel. ``params`` come from the free symbols of the body, ordered by the
    argument they belong to, and carry their properties to the runtime and the header.
    ``internal``: called only by another function of the same source (C: ``static
    inline``). ``doc``: one line, or several (then the whole documentation comment).
    ``uses_error_flag``: the body may set the error channel (``status``, the symbol the
    platform keeps it in)."""

    name: str
    params: tuple[Symbol, ...]
    body: tuple[Stmt, ...]
    buffers: tuple[Buffer, ...]
    doc: str = ""
    uses_error_flag: bool = False
    internal: bool = False
    status: Symbol | None = None  # the error channel's symbol (created by the lowering)
