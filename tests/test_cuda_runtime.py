"""The "cuda" backend's host side without a GPU: launch plans, grid sizes, argument binding,
host-side evaluation; end to end on the CPU emulator (tests/cuda_emulator.py) against the
"numpy" backend and NumPy references; on a real device only where there is one."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.compile import PointRequest, driver
from stencilkit.ir import kernel as k
from stencilkit.registry import cuda as cuda_registry
from stencilkit.runtime import cuda as rt
from stencilkit.targets.cuda import CUDA_PLATFORM, Dim, HostLoop, Launch

from . import computations as C
from . import kernels as K

I = k.INDEX


def _sym(name, dtype=I, **kw):
    return k.Symbol(name, np.dtype(dtype), **kw)


def _c(v):
    return k.Constant(np.int64(v), dtype=I)


# ---------------------------------------------------------------- host side, no device


def test_evaluate_bounds_on_the_host():
    n = _sym("n")
    e = k.MathCall("max", (_c(0), k.MathCall("min", (k.Sym(n, dtype=I), _c(5)), dtype=I)),
                   dtype=I)
    assert rt.evaluate(e, {"n": 9}) == 5
    assert rt.evaluate(e, {"n": -3}) == 0
    assert rt.evaluate(k.Op("-", (k.Sym(n, dtype=I), _c(1)), dtype=I), {"n": 4}) == 3
    with pytest.raises(NotImplementedError):
        rt.evaluate(k.Literal("threadIdx.x", dtype=I), {})


def test_launch_config_covers_each_dimension():
    n0, n1, n2 = _sym("n0"), _sym("n1"), _sym("n2")
    dims = tuple(Dim(_sym(f"i{d}"), _c(1), k.Op("-", (k.Sym(s, dtype=I), _c(1)), dtype=I))
                 for d, s in enumerate((n2, n1, n0)))  # dimension 0 (x) first
    launch = Launch("f", (), dims, (), ())
    grid, block = rt.launch_config(launch, {"n0": 10, "n1": 100, "n2": 1000})
    assert block == (32, 4, 2)
    assert grid == (-(-998 // 32), -(-98 // 4), -(-8 // 2))
    assert all(g * b >= n for g, b, n in zip(grid, block, (998, 98, 8)))
    assert rt.launch_config(launch, {"n0": 2, "n1": 100, "n2": 1000}) is None  # empty
    huge = Launch("g", (), dims[:2], (), ())
    grid, _ = rt.launch_config(huge, {"n2": 10, "n1": 10**7})
    assert grid[1] == rt.GRID_LIMITS[1]  # the grid-stride loop does the rest
    assert rt.launch_config(Launch("h", (), (), (), ()), {}) == ((1, 1, 1), (1, 1, 1))


def test_bind_maps_parameters_by_their_properties():
    a = np.zeros((4, 6), np.float32)[:, ::2]  # strides in elements: 6 and 2
    base = _sym("a_", np.float32, pointer=True, properties=frozenset({k.BasePointer("a")}))
    shape = _sym("a_shape_1_", properties=frozenset({k.ShapeOf("a", 1)}))
    stride0 = _sym("a_stride_0_", properties=frozenset({k.StrideOf("a", 0)}))
    stride1 = _sym("a_stride_1_", properties=frozenset({k.StrideOf("a", 1)}))
    scale = _sym("s_", np.float64, properties=frozenset({k.ScalarArgument("s")}))
    env = rt.bind((base, shape, stride0, stride1, scale), ("a", "s"), (a, 2.5))
    assert env["a_"] is a and env["a_shape_1_"] == 3
    assert (env["a_stride_0_"], env["a_stride_1_"]) == (6, 2)
    assert env["s_"] == 2.5
    launch = Launch("f", (base, shape, scale), (), (), ())
    status = np.zeros(1, np.int32)
    args = rt.kernel_arguments(launch, env, status)
    assert args[0] is a and args[-1] is status
    assert type(args[1]) is np.int64 and type(args[2]) is np.float64


def test_point_kernel_plan():
    st = sk.stencil(K.lap3d)
    st.generate(np.ones((4, 5, 6)), backend="cuda")
    entry = driver.run(PointRequest(cuda_registry.BACKEND,
                                    *_point_build_args(st, np.ones((4, 5, 6))))).entry
    launches = entry.plan.launches()
    assert len(launches) == 2  # the border (under fill_border), the interior
    border, interior = launches
    assert len(border.conditions) == 1 and len(border.dims) == 2
    assert [d.counter.name for d in interior.dims] == ["i2", "i1", "i0"]  # unit stride on x


def _point_build_args(st, *args):
    from stencilkit.lower.point import Layout

    typed, layout, out_dtype, types = st._last_build
    _, src = st._parse()
    return typed, Layout(layout.unit_stride, layout.out_unit_stride), src, out_dtype, types


def test_planes_multistage_is_a_host_loop_of_launches():
    comp = sk.stencil(C.planes)
    plan = comp._build(cuda_registry.BACKEND, None)[1].entry.plan
    loops = [s for s in plan.steps if isinstance(s, HostLoop)]
    assert loops and all(isinstance(x, Launch) for x in loops[0].body)
    assert any(p.name == loops[0].counter.name for x in loops[0].body for p in x.params)


def test_platform_refuses_nothing_it_cannot_print():
    kf = k.KernelFunction("f", (), (k.SetError(1),), (), status=_sym("sk_error", np.int32))
    assert CUDA_PLATFORM.lower(kf).body  # set_error is a store into the thread's status


# ---------------------------------------------------------------- on the CPU emulator


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


@pytest.fixture
def emulated(monkeypatch):
    from .cuda_emulator import install

    install(monkeypatch)
    return "cuda"


@needs_gxx
def test_emulated_point_kernels_match_numpy(emulated):
    rng = np.random.default_rng(3)
    a3 = rng.random((9, 10, 11))
    np.testing.assert_array_equal(sk.stencil(K.lap3d, backend="cuda")(a3),
                                  sk.stencil(K.lap3d, backend="numpy")(a3))
    a2 = rng.random((12, 13)).astype(np.float32)[::-1, ::2]  # negative, non-unit strides
    for mode in ("constant", "wrap", "reflect"):
        np.testing.assert_array_equal(sk.stencil(mode, backend="cuda")(K.blur)(a2),
                                      sk.stencil(mode, backend="numpy")(K.blur)(a2))


@needs_gxx
def test_emulated_error_channel(emulated):
    st = sk.stencil(K.dynamic_offset, neighborhood=((-1, 2), (0, 0)), backend="cuda")
    st(np.ones((6, 4)), 1)
    with pytest.raises(sk.ArgumentError, match="left the declared neighborhood"):
        st(np.ones((6, 4)), 5)


@needs_gxx
def test_emulated_computations_match_references(emulated):
    rng = np.random.default_rng(4)
    a, b, c, d = (rng.random((5, 6, 12)) + 2.0 for _ in range(4))
    ref_c, ref_d = C.ref_tridiagonal(a, b, c, d)
    sk.stencil(C.tridiagonal, backend="cuda")(a, b, c, d)
    np.testing.assert_allclose(d, ref_d, rtol=1e-12)
    q = rng.random((4, 5, 9))
    expected = C.ref_implicit(q, 0.3)
    sk.stencil(C.implicit_diffusion, backend="cuda")(q, nu=0.3)
    np.testing.assert_allclose(q, expected, rtol=1e-12)


@needs_gxx
def test_emulated_parloop_inc_and_reductions(emulated):
    rng = np.random.default_rng(5)
    tri = rng.integers(0, 50, (400, 3))
    cells, nodes = sk.Set(400), sk.Set(50)
    v = sk.Dat(cells, data=rng.random(400))

    @sk.kernel
    def spread(x, acc, total, lo):
        for i in range(3):
            acc[i, 0] += x[0]
        total[0] += x[0]
        lo[0] = min(lo[0], x[0])

    for race in ("atomic", "color"):
        acc, total, lo = sk.Dat(nodes), sk.Global(1, 1.0), sk.Global(1, 9.0)
        sk.par_loop(spread, cells, v(sk.READ), acc(sk.INC, sk.Map(cells, nodes, 3, tri)),
                    total(sk.INC), lo(sk.MIN), backend="cuda", race=race)
        expect = np.zeros(50)
        np.add.at(expect, tri.reshape(-1), np.repeat(v.data, 3))
        np.testing.assert_allclose(acc.data, expect, rtol=1e-13)
        np.testing.assert_allclose(total.data[0], 1.0 + v.data.sum(), rtol=1e-13)
        assert lo.data[0] == v.data.min()


# ---------------------------------------------------------------- on a real device

needs_device = pytest.mark.skipif(cuda_registry.probe() is not None,
                                  reason=f"no CUDA device: {cuda_registry.probe()}")


@needs_device
def test_cupy_arrays_in_and_out():
    import cupy as cp

    host = np.random.default_rng(7).random((64, 65, 66))
    st = sk.stencil(K.lap3d, backend="cuda")
    out = st(cp.asarray(host))
    assert isinstance(out, cp.ndarray)
    np.testing.assert_allclose(cp.asnumpy(out), sk.stencil(K.lap3d, backend="numpy")(host),
                               rtol=1e-14)
    np.testing.assert_allclose(st(host), cp.asnumpy(out), rtol=0)  # NumPy: copied both ways
    assert isinstance(sk.zeros((4, 5, 6), backend="cuda"), cp.ndarray)

@needs_device
def test_cupy_computation_and_dats_in_place():
    import cupy as cp

    rng = np.random.default_rng(11)
    inp, coeff = rng.random((32, 33, 16)), rng.random((32, 33, 16))
    out = np.zeros_like(inp)
    sk.stencil(C.hdiff, backend="numpy")(inp, out, coeff)
    d_out = cp.zeros(inp.shape)
    pointer = d_out.data.ptr
    sk.stencil(C.hdiff, backend="cuda")(cp.asarray(inp), d_out, cp.asarray(coeff))
    assert d_out.data.ptr == pointer
    np.testing.assert_allclose(cp.asnumpy(d_out), out, rtol=1e-13)
    cells = sk.Set(1000)
    x = cp.asarray(rng.random(1000))

    @sk.kernel
    def double(a, b):
        b[0] = 2.0 * a[0]

    y = sk.Dat(cells, data=cp.zeros(1000))
    sk.par_loop(double, cells, sk.Dat(cells, data=x)(sk.READ), y(sk.WRITE), backend="cuda")
    assert isinstance(y.data, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(y.data), 2.0 * cp.asnumpy(x))


@needs_gxx
def test_emulated_device_arrays_run_in_place(emulated):
    """Arrays with __cuda_array_interface__ go to the kernel without a transfer; out is
    allocated by the backend's array module; host and device arrays are not mixed."""
    from .cuda_emulator import DeviceArray

    rng = np.random.default_rng(6)
    host = rng.random((7, 8, 9))
    a = host.copy().view(DeviceArray)
    st = sk.stencil(K.lap3d, backend="cuda")
    out = st(a)
    assert isinstance(out, DeviceArray)
    np.testing.assert_array_equal(np.asarray(out), sk.stencil(K.lap3d, backend="numpy")(host))
    given = np.full((7, 8, 9), -1.0).view(DeviceArray)
    assert st(a, out=given) is given  # written in place: no copy came back
    inner = (slice(1, -1),) * 3  # no cval given: out= keeps its border (Numba's rule)
    np.testing.assert_array_equal(np.asarray(given)[inner], np.asarray(out)[inner])
    assert np.asarray(given)[0, 0, 0] == -1.0
    with pytest.raises(sk.ArgumentError, match="some arrays are on the GPU"):
        sk.stencil(K.two_arrays, backend="cuda")(a[0], host[0])
    with pytest.raises(sk.ArgumentError, match="need a GPU backend"):
        sk.stencil(K.lap3d, backend="numpy")(a)
    assert isinstance(sk.zeros((4, 5, 6), backend="cuda"), DeviceArray)


