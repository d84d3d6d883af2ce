"""The launch plan of a GPU kernel (CUDA and OpenCL alike): what the host runs, in order.

A ``LaunchPlan`` is the output of the one GPU planner (``targets.gpu``): a kernel
function's parallel loops cut into ``Launch`` es (a thread per point of up to three grid
dimensions) and ``HostLoop`` s (serial loops the host runs, passing their counter to the
launches inside). It is plain data: the printers print its launches, the runtimes walk its
steps with the host evaluator (``ir.host_eval``), and ``plan_text`` gives it a stable text
form (``STENCILKIT_DUMP=plan``, the golden tests of ``tests/test_gpu_plan.py``).

Where CUDA and OpenCL differ, the plan says so in data, not in types: a reduction combined
by atomics within the launch has no ``partials``; one combined by a work-group tree has
``partials`` and a following one-thread launch that folds them.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from . import kernel as k
from .core import walk


@dataclass(frozen=True)
class Dim:
    """One grid dimension: ``counter`` runs over [start, stop) (expressions of scalar
    parameters and host loop counters, evaluated on the host to size the grid)."""

    counter: k.Symbol
    start: k.Expr
    stop: k.Expr


@dataclass(frozen=True)
class Partial:
    """A reduction's per-group results: the launcher allocates ``buffer`` (``size``
    elements per work-group), ``size`` elements of group-local memory per thread for
    ``local``, and sets ``groups`` (the number of groups launched) for the launch that
    combines them."""

    buffer: k.Symbol
    local: k.Symbol
    groups: k.Symbol
    size: int


@dataclass(frozen=True)
class SharedMemory:
    """A launch's dynamic shared memory: the array ``symbol`` (``extern __shared__`` in
    CUDA), ``per_thread`` elements of it for each thread of a block (an expression of
    scalar parameters, evaluated on the host per call: nk values per column-private
    temporary), laid out level-major (``[level][thread]``: neighbouring threads in
    neighbouring banks). The launcher chooses the block so that it fits
    (``runtime.cuda_variants.shared_block``) and passes the bytes at launch."""

    symbol: k.Symbol
    per_thread: k.Expr

    def bytes_per_thread(self, elements: int) -> int:
        return elements * self.symbol.dtype.itemsize


@dataclass(frozen=True)
class Launch:
    """One device function run by a thread per point of ``dims`` (dimension 0 first, the
    fastest-varying thread index; empty: a single thread), each running ``body`` under
    ``conditions``. ``params``: the kernel's parameters it uses, then the host loops'
    counters, the scratch arrays and the partials' buffers and group counts.
    ``prologue``/``epilogue``: what every thread runs before its first and after its last
    point, in range or not (a reduction's private copy, its combination)."""

    name: str
    params: tuple[k.Symbol, ...]
    dims: tuple[Dim, ...]
    conditions: tuple[k.Expr, ...]
    body: tuple[k.Stmt, ...]
    prologue: tuple[k.Stmt, ...] = ()
    epilogue: tuple[k.Stmt, ...] = ()
    #: the conditions read scalar parameters and host loop counters only, with operators
    #: the host evaluator computes: the host decides them and does not launch when one is
    #: false (a point kernel's border fill under ``fill_border``: an ``out=`` call that
    #: fills nothing is one launch)
    host_conditions: bool = False
    partials: tuple[Partial, ...] = ()
    shared: SharedMemory | None = None


@dataclass(frozen=True)
class HostLoop:
    """A serial loop whose body holds launches: threads of one launch cannot wait for each
    other, so the host runs it (e.g. the K levels of a "planes" multistage)."""

    counter: k.Symbol
    start: k.Expr
    stop: k.Expr
    step: k.Expr
    body: tuple[Step, ...]


Step = Launch | HostLoop


@dataclass(frozen=True)
class Scratch:
    """A device array of ``size`` elements the launcher allocates per call (a top-level
    local array of the kernel function: a reduction's shared result, say)."""

    symbol: k.Symbol
    size: int


@dataclass(frozen=True)
class LaunchPlan:
    kernel: k.KernelFunction
    steps: tuple[Step, ...]
    scratch: tuple[Scratch, ...] = ()
    #: every launch's grid covers its dimensions (the launcher checks it): a thread computes
    #: one point, under an ``if`` instead of grid-stride loops, whose counters, strides and
    #: bounds would otherwise stay live in registers (lap3d on CUDA: 22 registers, not 39)
    covering: bool = False

    def launches(self) -> list[Launch]:
        """Every launch, in the order the host reaches them first."""
        out: list[Launch] = []

        def visit(steps: tuple[Step, ...]) -> None:
            for s in steps:
                if isinstance(s, Launch):
                    out.append(s)
                else:
                    visit(s.body)
        visit(self.steps)
        return out


# ---------------------------------------------------------------- the text form

_AXES = ("x", "y", "z")
_WIDTH = 92  # parameter lists wrap here (the text is read in diffs and test files)
_PRECEDENCE = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4,
               "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}


def expr_text(e: k.Expr, parent: int = 0) -> str:
    """A host-side expression of a plan (bounds, conditions) in C-like infix syntax;
    parentheses only where precedence needs them."""
    match e:
        case k.Constant(value=v):
            return str(v.item()).lower() if v.dtype.kind == "b" else str(v.item())
        case k.Sym(symbol=s):
            return s.name
        case k.Literal(text=t):
            return t
        case k.Convert(value=v):
            return f"({e.dtype})({expr_text(v)})"
        case k.Select(cond=c, then=a, orelse=b):
            text = f"{expr_text(c, 1)} ? {expr_text(a, 1)} : {expr_text(b, 1)}"
            return f"({text})" if parent else text
        case k.Op(op="neg", args=(a,)):
            return f"-{expr_text(a, 9)}"
        case k.Op(op="!", args=(a,)):
            return f"!{expr_text(a, 9)}"
        case k.Op(op=op, args=(a, b)) if op in _PRECEDENCE:
            mine = _PRECEDENCE[op]
            text = f"{expr_text(a, mine)} {op} {expr_text(b, mine + 1)}"
            return f"({text})" if mine < parent else text
        case k.Op(op=name, args=args) | k.MathCall(func=name, args=args) \
                | k.CCall(name=name, args=args):
            return f"{name}({', '.join(expr_text(a) for a in args)})"
        case k.Load(buffer=b, indices=idx):
            return f"{b.base.name}[{', '.join(expr_text(i) for i in idx)}]"
    return type(e).__name__


def _calls(stmts: tuple[k.Stmt, ...]) -> list[str]:
    """The functions ``stmts`` call, each once, in order (what a reduction's prologue and
    epilogue do, named by the platform's helpers: shuffles, atomics, barriers)."""
    seen: list[str] = []
    for s in stmts:
        for n in walk(s):
            if isinstance(n, k.CCall) and n.name not in seen:
                seen.append(n.name)
    return seen


def _launch_text(s: Launch, indent: str) -> list[str]:
    pad = indent + "  "
    grid = "one thread" if not s.dims else f"{len(s.dims)}-D grid"
    lines = [f"{indent}launch {s.name}: {grid}"]
    for axis, d in zip(_AXES, s.dims):
        lines.append(f"{pad}{axis}: {d.counter.name} in [{expr_text(d.start)}, "
                     f"{expr_text(d.stop)})")
    for c in s.conditions:
        where = "host" if s.host_conditions else "device"
        lines.append(f"{pad}if ({where}) {expr_text(c)}")
    buffers = [p.name for p in s.params if p.pointer]
    scalars = [f"{p.name}:{p.dtype}" for p in s.params if not p.pointer]
    for what, names in (("buffers", buffers), ("scalars", scalars)):
        if names:
            lines += textwrap.wrap(f"{what}: {', '.join(names)}", _WIDTH, initial_indent=pad,
                                   subsequent_indent=pad + "  ", break_on_hyphens=False)
    lines.append(f"{pad}body: {len(s.body)} statement(s)")
    if s.prologue:
        lines.append(f"{pad}prologue: {len(s.prologue)} statement(s)")
    if s.epilogue:
        calls = _calls(s.epilogue)
        lines.append(f"{pad}epilogue: {len(s.epilogue)} statement(s)"
                     + (f", calls {', '.join(calls)}" if calls else ""))
    if s.shared is not None:
        sym = s.shared.symbol
        lines.append(f"{pad}shared {sym.name}: {expr_text(s.shared.per_thread)} x "
                     f"{sym.dtype} per thread")
    for part in s.partials:
        lines.append(f"{pad}partial {part.buffer.name}: {part.size} x {part.groups.name} "
                     f"{part.buffer.dtype}, group-local {part.local.name}")
    return lines


def plan_text(plan: LaunchPlan) -> str:
    """The plan as stable, readable text: the kernel, the scratch arrays, then each step
    (launches with their grid dimensions and bounds, conditions, buffers and scalars;
    host loops with their bounds and steps, indented)."""
    head = f"plan {plan.kernel.name}" + (" (covering grids)" if plan.covering else "")
    lines = [head]
    for sc in plan.scratch:
        lines.append(f"  scratch {sc.symbol.name}: {sc.size} x {sc.symbol.dtype}")

    def visit(steps: tuple[Step, ...], indent: str) -> None:
        for s in steps:
            if isinstance(s, Launch):
                lines.extend(_launch_text(s, indent))
            else:
                lines.append(f"{indent}host loop {s.counter.name} in [{expr_text(s.start)}, "
                             f"{expr_text(s.stop)}) step {expr_text(s.step)}:")
                visit(s.body, indent + "  ")
    visit(plan.steps, "  ")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Variant:
    """What one kernel is specialized for. ``unit_axis``: the output's unit-stride axis (grid
    x runs along it); ``unit_buffers``: the arguments whose stride along it is one element;
    ``narrow``: 32-bit index arithmetic; ``covering``: the grids cover the extents, a
    thread per point without grid-stride loops (``LaunchPlan.covering``); ``on_chip``: a
    computation's column-private temporaries in shared memory (``SharedMemory``), where
    nk of them per thread fit a block of at least a warp."""

    unit_axis: int
    unit_buffers: frozenset[str] = frozenset()
    narrow: bool = False
    covering: bool = False
    on_chip: bool = False
