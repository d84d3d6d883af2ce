"""Frontend of point kernels: a Python function to an untyped ``PointKernel``."""

from __future__ import annotations

import ast
from typing import TypeVar

import numpy as np

from ..errors import StencilSyntaxError
from ..ir import definition as d
from . import captured
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
    body: list[ast.stmt] = (tree.body if isinstance(tree, ast.FunctionDef)
                            else [ast.Return(value=tree.body)])
    if isinstance(tree, ast.Lambda):
        ast.copy_location(body[0], tree.body)
    body = constant_indices(body, set(params) - set(standard_indexing))
    locals_ = assigned_names(body) | set(params)
    standard = frozenset(standard_indexing)
    relative: set[str] = set()

    def subscript(array: str, index: tuple[d.Expr, ...], node: ast.Subscript) -> d.Expr:
        if array not in params and array not in locals_:
            found, value = src.lookup(array)
            if found and isinstance(value, np.ndarray):  # a constant, as in Numba
                return captured.element(value, array, index, src.loc(node),
                                        lambda *a, **k: translator.error(node, *a, **k))
        if array not in params:
            raise translator.error(node, f"'{array}' is not an argument of the kernel; only "
                                         "arguments can be indexed",
                                   "pass the array as an argument")
        if array in standard:
            return d.Index(array, index, loc=src.loc(node))
        relative.add(array)
        return d.Access(array, index, loc=src.loc(node))

    translator = Translator(src, locals_, subscript, hoist_deep=True, local_arrays=True)
    stmts = translator.stmts(body)
    kernel = d.PointKernel(name, params, stmts, relative=frozenset(relative), standard=standard,
                           loc=loc)
    return kernel, src



def constant_indices(body: list[ast.stmt], arrays: set[str]) -> list[ast.stmt]:
    """Relative indices that are local variables bound to integer constants (``t = 1;
    return a[t, 0]``) become those constants, as in Numba, which counts them as constant
    indices. A name holds its constant from an assignment ``t = 1`` (or ``t = -1``) to the
    next assignment of it; in an ``if``, ``for`` or ``while``, from that point on, only if the
    statement does not assign it. Only a name used as an index component counts, not an
    expression of it (``a[-t]`` is not constant in Numba either). Rewrites ``body`` in place
    (a tree parsed for this kernel alone; no deep copy, which would recurse as deep as the
    longest operator chain)."""
    return _block(list(body), arrays, {})


def _block(body: list[ast.stmt], arrays: set[str], env: dict[str, int]) -> list[ast.stmt]:
    for s in body:
        assigned = assigned_names([s])
        inner = {n: v for n, v in env.items() if n not in assigned}
        match s:
            case ast.If() | ast.While():
                s.test = _substitute(s.test, arrays, env if isinstance(s, ast.If) else inner)
                s.body = _block(s.body, arrays, dict(inner))
                s.orelse = _block(s.orelse, arrays, dict(inner))
            case ast.For():
                s.iter = _substitute(s.iter, arrays, env)
                s.body = _block(s.body, arrays, dict(inner))
                s.orelse = _block(s.orelse, arrays, dict(inner))
            case _:
                _substitute(s, arrays, env)
        env.clear()
        env.update(inner)
        match s:
            case ast.Assign(targets=[ast.Name(id=name)], value=value):
                literal = _int_literal(value)
                if literal is not None:
                    env[name] = literal
    return body


def _int_literal(node: ast.expr) -> int | None:
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return sign * node.value
    return None


_Node = TypeVar("_Node", bound=ast.AST)


def _substitute(node: _Node, arrays: set[str], env: dict[str, int]) -> _Node:
    """``node``, rewritten in place: its relative indices that are names in ``env`` become
    their constants."""
    if not env:
        return node

    def constant(x: ast.expr) -> ast.expr:
        if isinstance(x, ast.Name) and x.id in env:
            return ast.copy_location(ast.Constant(env[x.id]), x)
        return x

    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) \
                and n.value.id in arrays:
            if isinstance(n.slice, ast.Tuple):
                n.slice.elts = [constant(x) for x in n.slice.elts]
            else:
                n.slice = constant(n.slice)
    return node
