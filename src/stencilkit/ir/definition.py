"""Definition IR: what the user wrote, as typed trees of expressions and statements.

Invariants:
- Expressions carry ``dtype`` once the typing pass has run (``None`` before); after typing,
  both operands of a ``BinOp`` have the operator's operand types (casts are explicit).
- ``Access`` is a relative access of a field (point kernels: offsets from the centre, one per
  dimension; computations: three offsets I, J, K). ``Index`` is absolute indexing.
- ``Call.func`` is a canonical function name (``"math.sqrt"``, ``"np.minimum"``, ``"min"``).
- Statement bodies are tuples; a ``For`` loops over ``range(start, stop, step)``.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

import numpy as np

from .core import Location, Node, walk

DType = np.dtype

#: The variable a point kernel's result is assigned to once ``lower.single_exit`` has turned
#: its returns into assignments, and the flag a return inside a loop sets. Not Python
#: identifiers, so that no variable of the user's kernel can be one of them. Here, with the
#: IR, because the typing analysis and the printers read them as well as the passes.
RESULT = "@result"
DONE = "@done"


# ---------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Expr(Node):
    _: KW_ONLY
    dtype: DType | None = None
    loc: Location | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: bool | int | float | complex


@dataclass(frozen=True, slots=True)
class Name(Expr):
    id: str


@dataclass(frozen=True, slots=True)
class Access(Expr):
    field: str
    offset: tuple[Expr, ...]

    def constant_offset(self) -> tuple[int, ...] | None:
        """The offsets as integers when all are integer constants, else None."""
        out = []
        for o in self.offset:
            if not (isinstance(o, Const) and isinstance(o.value, (int, np.integer))
                    and not isinstance(o.value, (bool, np.bool_))):
                return None
            out.append(int(o.value))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Index(Expr):
    array: str
    index: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class BinOp(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class UnaryOp(Expr):
    op: str
    operand: Expr


@dataclass(frozen=True, slots=True)
class Compare(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class BoolOp(Expr):
    op: str  # "and" | "or"
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class IfExp(Expr):
    cond: Expr
    body: Expr
    orelse: Expr


@dataclass(frozen=True, slots=True)
class Call(Expr):
    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    """Conversion of ``value`` to ``dtype`` (inserted by typing, or ``np.float32(x)``)."""

    value: Expr


# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Stmt(Node):
    _: KW_ONLY
    loc: Location | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Assign(Stmt):
    target: str
    value: Expr


@dataclass(frozen=True, slots=True)
class Store(Stmt):
    """``array[index] = value`` into a kernel's local array (ParLoop kernels)."""

    array: str
    index: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, slots=True)
class Return(Stmt):
    value: Expr


@dataclass(frozen=True, slots=True)
class If(Stmt):
    cond: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class For(Stmt):
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class While(Stmt):
    cond: Expr
    body: tuple[Stmt, ...]


# ---------------------------------------------------------------- kernels


@dataclass(frozen=True, slots=True)
class PointKernel(Node):
    """A Numba-style point kernel: computes one output element and returns it.

    ``params`` are the kernel's parameters in order; ``relative`` names those that are
    relatively indexed arrays, ``standard`` those indexed absolutely, the rest are scalars.
    After typing, ``param_types`` holds one dtype per parameter, ``ndim`` the dimensionality
    and ``return_type`` the element type of the result.
    """

    name: str
    params: tuple[str, ...]
    body: tuple[Stmt, ...]
    relative: frozenset[str] = frozenset()
    standard: frozenset[str] = frozenset()
    param_types: tuple[DType, ...] = ()
    local_types: tuple[tuple[str, DType], ...] = ()
    ndim: int = 0
    return_type: DType | None = None
    _: KW_ONLY
    loc: Location | None = field(default=None, compare=False, repr=False)

    def accesses(self) -> list[Access]:
        return [n for n in walk(self) if isinstance(n, Access)]


# ---------------------------------------------------------------- text form

_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8,
         "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10, "unary": 11, "**": 12}


