"""The "cuda" backend: CUDA C++ compiled at run time by NVRTC, launched through CuPy.

Every kind is lowered to kernel IR as for the C backend, cut by the CUDA platform
(``targets/cuda.py``) into a launch plan (a thread per iteration of up to three
nested parallel loops; serial loops around parallel ones run on the host), printed by the
C-family printer's CUDA hooks (``codegen/cuda.py``). The entry (``runtime/cuda.py``) is
called like the C entry points, so the shared launchers drive it; it compiles the source for
the device's compute capability on its first call (``build/cuda.py``: NVRTC, PTX cached on
disk), so generating source needs no GPU. Complex numbers are a struct of the prelude
(``codegen.cuda.COMPLEX``) with Numba's arithmetic; the math functions libdevice has no
complex version of are refused with the statement that calls them.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..ir.abi import RaceMode
from . import shared_stages
from .base import KINDS, Backend, Capabilities, KindStages, PerKind, Pieces, Stages

if TYPE_CHECKING:
    from ..compile.driver import Work
    from ..compile.requests import ComputationRequest, ParLoopRequest, PointRequest, Request

#: every type, complex ones as the prelude's structs
CUDA_DTYPES = dtypes.SUPPORTED


def require_complex_functions(kf, name: str) -> None:
    """A BackendError naming the statement, where a complex math function that "cuda" does
    not compute is called (before platform lowering, which would fail on it)."""
    from ..errors import BackendError
    from ..targets.cuda import COMPLEX_FUNCTIONS, unsupported_complex_call

    found = unsupported_complex_call(kf)
    if found is None:
        return
    func, stmt = found
    where = f" (in: {stmt.source.strip()})" if stmt is not None and stmt.source else ""
    raise BackendError(
        f"backend 'cuda' does not compute on complex numbers with {func}(){where}: CUDA's "
        "libdevice has no complex functions; on the GPU, complex numbers have arithmetic, "
        f"comparisons and {', '.join(sorted(COMPLEX_FUNCTIONS))}", stencil=name,
        loc=stmt.loc if stmt is not None else None,
        hint="use backend='c', 'numba' or 'numpy' for this kernel, or write the function "
             "with real arithmetic on z.real and z.imag")


@functools.cache
def probe() -> str | None:
    """None when a CUDA device runs a one-line kernel built as the generated ones are (NVRTC,
    loaded by the driver, launched by CuPy), else why not; once per process."""
    if importlib.util.find_spec("cupy") is None:
        return "cupy is not installed (pip install 'stencilkit[cuda]')"
    from ..build.cuda import nvrtc_problem

    problem = nvrtc_problem()
    if problem is not None:
        return problem
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy raises its own CUDARuntimeError without a driver
        return f"no CUDA device ({type(exc).__name__}: {exc})"
    if n == 0:
        return "no CUDA device"
    from ..runtime.cuda import probe_kernel

    return probe_kernel()


# ------------------------------------------------------------------ stages (compile.driver)

def complex_functions(req: Request, work: Work) -> Work:
    """Refuse a complex math function "cuda" does not compute, naming the statement, before
    the platform (which would fail on it)."""
    require_complex_functions(work.kernels[0], req.name)
    return work


def mark_parallel(req: PointRequest, work: Work) -> Work:
    """The loops a thread per point may run, marked parallel (the platform makes grid
    dimensions of marked loops only)."""
    from ..lower.parallel_nests import mark_parallel_nests

    (kf,) = work.kernels
    return work.but(kernels=(dataclasses.replace(kf, body=mark_parallel_nests(kf.body,
                                                                              kf.params)),))


def plan_point(req: PointRequest, work: Work) -> Work:
    """This specialization's own launch plan: C order (its unit strides are the layout's,
    already constants), 32-bit indices, a thread per point (``shared_stages``)."""
    from ..targets.cuda import CUDA_PLATFORM

    return shared_stages.plan_point_variants(req, work, CUDA_PLATFORM, covering=True)


def plan_computation(req: ComputationRequest, work: Work) -> Work:
    """The computation's plan with 32-bit indices and grids that cover the dimensions (a
    thread per point or column, no grid-stride loops); the entry plans the 64-bit or
    grid-stride variant for a call whose arrays need it (``shared_stages``)."""
    from ..targets.cuda import CUDA_PLATFORM

    return shared_stages.plan_computation_variants(req, work, CUDA_PLATFORM, covering=True,
                                                   on_chip=True)


def plan_parloop(req: ParLoopRequest, work: Work) -> Work:
    """The kernel as a __device__ function returning its status; the loop planned."""
    from ..ir.verify import checked_plan
    from ..targets.cuda import CUDA_PLATFORM

    kernel, loop = work.kernels
    return work.but(kernels=(CUDA_PLATFORM.lower(kernel), loop),
                    plan=checked_plan(CUDA_PLATFORM.plan(loop)))


def print_plan(req: Request, work: Work) -> Work:
    from ..codegen.cuda import plan_source

    return work.but(source=plan_source(work.plan))


def print_parloop(req: ParLoopRequest, work: Work) -> Work:
    from ..codegen.cuda import plan_source

    return work.but(source=plan_source(work.plan, (work.kernels[0],)))


def point_entry(req: PointRequest, work: Work) -> Work:
    """The entry: it compiles the source for the device on its first call (NVRTC, PTX in
    the disk cache under ``build.cuda``'s back key), so building needs no GPU."""
    from ..codegen.cuda import plan_source
    from ..lower.point import OUT
    from ..runtime.cuda import CudaEntry, Variants
    from ..runtime.launch import standard_arrays

    kernel = req.typed.kernel
    own, plan = work.facts["variants"]
    launch = work.described
    # the entry is called as a C one: the caller's arguments, then the launch
    # description's output, border-fill flag and cval
    names = launch.entry_keys
    standard = standard_arrays(launch, req.typed.neighborhood.border, req.mode, kernel.name,
                               kernel.loc)

    def build(variant):
        planned = plan(variant)
        return planned, plan_source(planned)

    return work.but(entry=CudaEntry(work.plan, work.source, names, launch.written, req.name,
                                    standard, Variants(own, build, OUT)))


def computation_entry(req: ComputationRequest, work: Work) -> Work:
    """The entry, called as the C one: the launch description's arguments in its order;
    the arrays it says are written are copied back from the device. A call whose arrays do
    not fit 32-bit indices gets the 64-bit variant, planned and printed on its first such
    call (``plan_computation``)."""
    from ..codegen.cuda import plan_source
    from ..runtime.cuda import CudaEntry, Variants

    launch = work.described
    own, plan, relevant = work.facts["variants"]

    def build(variant):
        planned = plan(variant)
        return planned, plan_source(planned)

    out = shared_stages.variant_field(req, work)
    # the bytes one level of a thread's on-chip temporaries takes: the call's nk decides
    # whether its column fits the block's shared memory
    level_bytes = sum(b.element_type.itemsize
                      for b in work.facts["lowering"].column_pointers.values())
    return work.but(entry=CudaEntry(work.plan, work.source, launch.entry_keys,
                                    launch.written, req.defn.name,
                                    variants=None if out is None else
                                    Variants(own, build, out, relevant, level_bytes)))


def parloop_entry(req: ParLoopRequest, work: Work) -> Work:
    from ..runtime.cuda_parloop import CudaParLoopEntry

    return work.but(entry=CudaParLoopEntry(work.plan, work.source, (), frozenset(), req.name))


#: element types with a native ``atomicAdd`` on every device the backend compiles for
#: (double since sm_60; codegen.cuda's ``sk_atomic_add_*``)
NATIVE_ATOMIC_ADD = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int32,
                                                    np.int64, np.uint32, np.uint64))


