"""Simplification of kernel IR: a pass ``KernelFunction -> KernelFunction`` that never
changes what the kernel computes, bit for bit.

Lowerings build their IR from templates (a border of width 0, an origin that is the
constant 0, a ``min`` of two equal bounds, a result variable initialized and then assigned),
which leaves code no one would write by hand. This pass removes it:

- constant folding: integer operators in the operand's type (not where the C result would
  overflow, which is undefined, nor ``/`` and ``%``, whose C and Python meanings differ);
  floating point only for ``neg`` and ``+ - *`` on normal (or zero) operands with a normal
  (or zero) finite result in the operand's precision: IEEE rounds those identically on every
  target (no contraction: ``-ffp-contract=off`` and ``--fmad=false`` are the defaults), and
  no subnormal meets a device that flushes them; conversions where exact; comparisons and
  logic; ``Select`` and ``Branch`` on a constant condition; loops that cannot run.
- algebraic identities on integers: ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``,
  ``x * 0`` (``x`` free of effects); on every type ``min(x, x)`` and ``max(x, x)`` (the
  helpers return an operand; the ``MathCall`` forms too), ``max(c1, min(x, c2))`` with
  ``c2 <= c1`` (and ``min`` of ``max`` likewise) is ``c1``, ``x && true``, ``x || false``;
  a ``Convert`` to the value's own type. Float ``x + 0.0`` stays: ``-0.0 + 0.0`` is ``+0.0``.
- index checks that cannot fail: ``wrap_index``/``checked_offset`` of a loop counter
  whose constant bounds keep it in range.
- dead temporaries: a declaration (and the assignments) of a local scalar that nothing
  reads, when its values have no effects; a declaration whose initial value is overwritten
  by the next statement takes that value (``double r = 0.0; r = a + b;`` becomes
  ``double r = a + b;``), and one without a value moves down to the first statement of its
  block that mentions it, when that statement assigns it.

Requires and ensures: kernel IR as a lowering produces it (see ``ir/kernel.py``; abstract
nodes allowed), verified by ``ir.verify``. The pass is idempotent.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .. import dtypes
from ..ir import kernel as k
from ..ir.core import Node, rewrite, walk

_BOOL = np.dtype(np.bool_)
_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "min": min, "max": max}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge}
_FLOAT_OPS: dict[str, Callable[[np.generic, np.generic], np.generic]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul}
# operators with an effect: they report through the kernel's status
_EFFECT_OPS = frozenset({"checked_offset", "wrap_index"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def simplify(kf: k.KernelFunction) -> k.KernelFunction:
    """``kf`` with constants folded, identities applied and dead temporaries removed."""
    body = _stmts(_bounded_indices(tuple(rewrite(s, _fold) for s in kf.body), {}))
    body = _drop_dead(body, kf)
    return kf if body == kf.body else dataclasses.replace(kf, body=body)


# ---------------------------------------------------------------- expressions


def _const(e: k.Expr) -> np.generic | None:
    return e.value if isinstance(e, k.Constant) else None


def _constant(value: object, t: np.dtype) -> k.Constant:
    return k.Constant(np.dtype(t).type(value), dtype=np.dtype(t))


def _is_int(t: np.dtype) -> bool:
    return np.issubdtype(t, np.integer)


def _fits(value: int, t: np.dtype) -> bool:
    info = np.iinfo(t)
    return info.min <= value <= info.max


def _normal_or_zero(x: Any) -> bool:
    if not np.isfinite(x):
        return False
    return x == 0 or abs(x) >= np.finfo(type(x)).tiny


def pure(e: k.Expr) -> bool:
    """``e`` has no effect: no call (ours, the user's, the language's), no checked index."""
    return not any(isinstance(n, (k.Call, k.CCall))
                   or isinstance(n, k.Op) and n.op in _EFFECT_OPS for n in walk(e))


def _fold(node: Node) -> Node | None:
    match node:
        case k.Op():
            return _fold_op(node)
        case k.Convert(value=v) if v.dtype == node.dtype:
            return v
        case k.Convert(value=k.Constant(value=c)):
            return _fold_convert(c, node.dtype)
        case k.Select(cond=k.Constant(value=c), then=a, orelse=b):
            return a if bool(c) else b
        case k.Select(then=a, orelse=b) if a == b and pure(node.cond):
            return a
        case k.MathCall(func="min" | "max" | "minimum" | "maximum", args=(a, b)) if (
                a == b and pure(a)):
            return a  # every implementation returns one of its equal operands
        case k.MathCall(func="min" | "max" as func, args=(a, b)) if _is_int(node.dtype):
            clamped = _clamped(func, a, b, node.dtype)
            if clamped is not None:
                return clamped
    match node:
        case k.MathCall(func="min" | "max" as func, args=(k.Constant(value=x),
                                                          k.Constant(value=y))) if (
                _is_int(node.dtype) and node.args[0].dtype == node.args[1].dtype == node.dtype):
            return _constant((min if func == "min" else max)(int(x), int(y)), node.dtype)
    return None


def _min_max(e: k.Expr) -> tuple[str, k.Expr, k.Expr] | None:
    if isinstance(e, k.MathCall) and e.func in ("min", "max") and len(e.args) == 2:
        return e.func, e.args[0], e.args[1]
    if isinstance(e, k.Op) and e.op in ("min", "max") and len(e.args) == 2:
        return e.op, e.args[0], e.args[1]
    return None


def _clamped(func: str, a: k.Expr, b: k.Expr, t: np.dtype) -> k.Expr | None:
    """``max(c1, min(x, c2))`` is ``c1`` when ``c2 <= c1`` (``min(x, c2)`` never exceeds
    it), and ``min(c1, max(x, c2))`` is ``c1`` when ``c2 >= c1``; integers, any operand
    order, ``x`` free of effects."""
    for outer, inner in ((a, b), (b, a)):
        c1 = _const(outer)
        found = _min_max(inner)
        if c1 is None or found is None or found[0] == func:
            continue
        _, x, y = found
        for value, other in ((x, y), (y, x)):
            c2 = _const(value)
            if c2 is None or not pure(other) or other.dtype != t:
                continue
            if (func == "max" and int(c2) <= int(c1)) or (func == "min" and int(c2) >= int(c1)):
                return _constant(int(c1), t)
    return None


def _fold_convert(c: np.generic, t: np.dtype) -> k.Expr | None:
    if dtypes.is_complex(np.dtype(type(c))) or dtypes.is_complex(t):
        return None
    if _is_int(np.dtype(type(c))) and _is_int(t):
        return _constant(int(c), t) if _fits(int(c), t) else None
    if t == _BOOL or np.dtype(type(c)) == _BOOL:
        return None  # C's truth of a float (NaN is true) vs NumPy's: left to the compiler
    if _is_int(np.dtype(type(c))) and np.issubdtype(t, np.floating):
        converted = t.type(c)
        return _constant(converted, t) if int(converted) == int(c) else None
    return None  # float to int (a guarded helper) and float to float (rounding) stay


def _fold_op(e: k.Op) -> k.Expr | None:
    args = e.args
    values = [_const(a) for a in args]
    t = e.dtype
    if all(v is not None for v in values):
        folded = _fold_constants(e.op, values, args, t)
        if folded is not None:
            return folded
    if len(args) != 2:
        if e.op == "!" and isinstance(args[0], k.Op) and args[0].op == "!":
            return args[0].args[0]
        return None
    a, b = args
    va, vb = values
    if e.op in ("min", "max") and a == b and pure(a):
        return a
    if e.op in ("min", "max") and _is_int(t):
        clamped = _clamped(e.op, a, b, t)
        if clamped is not None:
            return clamped
    if e.op == "&&":
        if vb is not None and bool(vb):
            return a
        if va is not None and bool(va):
            return b
        if va is not None and not bool(va):
            return a  # false && x: x is not evaluated
    if e.op == "||":
        if vb is not None and not bool(vb):
            return a
        if va is not None and not bool(va):
            return b
        if va is not None and bool(va):
            return a
    if not _is_int(t) or t == _BOOL:
        return None
    if e.op == "+":
        if vb is not None and int(vb) == 0:
            return a
        if va is not None and int(va) == 0:
            return b
    if e.op == "-" and vb is not None and int(vb) == 0:
        return a
    if e.op == "*":
        if vb is not None and int(vb) == 1:
            return a
        if va is not None and int(va) == 1:
            return b
        if (vb is not None and int(vb) == 0 and pure(a)) or (
                va is not None and int(va) == 0 and pure(b)):
            return _constant(0, t)
    # (x + c1) + c2 and (x - c1) + c2: one constant, as a hand kernel writes the offset
    if e.op in ("+", "-") and vb is not None and isinstance(a, k.Op) and a.op in ("+", "-") \
            and _const(a.args[1]) is not None:
        inner = int(cast(k.Constant, a.args[1]).value) * (1 if a.op == "+" else -1)
        total = inner + int(vb) * (1 if e.op == "+" else -1)
        if _fits(inner, t) and _fits(total, t) and _fits(-total, t) and t == k.INDEX:
            # int64 index arithmetic never wraps in a kernel: extents and offsets are far
            # from 2**63 (the entry points check extents against the strides' range)
            if total == 0:
                return a.args[0]
            op = "+" if total > 0 else "-"
            return k.Op(op, (a.args[0], _constant(abs(total), t)), dtype=t)
    return None


def _fold_constants(op: str, values: list, args: tuple[k.Expr, ...],
                    t: np.dtype) -> k.Expr | None:
    operand_t = args[0].dtype
    if op in _COMPARE and not dtypes.is_complex(operand_t):
        if np.issubdtype(operand_t, np.floating) and not all(np.isfinite(v) for v in values):
            return None
        return _constant(_COMPARE[op](values[0], values[1]), _BOOL)
    if op == "&&":
        return _constant(bool(values[0]) and bool(values[1]), _BOOL)
    if op == "||":
        return _constant(bool(values[0]) or bool(values[1]), _BOOL)
    if op == "!":
        return _constant(not bool(values[0]), _BOOL)
    if _is_int(t) and t != _BOOL and all(_is_int(a.dtype) for a in args):
        ints = [int(v) for v in values]
        if op == "neg":
            result = -ints[0]
        elif op in _INT_OPS and len(ints) == 2:
            result = _INT_OPS[op](ints[0], ints[1])
        else:
            return None
        return _constant(result, t) if _fits(result, t) else None
    if np.issubdtype(t, np.floating) and all(a.dtype == t for a in args):
        if op == "neg":
            return _constant(-values[0], t)
        if op in _FLOAT_OPS and len(values) == 2 and all(_normal_or_zero(v) for v in values):
            with np.errstate(all="ignore"):
                folded = _FLOAT_OPS[op](t.type(values[0]), t.type(values[1]))
            if _normal_or_zero(folded):
                return _constant(folded, t)
    return None


# ---------------------------------------------------------------- statements


def _stmts(body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
    out: list[k.Stmt] = []
    for s in body:
        out.extend(_stmt(s))
    return _merge_initializers(_sink_declarations(tuple(out)))


def _stmt(s: k.Stmt) -> tuple[k.Stmt, ...]:
    match s:
        case k.Branch(cond=k.Constant(value=c), then=then, orelse=orelse):
            taken = _stmts(then if bool(c) else orelse)
            return _scoped(taken, s)
        case k.Branch(then=then, orelse=orelse):
            return (dataclasses.replace(s, then=_stmts(then), orelse=_stmts(orelse)),)
        case k.Loop(start=k.Constant(value=lo), stop=k.Constant(value=hi),
                    step=k.Constant(value=st)) if (int(st) > 0 and int(lo) >= int(hi)) or (
                int(st) < 0 and int(lo) <= int(hi)):
            return ()  # it never runs (its counter's value after it is never read: the
            # lowerings declare counters in the loop or assign them before reading)
        case k.Loop(body=body):
            return (dataclasses.replace(s, body=_stmts(body)),)
        case k.WhileLoop(cond=k.Constant(value=c)) if not bool(c):
            return ()
        case k.WhileLoop(body=body) | k.Section(body=body) | k.Block(body=body) | \
                k.ParallelRegion(body=body):
            return (dataclasses.replace(s, body=_stmts(body)),)
        case k.StreamedRow(loop=loop):
            inner = _stmt(loop)
            if len(inner) == 1 and isinstance(inner[0], k.Loop):
                return (dataclasses.replace(s, loop=inner[0]),)
            return inner
    return (s,)


def _bounded_indices(body: tuple[k.Stmt, ...],
                     ranges: dict[str, tuple[int, int]]) -> tuple[k.Stmt, ...]:
    """Index checks that cannot fail, dropped: ``wrap_index(c, n)`` and
    ``checked_offset(c, lo, hi)`` of the counter ``c`` of an enclosing loop whose constant
    bounds keep it in range (``for i in range(3): v[i, 0]`` in a ParLoop kernel). The
    verifier's rule COUNTER_ASSIGNED guarantees the body does not move the counter."""
    def drop(node: Node) -> Node | None:
        match node:
            case k.Op(op="wrap_index", args=(k.Sym(symbol=c) as x, k.Constant(value=n))) \
                    if c.name in ranges:
                lo, hi = ranges[c.name]
                return x if 0 <= lo and hi < int(n) else None
            case k.Op(op="checked_offset", args=(k.Sym(symbol=c) as x, k.Constant(value=a),
                                                 k.Constant(value=b))) if c.name in ranges:
                lo, hi = ranges[c.name]
                return x if int(a) <= lo and hi <= int(b) else None
        return None

    out: list[k.Stmt] = []
    for s in body:
        match s:
            case k.Loop(counter=c, start=k.Constant(value=lo), stop=k.Constant(value=hi),
                        step=k.Constant(value=st), body=inner) if int(st) > 0 \
                    and int(lo) < int(hi):
                bounds = {**ranges, c.name: (int(lo), int(hi) - 1)}
                out.append(dataclasses.replace(s, body=_bounded_indices(inner, bounds)))
                continue
        if ranges:
            s = _map_bodies(s, lambda b: _bounded_indices(b, ranges))
            s = _rewrite_own(s, drop)
        else:
            s = _map_bodies(s, lambda b: _bounded_indices(b, ranges))
        out.append(s)
    return tuple(out)


