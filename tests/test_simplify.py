"""The simplification pass (lower/simplify.py): each rule on a small kernel, what it must
leave alone (effects, inexact float folds, -0.0), its idempotence, random integer expressions
evaluating equal before and after, and bit-identical results of the golden corpus with and
without it on every backend that runs it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stencilkit as sk
from stencilkit import registry
from stencilkit.compile import driver
from stencilkit.ir import kernel as k
from stencilkit.ir.verify import verify_kernel
from stencilkit.lower.simplify import simplify

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)
I64 = k.INDEX
I32 = np.dtype(np.int32)
BOOL = np.dtype(np.bool_)

CTX = k.KernelContext()
N = CTX.symbol("n", I64)
M = CTX.symbol("m", I64)
OUT = CTX.buffer("out", F64, 1, unit_stride_last=True, restrict=True, read_only=False)
IOUT = CTX.buffer("iout", I64, 1, unit_stride_last=True, restrict=True, read_only=False)
STATUS = CTX.symbol("sk_error", k.STATUS)
T = CTX.symbol("t", F64)
U = CTX.symbol("u", I64)


def ci(v: int, t: np.dtype = I64) -> k.Constant:
    return k.Constant(t.type(v), dtype=t)


def cf(v: float, t: np.dtype = F64) -> k.Constant:
    return k.Constant(t.type(v), dtype=t)


def s(sym: k.Symbol) -> k.Sym:
    return k.Sym(sym, dtype=sym.dtype)


def op(o: str, *args: k.Expr, t: np.dtype | None = None) -> k.Op:
    return k.Op(o, args, dtype=t if t is not None else args[0].dtype)


def kernel(*body: k.Stmt, error: bool = False) -> k.KernelFunction:
    params = (N, M, OUT.base, IOUT.base)
    return k.KernelFunction("sk_t", params, tuple(body), (OUT, IOUT), uses_error_flag=error,
                            status=STATUS)


def stored(e: k.Expr) -> k.Expr:
    """What ``simplify`` makes of ``e`` stored into element 0."""
    buf = OUT if np.issubdtype(e.dtype, np.floating) else IOUT
    out = simplify(kernel(k.Store(buf, (ci(0),), e), error=True))
    (store,) = out.body
    return store.value


# ---------------------------------------------------------------- folding


def test_integer_constants_fold_in_their_type():
    assert stored(op("*", op("+", ci(2), ci(3)), ci(7))) == ci(35)
    assert stored(op("neg", ci(5))) == ci(-5)
    assert stored(op("max", ci(2), ci(9))) == ci(9)
    assert stored(op("<", ci(2), ci(3), t=BOOL)) == k.Constant(np.bool_(True), dtype=BOOL)


def test_integer_folds_that_would_overflow_or_round_differently_stay():
    big = op("+", ci(2**62), ci(2**62))
    assert stored(big) == big  # C's signed overflow is undefined: left to the compiler
    small = op("*", ci(70000, I32), ci(70000, I32))
    assert stored(small) == small
    div = op("/", ci(-7), ci(2))
    assert stored(div) == div  # C truncates, Python floors


def test_float_constants_fold_only_when_exact_everywhere():
    assert stored(op("*", cf(0.25), cf(4.0))) == cf(1.0)
    assert stored(op("+", cf(0.1), cf(0.2))) == cf(np.float64(0.1) + np.float64(0.2))
    assert stored(op("+", cf(0.1, F32), cf(0.2, F32))) == cf(np.float32(0.1) + np.float32(0.2),
                                                              F32)
    tiny = op("*", cf(1e-300), cf(1e-10))  # a subnormal result: flushed on some devices
    assert stored(tiny) == tiny
    inf = op("*", cf(1e300), cf(1e300))
    assert stored(inf) == inf
    division = op("/", cf(1.0, F32), cf(3.0, F32))  # OpenCL's float division is not exact
    assert stored(division) == division


def test_identities_on_integers():
    n = s(N)
    assert stored(op("+", n, ci(0))) == n
    assert stored(op("+", ci(0), n)) == n
    assert stored(op("-", n, ci(0))) == n
    assert stored(op("*", n, ci(1))) == n
    assert stored(op("*", ci(1), n)) == n
    assert stored(op("*", n, ci(0))) == ci(0)
    assert stored(op("min", n, n)) == n
    assert stored(op("max", n, n)) == n
    assert stored(op("-", op("+", n, ci(1)), ci(1))) == n
    assert stored(op("+", op("-", n, ci(3)), ci(1))) == op("-", n, ci(2))


def test_float_identities_that_are_not_exact_stay():
    t = k.Load(OUT, (ci(1),), dtype=F64)
    plus_zero = op("+", t, cf(0.0))  # -0.0 + 0.0 is +0.0
    assert stored(plus_zero) == plus_zero
    times_zero = op("*", t, cf(0.0))  # inf * 0 is NaN, -1 * 0 is -0.0
    assert stored(times_zero) == times_zero


def test_effects_are_kept():
    checked = op("checked_offset", s(N), ci(0), s(M))
    assert stored(op("*", checked, ci(0))) == op("*", checked, ci(0))
    assert stored(op("min", checked, checked)) == op("min", checked, checked)


def test_conversions_selects_and_logic():
    assert stored(k.Convert(s(N), dtype=I64)) == s(N)
    assert stored(k.Convert(ci(3), dtype=F64)) == cf(3.0)
    assert stored(k.Convert(ci(2**53 + 1), dtype=F64)) == k.Convert(ci(2**53 + 1), dtype=F64)
    cond = op("<", s(N), s(M), t=BOOL)
    true = k.Constant(np.bool_(True), dtype=BOOL)
    assert stored(k.Select(true, s(N), s(M), dtype=I64)) == s(N)
    assert stored(k.Select(cond, s(N), s(N), dtype=I64)) == s(N)
    assert stored(k.Select(op("&&", cond, true, t=BOOL), s(N), s(M), dtype=I64)) == \
        k.Select(cond, s(N), s(M), dtype=I64)


# ---------------------------------------------------------------- statements


def test_a_branch_on_a_constant_keeps_the_taken_side():
    false = k.Constant(np.bool_(False), dtype=BOOL)
    store1 = k.Store(IOUT, (ci(0),), ci(1))
    store2 = k.Store(IOUT, (ci(0),), ci(2))
    assert simplify(kernel(k.Branch(op("<", ci(1), ci(0), t=BOOL), (store1,), (store2,)))).body \
        == (store2,)
    assert simplify(kernel(k.Branch(false, (store1,)))).body == ()
    # declarations of the taken side keep a scope of their own
    out = simplify(kernel(k.Branch(op("==", ci(0), ci(0), t=BOOL), (k.Declare(U, s(N)),
                                   k.Store(IOUT, (ci(0),), s(U))))))
    assert isinstance(out.body[0], k.Block)


def test_loops_that_cannot_run_go():
    i = CTX.symbol("i", I64)
    loop = k.Loop(i, ci(4), op("+", ci(2), ci(2)), ci(1), (k.Store(IOUT, (s(i),), ci(0)),))
    assert simplify(kernel(loop)).body == ()
    back = k.Loop(i, ci(0), ci(0), ci(-1), (k.Store(IOUT, (s(i),), ci(0)),))
    assert simplify(kernel(back)).body == ()


def test_dead_temporaries_go_and_initializers_merge():
    dead = k.Declare(T, cf(1.0))
    store = k.Store(OUT, (ci(0),), cf(2.0))
    assert simplify(kernel(dead, k.SetSym(T, cf(3.0)), store)).body == (store,)
    merged = simplify(kernel(k.Declare(T, cf(0.0)),
                             k.SetSym(T, k.Load(OUT, (ci(1),), dtype=F64), source="x.py:1"),
                             k.Store(OUT, (ci(0),), s(T)))).body
    assert merged[0] == k.Declare(T, k.Load(OUT, (ci(1),), dtype=F64))
    assert merged[0].source == "x.py:1"
    # an initializer read by the assignment stays
    kept = (k.Declare(T, cf(1.0)), k.SetSym(T, op("+", s(T), cf(1.0))),
            k.Store(OUT, (ci(0),), s(T)))
    assert simplify(kernel(*kept)).body == kept


def test_a_dead_temporary_with_an_effect_stays():
    call = k.Call("sk_other", (s(N),), dtype=I64)
    body = (k.Declare(U, call), k.Store(OUT, (ci(0),), cf(1.0)))
    assert simplify(kernel(*body)).body == body


def test_simplify_is_idempotent_and_keeps_the_ir_valid():
    i = CTX.symbol("i", I64)
    body = (k.Declare(T, cf(0.0)),
            k.Loop(i, op("+", ci(0), ci(1)), op("-", s(N), ci(0)), ci(1), (
                k.SetSym(T, op("*", k.Load(OUT, (op("-", op("+", s(i), ci(1)), ci(1)),),
                                           dtype=F64), cf(1.0))),
                k.Store(OUT, (s(i),), s(T)))),
            k.Store(IOUT, (ci(0),), op("max", s(M), s(M))))
    once = simplify(kernel(*body))
    verify_kernel(once)
    assert simplify(once) == once
    assert once != kernel(*body)


# ---------------------------------------------------------------- random integer expressions


def _expressions():
    leaves = st.one_of(st.sampled_from([s(N), s(M)]),
                       st.integers(-4, 4).map(ci))

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from(["+", "-", "*", "min", "max"]), children, children)
            .map(lambda t: op(t[0], t[1], t[2])),
            children.map(lambda c: op("neg", c)),
            st.tuples(children, children, children).map(
                lambda t: k.Select(op("<", t[0], t[1], t=BOOL), t[1], t[2], dtype=I64)))
    return st.recursive(leaves, extend, max_leaves=12)


def evaluate(e: k.Expr, env: dict[str, int]) -> int:
    match e:
        case k.Constant(value=v):
            return int(v)
        case k.Sym(symbol=sym):
            return env[sym.name]
        case k.Select(cond=c, then=a, orelse=b):
            return evaluate(a, env) if evaluate(c, env) else evaluate(b, env)
        case k.Op(op=o, args=args):
            vals = [evaluate(a, env) for a in args]
            return {"+": lambda: vals[0] + vals[1], "-": lambda: vals[0] - vals[1],
                    "*": lambda: vals[0] * vals[1], "min": lambda: min(vals),
                    "max": lambda: max(vals), "neg": lambda: -vals[0],
                    "<": lambda: int(vals[0] < vals[1])}[o]()
    raise AssertionError(e)


@settings(max_examples=150, deadline=None)
@given(_expressions(), st.integers(-50, 50), st.integers(-50, 50))
def test_simplified_integer_expressions_evaluate_equal(e, n, m):
    env = {N.name: n, M.name: m}
    after = stored(e)
    assert evaluate(after, env) == evaluate(e, env)
    assert stored(after) == after  # idempotent


# ---------------------------------------------------------------- bit-identical results


def _run_corpus(backend: str) -> list[np.ndarray]:
    """The corpus' point kernels, computations and ParLoop on fixed random data."""
    from .golden import corpus

    rng = np.random.default_rng(7)
    out = []
    for func, shape, mode in ((corpus.lap3d, (9, 10, 11), "constant"),
                              (corpus.blur_wrap, (9, 10), "wrap")):
        a = rng.random(shape)
        out.append(sk.stencil(func_or_mode=mode, backend=backend)(func)(a))
    fields = [rng.random((6, 7, 8)) + 1.0 for _ in range(4)]
    hd = sk.gtscript.stencil(backend=backend, definition=corpus.hdiff)
    res = np.zeros_like(fields[0])
    hd(fields[0], res, fields[1], origin=(2, 2, 0), domain=(2, 3, 8))
    out.append(res)
    a, b, c, d = (f.copy() for f in fields)
    b += 4.0
    sk.gtscript.stencil(backend=backend, definition=corpus.tridiagonal)(a, b, c, d)
    out += [c, d]
    cells, nodes = sk.Set(3), sk.Set(5)
    c2n = sk.Map(cells, nodes, 3, np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4]]))
    area = sk.Dat(cells, data=rng.random(3))
    values = sk.Dat(nodes, dim=2, data=rng.random((5, 2)))
    sk.par_loop(corpus.spread, cells, area(sk.READ), values(sk.INC, c2n), backend=backend)
    out.append(values.data.copy())
    return out


