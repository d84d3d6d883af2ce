"""Helpers (``@sk.function`` / ``gtscript.function``) inlined as statements, as GT4Py does.

A call's arguments are translated in the caller's scope; the helper's body in a scope of its
own (a new ``ComputationTranslator``), its locals fresh temporaries of the computation. The
body goes in front of the statement that calls it (it only assigns fresh temporaries, so
evaluating it there is safe), and the call becomes the returned expression.
"""

from __future__ import annotations

import ast
from types import FunctionType
from typing import TYPE_CHECKING

from ..ir import definition as d
from . import temporaries
from .dsl import GTFunction
from .source import dsl_source
from .static import has_nested_return, return_shape, single_exit
from .translate import assigned_names

if TYPE_CHECKING:
    from .computation_translate import ComputationTranslator

_MAX_INLINE_DEPTH = 32
_ZERO = (0, 0, 0)


def is_helper(obj: object) -> bool:
    """``@sk.function`` / ``gtscript.function`` helpers, GT4Py's marked functions too."""
    return isinstance(obj, GTFunction) or (isinstance(obj, FunctionType)
                                           and hasattr(obj, "_gtscript_"))


def _helper_function(obj: object) -> FunctionType:
    return obj.func if isinstance(obj, GTFunction) else obj  # type: ignore[return-value]


def inline(tr: ComputationTranslator, helper: object,
           call: ast.Call) -> d.Expr | tuple[d.Expr, ...]:
    """Inline a helper call: its statements go to ``tr.pending``; the result is the
    returned expression (or tuple of expressions)."""
    func = _helper_function(helper)
    if tr.depth >= _MAX_INLINE_DEPTH:
        raise tr.error(call, f"helper '{func.__name__}' is inlined more than "
                             f"{_MAX_INLINE_DEPTH} levels deep (is it recursive?)",
                       "helpers cannot call themselves")
    hsrc = dsl_source(func, tr.ctx.name)
    tree = hsrc.tree
    assert isinstance(tree, ast.FunctionDef)
    bound, constants = bind_arguments(tr, func, tree, call)
    body = [s for s in tree.body if not (isinstance(s, ast.Expr)
                                         and isinstance(s.value, ast.Constant))]
    locals_ = assigned_names(body)
    aliases = {n: tr.ctx.fresh(f"{func.__name__}_{n}") for n in sorted(locals_)}
    loc = hsrc.loc(tree)
    init = [d.Assign(aliases[p], bound.pop(p), loc=loc) for p in list(bound) if p in aliases]
    inner = type(tr)(hsrc, tr.ctx, aliases=aliases, bound=bound, helper=func.__name__,
                     depth=tr.depth + 1)
    inner.constants = constants
    if tr.nesting is not None:  # a region in the helper would be nested there too
        inner.nesting = f"{tr.nesting} (where helper '{func.__name__}' is called)"
    for s in body:  # `from __externals__ import` anywhere in the helper
        for n in ast.walk(s):
            if isinstance(n, ast.ImportFrom):
                inner.import_externals(n)
    temporaries.declare(inner, body)
    body = single_exit(static_body(inner, body))
    n_results, returns_tuple = return_shape(body, tree, func.__name__, inner.error)
    ret = body[-1]
    if not has_nested_return(body) and isinstance(ret, ast.Return) and ret.value is not None:
        stmts = list(inner.stmts(body[:-1]))
        inner.pending = []
        value = ret.value
        result: d.Expr | tuple[d.Expr, ...] = (
            tuple(inner.expr(v) for v in value.elts) if isinstance(value, ast.Tuple)
            else inner.expr(value))
        tr.pending += [*init, *stmts, *inner.pending]
        return result
    inner.return_targets = tuple(tr.ctx.fresh(f"{func.__name__}_result")
                                 for _ in range(n_results))
    tr.pending += [*init, *inner.stmts(body)]
    results = tuple(d.Access(t, tr._offsets(t, _ZERO, call), loc=tr.src.loc(call))
                    for t in inner.return_targets)
    return results if returns_tuple else results[0]


def static_body(tr: ComputationTranslator, body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` with every ``if`` on compile-time conditions replaced by its branch."""
    out: list[ast.stmt] = []
    for s in body:
        if isinstance(s, ast.If):
            known, chosen = tr.static_truth(s.test)
            if not known:
                out.append(ast.copy_location(ast.If(test=s.test,
                                                    body=static_body(tr, s.body),
                                                    orelse=static_body(tr, s.orelse)), s))
                continue
            out += static_body(tr, s.body if chosen else s.orelse)
        else:
            out.append(s)
    return out


def bind_arguments(tr: ComputationTranslator, func: FunctionType, tree: ast.FunctionDef,
                   call: ast.Call) -> tuple[dict[str, d.Expr], dict[str, object]]:
    """Each helper parameter's argument, translated in the CALLER's scope; parameters left
    to their defaults are compile-time constants of the helper."""
    name = func.__name__
    a = tree.args
    if a.vararg or a.kwarg or a.posonlyargs:
        raise tr.error(call, f"helper '{name}' has *args, **kwargs or positional-only "
                             "parameters", "give the helper plain parameters")
    positional = [p.arg for p in a.args]
    params = positional + [p.arg for p in a.kwonlyargs]
    if any(isinstance(x, ast.Starred) for x in call.args):
        raise tr.error(call, "*args in helper calls are not supported")
    if len(call.args) > len(positional):
        raise tr.error(call, f"helper '{name}' takes {len(positional)} positional "
                             f"argument(s), {len(call.args)} given")
    given: dict[str, ast.expr] = dict(zip(positional, call.args))
    for kw in call.keywords:
        if kw.arg is None:
            raise tr.error(call, "**kwargs in helper calls are not supported")
        if kw.arg not in params:
            raise tr.error(call, f"helper '{name}' has no parameter '{kw.arg}'",
                           f"its parameters are {', '.join(params)}")
        if kw.arg in given:
            raise tr.error(call, f"argument '{kw.arg}' of helper '{name}' given twice")
        given[kw.arg] = kw.value
    defaults = dict(zip(positional[len(positional) - len(func.__defaults__ or ()):],
                        func.__defaults__ or ()))
    defaults.update(func.__kwdefaults__ or {})
    bound: dict[str, d.Expr] = {}
    constants: dict[str, object] = {}
    for p in params:
        if p in given:
            bound[p] = tr.expr(given[p])
        elif p in defaults:
            # a compile-time value in the helper (`y=None` may be tested with __INLINED)
            constants[p] = defaults[p]
        else:
            raise tr.error(call, f"helper '{name}' is missing argument '{p}'")
    return bound, constants
