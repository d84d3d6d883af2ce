"""numba.stencil constructs from third-party code (issue 28), on every backend against Numba
itself: casts with Numba's type objects, arrays captured from the closure or globals,
tuple comparisons, np.signbit, and np.array([...]) of window values with its reductions."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk

numba = pytest.importorskip("numba")
nb = numba

rng = np.random.default_rng(28)
A = rng.random((9, 10))
NANS = A.copy()
NANS[rng.random(A.shape) < 0.3] = np.nan
NANS[2, 3] = -0.0
SIGNS = rng.choice([-1.5, -0.0, 0.0, 2.0, np.nan, -np.nan, np.inf, -np.inf], size=(7, 8))
INTS = rng.integers(-50, 50, size=(8, 9)).astype(np.int32)
F32 = NANS.astype(np.float32)


def _numba_result(kernel, args, **options):
    """numba.stencil's result, called from @njit code (where Numba compiles np.array)."""
    st = numba.stencil(kernel, **options)
    call = numba.njit(lambda a: st(a)) if len(args) == 1 else numba.njit(lambda a, b: st(a, b))
    return call(*args)


def _same(kernel, args, backend, *, njit_reference=False, **options):
    want = (_numba_result(kernel, args, **options) if njit_reference
            else numba.stencil(kernel, **options)(*args))
    got = sk.stencil(kernel, backend=backend, **options)(*args)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # signs of zeros and NaNs too, where the reference is a float
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    return got


# ------------------------------------------------------------------ Numba's type objects


def cast_numba_float32(a):
    return numba.float32(a[0, 0]) * numba.float32(3.0) + a[0, 1]


def cast_nb_int64(a):
    return nb.int64(a[0, 0] * 100.0) + nb.types.int64(a[1, 0] * 10.0)


def cast_types_float64(a):
    return numba.types.float64(a[0, 0]) / numba.float32(7.0)


def cast_to_float32_result(a):
    return numba.float32(a[-1, 0] + a[1, 0])


def cast_intp_and_bool(a):
    return numba.intp(a[0, 0] * 10.0) + numba.boolean(a[0, 1] > 0.5)


@pytest.mark.parametrize("kernel", [cast_numba_float32, cast_nb_int64, cast_types_float64,
                                    cast_to_float32_result, cast_intp_and_bool])
def test_numba_type_casts(kernel, backend):
    _same(kernel, (A,), backend)


def test_numba_type_cast_of_a_constant_is_a_typed_constant(backend):
    _same(lambda a: a[0, 0] + numba.float32(0.1), (A.astype(np.float32),), backend)


def test_numba_type_casts_need_no_numba_import_of_ours():
    """The type object is read by its name: stencilkit itself never imports numba for it."""
    from stencilkit.frontend import functions

    assert functions.cast_target(numba.float32) == np.float32
    assert functions.cast_target(numba.types.complex128) == np.complex128
    assert functions.cast_target(numba.types.NPDatetime("ns")) is None
    assert functions.cast_target(len) is None


# ------------------------------------------------------------------ captured arrays

COEFFS = np.array([0.25, 0.5, 0.25])
WEIGHTS = rng.random((3, 3))
TABLE_INT = np.array([3, -1, 4, 1, -5], dtype=np.int16)


def captured_constant_indices(a):
    return COEFFS[0] * a[-1, 0] + COEFFS[1] * a[0, 0] + COEFFS[2] * a[1, 0]


def captured_negative_index(a):
    return COEFFS[-1] * a[0, 1] + TABLE_INT[-2]


def captured_loop(a):
    s = 0.0
    for i in range(3):
        s += COEFFS[i] * a[i - 1, 0]
    return s


def captured_2d_loop(a):
    s = 0.0
    for i in range(-1, 2):
        for j in range(-1, 2):
            s += WEIGHTS[i + 1, j + 1] * a[i, j]
    return s


def captured_int_table_by_value(a):
    k = 0
    if a[0, 0] > 0.5:
        k = 3
    return TABLE_INT[k] * a[0, 0] + TABLE_INT[k - 5]


def _closure_kernel():
    taps = np.array([1.0, -2.0, 1.0])

    def second_difference(a):
        return taps[0] * a[0, -1] + taps[1] * a[0, 0] + taps[2] * a[0, 1]
    return second_difference


