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
from . import functions, local_arrays
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
                 *, stencil: str | None = None, hoist_deep: bool = False,
                 local_arrays: bool = False) -> None:
        self.src = src
        self.locals = local_names
        self.subscript = subscript
        self.stencil = stencil or src.name
        self.hoist_deep = hoist_deep  # split very deep expressions into locals (point kernels)
        self.hoisted = 0
        # np.array([...]) in the kernel (point kernels; frontend.local_arrays): the element
        # locals of each name bound to one, and the statements a reduction needs, which run
        # before the statement being translated
        self.local_arrays = local_arrays
        self.arrays: dict[str, tuple[d.Name, ...]] = {}
        self.pending: list[d.Stmt] = []
        self.fresh_count = 0

    def fresh(self, prefix: str) -> str:
        self.fresh_count += 1
        name = f"@{prefix}{self.fresh_count}"  # never a user's name
        self.locals.add(name)
        return name

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
            for pre in self.split_deep(s) if self.hoist_deep else [s]:
                outer, self.pending = self.pending, []
                try:
                    translated = self.stmt(pre)
                    if self.pending and isinstance(pre, ast.While):
                        raise self.error(pre.test, "a reduction of an array in a while "
                                         "condition is not supported",
                                         "assign it to a variable before the loop and at the "
                                         "end of its body")
                    out.extend(self.pending)
                    out.extend(translated)
                finally:
                    self.pending = outer
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
        if isinstance(target, ast.Name) and self.local_arrays and self.array_literal(value):
            return self.bind_array(target.id, value, s)
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
                terms = [self.expr_or_items(l), *[self.expr_or_items(r) for r in rights]]
                return _balanced("and", [self.compare(_CMPOPS[type(op)], a, b, e)
                                         for op, a, b in zip(ops, terms, terms[1:])], loc)
            case ast.IfExp(test=c, body=b, orelse=o):
                return d.IfExp(self.expr(c), self.expr(b), self.expr(o), loc=loc)
            case ast.Call():
                return self.call(e)
            case ast.Subscript(value=ast.Name(id=name), slice=index) if name in self.arrays:
                return self.array_element(name, index, e)
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
        if name in self.arrays:
            raise self.error(node, f"'{name}' is an array made in the kernel; it can only be "
                                   "indexed or reduced", "a kernel returns one number: reduce "
                                   f"it, e.g. np.nanmean({name}), or index it, {name}[0]")
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
        reduced = self.reduction(e)
        if reduced is not None:
            return reduced
        func = self.resolve_global(e.func)
        if functions.is_signbit(func) and len(e.args) == 1:
            # the sign bit, for -0.0 and NaNs too; integers: x < 0 (as np.signbit)
            one = d.Const(1.0, dtype=dtypes.FLOAT64, loc=loc)
            return d.Compare("<", d.Call("math.copysign", (one, self.expr(e.args[0])), loc=loc),
                             d.Const(0.0, dtype=dtypes.FLOAT64, loc=loc), loc=loc)
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

    # ------------------------------------------------------------ tuples

    def expr_or_items(self, e: ast.expr) -> d.Expr | tuple[d.Expr, ...]:
        if isinstance(e, ast.Tuple) and not any(isinstance(x, ast.Starred) for x in e.elts):
            return tuple(self.expr(x) for x in e.elts)
        return self.expr(e)

    def compare(self, op: str, a: d.Expr | tuple[d.Expr, ...], b: d.Expr | tuple[d.Expr, ...],
                node: ast.expr) -> d.Expr:
        """``a op b``; for two tuples Python's (and Numba's) lexicographic comparison: equal
        when all items are, else ordered by the first pair of unequal items (a shorter
        tuple that is a prefix of the other is smaller)."""
        loc = self.src.loc(node)
        if not isinstance(a, tuple) and not isinstance(b, tuple):
            return d.Compare(op, a, b, loc=loc)
        if not (isinstance(a, tuple) and isinstance(b, tuple)):
            raise self.error(node, "a tuple can only be compared with another tuple",
                             "compare tuples item by item, e.g. (i, j) != (0, 0)")

        def cmp(o: str, x: d.Expr, y: d.Expr) -> d.Expr:
            return d.Compare(o, x, y, loc=loc)

        def const(v: bool) -> d.Expr:
            return d.Const(v, dtype=dtypes.BOOL, loc=loc)

        # the result when every common item is equal: decided by the lengths
        tail = const({"==": len(a) == len(b), "!=": len(a) != len(b), "<": len(a) < len(b),
                      "<=": len(a) <= len(b), ">": len(a) > len(b), ">=": len(a) >= len(b)}[op])
        common = min(len(a), len(b))
        if op in ("==", "!="):
            if len(a) != len(b):
                return tail
            if common == 0:
                return tail
            return _balanced("and" if op == "==" else "or",
                             [cmp(op, x, y) for x, y in zip(a, b)], loc)
        result = tail
        for x, y in reversed(list(zip(a, b))):
            # the first pair that is not equal (NaN included) decides with `op`, as
            # numba/cpython/tupleobj.py's tuple_cmp_ordered does
            result = d.IfExp(cmp("==", x, y), result, cmp(op, x, y), loc=loc)
        return result

    # ------------------------------------------------------------ arrays made in a kernel

    def array_literal(self, e: ast.expr) -> bool:
        """Whether ``e`` is ``np.array([...])`` (or ``np.asarray``) of a list of values."""
        if not (isinstance(e, ast.Call) and len(e.args) == 1 and not e.keywords
                and isinstance(e.args[0], (ast.List, ast.Tuple))):
            return False
        try:
            func = self.resolve_global(e.func)
        except StencilError:
            return False
        return func is np.array or func is np.asarray

    def literal_items(self, e: ast.Call) -> list[ast.expr]:
        items: list[ast.expr] = []
        stack = [e.args[0]]
        while stack:  # nested lists are flattened in order, as the reductions see them
            node = stack.pop(0)
            if isinstance(node, (ast.List, ast.Tuple)):
                stack[:0] = list(node.elts)
            elif isinstance(node, ast.Starred):
                raise self.error(node, "starred items in np.array([...]) are not supported",
                                 "list the values")
            else:
                items.append(node)
        if not items:
            raise self.error(e, "np.array([]) is empty", "list at least one value")
        return items

    def elements_of(self, e: ast.Call) -> tuple[d.Name, ...]:
        loc = self.src.loc(e)
        stmts, names = local_arrays.elements([self.expr(x) for x in self.literal_items(e)],
                                             self.fresh, loc)
        self.pending.extend(stmts)
        return names

    def bind_array(self, name: str, value: ast.Call, s: ast.stmt) -> list[d.Stmt]:
        stores = sum(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                     for n in ast.walk(self.src.tree))
        if stores != 1 or name in self.arrays:
            raise self.error(s, f"'{name}' is bound to np.array([...]) but assigned more "
                                "than once", "give each array its own name")
        if isinstance(value.args[0], ast.List) and any(
                isinstance(x, (ast.List, ast.Tuple)) for x in value.args[0].elts):
            raise self.error(value, "np.array of nested lists is not supported in kernels",
                             "list the values in one flat list")
        self.arrays[name] = self.elements_of(value)
        return []

    def array_element(self, name: str, index: ast.expr, node: ast.Subscript) -> d.Expr:
        items = self.arrays[name]
        i = self.expr(index) if not isinstance(index, (ast.Tuple, ast.Slice)) else None
        if not (isinstance(i, d.Const) and type(i.value) is int):
            raise self.error(node, f"'{name}' made by np.array([...]) can only be indexed by "
                                   "an integer constant", f"write {name}[0] ... "
                                   f"{name}[{len(items) - 1}]")
        if not -len(items) <= i.value < len(items):
            raise self.error(node, f"index {i.value} is out of bounds for '{name}' of "
                                   f"{len(items)} element(s)",
                             f"use an index from {-len(items)} to {len(items) - 1}",
                             cls=StencilTypeError)
        return items[i.value]

    def reduction(self, e: ast.Call) -> d.Expr | None:
        """A reduction of an array made in the kernel (``np.nanmean(v)``, ``v.max()``,
        ``np.max(np.array([...]))``), or None where ``e`` is not one."""
        if not self.local_arrays or len(e.args) > 1 or e.keywords:
            return None
        kind = None
        operand: ast.expr | None = None
        if isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Name) \
                and e.func.value.id in self.arrays and not e.args:
            kind = local_arrays.METHODS.get(e.func.attr)
            operand = e.func.value
            if kind is None:
                raise self.error(e, f"'{ast.unparse(e.func)}()' is not supported on an array "
                                    "made in a kernel", "use sum, mean, min or max, or "
                                    "np.nanmean/np.nanmax/np.nanmin/np.nansum/np.median")
        elif len(e.args) == 1:
            arg = e.args[0]
            if not ((isinstance(arg, ast.Name) and arg.id in self.arrays)
                    or self.array_literal(arg)):
                return None
            func = self.resolve_global(e.func)
            name = getattr(func, "__name__", None)
            kind = local_arrays.NUMPY_NAMES.get(name) if getattr(
                np, name or "", None) is func else None
            if kind is None:
                raise self.error(e, f"'{ast.unparse(e.func)}' of an array made in a kernel is "
                                    "not supported", "use np.sum, np.nansum, np.mean, "
                                    "np.nanmean, np.min, np.max, np.nanmin, np.nanmax or "
                                    "np.median")
            operand = arg
        if kind is None or operand is None:
            return None
        items = (self.arrays[operand.id] if isinstance(operand, ast.Name)
                 else self.elements_of(operand))  # type: ignore[arg-type]
        stmts, result = local_arrays.reduce(kind, items, self.fresh, self.src.loc(e))
        self.pending.extend(stmts)
        return result

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