def _rewrite_own(s: k.Stmt, fn: Callable[[Node], Node | None]) -> k.Stmt:
    """``s`` with ``fn`` applied to its own expressions (its nested statements are left:
    they were rewritten with their own ranges)."""
    changes: dict[str, Any] = {}
    new: object
    for f in dataclasses.fields(s):
        value = getattr(s, f.name)
        if isinstance(value, k.Expr):
            new = rewrite(value, fn)
        elif isinstance(value, tuple) and value and all(isinstance(v, k.Expr) for v in value):
            new = tuple(rewrite(v, fn) for v in value)
        else:
            continue
        if new != value:
            changes[f.name] = new
    return dataclasses.replace(s, **changes) if changes else s


def _scoped(body: tuple[k.Stmt, ...], where: k.Stmt) -> tuple[k.Stmt, ...]:
    """The statements of a branch taken for sure, in a block of their own where they
    declare something (their scope ends with them)."""
    if any(isinstance(s, (k.Declare, k.DeclareArray)) for s in body):
        return (k.Block(body, loc=where.loc, source=where.source),)
    return body


def _merge_initializers(body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
    out: list[k.Stmt] = []
    i = 0
    while i < len(body):
        s = body[i]
        nxt = body[i + 1] if i + 1 < len(body) else None
        if (isinstance(s, k.Declare) and isinstance(nxt, k.SetSym)
                and nxt.symbol.name == s.symbol.name and not s.symbol.pointer
                and (s.value is None or pure(s.value))
                and s.symbol.name not in _names(nxt.value)):
            out.append(k.Declare(s.symbol, nxt.value, loc=nxt.loc or s.loc,
                                 source=nxt.source or s.source))
            i += 2
            continue
        out.append(s)
        i += 1
    return tuple(out)


def _sink_declarations(body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
    """A declaration without a value moved to the first statement of its block that
    mentions the symbol, when that statement assigns it: ``double lap; ...; lap = x;``
    becomes ``...; double lap = x;`` (nothing between reads or writes it)."""
    out = list(body)
    i = 0
    while i < len(out):
        s = out[i]
        if isinstance(s, k.Declare) and s.value is None and not s.symbol.pointer:
            name = s.symbol.name
            for j in range(i + 1, len(out)):
                if name not in _mentions(out[j]):
                    continue
                nxt = out[j]
                if (isinstance(nxt, k.SetSym) and nxt.symbol.name == name
                        and name not in _names(nxt.value)):
                    out[j] = k.Declare(s.symbol, nxt.value, loc=nxt.loc or s.loc,
                                       source=nxt.source or s.source)
                    del out[i]
                    i -= 1
                break
        i += 1
    return tuple(out)


def _mentions(s: k.Stmt) -> set[str]:
    """Every name a statement reads, writes or declares."""
    out = _read_names((s,))
    for n in walk(s):
        if isinstance(n, (k.Declare, k.SetSym)):
            out.add(n.symbol.name)
    return out


def _names(node: Node) -> set[str]:
    out: set[str] = set()
    for n in walk(node):
        match n:
            case k.Sym(symbol=s):
                out.add(s.name)
            case k.Literal(text=text):
                out.update(_IDENT.findall(text))
    return out


def _drop_dead(body: tuple[k.Stmt, ...], kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
    """Without the local scalars nothing reads (repeated: removing one may free another)."""
    while True:
        read = _read_names(body)
        keep = {p.name for p in kf.params}
        if kf.status is not None:
            keep.add(kf.status.name)  # the checked-index helpers report through it
        dead = {s.symbol.name for n in body for s in walk(n)
                if isinstance(s, k.Declare) and not s.symbol.pointer
                and s.symbol.name not in read and s.symbol.name not in keep}
        if not dead:
            return body
        new = _without(body, dead)
        if new == body:
            return body
        body = new


def _read_names(body: tuple[k.Stmt, ...]) -> set[str]:
    """Names read anywhere: in expressions other than the left side of a ``SetSym``/
    ``Declare``, as loop counters, in pragmas' text."""
    read: set[str] = set()
    for s in body:
        for n in walk(s):
            match n:
                case k.Sym(symbol=sym):
                    read.add(sym.name)
                case k.Loop(counter=c):
                    read.add(c.name)
                case k.Literal(text=text):
                    read.update(_IDENT.findall(text))
                case k.Pragma(parts=parts):
                    for p in parts:
                        if isinstance(p, str):
                            read.update(_IDENT.findall(p))
                case k.Load(buffer=b) | k.Store(buffer=b) | k.Address(buffer=b) | \
                        k.AtomicUpdate(buffer=b) | k.DeclareArray(buffer=b):
                    read.add(b.base.name)
    return read


def _without(body: tuple[k.Stmt, ...], dead: set[str]) -> tuple[k.Stmt, ...]:
    def keep(s: k.Stmt) -> bool:
        match s:
            case k.Declare(symbol=sym, value=v) if sym.name in dead:
                return v is not None and not pure(v)
            case k.SetSym(symbol=sym, value=v) if sym.name in dead:
                return not pure(v)
        return True

    def visit(stmts: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        for s in stmts:
            if not keep(s):
                continue
            out.append(_map_bodies(s, visit))
        return tuple(out)

    result = visit(body)
    # a dead symbol still assigned by an impure value: keep its declaration (no removal)
    still = {s.symbol.name for n in result for s in walk(n)
             if isinstance(s, (k.SetSym, k.Declare)) and s.symbol.name in dead}
    return body if still else result


def _map_bodies(s: k.Stmt, fn: Callable[[tuple[k.Stmt, ...]], tuple[k.Stmt, ...]]) -> k.Stmt:
    match s:
        case k.Branch(then=then, orelse=orelse):
            return dataclasses.replace(s, then=fn(then), orelse=fn(orelse))
        case k.Loop(body=body) | k.WhileLoop(body=body) | k.Section(body=body) | \
                k.Block(body=body) | k.ParallelRegion(body=body):
            return dataclasses.replace(s, body=fn(body))
        case k.StreamedRow(loop=loop):
            return dataclasses.replace(s, loop=cast(k.Loop, _map_bodies(loop, fn)))
    return s
