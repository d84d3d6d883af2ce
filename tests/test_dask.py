"""Point kernels on dask arrays (contract.md section 8): the computed result equals the call on
the NumPy arrays, bit for bit, for every border mode this build supports, 1-D to 3-D, any
chunking (chunks smaller than the neighbourhood included), on the synchronous scheduler.

The NumPy call of the same stencil is the reference; the modes' own definition (``np.pad``,
then the constant-mode kernel, then crop) is checked separately on the padding path, so that
path is tested before the modes exist in the core.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stencilkit as sk
from stencilkit.integrations import dask as sk_dask

from . import dask_kernels as kk

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install .[dask])")
dask = pytest.importorskip("dask")

EXAMPLES = int(os.environ.get("STENCILKIT_HYPOTHESIS_EXAMPLES", "60"))
SUPPORTED = kk.supported_modes()
PAD_MODES = {"nearest": "edge", "reflect": "symmetric", "mirror": "reflect", "wrap": "wrap"}


@st.composite
def chunkings(draw, n: int) -> tuple[int, ...]:
    """A random partition of n (chunks of 1 included)."""
    if n == 0:
        return (0,)
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=min(n - 1, 5)))) if n > 1 else []
    edges = [0, *cuts, n]
    return tuple(b - a for a, b in zip(edges, edges[1:]))


def _arguments(rng, func, ndim, extras, shape, dtype):
    a = _values(rng, shape, dtype)
    args = [a]
    for extra in extras:
        if extra == "array":
            bigger = tuple(n + int(rng.integers(0, 3)) for n in shape)
            args.append(_values(rng, bigger, dtype))
        elif extra == "weights":
            args.append(rng.random(3))
        else:
            args.append(extra)
    return args


def _values(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return (rng.random(shape) * 4 - 2).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


@st.composite
def cases(draw):
    index = draw(st.integers(0, len(kk.KERNELS) - 1))
    func, ndim, options, extras = kk.KERNELS[index]
    shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
    chunks = tuple(draw(chunkings(n)) for n in shape)
    mode = draw(st.sampled_from(SUPPORTED))
    seed = draw(st.integers(0, 2**16))
    # the other relatively indexed array: chunked its own way, or NumPy
    other = draw(st.sampled_from(["same", "own", "numpy"]))
    return func, options, extras, shape, chunks, mode, seed, other


def _dask_args(args, chunks, extras, other, rng):
    out = [da.from_array(args[0], chunks=chunks)]
    for a, extra in zip(args[1:], extras):
        if extra == "array" and other != "numpy":
            c = chunks if other == "same" and a.shape == args[0].shape else \
                tuple(max(1, int(rng.integers(1, n + 1))) for n in a.shape)
            out.append(da.from_array(a, chunks=c))
        elif extra == "weights" and other == "own":
            out.append(da.from_array(a, chunks=1))  # a chunked standard_indexing array
        else:
            out.append(a)
    return out


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_dask_equals_numpy(case):
    func, options, extras, shape, chunks, mode, seed, other = case
    rng = np.random.default_rng(seed)
    dtype = np.int64 if func is kk.k2_int else np.float64
    args = _arguments(rng, func, len(shape), extras, shape, dtype)
    stencil = kk.make(func, options, mode)
    ref = stencil(*args)
    lazy = stencil(*_dask_args(args, chunks, extras, other, rng))
    assert isinstance(lazy, da.Array)
    assert lazy.shape == ref.shape and lazy.dtype == ref.dtype
    got = lazy.compute(scheduler="synchronous")
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref, err_msg=f"{func.__name__} {mode} {chunks}")


@pytest.mark.parametrize("mode", SUPPORTED)
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_every_chunking_small_arrays(mode, ndim, backend):
    """Exhaustive over uniform chunk sizes 1..n, arrays shorter than the neighbourhood
    included, on every backend."""
    func = {1: kk.k1_uneven, 2: kk.k2_uneven, 3: kk.k3_seven}[ndim]
    options = {2: {"cval": 7.5}}.get(ndim, {})
    stencil = kk.make(func, options, mode, backend)
    rng = np.random.default_rng(ndim)
    for n in (1, 2, 3, 5):
        a = rng.random((n,) * ndim)
        ref = stencil(a)
        for c in range(1, n + 1):
            got = stencil(da.from_array(a, chunks=c)).compute(scheduler="synchronous")
            np.testing.assert_array_equal(got, ref, err_msg=f"n={n} chunks={c}")


@pytest.mark.parametrize("mode", list(PAD_MODES))
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_padding_path_matches_np_pad_definition(monkeypatch, mode, ndim):
    """The modes' definition (contract.md section 1): the constant-mode kernel on the interior of
    every relatively indexed array padded with np.pad, cropped back. Checked on our padding
    path whether or not the core has the modes yet (the mode is forced on the dask side)."""
    monkeypatch.setattr(sk_dask, "border_mode", lambda st: mode)
    func, options = {1: (kk.k1_two_arrays, {}), 2: (kk.k2_uneven, {}),
                     3: (kk.k3_shifted, {})}[ndim]
    stencil = sk.stencil(func, **options)
    rng = np.random.default_rng(7)
    for n in (1, 2, 4, 7):
        a = rng.random((n,) * ndim)
        b = rng.random((n + 2,) * ndim)
        args = (a, b, 0.5) if ndim == 1 else (a,) if ndim == 2 else (a, b)
        stencil(*args)
        border = [(-lo, hi) for lo, hi in stencil.neighborhood]
        padded = [np.pad(x, border, mode=PAD_MODES[mode]) if isinstance(x, np.ndarray) else x
                  for x in args]
        # a larger secondary array: its own elements first, the mode beyond its own end
        padded = [p if not isinstance(p, np.ndarray) else
                  p[tuple(slice(0, m + lo + hi) for m, (lo, hi) in zip(a.shape, border))]
                  for p in padded]
        full = stencil(*padded)
        ref = full[tuple(slice(lo, lo + m) for m, (lo, _) in zip(a.shape, border))]
        for c in range(1, n + 1):
            dargs = [da.from_array(x, chunks=c) if isinstance(x, np.ndarray) else x
                     for x in args]
            got = stencil(*dargs).compute(scheduler="synchronous")
            np.testing.assert_array_equal(got, ref, err_msg=f"{mode} n={n} chunks={c}")


def test_result_is_lazy_and_overlap_is_the_border():
    calls = []

    def counting(block):
        calls.append(block.shape)
        return block

    a = da.from_array(np.arange(40.0).reshape(8, 5), chunks=(4, 5))
    a = a.map_blocks(counting, meta=np.empty((0, 0)))
    stencil = sk.stencil(kk.k2_uneven)
    lazy = stencil(a)
    assert calls == [] and isinstance(lazy, da.Array)
    assert lazy.chunks == a.chunks
    assert stencil.neighborhood == ((-2, 1), (-1, 1))
    lazy.compute(scheduler="synchronous")
    assert calls  # computed only now


def test_graph_names_are_deterministic_per_stencil():
    stencil = sk.stencil(kk.k1_uneven)
    a = da.from_array(np.arange(10.0), chunks=3)
    assert stencil(a).name == stencil(a).name
    other = sk.stencil(kk.k1_uneven)
    assert other(a).name != stencil(a).name  # same source, maybe other closures: never shared


def test_out_with_dask_is_an_argument_error():
    stencil = sk.stencil(kk.k1_uneven)
    a = da.from_array(np.arange(10.0), chunks=3)
    with pytest.raises(sk.ArgumentError, match="out= cannot be used.*dask"):
        stencil(a, out=np.empty(10))
    with pytest.raises(sk.ArgumentError, match="out= cannot be used.*dask"):
        stencil(np.arange(10.0), out=da.zeros(10))


def test_errors_at_call_time_not_at_compute_time():
    a = da.from_array(np.arange(12.0).reshape(3, 4), chunks=2)
    with pytest.raises(sk.ArgumentError, match="smaller than the first"):
        sk.stencil(kk.k2_int)(a, np.zeros((2, 4)))
    with pytest.raises(sk.ArgumentError, match="takes 2 argument"):
        sk.stencil(kk.k2_int)(a)
    with pytest.raises(sk.StencilTypeError, match="2 dimensional neighborhood"):
        sk.stencil(kk.k1_uneven, neighborhood=((0, 1), (0, 1)))(da.zeros(5))
    unknown = da.from_array(np.arange(10.0), chunks=5)
    unknown = unknown[unknown > 3]
    with pytest.raises(sk.ArgumentError, match="unknown chunk sizes"):
        sk.stencil(kk.k1_uneven)(unknown)
    with pytest.raises(sk.StencilTypeError, match="cval"):
        sk.stencil(kk.k2_int, cval=1 + 2j)(a.astype(np.int64), a.astype(np.int64))


def test_run_time_errors_surface_at_compute():
    stencil = sk.stencil(kk.k1_wide, neighborhood=((-1, 1),))  # reads a[-3]: outside
    lazy = stencil(da.from_array(np.arange(10.0), chunks=4))
    with pytest.raises(sk.ArgumentError, match="neighborhood"):
        lazy.compute(scheduler="synchronous")


def test_dtypes_and_byte_order_follow_numpy_call():
    stencil = sk.stencil(kk.k2_int)
    a = np.arange(30, dtype=np.int32).reshape(5, 6)
    b = np.arange(42, dtype=">i4").reshape(6, 7)
    ref = stencil(a, b)
    got = stencil(da.from_array(a, chunks=2), da.from_array(b, chunks=3))
    assert got.dtype == ref.dtype == np.int64
    np.testing.assert_array_equal(got.compute(scheduler="synchronous"), ref)


def test_threaded_scheduler():
    stencil = sk.stencil(kk.k3_seven)
    a = np.random.default_rng(0).random((12, 10, 9))
    got = stencil(da.from_array(a, chunks=(5, 4, 3))).compute(scheduler="threads")
    np.testing.assert_array_equal(got, stencil(a))


def test_only_a_secondary_or_standard_array_is_dask():
    stencil = sk.stencil(kk.k2_weights, standard_indexing=("w",))
    a = np.random.default_rng(1).random((6, 7))
    w = np.array([0.5, 1.0, 2.0])
    got = stencil(a, da.from_array(w, chunks=1))
    assert isinstance(got, da.Array)
    np.testing.assert_array_equal(got.compute(scheduler="synchronous"), stencil(a, w))
    two = sk.stencil(kk.k3_shifted)
    b = np.random.default_rng(2).random((5, 6, 7))
    c = np.random.default_rng(3).random((6, 6, 8))
    got = two(b, da.from_array(c, chunks=(2, 3, 4)))
    np.testing.assert_array_equal(got.compute(scheduler="synchronous"), two(b, c))


@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 0)])
def test_empty_arrays(shape):
    stencil = sk.stencil(kk.k2_uneven)
    a = np.zeros(shape)
    got = stencil(da.from_array(a, chunks=2)).compute(scheduler="synchronous")
    assert got.shape == shape
    np.testing.assert_array_equal(got, stencil(a))
