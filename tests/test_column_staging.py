"""Column sweeps whose fields are copied into level-major column buffers around each block of
columns (the "c" backend when K is contiguous): results equal the "numpy" backend's on odd
sizes (blocks of columns cut short), K halos above and below, empty intervals, fields read
with horizontal offsets (not copied), multistage groups one after another, and on layouts
where nothing is copied (storages with K outermost, Fortran order)."""

from __future__ import annotations

import re

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


# Outputs whose column buffer the sweep fills before reading it are not copied in. Each
# definition below breaks one condition of that, so its copy-in must stay: the fields start
# with random values, which a skipped copy would lose (or replace with whatever the buffer held).


def solve_x(b: Field[float], d: Field[float], x: Field[float]):
    # x is set on every level before it is read: no copy-in
    with computation(FORWARD):
        with interval(0, 1):
            dp = d / b
        with interval(1, None):
            dp = (d - 0.3 * dp[0, 0, -1]) / b
    with computation(BACKWARD):
        with interval(-1, None):
            x = dp
        with interval(0, -1):
            x = dp - 0.2 * x[0, 0, 1]  # noqa: F841


def some_levels(b: Field[float], x: Field[float]):
    # level 0 is never written: it keeps its value
    with computation(FORWARD), interval(1, None):
        x = b + 0.5 * x[0, 0, -1]  # noqa: F841


def old_value_first(b: Field[float], x: Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            x = b
        with interval(1, None):
            x = x + b * x[0, 0, -1]  # noqa: F841


def not_swept_yet(b: Field[float], x: Field[float]):
    # a BACKWARD sweep reading the level below: not written yet
    with computation(BACKWARD):
        with interval(0, 1):
            x = b
        with interval(1, None):
            x = b - 0.5 * x[0, 0, -1]  # noqa: F841


def conditional_first(b: Field[float], x: Field[float]):
    with computation(FORWARD), interval(...):
        if b > 0.5:
            x = b
        x = x * 2.0  # noqa: F841


def beyond_the_top(b: Field[float], x: Field[float]):
    # reads one level above the domain (its halo), which the sweep never writes
    with computation(BACKWARD), interval(...):
        x = b + 0.5 * x[0, 0, 1]  # noqa: F841


def read_by_an_earlier_sweep(b: Field[float], x: Field[float], y: Field[float]):
    # the first sweep of the group reads x as it was; the second one sets it
    with computation(FORWARD), interval(...):
        y = b + x
    with computation(BACKWARD), interval(...):
        x = 2.0 * y  # noqa: F841


KEEPS_COPY = [some_levels, old_value_first, not_swept_yet, conditional_first, beyond_the_top,
              read_by_an_earlier_sweep]


@pytest.mark.parametrize("defn", [solve_x, *KEEPS_COPY], ids=lambda f: f.__name__)
@pytest.mark.parametrize("nj", [3, 11])
def test_outputs_match_numpy_with_and_without_copy_in(defn, nj):
    n = len(defn.__annotations__)
    geo = {"origin": (0, 0, 0), "domain": (2, nj, 5)} if defn is beyond_the_top else {}
    _compare(defn, n, (2, nj, 6 if geo else 5), **geo)


def test_only_outputs_filled_before_read_skip_the_copy_in():
    """The decision itself, read from the code for C-ordered fields: x of the solve is written
    back but never copied in; every other definition copies its x in."""
    copy_in = re.compile(r"\bx_column_\[[^\]]*\] = x_\[")
    copy_out = re.compile(r"\bx_\[[^\]]*\] = x_column_\[")

    def source(defn):
        return sk.stencil(defn, backend="c").generate(backend="c")

    src = source(solve_x)
    assert copy_out.search(src) and not copy_in.search(src)
    for defn in KEEPS_COPY:
        src = source(defn)
        assert copy_in.search(src) and copy_out.search(src), defn.__name__
