"""Horizontal regions: ``with horizontal(region[...], ...)`` to ``If(InRegion(...), body)``.

A region is a unit of its interval (the schedule gives it its own extent), so the ``with``
must be a statement of the interval itself -- directly, or through helpers called from there,
as GT4Py allows. Positions are written ``I[0]``, ``I[-1] + 1``, plain integers (negative:
from the end, as in GT4Py) or names (externals, globals) holding one; ``region``, ``I`` and
``J`` resolve without an import.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import numpy as np

from ..ir import computation as c
from ..ir import definition as d

if TYPE_CHECKING:
    from .computation_translate import ComputationTranslator

_EXAMPLE = "region[I[0], :], region[:, J[-1]], region[I[0] : I[0] + 2, J[0]]"


def horizontal(tr: ComputationTranslator, s: ast.With) -> list[d.Stmt]:
    """``with horizontal(r1, r2, ...): body`` is ``body`` restricted to ``r1``, then a copy
    restricted to ``r2``, ... (GT4Py's meaning: the regions run one after another)."""
    call = s.items[0].context_expr
    assert isinstance(call, ast.Call)
    if len(s.items) != 1 or not call.args or call.keywords:
        raise tr.error(call, "horizontal() takes one or more region[...] arguments",
                       "write with horizontal(region[I[0], :]):")
    if any(isinstance(x, ast.With) for x in s.body):
        raise tr.error(s, "`with` blocks cannot be nested inside a horizontal region")
    if tr.helper is not None and any(isinstance(n, ast.Return) for x in s.body
                                     for n in ast.walk(x)):
        raise tr.error(s, "a helper cannot return from inside a horizontal region",
                       "assign the result to a local in the region and return it after")
    if tr.nesting is not None:
        raise tr.error(s, "`with horizontal(...)` must be a statement of the interval itself, "
                          f"not inside {tr.nesting}",
                       "put the `if` inside the horizontal region")
    regions = [(r, _region(tr, r)) for r in call.args]
    body = tr.nested_stmts(s.body, "a horizontal region")
    return [d.If(c.InRegion(i, j, loc=tr.src.loc(r)), body, (), loc=tr.src.loc(s))
            for r, (i, j) in regions]


def _region(tr: ComputationTranslator, r: ast.expr) -> tuple[c.Bounds, c.Bounds]:
    if not (isinstance(r, ast.Subscript) and isinstance(r.value, ast.Name)
            and r.value.id == "region" and isinstance(r.slice, ast.Tuple)
            and len(r.slice.elts) == 2):
        raise tr.error(r, "expected region[I-range, J-range]", f"write {_EXAMPLE}")
    i, j = (_region_axis(tr, x, axis) for x, axis in zip(r.slice.elts, "IJ"))
    return i, j


def _region_axis(tr: ComputationTranslator, node: ast.expr, axis: str) -> c.Bounds:
    if isinstance(node, ast.Slice):
        if node.step is not None:
            raise tr.error(node, "region slices take no step")
        return (None if node.lower is None else _region_bound(tr, node.lower, axis),
                None if node.upper is None else _region_bound(tr, node.upper, axis))
    start = _region_bound(tr, node, axis)
    return start, c.AxisBound(start.offset + 1, start.from_end)


def _region_bound(tr: ComputationTranslator, node: ast.expr, axis: str) -> c.AxisBound:
    v = _position(tr, node, axis)
    if isinstance(v, int):
        return c.AxisBound(v, v < 0)  # a plain integer, as GT4Py: negative counts from the end
    index, offset = v[1], v[2]
    return c.AxisBound(index + offset, index < 0)


Position = tuple[str, int, int] | int  # (axis, index, offset) as gtscript's AxisIndex, or int


def _axis_index(v: object) -> tuple[str, int, int] | None:
    """Ours or GT4Py's ``AxisIndex`` (recognised by its attributes) as (axis, index, offset)."""
    if type(v).__name__ == "AxisIndex" and all(hasattr(v, a) for a in ("axis", "index",
                                                                         "offset")):
        axis = getattr(v.axis, "name", v.axis)  # type: ignore[attr-defined]
        return str(axis), int(v.index), int(v.offset)  # type: ignore[attr-defined]
    return None


def _position(tr: ComputationTranslator, node: ast.expr, axis: str) -> Position:
    """Evaluate an axis position: ``I[0]``, ``I[-1] + 1``, an integer, or a name holding one."""
    bad = tr.error(node, f"expected a position along {axis} such as {axis}[0], "
                         f"{axis}[-1] + 1, or an external holding one")
    match node:
        case ast.Constant(value=int() as v) if not isinstance(v, bool):
            return v
        case ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=int() as v)):
            return -v
        case ast.Name(id=name):
            v = tr.static_lookup_or_none(name)
            ai = _axis_index(v)
            if ai is not None and ai[0] == axis:
                return ai
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                return int(v)
            raise bad
        case ast.Subscript(value=ast.Name(id=name), slice=index):
            ax = tr.static_lookup_or_none(name)
            if getattr(ax, "name", None) != axis and not (ax is None and name == axis):
                raise bad
            pos = _position(tr, index, axis)
            if pos not in (0, -1):
                raise tr.error(node, f"write {axis}[0] or {axis}[-1], then add or subtract "
                                     "an integer")
            return axis, int(pos), 0  # type: ignore[arg-type]
        case ast.BinOp(left=left, op=ast.Add() | ast.Sub() as op, right=right):
            a, b = _position(tr, left, axis), _position(tr, right, axis)
            if isinstance(b, tuple) and (isinstance(op, ast.Sub) or isinstance(a, tuple)):
                raise bad
            sign = 1 if isinstance(op, ast.Add) else -1
            if isinstance(a, tuple):
                return a[0], a[1], a[2] + sign * b  # type: ignore[operator]
            if isinstance(b, tuple):
                return b[0], b[1], b[2] + a
            return a + sign * b
    raise bad
