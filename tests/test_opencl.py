"""What only the OpenCL backend has: device choice, pyopencl arrays in place, race modes
and work-group reductions, refusals (no complex, no fp64), the generated OpenCL C.

The whole parametrized suite runs on "opencl" through the backend fixture; these tests
cover the rest, against NumPy references.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stencilkit as sk

cl = pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install .[opencl])")
if not sk.backends()["opencl"]:
    pytest.skip(f"backend opencl: {sk.backends()['opencl'].reason}", allow_module_level=True)

cla = pytest.importorskip("pyopencl.array")
from stencilkit.runtime import opencl as ocl  # noqa: E402

EXAMPLES = int(os.environ.get("STENCILKIT_HYPOTHESIS_EXAMPLES", "100")) // 4 or 1


@sk.stencil(backend="opencl")
def blur(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])


def blur_ref(a):
    out = np.zeros_like(a)
    out[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    return out


# ---------------------------------------------------------------- devices


def test_backends_reports_the_device_and_reasons():
    assert sk.backends()["opencl"].available
    sk.configure(opencl_device="no such device anywhere")
    status = sk.backends()["opencl"]
    assert not status and "no such device anywhere" in status.reason
    with pytest.raises(sk.BackendError, match="no OpenCL device matches"):
        sk.stencil(blur.func, backend="opencl")(np.ones((4, 4)))


def test_device_by_index_and_by_name():
    devices = ocl._all_devices(cl)
    p, d, dev = devices[0]
    sk.configure(opencl_device=f"{p}:{d}")
    assert ocl.device().device == dev
    sk.configure(opencl_device=dev.name.strip()[:6].upper())  # case-insensitive part of a name
    assert ocl.device().device.name == dev.name
    a = np.random.default_rng(0).random((9, 7))
    np.testing.assert_array_equal(sk.stencil(blur.func, backend="opencl")(a), blur_ref(a))


def test_default_device_is_a_gpu_else_a_cpu():
    dev = ocl.choose_device(None)
    gpus = [d for _, _, d in ocl._all_devices(cl) if d.type & cl.device_type.GPU]
    if gpus:
        assert dev == gpus[0]
    else:
        assert dev.type & cl.device_type.CPU


def test_environment_variable_chooses_the_device(tmp_path):
    code = textwrap.dedent("""
        import stencilkit as sk
        print(sk.backends()["opencl"].reason)
    """)
    env = dict(os.environ, STENCILKIT_OPENCL_DEVICE="7:7", STENCILKIT_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "opencl_device='7:7'" in out.stdout


def test_no_fp64_refuses_double_kernels_by_name(monkeypatch):
    rt = ocl.device()
    monkeypatch.setattr(rt, "fp64", False)
    monkeypatch.setattr(ocl, "_programs", {})

    @sk.stencil(backend="opencl")
    def doubled(a):
        return 2.0 * a[0, 0]

    with pytest.raises(sk.BackendError, match=r"stencil 'doubled'.*no double precision"):
        doubled(np.ones((3, 3)))
    # single precision needs no fp64
    @sk.stencil(backend="opencl")
    def single(a):
        return a[0, 0] + a[0, 1]

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert single(x).dtype == np.float32


def test_complex_is_refused_with_the_reason():
    with pytest.raises(sk.BackendError, match="complex"):
        sk.stencil(blur.func, backend="opencl")(np.ones((4, 4), complex))


# ---------------------------------------------------------------- arrays


def test_pyopencl_arrays_in_place():
    q = ocl.device().queue
    a = np.random.default_rng(1).random((30, 20))
    da = cla.to_device(q, a)
    res = blur(da)
    assert isinstance(res, cla.Array)
    np.testing.assert_array_equal(res.get(), blur_ref(a))
    out = cla.to_device(q, np.full(a.shape, 7.0))
    assert blur(da, out=out) is out
    expect = np.full(a.shape, 7.0)
    expect[1:-1, 1:-1] = blur_ref(a)[1:-1, 1:-1]  # out= keeps the border without cval
    np.testing.assert_array_equal(out.get(), expect)


def test_pyopencl_out_aliasing_an_input_sees_the_old_input():
    q = ocl.device().queue
    a = np.random.default_rng(2).random((12, 11))
    da = cla.to_device(q, a)
    blur(da, out=da)
    expect = a.copy()
    expect[1:-1, 1:-1] = blur_ref(a)[1:-1, 1:-1]
    np.testing.assert_array_equal(da.get(), expect)


def test_pyopencl_arrays_reach_the_stencil_through_their_adapter():
    """A pyopencl array is an adapter's (``adapters.opencl_arrays``), as a CuPy array is:
    the point kernel's call path does not know the type, and a stencil of another backend
    refuses it by name instead of failing in its build."""
    from stencilkit import adapters

    q = ocl.device().queue
    a = np.random.default_rng(4).random((9, 8))
    da = cla.to_device(q, a)
    found = type(adapters.for_value(da))  # registered lazily, by the type's module
    assert (found.__module__, found.__name__) == ("stencilkit.adapters.opencl_arrays",
                                                  "OpenCLArrayAdapter")
    assert adapters.for_value(a) is None
    on_c = sk.stencil(blur.func, backend="numpy")
    with pytest.raises(sk.ArgumentError, match="pyopencl arrays need the 'opencl' backend, "
                                                "not 'numpy'"):
        on_c(da)
    # the device call's specialization is kept apart from the NumPy call's of one signature
    np.testing.assert_array_equal(blur(da).get(), blur(a))
    assert "__kernel void" in blur.generate(da)  # rendered for the array's host stand-in


def test_strided_numpy_and_pyopencl_arrays():
    base = np.random.default_rng(3).random((40, 30))
    view = base[::2, ::-3]
    np.testing.assert_array_equal(blur(view), blur_ref(np.ascontiguousarray(view)))
    q = ocl.device().queue
    dv = cla.to_device(q, base)[:, ::2]  # a non-unit last stride on the device
    np.testing.assert_array_equal(blur(dv).get(), blur_ref(base[:, ::2]))


def test_storages_are_numpy_arrays_the_device_copies_in_one_piece():
    s = sk.zeros((8, 9, 10), backend="opencl")
    assert isinstance(s, np.ndarray) and s.flags.c_contiguous


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.sampled_from(["float64", "float32", "int32",
                                                                  "int64", "uint8", "bool"]))
def test_shapes_and_dtypes_against_numpy(ni, nj, dtype):
    rng = np.random.default_rng(ni * 41 + nj)
    a = (rng.random((ni, nj)) * 100).astype(dtype)

    def k(x):
        return x[-1, 1] - x[0, 0] * 2

    ours = sk.stencil(k, backend="opencl")(a)
    ref = sk.stencil(k, backend="numpy")(a)
    assert ours.dtype == ref.dtype
    np.testing.assert_array_equal(ours, ref)


# ---------------------------------------------------------------- ParLoops


@sk.kernel
def scatter(acc, x, total, lo, hi):
    for i in range(3):
        acc[i, 0] += x[0]
    total[0] += x[0]
    lo[0] = min(lo[0], x[0])
    hi[0] = max(hi[0], x[0])


@pytest.mark.parametrize("race", ["color", "atomic"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "int64"])
@settings(max_examples=max(1, EXAMPLES // 4), deadline=None)
@given(n_cells=st.integers(0, 300), n_nodes=st.integers(1, 50), seed=st.integers(0, 2**16))
def test_parloop_inc_and_reductions(race, dtype, n_cells, n_nodes, seed):
    rng = np.random.default_rng(seed)
    conn = rng.integers(0, n_nodes, (n_cells, 3))
    vals = (rng.random(n_cells) * 10).astype(dtype)
    cells, nodes = sk.Set(n_cells), sk.Set(n_nodes)
    m = sk.Map(cells, nodes, 3, conn)
    x = sk.Dat(cells, data=vals)
    acc = sk.Dat(nodes, dtype=dtype)
    total, lo, hi = (sk.Global(1, v, dtype=dtype) for v in (1, 1000, -1000))
    sk.ParLoop(scatter, cells, acc(sk.INC, m), x(sk.READ), total(sk.INC), lo(sk.MIN),
               hi(sk.MAX), backend="opencl", race=race).compute()
    expect = np.zeros(n_nodes, dtype)
    np.add.at(expect, conn.ravel(), np.repeat(vals, 3))
    if dtype.startswith("float"):
        rtol = 1e-5 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(acc.data, expect, rtol=rtol)
        np.testing.assert_allclose(total.data[0], 1 + vals.sum(dtype=np.float64), rtol=rtol)
    else:
        np.testing.assert_array_equal(acc.data, expect)
        assert total.data[0] == 1 + vals.sum()
    assert lo.data[0] == min([1000, *vals])
    assert hi.data[0] == max([-1000, *vals])


@sk.kernel
def small_scatter(acc, x):
    for i in range(2):
        acc[i, 0] += x[0]


@sk.kernel
def small_reduce(x, total, lo, hi):
    for j in range(3):
        total[j] += x[0] * (j + 1)
        lo[j] = min(lo[j], x[0] - j)
        hi[j] = max(hi[j], x[0] + j)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "float64"])
def test_parloop_without_atomic_add_colours_and_reduces_over_many_groups(dtype):
    """int8/uint16 have no atomic add here: race="atomic" colours instead. Without shared
    writes, 3000 elements (47 work-groups of 64, a work-item each) reduce into 3-component
    Globals through the groups' partials; int8 sums wrap as NumPy's do."""
    rng = np.random.default_rng(3)
    n, t = 3000, 37
    conn = rng.integers(0, t, (n, 2))
    vals = rng.integers(0, 100, n).astype(dtype)
    cells, nodes = sk.Set(n), sk.Set(t)
    acc = sk.Dat(nodes, dtype=dtype)
    total = sk.Global(3, dtype=dtype)
    lo, hi = sk.Global(3, [50, 50, 50], dtype=dtype), sk.Global(3, [7, 7, 7], dtype=dtype)
    x = sk.Dat(cells, data=vals)
    loop = sk.ParLoop(small_scatter, cells, acc(sk.INC, sk.Map(cells, nodes, 2, conn)),
                      x(sk.READ), backend="opencl", race="atomic")
    loop.compute()
    sk.ParLoop(small_reduce, cells, x(sk.READ), total(sk.INC), lo(sk.MIN), hi(sk.MAX),
               backend="opencl").compute()
    expect = np.zeros(t, dtype)
    with np.errstate(over="ignore"):
        np.add.at(expect, conn.ravel(), np.repeat(vals, 2))
        want_total = np.array([(vals * np.array(j + 1, dtype)).sum(dtype=dtype)
                               for j in range(3)], dtype)
        want_lo = np.minimum(50, np.array([(vals - np.array(j, dtype)).min() for j in range(3)]))
        want_hi = np.maximum(7, np.array([(vals + np.array(j, dtype)).max() for j in range(3)]))
    if dtype == "float64":
        np.testing.assert_allclose(acc.data, expect, rtol=1e-12)
        np.testing.assert_allclose(total.data, want_total, rtol=1e-12)
    else:
        np.testing.assert_array_equal(acc.data, expect)
        np.testing.assert_array_equal(total.data, want_total)
    np.testing.assert_array_equal(lo.data, want_lo.astype(dtype))
    np.testing.assert_array_equal(hi.data, want_hi.astype(dtype))
    text = loop.generate()
    assert ("sk_atomic_add_f64(" in text) == (dtype == "float64")


def test_parloop_source_is_the_loop_lowering_through_the_platform():
    """The ParLoop program is LoopLowering's loop as a launch plan: the kernel as a function
    on private arrays, a work-item per block, the Globals' work-group tree and the launch
    folding the groups' partials."""
    cells, nodes = sk.Set(10), sk.Set(4)
    m = sk.Map(cells, nodes, 3, np.arange(30).reshape(10, 3) % 4)
    total, lo, hi = (sk.Global(1) for _ in range(3))
    text = sk.ParLoop(scatter, cells, sk.Dat(nodes)(sk.INC, m), sk.Dat(cells)(sk.READ),
                      total(sk.INC), lo(sk.MIN), hi(sk.MAX), backend="opencl").generate()
    assert "/* Host steps:" in text and "b in [0, nblocks)" in text
    assert "static inline int sk_scatter_kernel(double *restrict acc_" in text
    assert "barrier(CLK_LOCAL_MEM_FENCE);" in text and "__local double *r2_group" in text
    assert "r2_partial[" in text and "r2_groups" in text
    assert "sk_atomic_add" not in text  # coloured


