"""Column sweeps whose fields are copied into level-major column buffers around each block of
columns (the "c" backend when K is contiguous): results equal the "numpy" backend's on odd
sizes (blocks of columns cut short), K halos above and below, empty intervals, fields read
with horizontal offsets (not copied), multistage groups one after another, and on layouts
where nothing is copied (storages with K outermost, Fortran order)."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import BACKWARD, FORWARD, PARALLEL, Field, computation, interval

rng = np.random.default_rng(7)


def k_halos(a: Field[float], b: Field[float], out: Field[float]):
    # a is read one level below the domain and one above it: its copy covers both halos
    with computation(FORWARD):
        with interval(0, 1):
            out = a[0, 0, -1] + b
        with interval(1, None):
            out = 0.5 * out[0, 0, -1] + a[0, 0, 1] - b[0, 0, -1]
    with computation(BACKWARD), interval(0, -1):
        out = out + 0.25 * out[0, 0, 1] + a[0, 0, -1]


def mixed(inp: Field[float], w: Field[float], out: Field[float], top: Field[float]):
    # inp is read at a horizontal offset (read in place, not copied); top is written on one
    # level only (its other levels are copied back unchanged); then a PARALLEL stage writes
    # w, copied (read-only) in the column group, in place
    with computation(FORWARD):
        with interval(0, 1):
            out = inp[1, 0, 0] * w
        with interval(1, None):
            acc = out[0, 0, -1] + inp[1, 0, 0] - inp[0, 1, 0] * w
            out = acc / (1.0 + w * w)
    with computation(BACKWARD), interval(-1, None):
        top = out + 1.0  # noqa: F841
    with computation(PARALLEL), interval(...):
        w = 2.0 * out - inp[0, -1, 0]  # noqa: F841


LAYOUTS = {"c-order": np.ascontiguousarray, "fortran": np.asfortranarray,
           "storage": lambda x: sk.as_storage(x, backend="c")}


def _compare(defn, n, shape, **geo):
    for layout, make in LAYOUTS.items():
        base = [rng.random(shape) for _ in range(n)]
        want = [make(x.copy()) for x in base]
        got = [make(x.copy()) for x in base]
        sk.stencil(defn, backend="numpy")(*want, **geo)
        sk.stencil(defn, backend="c")(*got, **geo)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-13, err_msg=layout)


@pytest.mark.parametrize("nj", [1, 7, 8, 13])
@pytest.mark.parametrize("nk", [1, 2, 5])
def test_k_halos_match_numpy(nj, nk):
    _compare(k_halos, 3, (3, nj, nk + 2), origin=(0, 0, 1), domain=(3, nj, nk))


@pytest.mark.parametrize("nj", [3, 9, 17])
@pytest.mark.parametrize("nk", [1, 3, 6])
def test_offsets_partial_writes_and_groups_match_numpy(nj, nk):
    _compare(mixed, 4, (6, nj + 2, nk), origin=(0, 1, 0), domain=(4, nj, nk))


def test_c_order_copies_the_columns():
    """The shape this file tests is the one generated for C-ordered arrays: the fields read
    in their own column copied into level-major buffers, the one read at a horizontal offset
    not."""
    src = sk.stencil(mixed, backend="c").generate(backend="c")
    assert "out_column_[" in src and "top_column_[" in src and "w_column_[" in src
    assert "inp_column_[" not in src
    src = sk.stencil(k_halos, backend="c").generate(backend="c")
    assert "a_column_[" in src and "out_column_[" in src
