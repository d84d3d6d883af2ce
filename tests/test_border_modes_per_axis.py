"""One border mode per axis (contract.md section 9) on every backend, against Numba.

The definition: an output element whose neighbourhood leaves the array along a "constant"
axis is ``cval`` (untouched with ``out=``); every other element equals the kernel applied to
the relatively indexed arrays padded axis by axis with ``np.pad(a, pad_d, mode=M_d)`` and
cropped back. The reference evaluates exactly that with ``numba.stencil`` itself: the arrays
are padded along the remapped axes only, Numba's "constant" stencil runs on them (so along
the "constant" axes its own border rule applies) and the padding is cropped off.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stencilkit as sk

from .kernel_strategies import _load

MODES = ("constant", "nearest", "reflect", "mirror", "wrap")
#: the np.pad mode that pads as each border mode reads (the contract's table, written here
#: again so that the reference does not lean on the library's own)
PAD = {"nearest": "edge", "reflect": "symmetric", "mirror": "reflect", "wrap": "wrap"}


def blur(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -2] + a[0, 1])


def upwind(a, b):
    return a[0, 0] - 0.5 * (a[-1, 0] + b[0, -1]) + b[1, 1]


def cube(a):
    return a[-1, 0, 0] + 2.0 * a[0, 1, 0] - a[0, 0, -1] + a[1, 1, 1]


def reference(numba_stencil, func, arrays, modes, border, cval=None):
    """numba.stencil on the arrays padded along the remapped axes, cropped back."""
    pads = [(0, 0) if m == "constant" else (-lo, hi) for m, (lo, hi) in zip(modes, border)]
    padded = []
    for a in arrays:
        for ax, (m, pad) in enumerate(zip(modes, pads)):
            if pad != (0, 0):
                width = [(0, 0)] * a.ndim
                width[ax] = pad
                a = np.pad(a, width, mode=PAD[m])
        padded.append(a)
    kw = {} if cval is None else {"cval": cval}
    full = numba_stencil(func, **kw)(*padded)
    crop = tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, arrays[0].shape))
    return full[crop]


BORDERS = {blur: ((-1, 1), (-2, 1)), upwind: ((-1, 1), (-1, 1)),
           cube: ((-1, 1), (0, 1), (-1, 1))}
MIXED_2D = [m for m in itertools.product(MODES, repeat=2) if m[0] != m[1]]


@pytest.mark.parametrize("modes", MIXED_2D, ids="-".join)
@pytest.mark.parametrize("func", [blur, upwind], ids=lambda f: f.__name__)
def test_two_dimensional(backend, numba_stencil, func, modes):
    rng = np.random.default_rng(7)
    nargs = func.__code__.co_argcount
    for shape in [(9, 11), (3, 2), (1, 5), (2, 1)]:
        arrays = [rng.random(shape) for _ in range(nargs)]
        st_ = sk.stencil(modes, backend=backend, cval=-3.0)(func)
        got = st_(*arrays)
        want = reference(numba_stencil, func, arrays, modes, BORDERS[func], cval=-3.0)
        np.testing.assert_array_equal(got, want, err_msg=f"shape {shape}")


@pytest.mark.parametrize("modes", [("constant", "wrap", "nearest"), ("mirror", "constant", "wrap"),
                                   ("reflect", "nearest", "constant")], ids="-".join)
def test_three_dimensional(backend, numba_stencil, modes):
    a = np.random.default_rng(3).random((6, 7, 8))
    got = sk.stencil(modes, backend=backend)(cube)(a)
    np.testing.assert_array_equal(got, reference(numba_stencil, cube, [a], modes, BORDERS[cube]))


def test_out_keeps_the_constant_border(backend, numba_stencil):
    a = np.random.default_rng(1).random((8, 9))
    modes = ("constant", "wrap")
    out = np.full_like(a, 99.0)
    sk.stencil(modes, backend=backend)(blur)(a, out=out)
    want = reference(numba_stencil, blur, [a], modes, BORDERS[blur])
    # rows 0 and 7 leave the array along the "constant" axis: untouched with out=
    np.testing.assert_array_equal(out[1:-1], want[1:-1])
    assert (out[[0, -1]] == 99.0).all()
    with_cval = np.full_like(a, 99.0)
    sk.stencil(modes, backend=backend, cval=5.0)(blur)(a, out=with_cval)
    assert (with_cval[[0, -1]] == 5.0).all()
    np.testing.assert_array_equal(with_cval[1:-1], want[1:-1])


def test_all_constant_tuple_is_the_constant_mode():
    st_ = sk.stencil(("constant", "constant"))(blur)
    assert st_.mode == "constant"
    assert sk.stencil(("wrap", "wrap"))(blur).mode == "wrap"


def test_bad_tuples_are_refused():
    with pytest.raises(sk.StencilError, match="unsupported mode style"):
        sk.stencil(("constant", "periodic"))(blur)
    with pytest.raises(sk.StencilError, match="unsupported mode style"):
        sk.stencil(())(blur)
    st_ = sk.stencil(("constant", "wrap", "nearest"))(blur)
    with pytest.raises(sk.StencilError, match="3 border modes"):
        st_(np.zeros((4, 4)))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(modes=st.tuples(st.sampled_from(MODES), st.sampled_from(MODES)),
       shape=st.tuples(st.integers(1, 7), st.integers(1, 7)),
       lo=st.tuples(st.integers(-2, 0), st.integers(-2, 0)),
       hi=st.tuples(st.integers(0, 2), st.integers(0, 2)), seed=st.integers(0, 9))
def test_random_neighbourhoods_on_c_and_numpy(numba_stencil, modes, shape, lo, hi, seed):
    """Random asymmetric neighbourhoods and tiny arrays: a box or strip one element too wide
    or narrow along either axis shows up here."""
    src = (f"def k(a):\n    return a[{lo[0]}, {lo[1]}] + 2.0 * a[{hi[0]}, {hi[1]}] "
           f"- a[{lo[0]}, {hi[1]}] * a[0, 0]\n")
    func = _load(src, "k")
    a = np.random.default_rng(seed).random(shape)
    want = reference(numba_stencil, func, [a], modes, tuple(zip(lo, hi)), cval=1.5)
    for backend in ("numpy", "c"):
        if sk.backends()[backend].reason:
            continue
        got = sk.stencil(modes, backend=backend, cval=1.5)(func)(a)
        np.testing.assert_array_equal(got, want, err_msg=f"{backend} {modes} {shape}")


@pytest.mark.parametrize("modes", [("constant", "wrap"), ("nearest", "constant"),
                                   ("reflect", "wrap")], ids="-".join)
@pytest.mark.parametrize("chunks", [(3, 4), (9, 2), (1, 1)])
def test_dask_any_chunking(numba_stencil, modes, chunks):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(5)
    a, b = rng.random((9, 11)), rng.random((9, 11))
    st_ = sk.stencil(modes, backend="numpy", cval=2.0)(upwind)
    lazy = st_(da.from_array(a, chunks=chunks), da.from_array(b, chunks=chunks))
    assert isinstance(lazy, da.Array)
    want = reference(numba_stencil, upwind, [a, b], modes, BORDERS[upwind], cval=2.0)
    np.testing.assert_array_equal(lazy.compute(), want)


def test_pickled_stencil_keeps_its_modes():
    import pickle

    st_ = sk.stencil(("nearest", "wrap"))(blur)
    back = pickle.loads(pickle.dumps(st_))
    assert back.mode == ("nearest", "wrap")
    a = np.random.default_rng(2).random((6, 7))
    np.testing.assert_array_equal(back(a), st_(a))
