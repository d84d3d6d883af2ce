"""The one GPU planner (``targets.gpu``) and its plans' text form (``ir.plan``), for
CUDA and OpenCL, without a device: golden plans of a handful of kernels showing where the two
platforms differ (only in their hooks), that K sweeps never become grid dimensions, and the
host evaluator (``ir.host_eval``) against a direct evaluation. On PoCL: what OpenCL gained
from sharing the planner (an ``out=`` call that fills no border is one launch)."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stencilkit as sk
from stencilkit.analysis.typing import ArgType
from stencilkit.compile import driver
from stencilkit.compile.point import analyse
from stencilkit.gtscript import BACKWARD, FORWARD, PARALLEL, Field, computation, interval
from stencilkit.ir import kernel as k
from stencilkit.ir.host_eval import evaluate, extents, host_computable, host_launches
from stencilkit.ir.plan import Dim, HostLoop, Launch, LaunchPlan, expr_text, plan_text
from stencilkit.lower.computation_gpu import GpuComputationLowering
from stencilkit.lower.hoist_rows import Placement, hoist_row_bases
from stencilkit.lower.parallel_nests import mark_parallel_nests
from stencilkit.lower.point import OUT, Layout
from stencilkit.lower.simplify import simplify
from stencilkit.registry import cuda as cuda_registry
from stencilkit.registry.shared_stages import lower
from stencilkit.targets.cuda import CUDA_PLATFORM
from stencilkit.targets.cuda_layout import Variant, specialize
from stencilkit.targets.opencl import OPENCL_PLATFORM

from . import computations as C
from . import test_parloop as P

I = k.INDEX


def lap3d(a):
    return (a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1]
            - 6.0 * a[0, 0, 0])


def two_stages(u: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        t = u[1, 0, 0] + u[-1, 0, 0]
        out = t[0, 1, 0] + t[0, -1, 0]  # noqa: F841


# ---------------------------------------------------------------- building plans


def _point_kernel(c_order: bool) -> tuple[k.KernelFunction, str]:
    """lap3d's kernel function as the GPU backends build it (loops marked parallel by
    ``parallel_nests``), for arrays in C order or in the K-outermost storage order (J unit
    stride), and the name of its output pointer."""
    st = sk.stencil(lap3d, backend="numpy")
    kernel, src = st._parse()
    typed = analyse(kernel, (ArgType(np.dtype(float), 3),), None)
    kf = lower(typed, Layout((c_order,), c_order), src.line_text, "t.py",
                        np.dtype(float), "constant")
    kf = dataclasses.replace(kf, body=mark_parallel_nests(kf.body, kf.params))
    return kf, next(p.name for p in kf.params if p.get(k.BasePointer) == k.BasePointer(OUT))


def point_plans(c_order: bool) -> tuple[LaunchPlan, LaunchPlan]:
    """(CUDA, OpenCL) plans of lap3d with the output's unit-stride axis on dimension 0."""
    kf, out = _point_kernel(c_order)
    unit = (out, 2 if c_order else 1)
    return CUDA_PLATFORM.plan(kf, unit), OPENCL_PLATFORM.plan(kf, unit)


def computation_plans(func) -> tuple[LaunchPlan, LaunchPlan]:
    """(CUDA, OpenCL) plans of a computation, each lowered by its backend's lowering; CUDA's
    64-bit variant and OpenCL's unspecialized plan (both own plans index in 32 bits)."""
    entry = sk.stencil(func)._build(cuda_registry.BACKEND, None)[1].entry
    cuda, _ = entry.variants.build(Variant(2, frozenset(), False, False))
    st = sk.stencil(func, backend="numpy")
    scheduled = st.plans[True]  # the plan of backends that inline temporaries
    layout = {f.name: len(f.axes) - 1 for f in scheduled.definition.fields}
    layout.update({t: 2 for t, _ in scheduled.definition.temporaries})
    kf = GpuComputationLowering(scheduled.definition, scheduled.schedule, layout,
                                   st.source).lower_all()
    return cuda, OPENCL_PLATFORM.plan(  # as the backends' stages do
        hoist_row_bases(simplify(kf), Placement.THREAD))


def parloop_plans() -> tuple[LaunchPlan, LaunchPlan]:
    """(CUDA, OpenCL) plans of a ParLoop with a Global INC (a sum over the cells)."""
    xy, tri, cells, nodes, c2n, coords = P.mesh("hand")
    loop = sk.ParLoop(P.cell_area, cells, sk.Dat(cells)(sk.WRITE), coords(sk.READ, c2n),
                      sk.Global(1, 0.25)(sk.INC))
    return tuple(driver.render(loop._request(sk.registry.REGISTRY[b])).work.plan
                 for b in ("cuda", "opencl"))  # type: ignore[return-value]


# ---------------------------------------------------------------- golden plans

LAP3D_C_ORDER = """\
plan sk_lap3d_point
  launch sk_lap3d_point_1: 2-D grid
    x: b1 in [0, a_shape_1_)
    y: b0 in [0, a_shape_0_)
    if (host) fill_border
    buffers: out
    scalars: a_shape_0_:int64, a_shape_1_:int64, a_shape_2_:int64, out_stride_0:int64,
      out_stride_1:int64, fill_border:bool, cval:float64
    body: 1 statement(s)
  launch sk_lap3d_point_2: 3-D grid
    x: i2 in [1, a_shape_2_ - 1)
    y: i1 in [1, a_shape_1_ - 1)
    z: i0 in [1, a_shape_0_ - 1)
    buffers: a_, out
    scalars: a_shape_0_:int64, a_shape_1_:int64, a_shape_2_:int64, a_stride_0_:int64,
      a_stride_1_:int64, out_stride_0:int64, out_stride_1:int64
    body: 3 statement(s)
"""

