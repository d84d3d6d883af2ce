"""The point-kernel call path: the exact-types entry of the latest specialization.

A call whose argument types (and dtype objects) are exactly those of the previous call with
``out=`` goes straight to the C entry's ``call_exact`` without computing the signature key.
These tests alternate signatures that share everything the C entry itself checks (ndim,
item size, strides) so that taking the wrong specialization would give other numbers: each
result is compared with the "numpy" backend's.
"""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.errors import ArgumentError

from .requires import needs_c


def scaled_sum(a, s):
    return a[-1] * s + a[1] - a[0]


def lap2(a):
    return a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1] - 4 * a[0, 0]


class _CountingSpecs(dict):
    """The stencil's specialization table, counting lookups (the keyed path)."""

    lookups = 0

    def get(self, key, default=None):
        type(self).lookups += 1
        return super().get(key, default)


def _pair(func):
    return sk.stencil(func, backend="c"), sk.stencil(func, backend="numpy")


def _bound(shape, seed):
    """lap2 on "c" called twice with out= (so the exact path is bound), and its arrays."""
    needs_c()
    ours, ref = _pair(lap2)
    a = np.random.default_rng(seed).random(shape)
    out = np.zeros_like(a)
    ours(a, out=out)
    ours(a, out=out)
    return ours, ref, a, out


def test_the_exact_path_is_taken_and_skips_the_key():
    st, _, a, out = _bound((20, 30), 0)
    assert st._exact is not None, "a unit-stride call with out= binds the exact path"
    specs = _CountingSpecs(st._specs)
    st._specs = specs
    _CountingSpecs.lookups = 0
    for _ in range(5):
        st(a, out=out)
    assert _CountingSpecs.lookups == 0
    f32 = a.astype(np.float32)
    st(f32, out=out)  # other types: the keyed path (and a build)
    assert _CountingSpecs.lookups >= 1
    st(f32, out=out)  # the keyed path finds it and binds it
    _CountingSpecs.lookups = 0
    st(f32, out=out)
    assert _CountingSpecs.lookups == 0


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.complex64, np.uint64])
def test_alternating_same_itemsize_dtypes(dtype):
    """float64, int64, uint64 and complex64 all have 8-byte items: only the dtype tells the
    specializations apart, and the C entry does not see it."""
    needs_c()
    ours, ref = _pair(lap2)
    rng = np.random.default_rng(1)
    base = rng.integers(-50, 50, (9, 11))
    arrays = [base.astype(np.float64), base.astype(dtype), base.astype(np.float64) + 0.5,
              base.astype(dtype)]
    for a in arrays * 2:
        out_dtype = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
        got = np.zeros(a.shape, out_dtype)
        want = np.zeros(a.shape, out_dtype)
        ours(a, out=got)
        ref(a, out=want)
        np.testing.assert_array_equal(got, want)


def test_alternating_scalar_types():
    """int, float, bool and NumPy scalars, and ints beyond int64 (typed uint64): each call
    computes with the type of its own scalar."""
    needs_c()
    ours, ref = _pair(scaled_sum)
    a = np.arange(-8, 9, dtype=np.int64)
    scalars = [3, 2.5, True, -4, np.float32(1.5), 2**63 + 5, -7, np.int8(-3), 2**63 + 5, 1]
    for s in scalars * 2:
        got = np.zeros(a.shape, np.float64)
        want = np.zeros(a.shape, np.float64)
        ours(a, s, out=got)
        ref(a, s, out=want)
        np.testing.assert_array_equal(got, want, err_msg=f"scalar {s!r}")


def test_layouts_subclasses_and_byte_order_after_binding():
    ours, ref, a, out = _bound((12, 14), 2)
    cases = [
        a[:, ::2],                                   # non-unit last stride
        a.T,                                         # transposed
        a.astype(a.dtype.newbyteorder(">")),          # non-native byte order
        np.ma.masked_array(a, mask=a > 0.5),         # an ndarray subclass
        np.asfortranarray(a),
        a,
    ]
    for x in cases:
        got = np.zeros(x.shape)
        want = np.zeros(x.shape)
        ours(x, out=got)
        ref(np.asarray(x), out=want)
        np.testing.assert_array_equal(got, want)
    # misaligned input (a view one byte into a buffer) and out overlapping the input
    raw = np.zeros(a.size * 8 + 1, np.uint8)
    mis = raw[1:].view(np.float64).reshape(a.shape)
    mis[...] = a
    got, want = np.zeros_like(a), np.zeros_like(a)
    ours(mis, out=got)
    ref(a, out=want)
    np.testing.assert_array_equal(got, want)
    b = a.copy()
    ours(b, out=b)  # out is the input: computed from a copy; the border keeps its values
    want = a.copy()
    ref(a, out=want)
    np.testing.assert_array_equal(b, want)


def test_errors_after_binding_are_the_keyed_paths_errors():
    ours, _, a, out = _bound((10, 10), 3)
    with pytest.raises(ArgumentError, match="shape"):
        ours(a, out=np.zeros((10, 11)))
    with pytest.raises(ArgumentError):
        ours(a, out=np.zeros((10, 10), np.float64)[::-1, ::-1].copy()[None])
    with pytest.raises(ArgumentError, match="keyword"):
        ours(a, out=out, bogus=1)
    read_only = np.zeros_like(a)
    read_only.flags.writeable = False
    with pytest.raises(ArgumentError):
        ours(a, out=read_only)
    np.testing.assert_array_equal(ours(a, out=out), out)  # and the exact path still works


# ---------------------------------------------------------------- the C call slot

