"""Short vectors in the serial copy of a C parallel loop (``SmallWorkCPlatform``).

Below ``PARALLEL_MIN_WORK`` points a point kernel runs a serial copy of its loops, whose row
loops are ``omp simd simdlen(n)`` with 32-byte vectors where that means what ``GCC ivdep``
means; the parallel copy keeps ``ivdep``. A row that holds a whole vector of the machine's
widest kind runs in whole vectors only, the last moved back to end at the row's end
(``whole_vectors``), where running an iteration again stores the same values
(``reruns_alike``). These tests check which loops qualify (an ``omp simd`` loop that
assigns a scalar declared outside it would be an undeclared reduction), and compare both
copies with ``numba.stencil`` on every row length around the vector widths, on both sides
of the threshold.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import dtypes
from stencilkit.build import machine
from stencilkit.ir import kernel as k
from stencilkit.lower.point import PARALLEL_MIN_WORK
from stencilkit.targets.c import reruns_alike, short_vector_lanes

from .requires import needs_c


def lap3d(a):
    return a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1] \
        - 6.0 * a[0, 0, 0]


def sum3(a):
    return a[0, 0, -1] + a[0, 0, 0] + a[0, 0, 1]


def clipped_gradient(a, b):
    # a branch in the row loop (masked lanes in a vector loop), two input dtypes
    d = a[0, 0, 1] - a[0, 0, -1]
    if d > b[0, 0, 0]:
        return b[0, 0, 0]
    return d


def _index(v: int) -> k.Constant:
    return k.Constant(np.int64(v), dtype=k.INDEX)


def _row_loop(body_for, element=dtypes.FLOAT64, step: int = 1, inputs: int = 0) -> k.Loop:
    """A row loop ``out[i] = <body>`` over a 1-D buffer, the body built by ``body_for``
    from (context, counter, buffer, *``inputs`` read-only buffers)."""
    ctx = k.KernelContext()
    buf = ctx.buffer("out", element, 1, unit_stride_last=True, restrict=True,
                     read_only=False, user=False)
    ins = [ctx.buffer(f"in{n}", element, 1, unit_stride_last=True, restrict=True,
                      read_only=True, user=False) for n in range(inputs)]
    i = ctx.symbol("i0", k.INDEX)
    return k.Loop(i, _index(0), buf.shape[0], _index(step), body_for(ctx, i, buf, *ins))


def _store(i, buf, value):
    return k.Store(buf, (k.Sym(i, dtype=k.INDEX),), value)


def _load(i, buf):
    return k.Load(buf, (k.Sym(i, dtype=k.INDEX),), dtype=buf.element_type)


def test_lanes_of_a_plain_row_loop():
    def body(ctx, i, buf):
        t = ctx.symbol("t", buf.element_type)
        return (k.Declare(t, _load(i, buf)),
                k.SetSym(t, k.Op("+", (k.Sym(t, dtype=t.dtype), _load(i, buf)), dtype=t.dtype)),
                _store(i, buf, k.Sym(t, dtype=t.dtype)))

    assert short_vector_lanes(_row_loop(body)) == 4
    assert short_vector_lanes(_row_loop(body, dtypes.FLOAT32)) == 8
    assert short_vector_lanes(_row_loop(body, np.dtype(np.int8))) == 32


def test_loops_that_keep_ivdep():
    def outer_scalar(ctx, i, buf):
        acc = ctx.symbol("acc", buf.element_type)  # declared before the loop: a reduction
        return (k.SetSym(acc, k.Op("+", (k.Sym(acc, dtype=acc.dtype), _load(i, buf)),
                                   dtype=acc.dtype)),
                _store(i, buf, k.Sym(acc, dtype=acc.dtype)))

    def pragma(ctx, i, buf):  # the error channel: an OpenMP construct in the loop
        return (k.Pragma(("omp atomic write",)), _store(i, buf, _load(i, buf)))

    def nested(ctx, i, buf):
        j = ctx.symbol("j", k.INDEX)
        return (k.Loop(j, _index(0), _index(3), _index(1), (_store(i, buf, _load(i, buf)),)),)

    def call(ctx, i, buf):
        return (k.Evaluate(k.CCall("sk_store_fence", (), dtype=k.STATUS)),
                _store(i, buf, _load(i, buf)))

    def plain(ctx, i, buf):
        return (_store(i, buf, _load(i, buf)),)

    for body in (outer_scalar, pragma, nested, call):
        assert short_vector_lanes(_row_loop(body)) is None, body.__name__
    assert short_vector_lanes(_row_loop(plain, dtypes.COMPLEX128)) is None
    assert short_vector_lanes(_row_loop(plain, step=2)) is None
    assert short_vector_lanes(_row_loop(plain)) == 4


def test_loops_that_run_in_whole_vectors():
    """Only a loop whose iterations store again what they stored, run once more after later
    ones, may overlap its last vector with the one before."""

    def from_input(ctx, i, buf, inp):
        return (_store(i, buf, _load(i, inp)),)

    def in_place(ctx, i, buf, inp):  # reads what it stores: a second run would see its own
        return (_store(i, buf, k.Op("+", (_load(i, buf), _load(i, inp)), dtype=buf.element_type)),)

    def one_element(ctx, i, buf, inp):  # every iteration stores out[0]: the last one wins
        return (k.Store(buf, (_index(0),), _load(i, inp)),)

    def fill(ctx, i, buf, inp):  # no load: a memset, left to the compiler
        return (_store(i, buf, k.Constant(np.float64(1.5), dtype=buf.element_type)),)

    assert reruns_alike(_row_loop(from_input, inputs=1))
    for body in (in_place, one_element, fill):
        assert not reruns_alike(_row_loop(body, inputs=1)), body.__name__


def test_the_serial_copy_runs_whole_vectors_of_the_widest_kind():
    """On the reference machine (AVX-512): whole vectors of 64 bytes (8 float64, 16
    float32) in the serial copy, the short 32-byte loop for rows shorter than that; where
    the widest vector is AVX2's, 32 bytes; the parallel copy keeps one ``ivdep`` loop."""
    needs_c()
    a64 = np.ones((6, 6, 6))

    def serial_and_parallel(func, a, profile):
        with machine.assumed(profile):
            src = sk.stencil(func, backend="c").generate(a)
        interior = src[src.index("/* --- interior --- */"):]
        parallel, serial = interior.split("\n    } else {\n", 1)
        return serial, parallel

    serial, parallel = serial_and_parallel(lap3d, a64, machine.REFERENCE)
    assert "if (a_shape_2_ - 1 >= 9) {" in serial  # rows [1, n - 1) holding 8 elements
    assert "sk_vec += 8" in serial and "#pragma omp simd simdlen(8)" in serial
    assert "a_shape_2_ - 1 - 8" in serial  # the last vector ends at the row's end
    assert "#pragma omp simd simdlen(4)" in serial  # shorter rows
    assert "sk_vec" not in parallel
    serial, _ = serial_and_parallel(sum3, a64.astype(np.float32), machine.REFERENCE)
    assert "sk_vec += 16" in serial and "#pragma omp simd simdlen(16)" in serial
    avx2 = dataclasses.replace(machine.REFERENCE, isa=("avx", "avx2", "fma"))
    serial, _ = serial_and_parallel(lap3d, a64, avx2)
    assert "sk_vec += 4" in serial and "simdlen(8)" not in serial


