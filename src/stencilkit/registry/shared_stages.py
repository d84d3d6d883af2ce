"""Stage functions several backends declare (``compile.driver`` runs them as theirs).

Each is ``(request, work) -> work``; see ``registry/base.py`` (``KindStages``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import kernel as k

if TYPE_CHECKING:
    import numpy as np

    from ..compile.driver import Work
    from ..compile.point import TypedPointKernel
    from ..compile.requests import ComputationRequest, ParLoopRequest, PointRequest, Request
    from ..frontend.source import SourceFunction
    from ..lower.point import Layout


def filename(src: SourceFunction) -> str:
    """The file name generated code quotes in its comments (without the directory)."""
    return src.filename.rsplit("/", 1)[-1]


def lower(typed: TypedPointKernel, layout: Layout, line_text, filename: str,
          out_dtype: np.dtype, mode: str | tuple[str, ...] = "constant") -> k.KernelFunction:
    """The kernel IR of one point-kernel specialization (``mode``: the border mode)."""
    from ..lower.point import PointLowering

    return PointLowering(typed.kernel, typed.neighborhood.border, layout, line_text, filename,
                         out_dtype=out_dtype, mode=mode).lower()


def lower_point(req: PointRequest, work: Work) -> Work:
    """The kernel IR of one point-kernel specialization, for the request's layout."""
    kf = lower(req.typed, req.layout, req.src.line_text, filename(req.src), req.out_dtype,
               req.mode)
    return work.but(kernels=(kf,))


def lower_parloop_kernel(req: ParLoopRequest, work: Work) -> Work:
    """A ParLoop's Python kernel as a function of row-major local arrays (kernels[0])."""
    from ..lower import parloop as lpl

    assert req.typed is not None and req.src is not None
    kf = lpl.KernelLowering(req.typed, req.specs, req.src.line_text,
                            filename(req.src)).lower_kernel()
    return work.but(kernels=(kf,))


def lower_parloop_loop(req: ParLoopRequest, work: Work) -> Work:
    """The loop over the set that calls kernels[0] (kernels[1]); shared increments atomic
    as the request says."""
    from ..lower import parloop as lpl

    kernel = work.kernels[0]
    loop = lpl.LoopLowering(lpl.loop_function_name(req.name), req.name, kernel.name,
                            req.specs, req.atomic, kernel.uses_error_flag).lower()
    return work.but(kernels=(kernel, loop))


def platform_each(req: Request, work: Work) -> Work:
    """Every kernel of the work lowered by the backend's platform."""
    platform = req.backend.platform()
    return work.but(kernels=tuple(platform.lower(kf) for kf in work.kernels))


def simplify_each(req: Request, work: Work) -> Work:
    """Every kernel of the work simplified (``lower.simplify``: exact folding, identities,
    dead temporaries), so that the generated code reads like a hand kernel."""
    from ..lower.simplify import simplify

    return work.but(kernels=tuple(simplify(kf) for kf in work.kernels))


def hoist_rows_each(req: Request, work: Work) -> Work:
    """Every kernel's row bases hoisted out of its innermost loops, before them
    (``lower.hoist_rows``, ``Placement.OUTSIDE``: the CPU)."""
    from ..lower.hoist_rows import Placement, hoist_row_bases

    return work.but(kernels=tuple(hoist_row_bases(kf, Placement.OUTSIDE) for kf in work.kernels))


def hoist_rows_in_threads(req: Request, work: Work) -> Work:
    """As ``hoist_rows_each``, a parallel innermost loop's in its body: the GPU planner
    makes a grid of the parallel nest (``Placement.THREAD``)."""
    from ..lower.hoist_rows import Placement, hoist_row_bases

    return work.but(kernels=tuple(hoist_row_bases(kf, Placement.THREAD) for kf in work.kernels))


