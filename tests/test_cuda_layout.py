"""The "cuda" backend's kernels per layout and size (issue 27): grid x on the output's
unit-stride axis whatever the order, one launch for an ``out=`` call that fills nothing,
32-bit index arithmetic where the sizes allow it (64-bit beyond), a thread per point where
the grid covers the extents. Plans and PTX without a GPU; results on the CPU emulator
(tests/cuda_emulator.py) against the "numpy" backend."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.api.stencil import _array_key
from stencilkit.build.cuda import compile_ptx_uncached, nvrtc_problem
from stencilkit.lower.point import OUT
from stencilkit.runtime import cuda as rt
from stencilkit.runtime import cuda_variants
from stencilkit.targets.cuda_layout import Variant

from . import kernels as K

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
needs_nvrtc = pytest.mark.skipif(nvrtc_problem() is not None,
                                 reason=f"NVRTC unavailable: {nvrtc_problem()}")


def storage_layout(shape):
    """The layout ``sk.empty(shape, backend="cuda")`` gives a 3-D storage: K outermost in
    memory, J unit stride."""
    ni, nj, nk = shape
    return np.zeros(ni * nj * nk).reshape(nk, ni, nj).transpose(1, 2, 0)


LAYOUTS = {  # name: (make an array of a shape, its unit-stride axis)
    "C": (lambda s: np.zeros(s), 2),
    "F": (lambda s: np.zeros(s, order="F"), 0),
    "storage": (storage_layout, 1),
}


#: the axes of each layout, outermost in memory first
ORDERS = {"C": (0, 1, 2), "F": (2, 1, 0), "storage": (2, 0, 1)}


def huge(shape, order=None):
    """A stand-in of ``shape`` laid out in ``order`` (axes outermost first, C by default)
    over one element of memory (never read: only its shape and strides choose the kernels)."""
    strides, step = [0] * len(shape), 8
    for axis in reversed(order if order is not None else range(len(shape))):
        strides[axis] = step
        step *= shape[axis]
    return np.lib.stride_tricks.as_strided(np.empty(1), shape, tuple(strides))


def point_entry(func, a):
    """The CUDA entry of ``func``'s specialization for calls ``st(a, out=b)``, b laid out as a."""
    st = sk.stencil(func)
    call = st._build((a,), _array_key(a), "cuda", True, generate=True)
    return call.entry


def entry_for_call(func, a):
    """(the entry a call ``st(a, out=like a)`` runs, the entry of its specialization)."""
    sig = np.zeros((4,) * a.ndim, order="C" if a.strides[-1] == a.itemsize else "F")
    entry = point_entry(func, sig)
    return entry.variant((a, a, False, 0.0)), entry


# ---------------------------------------------------------------- plans, without a device


@pytest.mark.parametrize("layout", LAYOUTS)
def test_grid_x_runs_along_the_unit_stride_axis(layout):
    make, axis = LAYOUTS[layout]
    a = make((6, 7, 8))
    entry, _ = entry_for_call(K.lap3d, a)
    border, interior = entry.plan.launches()
    # the interior counters are i0, i1, i2 (axes 0, 1, 2); x is dimension 0
    assert interior.dims[0].counter.name == f"i{axis}"
    assert sorted(d.counter.name for d in interior.dims) == ["i0", "i1", "i2"]
    if axis < 2:  # the border rows' grid is over axes 0 and 1; C order's x is axis 1 there
        assert border.dims[0].counter.name == f"b{axis}"
    # the unit strides along that axis are constants: no stride parameter for it
    assert not any(p.name.endswith(f"stride_{axis}_") or p.name == f"out_stride_{axis}"
                   for p in interior.params)


def test_two_d_fortran_order_puts_x_on_axis_0():
    a = np.zeros((9, 10), order="F")
    entry, _ = entry_for_call(K.blur, a)
    interior = entry.plan.launches()[-1]
    assert interior.dims[0].counter.name == "i0"


def test_c_order_runs_the_specialization_own_kernels():
    a = np.zeros((6, 7, 8))
    entry, own = entry_for_call(K.lap3d, a)
    assert entry is own  # the common case builds nothing more
    again, _ = entry_for_call(K.lap3d, np.zeros((6, 7, 8), order="F"))
    assert again is not own


def test_variants_are_kept_per_layout_and_size():
    own = point_entry(K.lap3d, np.zeros((4, 4, 4), order="F"))
    a = np.zeros((5, 6, 7), order="F")
    first = own.variant((a, a, False, 0.0))
    assert own.variant((a, a, False, 0.0)) is first
    b = storage_layout((5, 6, 7))
    assert own.variant((b, b, False, 0.0)) is not first


