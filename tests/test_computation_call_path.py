"""A computation's call path: the bound call and small domains.

The bound call (``runtime/bound_computation.py``): a call with the arrays, origin and domain
of this thread's previous call goes straight to its launch, skipping the checks, the
geometry and the build lookup. These tests change, between calls, each thing the binding
must notice (another array of the same shape, an array reshaped or retyped in place, a
read-only flag, an origin, a storage's ``__gt_origin__``, the configuration, a scalar) and
compare every result with the "numpy" backend's, so that a stale binding gives other
numbers or a missing error.

Small domains: below ``PARALLEL_MIN_WORK`` points a computation's parallel loops and regions
run on the calling thread (no team to start).
"""

from __future__ import annotations

import gc
import re
import threading
import weakref

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, adapters, computation, interval
from stencilkit.api import multistage
from stencilkit.errors import ArgumentError
from stencilkit.lower.point import PARALLEL_MIN_WORK
from stencilkit_apps.definitions import tridiagonal_temporaries

from .computations import planes, ref_planes
from .requires import needs_c


def scaled_diffusion(inp: Field[np.float64], coeff: Field[np.float64],
                     out: Field[np.float64], *, alpha: float = 1.0):
    with computation(PARALLEL), interval(...):
        lap = 4.0 * inp - (inp[1, 0, 0] + inp[-1, 0, 0] + inp[0, 1, 0] + inp[0, -1, 0])
        out = inp - alpha * coeff * lap  # noqa: F841


@pytest.fixture(autouse=True)
def _c_backend():
    needs_c()


def _fields(shape, seed=0, n=3):
    rng = np.random.default_rng(seed)
    return [rng.random(shape) for _ in range(n)]


class _CountingFullPath:
    """Counts the calls of ``stencil`` that take the full path (``run_bound``)."""

    def __init__(self, monkeypatch, stencil):
        self.calls = 0
        full = multistage.ComputationStencil.run_bound

        def counted(st, *args, **kwargs):
            self.calls += st is stencil
            return full(st, *args, **kwargs)
        monkeypatch.setattr(multistage.ComputationStencil, "run_bound", counted)


def _expected(inp, coeff, out, **call):
    ref = sk.stencil(scaled_diffusion, backend="numpy")
    expect = out.copy()
    ref(inp, coeff, expect, **call)
    return expect


def test_the_bound_path_is_taken_and_results_follow_the_data(monkeypatch):
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff, out = _fields((8, 9, 5))
    counted = _CountingFullPath(monkeypatch, st)
    call = dict(origin=(1, 1, 0), domain=(6, 7, 5))
    for step in range(3):
        inp[...] = np.random.default_rng(step).random(inp.shape)
        expect = _expected(inp, coeff, out, **call)
        st(inp, coeff, out, **call)
        np.testing.assert_array_equal(out, expect)
    assert counted.calls == 1  # the first call binds; the others launch directly


def test_another_array_of_the_same_shape_is_written():
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff, out = _fields((8, 9, 5))
    other_inp, other_out = _fields((8, 9, 5), seed=1, n=2)
    call = dict(origin=(1, 1, 0), domain=(6, 7, 5))
    st(inp, coeff, out, **call)
    before = out.copy()
    expect = _expected(other_inp, coeff, other_out, **call)
    st(other_inp, coeff, other_out, **call)
    np.testing.assert_array_equal(other_out, expect)
    np.testing.assert_array_equal(out, before)  # the bound output was not written


