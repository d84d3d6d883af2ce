"""The kernel IR's invariants, checked: an internal-consistency check of the compiler.

``verify_kernel`` walks a ``KernelFunction`` and raises ``KernelIRError`` (the rule, the
function, the statement) at the first broken invariant of ``ir/kernel.py``. A lowering or a
pass that breaks one has a bug: the printers would emit C that does not compile, or worse,
C that compiles and computes something else (a scalar shared by the threads of a parallel
loop, a counter assigned in its loop, a store through a ``const`` pointer that the C
compiler accepts after a cast).

It runs where kernel IR is produced (after lowering, after simplification, after platform
lowering, on each launch of a GPU plan) when ``STENCILKIT_VERIFY=1``; the test suite sets
it, so every kernel a test builds is verified. Off, it costs nothing.

The rules (``Rule``): symbols defined before use, in scope (parameters, declarations,
loop counters of enclosing loops, local arrays); no symbol declared twice in one scope;
identifiers valid in C (no ``@``, no keyword); types consistent (operands of an operator,
assigned values, conditions boolean, indices and loop bounds integral); no store through a
read-only pointer, no assignment of a loop's counter inside it; in a parallel loop, no
assignment of a scalar and no store into a local array declared outside it (other than the
loop's reductions); no abstract node after platform lowering; ``SetError`` codes are
``STATUS_*`` codes, in a kernel that says it uses the error channel.
"""

from __future__ import annotations

import enum
import keyword
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .core import walk
from .kernel import (
    ABSTRACT,
    INDEX,
    STATUS_INDEX,
    STATUS_MEMORY,
    STATUS_OFFSET,
    STATUS_RANGE_STEP,
    Address,
    AtomicUpdate,
    Block,
    Branch,
    Buffer,
    Call,
    CCall,
    Constant,
    Convert,
    Declare,
    DeclareArray,
    Evaluate,
    Expr,
    KernelFunction,
    Literal,
    Load,
    Loop,
    MathCall,
    Op,
    ParallelRegion,
    Pragma,
    ReadOnly,
    Return,
    Section,
    Select,
    SetError,
    SetSym,
    Stmt,
    Store,
    StoreFence,
    StreamedRow,
    Sym,
    Symbol,
    WhileLoop,
)

#: set to "1" to verify every kernel where it is produced (the test suite sets it)
ENV_FLAG = "STENCILKIT_VERIFY"

_BOOL = np.dtype(np.bool_)
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "&", "|", "^"})
_COMPARISON = frozenset({"==", "!=", "<", "<=", ">", ">="})
_LOGIC = frozenset({"&&", "||"})
_STATUS_CODES = frozenset({STATUS_OFFSET, STATUS_INDEX, STATUS_RANGE_STEP, STATUS_MEMORY})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# C99 keywords and the C-family words the printers' dialects reserve (CUDA, OpenCL)
_C_WORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while _Bool _Complex _Imaginary bool true false
__global__ __device__ __shared__ __global __local __kernel kernel global local private
""".split())


#: where a rule broke: a statement, or a phrase (a parameter, a launch's condition)
Where = Stmt | str


class Rule(enum.Enum):
    """One invariant of kernel IR; its value is the message's explanation."""

    UNDEFINED = "every symbol is defined before use (a parameter, a declaration in scope, " \
                "the counter of an enclosing loop)"
    REDECLARED = "a symbol is declared at most once per scope"
    IDENTIFIER = "names are valid C identifiers (letters, digits, '_'; no keyword)"
    OPERAND_TYPES = "an operator's operands have its operand type"
    RESULT_TYPE = "an expression's dtype is what its operator yields"
    ASSIGN_TYPE = "a declared, assigned or stored value has the target's type"
    CONDITION = "conditions are boolean"
    INDEX_TYPE = "indices, sizes and loop bounds are integral"
    READ_ONLY = "nothing is stored through a read-only pointer"
    COUNTER_ASSIGNED = "a loop's counter is not assigned in its body"
    RACE = "a parallel loop assigns only scalars and local arrays declared inside it " \
           "(or its reductions)"
    ABSTRACT_LEFT = "platform-lowered IR holds no abstract node"
    ERROR_CHANNEL = "SetError codes are STATUS_* codes of a kernel with uses_error_flag"
    BUFFER_RANK = "a buffer is indexed with one index per dimension"
    COLLAPSE = "a parallel loop collapsed with the next n - 1 holds each of them as the " \
               "only statement of its parent, their bounds free of the outer counters"


