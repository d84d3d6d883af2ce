"""Random point kernels (the generator of ``test_properties``: several arrays and dtypes,
scalars, loops, branches, lambdas) on random chunkings of dask arrays: the computed result
equals the NumPy call of the same stencil, values and dtype, or both raise."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stencilkit as sk

from .test_dask import chunkings
from .test_properties import DTYPES, _load, kernels

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install .[dask])")

EXAMPLES = int(os.environ.get("STENCILKIT_HYPOTHESIS_EXAMPLES_DASK", "25"))


@st.composite
def cases(draw):
    source, name, ndim, arrays, scalar = draw(kernels())
    shape = tuple(draw(st.integers(1, 8)) for _ in range(ndim))
    chunks = [tuple(draw(chunkings(n)) for n in shape) for _ in arrays]
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in arrays]
    scalar_value = draw(st.sampled_from([2, -1, 0.5, 3.0])) if scalar else None
    return source, name, shape, chunks, dtypes, scalar_value, draw(st.integers(0, 1000))


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_random_kernels_on_dask(case):
    source, name, shape, chunks, dtypes, scalar_value, seed = case
    stencil = sk.stencil(_load(source, name))
    rng = np.random.default_rng(seed)
    args = [(rng.random(shape) * 4 - 2).astype(t) if np.dtype(t).kind == "f"
            else rng.integers(-5, 6, shape).astype(t) for t in dtypes]
    lazy_args = [da.from_array(a, chunks=c) for a, c in zip(args, chunks)]
    if scalar_value is not None:
        args.append(scalar_value)
        lazy_args.append(scalar_value)
    try:
        ref = stencil(*args)
    except sk.StencilError as exc:
        # the NumPy call refuses it: so does the dask call, when it is made or computed
        with pytest.raises(type(exc)):
            stencil(*lazy_args).compute(scheduler="synchronous")
        return
    got = stencil(*lazy_args).compute(scheduler="synchronous")
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref, err_msg=source)
