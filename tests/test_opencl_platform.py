"""The OpenCL platform pass and printer without a device: launch plans of each kind, the
host-side evaluation of bounds, and the printed kernels' shape."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.analysis.typing import ArgType
from stencilkit.codegen import opencl as printer
from stencilkit.ir import kernel as k
from stencilkit.passes import pipeline
from stencilkit.passes.lower_point import Layout
from stencilkit.passes.opencl_computation import OpenCLComputationLowering
from stencilkit.passes.platforms import opencl as platform


def _point_plan(func, ndim: int) -> platform.LaunchPlan:
    st = sk.stencil(func, backend="numpy")
    kernel, src = st._parse()
    typed = pipeline.analyse(kernel, (ArgType(np.dtype(float), ndim),), None)
    kf = pipeline.lower(typed, Layout((True,), True), src.line_text, "t.py",
                        np.dtype(float))
    kf = k.KernelFunction(kf.name, kf.params, platform.mark_parallel_nests(kf.body),
                          kf.buffers, kf.doc, kf.uses_error_flag)
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
    kf = OpenCLComputationLowering(plan.definition, plan.schedule, layout, st.source).lower_all()
    return platform.plan(kf)


def test_columns_are_2d_with_the_k_loops_inside():
    from stencilkit.bench_definitions import tridiagonal

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