@pytest.mark.parametrize("kernel,options", [
    (captured_constant_indices, {}), (captured_negative_index, {}),
    (captured_loop, {"neighborhood": ((-1, 1), (0, 0))}),
    (captured_2d_loop, {"neighborhood": ((-1, 1), (-1, 1))}),
    (captured_int_table_by_value, {}), (_closure_kernel(), {})])
def test_captured_arrays(kernel, options, backend):
    _same(kernel, (A,), backend, **options)


def captured_out_of_range(a):
    return COEFFS[3] * a[0, 0]


def captured_too_many_indices(a):
    return COEFFS[0, 1] * a[0, 0]


def test_captured_array_constant_index_out_of_range_is_an_error():
    with pytest.raises(sk.StencilError, match=r"index 3 is out of bounds for axis 0 of 'COEFFS'"
                       r" \(shape \(3,\)\)") as info:
        sk.stencil(captured_out_of_range)(A)
    assert "captured_out_of_range" in str(info.value) and "test_numba_constructs.py" in str(
        info.value)
    with pytest.raises(sk.StencilError, match="'COEFFS' is 1-dimensional"):
        sk.stencil(captured_too_many_indices)(A)


def test_captured_array_is_frozen_at_the_first_compile():
    """As in Numba's @njit callers: the contents at the first compile are the constants
    (Numba's Python-mode calls, which recompile on every call, see later changes)."""
    table = np.array([1.0, 2.0])

    def scaled(a):
        return table[1] * a[0, 0]

    st = sk.stencil(scaled)
    ref = numba.stencil(scaled)
    jitted = numba.njit(lambda a: ref(a))
    ones = np.ones((3, 3))
    assert st(ones)[1, 1] == jitted(ones)[1, 1] == 2.0
    table[1] = 100.0
    assert st(ones)[1, 1] == jitted(ones)[1, 1] == 2.0
    assert sk.stencil(scaled)(ones)[1, 1] == 100.0  # a new stencil reads it anew


# ------------------------------------------------------------------ tuple comparisons


def tuple_not_centre(a):
    s = 0.0
    for i in range(-1, 2):
        for j in range(-1, 2):
            if (i, j) != (0, 0):
                s += a[i, j]
    return s


def tuple_equal_centre(a):
    s = 0.0
    for i in range(-1, 2):
        for j in range(-1, 2):
            s += a[i, j] * 2.0 if (i, j) == (0, 0) else a[i, j]
    return s


def tuple_ordered(a):
    s = 0.0
    for i in range(-1, 2):
        for j in range(-1, 2):
            if (i, j) < (0, 1):
                s += a[i, j]
            if (j, i) >= (0, 0):
                s -= 0.5 * a[i, j]
    return s


def tuple_values_with_nans(a):
    lt = (a[0, 0], a[1, 0]) < (a[0, 1], 0.5)
    le = (a[0, 0], a[1, 0]) <= (a[0, 0], a[1, 0])
    gt = (a[0, 0],) > (a[0, 1], a[1, 1])
    eq = (a[0, 0], a[0, 1]) == (a[0, 0], a[0, 1])
    return lt * 1 + le * 2 + gt * 4 + eq * 8


NEIGH = {"neighborhood": ((-1, 1), (-1, 1))}


@pytest.mark.parametrize("kernel,options", [
    (tuple_not_centre, NEIGH), (tuple_equal_centre, NEIGH), (tuple_ordered, NEIGH),
    (tuple_values_with_nans, {})])
def test_tuple_comparisons(kernel, options, backend):
    _same(kernel, (NANS if not options else A,), backend, **options)


# ------------------------------------------------------------------ np.signbit


@pytest.mark.parametrize("data", [SIGNS, INTS, SIGNS.astype(np.float32)],
                         ids=["float64", "int32", "float32"])
def test_signbit(data, backend):
    _same(lambda a: np.signbit(a[0, 0]), (data,), backend)
    _same(lambda a: 1.0 if np.signbit(a[0, 1] - a[0, 0]) else -1.0, (data,), backend)


# ------------------------------------------------------------------ np.array and reductions