LAP3D_STORAGE_ORDER = """\
plan sk_lap3d_point
  launch sk_lap3d_point_1: 2-D grid
    x: b1 in [0, a_shape_1_)
    y: b0 in [0, a_shape_0_)
    if (host) fill_border
    buffers: out
    scalars: a_shape_0_:int64, a_shape_1_:int64, a_shape_2_:int64, out_stride_0:int64,
      out_stride_1:int64, out_stride_2:int64, fill_border:bool, cval:float64
    body: 1 statement(s)
  launch sk_lap3d_point_2: 3-D grid
    x: i1 in [1, a_shape_1_ - 1)
    y: i2 in [1, a_shape_2_ - 1)
    z: i0 in [1, a_shape_0_ - 1)
    buffers: a_, out
    scalars: a_shape_0_:int64, a_shape_1_:int64, a_shape_2_:int64, a_stride_0_:int64,
      a_stride_1_:int64, a_stride_2_:int64, out_stride_0:int64, out_stride_1:int64,
      out_stride_2:int64
    body: 3 statement(s)
"""

FORWARD_SWEEP = """\
plan sk_column_sum_computation
  launch sk_column_sum_computation_1: 2-D grid
    x: j in [0, nj)
    y: i in [0, ni)
    buffers: u_, total_
    scalars: u_stride_0_:int64, u_stride_1_:int64, total_stride_0_:int64,
      total_stride_1_:int64, u_origin_I_:int64, u_origin_J_:int64, u_origin_K_:int64,
      total_origin_I_:int64, total_origin_J_:int64, total_origin_K_:int64, ni:int64,
      nj:int64, nk:int64
    body: 4 statement(s)
"""

PARALLEL_TWO_STAGES = """\
plan sk_two_stages_computation
  launch sk_two_stages_computation_1: 3-D grid
    x: k in [0, max(0, nk))
    y: j in [0, nj)
    z: i in [0, ni)
    buffers: u_, out_
    scalars: u_stride_0_:int64, u_stride_1_:int64, out_stride_0_:int64, out_stride_1_:int64,
      u_origin_I_:int64, u_origin_J_:int64, u_origin_K_:int64, out_origin_I_:int64,
      out_origin_J_:int64, out_origin_K_:int64, ni:int64, nj:int64, nk:int64
    body: 4 statement(s)
"""

PARLOOP_INC_CUDA = """\
plan sk_parloop_cell_area
  scratch r2: 1 x float64
  launch sk_parloop_cell_area_1: one thread
    buffers: r2
    body: 1 statement(s)
  launch sk_parloop_cell_area_2: 1-D grid
    x: b in [0, nblocks)
    buffers: blocks, a0, a1, m1, r2
    scalars: nblocks:int64
    body: 1 statement(s)
    prologue: 2 statement(s)
    epilogue: 2 statement(s), calls sk_warp_add, sk_lane, sk_atomic_add_f64
  launch sk_parloop_cell_area_3: one thread
    buffers: a2, r2
    body: 1 statement(s)
"""

PARLOOP_INC_OPENCL = """\
plan sk_parloop_cell_area
  scratch r2: 1 x float64
  launch sk_parloop_cell_area_1: one thread
    buffers: r2
    body: 1 statement(s)
  launch sk_parloop_cell_area_2: 1-D grid
    x: b in [0, nblocks)
    buffers: blocks, a0, a1, m1, r2_partial
    scalars: nblocks:int64
    body: 1 statement(s)
    prologue: 2 statement(s)
    epilogue: 6 statement(s), calls get_local_id, barrier, get_local_size, get_group_id
    partial r2_partial: 1 x r2_groups float64, group-local r2_group
  launch sk_parloop_cell_area_3: one thread
    buffers: r2, r2_partial
    scalars: r2_groups:int64
    body: 1 statement(s)
  launch sk_parloop_cell_area_4: one thread
    buffers: a2, r2
    body: 1 statement(s)
"""

LAP3D_STORAGE_ORDER_CUDA_VARIANT = """\
plan sk_lap3d_point (covering grids)
  launch sk_lap3d_point_1: 2-D grid
    x: b1 in [0, a_shape_1_)
    y: b0 in [0, a_shape_0_)
    if (host) fill_border
    buffers: out
    scalars: a_shape_0_:int32, a_shape_1_:int32, a_shape_2_:int32, out_stride_0:int32,
      out_stride_2:int32, fill_border:bool, cval:float64
    body: 1 statement(s)
  launch sk_lap3d_point_2: 3-D grid
    x: i1 in [1, a_shape_1_ - 1)
    y: i2 in [1, a_shape_2_ - 1)
    z: i0 in [1, a_shape_0_ - 1)
    buffers: a_, out
    scalars: a_shape_0_:int32, a_shape_1_:int32, a_shape_2_:int32, a_stride_0_:int32,
      a_stride_2_:int32, out_stride_0:int32, out_stride_2:int32
    body: 3 statement(s)
"""

PLANES_HOST_LOOP = """\
plan sk_planes_computation
  launch sk_planes_computation_1: 3-D grid
    x: k in [0, max(0, min(nk, 1)))
    y: j in [0, nj)
    z: i in [0, ni)
    buffers: a_, q_
    scalars: a_stride_0_:int64, a_stride_1_:int64, q_stride_0_:int64, q_stride_1_:int64,
      a_origin_I_:int64, a_origin_J_:int64, a_origin_K_:int64, q_origin_I_:int64,
      q_origin_J_:int64, q_origin_K_:int64, ni:int64, nj:int64, nk:int64
    body: 2 statement(s)
  host loop k in [0, max(0, min(nk, nk - 1))) step 1:
    launch sk_planes_computation_2: 2-D grid
      x: j in [0, nj)
      y: i in [-1, ni + 1)
      buffers: a_, t_
      scalars: a_stride_0_:int64, a_stride_1_:int64, t_stride_0_:int64, t_stride_1_:int64,
        a_origin_I_:int64, a_origin_J_:int64, a_origin_K_:int64, t_origin_I_:int64,
        t_origin_J_:int64, t_origin_K_:int64, ni:int64, nj:int64, k:int64
      body: 2 statement(s)
    launch sk_planes_computation_3: 2-D grid
      x: j in [0, nj)
      y: i in [0, ni)
      buffers: q_, t_
      scalars: q_stride_0_:int64, q_stride_1_:int64, t_stride_0_:int64, t_stride_1_:int64,
        q_origin_I_:int64, q_origin_J_:int64, q_origin_K_:int64, t_origin_I_:int64,
        t_origin_J_:int64, t_origin_K_:int64, ni:int64, nj:int64, k:int64
      body: 3 statement(s)
"""