class KernelIRError(AssertionError):
    """Kernel IR broke an invariant: a bug of the compiler, never of the user's code."""

    def __init__(self, rule: Rule, function: str, where: str, detail: str) -> None:
        self.rule = rule
        self.function = function
        self.where = where
        super().__init__(f"kernel IR of {function!r} breaks rule {rule.name} ({rule.value}): "
                         f"{detail}\n  in: {where}")


def enabled() -> bool:
    return os.environ.get(ENV_FLAG, "") not in ("", "0")


def checked(kf: KernelFunction, *, platform_lowered: bool = False,
            keeps: tuple[type, ...] = ()) -> KernelFunction:
    """``kf``, verified first when ``STENCILKIT_VERIFY`` is set (a pipeline's hook)."""
    if enabled():
        verify_kernel(kf, platform_lowered=platform_lowered, keeps=keeps)
    return kf


def checked_plan(plan):
    """A GPU launch plan (``targets.cuda/opencl.LaunchPlan``), each launch verified
    as the function it is printed as, when ``STENCILKIT_VERIFY`` is set."""
    if enabled():
        verify_plan(plan)
    return plan


def verify_plan(plan) -> None:
    """Every launch of a launch plan: its body uses only its parameters and the counters of
    its grid dimensions; its conditions (decided on the host or on the device) only the
    kernel's parameters and the counters of the grid and of the host loops around it."""
    kf: KernelFunction = plan.kernel

    def visit(steps, host: tuple[Symbol, ...]) -> None:
        for step in steps:
            if not hasattr(step, "dims"):  # a host loop
                visit(step.body, (*host, step.counter))
                continue
            counters = tuple(d.counter for d in step.dims)
            # OpenCL's reductions: the printer adds the group's local array and the partials
            names = {p.name for p in step.params}
            partials = tuple(sym for part in getattr(step, "partials", ())
                             for sym in (part.buffer, part.local, part.groups)
                             if sym.name not in names)
            # CUDA's dynamic shared memory: the printer declares its array
            shared = getattr(step, "shared", None)
            partials += (shared.symbol,) if shared is not None else ()
            body = (*step.prologue, *step.body, *step.epilogue)
            fn = KernelFunction(step.name, (*step.params, *partials, *counters), body,
                                kf.buffers,
                                uses_error_flag=kf.uses_error_flag, status=kf.status)
            verify_kernel(fn, platform_lowered=True)
            around = KernelFunction(step.name, (*kf.params, *(
                c for c in (*host, *counters) if c.name not in {p.name for p in kf.params})),
                (), kf.buffers, uses_error_flag=kf.uses_error_flag, status=kf.status)
            checker = _Checker(around, platform_lowered=True)
            checker.run()
            for cond in step.conditions:
                checker.condition(cond, f"condition {cond!r:.200} of launch {step.name}")

    visit(plan.steps, ())


def verify_kernel(kf: KernelFunction, *, platform_lowered: bool = False,
                  keeps: tuple[type, ...] = ()) -> None:
    """Raise ``KernelIRError`` at the first invariant ``kf`` breaks (``platform_lowered``:
    ``kf`` went through a platform, so no abstract node may be left but those of ``keeps``,
    which that platform leaves to its printer: Numba's ``MathCall``)."""
    _Checker(kf, platform_lowered=platform_lowered, keeps=keeps).run()


@dataclass
class _Scope:
    names: dict[str, Symbol] = field(default_factory=dict)
    parallel_level: int = 0