def reduce_nanmean(a):
    return np.nanmean(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


def reduce_nanmax(a):
    return np.nanmax(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


def reduce_nanmin(a):
    return np.nanmin(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


def reduce_nansum(a):
    return np.nansum(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


def reduce_mean(a):
    return np.mean(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


def reduce_max(a):
    return np.max(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


def reduce_min(a):
    return np.min(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


def reduce_sum(a):
    return np.sum(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


def reduce_amax(a):
    return np.amax(np.array([a[-1, 0], a[0, -1], a[0, 0], a[0, 1], a[1, 0]]))


REDUCTIONS = [reduce_nanmean, reduce_nanmax, reduce_nanmin, reduce_nansum, reduce_mean,
              reduce_max, reduce_min, reduce_sum, reduce_amax]


@pytest.mark.parametrize("kernel", REDUCTIONS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("data", [NANS, F32, INTS], ids=["float64", "float32", "int32"])
def test_reductions_of_window_arrays(kernel, data, backend):
    _same(kernel, (data,), backend, njit_reference=True)


def sar_lee_like(a):
    """A speckle filter in the style of SAR code: window statistics without NaNs."""
    w = np.array([a[-1, -1], a[-1, 0], a[-1, 1], a[0, -1], a[0, 0], a[0, 1], a[1, -1],
                  a[1, 0], a[1, 1]])
    m = np.nanmean(w)
    hi = np.nanmax(w)
    lo = np.nanmin(w)
    if hi - lo > 0.5:
        return m
    return w[4] * 0.5 + m * 0.5


def method_reductions(a):
    v = np.array([a[0, 0], a[1, 0], a[0, 1]])
    return v.max() - v.min() + v.mean() + v.sum() + v[-1]


@pytest.mark.parametrize("kernel", [sar_lee_like, method_reductions])
@pytest.mark.parametrize("data", [NANS, F32], ids=["float64", "float32"])
def test_window_array_kernels(kernel, data, backend):
    _same(kernel, (data,), backend, njit_reference=True)


def median3(a):
    return np.median(np.array([a[0, 0], a[1, 0], a[0, 1]]))


def median4(a):
    return np.median(np.array([a[0, 0], a[1, 0], a[0, 1], a[1, 1]]))


def median9(a):
    return np.median(np.array([a[-1, -1], a[-1, 0], a[-1, 1], a[0, -1], a[0, 0], a[0, 1],
                               a[1, -1], a[1, 0], a[1, 1]]))


@pytest.mark.parametrize("kernel", [median3, median4, median9], ids=lambda k: k.__name__)
@pytest.mark.parametrize("data", [A, A.astype(np.float32), INTS], ids=["f8", "f4", "i4"])
def test_median_without_nans(kernel, data, backend):
    _same(kernel, (data,), backend, njit_reference=True)


def test_median_with_nans_is_numpys():
    got = sk.stencil(median3)(NANS)
    want = np.full_like(NANS, 0.0)
    for i in range(NANS.shape[0] - 1):
        for j in range(NANS.shape[1] - 1):
            want[i, j] = np.median([NANS[i, j], NANS[i + 1, j], NANS[i, j + 1]])
    np.testing.assert_array_equal(got[:-1, :-1], want[:-1, :-1])


def array_used_as_value(a):
    v = np.array([a[0, 0], a[1, 0]])
    return v


def array_unsupported_reduction(a):
    v = np.array([a[0, 0], a[1, 0]])
    return np.std(v)


def array_index_out_of_range(a):
    v = np.array([a[0, 0], a[1, 0]])
    return v[2]


@pytest.mark.parametrize("kernel,message", [
    (array_used_as_value, "'v' is an array made in the kernel; it can only be indexed or "
                          "reduced"),
    (array_unsupported_reduction, "'np.std' of an array made in a kernel is not supported"),
    (array_index_out_of_range, "index 2 is out of bounds for 'v' of 2 element"),
])
def test_window_array_errors(kernel, message):
    with pytest.raises(sk.StencilError, match=message):
        sk.stencil(kernel)(A)


# ------------------------------------------------------------------ fast-math callers


def contracted(a):
    return a[0, 0] * a[0, 1] + a[1, 0] * a[-1, 0] + a[0, -1] * 0.3


def test_fastmath_caller_compiles_the_stencil_as_numba_does():
    """Inside @njit(fastmath=True) the stencil is inlined and compiled with the caller's
    flags, like numba.stencil: the same bits as Numba's there (docs/numerics.md)."""
    data = np.random.default_rng(5).random((64, 64))
    ours, theirs = sk.stencil(contracted), numba.stencil(contracted)
    fast_ours = numba.njit(parallel=True, fastmath=True)(lambda a: ours(a))
    fast_theirs = numba.njit(parallel=True, fastmath=True)(lambda a: theirs(a))
    exact = numba.njit(lambda a: theirs(a))(data)
    np.testing.assert_array_equal(fast_ours(data), fast_theirs(data))
    np.testing.assert_array_equal(numba.njit(lambda a: ours(a))(data), exact)
    np.testing.assert_array_equal(ours(data), exact)


# ------------------------------------------------------------------ kernels in the style of
# the third-party projects of issue 28 (written here, not copied)

SOBEL_X = np.array([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
SOBEL_Y = SOBEL_X.T.copy()
FIR = np.array([0.05, 0.2, 0.5, 0.2, 0.05], dtype=np.float32)


def sobel_magnitude(img):
    """Image filter: Sobel gradient magnitude with the weights of module arrays."""
    gx = 0.0
    gy = 0.0
    for i in range(-1, 2):
        for j in range(-1, 2):
            if (i, j) != (0, 0):
                gx += SOBEL_X[i + 1, j + 1] * img[i, j]
                gy += SOBEL_Y[i + 1, j + 1] * img[i, j]
    return np.sqrt(gx * gx + gy * gy)


def fir_smooth(x):
    """Audio: a symmetric FIR low-pass in float32, as a sample-rate converter writes it."""
    acc = numba.float32(0.0)
    for k in range(-2, 3):
        acc += FIR[k + 2] * x[k]
    return numba.float32(acc)


def cosmic_ray_mask(sci, err):
    """Astronomy: flag a pixel standing out of its neighbours' median by 5 sigma; NaN
    (masked) neighbours do not count."""
    w = np.array([sci[-1, -1], sci[-1, 0], sci[-1, 1], sci[0, -1], sci[0, 1], sci[1, -1],
                  sci[1, 0], sci[1, 1]])
    background = np.nanmean(w)
    if np.isnan(sci[0, 0]) or np.signbit(err[0, 0]):
        return nb.int8(0)
    return nb.int8((sci[0, 0] - background) > 5.0 * err[0, 0])


def test_sobel_magnitude(backend):
    _same(sobel_magnitude, (A,), backend, neighborhood=((-1, 1), (-1, 1)))


def test_fir_smooth(backend):
    _same(fir_smooth, (rng.random(64).astype(np.float32),), backend,
          neighborhood=((-2, 2),))


def test_cosmic_ray_mask(backend):
    sci = rng.normal(100.0, 3.0, size=(12, 13))
    sci[rng.random(sci.shape) < 0.05] += 200.0
    sci[rng.random(sci.shape) < 0.05] = np.nan
    err = np.full_like(sci, 3.0)
    err[0, 4] = -0.0
    _same(cosmic_ray_mask, (sci, err), backend, njit_reference=True)


# ------------------------------------------------------------------ stencils built in @njit


def blur4(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])


@numba.njit
def built_from_lambda(x):
    return sk.stencil(lambda a: a[0, 1] - 2.0 * a[0, 0] + a[0, -1])(x)


@numba.njit
def numba_built_from_lambda(x):
    return numba.stencil(lambda a: a[0, 1] - 2.0 * a[0, 0] + a[0, -1])(x)


@numba.njit(parallel=True)
def built_from_function(x):
    y = sk.stencil(blur4, cval=-1.0)(x)
    return sk.stencil(lambda a: a[0, 0] * 2.0, neighborhood=((0, 0), (0, 0)))(y)


def numba_built_from_function(x):
    # Numba builds stencils from lambdas only in jitted code: the same stencils from Python
    y = numba.stencil(blur4, cval=-1.0)(x)
    return numba.stencil(lambda a: a[0, 0] * 2.0)(y)


def test_stencils_built_inside_njit():
    """As Numba's documentation shows for numba.stencil: built and called in jitted code."""
    for data in (A, INTS):
        ours, theirs = built_from_lambda(data), numba_built_from_lambda(data)
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(built_from_function(A), numba_built_from_function(A))


def test_stencil_built_inside_njit_with_a_variable_option_is_an_error():
    @numba.njit
    def variable_option(x, c):
        return sk.stencil(lambda a: a[0, 0], cval=c)(x)

    with pytest.raises(sk.StencilError, match="option 'cval' of stencil\\(\\) in jitted code "
                                              "must be a constant"):
        variable_option(A, 2.0)