def test_in_place_changes_of_an_array_are_noticed():
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff, out = _fields((8, 9, 6))
    call = dict(origin=(1, 1, 0), domain=(6, 7, 6))
    st(inp, coeff, out, **call)
    # the same objects, reshaped in place: the geometry (and the halo check) is redone
    inp.shape = coeff.shape = out.shape = (8, 6, 9)
    expect = _expected(inp, coeff, out, origin=(1, 1, 0), domain=(6, 4, 9))
    st(inp, coeff, out, origin=(1, 1, 0), domain=(6, 4, 9))
    np.testing.assert_array_equal(out, expect)
    with pytest.raises(ArgumentError, match="halo"):  # domain=(6, 7, 6) no longer fits
        st(inp, coeff, out, **call)
    # retyped in place (a view's dtype): refused as on a first call
    out.dtype = np.int64
    with pytest.raises(sk.StencilError, match="int64"):
        st(inp, coeff, out, origin=(1, 1, 0), domain=(6, 4, 9))
    out.dtype = np.float64
    out.flags.writeable = False
    with pytest.raises(ArgumentError, match="written by the stencil but the array is read"):
        st(inp, coeff, out, origin=(1, 1, 0), domain=(6, 4, 9))


def test_an_array_resized_in_place_is_checked_again():
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff, out = (a.copy() for a in _fields((8, 9, 5)))  # owning their data
    call = dict(origin=(1, 1, 0), domain=(6, 7, 5))
    st(inp, coeff, out, **call)
    # the same object and the same strides, fewer planes: the domain no longer fits
    for a in (inp, coeff, out):
        a.resize((5, 9, 5), refcheck=False)
    with pytest.raises(ArgumentError, match="halo"):
        st(inp, coeff, out, **call)


def test_arrays_that_overlap_or_need_copies_after_binding():
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff, out = _fields((8, 8, 3))
    call = dict(origin=(1, 1, 0), domain=(6, 6, 3))
    st(inp, coeff, out, **call)
    # the written field is also read: GT4Py's semantics, not the bound launch
    a = inp.copy()
    expect = _expected(a.copy(), coeff, a.copy(), **call)
    st(a, coeff, a, **call)
    np.testing.assert_array_equal(a, expect)
    # a view of a read field as the written one, after binding the owners
    st(inp, coeff, out, **call)
    a = inp.copy()
    expect = _expected(a.copy(), coeff, a.copy(), **call)
    st(a, coeff, a[...], **call)
    np.testing.assert_array_equal(a, expect)
    # views bound, then views of another array with the same shape and strides
    whole = np.stack(_fields((8, 8, 3), seed=3))
    st(whole[0], whole[1], whole[2], **call)
    expect = _expected(whole[1], whole[1], whole[0].copy(), **call)
    st(whole[1], whole[1], whole[0], **call)
    np.testing.assert_array_equal(whole[0], expect)
    # a misaligned array of the same shape, strides and dtype: an aligned copy
    st(inp, coeff, out, **call)
    raw = np.zeros(out.nbytes + 8, np.uint8)
    odd = raw[1:1 + out.nbytes].view(np.float64).reshape(out.shape)
    assert odd.strides == out.strides and not odd.flags.aligned
    odd[...] = out
    expect = _expected(inp, coeff, odd.copy(), **call)
    st(inp, coeff, odd, **call)
    np.testing.assert_array_equal(odd, expect)


def test_origin_domain_and_scalars_per_call():
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff, out = _fields((9, 9, 4))
    for origin, domain, alpha in [((1, 1, 0), (7, 7, 4), 1.0), ((1, 1, 0), (7, 7, 4), 0.5),
                                  ((1, 1, 0), (5, 6, 3), 0.5), ((2, 2, 1), (5, 6, 3), 0.5),
                                  ([2, 2, 1], [5, 6, 3], 2),
                                  ({"_all_": (1, 2, 0)}, (7, 6, 4), 0.25),
                                  (np.array([1, 1, 0]), (7, 7, 4), 3.0)]:
        out[...] = 0  # what a stale origin or domain would write shows
        expect = _expected(inp, coeff, out, origin=origin, domain=domain, alpha=alpha)
        st(inp, coeff, out, origin=origin, domain=domain, alpha=alpha)
        np.testing.assert_array_equal(out, expect)
    # a scalar the bound path cannot take: the full path's error
    st(inp, coeff, out, origin=(1, 1, 0), domain=(7, 7, 4), alpha=1.0)
    with pytest.raises(ArgumentError, match="scalar parameter 'alpha'"):
        st(inp, coeff, out, origin=(1, 1, 0), domain=(7, 7, 4), alpha=1j)
    with pytest.raises(ArgumentError, match="unexpected argument 'alfa'"):
        st(inp, coeff, out, origin=(1, 1, 0), domain=(7, 7, 4), alfa=1.0)