@pytest.mark.parametrize("target", ["c", "opencl", "cuda"])
def test_the_corpus_computes_bit_identical_results_with_and_without_simplify(target,
                                                                             monkeypatch):
    reason = registry.REGISTRY[target].probe()
    if reason:
        pytest.skip(f"backend {target}: {reason}")
    simplified = _run_corpus(target)
    # the "simplify" stage of c, cuda and opencl calls lower.simplify.simplify
    monkeypatch.setattr("stencilkit.lower.simplify.simplify", lambda kf: kf)
    driver.forget_rendered()  # else the simplified rendering is found by its front key
    try:
        plain = _run_corpus(target)
    finally:  # and the plain ones must not serve later tests (the goldens)
        driver.forget_rendered()
    assert len(simplified) == len(plain) > 0
    for x, y in zip(simplified, plain):
        assert x.tobytes() == y.tobytes()


def test_the_corpus_is_simplified_at_all():
    from .golden import corpus

    generated = sk.stencil(corpus.lap3d).generate(np.zeros((5, 5, 5)), backend="c")
    assert "double sk_result = 0.0;" not in generated  # the initializer merged
    assert "double sk_result = a_[" in generated


def test_a_declaration_without_value_moves_to_its_first_assignment():
    other = k.Store(OUT, (ci(1),), cf(1.0))
    first = k.SetSym(T, k.Load(OUT, (ci(2),), dtype=F64), source="x.py:2")
    use = k.Store(OUT, (ci(0),), s(T))
    out = simplify(kernel(k.Declare(T, None), other, first, use)).body
    assert out == (other, k.Declare(T, k.Load(OUT, (ci(2),), dtype=F64)), use)
    assert out[1].source == "x.py:2"
    # not past a statement that mentions it, nor into a branch
    branch = k.Branch(op("<", s(N), s(M), t=BOOL), (first,))
    kept = (k.Declare(T, None), branch, use)
    assert simplify(kernel(*kept)).body == kept