@pytest.mark.parametrize("make", [
    lambda a: a, lambda a: np.asfortranarray(a), lambda a: a[::-1, :, ::2],
    lambda a: np.ascontiguousarray(a.transpose(2, 0, 1)).transpose(1, 2, 0),  # K planes
    lambda a: np.broadcast_to(a[:, :1, :], a.shape),
], ids=["C", "F", "reversed", "k-planes", "broadcast"])
def test_device_copies_keep_unit_strides(make):
    """The transfer to the device keeps each unit-stride axis unit-stride (the kernel may be
    specialized for it), whatever the host layout; here NumPy stands in for CuPy."""
    a = make(np.arange(4 * 5 * 6, dtype=np.float64).reshape(4, 5, 6))
    d = rt.to_device(np, a)
    np.testing.assert_array_equal(d, a)
    for axis in range(3):
        if a.strides[axis] == a.itemsize:
            assert d.strides[axis] == d.itemsize


@pytest.fixture
def no_transfers(emulated, monkeypatch):
    """The emulator's CuPy with its transfers (asarray, asnumpy) refused, but for the read
    of the 4-byte status word: what runs in place copies nothing between host and device."""
    fake = rt._cupy()
    asnumpy = fake.asnumpy

    def refuse(*a, **kw):
        raise AssertionError("a host/device transfer")

    def status_only(a):
        assert a.shape == (1,) and a.dtype == np.int32, "a host/device transfer"
        return asnumpy(a)

    monkeypatch.setattr(fake, "asarray", refuse)
    monkeypatch.setattr(fake, "asnumpy", status_only)
    return fake


