"""Frontend of computations: a gtscript-style definition to ``ComputationDef``.

Recognised: parameters annotated ``Field[...]`` (ours or GT4Py's, symbolic dtypes through
``dtypes=``) or with a scalar type, keyword-only and with defaults; ``from __externals__
import NAME``; ``with computation(P), interval(...)`` and the nested form; compile-time
``if``/``compile_assert`` on externals between computations. The statements inside intervals
(and the helpers they call) are translated by ``computation_translate``.
"""

from __future__ import annotations

import ast
from types import FunctionType

import numpy as np

from .. import dtypes as dtypes_mod
from ..errors import Location, StencilSyntaxError, StencilTypeError
from ..ir import computation as c
from ..ir import definition as d
from ..ir.core import walk
from . import dsl, temporaries
from .computation_translate import ComputationTranslator, Context
from .dsl import Policy
from .source import SourceFunction, closure_namespace, dsl_source, parse_function
from .translate import assigned_names


def is_computation(func: object) -> bool:
    """A definition whose body holds ``with computation(...)`` blocks and no ``return``."""
    try:
        src = parse_function(func)
    except StencilSyntaxError:
        return False
    tree = src.tree
    if not isinstance(tree, ast.FunctionDef):
        return False
    # `with computation(...)` blocks, possibly under a compile-time `if` on externals
    has_with = any(isinstance(s, ast.With) for n in tree.body for s in ast.walk(n))
    has_return = any(isinstance(n, ast.Return) for n in ast.walk(tree))
    return has_with and not has_return


def _annotation(func: FunctionType, param: str, raw: object, names: dict[str, object],
                name: str, loc: Location) -> object:
    """A parameter's annotation as an object; strings (``from __future__ import
    annotations``, symbolic dtypes) are evaluated with the gtscript names available, and
    ``names`` (the externals and ``dtypes=``: ``Field[dtype]`` may name a dtype given
    there) under the function's own scope."""
    if not isinstance(raw, str):
        return raw
    if raw in names:
        return raw
    scope = {**dsl.vocabulary(), "np": np, "numpy": np, **names,
             **closure_namespace(func)}
    try:
        return eval(raw, scope)  # noqa: S307 (the user's own annotation text)
    except Exception as exc:
        raise StencilSyntaxError(f"cannot evaluate the annotation of parameter '{param}' "
                                 f"({raw!r}): {exc}", stencil=name, loc=loc,
                                 hint="annotate with Field[...] or a scalar type, or give "
                                      "symbolic dtypes through dtypes={...}") from None


def _parameters(func: FunctionType, tree: ast.FunctionDef, src: SourceFunction,
                dtype_map: dict[str, object], externals: dict[str, object]
                ) -> tuple[tuple[str, ...], dict[str, c.FieldDecl], dict[str, np.dtype]]:
    name = src.name
    a = tree.args
    if a.vararg or a.kwarg or a.posonlyargs:
        raise StencilSyntaxError("a definition cannot have *args, **kwargs or positional-only "
                                 "parameters", stencil=name, loc=src.loc(tree),
                                 hint="list every field and scalar parameter by name")
    params = tuple(p.arg for p in a.args + a.kwonlyargs)
    raw = getattr(func, "__annotations__", {})
    fields: dict[str, c.FieldDecl] = {}
    scalars: dict[str, np.dtype] = {}
    for p in params:
        if p not in raw:
            raise StencilSyntaxError(f"parameter '{p}' has no annotation", stencil=name,
                                     loc=src.loc(tree), hint="annotate with Field[...] or a "
                                                             "scalar type such as float")
        # a name for a dtype: given through dtypes=, else an external of that name
        names = {**externals, **dtype_map}
        t = _annotation(func, p, raw[p], names, name, src.loc(tree))
        try:
            ft = temporaries.field_type(t)
            what = f"parameter '{p}'"
            if ft is not None:
                fields[p] = c.FieldDecl(p, "".join(x.value for x in ft.axes),
                                        temporaries.resolve_dtype(ft.dtype, names, what),
                                        ft.data_dims)
            else:
                scalars[p] = temporaries.resolve_dtype(t, names, what)
        except StencilTypeError as exc:
            raise StencilSyntaxError(exc.bare_message, stencil=name, loc=src.loc(tree),
                                     hint=exc.hint or "annotate with Field[...] or a scalar "
                                                      "type such as float") from None
    return params, fields, scalars