def test_parloop_generate_is_opencl_and_c_kernels_are_refused():
    cells = sk.Set(4)
    d = sk.Dat(cells)
    loop = sk.ParLoop(sk.Kernel("void k(double *a) { a[0] = 1; }", "k"), cells, d(sk.WRITE),
                      backend="opencl")
    with pytest.raises(sk.StencilError, match="C-string kernels"):
        loop.compute()


def test_generated_source_of_every_kind():
    a = np.ones((5, 6))
    blur(a)
    assert "__kernel void sk_blur_point_" in blur.generate(backend="opencl")

    @sk.stencil(backend="opencl")
    def lap(inp: sk.Field[float], out: sk.Field[float]):
        with sk.computation(sk.PARALLEL), sk.interval(...):
            out = inp[1, 0, 0] + inp[-1, 0, 0] - 2.0 * inp  # noqa: F841

    src = lap.generate()
    assert "get_global_id(2)" in src and "#pragma OPENCL FP_CONTRACT OFF" in src

    @sk.kernel
    def setter(a):
        a[0] = 1.0

    s = sk.Set(3)
    text = sk.ParLoop(setter, s, sk.Dat(s)(sk.WRITE), backend="opencl").generate()
    assert "__kernel void sk_parloop_setter" in text


def test_default_build_options_optimize_and_give_the_same_results():
    """The suite builds with -cl-opt-disable (conftest.py); stencilkit's default build is
    optimized. Both are cached apart, and the optimized one computes the same on each kind
    (point kernels in every border mode, a computation, a coloured and an atomic ParLoop)."""
    sk.configure(opencl_options=())
    assert ocl.build_options() == ocl.BUILD_OPTIONS
    rng = np.random.default_rng(7)
    a = rng.random((23, 17))
    for mode in ("constant", "nearest", "reflect", "mirror", "wrap"):
        np.testing.assert_array_equal(sk.stencil(mode, backend="opencl")(blur.func)(a),
                                      sk.stencil(mode, backend="numpy")(blur.func)(a))

    def lap(inp: sk.Field[float], out: sk.Field[float]):
        with sk.computation(sk.PARALLEL), sk.interval(...):
            out = inp[1, 0, 0] + inp[-1, 0, 0] - 2.0 * inp[0, 1, 0]  # noqa: F841

    f = rng.random((9, 8, 5))
    outs = [np.zeros_like(f), np.zeros_like(f)]
    for b, o in zip(("opencl", "numpy"), outs):
        sk.stencil(lap, backend=b)(f, o, origin=(1, 0, 0), domain=(7, 7, 5))
    np.testing.assert_array_equal(outs[0], outs[1])
    conn = rng.integers(0, 40, (200, 3))
    vals = rng.integers(0, 100, 200)
    for race in ("color", "atomic"):
        cells, nodes = sk.Set(200), sk.Set(40)
        acc = sk.Dat(nodes, dtype="int64")
        total, lo, hi = (sk.Global(1, v, dtype="int64") for v in (0, 1000, -1000))
        sk.ParLoop(scatter, cells, acc(sk.INC, sk.Map(cells, nodes, 3, conn)),
                   sk.Dat(cells, data=vals)(sk.READ), total(sk.INC), lo(sk.MIN), hi(sk.MAX),
                   backend="opencl", race=race).compute()
        expect = np.zeros(40, "int64")
        np.add.at(expect, conn.ravel(), np.repeat(vals, 3))
        np.testing.assert_array_equal(acc.data, expect)
        assert (total.data[0], lo.data[0], hi.data[0]) == (vals.sum(), vals.min(), vals.max())
    built = {key[2] for key in ocl._programs}
    assert ocl.BUILD_OPTIONS in built