def _device(a):
    from .cuda_emulator import DeviceArray

    return np.array(a, copy=True).view(DeviceArray)


@needs_gxx
def test_emulated_computation_on_device_arrays_in_place(no_transfers):
    """A computation called with device arrays runs on them with no transfer (temporaries
    included: hdiff keeps some), writes its outputs into the caller's buffers, and gives the
    "numpy" backend's values; origin/domain are resolved as on the CPU."""
    from .cuda_emulator import DeviceArray

    rng = np.random.default_rng(8)
    inp, coeff = rng.random((10, 11, 5)), rng.random((10, 11, 5))
    hdiff = sk.stencil(C.hdiff, backend="cuda")
    d_in, d_coeff, d_out = _device(inp), _device(coeff), _device(np.full(inp.shape, -1.0))
    buffer = d_out.ctypes.data
    for origin, domain in ((None, None), ((2, 2, 0), (5, 6, 4))):
        out = np.full(inp.shape, -1.0)
        d_out[...] = -1.0
        sk.stencil(C.hdiff, backend="numpy")(inp, out, coeff, origin=origin, domain=domain)
        hdiff(d_in, d_out, d_coeff, origin=origin, domain=domain)
        assert type(d_out) is DeviceArray and d_out.ctypes.data == buffer
        np.testing.assert_allclose(np.asarray(d_out), out, rtol=1e-13, atol=0)
    np.testing.assert_array_equal(np.asarray(d_in), inp)  # read-only fields untouched
    # FORWARD/BACKWARD columns, a scalar, a field both read and written
    q = rng.random((4, 5, 9))
    d_q = _device(q)
    sk.stencil(C.implicit_diffusion, backend="cuda")(d_q, nu=0.3)
    np.testing.assert_allclose(np.asarray(d_q), C.ref_implicit(q, 0.3), rtol=1e-12)
    # IJ and K fields, non-contiguous device views
    u, surf, prof = rng.random((6, 7, 8)), rng.random((7, 7)), rng.random(8)
    ref = np.zeros((6, 7, 8))
    sk.stencil(C.column_ops, backend="numpy")(u, surf, prof, ref)
    d_u = _device(np.asfortranarray(u))
    d_big = _device(np.zeros((6, 14, 8)))
    sk.stencil(C.column_ops, backend="cuda")(d_u, _device(surf), _device(prof),
                                             d_big[:, ::2])
    np.testing.assert_allclose(np.asarray(d_big)[:, ::2], ref, rtol=1e-14)
    assert not np.asarray(d_big)[:, 1::2].any()


