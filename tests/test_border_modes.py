"""Border modes "nearest", "reflect", "mirror", "wrap" (contract.md section 1) on every backend.

The definition: the result equals the kernel applied to every relatively indexed array
padded with ``np.pad(a, pad, mode=M)`` (M = "edge", "symmetric", "reflect", "wrap") and
cropped back. The references here evaluate exactly that, independently of stencilkit:

- ``pointwise``: the kernel's own Python function run by CPython at every point of the
  ``np.pad``-ed arrays (elements handed over as Python ints/bools, or as NumPy scalars of
  their float/complex dtype so float32 arithmetic stays float32, as in Numba), for kernels
  whose arithmetic means the same in Python and in Numba;
- ``numba.stencil`` itself on the ``np.pad``-ed arrays (values and dtypes);
- ``scipy.ndimage.correlate`` / ``generic_filter`` with the same mode name.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stencilkit as sk
from stencilkit import dtypes

from .kernel_strategies import _load, kernels

PAD = {"nearest": "edge", "reflect": "symmetric", "mirror": "reflect", "wrap": "wrap"}
MODES = list(PAD)
DTYPES = sorted(dtypes.SUPPORTED, key=str)
EXAMPLES = max(10, int(os.environ.get("STENCILKIT_HYPOTHESIS_EXAMPLES", "100")) // 3)


# ---------------------------------------------------------------- the references


class _Centred:
    """An np.pad-ed array as the kernel sees it at one point: read by relative index."""

    __slots__ = ("a", "at")

    def __init__(self, a: np.ndarray, at: tuple[int, ...]) -> None:
        self.a, self.at = a, at

    def __getitem__(self, off):
        off = off if isinstance(off, tuple) else (off,)
        x = self.a[tuple(c + int(o) for c, o in zip(self.at, off))]
        if x.dtype.kind == "b":
            return bool(x)
        if x.dtype.kind in "iu":
            return int(x)  # Numba widens integers to int64; the values here never overflow
        return x


def pointwise(func, args: list, relative: set[int], mode: str, pad: int) -> np.ndarray:
    """The kernel run by CPython at every point of the np.pad-ed arrays (object array)."""
    shape = args[0].shape
    padded = {i: np.pad(args[i], pad, mode=PAD[mode]) for i in relative}
    out = np.empty(shape, object)
    for idx in np.ndindex(shape):
        at = tuple(x + pad for x in idx)
        out[idx] = func(*[_Centred(padded[i], at) if i in relative else a
                          for i, a in enumerate(args)])
    return out


def crop(result: np.ndarray, pad: int, shape: tuple[int, ...]) -> np.ndarray:
    return result[tuple(slice(pad, pad + n) for n in shape)]


def values(shape: tuple[int, ...], t, rng) -> np.ndarray:
    t = np.dtype(t)
    if t.kind == "b":
        return rng.random(shape) < 0.5
    if t.kind in "iu":
        return rng.integers(0, 6, shape).astype(t)
    if t.kind == "c":
        return (rng.random(shape) * 4 - 2 + 1j * (rng.random(shape) - 0.5)).astype(t)
    return (rng.random(shape) * 4 - 2).astype(t)


# ---------------------------------------------------------------- kernels of the matrix
# Array reads combined by + and * only: the same arithmetic in CPython and Numba. Offsets up
# to 3, so arrays of 1 and 2 elements meet neighbourhoods wider than themselves.


def k1(a, b):
    return a[-3] + a[1] * b[0] + b[2]


def k2(a, b):
    return a[-1, 3] + a[2, 0] * b[0, -2] + b[1, 1]


def k3(a, b):
    return a[-1, 0, 2] + a[1, -2, 0] * b[0, 0, -3] + b[2, 1, 0]


def k4(a, b):
    return a[-1, 0, 2, 0] + a[1, -1, 0, 1] * b[0, 0, -2, -2] + b[2, 1, 0, 0]


KERNELS = {1: k1, 2: k2, 3: k3, 4: k4}
PADS = 3
# (shape of a, how much larger b is): single elements, fewer elements than the
# neighbourhood, mixed, and arrays with an interior; b larger along some dimensions.
SHAPES = {
    1: [((1,), (0,)), ((2,), (3,)), ((9,), (0,)), ((5,), (1,))],
    2: [((1, 1), (0, 0)), ((2, 3), (1, 0)), ((7, 9), (0, 0)), ((6, 1), (0, 2))],
    3: [((1, 1, 1), (0, 0, 0)), ((2, 5, 1), (0, 1, 2)), ((6, 7, 8), (1, 0, 0))],
    4: [((1, 1, 1, 1), (0, 0, 0, 0)), ((3, 1, 5, 2), (0, 2, 0, 1)), ((5, 4, 6, 5), (0, 0, 0, 0))],
}


@pytest.mark.parametrize("t", DTYPES, ids=str)
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", MODES)
def test_matches_np_pad_definition(mode, ndim, t, backend):
    """Every mode x dimension x dtype x backend: values equal the kernel run on the np.pad-ed
    arrays (secondary arrays, even larger ones, padded by their own mode), and the dtype is
    the one the kernel has without border modes."""
    func = KERNELS[ndim]
    ours = sk.stencil(func_or_mode=mode, backend=backend)(func)
    plain = sk.stencil(func, backend="numpy")
    rng = np.random.default_rng(ndim)
    for shape, extra in SHAPES[ndim]:
        a = values(shape, t, rng)
        b = values(tuple(n + e for n, e in zip(shape, extra)), t, rng)
        got = ours(a, b)
        ref = pointwise(func, [a, b], {0, 1}, mode, PADS)
        assert got.dtype == plain(np.ones((8,) * ndim, t), np.ones((8,) * ndim, t)).dtype
        if np.dtype(t).kind == "c":
            # Complex products differ from Numba's (= CPython's) in the last bit on both
            # backends, in every mode (NumPy's vectorized loop, GCC's expansion): not a
            # border question, so compared to 8 ulp here
            eps = np.finfo(got.dtype).eps
            np.testing.assert_allclose(got, ref.astype(got.dtype), rtol=8 * eps, atol=8 * eps)
            continue
        np.testing.assert_array_equal(got, ref.astype(got.dtype), err_msg=f"{shape} {extra}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_non_contiguous_inputs_and_out(mode, ndim, backend):
    """Fortran order, strided and reversed views (the C backend's general variant), and an
    out= whose every element is overwritten (cval is not used)."""
    func = KERNELS[ndim]
    ours = sk.stencil(func_or_mode=mode, backend=backend, cval=7.0)(func)
    rng = np.random.default_rng(1)
    shape = (5, 4, 3, 6)[:ndim]
    big = values(tuple(2 * n + 1 for n in shape), np.float64, rng)
    a = big[tuple(slice(1, None, 2) for _ in shape)]
    b = np.asfortranarray(values(shape, np.float64, rng))[tuple(slice(None, None, -1)
                                                                for _ in shape)]
    ref = pointwise(func, [a, b], {0, 1}, mode, PADS).astype(np.float64)
    np.testing.assert_array_equal(ours(a, b), ref)
    out = np.full(shape, np.nan)[..., ::-1] if ndim > 1 else np.full(shape, np.nan)
    assert ours(a, b, out=out) is out
    np.testing.assert_array_equal(out, ref)
    fortran_out = np.asfortranarray(np.full(shape, np.nan))
    ours(np.asfortranarray(a), b, out=fortran_out)
    np.testing.assert_array_equal(fortran_out, ref)


# ---------------------------------------------------------------- Numba itself


def lap2(a):
    return a[-1, 0] + a[1, 0] + a[0, -2] + a[0, 1] - 4 * a[0, 0]


def shifted3(a, b):
    return a[-1, 1, 0] * 3 + b[2, 0, -1] // 2


_numba_cache: dict = {}


def numba_padded(func, args: list, mode: str, pad: int) -> np.ndarray:
    """numba.stencil itself (compiled once per type) on the np.pad-ed arrays, cropped."""
    numba = pytest.importorskip("numba", reason="numba is the reference (pip install .[test])")
    if func not in _numba_cache:
        inner = numba.stencil(func)
        _numba_cache[func] = numba.njit(lambda *xs: inner(*xs))
    padded = [np.pad(a, pad, mode=PAD[mode]) for a in args]
    return crop(_numba_cache[func](*padded), pad, args[0].shape)


@pytest.mark.parametrize("t", [np.float64, np.int32], ids=str)
def test_against_numba_on_padded_arrays(t, backend):
    """Values and dtypes equal numba.stencil's on the np.pad-ed arrays (Numba's typing:
    int32 arithmetic widens to int64, // floors), in every mode."""
    rng = np.random.default_rng(5)
    for mode in MODES:
        for func, shapes in ((lap2, [[(1, 1)], [(3, 2)], [(9, 7)]]),
                             (shifted3, [[(1, 2, 1), (1, 2, 1)], [(4, 5, 6), (6, 5, 7)]])):
            ours = sk.stencil(func_or_mode=mode, backend=backend)(func)
            for shape_list in shapes:
                args = [values(s, t, rng) for s in shape_list]
                ref = numba_padded(func, args, mode, PADS)
                got = ours(*args)
                assert got.dtype == ref.dtype
                np.testing.assert_array_equal(got, ref,
                                              err_msg=f"{mode} {func.__name__} {shape_list}")


# ---------------------------------------------------------------- scipy.ndimage


def corr3x3(a):
    return (0.5 * a[-1, -1] - 1.25 * a[-1, 0] + 2.0 * a[-1, 1] + 0.75 * a[0, -1] - 3.0 * a[0, 0]
            + 1.5 * a[0, 1] - 0.25 * a[1, -1] + 4.0 * a[1, 0] - 2.5 * a[1, 1])


CORR3X3 = np.array([[0.5, -1.25, 2.0], [0.75, -3.0, 1.5], [-0.25, 4.0, -2.5]])


def corr1d(a):
    return 2.0 * a[-2] - a[-1] + 3.0 * a[0] + 0.5 * a[1] - 1.5 * a[2]


def max3d(a):
    return max(a[-1, 0, 0], a[1, 0, 0], a[0, -1, 0], a[0, 1, 0], a[0, 0, -1], a[0, 0, 1],
               a[0, 0, 0])


SCIPY_WRAP = "grid-wrap"  # scipy's "wrap" differs from np.pad's when the footprint exceeds
                          # the array; "grid-wrap" is np.pad's "wrap"


def _scipy_mode(mode: str) -> str:
    return SCIPY_WRAP if mode == "wrap" else mode


@pytest.mark.parametrize("mode", MODES)
def test_against_scipy_correlate(mode, backend):
    ndimage = pytest.importorskip("scipy.ndimage", reason="scipy is a reference")
    rng = np.random.default_rng(2)
    st2 = sk.stencil(func_or_mode=mode, backend=backend)(corr3x3)
    st1 = sk.stencil(func_or_mode=mode, backend=backend)(corr1d)
    for shape in [(1, 1), (1, 5), (2, 2), (3, 7), (40, 33)]:
        a = rng.random(shape)
        ref = ndimage.correlate(a, CORR3X3, mode=_scipy_mode(mode))
        np.testing.assert_allclose(st2(a), ref, rtol=1e-12, atol=1e-12, err_msg=str(shape))
    for n in [1, 2, 3, 4, 5, 17]:
        a = rng.random(n)
        ref = ndimage.correlate1d(a, [2.0, -1.0, 3.0, 0.5, -1.5], mode=_scipy_mode(mode))
        np.testing.assert_allclose(st1(a), ref, rtol=1e-12, atol=1e-12, err_msg=str(n))
    if mode == "wrap":  # scipy's own "wrap" agrees where the footprint fits in the array
        a = rng.random((40, 33))
        np.testing.assert_allclose(st2(a), ndimage.correlate(a, CORR3X3, mode="wrap"),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_against_scipy_generic_filter(mode, backend):
    ndimage = pytest.importorskip("scipy.ndimage", reason="scipy is a reference")
    footprint = np.zeros((3, 3, 3), bool)
    footprint[1, 1, :] = footprint[1, :, 1] = footprint[:, 1, 1] = True
    ours = sk.stencil(func_or_mode=mode, backend=backend)(max3d)
    rng = np.random.default_rng(3)
    for shape in [(1, 1, 1), (2, 1, 3), (6, 5, 7)]:
        for t in (np.float64, np.int16):
            a = values(shape, t, rng)
            ref = ndimage.generic_filter(a, np.max, footprint=footprint,
                                         mode=_scipy_mode(mode))
            np.testing.assert_array_equal(ours(a), ref, err_msg=f"{shape} {t}")


# ---------------------------------------------------------------- random kernels and shapes


@st.composite
def mode_cases(draw):
    # the reference runs the kernel in CPython, whose arithmetic is Numba's in float64 but not
    # once a float32 cast meets a Python int (``min(abs(x), 1) - numba.float32(y)`` is float32
    # in NumPy's promotion, float64 in Numba's typing): kernels with casts are compared with
    # Numba itself in test_properties.py
    source, name, ndim, arrays, scalar = draw(
        kernels().filter(lambda k: "numba.float32" not in k[0]))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    extras = [tuple(draw(st.sampled_from([0, 0, 1, 3])) for _ in range(ndim)) for _ in arrays]
    extras[0] = (0,) * ndim
    layouts = [draw(st.sampled_from(["C", "F", "strided", "reversed"])) for _ in arrays]
    mode = draw(st.sampled_from(MODES))
    use_out = draw(st.booleans())
    scalar_value = draw(st.sampled_from([2, -1, 0.5, 3.0])) if scalar else None
    seed = draw(st.integers(0, 1000))
    return source, name, ndim, arrays, shape, extras, layouts, mode, use_out, scalar_value, seed


def _layout(a: np.ndarray, layout: str) -> np.ndarray:
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "strided":
        big = np.zeros(tuple(2 * n for n in a.shape), a.dtype)
        view = big[tuple(slice(None, None, 2) for _ in a.shape)]
        view[...] = a
        return view
    if layout == "reversed":
        return a[tuple(slice(None, None, -1) for _ in a.shape)][
            tuple(slice(None, None, -1) for _ in a.shape)]
    return a


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=mode_cases())
def test_random_kernels_and_shapes(case, backend):
    """Random kernels (several arrays, locals, loops, branches with returns, min/max/abs,
    conditional expressions; offsets -2..2) on random tiny shapes (1..6, so neighbourhoods
    often exceed the array), larger secondary arrays, Fortran/strided/reversed layouts and
    out=, in float64 (where CPython's arithmetic is Numba's): the np.pad definition."""
    source, name, ndim, arrays, shape, extras, layouts, mode, use_out, scalar_value, seed = case
    func = _load(source, name)
    rng = np.random.default_rng(seed)
    args: list = []
    for extra, layout in zip(extras, layouts):
        a = rng.random(tuple(n + e for n, e in zip(shape, extra))) * 4 - 2
        args.append(_layout(a, layout))
    if scalar_value is not None:
        args.append(scalar_value)
    relative = {i for i, n in enumerate(arrays) if f"{n}[" in source}
    ref = pointwise(func, args, relative, mode, 2)
    ours = sk.stencil(func_or_mode=mode, backend=backend)(func)
    if use_out:
        out = np.full(shape, np.nan)
        ours(*args, out=out)
    else:
        out = ours(*args)
    np.testing.assert_array_equal(out, ref.astype(out.dtype), err_msg=f"{mode}\n{source}")


def ring(a):
    s = 0.0
    for i in range(-3, 4):
        s += (i + 4) * a[i, 0] - a[0, -i]
    return s


def test_run_time_offsets(backend):
    """Relative indices known at run time (loop variables, neighborhood= given) are remapped
    too; one outside the neighbourhood is still an error in the border."""
    rng = np.random.default_rng(4)
    for mode in MODES:
        ours = sk.stencil(func_or_mode=mode, backend=backend,
                          neighborhood=((-3, 3), (-3, 3)))(ring)
        for shape in [(1, 1), (2, 3), (8, 9)]:
            a = rng.random(shape)
            np.testing.assert_array_equal(ours(a), pointwise(ring, [a], {0}, mode, 3)
                                          .astype(np.float64), err_msg=f"{mode} {shape}")
        narrow = sk.stencil(func_or_mode=mode, backend=backend,
                            neighborhood=((-2, 2), (-3, 3)))(ring)
        with pytest.raises(sk.ArgumentError, match="neighborhood"):
            narrow(rng.random((3, 3)))


# ---------------------------------------------------------------- options and semantics


def weighted(a, w):
    return w[0] * a[-1] + w[1] * a[0] + w[2] * a[1]


def test_standard_indexing_arrays_are_not_remapped(backend):
    """A standard_indexing array is indexed absolutely, as in Numba: never padded."""
    w = np.array([0.25, 0.5, 2.0])
    a = np.random.default_rng(6).random(7)
    for mode in MODES:
        ours = sk.stencil(func_or_mode=mode, backend=backend, standard_indexing=("w",))(weighted)
        ref = pointwise(weighted, [a, w], {0}, mode, 1).astype(np.float64)
        np.testing.assert_array_equal(ours(a, w), ref)


def test_cval_applies_to_constant_only(backend):
    a = np.arange(12.0).reshape(3, 4)
    with_cval = sk.stencil(func_or_mode="nearest", cval=99.0, backend=backend)(lap2)
    plain = sk.stencil(func_or_mode="nearest", backend=backend)(lap2)
    np.testing.assert_array_equal(with_cval(a), plain(a))
    # even a cval that "constant" would refuse for an integer result is simply unused
    sk.stencil(func_or_mode="wrap", cval=np.nan, backend=backend)(lap2)(a.astype(np.int64))
    constant = sk.stencil(cval=99.0, backend=backend)(lap2)(a)
    assert constant[0, 0] == 99.0 and plain(a)[0, 0] != 99.0


def test_empty_arrays(backend):
    for mode in MODES:
        ours = sk.stencil(func_or_mode=mode, backend=backend)(lap2)
        for shape in [(0, 4), (3, 0), (0, 0)]:
            assert ours(np.zeros(shape)).shape == shape


def test_mode_values_and_errors():
    with pytest.raises(sk.StencilError, match="unsupported mode style 'periodic'") as info:
        sk.stencil(func_or_mode="periodic")
    assert "test_border_modes.py" in str(info.value)  # the caller's line
    assert "'nearest'" in str(info.value) and "'wrap'" in str(info.value)  # the fix
    with pytest.raises(sk.StencilError, match="mode"):
        sk.stencil("Wrap")
    # A callable func_or_mode is the kernel, as in Numba (default mode "constant").
    st_ = sk.stencil(func_or_mode=lap2, backend="numpy")
    assert st_(np.ones((4, 4)))[0, 0] == 0.0
    # Border modes are for point kernels: computations use halos.
    from .computations import lap3d  # noqa: PLC0415

    with pytest.raises(sk.StencilError, match="func_or_mode"):
        sk.stencil(func_or_mode="wrap")(lap3d)


def test_generated_code_keeps_the_interior_loop(backend):
    """The interior loop is the same in every mode; only the border strips are remapped."""
    a = np.ones((6, 6))
    constant = sk.stencil(lap2, backend=backend)
    wrap = sk.stencil(func_or_mode="wrap", backend=backend)(lap2)
    c_src, w_src = constant.generate(a), wrap.generate(a)
    if backend == "c":
        # the interior loop's serial copy (short vectors: SmallWorkCPlatform), to the end
        vectorized = c_src[c_src.rindex("#pragma omp simd"):]
        assert vectorized in w_src
        assert "mode 'wrap'" in w_src and "sk_mod_int64" in w_src
    elif backend == "numpy":
        assert "'wrap'" in w_src and "_reg.shifted" in w_src
    else:  # backends printed from the kernel IR: the remapping is extra code
        assert w_src != c_src and len(w_src) > len(c_src)