def plan_point_variants(req: PointRequest, work: Work, platform, covering: bool) -> Work:
    """A GPU point kernel's own launch plan (``platform``: a ``GpuPlatform``): dimension 0
    on the output's unit-stride axis, the layout's unit strides as constants, 32-bit
    indices and, where ``covering`` (CUDA: OpenCL's NDRanges always cover), a thread per
    point; the entry plans the other variants per call (``runtime.cuda_variants``) with
    ``facts["variants"]``. The variants a call plans later are verified as they are planned
    (the driver's hook sees this specialization's own plan only)."""
    from ..ir.verify import checked_plan
    from ..lower.point import OUT
    from ..targets.cuda_layout import Variant, specialize

    (kf,) = work.kernels
    kernel, layout = req.typed.kernel, req.layout
    out = next(p.name for p in kf.params if p.get(k.BasePointer) == k.BasePointer(OUT))

    def plan(variant: Variant):
        return checked_plan(platform.plan(specialize(kf, variant),
                                          unit=(out, variant.unit_axis),
                                          covering=covering and variant.covering))

    ndim = kernel.ndim
    units = {n for n, unit, t in zip(kernel.params, layout.unit_stride, req.types)
             if unit and t.ndim == ndim}  # as runtime.cuda_variants.choose counts them
    own = Variant(ndim - 1, frozenset(units | ({OUT} if layout.out_unit_stride else set())),
                  True, covering)
    return work.but(plan=plan(own), facts={"variants": (own, plan)})


def covering_field(req: ComputationRequest, work: Work) -> str | None:
    """The first 3-D field the computation writes: a call's variant is chosen on its
    geometry. Its extents bound every grid dimension (the domain lies inside it; stage
    extents add a halo), so where they fit a grid (``runtime.cuda_variants``) the grids
    cover the dimensions with a block of at least 2 on y and z: twice the limit checked."""
    lowering = work.facts["lowering"]
    written = req.sched.written
    return next((b for b in lowering.buffers if b in written and lowering.axes[b] == "IJK"
                 and b not in dict(req.defn.temporaries)), None)


def variant_field(req: ComputationRequest, work: Work) -> str | None:
    """The array whose geometry (with every array's sizes) chooses a GPU computation call's
    variant: ``covering_field``, else the first written buffer; None where the computation
    writes no field (GT4Py accepts one that writes temporaries only; the lowering removed
    them, so its kernels touch no array and its own plan serves every call)."""
    written = work.described.written
    return covering_field(req, work) or next(
        (b for b in work.facts["lowering"].buffers if b in written), None)


def plan_computation_variants(req: ComputationRequest, work: Work, platform,
                              covering: bool, on_chip: bool = False) -> Work:
    """A GPU computation's own launch plan (``platform``: a ``GpuPlatform``) with 32-bit
    indices (origins, domain, strides, counters) and, where ``covering`` (CUDA: OpenCL's
    NDRanges always cover) and a written field bounds the grids, grids that cover the
    dimensions; and, where ``on_chip`` (CUDA) and the lowering reaches column-private
    temporaries through column pointers, those temporaries in the block's shared memory
    (``targets.cuda_layout.on_chip``; the call's nk decides whether they fit:
    ``runtime.cuda_variants``). The entry plans the 64-bit, grid-stride or global-memory
    variant for a call that needs it with ``facts["variants"]``: (own, plan, relevant).
    The lowering already put each field's unit-stride loop innermost (dimension 0) and that
    stride as the constant 1, so the variants differ in index width, grid loops and where
    the column temporaries live only."""
    from ..ir.verify import checked_plan
    from ..targets.cuda_layout import Variant, in_global_memory, specialize
    from ..targets.cuda_layout import on_chip as into_shared_memory

    (kf,) = work.kernels
    can_cover = covering and covering_field(req, work) is not None
    columns = tuple(b.base.name for b in work.facts["lowering"].column_pointers.values()) \
        if on_chip else ()

    def relevant(variant: Variant) -> Variant:
        return Variant(2, frozenset(), variant.narrow, variant.covering and can_cover,
                       variant.on_chip and bool(columns))

    def plan(variant: Variant):
        wanted = relevant(variant)
        if wanted.on_chip:
            specialized, shared = into_shared_memory(specialize(kf, wanted), columns)
        else:
            specialized, shared = in_global_memory(specialize(kf, wanted), columns), None
        return checked_plan(platform.plan(specialized, covering=wanted.covering,
                                          shared=shared))

    # the usual call (nk small enough: runtime.cuda_variants.Variants.wanted) keeps its
    # column-private temporaries on chip
    own = relevant(Variant(2, frozenset(), True, True, True))
    return work.but(plan=plan(own), facts={"variants": (own, plan, relevant)})


def launch_computation(req: ComputationRequest, work: Work) -> Work:
    """The compiled entry as a computation call (``runtime.computation``), binding the
    arguments the launch description lists."""
    from ..runtime.computation import CompiledComputationCall

    return work.but(entry=CompiledComputationCall(work.entry, req.defn, work.described))


def computation_layout(fields, defn) -> tuple:
    """Which axis of each field has unit stride: the loop over it runs innermost."""
    from ..lower.computation import layout_of

    return tuple(sorted(layout_of(fields, defn).items()))