@needs_gxx
def test_emulated_computation_device_checks(emulated):
    """The CPU's checks on device fields: halo, dtype, writability, overlap; host and device
    fields not mixed; device fields on a CPU backend refused."""
    lap = sk.stencil(C.lap3d, backend="cuda")
    u, out = _device(np.ones((6, 6, 6))), _device(np.zeros((6, 6, 6)))
    with pytest.raises(sk.ArgumentError, match="'u'.* on the host and 'out' on the GPU"):
        lap(np.ones((6, 6, 6)), out)
    with pytest.raises(sk.ArgumentError, match="need a GPU backend"):
        sk.stencil(C.lap3d, backend="numpy")(u, out)
    with pytest.raises(sk.ArgumentError, match="lacks the halo"):
        lap(u, out, origin=(0, 0, 0))
    with pytest.raises(sk.ArgumentError, match="declared float64"):
        lap(u, _device(np.zeros((6, 6, 6), np.float32)))
    frozen = _device(np.zeros((6, 6, 6)))
    frozen.flags.writeable = False
    with pytest.raises(sk.ArgumentError, match="read-only"):
        lap(u, frozen)
    big = _device(np.zeros((12, 6, 6)))
    with pytest.raises(sk.ArgumentError, match="'out' is written and shares memory"):
        lap(big[:6], big[3:9][::-1])
    lap(big[:6], big[6:], origin=(1, 1, 1))  # adjacent, not overlapping (K halo: given)
    with pytest.raises(sk.ArgumentError, match="not aligned"):
        raw = np.zeros(6 * 6 * 6 * 8 + 1, np.uint8)[1:].view(np.float64).reshape(6, 6, 6)
        lap(u, raw.view(type(u)))


