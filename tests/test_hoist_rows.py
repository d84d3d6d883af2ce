"""Row bases hoisted out of the innermost loops (lower/hoist_rows.py): what moves out and
what must stay (loop-variant symbols, index checks with effects, loads), where the bases are
declared (before the loop on the CPU, inside a GPU thread's loop), their reuse across sibling
loops, idempotence, verified IR, the generated C of lap3d and jacobi2d, and bit-identical
results of the golden corpus (and strided views) with and without the pass."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry
from stencilkit.compile import driver
from stencilkit.ir import kernel as k
from stencilkit.ir.core import walk
from stencilkit.ir.verify import verify_kernel
from stencilkit.lower.hoist_rows import Placement, hoist_row_bases

from .test_simplify import _run_corpus

F64 = np.dtype(np.float64)
I64 = k.INDEX

CTX = k.KernelContext()
A = CTX.buffer("a", F64, 2, unit_stride_last=True, restrict=True, read_only=True)
OUT = CTX.buffer("out", F64, 2, unit_stride_last=True, restrict=True, read_only=False)
N0, N1 = (CTX.symbol(n, I64) for n in ("n0", "n1"))
I0, I1 = CTX.symbol("i0", I64), CTX.symbol("i1", I64)
T = CTX.symbol("t", I64)
STATUS = CTX.symbol("sk_error", k.STATUS)


def ci(v: int) -> k.Constant:
    return k.Constant(np.int64(v), dtype=I64)


def s(sym: k.Symbol) -> k.Sym:
    return k.Sym(sym, dtype=sym.dtype)


def plus(a: k.Expr, b: k.Expr) -> k.Op:
    return k.Op("+", (a, b), dtype=I64)


def load(buf: k.Buffer, *idx: k.Expr) -> k.Load:
    return k.Load(buf, idx, dtype=F64)


def nest(*inner: k.Stmt, parallel: bool = False, before: tuple[k.Stmt, ...] = ()
         ) -> k.KernelFunction:
    """for i0: [before...] for i1: inner..."""
    par = k.Parallel() if parallel else None
    row = k.Loop(I1, ci(1), plus(s(N1), ci(-1)), ci(1), tuple(inner), parallel=par)
    outer = k.Loop(I0, ci(1), plus(s(N0), ci(-1)), ci(1), (*before, row), parallel=par)
    params = (A.base, *(x.symbol for x in A.strides if isinstance(x, k.Sym)),
              OUT.base, *(x.symbol for x in OUT.strides if isinstance(x, k.Sym)), N0, N1)
    return k.KernelFunction("sk_t", params, (outer,), (A, OUT), status=STATUS)


def jacobi_store() -> k.Store:
    """out[i0, i1] = a[i0 - 1, i1] + a[i0 + 1, i1] + a[i0, i1 + 1]"""
    total = k.Op("+", (k.Op("+", (load(A, plus(s(I0), ci(-1)), s(I1)),
                                  load(A, plus(s(I0), ci(1)), s(I1))), dtype=F64),
                       load(A, s(I0), plus(s(I1), ci(1)))), dtype=F64)
    return k.Store(OUT, (s(I0), s(I1)), total)


def declared(body: tuple[k.Stmt, ...]) -> list[str]:
    return [st.symbol.name for st in body if isinstance(st, k.Declare)]


def loads(kf: k.KernelFunction) -> list[k.Load]:
    return [n for st in kf.body for n in walk(st) if isinstance(n, k.Load)]


# ---------------------------------------------------------------- the pass on small kernels


def test_the_outer_counters_times_their_strides_move_before_the_row():
    kf = hoist_row_bases(nest(jacobi_store()))
    verify_kernel(kf)
    (outer,) = kf.body
    assert declared(outer.body) == ["a_row", "out_row"]
    a_row = outer.body[0]
    stride0 = A.strides[0]
    assert a_row.value == k.Op("*", (s(I0), stride0), dtype=I64)
    inner = outer.body[-1]
    assert isinstance(inner, k.Loop) and inner.counter == I1
    first = [ld.indices for ld in loads(kf)]
    row = k.Sym(a_row.symbol, dtype=I64)
    assert first == [(k.Op("-", (row, stride0), dtype=I64), s(I1)),
                     (k.Op("+", (row, stride0), dtype=I64), s(I1)),
                     (row, plus(s(I1), ci(1)))]
    assert all(ld.buffer.strides == (ci(1), ci(1)) and ld.buffer.base == A.base
               for ld in loads(kf))
    # nothing in the loop multiplies by a stride any more
    assert not any(isinstance(n, k.Op) and n.op == "*" for st in inner.body for n in walk(st))
    assert hoist_row_bases(kf) == kf  # idempotent


def test_a_gpu_thread_declares_its_row_bases_in_its_parallel_loop():
    kf = hoist_row_bases(nest(jacobi_store(), parallel=True), Placement.THREAD)
    verify_kernel(kf)
    (outer,) = kf.body
    assert declared(outer.body) == []  # the nest stays perfect: one grid
    inner = outer.body[0]
    assert declared(inner.body) == ["a_row"]
    # the store keeps its dimensions: the planner reads its unit-stride axis's counter
    assert (inner.body[-1].buffer, inner.body[-1].indices) == (OUT, (s(I0), s(I1)))
    # for a serial innermost loop on a GPU: before the loop
    kf = hoist_row_bases(nest(jacobi_store()), Placement.THREAD)
    assert declared(kf.body[0].body) == ["a_row"]
    # on the CPU, stores too, before the loop, parallel or not
    kf = hoist_row_bases(nest(jacobi_store(), parallel=True))
    assert declared(kf.body[0].body) == ["a_row", "out_row"]


def test_what_the_loop_assigns_or_checks_stays_in_it():
    # t is assigned in the row: a[t, i1] keeps its address; i0's part of out still moves
    assigned = nest(k.Declare(T, s(I1)), k.SetSym(T, plus(s(T), ci(1))),
                    k.Store(OUT, (s(I0), s(I1)), load(A, s(T), s(I1))))
    kf = hoist_row_bases(assigned)
    verify_kernel(kf)
    assert declared(kf.body[0].body) == ["out_row"]
    assert loads(kf)[0].buffer == A
    # an index check reports through the status: never computed before the loop runs
    checked = k.Op("checked_offset", (s(I0), ci(-1), ci(1)), dtype=I64)
    kf = hoist_row_bases(nest(k.Store(OUT, (s(I0), s(I1)), load(A, checked, s(I1)))))
    assert declared(kf.body[0].body) == ["out_row"]
    assert loads(kf)[0].indices == (checked, s(I1))
    # a load in an index (a map) stays
    idx = k.Load(CTX.buffer("m", I64, 1, unit_stride_last=True, restrict=True,
                            read_only=True), (s(I0),), dtype=I64)
    kf = hoist_row_bases(nest(k.Store(OUT, (s(I0), s(I1)), load(A, idx, s(I1)))))
    assert [ld.buffer for ld in loads(kf) if ld.buffer.base == A.base] == [A]


def test_sibling_loops_share_a_row_base_until_its_inputs_change():
    store = k.Store(OUT, (s(I0), s(I1)), k.Constant(np.float64(0.0), dtype=F64))
    row = k.Loop(I1, ci(0), s(N1), ci(1), (store,))
    stride0 = OUT.strides[0].symbol
    for between, names in (((), ["out_row"]),  # one base before the first loop, for both
                           ((k.SetSym(T, ci(2)),), ["out_row"]),  # not the base's input
                           ((k.SetSym(stride0, ci(2)),), ["out_row", "out_row2"])):
        outer = k.Loop(I0, ci(0), s(N0), ci(1), (k.Declare(T, ci(0)), row, *between, row))
        kf = k.KernelFunction("sk_t", (OUT.base, *(x.symbol for x in OUT.strides
                                                  if isinstance(x, k.Sym)), N0, N1),
                              (outer,), (OUT,), status=STATUS)
        got = hoist_row_bases(kf)
        verify_kernel(got)
        assert declared(got.body[0].body)[1:] == names
    # t, an input of out[t, i0]'s row base, assigned between the loops: a second base
    outer = k.Loop(I1, ci(0), s(N1), ci(1), (
        k.Declare(T, ci(0)),
        k.Loop(I0, ci(0), s(N0), ci(1), (k.Store(OUT, (s(T), s(I0)), store.value),)),
        k.SetSym(T, ci(1)),
        k.Loop(I0, ci(0), s(N0), ci(1), (k.Store(OUT, (s(T), s(I0)), store.value),))))
    kf = k.KernelFunction("sk_t", (OUT.base, *(x.symbol for x in OUT.strides
                                              if isinstance(x, k.Sym)), N0, N1),
                          (outer,), (OUT,), status=STATUS)
    got = hoist_row_bases(kf)
    verify_kernel(got)
    assert declared(got.body[0].body) == ["t", "out_row", "out_row2"]


# ---------------------------------------------------------------- generated code


def _interior(source: str) -> str:
    """The innermost loop of the interior (the plain one, as the small-work copy runs)."""
    start = source.index("/* --- interior --- */")
    return source[start:]


@pytest.mark.parametrize("name, shape", [("lap3d", (8, 8, 8)), ("jacobi2d", (8, 8))])
def test_lap3d_and_jacobi2d_read_like_the_hand_kernels(name, shape):
    from .golden import corpus

    source = sk.stencil(getattr(corpus, name)).generate(np.zeros(shape), backend="c")
    interior = _interior(source)
    assert "int64_t a_row = i0 * a_stride_0_" in interior
    assert "a_[a_row - a_stride_0_ + i" in interior and "out[out_row + i" in interior
    assert "(i0 - 1) * a_stride_0_" not in source
    for cuda_like in ("cuda", "opencl"):
        text = sk.stencil(getattr(corpus, name)).generate(np.zeros(shape), backend=cuda_like)
        assert "a_[a_row - a_stride_0_ + i" in text, cuda_like


# ---------------------------------------------------------------- bit-identical results


def _strided(backend: str) -> list[np.ndarray]:
    """lap3d and jacobi2d on views with negative and non-unit strides, and on a transpose."""
    from .golden import corpus

    rng = np.random.default_rng(11)
    base = rng.random((12, 14, 16))
    out = []
    for view in (base[::-1, ::2, 1:], base.transpose(2, 0, 1), base[2:9, ::-3, ::2]):
        out.append(sk.stencil(corpus.lap3d, backend=backend)(view))
    for view in (base[3, ::-1, :], base[:, 2, ::3].T):
        out.append(sk.stencil(corpus.jacobi2d, backend=backend)(view))
    return out


@pytest.mark.parametrize("target", ["c", "opencl", "cuda"])
def test_results_are_bit_identical_with_and_without_hoisting(target, monkeypatch):
    reason = registry.REGISTRY[target].probe()
    if reason:
        pytest.skip(f"backend {target}: {reason}")
    hoisted = _run_corpus(target) + _strided(target)
    # the "hoist_rows" stage of c, cuda and opencl calls lower.hoist_rows.hoist_row_bases
    monkeypatch.setattr("stencilkit.lower.hoist_rows.hoist_row_bases",
                        lambda kf, placement=Placement.OUTSIDE: kf)
    driver.forget_rendered()  # else the hoisted rendering is found by its front key
    try:
        plain = _run_corpus(target) + _strided(target)
    finally:  # and the unhoisted ones must not serve later tests (the goldens)
        driver.forget_rendered()
    assert len(hoisted) == len(plain) > 0
    for x, y in zip(hoisted, plain):
        assert x.tobytes() == y.tobytes()
    reference = _strided("numpy")
    for x, y in zip(hoisted[-len(reference):], reference):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=0)


def row_and_sk(row, sk):
    return row[-1, 0] * 1.0 + sk[1, 0] * 2.0


@pytest.mark.parametrize("backend", ["c", "opencl"])
def test_a_row_base_never_takes_a_name_the_platform_adds_later(backend):
    """An array named ``sk``: its row base is not ``sk_row``, the name of the C platform's
    streamed-row buffer (added after this pass), which would shadow it inside the row (the
    verifier refused the kernel: 'sk_row' used as int64, defined as float64*)."""
    from stencilkit.lower.hoist_rows import row_name

    if backend not in registry.available():
        pytest.skip(f"backend {backend} is not available here")
    assert row_name("sk_") == "usk_row" and row_name("a_") == "a_row"
    rng = np.random.default_rng(3)
    a, b = rng.random((40, 300)), rng.random((40, 300))
    expected = sk.stencil(row_and_sk, backend="numpy")(a, b)
    np.testing.assert_array_equal(sk.stencil(row_and_sk, backend=backend)(a, b), expected)