def format_expr(e: Expr, parent: int = 0) -> str:
    """Python-like text of an expression; casts are shown as ``dtype(x)``."""
    match e:
        case Const(value=v):
            text = repr(v.item() if isinstance(v, np.generic) else v)
            return text if e.dtype is None or e.dtype.kind not in "fiu" or e.dtype.itemsize == 8 \
                else f"{e.dtype}({text})"
        case Name(id=n):
            return n
        case Access(field=f, offset=o):
            return f"{f}[{', '.join(format_expr(x) for x in o)}]"
        case Index(array=a, index=i):
            return f"{a}{{{', '.join(format_expr(x) for x in i)}}}"
        case Cast(value=v):
            return f"{e.dtype}({format_expr(v)})"
        case Call(func=f, args=a):
            return f"{f}({', '.join(format_expr(x) for x in a)})"
        case BinOp(op=op, left=l, right=r):
            p = _PREC[op]
            rp = p if op == "**" else p + 1
            lp = p + 1 if op == "**" else p
            text = f"{format_expr(l, lp)} {op} {format_expr(r, rp)}"
        case Compare(op=op, left=l, right=r):
            p = _PREC["cmp"]
            text = f"{format_expr(l, p + 1)} {op} {format_expr(r, p + 1)}"
        case BoolOp(op=op, left=l, right=r):
            p = _PREC[op]
            text = f"{format_expr(l, p)} {op} {format_expr(r, p + 1)}"
        case UnaryOp(op=op, operand=x):
            p = _PREC["not"] if op == "not" else _PREC["unary"]
            text = f"not {format_expr(x, p)}" if op == "not" else f"{op}{format_expr(x, p)}"
        case IfExp(cond=c, body=b, orelse=o):
            p = 0
            text = f"{format_expr(b, 1)} if {format_expr(c, 1)} else {format_expr(o, 0)}"
        case _ if "__str__" in type(e).__dict__:  # nodes of other IRs (a horizontal region)
            return str(e)
        case _:
            raise TypeError(f"not an expression: {e!r}")
    return f"({text})" if p < parent else text


def format_stmts(body: tuple[Stmt, ...], indent: str, types: dict[str, DType]) -> list[str]:
    lines: list[str] = []
    for s in body:
        where = f"  # line {s.loc.line}" if s.loc else ""
        match s:
            case Assign(target=t, value=v):
                ann = f": {types[t]}" if t in types else ""
                if getattr(s, "k_offset", 0):  # a computation's write at a vertical offset
                    t = f"{t}[0, 0, {s.k_offset}]"  # type: ignore[attr-defined]
                lines.append(f"{indent}{t}{ann} = {format_expr(v)}{where}")
            case Return(value=v):
                lines.append(f"{indent}return {format_expr(v)}{where}")
            case Store(array=a, index=i, value=v):
                idx = ", ".join(format_expr(x) for x in i)
                lines.append(f"{indent}{a}{{{idx}}} = {format_expr(v)}{where}")
            case If(cond=c, body=b, orelse=o):
                lines.append(f"{indent}if {format_expr(c)}:{where}")
                lines += format_stmts(b, indent + "    ", types) or [indent + "    pass"]
                if o:
                    lines.append(f"{indent}else:")
                    lines += format_stmts(o, indent + "    ", types)
            case For(var=v, start=a, stop=b, step=c, body=body_):
                lines.append(f"{indent}for {v} in range({format_expr(a)}, {format_expr(b)}, "
                             f"{format_expr(c)}):{where}")
                lines += format_stmts(body_, indent + "    ", types) or [indent + "    pass"]
            case While(cond=c, body=body_):
                lines.append(f"{indent}while {format_expr(c)}:{where}")
                lines += format_stmts(body_, indent + "    ", types) or [indent + "    pass"]
            case _:
                raise TypeError(f"not a statement: {s!r}")
    return lines


def format_point_kernel(k: PointKernel) -> str:
    """The deterministic text form printed by ``obj.ir`` and ``STENCILKIT_DUMP=ir``."""
    params = []
    for i, p in enumerate(k.params):
        kind = "relative" if p in k.relative else "standard" if p in k.standard else "scalar"
        if k.param_types:
            kind += f" {k.param_types[i]}"
        params.append(f"{p}: {kind}" if (k.relative or k.param_types) else p)
    ret = f" -> {k.return_type}" if k.return_type is not None else ""
    dims = f"  # {k.ndim}-D" if k.ndim else ""
    head = f"point_kernel {k.name}({', '.join(params)}){ret}:{dims}"
    return "\n".join([head, *format_stmts(k.body, "    ", dict(k.local_types))])
