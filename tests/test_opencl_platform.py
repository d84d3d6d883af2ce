"""The OpenCL platform pass and printer without a device: launch plans of each kind, the
host-side evaluation of bounds, and the printed kernels' shape."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.analysis.typing import ArgType
from stencilkit.codegen import opencl as printer
from stencilkit.compile.point import analyse
from stencilkit.ir import kernel as k
from stencilkit.lower.computation_gpu import GpuComputationLowering
from stencilkit.lower.point import Layout
from stencilkit.registry.shared_stages import lower
from stencilkit.targets import opencl as platform


def _point_plan(func, ndim: int, mode: str = "constant") -> platform.LaunchPlan:
    st = sk.stencil(func, backend="numpy")
    kernel, src = st._parse()
    typed = analyse(kernel, (ArgType(np.dtype(float), ndim),), None)
    kf = lower(typed, Layout((True,), True), src.line_text, "t.py",
                        np.dtype(float), mode)
    kf = dataclasses.replace(kf, body=platform.mark_parallel_nests(kf.body, kf.params))
    return platform.plan(kf)


def lap3(a):
    return a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 1] - 3.0 * a[0, 0, 0]


def test_point_kernel_interior_is_a_3d_ndrange_fastest_axis_first():
    plan = _point_plan(lap3, 3)
    border, interior = plan.launches()
    assert [d.counter.name for d in interior.dims] == ["i2", "i1", "i0"]
    assert len(border.dims) == 2 and border.conditions  # rows of the border, if fill_border
    env = {p.name: 0 for p in plan.kernel.params}
    env.update({"a_shape_0_": 10, "a_shape_1_": 7, "a_shape_2_": 5})
    sizes = [platform.evaluate(d.stop, env) - platform.evaluate(d.start, env)
             for d in interior.dims]
    assert sizes == [4, 6, 8]  # border ((-1, 1), (-1, 0), (0, 1)) on a (10, 7, 5) array
    text = printer.program_source(plan)
    assert text.count("__kernel void") == 2
    assert "get_global_id(2)" in text and "sqrtf" not in text


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_border_modes_keep_a_work_item_per_interior_point(ndim):
    """In the remapping modes the lowering puts each interior row's two border strips in the
    row loop, next to the interior loop (for CPU caches): the plan splits them apart, so the
    interior is still an ndim-D NDRange; the 2-D border rows (serial for CPU threads) are a
    work-item per row; the empty 1-D border-rows section costs no launch."""
    func = {1: lambda a: a[-1] + a[1], 2: lambda a: a[-1, 0] + a[0, 1], 3: lap3}[ndim]
    launches = _point_plan(func, ndim, "reflect").launches()
    interior = launches[-1]
    assert [d.counter.name for d in interior.dims] == [f"i{d}" for d in reversed(range(ndim))]
    strips = launches[-2]  # a work-item per row (its two strips), one in 1-D
    assert [d.counter.name for d in strips.dims] == [f"i{d}" for d in reversed(range(ndim - 1))]
    if ndim == 1:
        assert len(launches) == 2
    else:
        rows = launches[0]
        assert [d.counter.name for d in rows.dims] == ["r0"] and len(launches) == 3


def test_user_loops_stay_inside_the_work_item():
    def summed(a):
        s = 0.0
        for q in range(3):
            s += a[0, 1] * q
        return s

    interior = _point_plan(summed, 2).launches()[-1]
    assert len(interior.dims) == 2
    assert any(isinstance(s, k.Loop) and s.counter.name == "q_" for s in interior.body)


def _computation_plan(func) -> platform.LaunchPlan:
    st = sk.stencil(func, backend="numpy")
    plan = st.plans[True]  # the plan of backends that inline temporaries
    layout = {f.name: len(f.axes) - 1 for f in plan.definition.fields}
    layout.update({t: 2 for t, _ in plan.definition.temporaries})
    kf = GpuComputationLowering(plan.definition, plan.schedule, layout, st.source).lower_all()
    return platform.plan(kf)


def test_columns_are_2d_with_the_k_loops_inside():
    from stencilkit_apps.definitions import tridiagonal

    plan = _computation_plan(tridiagonal)
    (launch,) = plan.steps
    assert isinstance(launch, platform.Launch)
    assert [d.counter.name for d in launch.dims] == ["j", "i"]
    assert sum(isinstance(s, k.Loop) and s.counter.name == "k" for s in launch.body) == 3


def test_planes_are_a_host_loop_over_k():
    def planes(a: sk.Field[float], q: sk.Field[float]):
        with sk.computation(sk.PARALLEL), sk.interval(0, 1):
            q = a
        with sk.computation(sk.FORWARD), sk.interval(0, -1):
            t = a * 2.0
            q[0, 0, 1] = t[1, 0, 0] + q + t[-1, 0, 0]  # noqa: F841

    plan = _computation_plan(planes)
    loops = [s for s in plan.steps if isinstance(s, platform.HostLoop)]
    assert len(loops) == 1 and loops[0].counter.name == "k"
    inner = [s for s in loops[0].body if isinstance(s, platform.Launch)]
    assert len(inner) == 2 and all(len(s.dims) == 2 for s in inner)
    assert all(any(p.name == "k" for p in s.params) for s in inner)


@pytest.mark.parametrize("expr, value", [
    (k.Op("-", (k.Sym(k.Symbol("n", k.INDEX), dtype=k.INDEX),
                k.Constant(np.int64(2), dtype=k.INDEX)), dtype=k.INDEX), 5),
    (k.MathCall("max", (k.Constant(np.int64(0), dtype=k.INDEX),
                        k.MathCall("min", (k.Sym(k.Symbol("n", k.INDEX), dtype=k.INDEX),
                                           k.Constant(np.int64(-3), dtype=k.INDEX)),
                                   dtype=k.INDEX)), dtype=k.INDEX), 0),
])
def test_host_evaluation(expr, value):
    assert platform.evaluate(expr, {"n": 7}) == value