def test_index_width_and_covering_per_size():
    assert cuda_variants.choose(("a", OUT), (np.zeros((6, 7, 8)),) * 2, OUT) == \
        Variant(2, frozenset({"a", OUT}), narrow=True, covering=True)
    big = huge((1300, 1300, 1300))  # 2.2e9 elements: more than 2**31
    assert big.size > 2**31
    v = cuda_variants.choose(("a", OUT), (big, big), OUT)
    assert not v.narrow and v.covering
    long = huge((4, 100_000))  # an extent a grid's y or z cannot cover: grid-stride loops
    assert not cuda_variants.choose(("a", OUT), (long, long), OUT).covering
    # the span decides, not the element count: a strided view of a small array's memory
    step = np.lib.stride_tricks.as_strided(np.empty(1), (10, 10), (8 * 2**28, 8))
    assert not cuda_variants.fits_32_bits([step])
    assert cuda_variants.fits_32_bits([np.zeros((100, 100))])


def test_unit_axis():
    assert cuda_variants.unit_axis((5, 6, 7), (336, 56, 8)) == 2
    assert cuda_variants.unit_axis((5, 6, 7), (8, 40, 240)) == 0
    assert cuda_variants.unit_axis((5, 6, 7), (48, 8, 240)) == 1
    assert cuda_variants.unit_axis((5, 1, 7), (8, 8, 40)) == 0  # an axis of one: no vote
    assert cuda_variants.unit_axis((5, 6), (-8, -40)) == 0  # reversed arrays too
    assert cuda_variants.unit_axis((1, 1), (8, 8)) == 1


@needs_nvrtc
def test_index_arithmetic_is_32_bit_unless_the_arrays_need_64():
    small, _ = entry_for_call(K.lap3d, np.zeros((6, 7, 8)))
    big, _ = entry_for_call(K.lap3d, huge((1300, 1300, 1300)))

    def interior(source):
        ptx = compile_ptx_uncached(source, "sm_90", "lap3d")
        name = small.plan.launches()[-1].name
        return re.search(rf"\.entry {name}\((.*?)^}}", ptx, re.S | re.M).group(1)

    narrow, wide = interior(small.source), interior(big.source)
    assert "int32_t a_stride_0_" in small.source and "int64_t a_stride_0_" in big.source
    assert not re.search(r"\b(mul|mad)\.lo\.s64\b", narrow)
    assert re.search(r"\b(mul|mad)\.lo\.s64\b", wide)
    assert "for (" not in small.source.split(small.plan.launches()[-1].name)[1]  # a point each


def test_border_fill_is_decided_on_the_host():
    entry = point_entry(K.lap3d, np.zeros((4, 4, 4)))
    border, interior = entry.plan.launches()
    assert border.host_conditions and not interior.conditions


def test_a_covering_plan_refuses_a_grid_it_cannot_cover(monkeypatch):
    entry = point_entry(K.lap3d, np.zeros((4, 4, 4)))
    interior = entry.plan.launches()[-1]
    env = {"a_shape_0_": 10, "a_shape_1_": 10, "a_shape_2_": 10}
    monkeypatch.setattr(rt, "GRID_LIMITS", (1, 1, 1))
    assert rt.launch_config(interior, env) == ((1, 1, 1), rt.BLOCKS[3])
    with pytest.raises(RuntimeError, match="more than a grid has"):
        rt.launch_config(interior, env, covering=True)


# ---------------------------------------------------------------- on the CPU emulator


@pytest.fixture
def emulated(monkeypatch):
    from .cuda_emulator import install

    install(monkeypatch)
    return monkeypatch


@pytest.fixture
def launches(emulated):
    """The names of the kernels launched, in order (the emulator's launches, counted)."""
    seen: list[str] = []
    inner = rt.CudaEntry.functions

    def counted(self):
        return {name: (lambda *a, fn=fn, name=name: (seen.append(name), fn(*a))[1])
                for name, fn in inner(self).items()}

    emulated.setattr(rt.CudaEntry, "functions", counted)
    return seen


@needs_gxx
@pytest.mark.parametrize("layout", LAYOUTS)
def test_emulated_results_per_layout(emulated, layout):
    make, _ = LAYOUTS[layout]
    rng = np.random.default_rng(7)
    a = make((7, 9, 11))
    a[...] = rng.random(a.shape)
    want = sk.stencil(K.lap3d, backend="numpy")(a)
    cu = sk.stencil(K.lap3d, backend="cuda")
    np.testing.assert_array_equal(cu(a), want)
    out = make((7, 9, 11))
    out[...] = -1.0
    cu(a, out=out)
    np.testing.assert_array_equal(out, sk.stencil(K.lap3d, backend="numpy")(a, out=make(
        (7, 9, 11)) - 1.0))


@needs_gxx
def test_emulated_storage_on_the_device(emulated):
    rng = np.random.default_rng(8)
    host = rng.random((6, 10, 12))
    a = sk.storage.from_array(host, backend="cuda")
    assert cuda_variants.unit_axis(a.shape, a.strides) == 1  # the storage's own layout
    out = sk.storage.zeros(host.shape, backend="cuda")
    sk.stencil(K.lap3d, backend="cuda")(a, out=out)
    want = sk.stencil(K.lap3d, backend="numpy")(host, out=np.zeros(host.shape))
    np.testing.assert_array_equal(np.asarray(out), want)