def test_build_options_are_configurable_and_checked():
    sk.configure(opencl_options="-cl-no-such-option")
    with pytest.raises(sk.BackendError, match=r"(?s)stencil 'k'.*-cl-no-such-option"):
        @sk.stencil(backend="opencl")
        def k(a):
            return a[0, 0] * 3.0

        k(np.ones((3, 3)))


def test_forward_sweep_with_a_horizontal_dependency_runs_by_planes():
    """FORWARD with a horizontal read of what the sweep wrote: the host loops over K and
    each stage sees the whole plane of the previous stage."""

    def sweep(a: sk.Field[float], b: sk.Field[float]):
        with sk.computation(sk.PARALLEL), sk.interval(0, 1):
            b = a
        with sk.computation(sk.FORWARD), sk.interval(0, -1):
            t = a * 2.0
            b[0, 0, 1] = t[1, 0, 0] + b - t[-1, 0, 0] * 0.5

    ours = sk.stencil(sweep, backend="opencl")
    assert "executed by planes" in ours.ir
    a = np.random.default_rng(4).random((10, 6, 7))
    b1, b2 = np.zeros_like(a), np.zeros_like(a)
    ours(a, b1, origin=(1, 0, 0), domain=(8, 6, 7))
    sk.stencil(sweep, backend="numpy")(a, b2, origin=(1, 0, 0), domain=(8, 6, 7))
    np.testing.assert_allclose(b1, b2, rtol=1e-14)
    assert "for k in range" in ours.generate()
