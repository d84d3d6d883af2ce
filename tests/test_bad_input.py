"""Bad input gets a StencilError naming the stencil, the file and line, and the fix."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk

from . import kernels as K

A = np.random.default_rng(0).random((8, 9))


def _check(exc: sk.StencilError, name: str) -> None:
    text = str(exc)
    assert isinstance(exc, ValueError)
    assert name in text
    assert "fix:" in text


def test_wrong_argument_count(backend):
    st = sk.stencil(K.two_arrays, backend=backend)
    with pytest.raises(sk.ArgumentError) as info:
        st(A)
    _check(info.value, "two_arrays")
    assert "kernels.py" in str(info.value)


def test_non_array_argument(backend):
    with pytest.raises(sk.ArgumentError, match="not an array"):
        sk.stencil(K.blur, backend=backend)("hello")


def test_array_likes_are_accepted(backend):
    ref = sk.stencil(K.blur, backend="numpy")(A)
    np.testing.assert_array_equal(sk.stencil(K.blur, backend=backend)(A.tolist()), ref)


def test_read_only_out(backend):
    out = np.zeros_like(A)
    out.flags.writeable = False
    with pytest.raises(sk.ArgumentError, match="read-only") as info:
        sk.stencil(K.blur, backend=backend)(A, out=out)
    _check(info.value, "blur")


def test_out_of_wrong_shape_never_writes_outside(backend):
    st = sk.stencil(K.blur, backend=backend)
    st(A)  # compile first, so the compiled path is the one checked
    small = np.zeros((4, 4))
    with pytest.raises(sk.ArgumentError, match="shape"):
        st(A, out=small)
    assert not small.any()


def test_out_complex_into_real(backend):
    with pytest.raises(sk.ArgumentError, match="complex"):
        sk.stencil(K.complex_kernel, backend=backend)(A + 0j, out=np.zeros_like(A))


def test_secondary_array_shrinking_after_compile(backend):
    st = sk.stencil(K.two_arrays, backend=backend)
    st(A, A)
    with pytest.raises(sk.ArgumentError, match="smaller"):
        st(A, A[:3, :3].copy())


def test_unsupported_syntax_points_at_the_line():
    def k(a):
        return [a[0, 0]][0]

    with pytest.raises(sk.StencilSyntaxError) as info:
        sk.stencil(k)(A)
    assert "test_bad_input.py" in str(info.value)
    assert "not supported" in str(info.value)


def test_unsupported_call():
    def k(a):
        return print(a[0, 0])

    with pytest.raises(sk.StencilSyntaxError, match="print"):
        sk.stencil(k)(A)


def test_nan_cval_for_integer_result(backend):
    ints = np.arange(20, dtype=np.int32).reshape(4, 5)
    with pytest.raises(sk.StencilTypeError, match="cval"):
        sk.stencil(K.centre, cval=np.nan, backend=backend)(ints)
    # a float result takes NaN as the border value, as in Numba
    r = sk.stencil(K.blur, cval=np.nan, backend=backend)(A)
    assert np.isnan(r[0, 0]) and not np.isnan(r[1, 1])


def test_dynamic_index_outside_neighborhood_is_reported(backend):
    st = sk.stencil(K.dynamic_offset, neighborhood=((-1, 1), (0, 0)), backend=backend)
    st(A, 1)
    with pytest.raises(sk.ArgumentError, match="neighbo"):
        st(A, 5)


def test_constant_index_outside_explicit_neighborhood():
    with pytest.raises(sk.StencilTypeError, match="outside"):
        sk.stencil(K.blur, neighborhood=((0, 1), (-1, 1)))(A)


def test_standard_index_out_of_range(backend):
    st = sk.stencil(K.weighted, standard_indexing=("w",), backend=backend)
    with pytest.raises(sk.ArgumentError, match="out of range"):
        st(np.ones(10), np.ones(2))


def test_unsupported_dtype():
    with pytest.raises(sk.ArgumentError, match="dtype"):
        sk.stencil(K.blur)(A.astype(np.float16))


def test_not_every_path_returns():
    def k(a):
        if a[0, 0] > 0:
            return 1.0

    with pytest.raises(sk.StencilTypeError, match="path"):
        sk.stencil(k)(A)


def test_unknown_keyword_at_call():
    with pytest.raises(sk.ArgumentError, match="keyword"):
        sk.stencil(K.blur)(A, cval=3)


def test_unknown_backend():
    with pytest.raises(sk.BackendError, match="unknown backend"):
        sk.stencil(K.blur, backend="fortran")(A)


def test_out_aliasing_an_input_sees_the_old_input(backend):
    st = sk.stencil(K.blur, backend=backend)
    expected = A.copy()
    expected[1:-1, 1:-1] = st(A)[1:-1, 1:-1]
    inplace = A.copy()
    st(inplace, out=inplace)
    np.testing.assert_array_equal(inplace, expected)
    # a shifted view of the same buffer as out
    base = np.random.default_rng(3).random((10, 10))
    view_in, view_out = base[:-1], base[1:]
    expected = view_out.copy()
    expected[1:-1, 1:-1] = st(view_in.copy())[1:-1, 1:-1]
    st(view_in, out=view_out)
    np.testing.assert_array_equal(view_out, expected)


def test_ndarray_subclasses_are_keyed_by_dtype(backend, tmp_path):
    st = sk.stencil(K.int_add, backend=backend)
    ints = np.memmap(tmp_path / "i.dat", dtype=np.int64, mode="w+", shape=(4, 5))
    ints[:] = np.arange(20).reshape(4, 5)
    floats = np.memmap(tmp_path / "f.dat", dtype=np.float64, mode="w+", shape=(4, 5))
    floats[:] = np.arange(20).reshape(4, 5) + 0.5
    assert st(ints).dtype == np.int64
    r = st(floats)
    assert r.dtype == np.float64 and r[0, 0] == 1.5 + 5.5


def test_a_known_signature_with_a_bad_out_gets_the_same_errors(backend):
    # A call whose signature is cached goes straight to the entry point (on "c" without the
    # PointCall frame): shape, writability, overlap and alignment still get the slow path.
    st = sk.stencil(K.blur, backend=backend)
    want = st(A, out=np.zeros_like(A))
    with pytest.raises(sk.ArgumentError, match="shape") as info:
        st(A, out=np.zeros((7, 9)))
    _check(info.value, "blur")
    read_only = np.zeros_like(A)
    read_only.flags.writeable = False
    with pytest.raises(sk.ArgumentError, match="read-only"):
        st(A, out=read_only)
    same = A.copy()
    assert np.array_equal(st(same, out=same)[1:-1, 1:-1], want[1:-1, 1:-1])
    raw = np.zeros(A.size * 8 + 1, dtype=np.uint8)[1:].view(np.float64).reshape(A.shape)
    assert np.array_equal(st(A, out=raw)[1:-1, 1:-1], want[1:-1, 1:-1])
