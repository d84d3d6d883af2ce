"""Differential tests: every backend against numba.stencil itself, values and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk

from . import kernels as K

rng = np.random.default_rng(1234)
F2 = rng.random((13, 17))
F3 = rng.random((7, 8, 9))
F1 = rng.random(40)
I2 = rng.integers(-20, 20, (11, 12)).astype(np.int32)
B2 = rng.random((9, 10)) > 0.5

# (kernel, args, options, exact): exact=False allows 4 ulp for libm differences
CASES = [
    (K.blur, (F2,), {}, True),
    (K.blur, (F2.astype(np.float32),), {}, True),
    (K.lap1d, (F1,), {}, True),
    (K.lap3d, (F3,), {}, True),
    (K.int_add, (I2,), {}, True),
    (K.int_add, (I2.astype(np.uint8),), {}, True),
    (K.int_add, (B2,), {}, True),
    (K.centre, (I2,), {}, True),
    (K.true_div, (I2,), {}, True),
    (K.floor_div_mod, (I2,), {}, True),
    (K.floor_div_mod, (F2 * 10 - 5,), {}, True),
    (K.float_scale, (F2.astype(np.float32),), {}, True),
    (K.float_int_scale, (F2.astype(np.float32),), {}, True),
    (K.two_arrays, (F2, rng.random((14, 18))), {}, True),
    (K.two_arrays, (I2, I2.astype(np.float32)), {}, True),
    (K.scalar_arg, (F2, 3.5), {}, True),
    (K.scalar_arg, (I2, 3), {}, True),
    (K.scalar_arg, (F2.astype(np.float32), np.float32(2.0)), {}, True),
    (K.local_vars, (F2,), {}, True),
    (K.conditional, (F2,), {}, True),
    (K.conditional_expr, (F2,), {}, True),
    (K.several_returns, (F2,), {}, True),
    (K.unify_int_float, (I2,), {}, True),
    (K.loop_sum, (F2,), {"neighborhood": ((-2, 2), (0, 0))}, True),
    (K.loop_explicit, (F1,), {"neighborhood": ((5, 10),)}, True),
    (K.math_funcs, (F2,), {}, False),
    (K.math_funcs, (F2.astype(np.float32),), {}, False),
    (K.numpy_funcs, (F2,), {}, False),
    (K.min_max, (F2,), {}, True),
    (K.min_max, (I2,), {}, True),
    (K.floor_int, (F2,), {}, True),
    (K.bool_result, (F2,), {}, True),
    (K.weighted, (F1, np.array([0.25, 0.5, 0.25])), {"standard_indexing": ("w",)}, True),
    (K.complex_kernel, (F2 + 1j * F2[::-1],), {}, True),
    (K.global_const, (F2,), {}, True),
    (K.while_loop, (F2,), {}, True),
    (K.power, (F2,), {}, False),
    (K.int_power, (I2,), {}, True),
    (K.asymmetric, (F2,), {}, True),
    (K.return_in_loop, (F2,), {"neighborhood": ((0, 2), (0, 0))}, True),
    (K.bit_ops, (I2,), {}, True),
    (K.not_kernel, (F2,), {}, True),
    (K.blur, (F2[::-1, ::2],), {}, True),                # negative and non-unit strides
    (K.blur, (np.asfortranarray(F2),), {}, True),
    (K.blur, (F2,), {"cval": -1.5}, True),
    (K.int_add, (I2,), {"cval": 1.9}, True),
    (K.blur, (F2,), {"neighborhood": ((-2, 2), (-1, 3))}, True),
    (K.blur, (F2[:2, :2],), {}, True),                  # smaller than the neighbourhood
    (K.dynamic_offset, (F2, 1), {"neighborhood": ((-1, 2), (0, 0))}, True),
]


def _ids():
    return [f"{i:02d}-{c[0].__name__}" for i, c in enumerate(CASES)]


def _compare(ours: np.ndarray, ref: np.ndarray, exact: bool, args=()) -> None:
    assert ours.dtype == ref.dtype
    assert ours.shape == ref.shape
    if exact or ref.dtype.kind not in "fc":
        np.testing.assert_array_equal(ours, ref)
    else:
        single = any(getattr(a, "dtype", None) == np.float32 for a in args)
        tol = 8 * np.finfo(np.float32 if single else ref.dtype).eps
        np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_against_numba(case, backend, numba_stencil):
    func, args, options, exact = case
    ref = numba_stencil(func, **options)(*args)
    st = sk.stencil(func, backend=backend, **options)
    ours = st(*args)
    _compare(ours, ref, exact, args)
    if "neighborhood" in options:
        assert st.neighborhood == options["neighborhood"]


@pytest.mark.parametrize("case", [c for c in CASES if "neighborhood" not in c[2]][:24],
                         ids=_ids()[:24])
def test_out_argument_against_numba(case, backend, numba_stencil):
    func, args, options, exact = case
    ref_st = numba_stencil(func, **options)
    expected_dtype = ref_st(*args).dtype
    ref = np.full(args[0].shape, 7, dtype=expected_dtype)
    ref_st(*args, out=ref)
    ours = np.full(args[0].shape, 7, dtype=expected_dtype)
    result = sk.stencil(func, backend=backend, **options)(*args, out=ours)
    assert result is ours
    _compare(ours, ref, exact, args)


def test_neighborhood_inference_matches_numba(numba_stencil):
    for func, args in [(K.blur, (F2,)), (K.asymmetric, (F2,)), (K.lap3d, (F3,)),
                       (K.centre, (I2,))]:
        ref = numba_stencil(func)
        ref(*args)
        st = sk.stencil(func)
        assert st.neighborhood is None
        st(*args)
        assert st.neighborhood == tuple(tuple(p) for p in ref.neighborhood)


def test_out_with_cval_fills_border(backend, numba_stencil):
    ref = np.full(F2.shape, 9.0)
    numba_stencil(K.blur, cval=3.0)(F2, out=ref)
    ours = np.full(F2.shape, 9.0)
    sk.stencil(K.blur, cval=3.0, backend=backend)(F2, out=ours)
    np.testing.assert_array_equal(ours, ref)
    assert ours[0, 0] == 3.0


def test_out_other_dtype_is_converted(backend, numba_stencil):
    ref = np.zeros(F2.shape, np.float32)
    numba_stencil(K.blur)(F2, out=ref)
    ours = np.zeros(F2.shape, np.float32)
    sk.stencil(K.blur, backend=backend)(F2, out=ours)
    np.testing.assert_array_equal(ours, ref)


def test_callable_from_numba_style_decorators(backend):
    @sk.stencil
    def a(x):
        return x[0, 1]

    @sk.stencil()
    def b(x):
        return x[0, 1]

    c = sk.stencil(K.centre, backend=backend)
    for st in (a, b, c):
        np.testing.assert_array_equal(st(I2)[:, :-1], I2[:, 1:])


# ------------------------------------------------------------------ error cases

def _k_nonconst(a, n):
    return a[0, n]


def _k_float_index(a):
    return a[0, 1.0]


def _k_int8_index(a):
    return a[0, np.int8(1)]


def _k_few_indices(a):
    return a[1]


def _k_many_indices(a):
    return a[1, 0, 0]


def _k_no_relative(a):
    return 1.0


def _k_assign_input(a):
    a[0, 0] = 3
    return a[0, 1]


def _k_out_param(a, out):
    return a[0, 1]


ERRORS = [
    ("neighborhood length", K.centre, (F2,), {"neighborhood": ((0, 1),)}),
    ("non-constant index", _k_nonconst, (F2, 1), {}),
    ("float index", _k_float_index, (F2,), {}),
    ("np.int8 index", _k_int8_index, (F2,), {}),
    ("too few indices", _k_few_indices, (F2,), {}),
    ("too many indices", _k_many_indices, (F2,), {}),
    ("no relative index", _k_no_relative, (F2,), {}),
    ("complex cval", K.centre, (I2,), {"cval": 1j}),
    ("string cval", K.centre, (I2,), {"cval": "x"}),
    ("smaller secondary", K.two_arrays, (F2, F2[:5]), {}),
    ("secondary of other ndim", K.two_arrays, (F2, F1), {}),
    ("assignment to input", _k_assign_input, (F2,), {}),
    ("standard_indexing unknown", K.weighted, (F1, F1), {"standard_indexing": ("q",)}),
    ("standard_indexing first", K.weighted, (F1, F1), {"standard_indexing": ("a",)}),
    ("scalar first argument", K.scalar_arg, (2.0, F2), {}),
]


@pytest.mark.parametrize("case", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_where_numba_errors(case, backend, numba_stencil):
    _, func, args, options = case
    # Numba raises TypingError (not a ValueError) for some of these; only that it fails matters
    with pytest.raises(Exception):  # noqa: B017
        numba_stencil(func, **options)(*args)
    with pytest.raises(sk.StencilError) as info:
        sk.stencil(func, backend=backend, **options)(*args)
    assert isinstance(info.value, ValueError)
    assert func.__name__ in str(info.value)


def test_argument_named_out_is_rejected():
    with pytest.raises(sk.StencilError, match="'out'"):
        sk.stencil(_k_out_param)(F2)


def test_unknown_option_and_mode():
    with pytest.raises(ValueError, match="unknown stencil option"):
        sk.stencil(K.centre, foo=1)
    with pytest.raises(ValueError, match="mode"):
        sk.stencil("periodic")  # border modes are tested in test_border_modes.py
