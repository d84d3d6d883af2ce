"""Frontend of computations: a gtscript-style definition to ``ComputationDef``.

Recognised: parameters annotated ``Field[...]`` or with a scalar type; ``from __externals__
import NAME``; ``with computation(P), interval(...)`` and the nested form; assignments to
fields and temporaries, ``if``/``elif``/``else``, conditional expressions, ``while``; calls
of ``@sk.function`` helpers, inlined by substitution (they may return tuples); horizontal
regions (one ``If(InRegion)`` unit per region); writes at a vertical offset; reads at a
run-time vertical offset; elements of fields with data dimensions.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from types import FunctionType

import numpy as np

from .. import dtypes
from ..errors import StencilSyntaxError, StencilTypeError
from ..gtscript import Axis, AxisIndex, FieldType, GTFunction, Policy
from ..ir import computation as c
from ..ir import definition as d
from .source import SourceFunction, closure_namespace, parse_function
from .translate import Translator, assigned_names


def is_computation(func: object) -> bool:
    """A definition whose body holds ``with computation(...)`` blocks and no ``return``."""
    try:
        src = parse_function(func)
    except StencilSyntaxError:
        return False
    tree = src.tree
    if not isinstance(tree, ast.FunctionDef):
        return False
    has_with = any(isinstance(s, ast.With) for s in tree.body)
    has_return = any(isinstance(n, ast.Return) for n in ast.walk(tree))
    return has_with and not has_return


def _annotations(func: FunctionType, name: str) -> dict[str, object]:
    """Parameter annotations, evaluated when they are strings (``from __future__ import
    annotations``) with the gtscript names available even where the module lacks them."""
    from .. import gtscript

    vocabulary = {n: getattr(gtscript, n) for n in ("Field", "IJ", "IJK", "I", "J", "K")}
    vocabulary["np"] = np
    try:
        return inspect.get_annotations(func, eval_str=True,
                                       locals={**vocabulary, **closure_namespace(func)})
    except Exception as exc:  # a string annotation that does not evaluate
        raise StencilSyntaxError(f"cannot evaluate the parameter annotations: {exc}",
                                 stencil=name, hint="annotate with Field[...] or a scalar type"
                                 ) from exc


class _ComputationTranslator(Translator):
    def __init__(self, src: SourceFunction, fields: dict[str, c.FieldDecl], scalars: set[str],
                 temporaries: set[str], externals: dict[str, object]) -> None:
        self.fields = fields
        self.scalars = scalars
        self.temporaries = temporaries
        self.externals = externals
        self.depth = 0  # nesting in if/while bodies
        self.policy = ""  # of the computation being translated
        super().__init__(src, set(scalars) | temporaries | set(fields), self._subscript)

    def _is_field(self, name: str) -> bool:
        return name in self.fields or name in self.temporaries

    def _subscript(self, name: str, index: tuple[d.Expr, ...], node: ast.Subscript) -> d.Expr:
        if not self._is_field(name):
            raise self.error(node, f"'{name}' is not a field and cannot be indexed",
                             "index fields (parameters annotated Field[...]) or temporaries")
        offsets: list[int] = []
        k_runtime = None
        for pos, e in enumerate(index):
            if pos == 2 and len(index) == 3 and not isinstance(e, d.Const):
                k_runtime = e  # f[0, 0, lev]: a vertical offset known at run time
                offsets.append(0)
                continue
            if not (isinstance(e, d.Const) and e.dtype is not None and e.dtype.kind in "iu"):
                raise self.error(node, "field offsets must be integer constants (only the "
                                       "vertical one may be a run-time expression)",
                                 "write f[di, dj, dk] with literal integers, or f[0, 0, lev]")
            offsets.append(int(e.value))
        full = self._normalize(name, tuple(offsets), node)
        if k_runtime is not None:
            if name in self.fields and "K" not in self.fields[name].axes:
                raise self.error(node, f"field '{name}' has no K axis but is read at a "
                                       "vertical offset", "drop the vertical offset")
            full = (*full[:2], k_runtime)
        return d.Access(name, full, loc=self.src.loc(node))

    def expr(self, e: ast.expr) -> d.Expr:
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Subscript) \
                and isinstance(e.value.value, ast.Name) and self._is_field(e.value.value.id):
            return self.element(e)
        return super().expr(e)

    def element(self, e: ast.Subscript) -> d.Access:
        """``f[di, dj, dk][n]``: one element of a field with data dimensions."""
        base = self.expr(e.value)
        assert isinstance(base, d.Access)
        dims = self.fields[base.field].data_dims if base.field in self.fields else ()
        parts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        if not dims:
            raise self.error(e, f"'{base.field}' has no data dimensions to index",
                             "declare it Field[(dtype, (n,))] for a vector per point")
        if len(parts) != len(dims):
            raise self.error(e, f"'{base.field}' has data dimensions {dims}: give "
                                f"{len(dims)} index(es), got {len(parts)}")
        index = []
        for p, n in zip(parts, dims):
            v = self.expr(p)
            if not (isinstance(v, d.Const) and v.dtype is not None and v.dtype.kind in "iu"
                    and 0 <= int(v.value) < n):
                raise self.error(e, f"data index of '{base.field}' must be an integer "
                                    f"constant in [0, {n})", f"write {base.field}[0, 0, 0][i]")
            index.append(d.Const(int(v.value), dtype=dtypes.INT64))
        return dataclasses.replace(base, offset=(*base.offset, *index))

    def _normalize(self, name: str, off: tuple[int, ...], node: ast.AST) -> tuple[d.Expr, ...]:
        axes = self.fields[name].axes if name in self.fields else "IJK"
        if len(off) == 3:
            full = off
        elif len(off) == len(axes):
            lookup = dict(zip(axes, off))
            full = tuple(lookup.get(a, 0) for a in "IJK")
        else:
            raise self.error(node, f"'{name}' needs 3 offsets (or one per axis of {axes}), "
                                   f"got {len(off)}")
        for a, o in zip("IJK", full):
            if o and a not in axes:
                raise self.error(node, f"field '{name}' has no {a} axis but is read with a "
                                       f"{a} offset", "drop the offset along the missing axis")
        return tuple(d.Const(o, dtype=dtypes.INT64) for o in full)

    def name(self, name: str, node: ast.expr) -> d.Expr:
        if self._is_field(name):
            return d.Access(name, self._normalize(name, (0, 0, 0), node), loc=self.src.loc(node))
        if name in self.externals:
            return self.constant_value(self.externals[name], node)
        return super().name(name, node)

    def assign(self, target: ast.expr, value: ast.expr, s: ast.stmt) -> list[d.Stmt]:
        loc = self.src.loc(s)
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Call):
            func = self.resolve_global(value.func)
            if isinstance(func, GTFunction):
                results = self.inline(func, value)
                if not isinstance(results, tuple) or len(results) != len(target.elts):
                    raise self.error(s, "the helper returns a different number of values")
                out: list[d.Stmt] = []
                for t, v in zip(target.elts, results):
                    if not isinstance(t, ast.Name):
                        raise self.error(s, "unpack helper results into plain names")
                    out.append(d.Assign(t.id, v, loc=loc))
                return out
        if isinstance(target, ast.Subscript):
            return [self.assign_at(target, self.expr(value), s)]
        return super().assign(target, value, s)

    def assign_at(self, target: ast.Subscript, value: d.Expr, s: ast.stmt) -> d.Stmt:
        """``f[0, 0, dk] = value``: a write at the current level, or (FORWARD/BACKWARD, as
        GT4Py allows) at a vertical offset from it."""
        base = target.value.value if isinstance(target.value, ast.Subscript) else target.value
        if not (isinstance(base, ast.Name) and self._is_field(base.id)):
            raise self.error(s, "assign to a field or temporary: f = ..., f[0, 0, dk] = ... "
                                "or f[0, 0, 0][n] = ... (data dimensions)")
        acc = self.expr(target)
        if not isinstance(acc, d.Access):
            raise self.error(s, f"cannot assign to '{ast.unparse(target)}'")
        if not all(isinstance(o, d.Const) for o in acc.offset):
            raise self.error(s, f"'{acc.field}' is written at a run-time offset",
                             "write at constant offsets: f[0, 0, 1] = ...")
        di, dj, dk = (int(o.value) for o in acc.offset[:3])  # type: ignore[attr-defined]
        data_index = tuple(int(o.value) for o in acc.offset[3:])  # type: ignore[attr-defined]
        loc = self.src.loc(s)
        if (di, dj) != (0, 0):
            raise self.error(s, f"'{acc.field}' is written at the horizontal offset "
                                f"({di}, {dj}); only vertical offsets can be written",
                             "write f[0, 0, dk] = ..., or compute the neighbour's value there")
        if dk == 0 and not data_index:
            return d.Assign(acc.field, value, loc=loc)
        if dk and self.policy == "PARALLEL":
            raise self.error(s, f"'{acc.field}' is written at the vertical offset {dk} in a "
                                "PARALLEL computation, where levels run in no order",
                             "use computation(FORWARD) or computation(BACKWARD)")
        return c.AssignAt(acc.field, value, k_offset=dk, data_index=data_index, loc=loc)

    def stmt(self, s: ast.stmt) -> list[d.Stmt]:
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name):
            loc = self.src.loc(s)
            cur = self.name(s.target.id, s.target)
            return [d.Assign(s.target.id, d.BinOp(self.binop(s.op, s), cur, self.expr(s.value),
                                                  loc=loc), loc=loc)]
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Subscript):
            value = d.BinOp(self.binop(s.op, s), self.expr(s.target), self.expr(s.value),
                            loc=self.src.loc(s))
            return [self.assign_at(s.target, value, s)]
        if isinstance(s, ast.For):  # gtscript has none (no backend would know the counter)
            raise self.error(s, "for loops are not part of the computation language",
                             "unroll the loop, or use a while loop over a temporary")
        if isinstance(s, ast.Return):
            raise self.error(s, "a computation does not return; it writes fields",
                             "assign the result to an output field")
        if isinstance(s, ast.With) and len(s.items) == 1 \
                and self._is_dsl_call(s.items[0].context_expr, "horizontal"):
            return self.horizontal(s)
        if isinstance(s, (ast.If, ast.While)):
            self.depth += 1
            try:
                return super().stmt(s)
            finally:
                self.depth -= 1
        return super().stmt(s)

    # ------------------------------------------------------------ horizontal regions

    def _is_dsl_call(self, node: ast.expr, name: str) -> bool:
        """A call of the gtscript name ``name``, imported or not (as in GT4Py)."""
        if not isinstance(node, ast.Call):
            return False
        if _is_call_of(self, node, name):
            return True
        return isinstance(node.func, ast.Name) and node.func.id == name \
            and not self.src.lookup(name)[0]

    def horizontal(self, s: ast.With) -> list[d.Stmt]:
        """``with horizontal(r1, r2, ...): body`` is ``body`` restricted to ``r1``, then a copy
        restricted to ``r2``, ... (GT4Py's meaning: the regions run one after another)."""
        call = s.items[0].context_expr
        assert isinstance(call, ast.Call)
        if not call.args or call.keywords:
            raise self.error(call, "horizontal() takes one or more region[...] arguments",
                             "write with horizontal(region[I[0], :]):")
        if any(isinstance(x, ast.With) for x in s.body):
            raise self.error(s, "`with` blocks cannot be nested inside a horizontal region")
        if self.depth:
            raise self.error(s, "`with horizontal(...)` must be a statement of the interval "
                                "itself, not inside an `if` or `while`",
                             "put the `if` inside the horizontal region")
        body = self.stmts(s.body)
        out: list[d.Stmt] = []
        for r in call.args:
            if not (isinstance(r, ast.Subscript) and isinstance(r.value, ast.Name)
                    and r.value.id == "region" and isinstance(r.slice, ast.Tuple)
                    and len(r.slice.elts) == 2):
                raise self.error(r, "expected region[I-range, J-range]",
                                 "write region[I[0], :], region[:, J[-1]], "
                                 "region[I[0] : I[0] + 2, J[0]]")
            i, j = (self._region_axis(x, axis) for x, axis in zip(r.slice.elts, "IJ"))
            loc = self.src.loc(r)
            out.append(d.If(c.InRegion(i, j, loc=loc), body, (), loc=self.src.loc(s)))
        return out

    def _region_axis(self, node: ast.expr, axis: str) -> c.Bounds:
        if isinstance(node, ast.Slice):
            if node.step is not None:
                raise self.error(node, "region slices take no step")
            return (None if node.lower is None else self._region_bound(node.lower, axis),
                    None if node.upper is None else self._region_bound(node.upper, axis))
        start = self._region_bound(node, axis)
        return start, c.AxisBound(start.offset + 1, start.from_end)

    def _region_bound(self, node: ast.expr, axis: str) -> c.AxisBound:
        v = self._position(node, axis)
        if isinstance(v, AxisIndex):
            return c.AxisBound(v.index + v.offset, v.index < 0)
        return c.AxisBound(v, v < 0)  # a plain integer, as GT4Py: negative counts from the end

    def _position(self, node: ast.expr, axis: str) -> AxisIndex | int:
        """Evaluate an axis position: ``I[0]``, ``I[-1] + 1``, an integer, or an external."""
        bad = self.error(node, f"expected a position along {axis} such as {axis}[0], "
                               f"{axis}[-1] + 1, or an external holding one")
        match node:
            case ast.Constant(value=int() as v) if not isinstance(v, bool):
                return v
            case ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=int() as v)):
                return -v
            case ast.Name(id=name):
                v = self.externals.get(name, self.src.lookup(name)[1])
                if isinstance(v, AxisIndex) and v.axis == axis:
                    return v
                if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                    return int(v)
                raise bad
            case ast.Subscript(value=ast.Name(id=name), slice=index):
                found, ax = self.src.lookup(name)
                if (ax if found else name) not in (getattr(Axis, axis), axis):
                    raise bad
                pos = self._position(index, axis)
                if pos not in (0, -1):
                    raise self.error(node, f"write {axis}[0] or {axis}[-1], then add or "
                                           f"subtract an integer")
                return AxisIndex(axis, int(pos))  # type: ignore[arg-type]
            case ast.BinOp(left=l, op=ast.Add() | ast.Sub() as op, right=r):
                a, b = self._position(l, axis), self._position(r, axis)
                if isinstance(b, AxisIndex) and (isinstance(op, ast.Sub)
                                                 or isinstance(a, AxisIndex)):
                    raise bad
                return a + b if isinstance(op, ast.Add) else a - b  # type: ignore[operator]
        raise bad

    def unknown_call(self, e: ast.Call, func: object, args: tuple[d.Expr, ...]) -> d.Expr:
        if isinstance(func, GTFunction):
            result = self.inline(func, e)
            if isinstance(result, tuple):
                raise self.error(e, "a helper returning several values must be unpacked",
                                 "write `a, b = helper(...)`")
            return result
        return super().unknown_call(e, func, args)

    def inline(self, helper: GTFunction, call: ast.Call) -> d.Expr | tuple[d.Expr, ...]:
        """The helper's return value with its parameters replaced by the call's arguments."""
        hsrc = parse_function(helper.func)
        tree = hsrc.tree
        params = [a.arg for a in tree.args.args]
        if len(params) != len(call.args):
            raise self.error(call, f"helper '{hsrc.name}' takes {len(params)} arguments, "
                                   f"{len(call.args)} given")
        bound = {p: self.expr(a) for p, a in zip(params, call.args)}
        return _inline_body(hsrc, bound, self)


