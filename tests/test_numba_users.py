"""numba.stencil code as Numba users write it (contract.md section 1, issue 8), on every backend
against numba.stencil itself: values and dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import stencilkit as sk

rng = np.random.default_rng(88)
A2 = rng.random((9, 11))
A1 = rng.random(17)


def _same(kernel, args, backend, numba_stencil, **options):
    want = numba_stencil(kernel, **options)(*args)
    got = sk.stencil(kernel, backend=backend, **options)(*args)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    return got


# ------------------------------------------------------------------ constants bound to locals


def const_pair(a):
    t = 1
    u = -2
    return a[t, u] + a[0, t]


def const_1d(a):
    t = 2
    return a[t] - a[0]


def const_rebound(a):
    t = 1
    x = a[t, 0]
    t = -1
    return x + a[t, 0]


def const_in_loop(a):
    s = 0.0
    for i in range(3):
        t = 1
        s += a[0, t] * i
    return s


def const_in_branch(a):
    if a[0, 0] > 0.5:
        t = -1
        return a[t, 0]
    return a[0, 0]


@pytest.mark.parametrize("kernel, arg", [(const_pair, A2), (const_1d, A1), (const_rebound, A2),
                                         (const_in_loop, A2), (const_in_branch, A2)],
                         ids=lambda x: getattr(x, "__name__", ""))
def test_locals_bound_to_constants_are_constant_indices(kernel, arg, backend, numba_stencil):
    _same(kernel, (arg,), backend, numba_stencil)


def test_neighbourhood_from_local_constants(numba_stencil):
    st = sk.stencil(const_pair)
    st(A2)
    assert st.neighborhood == ((0, 1), (-2, 1))


def const_negated(a):
    t = 1
    return a[-t, 0]


def const_reassigned_in_loop(a):
    t = 1
    s = 0.0
    for i in range(2):
        s += a[t, 0]
        t = i
    return s


def test_expressions_of_constant_locals_need_a_neighbourhood(backend, numba_stencil):
    with pytest.raises(Exception, match="not constant"):  # NumbaValueError
        numba_stencil(const_negated)(A2)
    with pytest.raises(sk.StencilTypeError, match="neighborhood"):
        sk.stencil(const_negated, backend=backend)(A2)
    _same(const_negated, (A2,), backend, numba_stencil, neighborhood=((-1, 0), (0, 0)))


def test_a_local_that_changes_in_a_loop_is_not_constant(backend, numba_stencil):
    """Numba takes ``t`` for the constant 1 and reads a[0, 0] at run time: a neighbourhood
    that need not cover what is read. We ask for the neighbourhood instead."""
    with pytest.raises(sk.StencilTypeError, match="neighborhood"):
        sk.stencil(const_reassigned_in_loop, backend=backend)(A2)
    _same(const_reassigned_in_loop, (A2,), backend, numba_stencil,
          neighborhood=((0, 1), (0, 0)))


# ------------------------------------------------------------------ factories


def shifted_sum(a):  # a module-level def with the name the factory gives its kernel
    return a[0, -1] - 100.0


def make_scaled(w):
    def kernel(a):
        return w * (a[-1, 0] + a[1, 0])

    kernel.__name__ = "shifted_sum"
    kernel.__qualname__ = "shifted_sum"
    return kernel


def make_renamed(name):
    def inner(a):
        return a[0, 1] * 3.0

    inner.__name__ = inner.__qualname__ = name
    return inner


@pytest.mark.parametrize("w", [0.5, 2.0])
def test_factory_kernels_with_a_changed_name(w, backend, numba_stencil):
    kernel = make_scaled(w)
    got = _same(kernel, (A2,), backend, numba_stencil)
    np.testing.assert_array_equal(got[1:-1], w * (A2[:-2] + A2[2:]))


@pytest.mark.parametrize("name", ["renamed", "make_renamed", "<lambda>", "int", "x y"])
def test_factory_kernels_named_anything(name, backend, numba_stencil):
    _same(make_renamed(name), (A2,), backend, numba_stencil)


# ------------------------------------------------------------------ several kernels on a line

left, right = (lambda a: a[-1, 0]), (lambda a: a[1, 0])
lam_b, lam_a = (lambda b: b[0, 1] * 2.0), (lambda a: a[0, -1] + 1.0)
one = lambda a: a[0, 1]; two = lambda a: a[0, -1] * 2.0  # noqa: E702, E731
s_left, s_right = sk.stencil(lambda a: a[-1, 0]), sk.stencil(lambda a: a[1, 0] + a[0, 0])


def make_lambda(w): return lambda a: a[1, 1] * w  # noqa: E704 - a def and a kernel on a line


@pytest.mark.parametrize("kernel", [left, right, lam_b, lam_a, one, two],
                         ids=["left", "right", "lam_b", "lam_a", "one", "two"])
def test_several_kernels_on_one_line(kernel, backend, numba_stencil):
    _same(kernel, (A2,), backend, numba_stencil)


def test_several_decorated_kernels_on_one_line(numba_stencil):
    np.testing.assert_array_equal(s_left(A2), numba_stencil(lambda a: a[-1, 0])(A2))
    np.testing.assert_array_equal(s_right(A2), numba_stencil(lambda a: a[1, 0] + a[0, 0])(A2))


def test_indented_lambdas_on_one_line(backend, numba_stencil):
    if True:
        up, down = (lambda a: a[-1, 0] * 1.5), (lambda a: a[1, 0] * 0.5)
        pair = [sk.stencil(lambda a: a[0, 1], backend=backend),
                sk.stencil(lambda a: a[0, -1] - 1.0, backend=backend)]
    _same(up, (A2,), backend, numba_stencil)
    _same(down, (A2,), backend, numba_stencil)
    np.testing.assert_array_equal(pair[0](A2), numba_stencil(lambda a: a[0, 1])(A2))
    np.testing.assert_array_equal(pair[1](A2), numba_stencil(lambda a: a[0, -1] - 1.0)(A2))


def test_lambda_on_the_line_of_a_def(backend, numba_stencil):
    _same(make_lambda(3.0), (A2,), backend, numba_stencil)


# ------------------------------------------------------------------ standard_indexing, cval


def scaled_by(a, s, w):
    return a[0, 1] * s + w[1]


def test_standard_indexing_may_name_a_scalar(backend, numba_stencil):
    args = (A2, 2.5, np.array([1.0, 4.0, 9.0]))
    _same(scaled_by, args, backend, numba_stencil, standard_indexing=("s", "w"))
    _same(scaled_by, args, backend, numba_stencil, standard_indexing=("w", "s"))


def smooth(a):
    return 0.5 * (a[-1, 0] + a[1, 0])


def to_infinity(a):
    return math.inf if a[0, 1] > 0.5 else -np.inf


def to_nan(a):
    return np.nan if a[1, 0] > 0.5 else a[0, 0]


@pytest.mark.parametrize("cval", [math.inf, -math.inf, math.nan, np.float32(np.inf)],
                         ids=["inf", "-inf", "nan", "f32inf"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_non_finite_cval(cval, dtype, backend, numba_stencil):
    a = A2.astype(dtype)
    want = numba_stencil(smooth, cval=cval)(a)
    got = sk.stencil(smooth, backend=backend, cval=cval)(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # NaN equals NaN here
    out = np.zeros_like(want)
    sk.stencil(smooth, backend=backend, cval=cval)(a, out=out)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("kernel", [to_infinity, to_nan])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_non_finite_constants(kernel, dtype, backend, numba_stencil):
    _same(kernel, (A2.astype(dtype),), backend, numba_stencil, cval=np.nan)
