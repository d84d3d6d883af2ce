"""The "opencl" backend: OpenCL C via PyOpenCL (any OpenCL device, e.g. PoCL on the CPU).

Every kind is lowered to kernel IR (computations by the GPU lowering of
``lower.computation_gpu``, as for "cuda"), split into launches by the OpenCL platform
(``targets.opencl``: parallel loop nests -> NDRanges, host loops), printed by the
C-family printer's OpenCL hooks and built by PyOpenCL per device (``runtime.opencl``).
NumPy arrays are copied to the device and back; point kernels also take pyopencl arrays in
place. OpenCL C has no complex types, so the dtypes exclude them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..errors import BackendError
from ..ir.abi import Access, RaceMode
from . import shared_stages
from .base import Backend, Capabilities, KindStages, PerKind, Pieces, Stages

if TYPE_CHECKING:
    from ..compile.driver import Work
    from ..compile.requests import ComputationRequest, ParLoopRequest, PointRequest, Request


def probe() -> str | None:
    from ..runtime.opencl import probe as device_probe

    return device_probe()


#: What the generated code computes on: OpenCL C has no complex types.
DTYPES = frozenset(t for t in dtypes.SUPPORTED if not dtypes.is_complex(t))


def require_dtypes(name: str, types: object) -> None:
    wrong = sorted({str(t) for t in types if np.dtype(t) not in DTYPES})  # type: ignore[attr-defined]
    if wrong:
        raise BackendError(f"backend 'opencl' does not compute on {', '.join(wrong)} "
                           "(OpenCL C has no complex types)", stencil=name,
                           hint="use backend='c' or 'numpy' for complex data")


# ------------------------------------------------------------------ stages (compile.driver)

def lower_point(req: PointRequest, work: Work) -> Work:
    """NumPy arrays reach the device as C-contiguous copies, so their last stride is the
    constant 1 (neighbouring work-items read neighbouring elements, as vectorizers and
    coalescing want); pyopencl arrays keep their layout (the request's says which have a
    unit last stride)."""
    kernel = req.typed.kernel
    require_dtypes(kernel.name, [t.dtype for t in req.types] + [req.out_dtype,
                                                                kernel.return_type])
    return shared_stages.lower_point(req, work)


def mark_parallel(req: PointRequest, work: Work) -> Work:
    from ..targets import opencl as platform

    (kf,) = work.kernels
    return work.but(kernels=(dataclasses.replace(
        kf, body=platform.mark_parallel_nests(kf.body, kf.params)),))


def plan(req: Request, work: Work) -> Work:
    """The launches: parallel loop nests as NDRanges, serial loops around them on the host."""
    from ..ir.verify import checked_plan
    from ..targets import opencl as platform

    return work.but(plan=checked_plan(platform.plan(work.kernels[-1])))


def plan_point(req: PointRequest, work: Work) -> Work:
    """As CUDA's: NDRange dimension 0 on the output's unit-stride axis, unit strides as
    constants and 32-bit indices (dimension 0's work-item index 64-bit:
    ``targets.opencl.wide_first_index``); NDRanges always cover, so no covering variant."""
    from ..targets.opencl import OPENCL_PLATFORM

    return shared_stages.plan_point_variants(req, work, OPENCL_PLATFORM, covering=False)


def print_program(req: Request, work: Work) -> Work:
    from ..codegen import opencl as printer

    return work.but(source=printer.program_source(work.plan))


def _variants(plan, own, out: str, relevant=None):
    """The other specializations a call may need, printed as OpenCL (``runtime.cuda_variants``;
    ``plan``: variant -> launch plan, ``own``: the variant of the entry's own plan)."""
    from ..codegen import opencl as printer
    from ..runtime.cuda_variants import Variants

    def build(variant):
        planned = plan(variant)
        return planned, printer.program_source(planned)

    if relevant is None:
        return Variants(own, build, out)
    return Variants(own, build, out, relevant)


def point_program(req: PointRequest, work: Work) -> Work:
    """The program, built by PyOpenCL per device on its first run (``runtime.opencl``)."""
    from ..lower.point import OUT
    from ..runtime.launch import standard_arrays
    from ..runtime.opencl_launch import Executable

    kernel = req.typed.kernel
    exe = Executable(work.plan, work.source, kernel.name)
    own, plan = work.facts["variants"]
    exe.variants = _variants(plan, own, OUT)
    exe.standard = standard_arrays(work.described, req.typed.neighborhood.border, req.mode,
                                   kernel.name, kernel.loc)
    return work.but(entry=exe)


def lower_computation(req: ComputationRequest, work: Work) -> Work:
    """The GPU loop structure (``lower.computation_gpu``, CUDA's); every field's
    last axis is its unit-stride one (fields reach the device as C-contiguous copies)."""
    from ..lower.computation_gpu import GpuComputationLowering

    defn = req.defn
    require_dtypes(defn.name, [f.dtype for f in defn.fields] + [t for _, t in defn.temporaries]
                   + [s.dtype for s in defn.scalars])
    layout = {f.name: len(f.axes) + len(f.data_dims) - 1 for f in defn.fields}
    layout.update({t: 2 for t, _ in defn.temporaries})
    lowering = GpuComputationLowering(defn, req.sched, layout, req.src)
    return work.but(kernels=(lowering.lower_all(),), facts={"lowering": lowering})


def plan_computation(req: ComputationRequest, work: Work) -> Work:
    """As CUDA's: the own plan indexes in 32 bits (origins, domain, strides, counters); a
    call whose arrays need them gets the 64-bit variant (``shared_stages``). NDRanges are
    rounded up to whole work-groups, so they always cover the domain."""
    from ..targets.opencl import OPENCL_PLATFORM

    return shared_stages.plan_computation_variants(req, work, OPENCL_PLATFORM, covering=False)


def computation_program(req: ComputationRequest, work: Work) -> Work:
    """The program, with the variants a call's arrays may need (``plan_computation``),
    chosen on the written field's geometry (and every array's sizes) as CUDA's are."""
    from ..runtime.opencl_launch import Executable

    exe = Executable(work.plan, work.source, req.name)
    own, plan, relevant = work.facts["variants"]
    out = shared_stages.variant_field(req, work)
    exe.variants = None if out is None else _variants(plan, own, out, relevant)
    return work.but(entry=exe)


def launch_computation(req: ComputationRequest, work: Work) -> Work:
    """The call (``runtime.opencl_launch.OpenCLComputationCall``): binds the arguments the
    launch description lists."""
    from ..runtime.opencl_launch import OpenCLComputationCall

    return work.but(entry=OpenCLComputationCall(work.entry, req.defn, work.described))


def race(req: ParLoopRequest) -> RaceMode:
    """COLOUR, ATOMIC or NONE (no shared writes); "atomic" colours instead where a
    shared INC's element type has no atomic add here."""
    from ..targets import opencl as platform

    if not any(s.writes_shared for s in req.specs):
        return RaceMode.NONE
    if req.atomic and all(platform.atomic_add_supported(s.dtype) for s in req.specs
                          if s.writes_shared and s.mode is Access.INC):
        return RaceMode.ATOMIC
    return RaceMode.COLOUR


def lower_parloop_kernel(req: ParLoopRequest, work: Work) -> Work:
    require_dtypes(req.name, [s.dtype for s in req.specs])
    return shared_stages.lower_parloop_kernel(req, work)


def lower_parloop_loop(req: ParLoopRequest, work: Work) -> Work:
    """The loop over the set is ``LoopLowering``'s, with every argument gathered into
    private arrays."""
    from ..lower import parloop as lpl

    (kf,) = work.kernels
    loop = lpl.LoopLowering(lpl.loop_function_name(req.name), req.name, kf.name, req.specs,
                            race(req) is RaceMode.ATOMIC, kf.uses_error_flag,
                            private=True).lower()
    return work.but(kernels=(kf, loop))


def print_parloop(req: ParLoopRequest, work: Work) -> Work:
    from ..codegen import opencl as printer

    return work.but(source=printer.program_source(work.plan, work.kernels[:1], offsets=False))


def parloop_program(req: ParLoopRequest, work: Work) -> Work:
    from ..runtime.opencl_launch import Executable, OpenCLParLoop

    return work.but(entry=OpenCLParLoop(Executable(work.plan, work.source, req.name),
                                        race(req)))


def _ref(name: str) -> str:
    return f"{__name__}:{name}"


_SIMPLIFY = ("simplify", "stencilkit.registry.shared_stages:simplify_each")
_HOIST = ("hoist_rows", "stencilkit.registry.shared_stages:hoist_rows_in_threads")


BACKEND = Backend(
    name="opencl",
    description="OpenCL C via PyOpenCL (any OpenCL device, e.g. PoCL on the CPU)",
    needs="pyopencl",
    probe=probe,
    capabilities=Capabilities(
        kinds=frozenset({"point", "computation", "parloop"}),
        dtypes=DTYPES,
        device="cpu",  # where its arrays live: NumPy arrays are copied to the device
        compiled=True,
        inlines_temporaries=True,
    ),
    pieces=Pieces(
        platform="stencilkit.targets.opencl:OpenCLPlatform",
        # no "key" stage: PyOpenCL builds the program for the device it runs on
        stages=Stages(
            point=KindStages(lower=_ref("lower_point"),
                             transforms=(_SIMPLIFY, ("mark_parallel", _ref("mark_parallel")), _HOIST),
                             platform=_ref("plan_point"), print=_ref("print_program"),
                             toolchain=_ref("point_program")),
            computation=KindStages(lower=_ref("lower_computation"), transforms=(_SIMPLIFY, _HOIST),
                                   platform=_ref("plan_computation"),
                                   print=_ref("print_program"),
                                   toolchain=_ref("computation_program"),
                                   launcher=_ref("launch_computation")),
            parloop=KindStages(lower=_ref("lower_parloop_kernel"),
                               lower_loop=_ref("lower_parloop_loop"), transforms=(_SIMPLIFY, _HOIST),
                               platform=_ref("plan"),
                               print=_ref("print_parloop"),
                               toolchain=_ref("parloop_program"))),
        launcher=PerKind(point="stencilkit.runtime.opencl_launch:OpenCLPointCall",
                         computation="stencilkit.runtime.opencl_launch:Executable",
                         parloop="stencilkit.runtime.opencl_launch:run_parloop"),
        array_module="numpy",
    ),
    gt4py_names=("opencl",),
)
