"""Computations (contract.md section 2) on every backend against NumPy loop references."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk

from . import computations as C

rng = np.random.default_rng(42)


def _st(func, backend, **kw):
    return sk.stencil(func, backend=backend, **kw)


def test_tridiagonal(backend):
    shape = (5, 6, 12)
    a, c = rng.random(shape), rng.random(shape)
    b = 3.0 + rng.random(shape)
    d = rng.random(shape)
    ref_c, ref_d = C.ref_tridiagonal(a, b, c, d)
    _st(C.tridiagonal, backend)(a, b, c, d)
    np.testing.assert_allclose(d, ref_d, rtol=1e-13)
    np.testing.assert_allclose(c, ref_c, rtol=1e-13)


def test_tridiagonal_with_origin_and_domain(backend):
    shape = (8, 8, 10)
    a, c, d = rng.random(shape), rng.random(shape), rng.random(shape)
    b = 3.0 + rng.random(shape)
    expect_c, expect_d = c.copy(), d.copy()
    sub = (slice(1, 4), slice(2, 7), slice(0, 10))
    rc, rd = C.ref_tridiagonal(a[sub], b[sub], c[sub], d[sub])
    expect_c[sub], expect_d[sub] = rc, rd
    _st(C.tridiagonal, backend)(a, b, c, d, origin=(1, 2, 0), domain=(3, 5, 10))
    np.testing.assert_allclose(d, expect_d, rtol=1e-13)
    np.testing.assert_allclose(c, expect_c, rtol=1e-13)


def test_tridiagonal_on_non_contiguous_layouts(backend):
    shape = (4, 5, 9)
    arrays = [np.asfortranarray(rng.random(shape)) for _ in range(4)]
    arrays[1] += 3.0
    ref_c, ref_d = C.ref_tridiagonal(*arrays)
    _st(C.tridiagonal, backend)(*arrays)
    np.testing.assert_allclose(arrays[3], ref_d, rtol=1e-13)


def test_hdiff(backend):
    shape = (14, 13, 5)
    inp = rng.random(shape)
    coeff = 0.1 * rng.random(shape)
    out = np.zeros(shape)
    st = _st(C.hdiff, backend)
    assert st.extents["in_field"] == (-2, 2, -2, 2)
    st(inp, out, coeff, origin=(2, 2, 0))
    np.testing.assert_allclose(out, C.ref_hdiff(inp, coeff), rtol=1e-13, atol=1e-14)


def test_default_origin_is_shared_by_equally_shaped_fields(backend):
    # All fields have one shape: they share the largest halo any needs, (2, 2, 0), so that
    # out[2:-2, 2:-2] receives the result computed from in_field[2:-2, 2:-2]'s neighbourhood.
    shape = (14, 13, 5)
    inp, coeff = rng.random(shape), 0.1 * rng.random(shape)
    out = np.zeros(shape)
    info: dict = {}
    _st(C.hdiff, backend)(inp, out, coeff, exec_info=info)
    assert info["domain"] == (10, 9, 5)
    assert {f: info["origin"][f] for f in ("in_field", "out_field", "coeff")} == {
        "in_field": (2, 2, 0), "out_field": (2, 2, 0), "coeff": (2, 2, 0)}
    ref = C.ref_hdiff(inp, coeff)
    np.testing.assert_allclose(out[2:12, 2:11], ref[2:12, 2:11], rtol=1e-13, atol=1e-14)
    assert not out[:2].any() and not out[12:].any()


def test_default_origin_is_each_fields_own_halo(backend):
    # Shapes differ: in_field needs a halo of 2 (origin (2, 2, 0)); out_field and coeff need
    # none (origin 0); the domain is the largest that fits every field: 14 - 2 - 2 = 10.
    shape = (14, 13, 5)
    inp = rng.random(shape)
    coeff = 0.1 * rng.random((10, 9, 5))
    out = np.zeros((10, 9, 5))
    info: dict = {}
    _st(C.hdiff, backend)(inp, out, coeff, exec_info=info)
    assert info["domain"] == (10, 9, 5)
    assert info["origin"]["in_field"] == (2, 2, 0) and info["origin"]["out_field"] == (0, 0, 0)
    shifted_coeff = np.zeros(shape)
    shifted_coeff[2:12, 2:11] = coeff
    ref = C.ref_hdiff(inp, shifted_coeff)
    np.testing.assert_allclose(out, ref[2:12, 2:11], rtol=1e-13, atol=1e-14)


def test_hdiff_ir_shows_stages_and_extents():
    st = sk.stencil(C.hdiff, backend="numpy")
    text = st.ir
    assert "multistage 0: PARALLEL" in text
    assert "extent i[-1,1] j[-1,1]" in text   # lap is needed one point around
    assert "extent i[-1,0] j[0,0]" in text    # flx is read at i-1


def test_upwind_advection(backend):
    shape = (4, 5, 9)
    q, w = rng.random(shape), rng.random(shape) - 0.5
    out = np.zeros(shape)
    _st(C.upwind, backend)(q, w, out, 0.1)
    np.testing.assert_allclose(out, C.ref_upwind(q, w, 0.1), rtol=1e-13)


def test_implicit_vertical_diffusion(backend):
    q = rng.random((3, 4, 15))
    expected = C.ref_implicit(q, 0.3)
    _st(C.implicit_diffusion, backend)(q, nu=0.3)   # keyword arguments
    np.testing.assert_allclose(q, expected, rtol=1e-12)


def test_parallel_offsets_in_three_directions(backend):
    u = rng.random((9, 8, 7))
    out = np.zeros_like(u)
    _st(C.lap3d, backend)(u, out, origin={"u": (1, 1, 1), "out": (1, 1, 1)})
    ref = np.zeros_like(u)
    ref[1:-1, 1:-1, 1:-1] = (u[2:, 1:-1, 1:-1] + u[:-2, 1:-1, 1:-1] + u[1:-1, 2:, 1:-1]
                             + u[1:-1, :-2, 1:-1] + u[1:-1, 1:-1, 2:] + u[1:-1, 1:-1, :-2]
                             - 6 * u[1:-1, 1:-1, 1:-1])
    np.testing.assert_allclose(out, ref, rtol=1e-13)


def test_ij_and_k_fields(backend):
    u = rng.random((6, 5, 4))
    surface = rng.random((7, 5))
    profile = rng.random(4)
    out = np.zeros_like(u)
    _st(C.column_ops, backend)(u, surface, profile, out)
    ref = u * profile[None, None, :] + (surface[1:7, :] - surface[0:6, :])[:, :, None]
    # atol: a sum that cancels to ~1e-4 is off by an ulp of its terms (~1e-17), more than
    # rtol allows of it; which values meet depends on the tests run before (one rng)
    np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-15)


def test_forward_accumulation(backend):
    u = rng.random((3, 4, 11))
    total = np.zeros_like(u)
    _st(C.column_sum, backend)(u, total)
    np.testing.assert_allclose(total, np.cumsum(u, axis=2), rtol=1e-13)


@pytest.mark.parametrize("nk", [1, 2, 3, 4, 6])
def test_interval_corner_cases(backend, nk):
    u = np.zeros((2, 2, nk))
    out = np.full_like(u, -1.0)
    _st(C.corners, backend)(u, out)
    expected = np.full(nk, -1.0)
    expected[:1] = 1.0
    expected[1:3] = 2.0
    expected[-1:] = 3.0
    np.testing.assert_array_equal(out[0, 0], expected)


def test_while_loop(backend):
    x = 0.5 + rng.random((4, 3, 2))
    out = np.zeros_like(x)
    _st(C.newton_sqrt, backend)(x, out)
    np.testing.assert_allclose(out, np.sqrt(x), rtol=1e-14)


def test_if_elif_else(backend):
    u = rng.random((5, 4, 3))
    out = np.zeros_like(u)
    _st(C.branches, backend)(u, out)
    np.testing.assert_array_equal(out, np.where(u > 0.7, 1.0, np.where(u > 0.3, 2 * u, -u)))


def test_a_computation_writing_temporaries_only_changes_nothing(backend):
    # GT4Py accepts it; once its temporaries were removed, the GPU backends had no written
    # field to choose a call's variant on (StopIteration, found by test_random_computations)
    u = rng.random((6, 5, 4))
    out = np.full_like(u, 7.0)
    st = _st(C.temporaries_only, backend)
    for _ in range(2):  # the general path, then the bound one
        st(u, out, origin=(1, 1, 0), domain=(4, 3, 4))
    np.testing.assert_array_equal(out, 7.0)
    assert (u < 1).all()


def test_function_helpers_and_externals(backend):
    u = rng.random((7, 6, 2))
    out = np.zeros_like(u)
    _st(C.gradient, backend, externals={"SCALE": 0.5})(u, out, origin=(1, 1, 0))
    dx = u[2:, 1:-1] - u[:-2, 1:-1]
    dy = u[1:-1, 2:] - u[1:-1, :-2]
    np.testing.assert_allclose(out[1:-1, 1:-1], 0.5 * np.sqrt(dx * dx + dy * dy), rtol=1e-14)
    assert not out[0].any()


def test_exec_info(backend):
    u = rng.random((6, 6, 6))
    info: dict = {}
    # the default origin would be 0 along K (never moved by the vertical halo)
    _st(C.lap3d, backend)(u, np.zeros_like(u), origin=(1, 1, 1), exec_info=info)
    assert info["call_start_time"] <= info["run_end_time"]
    assert info["domain"] == (4, 4, 4)  # u has origin 1 and needs 1 more point beyond


# ------------------------------------------------------------------ call errors


def test_missing_halo_is_reported(backend):
    st = _st(C.hdiff, backend)
    inp = rng.random((10, 10, 3))
    with pytest.raises(sk.ArgumentError, match="halo") as info:
        st(inp, np.zeros_like(inp), np.zeros_like(inp), origin=(1, 2, 0), domain=(6, 6, 3))
    assert "in_field" in str(info.value)


def test_dtype_mismatch(backend):
    st = _st(C.lap3d, backend)
    u = rng.random((5, 5, 5)).astype(np.float32)
    with pytest.raises(sk.ArgumentError, match="float64"):
        st(u, np.zeros((5, 5, 5)))


def test_wrong_ndim_and_missing_argument(backend):
    st = _st(C.lap3d, backend)
    with pytest.raises(sk.ArgumentError, match="3-D"):
        st(np.zeros((5, 5)), np.zeros((5, 5, 5)))
    with pytest.raises(sk.ArgumentError, match="missing"):
        st(np.zeros((5, 5, 5)))


def test_written_field_aliasing_another(backend):
    """One array as input and output reads the old values, as in GT4Py (issue 28,
    test_gtscript_aliasing.py); two different arrays that overlap stay an error."""
    u = rng.random((5, 5, 5))
    expected = u.copy()
    _st(C.lap3d, backend)(u.copy(), expected, origin=(1, 1, 1))
    _st(C.lap3d, backend)(u, u, origin=(1, 1, 1))
    np.testing.assert_array_equal(u, expected)
    with pytest.raises(sk.ArgumentError, match="shares memory"):
        _st(C.lap3d, backend)(u[:4], u[1:])


def test_storages_have_the_backend_layout_and_alignment():
    s = sk.zeros((6, 5, 4), backend="c")
    assert s.shape == (6, 5, 4) and s.dtype == np.float64
    assert s.strides == (5 * 8, 8, 6 * 5 * 8)      # IJ planes contiguous, J unit stride
    assert s.ctypes.data % 64 == 0
    h = sk.ones((4, 4), np.float32, backend="numpy", halo=1)
    assert h.shape == (6, 6) and h.flags.c_contiguous and (h == 1).all()
    a = rng.random((3, 4, 5))
    st = sk.as_storage(a, backend="c")
    np.testing.assert_array_equal(st, a)
    assert sk.full((2, 2, 2), 7.0, backend="c").sum() == 56.0


def _host(x, backend):
    """A NumPy copy of a storage (CuPy's arrays convert to NumPy explicitly only)."""
    from stencilkit import registry, storage
    from stencilkit.integrations import is_device

    if not is_device(x):
        return np.asarray(x)
    return storage.array_module(registry.resolve(backend)).asnumpy(x)


def test_tridiagonal_on_storages(backend):
    shape = (6, 7, 11)
    host = [rng.random(shape), 3.0 + rng.random(shape), rng.random(shape), rng.random(shape)]
    a, b, c, d = (sk.as_storage(x, backend=backend) for x in host)
    ref_c, ref_d = C.ref_tridiagonal(*host)
    _st(C.tridiagonal, backend)(a, b, c, d)
    np.testing.assert_allclose(_host(d, backend), ref_d, rtol=1e-13)
    np.testing.assert_allclose(_host(c, backend), ref_c, rtol=1e-13)


def test_storage_api_on_every_backend(backend):
    """sk.empty/zeros/ones/full/as_storage give the same values on every backend: a
    non-scalar fill value broadcasts, a host array becomes a storage of the backend (on a
    GPU: a device copy), and a storage of the backend is itself."""
    row = np.arange(5.0)
    full = sk.full((3, 4, 5), row, backend=backend)
    np.testing.assert_array_equal(_host(full, backend), np.broadcast_to(row, (3, 4, 5)))
    np.testing.assert_array_equal(_host(sk.full((2, 3), 7, np.int32, backend=backend), backend),
                                  np.full((2, 3), 7, np.int32))
    np.testing.assert_array_equal(_host(sk.zeros((2, 3, 4), backend=backend), backend), 0.0)
    np.testing.assert_array_equal(_host(sk.ones((4,), halo=1, backend=backend), backend), 1.0)
    for host in (rng.random((4, 5, 6)), rng.random((6, 7))[::2, ::-1],
                 np.broadcast_to(rng.random(6), (3, 6)), np.zeros((0, 3))):
        stored = sk.as_storage(host, backend=backend)
        assert stored.shape == host.shape and stored.dtype == host.dtype
        np.testing.assert_array_equal(_host(stored, backend), host)
        assert stored.size == 0 or sk.as_storage(stored, backend=backend) is stored


def test_malformed_definitions_are_syntax_errors():
    from stencilkit import PARALLEL, Field, computation, interval

    def bad_policy(a: Field[float]):
        with computation(42), interval(...):
            a = a + 1.0  # noqa: F841

    def outside(a: Field[float]):
        a = a + 1.0  # noqa: F841
        with computation(PARALLEL), interval(...):
            a = a + 1.0

    def no_annotation(a):
        with computation(PARALLEL), interval(...):
            a = a + 1.0  # noqa: F841

    for func, match in ((bad_policy, "PARALLEL"), (outside, "inside"),
                        (no_annotation, "annotation")):
        with pytest.raises(sk.StencilSyntaxError, match=match) as info:
            sk.stencil(func)
        assert "test_computations.py" in str(info.value)