@needs_gxx
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "reflect"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_emulated_border_modes_per_order(emulated, mode, order):
    rng = np.random.default_rng(9)
    a = np.asarray(rng.random((13, 17)).astype(np.float32), order=order)
    np.testing.assert_array_equal(sk.stencil(mode, backend="cuda")(K.blur)(a),
                                  sk.stencil(mode, backend="numpy")(K.blur)(a))


@needs_gxx
@pytest.mark.parametrize("limit", ["narrow", "covering"])
def test_emulated_64_bit_and_grid_stride_kernels(emulated, limit):
    """The 64-bit kernels (arrays past 2**31 elements do not fit the emulator: the limit is
    lowered instead) and the grid-stride ones (extents past a grid's, likewise), with grids
    small enough that each thread visits several points."""
    emulated.setattr(cuda_variants, "NARROW_LIMIT" if limit == "narrow" else
                     "COVERING_LIMIT", 0)
    if limit == "covering":
        emulated.setattr(rt, "GRID_LIMITS", (2, 2, 1))
    rng = np.random.default_rng(10)
    for make, _ in LAYOUTS.values():
        a = make((7, 9, 11))
        a[...] = rng.random(a.shape)
        st = sk.stencil(K.lap3d, backend="cuda")
        got = st(a)
        np.testing.assert_array_equal(got, sk.stencil(K.lap3d, backend="numpy")(a))
        entry = next(iter(st._specs.values())).entry
        ran = list(entry._variants.values()) or [entry]
        assert all((v.plan.covering if limit == "narrow" else "int32_t" in v.source)
                   for v in ran)
        if limit == "narrow":
            assert all("int64_t a_stride_0_" in v.source for v in ran)
        else:
            assert all(not v.plan.covering for v in ran)


@needs_gxx
def test_one_launch_per_out_call_that_fills_nothing(launches):
    a = np.random.default_rng(11).random((6, 7, 8))
    st = sk.stencil(K.lap3d, backend="cuda")
    out = np.full(a.shape, 5.0)
    st(a, out=out)
    assert len(launches) == 1 and launches[0].endswith("_2")  # the interior only
    assert (out[0] == 5.0).all()  # the border untouched, as "numpy" leaves it
    launches.clear()
    st(a)  # a new array: its border is filled
    assert len(launches) == 2
    launches.clear()
    sk.stencil(K.lap3d, backend="cuda", cval=1.0)(a, out=out)  # cval given: filled
    assert len(launches) == 2 and (out[0] == 1.0).all()


def row_weights(a, w):
    return w[0] * a[0, -1] + w[1] * a[0, 0] + w[2] * a[0, 1]


def test_a_table_of_another_rank_runs_the_own_kernels():
    """A standard_indexing table of another rank has no say in the layout: a C-order call
    runs the specialization's own kernels, built once."""
    a, w = np.zeros((6, 7)), np.array([0.25, 0.5, 0.25])
    st = sk.stencil(row_weights, standard_indexing=("w",))
    entry = st._build((a, w), _array_key(a), "cuda", True, generate=True).entry
    assert entry.variant((a, w, a, False, 0.0)) is entry


@needs_nvrtc
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", ["small", "long", "huge"])
def test_every_variant_compiles_with_nvrtc(layout, size):
    """NVRTC, not only the emulator's g++, takes each variant: 32-bit or 64-bit, a thread
    per point or grid-stride loops, x on any axis."""
    make, axis = LAYOUTS[layout]
    shape = {"small": (6, 7, 8), "long": (3, 4, 70_000), "huge": (1300, 1300, 1300)}[size]
    a = make(shape) if size != "huge" else huge(shape, ORDERS[layout])
    entry, _ = entry_for_call(K.lap3d, a)
    v = cuda_variants.choose(("a_", OUT), (a, a), OUT)
    assert v.unit_axis == axis
    assert v.narrow == (size != "huge") and v.covering == (size != "long")
    ptx = compile_ptx_uncached(entry.source, "sm_90", "lap3d")
    assert all(f".entry {lc.name}(" in ptx for lc in entry.plan.launches())


@needs_gxx
def test_emulated_device_result_is_laid_out_as_the_input(emulated):
    """Without out=, a call on device arrays returns an array laid out as its first argument
    (a storage's J unit stride): the threads that follow the output's unit-stride axis then
    read the input along its own too."""
    host = np.random.default_rng(12).random((5, 6, 7))
    a = sk.storage.from_array(host, backend="cuda")
    st = sk.stencil(K.lap3d, backend="cuda")
    got = st(a)
    assert cuda_variants.unit_axis(got.shape, got.strides) == 1
    assert sorted(got.strides) == sorted(a.strides)
    np.testing.assert_array_equal(np.asarray(got), sk.stencil(K.lap3d, backend="numpy")(host))
    entry = list(st._specs.values())[-1].entry  # the one for an output laid out so
    (ran,) = entry._variants.values()
    assert ran.plan.launches()[-1].dims[0].counter.name == "i1"
