"""OpenCL's per-call variants (issue 27, the OpenCL half): computations and point kernels
index in 32 bits where a call's arrays allow it and in 64 bits where they do not, chosen
from the arrays' extents and strides as CUDA's are (``runtime.cuda_variants``); NDRange
dimension 0's work-item index stays 64-bit (``targets.opencl.wide_first_index``: PoCL
vectorizes along it). The choice is tested on shapes and strides alone, without huge
arrays; the two widths must give the same bits."""

from __future__ import annotations

import re

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.ir import kernel as k
from stencilkit.registry import opencl as opencl_registry
from stencilkit.runtime import cuda_variants
from stencilkit.runtime.opencl_launch import Executable
from stencilkit_apps import definitions

from .golden.corpus import hdiff, lap3d, tridiagonal

I32, I64 = np.dtype(np.int32), np.dtype(np.int64)


@pytest.fixture(autouse=True)
def _opencl():
    pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    if not sk.backends()["opencl"].available:
        pytest.skip(f"backend opencl: {sk.backends()['opencl'].reason}")


def _executable(definition) -> Executable:
    return sk.stencil(definition)._build(opencl_registry.BACKEND, None)[1].exe


def _index_dtypes(exe: Executable) -> set[np.dtype]:
    """The types of the plan's scalar index parameters (strides, origins, domain)."""
    return {p.dtype for p in exe.plan.kernel.params
            if p.has(k.StrideOf) or p.has(k.ShapeOf) or p.has(k.ScalarArgument)
            and p.dtype in (I32, I64)}


