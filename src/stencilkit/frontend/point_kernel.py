"""Frontend of point kernels: a Python function to an untyped ``PointKernel``."""

from __future__ import annotations

import ast

from ..errors import StencilSyntaxError
from ..ir import definition as d
from .source import SourceFunction, parse_function
from .translate import Translator, assigned_names


def parse_point_kernel(func: object, standard_indexing: tuple[str, ...] = ()) -> tuple[
        d.PointKernel, SourceFunction]:
    """Translate ``func`` into definition IR; relative vs standard indexing is fixed here."""
    src = parse_function(func)
    tree = src.tree
    name = src.name
    loc = src.loc(tree)
    args = tree.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
        raise StencilSyntaxError("kernel parameters must be plain positional names",
                                 stencil=name, loc=loc,
                                 hint="remove *args, **kwargs, keyword-only arguments and defaults")
    params = tuple(a.arg for a in args.args)
    if "out" in params:
        raise StencilSyntaxError("a kernel parameter is named 'out', which is reserved for the "
                                 "output array", stencil=name, loc=loc,
                                 hint="rename the parameter")
    if not params:
        raise StencilSyntaxError("a stencil kernel needs at least one array argument",
                                 stencil=name, loc=loc)
    for s in standard_indexing:
        if s not in params:
            raise StencilSyntaxError(
                f"standard_indexing names '{s}', which is not an argument of the kernel",
                stencil=name, loc=loc, hint=f"use argument names from {list(params)}")
    if standard_indexing and params[0] in standard_indexing:
        raise StencilSyntaxError(
            "the first argument to a stencil kernel must use relative indexing, not standard "
            "indexing", stencil=name, loc=loc,
            hint=f"remove '{params[0]}' from standard_indexing")
    body = tree.body if isinstance(tree, ast.FunctionDef) else [ast.Return(value=tree.body)]
    if isinstance(tree, ast.Lambda):
        ast.copy_location(body[0], tree.body)
    locals_ = assigned_names(body) | set(params)
    standard = frozenset(standard_indexing)
    relative: set[str] = set()

    def subscript(array: str, index: tuple[d.Expr, ...], node: ast.Subscript) -> d.Expr:
        if array not in params:
            raise translator.error(node, f"'{array}' is not an argument of the kernel; only "
                                         "arguments can be indexed",
                                   "pass the array as an argument")
        if array in standard:
            return d.Index(array, index, loc=src.loc(node))
        relative.add(array)
        return d.Access(array, index, loc=src.loc(node))

    translator = Translator(src, locals_, subscript, hoist_deep=True)
    stmts = translator.stmts(body)
    kernel = d.PointKernel(name, params, stmts, relative=frozenset(relative), standard=standard,
                           loc=loc)
    return kernel, src
