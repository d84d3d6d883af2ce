"""Property-based differential tests: random point kernels on every backend against
``numba.stencil`` (values and dtypes).

The kernels mix what Numba users write: several arrays of several dtypes, scalar arguments,
locals bound to integer constants used as relative indices, ``for`` loops over ``range``,
``if``/``else`` with returns in branches, conditional expressions, ``min``/``max``/``abs``,
and lambdas. ``STENCILKIT_HYPOTHESIS_EXAMPLES`` raises the number of examples (default 100).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stencilkit as sk

from .kernel_strategies import _load, kernels

numba = pytest.importorskip("numba", reason="numba is the reference")

EXAMPLES = int(os.environ.get("STENCILKIT_HYPOTHESIS_EXAMPLES", "100"))
DTYPES = [np.float64, np.float32, np.int64, np.int32]
_numba_results: dict[tuple, object] = {}  # (source, data) -> numba's result or error


def _numba(source: str, func, args: tuple, key: tuple):
    if key not in _numba_results:  # hypothesis replays examples while shrinking
        try:
            _numba_results[key] = numba.stencil(func)(*args)
        except Exception as exc:  # noqa: BLE001 - Numba's verdict, compared below
            _numba_results[key] = exc
    return _numba_results[key]


def check(source: str, name: str, ndim: int, arrays: list[str], scalar: str | None,
          shape: tuple[int, ...], seed: int, dtypes: list, scalar_value: object) -> None:
    """Every backend gives numba.stencil's values and dtype (or an error where it errors)."""
    func = _load(source, name)
    rng = np.random.default_rng(seed)
    args: list = []
    for t in dtypes:
        values = rng.random(shape) * 4 - 2 if np.dtype(t).kind == "f" else \
            rng.integers(-5, 6, shape)
        args.append(values.astype(t))
    if scalar:
        args.append(scalar_value)
    key = (source, shape, seed, tuple(map(str, dtypes)), repr(scalar_value))
    ref = _numba(source, func, tuple(args), key)
    for backend in sk.registry.implemented():
        if not sk.registry.REGISTRY[backend].available:
            continue
        if backend == "numba" and seed % 4:
            # a Numba compile per example costs seconds: a quarter of the examples (chosen
            # by their seed) run on the numba backend, to keep the suite under budget
            continue
        if isinstance(ref, Exception):
            # Numba rejects it: so must we, with a StencilError
            with pytest.raises(sk.StencilError):
                sk.stencil(func, backend=backend)(*args)
            continue
        ours = sk.stencil(func, backend=backend)(*args)
        assert ours.dtype == ref.dtype, f"{backend}: {ours.dtype} != {ref.dtype}\n{source}"
        np.testing.assert_array_equal(ours, ref, err_msg=f"{backend}:\n{source}")


@st.composite
def cases(draw) -> tuple:
    source, name, ndim, arrays, scalar = draw(kernels())
    shape = tuple(draw(st.integers(3, 6)) for _ in range(ndim))
    seed = draw(st.integers(0, 1000))
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in arrays]
    scalar_value = draw(st.sampled_from([2, -1, 0.5, 3.0])) if scalar else None
    return source, name, ndim, arrays, scalar, shape, seed, dtypes, scalar_value


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_random_kernels_match_numba(case):
    check(*case)
