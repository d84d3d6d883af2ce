"""Frontend of ParLoop kernels: the point-kernel language plus stores into local arrays.

Each parameter is a small local array (the argument's data for one element, gathered through
its map); the kernel reads and writes it with absolute indices, ``x[1, 0]`` or ``area[0]``,
and returns nothing.
"""

from __future__ import annotations

import ast

from ..errors import StencilSyntaxError
from ..ir import definition as d
from .source import SourceFunction, parse_function
from .translate import _BINOPS, Translator, assigned_names


class _KernelTranslator(Translator):
    def __init__(self, src: SourceFunction, params: tuple[str, ...], locals_: set[str]) -> None:
        self.params = params
        super().__init__(src, locals_ | set(params), self._subscript)

    def _subscript(self, name: str, index: tuple[d.Expr, ...], node: ast.Subscript) -> d.Expr:
        if name not in self.params:
            raise self.error(node, f"'{name}' is not an argument; only arguments are arrays",
                             "index the kernel's arguments")
        return d.Index(name, index, loc=self.src.loc(node))

    def store_subscript(self, target: ast.Subscript, s: ast.stmt) -> list[d.Stmt]:
        loc = self.src.loc(s)
        if not isinstance(target.value, ast.Name) or target.value.id not in self.params:
            raise self.error(s, "only the kernel's arguments can be assigned by index")
        name = target.value.id
        index = target.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        idx = tuple(self.expr(p) for p in parts)
        value: d.Expr
        if isinstance(s, ast.AugAssign):
            current = d.Index(name, idx, loc=loc)
            value = d.BinOp(_BINOPS[type(s.op)], current, self.expr(s.value), loc=loc)
        else:
            value = self.expr(s.value)  # type: ignore[attr-defined]
        return [d.Store(name, idx, value, loc=loc)]

    def stmt(self, s: ast.stmt) -> list[d.Stmt]:
        if isinstance(s, ast.Return):
            if s.value is None:
                return []
            raise self.error(s, "a ParLoop kernel returns nothing; it writes its arguments",
                             "assign results into an argument, e.g. area[0] = ...")
        return super().stmt(s)


def parse_kernel(func: object) -> tuple[d.PointKernel, SourceFunction]:
    """A kernel as a ``PointKernel`` whose body stores into its (standard-indexed) params."""
    src = parse_function(func)
    tree = src.tree
    if not isinstance(tree, ast.FunctionDef):
        raise StencilSyntaxError("a ParLoop kernel must be a `def` function", stencil=src.name)
    args = tree.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
        raise StencilSyntaxError("kernel parameters must be plain positional names",
                                 stencil=src.name, loc=src.loc(tree))
    params = tuple(a.arg for a in args.args)
    tr = _KernelTranslator(src, params, assigned_names(tree.body) - set(params))
    body = tr.stmts(tree.body)
    return d.PointKernel(src.name, params, body, standard=frozenset(params),
                         loc=src.loc(tree)), src
