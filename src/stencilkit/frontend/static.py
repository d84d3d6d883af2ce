"""Compile-time parts of gtscript: conditions on externals, ``__INLINED``, and the rewriting
of a helper's ``return`` statements into a single-exit body.

``static_value(node, lookup)`` evaluates an expression whose names all have compile-time
values (externals, literals, constants of the enclosing scope) and raises ``NotStatic``
otherwise; ``lookup(name)`` gives a name's compile-time value or raises ``NotStatic``.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
    ast.Invert: operator.invert}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_,
    ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b}


class NotStatic(Exception):
    """The expression needs run-time values."""


Lookup = Callable[[str], object]


class RunTime:
    """A name with a run-time value (a field, a helper's argument): nothing is known about
    it at compile time except that it is not None, so ``x is None`` folds to False and any
    other use raises ``NotStatic``."""

    def __unknown(self, *args: object) -> object:
        raise NotStatic

    def __getattr__(self, name: str) -> object:
        raise NotStatic


for _dunder in ("bool", "eq", "ne", "lt", "le", "gt", "ge", "add", "radd", "sub", "rsub",
                "mul", "rmul", "truediv", "rtruediv", "floordiv", "rfloordiv", "mod", "rmod",
                "pow", "rpow", "neg", "pos", "invert", "and", "rand", "or", "ror", "xor",
                "rxor", "lshift", "rlshift", "rshift", "rrshift", "abs", "hash", "index",
                "contains", "iter", "len", "float", "int"):
    setattr(RunTime, f"__{_dunder}__", RunTime._RunTime__unknown)  # type: ignore[attr-defined]


def holds_runtime(value: object) -> bool:
    """Whether a compile-time evaluation produced a run-time name (or a tuple with one)."""
    if isinstance(value, RunTime):
        return True
    return isinstance(value, tuple) and any(map(holds_runtime, value))


def is_inlined_call(node: ast.expr) -> bool:
    """``__INLINED(...)`` (ours, or GT4Py's, recognised by name)."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return False
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name == "__INLINED"


def static_value(node: ast.expr, lookup: Lookup) -> object:
    """The compile-time value of ``node``, or ``NotStatic``."""
    match node:
        case ast.Constant(value=v):
            return v
        case ast.Name(id=name):
            return lookup(name)
        case ast.Attribute(value=base, attr=attr):
            obj = static_value(base, lookup)
            if not hasattr(obj, attr):
                raise NotStatic
            return getattr(obj, attr)
        case ast.UnaryOp(op=op, operand=x):
            return _UNARY[type(op)](static_value(x, lookup))
        case ast.BinOp(left=a, op=op, right=b):
            return _BINOPS[type(op)](static_value(a, lookup), static_value(b, lookup))
        case ast.BoolOp(op=bool_op, values=values):
            result = static_value(values[0], lookup)
            for operand in values[1:]:
                if (not result) if isinstance(bool_op, ast.And) else result:
                    return result
                result = static_value(operand, lookup)
            return result
        case ast.Compare(left=left, ops=ops, comparators=rights):
            lhs = static_value(left, lookup)
            for cmp, r in zip(ops, rights):
                rhs = static_value(r, lookup)
                if not _CMPOPS[type(cmp)](lhs, rhs):
                    return False
                lhs = rhs
            return True
        case ast.IfExp(test=test, body=yes, orelse=no):
            return static_value(yes if static_value(test, lookup) else no, lookup)
        case ast.Tuple(elts=elts):
            return tuple(static_value(e, lookup) for e in elts)
        case ast.Call() if is_inlined_call(node):
            return static_value(node.args[0], lookup)
    raise NotStatic


# ------------------------------------------------------------------ returns of helpers


def always_returns(body: list[ast.stmt]) -> bool:
    for s in body:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and always_returns(s.body) and always_returns(s.orelse):
            return True
    return False


def has_nested_return(body: list[ast.stmt]) -> bool:
    """A ``return`` anywhere but as the last top-level statement."""
    for i, s in enumerate(body):
        if isinstance(s, ast.Return) and i != len(body) - 1:
            return True
        if not isinstance(s, ast.Return) and any(isinstance(n, ast.Return) for n in ast.walk(s)):
            return True
    return False


def single_exit(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` where nothing follows a ``return`` on any path: the statements after an
    ``if`` that returns in one branch move into the branches that fall through."""
    out: list[ast.stmt] = []
    for i, s in enumerate(body):
        if isinstance(s, ast.Return):
            out.append(s)
            return out
        if isinstance(s, ast.If) and any(isinstance(n, ast.Return) for n in ast.walk(s)):
            rest = body[i + 1:]
            then = single_exit(s.body + ([] if always_returns(s.body) else rest))
            orelse = single_exit(s.orelse + ([] if always_returns(s.orelse) else rest))
            out.append(ast.copy_location(ast.If(test=s.test, body=then or [ast.Pass()],
                                                orelse=orelse), s))
            return out
        out.append(s)
    return out


def return_shape(body: list[ast.stmt], tree: ast.AST, name: str,
                 error: Callable[..., Exception]) -> tuple[int, bool]:
    """(number of values, returned as a tuple) of a single-exit helper body whose every path
    returns the same number of values; ``error(node, message, hint)`` builds the exception."""
    module = ast.Module(body=body, type_ignores=[])
    for n in ast.walk(module):
        if isinstance(n, (ast.While, ast.For)) and any(isinstance(r, ast.Return)
                                                      for r in ast.walk(n)):
            raise error(n, "a helper cannot return from inside a loop",
                        "assign the result to a local and return it after the loop")
    if not always_returns(body):
        raise error(tree, f"helper '{name}' does not return a value on every path",
                    "end every branch with a return")
    values = [r.value for r in ast.walk(module) if isinstance(r, ast.Return)
              and r.value is not None]
    arity = {len(v.elts) if isinstance(v, ast.Tuple) else 1 for v in values}
    if len(arity) > 1:
        raise error(tree, f"helper '{name}' returns different numbers of values on different "
                          "paths", "return the same number of values everywhere")
    return (arity.pop() if arity else 1), any(isinstance(v, ast.Tuple) for v in values)
