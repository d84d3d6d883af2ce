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


def plan_point_variants(req: PointRequest, work: Work, platform, narrow: bool) -> Work:
    """A GPU point kernel's own launch plan (``platform``: a ``GpuPlatform``): dimension 0
    on the output's unit-stride axis, the layout's unit strides as constants and, where
    ``narrow`` (CUDA), 32-bit indices and a thread per point; the entry plans the other
    variants per call (``runtime.cuda_variants``) with ``facts["variants"]``. The variants
    a call plans later are verified as they are planned (the driver's hook sees this
    specialization's own plan only)."""
    from ..ir.verify import checked_plan
    from ..lower.point import OUT
    from ..targets.cuda_layout import Variant, specialize

    (kf,) = work.kernels
    kernel, layout = req.typed.kernel, req.layout
    out = next(p.name for p in kf.params if p.get(k.BasePointer) == k.BasePointer(OUT))

    def plan(variant: Variant):
        return checked_plan(platform.plan(specialize(kf, variant),
                                          unit=(out, variant.unit_axis),
                                          covering=narrow and variant.covering))

    ndim = kernel.ndim
    units = {n for n, unit, t in zip(kernel.params, layout.unit_stride, req.types)
             if unit and t.ndim == ndim}  # as runtime.cuda_variants.choose counts them
    own = Variant(ndim - 1, frozenset(units | ({OUT} if layout.out_unit_stride else set())),
                  narrow, narrow)
    return work.but(plan=plan(own), facts={"variants": (own, plan)})


def launch_computation(req: ComputationRequest, work: Work) -> Work:
    """The compiled entry as a computation call (``runtime.computation``), binding the
    arguments the launch description lists."""
    from ..runtime.computation import CompiledComputationCall

    return work.but(entry=CompiledComputationCall(work.entry, req.defn, work.described))


def computation_layout(fields, defn) -> tuple:
    """Which axis of each field has unit stride: the loop over it runs innermost."""
    from ..lower.computation import layout_of

    return tuple(sorted(layout_of(fields, defn).items()))
