"""Point kernels whose rows are short, run as one loop over the flattened plane
(``passes/short_rows.py``) on the C backend: the same values as Numba's ``@stencil`` and the
"numpy" backend, ``out``'s border untouched, on shapes around the row-length limit and the
run length, on arrays whose rows are padded (the plain loops), and for bodies that must not
be flattened because their thrown-away border columns would fail or never end."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry
from stencilkit.passes.short_rows import ROWS, SHORT_ROW


def _needs_c():
    reason = registry.REGISTRY["c"].probe()
    if reason is not None:
        pytest.skip(f"backend c: {reason}")


def lap3(a):
    return a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1] \
        - 6.0 * a[0, 0, 0]


def skewed(a, b, s):
    # asymmetric reads (two columns left, one right), a branch, a second array and a scalar
    x = a[0, -1, -2] - b[0, 1, 1] * s
    if x > 0.25:
        x = x * 0.5 + a[1, 1, 1]
    return x if a[0, 0, 0] < 0.75 else -x


def four_d(a):
    return a[0, 0, -1, 0] + a[0, 0, 1, 0] + a[0, 0, 0, -1] + a[0, 0, 0, 1] + a[1, 0, 0, 0]


SHAPES = [(3, 3, 3), (4, 16, 16), (5, 7, 3), (3, ROWS + 5, SHORT_ROW),
          (3, 2 * ROWS + 3, SHORT_ROW - 1), (3, 6, SHORT_ROW + 1), (4, 40, 9), (3, 5, 2)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_numba(shape, numba_stencil):
    _needs_c()
    rng = np.random.default_rng(sum(shape))
    a, b = rng.random(shape), rng.random(shape)
    ours_lap, ours_skewed = sk.stencil(lap3, backend="c"), sk.stencil(skewed, backend="c")
    ref_lap, ref_skewed = numba_stencil(lap3), numba_stencil(skewed)
    np.testing.assert_array_equal(ours_lap(a), ref_lap(a))
    np.testing.assert_array_equal(ours_skewed(a, b, 0.3), ref_skewed(a, b, 0.3))
    # out= with values in it: the border keeps them (twice: the second call takes the
    # bound C call slot)
    for _ in range(2):
        got, want = rng.random(shape), None
        want = got.copy()
        ours_skewed(a, b, 0.3, out=got)
        ref_skewed(a, b, 0.3, out=want)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex128])
def test_other_dtypes_and_four_dimensions(dtype):
    _needs_c()
    rng = np.random.default_rng(7)
    a = (rng.random((3, 4, 11, 12)) * 100).astype(dtype)
    got = sk.stencil(four_d, backend="c")(a)
    np.testing.assert_array_equal(got, sk.stencil(four_d, backend="numpy")(a))


@pytest.mark.parametrize("layout", ["padded rows", "larger second array", "sliced columns",
                                    "fortran"])
def test_layouts_that_run_the_plain_loops(layout):
    _needs_c()
    rng = np.random.default_rng(3)
    big = rng.random((5, 12, 14))
    a = big[:, :, :10]  # rows padded: the row stride is 14, not 10
    b = rng.random((5, 12, 10))
    if layout == "larger second array":
        a, b = b, rng.random((5, 13, 10))
    elif layout == "sliced columns":
        a = big[:, :, ::2]
    elif layout == "fortran":
        a, b = np.asfortranarray(b), b
    got = np.full(a.shape, 9.0)
    want = got.copy()
    sk.stencil(skewed, backend="c")(a, b, 0.1, out=got)
    sk.stencil(skewed, backend="numpy")(a, b, 0.1, out=want)
    np.testing.assert_array_equal(got, want)


def test_generated_code_flattens_only_safe_bodies():
    _needs_c()
    a = np.random.default_rng(0).random((4, 8, 8))
    flat = sk.stencil(lap3, backend="c")
    flat(a)
    assert "sk_plane" in flat.generate()

    def runtime_offset(a, j):
        return a[0, 0, j[0, 0, 0]]

    def with_loop(a):
        s = 0.0
        for q in range(2):
            s += a[0, 0, q - 1]
        return s

    j = np.zeros(a.shape, np.int64)
    for f, args in [(runtime_offset, (a, j)), (with_loop, (a,))]:
        st = sk.stencil(f, backend="c", neighborhood=((0, 0), (0, 0), (-1, 1)))
        st(*args)
        assert "sk_plane" not in st.generate(), f.__name__
    reflect = sk.stencil("reflect", backend="c")(lap3)
    reflect(a)
    assert "sk_plane" not in reflect.generate()


def test_border_columns_that_would_fail_are_not_computed():
    """A run-time offset and an absolute index that are in range at every interior point
    but not at the border columns (which a flattened run would also compute): no error."""
    _needs_c()

    def runtime_offset(a, j):
        return a[0, 0, j[0, 0, 0]]

    def absolute(a, j, w):
        return a[0, 0, 0] * w[j[0, 0, 0]]

    shape = (3, 6, 7)
    a = np.random.default_rng(1).random(shape)
    j = np.ones(shape, np.int64)
    j[:, :, 0] = j[:, :, -1] = 50  # only the border columns hold the bad index
    w = np.arange(3.0)
    for f, args, opts in [(runtime_offset, (a, j), {"neighborhood": ((0, 0), (0, 0), (-1, 1))}),
                          (absolute, (a, j, w), {"standard_indexing": ("w",),
                                                 "neighborhood": ((0, 0), (0, 0), (-1, 1))})]:
        got = sk.stencil(f, backend="c", **opts)(*args)
        want = sk.stencil(f, backend="numpy", **opts)(*args)
        np.testing.assert_array_equal(got, want)


def test_a_loop_that_ends_only_inside_is_not_run_at_the_border_columns(tmp_path):
    """A while loop that ends for every interior value and never for the border columns'
    (odd) ones: computed there it would hang with the GIL released, so a subprocess."""
    _needs_c()
    code = textwrap.dedent("""
        import numpy as np
        import stencilkit as sk

        def halve(a):
            x = a[0, 0, 0]
            n = 0
            while x != 0:
                x = x - 2
                n += 1
            return n + a[0, 0, -1] * 0 + a[0, 0, 1] * 0

        a = np.full((3, 5, 6), 4, np.int64)
        a[:, :, 0] = a[:, :, -1] = 3
        out = sk.stencil(halve, backend="c")(a)
        assert (out[1:-1, 1:-1, 1:-1] == 2).all(), out
        print("done")
    """)
    script = tmp_path / "halve.py"  # a file: the frontend reads the kernel's source
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-2000:]