class _View:
    """What ``Executable.variant`` reads of a device view: shape and strides in elements."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.strides = tuple(int(np.prod(shape[d + 1:])) for d in range(len(shape)))


def test_a_computations_own_plan_indexes_in_32_bits_with_a_64_bit_dimension_0():
    exe = _executable(hdiff)
    assert exe.variants is not None and exe.variants.own.narrow
    assert _index_dtypes(exe) == {I32}
    for launch in exe.plan.launches():
        assert [d.counter.dtype for d in launch.dims] == [I64, I32, I32]
    assert "const long k = (long)get_global_id(0);" in exe.source
    assert "const int32_t j = (int32_t)get_global_id(1);" in exe.source
    assert "int32_t in_field_row = (int32_t)(" in exe.source  # a row base: 32-bit multiplies


#: the span of a C-ordered (n, 64, 64) array, sum of extent * stride: n * 4096 + 4160
@pytest.mark.parametrize("extent, narrow", [(2**18 - 2, True),  # span 2**30 - 4032
                                            (2**18 - 1, False),  # span 2**30 + 64
                                            (2**19, False)],  # 2**31 elements
                         ids=["below", "at", "2**31"])
def test_a_computations_index_width_is_chosen_at_the_limit(extent, narrow):
    """Below ``NARROW_LIMIT`` (a span of 2**30 elements: half of 2**31, so that a
    neighbour's index and a row base stay below 2**31) the call runs the own 32-bit plan;
    from the limit on, and at 2**31 elements, it builds the 64-bit variant (once, then
    keeps it)."""
    exe = _executable(hdiff)
    views = {n: _View((extent, 64, 64)) for n in ("in_field", "out_field", "coeff")}
    chosen = exe.variant(views)  # type: ignore[arg-type]
    assert (chosen is exe) == narrow
    assert _index_dtypes(chosen) == ({I32} if narrow else {I64})
    assert all(d.counter.dtype == I64 for lc in chosen.plan.launches() for d in lc.dims[:1])
    assert exe.variant(views) is chosen  # type: ignore[arg-type]


def test_one_large_array_makes_the_whole_call_64_bit():
    """A temporary or an input past the limit decides as much as the written field."""
    exe = _executable(hdiff)
    views = {n: _View((8, 8, 8)) for n in ("out_field", "coeff")}
    views["in_field"] = _View((2**12, 2**9, 2**9))
    assert _index_dtypes(exe.variant(views)) == {I64}  # type: ignore[arg-type]


def _fields(names, shape, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.random(shape) + (4.0 if n == "b" else 0.0) for n in names}


@pytest.mark.parametrize("definition, names, kwargs", [
    (hdiff, ("in_field", "out_field", "coeff"), {"origin": (2, 2, 0), "domain": (12, 9, 7)}),
    (tridiagonal, ("a", "b", "c", "d"), {}),
    (definitions.tridiagonal_temporaries, ("a", "b", "c", "d", "x"), {}),
], ids=["hdiff", "tridiagonal", "tridiagonal_temporaries"])
def test_the_64_bit_variant_gives_the_same_bits(monkeypatch, definition, names, kwargs):
    """The same call on the own 32-bit plan and on the 64-bit variant (forced by a limit of
    0): the same bits in every field, the forced call on the 64-bit plan."""
    st = sk.stencil(definition, backend="opencl")
    shape = (16, 13, 7)
    narrow = _fields(names, shape)
    wide = {n: v.copy() for n, v in narrow.items()}
    st(**narrow, **kwargs)
    exe = st._build(opencl_registry.BACKEND, narrow)[1].exe
    assert not exe._variants
    monkeypatch.setattr(cuda_variants, "NARROW_LIMIT", 0)
    st(**wide, **kwargs)
    (variant,) = exe._variants.values()
    assert _index_dtypes(variant) == {I64} and _index_dtypes(exe) == {I32}
    for n in names:
        np.testing.assert_array_equal(wide[n], narrow[n], err_msg=n)


def test_point_kernels_run_32_bit_variants_too(monkeypatch):
    """A point kernel's own plan indexes in 32 bits (NDRange dimension 0's index 64-bit);
    the forced 64-bit variant gives the same bits."""
    st = sk.stencil(lap3d, backend="opencl")
    a = np.random.default_rng(2).random((9, 8, 11))
    narrow = st(a)
    monkeypatch.setattr(cuda_variants, "NARROW_LIMIT", 0)
    wide = st(a)
    np.testing.assert_array_equal(wide, narrow)
    source = st.generate(a, backend="opencl")
    declared = re.findall(r"const (\w+) (\w+) = .*get_global_id\((\d)\)", source)
    # the border rows (b1 a stride apart on dimension 0), then the interior (i2 unit stride)
    assert declared == [("int32_t", "b1", "0"), ("int32_t", "b0", "1"),
                        ("long", "i2", "0"), ("int32_t", "i1", "1"), ("int32_t", "i0", "2")]
    assert "const int64_t a_stride_0_" not in source


def test_a_dimension_0_a_stride_apart_keeps_a_32_bit_index():
    """A sweep's work-item per column: dimension 0 is J, multiplied by its stride in every
    address (K, the unit stride, is the serial loop inside): its index stays 32-bit, so that
    no index multiply is a 64-bit one."""
    exe = _executable(tridiagonal)
    for launch in exe.plan.launches():
        assert [d.counter.dtype for d in launch.dims] == [I32, I32]
    assert "const int32_t j = (int32_t)get_global_id(0);" in exe.source
    assert not re.search(r"const long \w+ = ", exe.source)


def returns_its_scalar(a, s):
    x = a[0] + a[0]  # noqa: F841
    return s


@pytest.mark.parametrize("backend", ["opencl", "cuda"])
def test_a_value_assigned_after_its_declaration_keeps_its_type(backend):
    """``sk_result`` (declared 0, then assigned the int64 scalar a kernel returns) is a
    value, not an index: the 32-bit variant leaves it 64-bit (the verifier, on in the
    tests, refused the kernel: hypothesis found it in test_border_modes on "opencl")."""
    st = sk.stencil(func_or_mode="nearest", backend=backend)(returns_its_scalar)
    source = st.generate(np.zeros(5), 2**40, backend=backend)
    assert "int64_t sk_result = 0;" in source
    if backend == "opencl":
        np.testing.assert_array_equal(st(np.zeros(5), 2**40), np.full(5, 2**40))