def _inline_body(hsrc: SourceFunction, bound: dict[str, d.Expr],
                 caller: _ComputationTranslator) -> d.Expr | tuple[d.Expr, ...]:
    env: dict[str, d.Expr] = dict(bound)

    def subscript(name: str, index: tuple[d.Expr, ...], node: ast.Subscript) -> d.Expr:
        base = env.get(name)
        if not isinstance(base, d.Access):
            raise inner.error(node, f"'{name}' is not bound to a field in this call")
        off = [int(o.value) for o in base.offset]  # type: ignore[attr-defined]
        extra = [int(e.value) for e in index]  # type: ignore[attr-defined]
        if len(extra) != 3:
            raise inner.error(node, "helpers index fields with three offsets")
        return d.Access(base.field, tuple(d.Const(a + b, dtype=dtypes.INT64)
                                          for a, b in zip(off, extra)), loc=hsrc.loc(node))

    body = hsrc.tree.body
    inner = Translator(hsrc, assigned_names(body) | set(bound), subscript,
                       stencil=caller.stencil)
    inner.unknown_call = caller.unknown_call  # type: ignore[method-assign]  # nested helpers

    def substitute(e: d.Expr) -> d.Expr:
        from ..ir.core import rewrite

        def fn(n):
            if isinstance(n, d.Name) and n.id in env:
                return env[n.id]
            return None

        return rewrite(e, fn)

    for s in body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            continue
        if isinstance(s, ast.Return) and s.value is not None:
            if isinstance(s.value, ast.Tuple):
                return tuple(substitute(inner.expr(v)) for v in s.value.elts)
            return substitute(inner.expr(s.value))
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            env[s.targets[0].id] = substitute(inner.expr(s.value))
            continue
        raise inner.error(s, "helpers may contain assignments to local names and one return",
                          "move control flow into the computation")
    raise inner.error(hsrc.tree, "the helper does not return a value")