def test_fields_by_name_and_storages_origins():
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff, out = (sk.storage.from_array(a, aligned_index=(1, 1, 0), backend="c")
                       for a in _fields((10, 10, 3)))
    for _ in range(2):
        expect = _expected(np.asarray(inp), np.asarray(coeff), np.asarray(out).copy(),
                           origin=(1, 1, 0), domain=(6, 6, 3))
        st(out=out, coeff=coeff, inp=inp, domain=(6, 6, 3))
        np.testing.assert_array_equal(np.asarray(out), expect)
    for s in (inp, coeff, out):
        s.__gt_origin__ = (2, 2, 0)  # the default origin moves: the binding must notice
    expect = _expected(np.asarray(inp), np.asarray(coeff), np.asarray(out).copy(),
                       origin=(2, 2, 0), domain=(6, 6, 3))
    st(out=out, coeff=coeff, inp=inp, domain=(6, 6, 3))
    np.testing.assert_array_equal(np.asarray(out), expect)


def test_the_configuration_and_the_stencils_options_rebind(monkeypatch):
    st = sk.stencil(scaled_diffusion)
    inp, coeff, out = _fields((8, 8, 3))
    call = dict(origin=(1, 1, 0), domain=(6, 6, 3))
    with sk.configure(backend="c"):
        st(inp, coeff, out, **call)
        counted = _CountingFullPath(monkeypatch, st)
        st(inp, coeff, out, **call)
        assert counted.calls == 0  # bound
        with sk.configure(backend="numpy"):  # another configuration: the full path
            st(inp, coeff, out, **call)
            assert counted.calls == 1
        st(inp, coeff, out, **call)
        assert counted.calls == 2
        st.backend = "numpy"  # the stencil's own option: the full path again
        st(inp, coeff, out, **call)
        assert counted.calls == 3
        st(inp, coeff, out, **call)
        assert counted.calls == 3


def test_an_array_at_a_freed_arrays_id_is_checked():
    """Owners are bound by id: an object that takes the id of a freed one must still be
    checked (CPython hands the freed object's memory to the next object of its size)."""
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff = _fields((8, 8, 3), n=2)
    call = dict(origin=(1, 1, 0), domain=(6, 6, 3))
    other = np.ones((8, 8, 3))
    for make in (lambda: inp[...],  # a view of a read field (GT4Py's copy semantics)
                 lambda: np.zeros((8, 8, 3), order="F"),  # an owner, other strides
                 lambda: other[...]):  # a view of an array the call does not pass
        out = np.zeros((8, 8, 3))
        st(inp, coeff, out, **call)
        freed = id(out)
        del out
        new = make()
        if id(new) != freed:
            pytest.skip("this interpreter did not reuse the freed array's id")
        expect = _expected(inp.copy(), coeff, np.array(new), **call)
        st(inp, coeff, new, **call)
        np.testing.assert_array_equal(new, expect)


class _Claimed(np.ndarray):
    """An array type an adapter claims (as the MPI, device and xarray adapters claim
    theirs)."""

    __slots__ = ()


class _Unclaimed(np.ndarray):
    """An array type no adapter claims, of the same object size as ``_Claimed``."""

    __slots__ = ()


class _ClaimingAdapter(adapters.Adapter):
    priority = 50

    def __init__(self):
        self.calls = 0

    def claims_type(self, cls):
        return issubclass(cls, _Claimed)

    def claims(self, value):
        return isinstance(value, _Claimed)

    def computation_call(self, st, args, kwargs, origin, domain, validate_args, exec_info):
        self.calls += 1