GOLDEN = {
    "lap3d, C order": LAP3D_C_ORDER,
    "lap3d, storage order": LAP3D_STORAGE_ORDER,
    "FORWARD sweep": FORWARD_SWEEP,
    "PARALLEL, two stages": PARALLEL_TWO_STAGES,
    "planes: a host loop over K": PLANES_HOST_LOOP,
    "ParLoop INC, CUDA": PARLOOP_INC_CUDA,
    "ParLoop INC, OpenCL": PARLOOP_INC_OPENCL,
    "lap3d, storage order, CUDA narrow covering variant": LAP3D_STORAGE_ORDER_CUDA_VARIANT,
}


@pytest.mark.parametrize("name", ["lap3d, C order", "lap3d, storage order", "FORWARD sweep",
                                  "PARALLEL, two stages", "planes: a host loop over K"])
def test_plans_are_the_same_on_cuda_and_opencl(name):
    """Point kernels and computations have no reductions: the platforms' hooks change only
    what is inside a thread, and the plans read the same on both."""
    cuda, opencl = {"lap3d, C order": lambda: point_plans(True),
                    "lap3d, storage order": lambda: point_plans(False),
                    "FORWARD sweep": lambda: computation_plans(C.column_sum),
                    "PARALLEL, two stages": lambda: computation_plans(two_stages),
                    "planes: a host loop over K": lambda: computation_plans(C.planes)}[name]()
    assert plan_text(cuda) == GOLDEN[name]
    assert plan_text(opencl) == GOLDEN[name]


def test_a_parloop_reduction_differs_by_the_combine_hook_only():
    """CUDA combines a Global INC's private copies in the launch (warp shuffles, an atomic
    per warp); OpenCL writes each group's partial and folds them in a one-thread launch
    after it. The launches around them are the same."""
    cuda, opencl = parloop_plans()
    assert plan_text(cuda) == GOLDEN["ParLoop INC, CUDA"]
    assert plan_text(opencl) == GOLDEN["ParLoop INC, OpenCL"]


def test_cuda_variant_plans_are_the_same_plan_with_narrow_types():
    """The CUDA layout variants (``cuda_layout.specialize``) change only the symbols'
    declared types and the unit strides (gone from the parameters), not the plan."""
    kf, out = _point_kernel(False)
    variant = Variant(1, frozenset({"a", OUT}), narrow=True, covering=True)
    plan = CUDA_PLATFORM.plan(specialize(kf, variant), (out, 1), covering=True)
    assert plan_text(plan) == GOLDEN["lap3d, storage order, CUDA narrow covering variant"]


_ABSTRACT = (k.MathCall, k.AtomicUpdate, k.SetError, k.ParallelRegion, k.StreamedRow,
             k.StoreFence)


def _expressions(plan: LaunchPlan):
    """Every node of the plan: host loop bounds, grid bounds, conditions, thread code."""
    def visit(steps):
        for s in steps:
            if isinstance(s, HostLoop):
                yield from (s.start, s.stop, s.step)
                yield from visit(s.body)
            else:
                yield from (e for d in s.dims for e in (d.start, d.stop))
                yield from (*s.conditions, *s.prologue, *s.body, *s.epilogue)
    for root in visit(plan.steps):
        yield from _walk(root)


@pytest.mark.parametrize("which", ["point", "planes", "parloop"])
def test_plans_are_platform_lowered(which):
    """The printers print a plan as it is and the host evaluates its bounds as they are: no
    abstract node is left anywhere in it (min/max of the bounds included)."""
    plans = {"point": lambda: point_plans(True), "planes": lambda: computation_plans(C.planes),
             "parloop": parloop_plans}[which]()
    for plan in plans:
        left = [type(n).__name__ for n in _expressions(plan)
                if isinstance(n, _ABSTRACT) or isinstance(n, k.Loop) and n.parallel]
        assert not left, plan_text(plan)


# ---------------------------------------------------------------- K sweeps stay serial


@pytest.mark.parametrize("func", [C.column_sum, C.implicit_diffusion, C.tridiagonal])
def test_no_k_sweep_loop_becomes_a_grid_dimension(func):
    for plan in computation_plans(func):
        for launch in plan.launches():
            assert "k" not in [d.counter.name for d in launch.dims], plan_text(plan)
        assert any(isinstance(n, k.Loop) and n.counter.name == "k"
                   for launch in plan.launches() for s in launch.body for n in _walk(s))


# ---------------------------------------------------------------- computations on the GPU


def prefix_mean(u: Field[float], out: Field[float]):
    # s is read at k - 1 in its own sweep only: a register, no 3-D array
    with computation(FORWARD):
        with interval(0, 1):
            s = u
            out = s
        with interval(1, None):
            s = s[0, 0, -1] + u
            out = s * 0.5  # noqa: F841


def read_after_write(u: Field[float], out: Field[float]):
    # t[0, 0, -1] is read after the level's write of t too: that read needs memory
    with computation(FORWARD):
        with interval(0, 1):
            t = u
            out = t
        with interval(1, None):
            t = u * 2.0 + t[0, 0, -1]
            out = t[0, 0, -1] - t  # noqa: F841


def triple_laplacian(u: Field[float], out: Field[float]):
    # l1 would be recomputed at 13 offsets (120 operations a point): over the budget
    with computation(PARALLEL), interval(...):
        l1 = u[1, 0, 0] + u[-1, 0, 0] + u[0, 1, 0] + u[0, -1, 0] - 4.0 * u
        l2 = l1[1, 0, 0] + l1[-1, 0, 0] + l1[0, 1, 0] + l1[0, -1, 0] - 4.0 * l1
        out = l2[1, 0, 0] + l2[-1, 0, 0] + l2[0, 1, 0] + l2[0, -1, 0] - 4.0 * l2  # noqa: F841