def parse_computation(func: FunctionType, externals: dict[str, object] | None = None,
                      dtypes: dict[str, object] | None = None
                      ) -> tuple[c.ComputationDef, SourceFunction]:
    """The definition IR of a computation. Parameters defaulting to ``None`` that the
    definition never uses are left out of its fields and scalars."""
    name = func.__name__
    src = dsl_source(func)
    tree = src.tree
    assert isinstance(tree, ast.FunctionDef)
    params, fields, scalars = _parameters(func, tree, src, dict(dtypes or {}),
                                          dict(externals or {}))
    ext = dict(externals or {})
    body = list(tree.body)
    local_names = sorted(assigned_names(body) - set(params))
    ctx = Context(name, dict(fields), set(scalars), ext, list(local_names),
                  dtype_map=dict(dtypes or {}))
    aliases = {n: n for n in (*fields, *local_names)}
    tr = ComputationTranslator(src, ctx, aliases=aliases)
    for s in body:  # externals first: an annotation may name one
        if isinstance(s, ast.ImportFrom) and s.module == "__externals__":
            tr.import_externals(s)
    temporaries.declare(tr, body)
    blocks: list[c.VerticalBlock] = []
    for i, s in enumerate(body):
        if isinstance(s, ast.ImportFrom) and s.module in ("__externals__", "__gtscript__"):
            tr.import_externals(s)
            continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            continue
        if isinstance(s, ast.Expr) and tr._is_dsl_call(s.value, "compile_assert"):
            tr.compile_assert(s.value)  # type: ignore[arg-type]
            continue
        if isinstance(s, ast.If):  # a compile-time choice between computations
            known, chosen = tr.static_truth(s.test)
            if known:
                body[i + 1:i + 1] = s.body if chosen else s.orelse
                continue
            raise tr.error(s, f"the condition `{ast.unparse(s.test)}` of this `if` around "
                              "computations is not known at compile time",
                           "use externals and literals only (a run-time condition goes inside "
                           "the computation)")
        if not isinstance(s, ast.With):
            raise StencilSyntaxError("statements of a computation must be inside "
                                     "`with computation(...)` blocks", stencil=name,
                                     loc=src.loc(s), hint="wrap them in with computation(...), "
                                                          "interval(...):")
        blocks.append(_vertical_block(tr, s))
    used = {n.field if isinstance(n, d.Access) else n.id
            for b in blocks for n in walk(b) if isinstance(n, (d.Access, d.Name))}
    unused_none = {p for p, v in parameter_defaults(func).items() if v is None and p not in used}
    definition = c.ComputationDef(
        name, params, tuple(f for f in fields.values() if f.name not in unused_none)
        + tuple(ctx.planes.values())
        + ((ctx.fields[ctx.level_index],) if ctx.level_index else ()),
        tuple(c.ScalarDecl(n, t) for n, t in scalars.items() if n not in unused_none),
        tuple(blocks), tuple((t, dtypes_mod.FLOAT64) for t in sorted(ctx.temporaries)),
        planes=tuple(ctx.planes), declared=tuple(sorted(ctx.declared.items())),
        level_index=ctx.level_index,
        loc=src.loc(tree))
    return definition, src


def parameter_defaults(func: FunctionType) -> dict[str, object]:
    """Default values of a definition's parameters, positional and keyword-only."""
    code = func.__code__
    positional = code.co_varnames[:code.co_argcount]
    defaults = func.__defaults__ or ()
    out = dict(zip(positional[len(positional) - len(defaults):], defaults))
    out.update(func.__kwdefaults__ or {})
    return out


def _interval_bounds(tr: ComputationTranslator, call: ast.Call) -> tuple[c.AxisBound, c.AxisBound]:
    args = call.args
    if len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value is Ellipsis:
        return c.AxisBound(0, False), c.AxisBound(0, True)
    if len(args) != 2:
        raise tr.error(call, "interval() takes (start, end) or ...",
                       "write interval(0, None), interval(1, -1), interval(...)")
    bounds = []
    for a, is_end in zip(args, (False, True)):
        if isinstance(a, ast.Constant) and a.value is None:
            bounds.append(c.AxisBound(0, True) if is_end else c.AxisBound(0, False))
            continue
        e = tr.expr(a)
        if not (isinstance(e, d.Const) and e.dtype is not None and e.dtype.kind in "iu"):
            raise tr.error(a, "interval bounds must be integer constants or None")
        v = int(e.value)
        bounds.append(c.AxisBound(v, True) if v < 0 else c.AxisBound(v, False))
    return bounds[0], bounds[1]


def _policy(tr: ComputationTranslator, call: ast.expr) -> str:
    if _is_call_of(tr, call, "computation") and len(call.args) == 1:  # type: ignore[attr-defined]
        arg = call.args[0]  # type: ignore[attr-defined]
        p = tr.resolve_global(arg)
        if isinstance(p, Policy):
            return p.value
        spelled = arg.id if isinstance(arg, ast.Name) else getattr(arg, "attr", None)
        if isinstance(p, int) and spelled in Policy.__members__:  # GT4Py's PARALLEL (an int)
            return spelled
    raise tr.error(call, "expected computation(PARALLEL | FORWARD | BACKWARD)")


def _is_call_of(tr: ComputationTranslator, node: ast.expr, name: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = tr.resolve_global(node.func)
    if f is not None and f is getattr(dsl, name, None):  # ours
        return True
    # GT4Py's own (gt4py.cartesian.gtscript), for definitions written against it
    return getattr(f, "__name__", "") == name and getattr(f, "__module__", "").endswith("gtscript")


def _vertical_block(tr: ComputationTranslator, s: ast.With) -> c.VerticalBlock:
    items = s.items
    policy = _policy(tr, items[0].context_expr)
    tr.ctx.policy = policy
    intervals: list[c.IntervalBlock] = []
    if len(items) == 2:
        if not _is_call_of(tr, items[1].context_expr, "interval"):
            raise tr.error(s, "expected `with computation(P), interval(...)`")
        start, end = _interval_bounds(tr, items[1].context_expr)  # type: ignore[arg-type]
        intervals.append(c.IntervalBlock(start, end, tr.stmts(s.body), loc=tr.src.loc(s)))
    elif len(items) == 1:
        for inner in s.body:
            if isinstance(inner, ast.ImportFrom) and inner.module == "__externals__":
                tr.import_externals(inner)
                continue
            if isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Constant):
                continue
            if not (isinstance(inner, ast.With) and len(inner.items) == 1
                    and _is_call_of(tr, inner.items[0].context_expr, "interval")):
                raise tr.error(inner, "inside `with computation(P):` every statement must be a "
                                      "`with interval(...)` block")
            start, end = _interval_bounds(tr, inner.items[0].context_expr)  # type: ignore[arg-type]
            intervals.append(c.IntervalBlock(start, end, tr.stmts(inner.body),
                                             loc=tr.src.loc(inner)))
    else:
        raise tr.error(s, "expected `with computation(P), interval(...)`")
    return c.VerticalBlock(policy, tuple(intervals), loc=tr.src.loc(s))