def test_only_the_serial_copy_has_short_vectors():
    needs_c()
    a64 = np.ones((6, 6, 6))
    src = sk.stencil(lap3d, backend="c").generate(a64)
    interior = src[src.index("/* --- interior --- */"):]
    parallel, serial = interior.split("\n    } else {\n", 1)  # the top-level branch
    assert "#pragma omp parallel" in parallel and "#pragma GCC ivdep" in parallel
    assert "omp simd" not in parallel
    assert "#pragma omp simd simdlen(4)" in serial and "ivdep" not in serial
    src32 = sk.stencil(sum3, backend="c").generate(a64.astype(np.float32))
    assert "#pragma omp simd simdlen(8)" in src32


@pytest.mark.parametrize("func", [lap3d, sum3, clipped_gradient])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_both_copies_against_numba(func, dtype, numba_stencil):
    """Row lengths 3 to 21 (every remainder of 4-, 8- and 16-lane vectors), each on a
    serial-copy shape and on a parallel one (just above ``PARALLEL_MIN_WORK``)."""
    needs_c()
    numba = pytest.importorskip("numba")
    rng = np.random.default_rng(7)
    st = sk.stencil(func, backend="c")
    kernel = numba_stencil(func)
    # called from Python, a numba.stencil compiles on every call; inside njit, once
    if func is clipped_gradient:
        ref = numba.njit(lambda a, b: kernel(a, b))
        ref_out = numba.njit(lambda a, b, out: kernel(a, b, out=out))
    else:
        ref = numba.njit(lambda a: kernel(a))
        ref_out = numba.njit(lambda a, out: kernel(a, out=out))
    for n in range(3, 22):
        # 3 planes: lap3d's interior needs one (2 left the serial copy nothing to compute)
        for planes in (3, -(-PARALLEL_MIN_WORK // (16 * n)) + 1):
            shape = (planes, 16, n)
            assert (planes * 16 * n >= PARALLEL_MIN_WORK) == (planes > 3)
            args = [(rng.random(shape) * 8 - 4).astype(dtype)]
            if func is clipped_gradient:
                args.append(rng.integers(-2, 3, shape).astype(np.float64))
            expected = ref(*args)
            np.testing.assert_array_equal(st(*args), expected)
            # with out=, the border keeps what was there (the bound call path)
            out, expected_out = np.full_like(expected, 99), np.full_like(expected, 99)
            ref_out(*args, expected_out)
            st(*args, out=out)
            np.testing.assert_array_equal(out, expected_out,
                                          err_msg=f"{func.__name__} {shape}")


def test_serial_copy_streams_only_where_it_can(monkeypatch):
    """The serial copy runs below ``PARALLEL_MIN_WORK`` points: with the default streaming
    threshold (far above it) its rows are the plain loop only; with a threshold below it
    (``STENCILKIT_STREAM_MIN_BYTES``) they stream too."""
    needs_c()
    a = np.ones((6, 6, 6))

    def copies(src: str) -> tuple[str, str]:
        interior = src[src.index("/* --- interior --- */"):]
        parallel, serial = interior.split("\n    } else {\n", 1)
        return parallel, serial

    monkeypatch.delenv("STENCILKIT_STREAM_MIN_BYTES", raising=False)
    parallel, serial = copies(sk.stencil(lap3d, backend="c").generate(a))
    assert "sk_stream_copy(" in parallel and "sk_stream_copy(" not in serial
    monkeypatch.setenv("STENCILKIT_STREAM_MIN_BYTES", "64")
    parallel, serial = copies(sk.stencil(lap3d, backend="c").generate(a))
    assert "sk_stream_copy(" in parallel and "sk_stream_copy(" in serial