def _storage(shape: tuple[int, int, int]) -> np.ndarray:
    """The layout of ``sk.empty(shape, backend="cuda")``: K outermost, J unit stride."""
    ni, nj, nk = shape
    return np.zeros(ni * nj * nk).reshape(nk, ni, nj).transpose(1, 2, 0)


def _cuda_build(func, storage: bool):
    """(plan, source) of "cuda"'s build of computation ``func`` for fields in C order or
    in the storage order."""
    st = sk.stencil(func)
    make = _storage if storage else np.zeros
    fields = {f.name: make((6, 7, 8)) for f in st.definition.parameter_fields}
    source, call = st._build(cuda_registry.BACKEND, fields if storage else None)
    return call.entry.plan, source


def _temporaries(plan: LaunchPlan) -> set[str]:
    return {b.name for b in plan.kernel.buffers if b.base.has(k.Temporary)}


@pytest.mark.parametrize("storage", [False, True], ids=["C order", "storage order"])
def test_hdiff_is_one_launch_with_its_temporaries_in_registers(storage):
    """hdiff's PARALLEL multistage: one launch, no 3-D temporary, grid x on the fields'
    unit-stride axis (K in C order, J on the storages)."""
    from .golden.corpus import hdiff

    plan, source = _cuda_build(hdiff, storage)
    (launch,) = plan.launches()
    assert not _temporaries(plan), plan_text(plan)
    assert launch.dims[0].counter.name == ("j" if storage else "k")
    assert "int64_t" not in source[source.index("__global__"):]  # 32-bit indices


def test_recomputation_is_bounded_by_the_budget():
    """A Laplacian of a Laplacian of a Laplacian keeps the innermost one as a temporary
    (a stage of its own) instead of recomputing it at 13 offsets; the outer one, within
    the budget, is still recomputed."""
    plan, _ = _cuda_build(triple_laplacian, storage=False)
    assert len(plan.launches()) == 2, plan_text(plan)
    assert _temporaries(plan) == {"l1"}


@pytest.mark.parametrize("storage", [False, True], ids=["C order", "storage order"])
@pytest.mark.parametrize("which", ["tridiagonal", "tridiagonal_temporaries"])
def test_sweeps_carry_the_previous_level_in_registers(which, storage):
    """A tridiagonal solve: one launch, a thread per column (x on J), the values the FORWARD
    sweep reads at k - 1 (c, d or cp, dp) and the BACKWARD one at k + 1 (x; d in place,
    whose first level's neighbour is loaded once before the sweep) not reloaded."""
    from stencilkit_apps import definitions

    from .golden.corpus import tridiagonal

    func = tridiagonal if which == "tridiagonal" else definitions.tridiagonal_temporaries
    plan, source = _cuda_build(func, storage)
    (launch,) = plan.launches()
    assert [d.counter.name for d in launch.dims] == ["j", "i"]
    levels = _k_levels_loaded(plan)
    assert not any(level.endswith("k - 1") for _, level in levels), levels
    assert ("c_", "k") in levels, levels  # the level the sweep is at: read
    assert not any(level.endswith("k + 1") for _, level in levels), levels
    if which == "tridiagonal_temporaries":
        assert _temporaries(plan) == {"cp", "dp"}  # the BACKWARD sweep reads them
        # the temporaries' unit stride is the fields' (J on the storages): x coalesces
        unit = 1 if storage else 2
        for b in plan.kernel.buffers:
            assert _is_one(b.strides[unit]), (b.name, b.strides)


def _is_one(e: k.Expr) -> bool:
    return isinstance(e, k.Constant) and int(e.value) == 1


def _k_levels_loaded(plan: LaunchPlan) -> set[tuple[str, str]]:
    """(buffer, K index as text) of every load of a 3-D field in the plan's launches: its
    third index, or the second of a row view (``lower/hoist_rows.py``: the row base, then
    the K index, the origin along K folded into the base)."""
    levels = set()
    for launch in plan.launches():
        for s in launch.body:
            for n in _walk(s):
                if isinstance(n, k.Load) and len(n.indices) == 3:
                    levels.add((n.buffer.base.name, expr_text(n.indices[2])))
                elif isinstance(n, k.Load) and n.buffer.name.endswith(".row"):
                    levels.add((n.buffer.base.name, expr_text(n.indices[-1])))
    return levels


def test_a_temporary_carried_alone_needs_no_array():
    plan, source = _cuda_build(prefix_mean, storage=False)
    assert not _temporaries(plan)
    assert "s_carried" in source


@pytest.mark.parametrize("storage", [False, True], ids=["C order", "storage order"])
@pytest.mark.parametrize("which", ["tridiagonal", "tridiagonal_temporaries", "prefix_mean",
                                   "read_after_write", "triple_laplacian", "hdiff"])
def test_gpu_computations_equal_numpy_bit_for_bit(which, storage, backend):
    from stencilkit_apps import definitions

    from .golden import corpus

    func = {"tridiagonal": corpus.tridiagonal, "hdiff": corpus.hdiff,
            "tridiagonal_temporaries": definitions.tridiagonal_temporaries,
            "prefix_mean": prefix_mean, "read_after_write": read_after_write,
            "triple_laplacian": triple_laplacian}[which]
    rng = np.random.default_rng(7)
    names = [f.name for f in sk.stencil(func, backend="numpy").definition.parameter_fields]
    shape = (10, 11, 12)
    data = {n: rng.random(shape) + 2.0 for n in names}  # diagonally dominant enough
    results = []
    for b in ("numpy", backend):
        fields = {n: v.copy() for n, v in data.items()}
        if storage:  # the layout of sk.empty(..., backend="cuda"): K outermost, J unit
            fields = {n: np.ascontiguousarray(v.transpose(2, 0, 1)).transpose(1, 2, 0)
                      for n, v in fields.items()}
        sk.stencil(func, backend=b)(**fields, origin=(3, 3, 0), domain=(4, 5, 12))
        results.append(fields)
    for n in names:
        np.testing.assert_array_equal(results[1][n], results[0][n], err_msg=n)


