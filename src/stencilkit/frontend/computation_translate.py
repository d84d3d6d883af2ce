"""Statements of a computation, and the helpers they call, to definition IR.

One ``ComputationTranslator`` per scope: the stencil's own body, and one per inlined helper
call. Every name is resolved in the scope where it is written: a helper sees its parameters
(bound to the caller's argument expressions), its locals (fresh temporaries of the
computation, so they may be read at offsets), the externals, its own module's globals and
the gtscript names; never the stencil's fields by accident.

Helpers are inlined as statements (``inlining``); horizontal regions are translated by
``regions``. Field accesses may carry a run-time vertical offset (``f[0, 0, lev]``) and, for
fields with data dimensions, element indices (``f[0, 0, 0][n]``); writes may be at a vertical
offset in FORWARD/BACKWARD computations (``c.AssignAt``).
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
from dataclasses import dataclass, field
from types import FunctionType

import numpy as np

from .. import dtypes
from ..errors import StencilSyntaxError, did_you_mean
from ..ir import computation as c
from ..ir import definition as d
from ..ir.core import rewrite, walk
from . import axes, functions, inlining, regions
from .dsl import DSL_NAMES, round_away_from_zero, vocabulary
from .inlining import is_helper
from .source import SourceFunction
from .static import (
    NotStatic,
    RunTime,
    holds_runtime,
    is_inlined_call,
    static_value,
)
from .translate import Translator

_ZERO = (0, 0, 0)


@dataclass
class Context:
    """What every scope of one definition shares (mutable while the definition is parsed)."""

    name: str
    fields: dict[str, c.FieldDecl]
    scalars: set[str]
    externals: dict[str, object]
    temporaries: list[str] = field(default_factory=list)
    dtype_map: dict[str, object] = field(default_factory=dict)  # dtypes= of the stencil
    # typed temporaries (``temporaries.declare``): 2-D ones, also in ``fields``; 3-D dtypes
    planes: dict[str, c.FieldDecl] = field(default_factory=dict)
    declared: dict[str, np.dtype] = field(default_factory=dict)
    level_index: str = ""  # the K field holding each level's index (``K`` read as a value)
    policy: str = ""  # of the computation being translated
    counter: itertools.count = field(default_factory=itertools.count)

    def level_field(self) -> str:
        """The field the stencil fills with the index of each level, made on first use."""
        if not self.level_index:
            self.level_index = self.fresh("level_index")
            self.temporaries.remove(self.level_index)
            self.fields[self.level_index] = c.FieldDecl(self.level_index, "K", dtypes.INT64)
        return self.level_index

    def fresh(self, base: str) -> str:
        """A new temporary name that no field, scalar or temporary uses."""
        taken = set(self.fields) | self.scalars | set(self.temporaries)
        while True:
            candidate = f"{base}_{next(self.counter)}"
            if candidate not in taken:
                self.temporaries.append(candidate)
                return candidate


class ComputationTranslator(Translator):
    """Translates one scope: the stencil body (``helper`` None) or one inlined helper call.

    ``aliases`` maps source names to the fields/temporaries they denote; ``bound`` maps a
    helper's parameters to the caller's argument expressions."""

    def __init__(self, src: SourceFunction, ctx: Context, *, aliases: dict[str, str],
                 bound: dict[str, d.Expr] | None = None, helper: str | None = None,
                 depth: int = 0) -> None:
        super().__init__(src, set(), self._subscript, stencil=ctx.name)
        self.ctx = ctx
        self.aliases = aliases
        self.bound = bound or {}
        self.helper = helper
        self.depth = depth
        self.pending: list[d.Stmt] = []
        self.return_targets: tuple[str, ...] = ()
        self.declared_externals: set[str] = set()
        self.constants: dict[str, object] = {}  # a helper's parameters left to their defaults
        # what the statement being translated is nested in ("an `if`", ...); None at the top
        # level of an interval, where a horizontal region may start
        self.nesting: str | None = None

    # ------------------------------------------------------------ names

    def _is_runtime(self, name: str) -> bool:
        return name in self.aliases or name in self.bound or (
            self.helper is None and name in self.ctx.scalars)

    def lookup(self, name: str) -> tuple[bool, object]:
        """(found, value) of a compile-time name: externals, then the scope's globals (for a
        helper: externals it imports, its globals, then the other externals)."""
        if name in self.constants:
            return True, self.constants[name]
        ext = self.ctx.externals
        if name in ext and (self.helper is None or name in self.declared_externals):
            return True, ext[name]
        found, value = self.src.lookup(name)
        if found:
            return True, _ours(value)
        if name in ext:
            return True, ext[name]
        return False, None

    def static_lookup(self, name: str) -> object:
        if self._is_runtime(name):
            return RunTime()
        found, value = self.lookup(name)
        if not found:
            raise NotStatic
        if axes.axis_name(value) is not None:  # `K` as a value: the level, at run time
            return RunTime()
        return value

    def static_lookup_or_none(self, name: str) -> object:
        """The compile-time value of ``name``; None for run-time and undefined names."""
        return None if self._is_runtime(name) else self.lookup(name)[1]

    def static(self, node: ast.expr) -> tuple[bool, object]:
        """(True, value) when ``node`` is known at compile time, else (False, None)."""
        try:
            value = static_value(node, self.static_lookup)
        except NotStatic:
            return False, None
        except Exception as exc:  # e.g. a division by zero among externals
            raise self.error(node, f"cannot evaluate `{ast.unparse(node)}` at compile time: "
                                   f"{exc}") from None
        # a run-time name evaluates to itself (`if flag:` on a scalar parameter, a helper's
        # argument): known only as "not None", so the condition is a run-time one
        return (False, None) if holds_runtime(value) else (True, value)

    def static_truth(self, node: ast.expr) -> tuple[bool, bool]:
        """(True, truth) when the condition ``node`` is decided at compile time."""
        known, value = self.static(node)
        if not known:
            return False, False
        try:
            return True, bool(value)
        except Exception as exc:  # an array external: "truth value ... is ambiguous"
            raise self.error(node, f"the truth of `{ast.unparse(node)}` cannot be decided at "
                                   f"compile time: {exc}",
                             "compare the value explicitly (e.g. `N > 0`, `X is None`)") from None

    def name(self, name: str, node: ast.expr) -> d.Expr:
        loc = self.src.loc(node)
        if name in self.aliases:
            return d.Access(self.aliases[name], self._offsets(self.aliases[name], _ZERO, node),
                            loc=loc)
        if name in self.bound:
            return self.bound[name]
        if self.helper is None and name in self.ctx.scalars:
            return d.Name(name, loc=loc)
        found, value = self.lookup(name)
        axis = axes.axis_name(value) if found else None
        if axis == "K":
            level = self.ctx.level_field()
            return d.Access(level, self._offsets(level, _ZERO, node), loc=loc)
        if axis is not None:
            raise self.error(node, f"the parallel axis {axis} cannot be read as a value (only "
                                   "K, the level index)", "pass the index as a field")
        if found:
            if value is None:
                raise self.error(node, f"'{name}' is None and has no value in a computation",
                                 "give it a number (through externals=) or remove its use")
            return self.constant_value(value, node)
        raise self.undefined(name, node)

    def undefined(self, name: str, node: ast.AST) -> StencilSyntaxError:
        if self.helper is not None and (name in self.ctx.fields or name in self.ctx.scalars):
            return self.error(node, f"'{name}' is a parameter of stencil '{self.ctx.name}', "
                                    f"which helper '{self.helper}' cannot see",
                              f"pass it to the helper as an argument: {self.helper}(..., "
                              f"{name})")
        where = f"helper '{self.helper}'" if self.helper else "the definition"
        known = [*self.ctx.fields, *self.ctx.scalars, *getattr(self.ctx, "temporaries", ()),
                 *(n for n in self.src.namespace if not n.startswith("_"))]
        return self.error(node, f"name '{name}' is not defined in {where}"
                          + did_you_mean(name, known),
                          "define it, pass it as an argument, or give it through externals=")

    def resolve_global(self, node: ast.expr) -> object:
        if isinstance(node, ast.Name):
            if self._is_runtime(node.id):
                return None
            return self.lookup(node.id)[1]
        if isinstance(node, ast.Attribute):
            return self.resolve_attribute(node)
        return None

    # ------------------------------------------------------------ field accesses

    def axes_of(self, name: str) -> str:
        f = self.ctx.fields.get(name)
        return f.axes if f is not None else "IJK"

    def _offsets(self, name: str, off: tuple[int, ...], node: ast.AST) -> tuple[d.Expr, ...]:
        full = _full_offsets(off, self.axes_of(name), name, self, node)
        return tuple(d.Const(o, dtype=dtypes.INT64) for o in full)

    def _subscript(self, name: str, index: tuple[d.Expr, ...], node: ast.Subscript) -> d.Expr:
        k_runtime = None
        if len(index) == 3 and not isinstance(index[2], d.Const) and \
                (name in self.aliases or name in self.bound):
            # f[0, 0, lev]: a vertical offset known at run time
            k_runtime, index = index[2], (*index[:2], d.Const(0, dtype=dtypes.INT64))
        off = self._constant_offsets(index, node)
        if name in self.aliases:
            target = self.aliases[name]
            acc = d.Access(target, self._offsets(target, off, node), loc=self.src.loc(node))
            return acc if k_runtime is None else self._k_runtime(name, acc, k_runtime, node)
        if name in self.bound:
            shifted = self._shifted(name, self.bound[name], off, node)
            if k_runtime is None:
                return shifted
            if not isinstance(shifted, d.Access):
                raise self.error(node, f"'{name}' is bound to an expression in this call and "
                                       "cannot be read at a run-time vertical offset",
                                 "pass a field for this argument")
            return self._k_runtime(name, shifted, k_runtime, node)
        if self.helper is None and name in self.ctx.scalars:
            raise self.error(node, f"'{name}' is a scalar parameter and cannot be indexed",
                             f"use '{name}' without an index")
        found, _ = self.lookup(name)
        if not found:
            raise self.undefined(name, node)
        raise self.error(node, f"'{name}' is not a field and cannot be indexed",
                         "index fields (parameters annotated Field[...]) or temporaries")

    def _constant_offsets(self, index: tuple[d.Expr, ...], node: ast.AST) -> tuple[int, ...]:
        offsets = []
        for e in index:
            if not (isinstance(e, d.Const) and e.dtype is not None and e.dtype.kind in "iu"):
                raise self.error(node, "field offsets must be integer constants (only the "
                                       "vertical one may be a run-time expression)",
                                 "write f[di, dj, dk] with literal integers (or externals), "
                                 "or f[0, 0, lev]")
            offsets.append(int(e.value))
        return tuple(offsets)

    def _k_runtime(self, name: str, acc: d.Access, k: d.Expr, node: ast.AST) -> d.Access:
        """``acc`` read at the run-time vertical offset ``k`` (plus its constant one)."""
        if "K" not in self.axes_of(acc.field):
            raise self.error(node, f"field '{acc.field}' has no K axis but is read at a "
                                   "vertical offset", "drop the vertical offset")
        if len(acc.offset) != 3:
            raise self.error(node, f"'{name}' is an element of a field with data dimensions; "
                                   "read it at a run-time vertical offset as f[0, 0, lev][i]")
        dk = acc.offset[2]
        if not (isinstance(dk, d.Const) and int(dk.value) == 0):
            k = d.BinOp("+", k, dk, loc=k.loc)
        return d.Access(acc.field, (*acc.offset[:2], k), loc=acc.loc)

    def expr(self, e: ast.expr) -> d.Expr:
        e = self.axis_subscript(e)
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Subscript) \
                and isinstance(e.value.value, ast.Name) \
                and (e.value.value.id in self.aliases or e.value.value.id in self.bound):
            return self.element(e)
        return super().expr(e)

    def axis_subscript(self, e: ast.expr) -> ast.expr:
        """``f[K + 1]``, ``a[I - 1, J + 1]`` (GT4Py's axis offsets) as ``f[0, 0, 1]``,
        ``a[-1, 1, 0]``; anything else as it is."""
        if not (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name)
                and (e.value.id in self.aliases or e.value.id in self.bound)):
            return e
        off = axes.axis_offsets(self, e.slice)
        if off is None:
            return e
        index = ast.Tuple([ast.copy_location(ast.Constant(o), e.slice) for o in off],
                          ast.Load())
        return ast.copy_location(ast.Subscript(e.value, ast.copy_location(index, e.slice),
                                               e.ctx), e)

    def element(self, e: ast.Subscript) -> d.Access:
        """``f[di, dj, dk][n]``: one element of a field with data dimensions."""
        base = self.expr(e.value)
        if not isinstance(base, d.Access) or len(base.offset) != 3:
            raise self.error(e, f"'{ast.unparse(e.value)}' is not a field read and cannot be "
                                "indexed by element", "pass a field with data dimensions")
        decl = self.ctx.fields.get(base.field)
        dims = decl.data_dims if decl is not None else ()
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
        return d.Access(base.field, (*base.offset, *index), loc=base.loc)

    def _shifted(self, param: str, expr: d.Expr, off: tuple[int, ...], node: ast.AST) -> d.Expr:
        """A parameter bound to ``expr`` read at ``off``: ``expr`` with every access shifted."""
        accesses = [n for n in walk(expr) if isinstance(n, d.Access)]
        if not accesses:
            if any(off):
                raise self.error(node, f"'{param}' is bound to a scalar value in this call and "
                                       "cannot be read at an offset",
                                 "pass a field for this argument")
            return expr
        if len(off) == 3:
            full = off
        else:
            kinds = {self.axes_of(a.field) for a in accesses}
            if len(kinds) != 1:
                raise self.error(node, f"'{param}' is bound to an expression of fields with "
                                       "different axes; index it with three offsets")
            full = _full_offsets(off, kinds.pop(), param, self, node)
        if not any(full):
            return expr

        def shift(n: d.Node) -> d.Node | None:
            if not isinstance(n, d.Access):
                return None
            axes = self.axes_of(n.field)
            for axis, delta in zip("IJK", full):
                if delta and axis not in axes:
                    raise self.error(node, f"'{param}' is bound to field '{n.field}', which has "
                                           f"no {axis} axis, but is read with a {axis} offset",
                                     "drop the offset along the missing axis")
            new: list[d.Expr] = []
            for o, delta in zip(n.offset[:3], full):
                if isinstance(o, d.Const):
                    new.append(d.Const(int(o.value) + delta, dtype=dtypes.INT64))
                else:  # a run-time vertical offset (its own reads are already shifted)
                    new.append(d.BinOp("+", o, d.Const(delta, dtype=dtypes.INT64), loc=o.loc)
                               if delta else o)
            # element indices of fields with data dimensions stay as they are
            return d.Access(n.field, (*new, *n.offset[3:]), loc=n.loc)

        return rewrite(expr, shift)

    # ------------------------------------------------------------ statements

    def stmt(self, s: ast.stmt) -> list[d.Stmt]:
        outer, self.pending = self.pending, []
        try:
            out = self._stmt(s)
            return [*self.pending, *out]
        finally:
            self.pending = outer

    def _stmt(self, s: ast.stmt) -> list[d.Stmt]:
        loc = self.src.loc(s)
        match s:
            case ast.ImportFrom(module="__externals__" | "__gtscript__"):
                self.import_externals(s)
                return []
            case ast.AnnAssign(value=None):  # a declaration (read by temporaries.declare)
                return []
            case ast.Expr(value=ast.Call() as call) if self._is_dsl(call.func, "compile_assert"):
                self.compile_assert(call)
                return []
            case ast.If(test=test, body=body, orelse=orelse):
                known, chosen = self.static_truth(test)
                if known:
                    return list(self.stmts(body if chosen else orelse))
                if is_inlined_call(test):
                    raise self.error(s, "the condition of __INLINED(...) is not known at "
                                        "compile time", "use only externals and literals in it")
                if self.nesting is None and any(self._is_region(x) for x in body + orelse):
                    return self.if_around_regions(s)
                return [d.If(self.expr(test), self.nested_stmts(body, "an `if`"),
                             self.nested_stmts(orelse, "an `if`"), loc=loc)]
            case ast.With(items=items) if items and self._is_dsl_call(items[0].context_expr,
                                                                     "horizontal"):
                return regions.horizontal(self, s)
            case ast.With():
                raise self.error(s, "`with` blocks other than horizontal regions are not "
                                    "allowed inside an interval",
                                 "put computation(...) and interval(...) at the top level")
            case ast.While(test=test, body=body, orelse=[]):
                cond = self.expr(test)
                if self.pending:
                    raise self.error(s, "a helper call in a `while` condition is not supported",
                                     "compute the condition into a temporary before the loop "
                                     "and update it at the end of the body")
                return [d.While(cond, self.nested_stmts(body, "a `while`"), loc=loc)]
            case ast.Return(value=value):
                return self.return_stmt(s, value)
            case ast.AugAssign(target=target, op=op, value=value):
                current = self.expr(_as_load(target))
                new = d.BinOp(self.binop(op, s), current, self.expr(value), loc=loc)
                return self.store(target, new, s)
            case ast.Expr(value=ast.Call()):
                raise self.error(s, "the value of this call is not used",
                                 "assign it: name = call(...)")
            case ast.For():
                # gtscript has none (no backend would know the counter)
                raise self.error(s, "for loops are not part of the computation language",
                                 "unroll the loop, use a `while` loop over a temporary, or a "
                                 "FORWARD/BACKWARD computation")
        return super().stmt(s)

    def _is_region(self, s: ast.stmt) -> bool:
        return isinstance(s, ast.With) and bool(s.items) \
            and self._is_dsl_call(s.items[0].context_expr, "horizontal")

    def if_around_regions(self, s: ast.If) -> list[d.Stmt]:
        """``if c: A; with horizontal(r): B; C`` (GT4Py allows a region in an ``if``): the
        condition, evaluated once into a temporary, guards each statement of the branch in
        turn, and a region's guarded body becomes the region's own unit
        (``t = c; if t: A; region r: (if t: B); if t: C``). The statements run in the same
        order, each over the whole plane, so the meaning is the same."""
        loc = self.src.loc(s)
        flag = self.ctx.fresh("if_region")
        out: list[d.Stmt] = [d.Assign(flag, self.expr(s.test), loc=loc)]
        taken = d.Access(flag, self._offsets(flag, _ZERO, s), loc=loc)
        for branch, cond in ((s.body, taken), (s.orelse, d.UnaryOp("not", taken, loc=loc))):
            for x in branch:
                if self._is_region(x):
                    out += [dataclasses.replace(unit, body=(d.If(cond, unit.body, (), loc=loc),))
                            for unit in regions.horizontal(self, x)]
                else:
                    out.append(d.If(cond, self.nested_stmts([x], "an `if`"), (), loc=loc))
        return out

    def nested_stmts(self, body: list[ast.stmt], where: str) -> tuple[d.Stmt, ...]:
        """``body``, nested in ``where`` (an if/while body, a region): no region starts there."""
        outer, self.nesting = self.nesting, where
        try:
            return self.stmts(body)
        finally:
            self.nesting = outer

    def assign(self, target: ast.expr, value: ast.expr, s: ast.stmt) -> list[d.Stmt]:
        loc = self.src.loc(s)
        if isinstance(target, ast.Tuple):
            if isinstance(value, ast.Tuple):
                if len(value.elts) != len(target.elts):
                    raise self.error(s, "the numbers of targets and values differ")
                values: tuple[d.Expr, ...] = tuple(self.expr(v) for v in value.elts)
            else:
                result = self.expr_or_tuple(value)
                if not isinstance(result, tuple):
                    raise self.error(s, "only tuples and helpers returning several values can "
                                        "be unpacked")
                if len(result) != len(target.elts):
                    raise self.error(s, f"the helper returns {len(result)} values, "
                                        f"{len(target.elts)} targets given")
                values = result
            # Every value is evaluated before any target is written (a, b = b, a).
            staged = []
            out: list[d.Stmt] = []
            for v in values:
                if any(isinstance(n, d.Access) for n in walk(v)):
                    tmp = self.ctx.fresh("unpack")
                    out.append(d.Assign(tmp, v, loc=loc))
                    v = d.Access(tmp, self._offsets(tmp, _ZERO, s), loc=loc)
                staged.append(v)
            for t, v in zip(target.elts, staged):
                out += self.store(t, v, s)
            return out
        return self.store(target, self.expr(value), s)

    def store(self, target: ast.expr, value: d.Expr, s: ast.stmt) -> list[d.Stmt]:
        """``target = value`` with ``target`` a name, ``name[0, 0, dk]`` (at a vertical offset
        in FORWARD/BACKWARD, as GT4Py allows) or ``name[0, 0, dk][n]`` (data dimensions)."""
        loc = self.src.loc(s)
        base = target.value if isinstance(target, ast.Subscript) else target
        base = base.value if isinstance(base, ast.Subscript) else base
        if not isinstance(base, ast.Name):
            raise self.error(s, "assign to a field or temporary: name = ..., name[0, 0, dk] = "
                                "... or name[0, 0, 0][n] = ... (data dimensions)")
        name = base.id
        if name not in self.aliases:
            if name in self.bound:
                raise self.error(s, f"helper '{self.helper}' cannot write its parameter "
                                    f"'{name}'", "return the value and assign it in the "
                                                 "stencil")
            if self.helper is None and name in self.ctx.scalars:
                raise self.error(s, f"scalar parameter '{name}' cannot be assigned",
                                 "assign to a temporary of another name")
            raise self.error(s, f"'{name}' cannot be assigned here")
        field_name = self.aliases[name]
        # GT4Py's rule: a write covers every axis the computation runs in parallel (I, J,
        # and K in PARALLEL); a K-less field written at several levels in no order would
        # keep whichever level ran last
        parallel = "IJK" if self.ctx.policy == "PARALLEL" else "IJ"
        axes = self.axes_of(field_name)
        if not set(parallel) <= set(axes):
            raise self.error(s, f"'{name}' (Field[{axes}]) is written in a {self.ctx.policy} "
                                f"computation, which runs in parallel along {parallel}: a "
                                "write must cover each of these axes",
                             "write it in a FORWARD or BACKWARD computation"
                             if {"I", "J"} <= set(axes) else "write a field with these axes")
        decl = self.ctx.fields.get(field_name)
        dims = decl.data_dims if decl is not None else ()
        if isinstance(target, ast.Name):
            if dims:
                return self.vector_store(field_name, dims, value, 0, s)
            return [d.Assign(field_name, value, loc=loc)]
        acc = self.expr(_as_load(target))
        assert isinstance(acc, d.Access)
        if not all(isinstance(o, d.Const) for o in acc.offset):
            raise self.error(s, f"'{name}' is written at a run-time offset",
                             "write at constant offsets: f[0, 0, 1] = ...")
        di, dj, dk = (int(o.value) for o in acc.offset[:3])  # type: ignore[attr-defined]
        data_index = tuple(int(o.value) for o in acc.offset[3:])  # type: ignore[attr-defined]
        if (di, dj) != (0, 0):
            raise self.error(s, f"'{name}' is written at the horizontal offset ({di}, {dj}); "
                                "only vertical offsets can be written",
                             "write fields at offset [0, 0, dk] (read neighbours instead)")
        if dk and self.ctx.policy == "PARALLEL":
            raise self.error(s, f"'{name}' is written at the vertical offset {dk} in a "
                                "PARALLEL computation, where levels run in no order",
                             "use computation(FORWARD) or computation(BACKWARD)")
        if dims and not data_index:
            return self.vector_store(field_name, dims, value, dk, s)
        if dk == 0 and not data_index:
            return [d.Assign(field_name, value, loc=loc)]
        return [c.AssignAt(field_name, value, k_offset=dk, data_index=data_index, loc=loc)]

    def vector_store(self, field_name: str, dims: tuple[int, ...], value: d.Expr, dk: int,
                     s: ast.stmt) -> list[d.Stmt]:
        """``out = 3.0 * a`` on fields with data dimensions: one assignment per element,
        each reading that element of every whole-vector read (GT4Py's element-wise
        meaning); scalars and single elements (``a[0, 0, 0][1]``) are broadcast."""
        loc = self.src.loc(s)
        for n in walk(value):
            if isinstance(n, d.Access) and len(n.offset) == 3:
                other = self.ctx.fields.get(n.field)
                theirs = other.data_dims if other is not None else ()
                if theirs and theirs != dims:
                    raise self.error(s, f"'{field_name}' has data dimensions {dims} but "
                                        f"'{n.field}' has {theirs}",
                                     "combine vectors of one shape, or index elements")

        def element(index: tuple[int, ...]):
            def pick(n: d.Node) -> d.Node | None:
                if isinstance(n, d.Access) and len(n.offset) == 3 and n.field in self.ctx.fields \
                        and self.ctx.fields[n.field].data_dims:
                    return d.Access(n.field, (*n.offset, *(d.Const(i, dtype=dtypes.INT64)
                                                           for i in index)), loc=n.loc)
                return None
            return rewrite(value, pick)

        return [c.AssignAt(field_name, element(index), k_offset=dk, data_index=index, loc=loc)
                for index in np.ndindex(*dims)]

    def return_stmt(self, s: ast.Return, value: ast.expr | None) -> list[d.Stmt]:
        if self.helper is None:
            raise self.error(s, "a computation does not return; it writes fields",
                             "assign the result to an output field")
        if value is None:
            raise self.error(s, f"helper '{self.helper}' must return a value")
        values = value.elts if isinstance(value, ast.Tuple) else [value]
        loc = self.src.loc(s)
        return [d.Assign(t, self.expr(v), loc=loc) for t, v in zip(self.return_targets, values)]

    def import_externals(self, s: ast.ImportFrom) -> None:
        if s.module != "__externals__":
            return
        for alias in s.names:
            if alias.name not in self.ctx.externals:
                raise self.error(s, f"external '{alias.name}' is not defined",
                                 f"pass externals={{'{alias.name}': ...}}")
            self.declared_externals.add(alias.asname or alias.name)
            if alias.asname:
                self.ctx.externals.setdefault(alias.asname, self.ctx.externals[alias.name])

    def compile_assert(self, call: ast.Call) -> None:
        if len(call.args) != 1 or call.keywords:
            raise self.error(call, "compile_assert() takes one condition")
        known, ok = self.static_truth(call.args[0])
        if not known:
            raise self.error(call, "the condition of compile_assert() is not known at compile "
                                   "time", "use only externals and literals in it")
        if not ok:
            raise self.error(call, f"compile_assert({ast.unparse(call.args[0])}) failed",
                             "change the externals, or the condition")

    def _is_dsl(self, func: ast.expr, name: str) -> bool:
        """``func`` names gtscript's ``name`` (ours or GT4Py's, recognised by name)."""
        spelled = func.id if isinstance(func, ast.Name) else (
            func.attr if isinstance(func, ast.Attribute) else None)
        if spelled != name:
            return False
        try:
            obj = self.resolve_global(func)
        except StencilSyntaxError:
            return False
        return obj is None or getattr(obj, "__name__", "") == name

    def _is_dsl_call(self, node: ast.expr, name: str) -> bool:
        return isinstance(node, ast.Call) and self._is_dsl(node.func, name)

    # ------------------------------------------------------------ calls

    def expr_or_tuple(self, e: ast.expr) -> d.Expr | tuple[d.Expr, ...]:
        if isinstance(e, ast.Call):
            func = self.resolve_global(e.func)
            if is_helper(func):
                return self.inline(func, e)
        return self.expr(e)

    def call(self, e: ast.Call) -> d.Expr:
        func = self.resolve_global(e.func)
        if is_helper(func):
            result = self.inline(func, e)
            if isinstance(result, tuple):
                raise self.error(e, "a helper returning several values must be unpacked",
                                 "write `a, b = helper(...)`")
            return result
        if func in (np.minimum, np.maximum) and len(e.args) > 2 and not e.keywords:
            # min(a, b, c) as Python allows (gtscript's min is binary): folded left to right
            acc = self.expr(e.args[0])
            for a in e.args[1:]:
                acc = d.Call(functions.canonical_name(func), (acc, self.expr(a)),
                             loc=self.src.loc(e))
            return acc
        if func is round_away_from_zero:
            # GT4Py's definition, copysign(floor(|x| + 0.5), x), in the calls we have
            if len(e.args) != 1 or e.keywords:
                raise self.error(e, "round_away_from_zero() takes one argument")
            x = self.expr(e.args[0])
            loc = self.src.loc(e)
            half = d.BinOp("+", d.Call("np.abs", (x,), loc=loc), d.Const(0.5, dtype=dtypes.FLOAT64),
                           loc=loc)
            return d.Call("np.copysign", (d.Call("np.floor", (half,), loc=loc), x), loc=loc)
        if self._is_dsl(e.func, "__INLINED"):
            raise self.error(e, "__INLINED(...) is only allowed as the condition of an `if`")
        if isinstance(func, FunctionType) and func.__name__ != "<lambda>":
            raise self.error(e, f"'{ast.unparse(e.func)}' is a plain Python function",
                             "mark it with @gtscript.function (or @sk.function) to call it "
                             "in a definition")
        if e.keywords:
            raise self.error(e, "keyword arguments are only supported in calls of helpers",
                             "pass arguments by position")
        return super().call(e)

    def unknown_call(self, e: ast.Call, func: object, args: tuple[d.Expr, ...]) -> d.Expr:
        raise self.error(e, f"call of '{ast.unparse(e.func)}' is not supported in "
                            "computations", "call gtscript math functions (sqrt, exp, min, ...)"
                                            ", NumPy/math functions, or @gtscript.function "
                                            "helpers")

    def inline(self, helper: object, call: ast.Call) -> d.Expr | tuple[d.Expr, ...]:
        """Inline a helper call (see ``inlining.inline``)."""
        return inlining.inline(self, helper, call)


def _ours(value: object) -> object:
    """GT4Py's own gtscript functions (``sqrt``, ``computation``, ...) as ours, by name, so
    that definitions mixing imports work."""
    name = getattr(value, "__name__", None)
    if name in DSL_NAMES and getattr(value, "__module__", "").startswith("gt4py."):
        return vocabulary()[name]  # type: ignore[index]
    return value


def _full_offsets(off: tuple[int, ...], axes: str, name: str, tr: Translator,
                  node: ast.AST) -> tuple[int, int, int]:
    """Offsets along I, J, K from three offsets or one per axis of the field."""
    if len(off) == 3:
        full = off
    elif len(off) == len(axes):
        lookup = dict(zip(axes, off))
        full = tuple(lookup.get(a, 0) for a in "IJK")
    else:
        raise tr.error(node, f"'{name}' needs 3 offsets (or one per axis of {axes}), "
                             f"got {len(off)}")
    for a, o in zip("IJK", full):
        if o and a not in axes:
            raise tr.error(node, f"field '{name}' has no {a} axis but is read with a "
                                 f"{a} offset", "drop the offset along the missing axis")
    return full  # type: ignore[return-value]


def _as_load(target: ast.expr) -> ast.expr:
    """The target of an augmented assignment, as the expression that reads it."""
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(target.id, ast.Load()), target)
    if isinstance(target, ast.Subscript):
        return ast.copy_location(ast.Subscript(target.value, target.slice, ast.Load()), target)
    return target