@needs_gxx
def test_emulated_dlpack_only_device_arrays(emulated):
    """An array known only by a CUDA __dlpack__ runs in place too (viewed by from_dlpack)."""
    from .cuda_emulator import DLPackOnly

    rng = np.random.default_rng(9)
    u = rng.random((6, 7, 8))
    ref = np.zeros_like(u)
    sk.stencil(C.lap3d, backend="numpy")(u, ref, origin=(1, 1, 1))  # reads K - 1, K + 1
    out = _device(np.zeros_like(u))
    sk.stencil(C.lap3d, backend="cuda")(DLPackOnly(_device(u)), DLPackOnly(out),
                                        origin=(1, 1, 1))
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-14)
    got = sk.stencil(K.lap3d, backend="cuda")(DLPackOnly(_device(u)))
    np.testing.assert_array_equal(np.asarray(got), sk.stencil(K.lap3d, backend="numpy")(u))


@needs_gxx
def test_emulated_parloop_on_device_dats(emulated, monkeypatch):
    """A Dat built on a device array holds it (no copy): the loop reads and writes it in
    place (only the host's map and blocks are transferred), INC through a map and a direct
    write give the "numpy" backend's values; a CPU backend refuses it."""
    from .cuda_emulator import DeviceArray

    fake, transferred = rt._cupy(), []
    asarray = fake.asarray
    monkeypatch.setattr(fake, "asarray", lambda a: transferred.append(a) or asarray(a))
    rng = np.random.default_rng(10)
    tri = rng.integers(0, 40, (300, 3))
    cells, nodes = sk.Set(300), sk.Set(40)
    x = rng.random(300)

    @sk.kernel
    def spread(v, acc, twice):
        for i in range(3):
            acc[i, 0] += v[0]
        twice[0] = 2.0 * v[0]

    results, on_device = {}, []
    for backend, wrap in (("numpy", np.array), ("cuda", _device)):
        v, acc, twice = (sk.Dat(s, data=wrap(d)) for s, d in
                         ((cells, x), (nodes, np.zeros(40)), (cells, np.zeros(300))))
        if backend == "cuda":
            on_device += [v.data, acc.data, twice.data]
        sk.par_loop(spread, cells, v(sk.READ), acc(sk.INC, sk.Map(cells, nodes, 3, tri)),
                    twice(sk.WRITE), backend=backend, race="atomic")
        results[backend] = (np.array(acc.data), np.array(twice.data))
    np.testing.assert_allclose(results["cuda"][0], results["numpy"][0], rtol=1e-13)
    np.testing.assert_array_equal(results["cuda"][1], results["numpy"][1])
    assert all(type(d) is DeviceArray for d in on_device)
    assert transferred and not any(np.shares_memory(a, d) for a in transferred
                                   for d in on_device)  # only the map and the blocks
    d_acc = _device(np.zeros(40))
    acc = sk.Dat(nodes, data=d_acc)
    assert acc.data is d_acc  # the caller's device array, written in place
    sk.par_loop(spread, cells, sk.Dat(cells, data=_device(x))(sk.READ),
                acc(sk.INC, sk.Map(cells, nodes, 3, tri)), sk.Dat(cells)(sk.WRITE),
                backend="cuda", race="color")
    np.testing.assert_allclose(np.asarray(d_acc), results["numpy"][0], rtol=1e-13)
    acc.data = np.arange(40.0)  # host values into the device Dat, as on every backend
    assert acc.data is d_acc
    np.testing.assert_array_equal(np.asarray(d_acc), np.arange(40.0))
    with pytest.raises(sk.ArgumentError, match="holds a device array"):
        sk.par_loop(spread, cells, sk.Dat(cells, data=_device(x))(sk.READ),
                    sk.Dat(nodes)(sk.INC, sk.Map(cells, nodes, 3, tri)),
                    sk.Dat(cells)(sk.WRITE), backend="numpy")
        _ = sk.Dat(cells).data  # a lazy loop runs here at the latest
    with pytest.raises(sk.ArgumentError, match="expected C-contiguous"):
        sk.Dat(nodes, data=_device(np.zeros(80))[::2])