def test_computations_get_a_64_bit_variant_for_large_arrays():
    """The own plan indexes in 32 bits and its grids cover the domain (no grid-stride
    loops); the variant a call with arrays past 2**30 elements or a grid's extent gets
    (``runtime.cuda_variants``) indexes in 64 bits with grid-stride loops."""
    from .golden.corpus import hdiff

    st = sk.stencil(hdiff)
    entry = st._build(cuda_registry.BACKEND, None)[1].entry
    wide, source = entry.variants.build(Variant(2, frozenset(), False, False))
    assert {p.dtype for p in entry.plan.kernel.params if not p.pointer} == {np.dtype(np.int32)}
    assert "int32_t in_field_stride_0_" not in source
    assert "int64_t in_field_stride_0_" in source
    assert {d.counter.dtype for lc in wide.launches() for d in lc.dims} == {I}
    assert entry.plan.covering and not wide.covering
    assert "+= (int64_t)gridDim" in source


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("limit", ["narrow", "covering"])
def test_computation_variants_on_the_emulator(monkeypatch, limit):
    """A computation's 64-bit variant (the limit lowered: arrays past 2**30 elements do not
    fit the emulator) and its grid-stride one (grids of 2 x 2 blocks, each thread visiting
    several columns or points) give numpy's results, bit for bit."""
    from stencilkit.runtime import cuda as rt
    from stencilkit.runtime import cuda_variants
    from stencilkit_apps import definitions

    from .cuda_emulator import install

    install(monkeypatch)
    monkeypatch.setattr(cuda_variants, "NARROW_LIMIT" if limit == "narrow" else
                        "COVERING_LIMIT", 0)
    if limit == "covering":
        monkeypatch.setattr(rt, "GRID_LIMITS", (2, 2, 1))
    rng = np.random.default_rng(11)
    for func in (definitions.hdiff, definitions.tridiagonal_temporaries):
        names = [f.name for f in sk.stencil(func, backend="numpy").definition.parameter_fields]
        data = {n: rng.random((10, 11, 12)) + 2.0 for n in names}
        results = []
        for b in ("numpy", "cuda"):
            fields = {n: v.copy() for n, v in data.items()}
            st = sk.stencil(func, backend=b)
            st(**fields, origin=(2, 2, 0), domain=(6, 7, 12))
            results.append(fields)
        for n in names:
            np.testing.assert_array_equal(results[1][n], results[0][n], err_msg=n)
        (_, call), = st._builds.values()
        ran = list(call.entry._variants.values())
        assert ran
        for v in ran:
            if limit == "narrow":
                assert "int64_t ni" in v.source and v.plan.covering
            else:
                assert "int32_t ni" in v.source and not v.plan.covering


def _walk(s):
    from stencilkit.ir.core import walk

    return walk(s)


def _c(v: int) -> k.Constant:
    return k.Constant(np.int64(v), dtype=I)


def _sym(name: str) -> k.Sym:
    return k.Sym(k.Symbol(name, I), dtype=I)


@pytest.mark.parametrize("platform", [CUDA_PLATFORM, OPENCL_PLATFORM], ids=["cuda", "opencl"])
def test_only_loops_marked_parallel_join_the_grid(platform):
    """A serial loop nested alone in a parallel one (a sweep: level k reads level k - 1)
    stays in the thread's body, however perfectly nested."""
    n = k.Symbol("n", I)
    buf = k.Buffer("a", np.dtype(float), k.Symbol("a_", np.dtype(float), pointer=True),
                   (_sym("n"), _sym("n")), (_sym("n"), _c(1)))
    i, kk = k.Symbol("i", I), k.Symbol("k", I)
    read = k.Load(buf, (k.Sym(i, dtype=I), k.Op("-", (k.Sym(kk, dtype=I), _c(1)), dtype=I)),
                  dtype=np.dtype(float))
    sweep = k.Loop(kk, _c(1), _sym("n"), _c(1),
                   (k.Store(buf, (k.Sym(i, dtype=I), k.Sym(kk, dtype=I)), read),))
    columns = k.Loop(i, _c(0), _sym("n"), _c(1), (sweep,), k.Parallel())
    kf = k.KernelFunction("sweep", (buf.base, n), (columns,), (buf,))
    (launch,) = platform.plan(kf).launches()
    assert [d.counter.name for d in launch.dims] == ["i"]
    assert launch.body == (sweep,)


# ---------------------------------------------------------------- the host evaluator


_LEAVES = st.one_of(st.integers(-50, 50).map(_c), st.sampled_from(["m", "n", "p"]).map(_sym))


def _binary(op: str, a: k.Expr, b: k.Expr, abstract: bool) -> k.Expr:
    if op in ("min", "max") and abstract:  # the abstract form (MathCall), else lowered (Op)
        return k.MathCall(op, (a, b), dtype=I)
    return k.Op(op, (a, b), dtype=I)