class _Checker:
    def __init__(self, kf: KernelFunction, *, platform_lowered: bool,
                 keeps: tuple[type, ...] = ()) -> None:
        self.kf = kf
        self.platform_lowered = platform_lowered
        self.keeps = keeps
        self.scopes: list[_Scope] = [_Scope()]
        self.counters: list[str] = []  # counters of the enclosing loops, innermost last
        self.parallel_level = 0
        self.reductions: list[frozenset[str]] = []  # per enclosing parallel loop
        self.implicit: set[str] = set()  # defined without a declaration (the status)

    # ------------------------------------------------------------ reporting

    def require(self, ok: bool, rule: Rule, where: Where, detail: str) -> None:
        if not ok:
            raise KernelIRError(rule, self.kf.name, _describe(where), detail)

    # ------------------------------------------------------------ scopes

    def lookup(self, name: str) -> tuple[Symbol, int] | None:
        for scope in reversed(self.scopes):
            if name in scope.names:
                return scope.names[name], scope.parallel_level
        return None

    def define(self, sym: Symbol, where: Where) -> None:
        self.identifier(sym.name, where)
        scope = self.scopes[-1]
        if sym.name in self.implicit:  # the platform's declaration of the status
            self.implicit.discard(sym.name)
            self.scopes[0].names.pop(sym.name)
        self.require(sym.name not in scope.names, Rule.REDECLARED, where,
                     f"{sym.name!r} is already declared in this scope")
        scope.names[sym.name] = sym

    def push(self) -> None:
        self.scopes.append(_Scope(parallel_level=self.parallel_level))

    def pop(self) -> None:
        self.scopes.pop()

    def identifier(self, name: str, where: Where) -> None:
        self.require(bool(_IDENTIFIER.match(name)) and name not in _C_WORDS
                     and not keyword.iskeyword(name), Rule.IDENTIFIER, where, f"{name!r}")

    # ------------------------------------------------------------ the walk

    def run(self) -> None:
        kf = self.kf
        self.identifier(kf.name, f"function {kf.name}")
        for p in kf.params:
            self.define(p, f"parameter {p.name} of {kf.name}")
        if kf.status is not None and self.lookup(kf.status.name) is None:
            # the platform declares the status (C) or passes it (CUDA, OpenCL); before
            # platform lowering it is implicit
            self.scopes[0].names[kf.status.name] = kf.status
            self.implicit.add(kf.status.name)
        self.body(kf.body, new_scope=False)

    def body(self, stmts: Iterable[Stmt], *, new_scope: bool = True) -> None:
        if new_scope:
            self.push()
        for s in stmts:
            self.stmt(s)
        if new_scope:
            self.pop()

    def stmt(self, s: Stmt) -> None:
        where = s
        if self.platform_lowered:
            self.require(not isinstance(s, ABSTRACT) or isinstance(s, self.keeps),
                         Rule.ABSTRACT_LEFT, where,
                         f"{type(s).__name__}")
        match s:
            case Declare(symbol=sym, value=v):
                if v is not None:
                    self.expr(v, where)
                    if not sym.pointer:
                        self.assign_type(sym.dtype, v, where)
                self.define(sym, where)
            case DeclareArray(buffer=b, size=n):
                self.expr(n, where)
                self.integral(n, where, "array size")
                self.define(b.base, where)
            case SetSym(symbol=sym, value=v):
                self.expr(v, where)
                found = self.use(sym, where)
                if not sym.pointer:
                    self.assign_type(sym.dtype, v, where)
                self.require(sym.name not in self.counters, Rule.COUNTER_ASSIGNED, where,
                             f"{sym.name!r} is the counter of an enclosing loop")
                self.race(sym.name, found, where)
            case Store(buffer=b, indices=idx, value=v) | AtomicUpdate(
                    buffer=b, indices=idx, value=v):
                self.access(b, idx, where)
                self.expr(v, where)
                self.assign_type(b.element_type, v, where)
                self.require(not b.base.has(ReadOnly), Rule.READ_ONLY, where,
                             f"store into read-only {b.base.name!r}")
                if isinstance(s, Store):
                    self.race(b.base.name, self.lookup(b.base.name), where)
            case Loop():
                self.loop(s, where)
            case Branch(cond=c, then=then, orelse=orelse):
                self.condition(c, where)
                self.body(then)
                self.body(orelse)
            case WhileLoop(cond=c, body=body):
                self.condition(c, where)
                self.body(body)
            case Section(body=body):  # printed without braces: the enclosing scope
                self.body(body, new_scope=False)
            case Block(body=body):
                self.body(body)
            case ParallelRegion(body=body, only_if=only_if):
                if only_if is not None:
                    self.expr(only_if, where)
                    self.condition(only_if, where)
                self.parallel_level += 1
                self.reductions.append(frozenset())
                self.body(body)
                self.reductions.pop()
                self.parallel_level -= 1
            case SetError(code=code):
                self.require(code in _STATUS_CODES, Rule.ERROR_CHANNEL, where,
                             f"code {code} is not a STATUS_* code")
                self.require(self.kf.uses_error_flag, Rule.ERROR_CHANNEL, where,
                             "SetError in a kernel whose uses_error_flag is False (the "
                             "caller would not read the status)")
            case StreamedRow(loop=loop, buffer=b, when=w):
                self.condition(w, where)
                self.use(b.base, where)
                self.stmt(loop)
            case Evaluate(value=v) | Return(value=v):
                self.expr(v, where)
            case Pragma(parts=parts):
                for p in parts:
                    if isinstance(p, Expr):
                        self.expr(p, where)
            case StoreFence():
                pass
            case _:
                self.require(False, Rule.UNDEFINED, where, f"unknown statement {type(s).__name__}")

    def collapsed(self, s: Loop, depth: int, where: Where) -> None:
        """OpenMP's rule for ``collapse(depth)``: a perfect, rectangular nest."""
        outer, loop = [s.counter], s
        for _ in range(depth - 1):
            inner = loop.body[0] if len(loop.body) == 1 else None
            self.require(isinstance(inner, Loop), Rule.COLLAPSE, where,
                         f"the body of loop {loop.counter.name!r} is not one loop")
            assert isinstance(inner, Loop)
            used = {n.symbol for e in (inner.start, inner.stop, inner.step) for n in walk(e)
                    if isinstance(n, Sym)}
            self.require(not used & set(outer), Rule.COLLAPSE, where,
                         f"the bounds of loop {inner.counter.name!r} use an outer counter")
            outer.append(inner.counter)
            loop = inner

    def loop(self, s: Loop, where: Where) -> None:
        for e in (s.start, s.stop, s.step):
            self.expr(e, where)
            self.integral(e, where, "loop bound")
        self.require(np.issubdtype(s.counter.dtype, np.integer), Rule.INDEX_TYPE, where,
                     f"counter {s.counter.name!r} is {s.counter.dtype}")
        if self.platform_lowered:
            self.require(s.parallel is None and not s.vectorize, Rule.ABSTRACT_LEFT, where,
                         "a loop still marked parallel or vectorize")
        if s.parallel is not None:
            if s.parallel.only_if is not None:
                self.expr(s.parallel.only_if, where)
                self.condition(s.parallel.only_if, where)
            for r in s.parallel.reductions:
                self.use(r.buffer.base, where)
            self.collapsed(s, s.parallel.collapse, where)
        parallel = s.parallel is not None and not s.parallel.shared
        if parallel:
            self.parallel_level += 1
        if s.parallel is not None:
            self.reductions.append(frozenset(r.buffer.base.name for r in s.parallel.reductions))
        self.push()
        # a counter declared before the loop (the printers then assign it) is that symbol
        if self.lookup(s.counter.name) is None:
            self.define(s.counter, where)
        else:
            self.use(s.counter, where)
        self.counters.append(s.counter.name)
        self.body(s.body, new_scope=False)
        self.counters.pop()
        self.pop()
        if s.parallel is not None:
            self.reductions.pop()
        if parallel:
            self.parallel_level -= 1

    # ------------------------------------------------------------ rules

    def use(self, sym: Symbol, where: Where) -> tuple[Symbol, int]:
        found = self.lookup(sym.name)
        self.require(found is not None, Rule.UNDEFINED, where, f"{sym.name!r} is not defined here")
        assert found is not None
        defined = found[0]
        self.require(defined.dtype == sym.dtype and defined.pointer == sym.pointer,
                     Rule.ASSIGN_TYPE, where,
                     f"{sym.name!r} used as {_typename(sym)}, defined as {_typename(defined)}")
        return found

    def race(self, name: str, found: tuple[Symbol, int] | None, where: Where) -> None:
        if found is None or self.parallel_level == 0 or not self.reductions:
            return
        if name in self.reductions[-1] or any(name in r for r in self.reductions):
            return
        level = found[1]
        if name in {p.name for p in self.kf.params}:
            return  # a buffer of the caller's: its elements are the iterations' own
        self.require(level >= self.parallel_level, Rule.RACE, where,
                     f"{name!r} is declared outside the parallel loop and shared by its "
                     "threads")

    def assign_type(self, target: np.dtype, value: Expr, where: Where) -> None:
        self.require(value.dtype == target, Rule.ASSIGN_TYPE, where,
                     f"a {value.dtype} value assigned to a {target} target")

    def integral(self, e: Expr, where: Where, what: str) -> None:
        self.require(np.issubdtype(e.dtype, np.integer), Rule.INDEX_TYPE, where,
                     f"{what} of dtype {e.dtype}")

    def condition(self, c: Expr, where: Where) -> None:
        self.expr(c, where)
        self.require(c.dtype == _BOOL, Rule.CONDITION, where, f"condition of dtype {c.dtype}")

    def access(self, b: Buffer, idx: tuple[Expr, ...], where: Where) -> None:
        self.use(b.base, where)
        self.require(len(idx) == len(b.strides), Rule.BUFFER_RANK, where,
                     f"{b.base.name!r} has {len(b.strides)} dimensions, indexed with {len(idx)}")
        for i in idx:
            self.expr(i, where)
            self.integral(i, where, "index")
        for st in b.strides:
            self.expr(st, where)

    def expr(self, e: Expr, where: Where) -> None:
        for n in walk(e):
            match n:
                case Sym(symbol=sym):
                    self.use(sym, where)
                case Load(buffer=b, indices=idx) | Address(buffer=b, indices=idx):
                    self.access(b, idx, where)
                case Op():
                    self.op(n, where)
                case Select(cond=c, then=a, orelse=b):
                    self.require(c.dtype == _BOOL, Rule.CONDITION, where,
                                 f"select condition of dtype {c.dtype}")
                    self.require(a.dtype == n.dtype and b.dtype == n.dtype, Rule.OPERAND_TYPES,
                                 where, f"select of {a.dtype} and {b.dtype} as {n.dtype}")
                case MathCall():
                    self.require(not self.platform_lowered or MathCall in self.keeps,
                                 Rule.ABSTRACT_LEFT, where,
                                 f"MathCall {n.func}")
                case CCall(name=name) | Call(function=name):
                    self.identifier(name, where)
                case Constant(value=v):
                    self.require(np.dtype(type(v)) == n.dtype if isinstance(v, np.generic)
                                 else False, Rule.RESULT_TYPE, where,
                                 f"constant {v!r} of dtype {n.dtype} is not a NumPy scalar of it")
                case Convert() | Literal():
                    pass

    def op(self, e: Op, where: Where) -> None:
        args = e.args
        if e.op in _ARITHMETIC and len(args) == 2:
            a, b = args
            self.require(a.dtype == b.dtype, Rule.OPERAND_TYPES, where,
                         f"{a.dtype} {e.op} {b.dtype}")
            self.require(e.dtype == a.dtype, Rule.RESULT_TYPE, where,
                         f"{a.dtype} {e.op} {b.dtype} typed {e.dtype}")
        elif e.op in _COMPARISON:
            a, b = args
            self.require(a.dtype == b.dtype, Rule.OPERAND_TYPES, where,
                         f"{a.dtype} {e.op} {b.dtype}")
            self.require(e.dtype == _BOOL, Rule.RESULT_TYPE, where, f"comparison typed {e.dtype}")
        elif e.op in _LOGIC or e.op == "!":
            self.require(all(a.dtype == _BOOL for a in args), Rule.OPERAND_TYPES, where,
                         f"{e.op} of {', '.join(str(a.dtype) for a in args)}")
            self.require(e.dtype == _BOOL, Rule.RESULT_TYPE, where, f"{e.op} typed {e.dtype}")
        elif e.op == "neg":
            self.require(args[0].dtype == e.dtype, Rule.RESULT_TYPE, where,
                         f"-{args[0].dtype} typed {e.dtype}")
        elif e.op in ("min", "max"):
            self.require(all(a.dtype == e.dtype for a in args), Rule.OPERAND_TYPES, where,
                         f"{e.op} of {', '.join(str(a.dtype) for a in args)} as {e.dtype}")
        elif e.op in ("checked_offset", "wrap_index"):
            self.require(all(a.dtype == INDEX for a in args) and e.dtype == INDEX,
                         Rule.INDEX_TYPE, where, f"{e.op} on {[str(a.dtype) for a in args]}")
            self.require(self.kf.uses_error_flag, Rule.ERROR_CHANNEL, where,
                         f"{e.op} reports through the status of a kernel whose "
                         "uses_error_flag is False")


def _typename(sym: Symbol) -> str:
    return f"{sym.dtype}{'*' if sym.pointer else ''}"


def _describe(where: Where) -> str:
    """The statement in one line (built only for the error: kernels are verified often):
    its kind, what it defines or writes, its location and user source line."""
    if isinstance(where, str):
        return where
    s = where
    match s:
        case Declare(symbol=sym) | SetSym(symbol=sym):
            what = f" {sym.name}"
        case Store(buffer=b) | AtomicUpdate(buffer=b) | DeclareArray(buffer=b):
            what = f" {b.base.name}[...]"
        case Loop(counter=c):
            what = f" over {c.name}"
        case _:
            what = ""
    loc = f" at {s.loc}" if s.loc is not None else ""
    src = f": {s.source.strip()}" if s.source else ""
    return f"{type(s).__name__}{what}{loc}{src}"