def weighted(a, w):
    return w[0] * a[-1] + w[1] * a[0] + w[2] * a[1]


def _python_calls(st, *args, **kwargs) -> int:
    """How many Python frames named ``__call__`` one call of ``st`` enters."""
    import sys

    seen = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "__call__":
            seen.append(frame.f_code)

    sys.setprofile(profile)
    try:
        st(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return len(seen)


def test_bound_calls_enter_no_python_frame():
    st, ref, a, out = _bound((16, 18), 4)
    assert type(st) is sk.PointStencil, "binding the slot does not change the object's class"
    assert _python_calls(st, a, out=out) == 0, "a bound call runs from the C call slot"
    want = np.zeros_like(a)
    ref(a, out=want)
    np.testing.assert_array_equal(out, want)
    # anything else goes through the Python __call__, and gives its results
    assert _python_calls(st, a) >= 1
    assert _python_calls(st, a.astype(np.float32), out=out) >= 1
    np.testing.assert_array_equal(st(a), ref(a))


def test_the_bound_object_looks_the_same():
    import inspect
    import pickle

    st, _, a, out = _bound((8, 9), 5)
    plain = sk.stencil(lap2, backend="c")
    assert type(st).__name__ == "PointStencil" and type(st).__qualname__ == "PointStencil"
    assert type(st).__call__ is sk.PointStencil.__call__
    assert inspect.signature(st) == inspect.signature(plain)
    assert st.__name__ == "lap2" and st.neighborhood == ((-1, 1), (-1, 1))
    clone = pickle.loads(pickle.dumps(st))
    np.testing.assert_array_equal(clone(a), st(a))
    # alternating signatures rebind the slot (a specialization's first call binds nothing)
    f32 = a.astype(np.float32)
    for x in (a, f32, a, f32, a):
        st(x, out=out)
        st(x, out=out)
        assert _python_calls(st, x, out=out) == 0
        assert type(st) is sk.PointStencil


def test_subclasses_keep_their_own_call():
    needs_c()

    class Counting(sk.PointStencil):
        calls = 0

        def __call__(self, *args, **kwargs):
            type(self).calls += 1
            return super().__call__(*args, **kwargs)

    st = Counting(lap2, backend="c")
    a = np.random.default_rng(6).random((7, 7))
    out = np.zeros_like(a)
    for _ in range(4):
        st(a, out=out)
    assert type(st) is Counting and Counting.calls == 4


def test_statuses_and_refusals_from_the_call_slot():
    """A status the kernel returns (an absolute index out of range), an overlap, a read-only
    or misshapen out: each as on the Python path, after the slot is bound."""
    needs_c()
    st = sk.stencil(weighted, standard_indexing=("w",), backend="c")
    a = np.arange(10.0)
    w = np.array([1.0, 2.0, 3.0])
    out = np.zeros_like(a)
    st(a, w, out=out)
    st(a, w, out=out)
    assert _python_calls(st, a, w, out=out) == 0
    with pytest.raises(ArgumentError, match="out of range"):
        st(a, np.ones(2), out=out)
    b = a.copy()
    st(b, w, out=b)  # out is the input: computed from a copy
    want = a.copy()
    want[1:-1] = a[:-2] + 2 * a[1:-1] + 3 * a[2:]
    np.testing.assert_array_equal(b, want)
    read_only = np.zeros_like(a)
    read_only.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        st(a, w, out=read_only)
    with pytest.raises(ArgumentError, match="shape"):
        st(a, w, out=np.zeros(11))
    with pytest.raises(ArgumentError, match="keyword"):
        st(a, w, out=out, extra=1)
    with pytest.raises(ArgumentError, match="argument"):
        st(a, out=out)
    np.testing.assert_array_equal(st(a, w, out=out)[1:-1], want[1:-1])


def test_read_only_and_borrowed_inputs_through_the_direct_view():
    """The entry reads an exact ndarray's fields itself (no buffer protocol): a read-only
    input, a view of another array's memory and an array that owns nothing (from a bytes
    object) compute as on the "numpy" backend; a read-only out is still refused."""
    ours, ref, a, out = _bound((9, 12), 8)
    frozen = a.copy()
    frozen.flags.writeable = False
    borrowed = np.frombuffer(a.tobytes(), dtype=a.dtype).reshape(a.shape)  # read-only too
    window = np.zeros((11, 14))[1:-1, 1:-1]
    window[...] = a
    for x in (frozen, borrowed, window, a):
        got, want = np.zeros_like(a), np.zeros_like(a)
        ours(x, out=got)
        ours(x, out=got)
        ref(a, out=want)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ArgumentError, match="read-only"):
        ours(a, out=np.frombuffer(np.zeros_like(a).tobytes()).reshape(a.shape))


def test_empty_and_zero_stride_arrays_after_binding():
    """NumPy 2 gives empty arrays zero strides (the buffer protocol reports contiguous
    ones), and broadcast views have zero strides for real: both as the "numpy" backend."""
    ours, ref, a, out = _bound((6, 7), 9)
    for shape in [(0, 7), (6, 0), (0, 0)]:
        empty = np.zeros(shape)
        assert ours(empty, out=np.zeros(shape)).shape == shape
        assert ours(empty).shape == shape
    row = np.random.default_rng(9).random(7)
    wide = np.broadcast_to(row, (6, 7))
    got, want = np.zeros((6, 7)), np.zeros((6, 7))
    ours(wide, out=got)
    ours(wide, out=got)
    ref(np.ascontiguousarray(wide), out=want)
    np.testing.assert_array_equal(got, want)