_EXPRS = st.recursive(_LEAVES, lambda ch: st.one_of(
    st.builds(_binary, st.sampled_from(["+", "-", "*", "min", "max"]), ch, ch, st.booleans()),
    ch.map(lambda a: k.Op("neg", (a,), dtype=I))), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(_EXPRS, st.fixed_dictionaries({n: st.integers(-100, 100) for n in "mnp"}),
       st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
def test_host_evaluator_against_python_on_the_text_form(e, env, cmp):
    """``evaluate`` of a bound equals Python's evaluation of its text form (the same C
    infix for these operators), which checks the text form's parentheses too."""
    direct = eval(expr_text(e), {"min": min, "max": max}, dict(env))  # noqa: S307
    assert evaluate(e, env) == direct
    test = k.Op(cmp, (e, _sym("n")), dtype=np.dtype(bool))
    assert evaluate(test, env) == eval(expr_text(test), {"min": min, "max": max}, dict(env))  # noqa: S307


def test_text_form_keeps_the_parentheses_precedence_needs():
    e = k.Op("-", (_sym("m"), k.Op("+", (_sym("n"), _c(1)), dtype=I)), dtype=I)
    assert expr_text(e) == "m - (n + 1)"
    assert expr_text(k.Op("*", (e, _sym("p")), dtype=I)) == "(m - (n + 1)) * p"
    assert evaluate(e, {"m": 5, "n": 2}) == 2


def test_host_evaluator_refuses_what_only_the_device_computes():
    assert not host_computable(k.CCall("get_global_id", (_c(0),), dtype=I), {"n"})
    assert not host_computable(_sym("n"), set())  # not a scalar the host knows
    assert host_computable(k.Op("<", (_sym("n"), _c(3)), dtype=np.dtype(bool)), {"n"})
    with pytest.raises(NotImplementedError):
        evaluate(k.Literal("threadIdx.x", dtype=I), {})


def test_grid_extents_of_a_point_plan_are_the_interior():
    """Evaluated on the host for an array, the interior launch covers the interior points
    and the border launch the rows of the border."""
    a = np.zeros((10, 7, 5))
    for plan in point_plans(True):
        env = {p.name: 0 for p in plan.kernel.params}
        for p in plan.kernel.params:
            shape = p.get(k.ShapeOf)
            if shape is not None:
                env[p.name] = a.shape[shape.dim]
        border, interior = plan.launches()
        assert extents(interior, env) == (3, 5, 8)  # dimension 0 first: the last axis
        assert extents(border, env) == (7, 10)


def test_host_launches_run_host_loops_and_skip_launches_the_host_decides_against():
    flag = k.Symbol("flag", np.dtype(bool))
    yes = Launch("yes", (), (), (), ())
    host = Launch("host", (), (), (k.Sym(flag, dtype=np.dtype(bool)),), (), host_conditions=True)
    device = Launch("device", (), (), (k.Sym(flag, dtype=np.dtype(bool)),), ())
    j = k.Symbol("j", I)
    seen = []
    loop = HostLoop(j, _sym("n"), _c(-1), _c(-2), (yes, host, device))
    env = {"n": 5, "flag": False}
    for launch in host_launches((loop,), env):
        seen.append((launch.name, env["j"]))
    assert seen == [(name, j) for j in range(5, -1, -2) for name in ("yes", "device")]
    env["flag"] = True
    assert [s.name for s in host_launches((host,), env)] == ["host"]
    dims = (Dim(j, _c(2), _sym("n")),)
    assert extents(Launch("d", (), dims, (), ()), {"n": 9}) == (7,)


# ---------------------------------------------------------------- on PoCL


def test_variants_are_chosen_by_element_strides_for_opencl_views():
    """OpenCL's device views give strides in elements: the same choice as CUDA's."""
    from stencilkit.runtime.cuda_variants import choose_elements

    c_order = {"a": ((6, 9, 12), (108, 12, 1)), "out": ((6, 9, 12), (108, 12, 1))}
    assert choose_elements(c_order, "out") == Variant(2, frozenset({"a", "out"}), True, True)
    storage = {"a": ((6, 9, 12), (9, 1, 54)), "out": ((6, 9, 12), (9, 1, 54))}
    assert choose_elements(storage, "out").unit_axis == 1
    huge = {"out": ((2**11, 2**11, 2**9), (2**20, 2**9, 1))}  # 2**31 elements
    assert not choose_elements(huge, "out").narrow


@pytest.fixture
def launches(monkeypatch):
    """The (kernel, global size) of every OpenCL launch, as they are enqueued."""
    cl = pytest.importorskip("pyopencl", reason="pyopencl is not installed")
    if not sk.backends()["opencl"].available:
        pytest.skip(f"backend opencl: {sk.backends()['opencl'].reason}")
    launched = []
    enqueue = cl.enqueue_nd_range_kernel

    def counting(queue, kernel, size, *args, **kwargs):
        launched.append((kernel.function_name, tuple(size)))
        return enqueue(queue, kernel, size, *args, **kwargs)

    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", counting)
    return launched


def test_opencl_out_without_fill_is_one_launch(launches):
    """The border launch's condition (``fill_border``) is decided on the host: a call with
    ``out=`` and no ``cval`` launches the interior only, and leaves out's border alone."""
    a = np.random.default_rng(0).random((6, 7, 8))
    st = sk.stencil(lap3d, backend="opencl")
    expected = sk.stencil(lap3d, backend="numpy")(a)
    np.testing.assert_allclose(st(a), expected, rtol=1e-14)
    assert len(launches) == 2  # the border filled, the interior
    launches.clear()
    out = np.full_like(a, 7.0)
    st(a, out=out)
    assert [name for name, _ in launches] == ["sk_lap3d_point_2"]  # the interior only
    inner = (slice(1, -1),) * 3
    np.testing.assert_allclose(out[inner], expected[inner], rtol=1e-14)
    border = np.ones(a.shape, bool)
    border[inner] = False
    assert (out[border] == 7.0).all()


def test_opencl_storage_order_arrays_run_a_variant_with_x_on_their_unit_axis(launches,
                                                                             monkeypatch):
    """pyopencl arrays with J unit stride (K outermost, as GPU storages): the call runs the
    variant whose NDRange dimension 0 is J, built on first use and kept; the results are
    NumPy's."""
    import pyopencl.array as cla

    from stencilkit.runtime import opencl as ocl

    q = ocl.device().queue
    built = []
    build = ocl.build
    monkeypatch.setattr(ocl, "build", lambda *args: built.append(args) or build(*args))

    def storage(x):
        return cla.to_device(q, np.ascontiguousarray(x.transpose(2, 0, 1))).transpose((1, 2, 0))

    def host(d):
        return d.transpose((2, 0, 1)).get().transpose(1, 2, 0)

    a = np.random.default_rng(1).random((6, 9, 12))
    st = sk.stencil(lap3d, backend="opencl")
    expected = sk.stencil(lap3d, backend="numpy")(a)
    inner = (slice(1, -1),) * 3
    np.testing.assert_allclose(st(a), expected, rtol=1e-14)
    assert launches[-1][1][1:] == (7, 4)  # C order: i2 (10 points) on dimension 0, then i1, i0
    for call in range(2):
        launches.clear()
        built.clear()
        out = storage(np.zeros_like(a))
        st(storage(a), out=out)
        assert [size[1:] for _, size in launches] == [(10, 4)]  # i1 first, then i2, i0
        # the first call builds the device signature's program and the variant's; the
        # second finds both
        assert bool(built) == (call == 0)
        np.testing.assert_allclose(host(out)[inner], expected[inner], rtol=1e-14)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_a_computation_call_its_own_plan_serves_builds_no_other(monkeypatch):
    """A computation called on small arrays in C order runs the plan it was built with (32
    bits, covering grids): no second, identical entry is planned, printed and compiled on
    its first call (the chosen variant also names the unit-stride axis and arrays, which a
    computation's plans do not depend on)."""
    from stencilkit_apps import definitions

    from .cuda_emulator import install

    install(monkeypatch)
    names = [f.name for f in sk.stencil(definitions.hdiff, backend="numpy")
             .definition.parameter_fields]
    rng = np.random.default_rng(5)
    fields = {n: rng.random((10, 11, 12)) + 2.0 for n in names}
    st = sk.stencil(definitions.hdiff, backend="cuda")
    st(**fields, origin=(2, 2, 0), domain=(6, 7, 12))
    (_, call), = st._builds.values()
    assert call.entry._variants == {}


# ---------------------------------------------------------------- temporaries on chip


def partly_written(u: Field[float], out: Field[float]):
    # t is set at levels 1.. only: level 0 is read before any write (another call's
    # value in a kept 3-D array, nothing on chip): t stays in global memory
    with computation(FORWARD), interval(1, None):
        t = u * 2.0
    with computation(BACKWARD), interval(...):
        out = t + u  # noqa: F841


@pytest.mark.parametrize("storage", [False, True], ids=["C order", "storage order"])
def test_column_private_temporaries_go_to_shared_memory(storage):
    """GT4Py's tridiagonal spelling: cp and dp, written by the FORWARD sweep and read by
    the BACKWARD one in the same thread, live in the block's shared memory in the plan a
    call with few levels runs (nk doubles each per thread, level-major); their 3-D arrays
    are not even parameters of the launch. The fallback variant keeps them in global
    memory, indexing the 3-D arrays directly; a temporary with a level read before any
    write stays there too."""
    from stencilkit.lower.computation_gpu import column_private_temporaries
    from stencilkit_apps import definitions

    plan, source = _cuda_build(definitions.tridiagonal_temporaries, storage)
    (launch,) = plan.launches()
    assert launch.shared is not None, plan_text(plan)
    assert expr_text(launch.shared.per_thread) == "2 * nk"
    assert launch.shared.symbol.dtype == np.float64
    assert not {"cp_", "dp_"} & {p.name for p in launch.params}
    assert "extern __shared__ double sk_shared[];" in source
    assert "shared sk_shared: 2 * nk x float64 per thread" in plan_text(plan)
    st = sk.stencil(definitions.tridiagonal_temporaries)
    entry = st._build(cuda_registry.BACKEND, None)[1].entry
    global_plan, global_source = entry.variants.build(
        dataclasses.replace(entry.variants.own, on_chip=False))
    (fallback,) = global_plan.launches()
    assert fallback.shared is None and "__shared__" not in global_source
    assert {"cp_", "dp_"} <= {p.name for p in fallback.params}
    # indexed as before column pointers (a 64-bit pointer per column costs registers)
    assert "_column" not in global_source

    numpy_st = sk.stencil(partly_written, backend="numpy")
    assert column_private_temporaries(numpy_st.definition, numpy_st.schedule, {}) == ()
    plan, source = _cuda_build(partly_written, storage)
    assert plan.launches()[0].shared is None and "__shared__" not in source


def test_shared_memory_bounds_the_block_and_the_levels():
    """nk levels of 16 bytes per thread (cp and dp) on chip up to 28 levels (512 resident
    threads per SM within its 228 KiB; a warp's block within 48 KiB would allow 96), the
    block halved until it fits; 80 levels, GPU-bench's tridiag, run the global-memory
    variant at full occupancy (a block of one warp would fit, 5 blocks per SM)."""
    from stencilkit.runtime import cuda_variants as cv

    assert cv.fits_on_chip(28, 16) and not cv.fits_on_chip(29, 16)
    assert cv.fits_on_chip(114, 4) and not cv.fits_on_chip(115, 4)  # one float32 temporary
    assert not cv.fits_on_chip(1, 0)
    assert cv.shared_block((32, 8, 1), 8 * 16) == (32, 8, 1)  # 256 x 128 B: 32 KiB
    assert cv.shared_block((32, 8, 1), 20 * 16) == (32, 4, 1)
    assert cv.shared_block((32, 8, 1), 80 * 16) == (32, 1, 1)  # 40 KiB
    assert cv.shared_block((32, 4, 2), 80 * 16) == (32, 1, 1)
    assert cv.shared_block((32, 8, 1), 97 * 16) is None
    variants = cv.Variants(Variant(2), lambda v: None, "x", level_bytes=16)  # type: ignore
    chosen = Variant(2, frozenset(), True, True)
    assert variants.wanted(chosen, ("x",), (np.zeros((4, 4, 28)),)).on_chip
    assert not variants.wanted(chosen, ("x",), (np.zeros((4, 4, 80)),)).on_chip


def _tridiagonal_data(shape, storage: bool, seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = {n: rng.random(shape) + (3.0 if n == "b" else 0.0) for n in "abcdx"}
    if storage:  # the layout of sk.empty(..., backend="cuda"): K outermost, J unit
        data = {n: np.ascontiguousarray(v.transpose(2, 0, 1)).transpose(1, 2, 0)
                for n, v in data.items()}
    return data


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
@pytest.mark.parametrize("storage", [False, True], ids=["C order", "storage order"])
@pytest.mark.parametrize("which", ["tridiagonal", "tridiagonal_temporaries"])
@pytest.mark.parametrize("levels", [12, 100], ids=["on chip", "too many levels"])
def test_tridiagonal_on_chip_equals_numpy_and_global_memory(monkeypatch, which, storage,
                                                            levels):
    """Both tridiagonal spellings on the emulator (each thread its own slice of its block's
    shared memory, NaNs where nothing was written), bit for bit as "numpy" and as the
    global-memory variant (shared memory refused: ``SHARED_LIMIT`` 0): with 12 levels the
    temporaries are on chip (a block of 256 threads, 48 KiB); with 100 they do not fit a
    warp's block and the call runs the global-memory variant."""
    from stencilkit.runtime import cuda_variants
    from stencilkit_apps import definitions

    from .cuda_emulator import install
    from .golden import corpus

    install(monkeypatch)
    func = corpus.tridiagonal if which == "tridiagonal" else definitions.tridiagonal_temporaries
    names = [f.name for f in sk.stencil(func, backend="numpy").definition.parameter_fields]
    data = _tridiagonal_data((5, 6, levels), storage)
    results = []
    for backend, limit in (("numpy", None), ("cuda", None), ("cuda", 0)):
        if limit is not None:
            monkeypatch.setattr(cuda_variants, "SHARED_LIMIT", limit)
        fields = {n: data[n].copy() for n in names}
        st = sk.stencil(func, backend=backend)
        st(**fields, origin=(1, 0, 0), domain=(3, 6, levels))
        results.append(fields)
        if backend == "cuda" and which == "tridiagonal_temporaries":
            (_, call), = st._builds.values()
            (bound,) = [b for e in (call.entry, *call.entry._variants.values())
                        for b in e._bound.values()]
            (launch,) = bound.launches
            on_chip = limit is None and levels == 12
            assert launch.shared_mem == (256 * 2 * levels * 8 if on_chip else 0)
            assert launch.block == ((32, 8, 1))
    for n in names:
        np.testing.assert_array_equal(results[1][n], results[0][n], err_msg=n)
        np.testing.assert_array_equal(results[1][n], results[2][n], err_msg=n)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_shared_memory_is_sized_per_call_by_the_domain(monkeypatch):
    """The same arrays with a deeper domain: the shared memory (nk levels per thread) and
    the block are sized again (nk is part of the bound plan's signature), and the results
    stay numpy's."""
    from stencilkit_apps import definitions

    from .cuda_emulator import install

    install(monkeypatch)
    data = _tridiagonal_data((4, 5, 20), storage=True, seed=9)
    st = sk.stencil(definitions.tridiagonal_temporaries, backend="cuda")
    for nk, block, shared in ((6, (32, 8, 1), 256 * 2 * 6 * 8), (20, (32, 4, 1), 128 * 2 * 20 * 8)):
        fields = {n: v.copy() for n, v in data.items()}
        expected = {n: v.copy() for n, v in data.items()}
        st(**fields, origin=(0, 0, 0), domain=(4, 5, nk))
        sk.stencil(definitions.tridiagonal_temporaries, backend="numpy")(
            **expected, origin=(0, 0, 0), domain=(4, 5, nk))
        np.testing.assert_array_equal(fields["x"], expected["x"])
        (_, call), = st._builds.values()
        launches = [b.launches[0] for b in call.entry._bound.values()]
        assert (block, shared) in [(lc.block, lc.shared_mem) for lc in launches]


@pytest.mark.parametrize("storage", [False, True], ids=["C order", "storage order"])
def test_on_chip_kernels_compile_with_nvrtc(storage):
    """NVRTC compiles the on-chip tridiagonal kernel and its global-memory fallback for
    sm_90; the on-chip one's PTX reaches the temporaries with shared loads and stores only
    (cp and dp: no global access of theirs left)."""
    from stencilkit.build.cuda import compile_ptx_uncached, nvrtc_problem
    from stencilkit_apps import definitions

    if nvrtc_problem() is not None:
        pytest.skip(f"NVRTC unavailable: {nvrtc_problem()}")
    _, source = _cuda_build(definitions.tridiagonal_temporaries, storage)
    ptx = compile_ptx_uncached(source, "sm_90", "on_chip")
    assert "ld.shared.f64" in ptx and "st.shared.f64" in ptx
    st = sk.stencil(definitions.tridiagonal_temporaries)
    entry = st._build(cuda_registry.BACKEND, None)[1].entry
    _, fallback = entry.variants.build(dataclasses.replace(entry.variants.own, on_chip=False))
    assert ".shared" not in compile_ptx_uncached(fallback, "sm_90", "fallback")


def register_and_column(u: Field[float], out: Field[float]):
    # r is read at its own point only (a register); t, read by the BACKWARD sweep, is the
    # column-private one
    with computation(FORWARD), interval(...):
        r = u * 2.0
        t = r + 1.0
    with computation(BACKWARD), interval(...):
        out = t * u  # noqa: F841


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_a_register_temporary_is_not_put_on_chip(monkeypatch):
    """Only temporaries with a 3-D array go on chip: a register temporary of the same
    column group stays a register (found by test_random_computations), and the results on
    the emulator are numpy's."""
    from stencilkit.lower.computation_gpu import column_private_temporaries

    from .cuda_emulator import install

    install(monkeypatch)
    numpy_st = sk.stencil(register_and_column, backend="numpy")
    assert column_private_temporaries(numpy_st.definition, numpy_st.schedule, {}) == ("t",)
    rng = np.random.default_rng(2)
    u = rng.random((4, 5, 6))
    expected, out = np.zeros_like(u), np.zeros_like(u)
    numpy_st(u, expected)
    sk.stencil(register_and_column, backend="cuda")(u, out)
    np.testing.assert_array_equal(out, expected)
