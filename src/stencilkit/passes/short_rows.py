"""Short rows of a point kernel: the last two loops of the interior as one run over the
flattened plane.

Requires: the body of a constant-mode point kernel's interior (its locals, statements and the
store of the result to ``out`` at the centre), the loop counters, the border, the first
array and the buffers the body reads (unit last stride, every index a counter plus a
constant). Ensures: ``flattened_rows`` gives the statements that replace the loops over the
last two dimensions when every buffer's second-to-last stride equals the row length ``n``
(no padding between rows) and ``n`` is at most ``SHORT_ROW``: the rows are computed
``ROWS`` at a time as one loop over ``t`` (the flattened index ``row * n + column``, from the
first interior element of the first row to the last of the last row) into a local buffer,
whose interior columns are then copied to ``out``. The border columns between the rows are
computed too and thrown away; their reads stay inside the arrays (a read at column ``c``
with offsets ``(dr, dc)`` lands in row ``r + dr`` or a neighbouring row that is itself read
by some interior point), and ``out``'s border is never written.

Why: with rows of 14 elements (a 16^3 array), the vectorized row loop runs three vector
iterations and a scalar tail, and its set-up costs as much as its work; one run of 222
elements pays it once per 16 rows. The copy is one load and one store per element, against
the body's seven loads for a Laplacian.

Only bodies that cannot fail or loop where they are evaluated are flattened: no loops, no
status (run-time offsets, absolute indexing), no integer division, remainder, power or shift,
no float-to-integer conversion (undefined in C out of range): a thrown-away column computes
on real neighbouring values, which must not change the status or run forever.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..ir import kernel as k
from ..ir.core import Node, rewrite, walk

# Rows of at most this many elements are flattened; longer rows vectorize well on their own
# (at 64 elements the copy costs more than the set-up it saves).
SHORT_ROW = 32
# Rows per run: the local buffer holds ROWS * SHORT_ROW elements (4 KiB of float64).
ROWS = 16

_UNSAFE_OPS = frozenset({"floordiv", "mod", "powi", "shl", "shr", "checked_offset",
                         "wrap_index"})


def flattenable(body: tuple[k.Stmt, ...], counters: tuple[k.Symbol, ...]) -> bool:
    """Whether ``body`` may run at the thrown-away border columns (module docstring): only
    declarations, assignments, branches and stores of expressions that cannot fail, with
    every array index a counter (of its own dimension) plus a constant."""
    for s in body:
        for n in walk(s):
            match n:
                case k.Loop() | k.WhileLoop() | k.SetError() | k.DeclareArray() | k.Address() \
                        | k.AtomicUpdate() | k.CCall():
                    return False
                case k.Op(op=op) if op in _UNSAFE_OPS:
                    return False
                case k.Op(op="/", args=args) if not all(dtypes.is_float(a.dtype) or
                                                        dtypes.is_complex(a.dtype) for a in args):
                    return False
                case k.Convert(value=v) if dtypes.is_int(n.dtype) and \
                        not dtypes.is_intlike(v.dtype):
                    return False
                case k.Load(indices=idx) | k.Store(indices=idx):
                    if len(idx) != len(counters) or not all(
                            _counter_plus_constant(x, c) for x, c in zip(idx, counters)):
                        return False
    return True


def flattened_rows(body: tuple[k.Stmt, ...], ctx: k.KernelContext, counters: tuple[k.Symbol, ...],
                   border: tuple[tuple[int, int], ...], first: k.Buffer, out: k.Buffer,
                   buffers: tuple[k.Buffer, ...], rows_loop: k.Loop) -> k.Stmt:
    """``rows_loop`` (the loop over the second-to-last dimension, the row loop inside it)
    behind a run-time test, with the flattened run (module docstring) where it holds."""
    nd = len(counters)
    r, c = nd - 2, nd - 1
    n = first.shape[c]
    (lo_r, hi_r), (lo_c, hi_c) = border[r], border[c]
    row_start, row_stop = _index(-lo_r), k.Op("-", (first.shape[r], _index(hi_r)), dtype=k.INDEX)
    col_start, col_stop = _index(-lo_c), k.Op("-", (n, _index(hi_c)), dtype=k.INDEX)
    t_out = out.element_type
    base_pointer = ctx.symbol("sk_plane", t_out, pointer=True)
    plane = k.Buffer(base_pointer.name, t_out, base_pointer, (_index(ROWS * SHORT_ROW),),
                     (_index(1),))
    r0, r1, base = (ctx.symbol(name, k.INDEX) for name in ("sk_r0", "sk_r1", "sk_t0"))
    t, rr, cc = (ctx.symbol(name, k.INDEX) for name in ("t", "sk_r", "sk_c"))
    s_r0, s_r1, s_base = (k.Sym(x, dtype=k.INDEX) for x in (r0, r1, base))
    s_t, s_rr, s_cc = (k.Sym(x, dtype=k.INDEX) for x in (t, rr, cc))
    row_counter, col_counter = k.Sym(counters[r], dtype=k.INDEX), k.Sym(counters[c], dtype=k.INDEX)

    def flat(node: Node) -> Node | None:
        if node == row_counter:
            return _index(0)
        if node == col_counter:
            return s_t
        if isinstance(node, k.Store) and node.buffer == out:
            return k.Store(plane, (k.Op("-", (s_t, s_base), dtype=k.INDEX),), node.value)
        return None

    run_stop = k.Op("+", (k.Op("*", (k.Op("-", (s_r1, _index(1)), dtype=k.INDEX), n),
                                dtype=k.INDEX), col_stop), dtype=k.INDEX)
    compute = k.Loop(t, s_base, run_stop, _index(1), tuple(rewrite(s, flat) for s in body),
                     vectorize=True)
    centre = [k.Sym(x, dtype=k.INDEX) for x in counters]
    centre[r], centre[c] = s_rr, s_cc
    offset = k.Op("-", (k.Op("+", (k.Op("*", (k.Op("-", (s_rr, s_r0), dtype=k.INDEX), n),
                                         dtype=k.INDEX), s_cc), dtype=k.INDEX), col_start),
                  dtype=k.INDEX)
    copy = k.Loop(rr, s_r0, s_r1, _index(1), (
        k.Loop(cc, col_start, col_stop, _index(1), (
            k.Store(out, tuple(centre), k.Load(plane, (offset,), dtype=t_out)),),
            vectorize=True),))
    run = k.Loop(r0, row_start, row_stop, _index(ROWS), (
        k.Declare(r1, k.MathCall("min", (k.Op("+", (s_r0, _index(ROWS)), dtype=k.INDEX),
                                         row_stop), dtype=k.INDEX)),
        k.Declare(base, k.Op("+", (k.Op("*", (s_r0, n), dtype=k.INDEX), col_start),
                             dtype=k.INDEX)),
        compute, copy))
    cond: k.Expr = k.Op("&&", (k.Op("<=", (n, _index(SHORT_ROW)), dtype=dtypes.BOOL),
                               k.Op("<", (col_start, col_stop), dtype=dtypes.BOOL)),
                        dtype=dtypes.BOOL)
    for b in sorted({b.name: b for b in (*buffers, out)}.values(), key=lambda b: b.name):
        cond = k.Op("&&", (cond, k.Op("==", (b.strides[r], n), dtype=dtypes.BOOL)),
                    dtype=dtypes.BOOL)
    return k.Branch(cond, (k.DeclareArray(plane, plane.shape[0]), run), (rows_loop,))


def _counter_plus_constant(e: k.Expr, counter: k.Symbol) -> bool:
    if isinstance(e, k.Sym):
        return e.symbol == counter
    return isinstance(e, k.Op) and e.op in ("+", "-") and len(e.args) == 2 and \
        isinstance(e.args[0], k.Sym) and e.args[0].symbol == counter and \
        isinstance(e.args[1], k.Constant)


def _index(v: int) -> k.Constant:
    return k.Constant(np.int64(v), dtype=k.INDEX)