def test_index_checks_that_cannot_fail_go():
    i = CTX.symbol("i", I64)

    def loop(stop: int, index: k.Expr) -> k.Loop:
        return k.Loop(i, ci(0), ci(stop), ci(1), (k.Store(IOUT, (index,), ci(1)),))

    wrap = op("wrap_index", s(i), ci(3))
    (inside,) = simplify(kernel(loop(3, wrap), error=True)).body
    assert inside.body[0].indices == (s(i),)
    (beyond,) = simplify(kernel(loop(4, wrap), error=True)).body  # i = 3 wraps to... 3 >= 3
    assert beyond.body[0].indices == (wrap,)
    checked = op("checked_offset", s(i), ci(0), ci(2))
    (kept,) = simplify(kernel(loop(4, checked), error=True)).body
    assert kept.body[0].indices == (checked,)
    (gone,) = simplify(kernel(loop(3, checked), error=True)).body
    assert gone.body[0].indices == (s(i),)
    outside = simplify(kernel(k.Store(IOUT, (wrap,), ci(1)), error=True)).body
    assert outside[0].indices == (wrap,)  # no loop around: i is not known


def test_a_clamp_that_cannot_pass_its_bound_is_the_bound():
    n = s(N)

    def mc(f, a, b):
        return k.MathCall(f, (a, b), dtype=I64)
    assert stored(mc("max", ci(0), mc("min", n, ci(0)))) == ci(0)
    assert stored(mc("max", mc("min", ci(-2), n), ci(0))) == ci(0)
    assert stored(op("min", ci(5), op("max", n, ci(7)))) == ci(5)
    kept = mc("max", ci(0), mc("min", n, ci(1)))  # min(n, 1) may exceed 0
    assert stored(kept) == kept
    checked = op("checked_offset", n, ci(0), s(M))
    kept = mc("max", ci(0), mc("min", checked, ci(0)))  # the check reports: it stays
    assert stored(kept) == kept