def _interval_bounds(tr: _ComputationTranslator, call: ast.Call) -> tuple[c.AxisBound, c.AxisBound]:
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


def _policy(tr: _ComputationTranslator, call: ast.expr) -> str:
    if _is_call_of(tr, call, "computation") and len(call.args) == 1:  # type: ignore[attr-defined]
        p = tr.resolve_global(call.args[0])  # type: ignore[attr-defined]
        if isinstance(p, Policy):
            return p.value
    raise tr.error(call, "expected computation(PARALLEL | FORWARD | BACKWARD)")


def _is_call_of(tr: _ComputationTranslator, node: ast.expr, name: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = tr.resolve_global(node.func)
    return getattr(f, "__name__", "") == name and getattr(f, "__module__", "").endswith("gtscript")


def parse_computation(func: FunctionType, externals: dict[str, object] | None = None
                      ) -> tuple[c.ComputationDef, SourceFunction]:
    src = parse_function(func)
    tree = src.tree
    name = src.name
    ann = _annotations(func, name)
    fields: dict[str, c.FieldDecl] = {}
    scalars: dict[str, np.dtype] = {}
    params = tuple(a.arg for a in tree.args.args)
    for p in params:
        t = ann.get(p)
        if isinstance(t, FieldType):
            fields[p] = c.FieldDecl(p, "".join(a.value for a in t.axes), t.dtype, t.data_dims)
        elif t is None:
            raise StencilSyntaxError(f"parameter '{p}' has no annotation", stencil=name,
                                     loc=src.loc(tree), hint="annotate with Field[...] or a "
                                                             "scalar type such as float")
        else:
            try:
                scalars[p] = dtypes.as_dtype(t)
            except StencilTypeError as exc:
                raise StencilSyntaxError(f"parameter '{p}': {exc.bare_message}", stencil=name,
                                         loc=src.loc(tree)) from None
    ext = dict(externals or {})
    body = list(tree.body)
    blocks: list[c.VerticalBlock] = []
    local_names = assigned_names(body) - set(params)
    tr = _ComputationTranslator(src, fields, set(scalars), local_names, ext)
    for s in body:
        if isinstance(s, ast.ImportFrom) and s.module in ("__externals__", "__gtscript__"):
            if s.module == "__externals__":
                for alias in s.names:
                    if alias.name not in ext:
                        raise StencilSyntaxError(
                            f"external '{alias.name}' is not defined", stencil=name,
                            loc=src.loc(s), hint=f"pass externals={{'{alias.name}': ...}}")
                    if alias.asname:
                        ext[alias.asname] = ext[alias.name]
            continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            continue
        if not isinstance(s, ast.With):
            raise StencilSyntaxError("statements of a computation must be inside "
                                     "`with computation(...)` blocks", stencil=name,
                                     loc=src.loc(s), hint="wrap them in with computation(...), "
                                                          "interval(...):")
        blocks.append(_vertical_block(tr, s))
    temps = tuple(sorted(local_names))
    definition = c.ComputationDef(name, params, tuple(fields.values()),
                                  tuple(c.ScalarDecl(n, t) for n, t in scalars.items()),
                                  tuple(blocks), tuple((t, dtypes.FLOAT64) for t in temps),
                                  loc=src.loc(tree))
    return definition, src


def _vertical_block(tr: _ComputationTranslator, s: ast.With) -> c.VerticalBlock:
    items = s.items
    policy = _policy(tr, items[0].context_expr)
    tr.policy = policy
    intervals: list[c.IntervalBlock] = []
    if len(items) == 2:
        if not _is_call_of(tr, items[1].context_expr, "interval"):
            raise tr.error(s, "expected `with computation(P), interval(...)`")
        start, end = _interval_bounds(tr, items[1].context_expr)  # type: ignore[arg-type]
        intervals.append(c.IntervalBlock(start, end, tr.stmts(s.body), loc=tr.src.loc(s)))
    elif len(items) == 1:
        for inner in s.body:
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
