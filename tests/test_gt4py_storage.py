"""GT4Py's storage API in ``stencilkit.storage`` (contract.md section 9): the allocation calls
every GT4Py demo makes, ``__gt_origin__`` as a computation's default origin, and GT4Py's
backend names wherever a backend is named. The origins are checked against GT4Py's own
"numpy" backend when it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval
from stencilkit import storage as gt_storage


def shift_copy(src: Field[np.float64], dst: Field[np.float64]):
    with computation(PARALLEL), interval(...):
        dst = src[1, 0, 0] - src[-1, 0, 0]  # noqa: F841


@pytest.mark.parametrize("backend", ["numpy", "gt:cpu_ifirst", "gt:cpu_kfirst", "dace:cpu"])
def test_allocation_calls(backend):
    if sk.backends()["c"].reason and backend != "numpy":
        pytest.skip(sk.backends()["c"].reason)
    shape = (6, 5, 4)
    z = gt_storage.zeros(shape, np.float64, backend=backend, aligned_index=(1, 1, 0))
    o = gt_storage.ones(shape, dtype=np.float32, backend=backend, aligned_index=(2, 0, 0))
    f = gt_storage.full(shape, 3.5, backend=backend, aligned_index=(0, 0, 0))
    e = gt_storage.empty(shape, backend=backend, aligned_index=(1, 2, 3))
    assert (z == 0).all() and z.dtype == np.float64 and z.__gt_origin__ == (1, 1, 0)
    assert (o == 1).all() and o.dtype == np.float32 and o.__gt_origin__ == (2, 0, 0)
    assert (f == 3.5).all() and f.__gt_origin__ == (0, 0, 0)
    assert e.shape == shape and e.__gt_origin__ == (1, 2, 3)
    data = np.arange(120.0).reshape(shape)
    a = gt_storage.from_array(data, backend=backend, aligned_index=(1, 1, 1))
    assert np.array_equal(a, data) and a.__gt_origin__ == (1, 1, 1)
    assert not np.shares_memory(a, data)
    b = gt_storage.from_array(data, np.float32, backend=backend)
    assert b.dtype == np.float32 and getattr(b, "__gt_origin__", None) is None


def test_derived_arrays_do_not_keep_the_origin():
    a = gt_storage.zeros((4, 4, 4), backend="numpy", aligned_index=(1, 1, 0))
    assert a[1:].__gt_origin__ is None and (a + 1).__gt_origin__ is None


def test_dimensions():
    two = gt_storage.ones((5, 6), backend="numpy", dimensions=("I", "J"), aligned_index=(1, 1))
    assert two.shape == (5, 6) and two.__gt_origin__ == (1, 1)
    col = gt_storage.zeros((7,), backend="numpy", dimensions=("K",))
    assert col.shape == (7,)
    with pytest.raises(sk.StencilError, match="dimensions"):
        gt_storage.zeros((5, 6), backend="numpy", dimensions=("I", "J", "K"))
    with pytest.raises(sk.StencilError, match="dimensions"):
        gt_storage.zeros((5, 6, 3), backend="numpy", dimensions=("K", "J", "I"))
    with pytest.raises(sk.StencilError, match="aligned_index"):
        gt_storage.zeros((5, 6), backend="numpy", aligned_index=(1, 9))


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_gt_origin_is_the_default_origin(backend):
    if sk.backends()[backend].reason:
        pytest.skip(sk.backends()[backend].reason)
    st = sk.stencil(backend=backend)(shift_copy)
    data = np.random.default_rng(0).random((8, 5, 3))
    src = gt_storage.from_array(data, backend=backend, aligned_index=(2, 0, 0))
    dst = gt_storage.zeros((8, 5, 3), backend=backend, aligned_index=(2, 0, 0))
    st(src, dst, domain=(4, 5, 3))
    want = np.zeros_like(data)
    want[2:6] = data[3:7] - data[1:5]
    np.testing.assert_array_equal(np.asarray(dst), want)
    # an explicit origin wins over __gt_origin__
    dst2 = gt_storage.zeros((8, 5, 3), backend=backend, aligned_index=(2, 0, 0))
    st(src, dst2, origin=(1, 0, 0), domain=(4, 5, 3))
    want2 = np.zeros_like(data)
    want2[1:5] = data[2:6] - data[0:4]
    np.testing.assert_array_equal(np.asarray(dst2), want2)


SHIFT_COPY = """
import numpy as np
from __GT__ import gtscript
from __GT__.gtscript import PARALLEL, Field, computation, interval

def definition(src: Field[np.float64], dst: Field[np.float64]):
    with computation(PARALLEL), interval(...):
        dst = src[1, 0, 0] - src[-1, 0, 0]  # noqa: F841
"""


def test_same_as_gt4py():
    """GT4Py takes origin= here (its own storages carry no origin it reads by default):
    ours, given none, reads the same origin from __gt_origin__."""
    gt4py_storage = pytest.importorskip("gt4py.storage")
    pytest.importorskip("gt4py.cartesian.gtscript")
    from .gtscript_harness import stencils

    ref_st, ours = stencils(SHIFT_COPY, "numpy")
    data = np.random.default_rng(1).random((9, 4, 3))
    src = gt4py_storage.from_array(data, backend="numpy", aligned_index=(3, 0, 0))
    dst = gt4py_storage.zeros(data.shape, backend="numpy", aligned_index=(3, 0, 0))
    ref_st(src, dst, origin=(3, 0, 0), domain=(5, 4, 3))
    s_src = gt_storage.from_array(data, backend="numpy", aligned_index=(3, 0, 0))
    s_dst = gt_storage.zeros(data.shape, backend="numpy", aligned_index=(3, 0, 0))
    ours(s_src, s_dst, domain=(5, 4, 3))
    np.testing.assert_array_equal(np.asarray(s_dst), np.asarray(dst))


def test_gt4py_backend_names_resolve_everywhere():
    assert sk.registry.resolve("gt:cpu_ifirst").name == "c" or sk.backends()["c"].reason
    st = sk.stencil(backend="debug")(shift_copy)
    st(np.zeros((4, 3, 2)), np.zeros((4, 3, 2)))
    with pytest.raises(sk.BackendError, match="did you mean 'c'"):
        sk.registry.resolve("C")