def auto_race(specs) -> RaceMode:
    """What ``race="auto"`` runs on "cuda" for a ParLoop writing shared entries: atomics
    where every shared write is an INC of an element type with a native ``atomicAdd``
    (each update one instruction, every thread at once: issue 27's hand kernel with
    atomics ran the 2M-triangle INC in 0.053 ms on an H200, against 20.3 ms for our
    colouring then), colouring otherwise. Unmeasured on a GPU with this backend's own
    kernels: ``race="color"`` keeps the other choice."""
    from ..ir.abi import Access

    shared = [s for s in specs if s.writes_shared]
    if shared and all(s.mode is Access.INC and s.dtype in NATIVE_ATOMIC_ADD for s in shared):
        return RaceMode.ATOMIC
    return RaceMode.COLOUR


def lower_computation(req: ComputationRequest, work: Work) -> Work:
    from ..lower.computation import layout_of
    from ..lower.computation_gpu import GpuComputationLowering

    lowering = GpuComputationLowering(req.defn, req.sched, layout_of(req.fields, req.defn),
                                      req.src, column_pointers=True)
    return work.but(kernels=(lowering.lower_all(),), facts={"lowering": lowering})




def _ref(name: str) -> str:
    return f"{__name__}:{name}"


_SHARED = "stencilkit.registry.shared_stages"
_COMPLEX = ("complex_functions", _ref("complex_functions"))
_SIMPLIFY = ("simplify", f"{_SHARED}:simplify_each")
_HOIST = ("hoist_rows", f"{_SHARED}:hoist_rows_in_threads")


BACKEND = Backend(
    "cuda", "CUDA C++ compiled by NVRTC, on CuPy arrays (NumPy arrays are copied)",
    needs="cupy, an NVIDIA GPU", probe=probe,
    capabilities=Capabilities(
        kinds=frozenset(KINDS), dtypes=CUDA_DTYPES, device="gpu",
        compiled=True,
        inlines_temporaries=True,
        k_planes_storage=True,  # I or J contiguous: neighbouring columns coalesce
    ),
    pieces=Pieces(
        platform="stencilkit.targets.cuda:CudaPlatform",
        # no "key" stage: the entry compiles for the device it meets (build.cuda keys the PTX)
        stages=Stages(
            point=KindStages(lower=f"{_SHARED}:lower_point",
                             transforms=(_SIMPLIFY, _COMPLEX,
                                         ("mark_parallel", _ref("mark_parallel")), _HOIST),
                             platform=_ref("plan_point"), print=_ref("print_plan"),
                             toolchain=_ref("point_entry")),
            computation=KindStages(lower=_ref("lower_computation"),
                                   transforms=(_SIMPLIFY, _COMPLEX, _HOIST),
                                   platform=_ref("plan_computation"),
                                   print=_ref("print_plan"),
                                   toolchain=_ref("computation_entry"),
                                   launcher="stencilkit.registry.shared_stages:launch_computation",
                                   layout_key="stencilkit.registry.shared_stages:computation_layout"),
            parloop=KindStages(lower=f"{_SHARED}:lower_parloop_kernel",
                               lower_loop=f"{_SHARED}:lower_parloop_loop",
                               transforms=(_SIMPLIFY, _COMPLEX, _HOIST), platform=_ref("plan_parloop"),
                               print=_ref("print_parloop"), toolchain=_ref("parloop_entry"))),
        launcher=PerKind(point="stencilkit.runtime.cuda:CudaPointCall",
                         computation="stencilkit.runtime.computation:CompiledComputationCall",
                         parloop="stencilkit.runtime.cuda_parloop:run_blocks"),
        array_module="cupy",
        auto_race=_ref("auto_race"),
    ),
    gt4py_names=("cuda", "gt:gpu", "dace:gpu"),
)
