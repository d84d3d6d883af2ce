"""Python AST to definition IR, shared by point kernels, computations and ParLoop kernels.

The translator resolves free names at translation time (closures, module globals, builtins):
numbers become constants, ``math``/NumPy functions become canonical calls, type constructors
become casts. Anything outside the supported language raises ``StencilSyntaxError`` naming
the construct, its location and what to write instead.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from types import ModuleType

import numpy as np

from .. import dtypes
from ..errors import StencilError, StencilSyntaxError, StencilTypeError, did_you_mean
from ..ir import definition as d
from . import functions
from .literals import fold_int_literal
from .source import SourceFunction
from .words import construct

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&",
           ast.BitOr: "|", ast.BitXor: "^"}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}

SubscriptHandler = Callable[[str, tuple[d.Expr, ...], ast.Subscript], d.Expr]


class Translator:
    """Translates statements and expressions of one function.

    ``subscript(name, index, node)`` decides what ``name[index]`` means (relative access,
    absolute index, error); ``extra_calls`` may resolve calls the core language does not know.
    """

    def __init__(self, src: SourceFunction, local_names: set[str], subscript: SubscriptHandler,
                 *, stencil: str | None = None, hoist_deep: bool = False) -> None:
        self.src = src
        self.locals = local_names
        self.subscript = subscript
        self.stencil = stencil or src.name
        self.hoist_deep = hoist_deep  # split very deep expressions into locals (point kernels)
        self.hoisted = 0

    # ------------------------------------------------------------ errors

    def error(self, node: ast.AST, message: str, hint: str | None = None,
              cls: type[StencilError] = StencilSyntaxError) -> StencilError:
        return cls(message, stencil=self.stencil, loc=self.src.loc(node), hint=hint)

    # ------------------------------------------------------------ statements

    def stmts(self, body: list[ast.stmt]) -> tuple[d.Stmt, ...]:
        out: list[d.Stmt] = []
        for i, s in enumerate(body):
            if i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) \
                    and isinstance(s.value.value, str):
                continue  # docstring
            if self.hoist_deep:
                for pre in self.split_deep(s):
                    out.extend(self.stmt(pre))
            else:
                out.extend(self.stmt(s))
        return tuple(out)

    def split_deep(self, s: ast.stmt) -> list[ast.stmt]:
        """``s``, preceded by assignments of fresh locals that take over subexpressions nested
        deeper than ``_HOIST_DEPTH``: a sum of thousands of terms then needs no deep recursion
        in any later pass, nor deeply nested parentheses in generated code. Only operands that
        are always evaluated are hoisted (never out of a conditional expression or ``and``/
        ``or``), and the statement keeps its order of operations, so results are unchanged."""
        value = getattr(s, "value", None) if isinstance(
            s, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)) else None
        if value is None or _depth_at_least(value, _HOIST_DEPTH) is False:
            return [s]
        pre: list[ast.stmt] = []
        depth: dict[int, int] = {}
        stack: list[tuple[ast.expr, bool]] = [(value, False)]
        while stack:
            node, visited = stack.pop()
            slots = _operand_slots(node)
            if not visited:
                stack.append((node, True))
                stack.extend((child, False) for _, child in slots)
                continue
            deepest = 0
            for put, child in slots:
                d_child = depth.pop(id(child), 1)
                if d_child >= _HOIST_DEPTH:
                    self.hoisted += 1
                    name = f"@hoisted{self.hoisted}"  # never a user's name
                    self.locals.add(name)
                    pre.append(ast.copy_location(ast.Assign(
                        targets=[ast.Name(name, ast.Store())], value=child), s))
                    put(ast.copy_location(ast.Name(name, ast.Load()), child))
                    d_child = 1
                deepest = max(deepest, d_child)
            depth[id(node)] = deepest + 1
        return [*pre, s]

    def stmt(self, s: ast.stmt) -> list[d.Stmt]:
        loc = self.src.loc(s)
        match s:
            case ast.Assign(targets=[target], value=value):
                return self.assign(target, value, s)
            case ast.Assign():
                raise self.error(s, "chained assignment `a = b = x` is not supported",
                                 "assign each name in its own statement")
            case ast.AnnAssign(target=target, value=value) if value is not None:
                return self.assign(target, value, s)
            case ast.AugAssign(target=ast.Name(id=name), op=op, value=value):
                opname = self.binop(op, s)
                return [d.Assign(name, d.BinOp(opname, d.Name(name, loc=loc), self.expr(value),
                                               loc=loc), loc=loc)]
            case ast.AugAssign(target=ast.Subscript() as t):
                return self.store_subscript(t, s)
            case ast.Return(value=None):
                raise self.error(s, "a kernel must return a value", "write `return <expression>`")
            case ast.Return(value=value):
                return [d.Return(self.expr(value), loc=loc)]
            case ast.If(test=test, body=body, orelse=orelse):
                return [d.If(self.expr(test), self.stmts(body), self.stmts(orelse), loc=loc)]
            case ast.For(target=ast.Name(id=var), iter=it, body=body, orelse=[]):
                start, stop, step = self.range_args(it)
                return [d.For(var, start, stop, step, self.stmts(body), loc=loc)]
            case ast.For():
                raise self.error(s, "only `for NAME in range(...)` loops are supported",
                                 "iterate over range(start, stop[, step])")
            case ast.While(test=test, body=body, orelse=[]):
                return [d.While(self.expr(test), self.stmts(body), loc=loc)]
            case ast.Pass():
                return []
            case ast.Expr(value=ast.Constant(value=str())):
                return []
        raise self.error(s, f"{construct(s)} are not supported in kernels",
                         "use assignments, if/else, for-range and while loops, and return")

    def assign(self, target: ast.expr, value: ast.expr, s: ast.stmt) -> list[d.Stmt]:
        loc = self.src.loc(s)
        if isinstance(target, ast.Name):
            return [d.Assign(target.id, self.expr(value), loc=loc)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                and len(target.elts) == len(value.elts) \
                and all(isinstance(t, ast.Name) for t in target.elts):
            # Evaluate every right-hand side before assigning any name: a, b = b, a
            temps = [f"_tuple{s.lineno}_{i}" for i in range(len(value.elts))]
            out: list[d.Stmt] = [d.Assign(t, self.expr(v), loc=loc) for t, v in zip(temps, value.elts)]
            out += [d.Assign(t.id, d.Name(tmp, loc=loc), loc=loc)  # type: ignore[attr-defined]
                    for t, tmp in zip(target.elts, temps)]
            return out
        if isinstance(target, ast.Subscript):
            return self.store_subscript(target, s)
        raise self.error(s, "only assignments to plain names are supported",
                         "assign to a local variable")

    def store_subscript(self, target: ast.Subscript, s: ast.stmt) -> list[d.Stmt]:
        raise self.error(s, "assignments to arrays passed to stencil kernels are not allowed",
                         "compute the value in a local variable and `return` it")

    def range_args(self, it: ast.expr) -> tuple[d.Expr, d.Expr, d.Expr]:
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and self.resolve_global(it.func) is range and not it.keywords
                and 1 <= len(it.args) <= 3):
            raise self.error(it, "for loops must iterate over range(...)",
                             "write `for i in range(start, stop[, step])`")
        args = [self.expr(a) for a in it.args]
        one = d.Const(1, dtype=dtypes.INT64)
        zero = d.Const(0, dtype=dtypes.INT64)
        if len(args) == 1:
            return zero, args[0], one
        if len(args) == 2:
            return args[0], args[1], one
        if isinstance(args[2], d.Const) and args[2].value == 0:
            raise self.error(it, "range() step must not be zero")
        return args[0], args[1], args[2]

    # ------------------------------------------------------------ expressions

    def binop(self, op: ast.operator, node: ast.AST) -> str:
        if type(op) not in _BINOPS:  # `@` (matrix product)
            raise self.error(node, "the `@` operator is not supported in kernels",
                             "kernels compute with scalars; write the products and sums out")
        return _BINOPS[type(op)]

    def expr(self, e: ast.expr) -> d.Expr:
        loc = self.src.loc(e)
        match e:
            case ast.Constant(value=int(v)) if not -(2**63) <= v < 2**64:
                raise self.error(e, f"integer constant {v} does not fit in 64 bits",
                                 "use a smaller integer, or a float", cls=StencilTypeError)
            case ast.Constant(value=v) if isinstance(v, (bool, int, float, complex)):
                return d.Const(v, dtype=dtypes.of_python_value(v), loc=loc)
            case ast.Constant(value=v):
                raise self.error(e, f"constant {v!r} is not a number",
                                 "kernels compute with numbers only")
            case ast.Name(id=name):
                return self.name(name, e)
            case ast.Attribute():
                return self.constant_value(self.resolve_attribute(e), e)
            case ast.BinOp() | ast.UnaryOp() if (v := fold_int_literal(e)) is not None:
                # one constant, as Numba sees it (-9223372036854775808 is int64's minimum)
                if not -(2**63) <= v < 2**64:
                    raise self.error(e, f"integer constant {v} does not fit in 64 bits",
                                     "use a smaller integer, or a float", cls=StencilTypeError)
                return d.Const(v, dtype=dtypes.of_python_value(v), loc=loc)
            case ast.BinOp(left=l, op=op, right=r):
                return _fold(d.BinOp(self.binop(op, e), self.expr(l), self.expr(r), loc=loc))
            case ast.UnaryOp(op=op, operand=x):
                return _fold(d.UnaryOp(_UNARY[type(op)], self.expr(x), loc=loc))
            case ast.BoolOp(op=op, values=values):
                name = "and" if isinstance(op, ast.And) else "or"
                return _balanced(name, [self.expr(v) for v in values], loc)
            case ast.Compare(left=l, ops=ops, comparators=rights):
                if any(type(o) not in _CMPOPS for o in ops):
                    raise self.error(e, "`is`/`in` comparisons are not supported",
                                     "compare numbers with == != < <= > >=")
                terms = [self.expr(l), *[self.expr(r) for r in rights]]
                return _balanced("and", [d.Compare(_CMPOPS[type(op)], a, b, loc=loc)
                                         for op, a, b in zip(ops, terms, terms[1:])], loc)
            case ast.IfExp(test=c, body=b, orelse=o):
                return d.IfExp(self.expr(c), self.expr(b), self.expr(o), loc=loc)
            case ast.Call():
                return self.call(e)
            case ast.Subscript(value=ast.Name(id=name), slice=index):
                if isinstance(index, ast.Slice) or (isinstance(index, ast.Tuple) and any(
                        isinstance(x, ast.Slice) for x in index.elts)):
                    raise self.error(e, "slices are not supported in kernels",
                                     "index single elements, e.g. a[-1, 0]")
                parts = index.elts if isinstance(index, ast.Tuple) else [index]
                return self.subscript(name, tuple(self.expr(p) for p in parts), e)
        raise self.error(e, f"{construct(e)} are not supported in kernels",
                         "use arithmetic, comparisons, conditional expressions, indexing of "
                         "arguments and calls of math/NumPy functions")

    def name(self, name: str, node: ast.expr) -> d.Expr:
        if name in self.locals:
            return d.Name(name, loc=self.src.loc(node))
        found, value = self.src.lookup(name)
        if not found:
            known = [*self.locals, *(n for n in self.src.namespace if not n.startswith("_"))]
            raise self.error(node, f"name '{name}' is not defined" + did_you_mean(name, known),
                             "define it before the kernel or pass it as an argument")
        return self.constant_value(value, node)

    def constant_value(self, value: object, node: ast.expr) -> d.Expr:
        if isinstance(value, int) and not isinstance(value, bool) and not (
                np.iinfo(np.int64).min <= value <= np.iinfo(np.uint64).max):
            raise self.error(node, f"'{ast.unparse(node)}' = {value} does not fit a 64-bit "
                                   "integer", f"use float({ast.unparse(node)}), or a smaller "
                                              "value")
        if isinstance(value, (bool, int, float, complex, np.generic)) and not isinstance(
                value, (str, bytes)):
            try:
                t = dtypes.of_python_value(value)
            except Exception:
                t = None
            if t is not None:
                v = value.item() if isinstance(value, np.generic) else value
                return d.Const(v, dtype=t, loc=self.src.loc(node))
            if isinstance(value, np.number):
                raise self.error(node, f"'{ast.unparse(node)}' is a {type(value).__name__}, "
                                       "a type stencils do not compute in",
                                 f"convert it: float({ast.unparse(node)}) or "
                                 f"np.float32({ast.unparse(node)})")
        raise self.error(node, f"'{ast.unparse(node)}' is a {type(value).__name__}, not a number",
                         "only numbers from the enclosing scope can be used as values in kernels")

    def resolve_global(self, node: ast.expr) -> object:
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return None
            return self.src.lookup(node.id)[1]
        if isinstance(node, ast.Attribute):
            return self.resolve_attribute(node)
        return None

    def resolve_attribute(self, node: ast.Attribute) -> object:
        base = self.resolve_global(node.value)
        if isinstance(base, ModuleType) and hasattr(base, node.attr):
            return getattr(base, node.attr)
        if base is not None and not isinstance(base, ModuleType) and hasattr(base, node.attr):
            return getattr(base, node.attr)
        raise self.error(node, f"cannot resolve '{ast.unparse(node)}'",
                         "use math.* or numpy functions and constants")

    def call(self, e: ast.Call) -> d.Expr:
        loc = self.src.loc(e)
        if e.keywords:
            raise self.error(e, "keyword arguments in calls are not supported",
                             "pass arguments by position")
        func = self.resolve_global(e.func)
        args = tuple(self.expr(a) for a in e.args)
        target = functions.cast_target(func)
        if target is not None:
            if len(args) != 1:
                raise self.error(e, f"{ast.unparse(e.func)}() takes exactly one argument")
            arg = args[0]
            if isinstance(arg, d.Const):  # np.int8(1) is a typed constant, as in Numba
                return d.Const(_convert(arg.value, target), dtype=target, loc=loc)
            return d.Cast(arg, dtype=target, loc=loc)
        name = functions.canonical_name(func)
        if name is None:
            return self.unknown_call(e, func, args)
        arity = functions.ARITY[name]
        if (arity == -1 and len(args) < 2) or (arity > 0 and len(args) != arity):
            want = "two or more" if arity == -1 else str(arity)
            raise self.error(e, f"{ast.unparse(e.func)}() takes {want} argument(s), "
                                f"got {len(args)}")
        return d.Call(name, args, loc=loc)

    def unknown_call(self, e: ast.Call, func: object, args: tuple[d.Expr, ...]) -> d.Expr:
        raise self.error(e, f"call of '{ast.unparse(e.func)}' is not supported in kernels",
                         "call math.* or NumPy functions (sqrt, exp, minimum, ...)")


def _balanced(op: str, items: list[d.Expr], loc) -> d.Expr:
    """``items[0] op items[1] op ...`` as a balanced tree: ``and``/``or`` are associative in
    value and in what they evaluate, and a chain of thousands then nests only log2 deep."""
    if len(items) == 1:
        return items[0]
    mid = len(items) // 2
    return d.BoolOp(op, _balanced(op, items[:mid], loc), _balanced(op, items[mid:], loc), loc=loc)


_HOIST_DEPTH = 48  # deeper operand chains are split into locals (see split_deep)


def _operand_slots(node: ast.expr) -> list[tuple[Callable[[ast.expr], None], ast.expr]]:
    """The operands of ``node`` that are always evaluated, each with a setter."""
    def put(obj: object, attr: str) -> Callable[[ast.expr], None]:
        return lambda v: setattr(obj, attr, v)

    def put_item(seq: list, i: int) -> Callable[[ast.expr], None]:
        return lambda v: seq.__setitem__(i, v)

    match node:
        case ast.BinOp():
            return [(put(node, "left"), node.left), (put(node, "right"), node.right)]
        case ast.UnaryOp():
            return [(put(node, "operand"), node.operand)]
        case ast.Compare(ops=[_]):
            return [(put(node, "left"), node.left),
                    (put_item(node.comparators, 0), node.comparators[0])]
        case ast.Call(keywords=[]):
            return [(put_item(node.args, i), a) for i, a in enumerate(node.args)
                    if not isinstance(a, ast.Starred)]
    return []


def _depth_at_least(e: ast.expr, limit: int) -> bool:
    """Whether the chain of always-evaluated operands under ``e`` reaches ``limit`` (iterative:
    the expressions this guards against are too deep for recursion)."""
    stack = [(e, 1)]
    while stack:
        node, d_ = stack.pop()
        if d_ >= limit:
            return True
        stack.extend((child, d_ + 1) for _, child in _operand_slots(node))
    return False


def _convert(value: object, t: np.dtype) -> bool | int | float | complex:
    with np.errstate(all="ignore"):
        return np.array(value).astype(t).item()


def _wrap(value: int, t: np.dtype) -> int:
    """``value`` modulo 2**bits into the range of the integer type ``t``."""
    bits = 8 * t.itemsize
    value %= 1 << bits
    return value - (1 << bits) if t.kind == "i" and value >> (bits - 1) else value


def _fold(e: d.Expr) -> d.Expr:
    """Fold negation and integer arithmetic of literal constants (``a[-1]``, ``a[1 + 1]``)."""
    match e:
        case d.UnaryOp(op="-" | "+", operand=d.Const(value=v, dtype=t)) if t is not None \
                and t.kind in "iufc" and t.itemsize == 8:
            # in the constant's type, wrapping as NumPy does (-int64 min is int64 min)
            return d.Const(_wrap(-v, t) if e.op == "-" and t.kind in "iu" else
                           -v if e.op == "-" else v, dtype=t, loc=e.loc)
        case d.BinOp(op="+" | "-" | "*", left=d.Const(value=a, dtype=ta),
                     right=d.Const(value=b, dtype=tb)) if ta == tb == dtypes.INT64:
            r = a + b if e.op == "+" else a - b if e.op == "-" else a * b
            if -(2**63) <= r < 2**63:
                return d.Const(r, dtype=dtypes.INT64, loc=e.loc)
    return e


def assigned_names(body: list[ast.stmt]) -> set[str]:
    """Every name a function body binds (assignment targets and loop variables)."""
    names: set[str] = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names