def test_an_adapters_array_at_a_freed_arrays_id_goes_to_the_adapter():
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff = _fields((8, 8, 3), n=2)
    call = dict(origin=(1, 1, 0), domain=(6, 6, 3))
    adapter = adapters.register(_ClaimingAdapter())
    try:
        out = _Unclaimed((8, 8, 3))  # an ndarray subclass: the call binds it
        st(inp, coeff, out, **call)
        assert adapter.calls == 0
        freed = id(out)
        del out
        claimed = _Claimed((8, 8, 3))  # owns its memory, as the freed array did
        if id(claimed) != freed:
            pytest.skip("this interpreter did not reuse the freed array's id")
        st(inp, coeff, claimed, **call)
        assert adapter.calls == 1
    finally:
        adapters.unregister(adapter)


def test_the_binding_keeps_no_array_alive():
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff, out = _fields((8, 8, 3))
    st(inp, coeff, out, origin=(1, 1, 0), domain=(6, 6, 3))
    gone = weakref.ref(out)
    del out
    gc.collect()
    assert gone() is None
    fresh = np.zeros((8, 8, 3))
    expect = _expected(inp, coeff, fresh, origin=(1, 1, 0), domain=(6, 6, 3))
    st(inp, coeff, fresh, origin=(1, 1, 0), domain=(6, 6, 3))
    np.testing.assert_array_equal(fresh, expect)


def test_threads_keep_their_own_bindings():
    st = sk.stencil(scaled_diffusion, backend="c")
    call = dict(origin=(1, 1, 0), domain=(10, 10, 4))
    per_thread = [_fields((12, 12, 4), seed=s) for s in range(4)]
    expects = [_expected(*f, **call) for f in per_thread]
    errors = []

    def work(i):
        try:
            for _ in range(30):
                st(*per_thread[i], **call)
                np.testing.assert_array_equal(per_thread[i][2], expects[i])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_an_aliased_call_is_never_bound(monkeypatch):
    st = sk.stencil(scaled_diffusion, backend="c")
    inp, coeff = _fields((8, 8, 3), n=2)
    call = dict(origin=(1, 1, 0), domain=(6, 6, 3))
    counted = _CountingFullPath(monkeypatch, st)
    for _ in range(3):  # inp is read and written: GT4Py's semantics, a snapshot per call
        a = inp.copy()
        expect = _expected(a.copy(), coeff, a.copy(), **call)
        st(a, coeff, a, **call)
        np.testing.assert_array_equal(a, expect)
    assert counted.calls >= 3


# ---------------------------------------------------------------- small domains


@pytest.mark.parametrize("definition", [scaled_diffusion, tridiagonal_temporaries, planes])
def test_small_domains_start_no_team(definition):
    """Every team a computation starts is behind the work test (OpenMP's ``if``): a plain
    loop, a column sweep and a plane-by-plane region."""
    source = sk.stencil(definition, backend="c").generate()
    body = source[source.index("--- multistage 0"):]
    teams = re.findall(r"#pragma omp parallel\b.*", body)
    assert teams
    for pragma in teams:
        assert f"if(ni * nj * nk >= {PARALLEL_MIN_WORK})" in pragma, pragma


@pytest.mark.parametrize(("shape", "parallel"), [((3, 3, 2), False), ((40, 40, 12), True)])
def test_both_sides_of_the_threshold_give_the_references_numbers(shape, parallel):
    domain = (shape[0] - 2, shape[1], shape[2])
    assert (np.prod(domain) >= PARALLEL_MIN_WORK) == parallel
    rng = np.random.default_rng(5)
    a, q = rng.random(shape), np.zeros(shape)
    expect = ref_planes(a, q)
    sk.stencil(planes, backend="c")(a, q, origin=(1, 0, 0), domain=domain)
    np.testing.assert_allclose(q, expect, rtol=1e-12)
    tri = _fields(shape, seed=6, n=5)
    tri[1] += 4.0  # diagonally dominant
    got, want = tri[4].copy(), tri[4].copy()
    sk.stencil(tridiagonal_temporaries, backend="c")(*tri[:4], got)
    sk.stencil(tridiagonal_temporaries, backend="numpy")(*tri[:4], want)
    np.testing.assert_allclose(got, want, rtol=1e-13)
