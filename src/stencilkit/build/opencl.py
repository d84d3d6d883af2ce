"""The OpenCL backend's build steps: lower, plan the launches, print, build the program.

Each kind is lowered to kernel IR as for C (with the OpenCL variants of the lowerings
where the loop structure differs), turned into a launch plan by the OpenCL platform
(``passes.platforms.opencl``), printed by the OpenCL printer and built by PyOpenCL.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import dtypes
from ..errors import BackendError
from ..ir.kernel import ArgumentKey
from ..ir.verify import checked, checked_plan
from ..passes import pipeline
from ..passes.lower_point import Layout
from ..passes.platforms import opencl as platform
from ..passes.simplify import simplify

#: What the generated code computes on: OpenCL C has no complex types.
DTYPES = frozenset(t for t in dtypes.SUPPORTED if not dtypes.is_complex(t))


def require_dtypes(name: str, types: object) -> None:
    wrong = sorted({str(t) for t in types if np.dtype(t) not in DTYPES})  # type: ignore[attr-defined]
    if wrong:
        raise BackendError(f"backend 'opencl' does not compute on {', '.join(wrong)} "
                           "(OpenCL C has no complex types)", stencil=name,
                           hint="use backend='c' or 'numpy' for complex data")


def build_point(typed: pipeline.TypedPointKernel, layout: Layout, src, out_dtype: np.dtype,
                types, mode: str = "constant"):
    """(source, Executable) of one point-kernel specialization. NumPy arrays reach the
    device as C-contiguous copies, so their last stride is the constant 1 (neighbouring
    work-items read neighbouring elements, as vectorizers and coalescing want); pyopencl
    arrays keep their layout (``layout`` says which have a unit last stride)."""
    from ..codegen import opencl as printer
    from ..ir import kernel as k
    from ..passes.lower_point import OUT
    from ..passes.platforms.cuda_layout import Variant, specialize
    from ..runtime.cuda_variants import Variants
    from ..runtime.launch import standard_arrays
    from ..runtime.opencl_launch import Executable

    kernel = typed.kernel
    require_dtypes(kernel.name, [t.dtype for t in types] + [out_dtype, kernel.return_type])
    kf = pipeline.lower(typed, layout, src.line_text, src.filename.rsplit("/", 1)[-1], out_dtype,
                        mode)
    kf = checked(simplify(kf))
    kf = checked(dataclasses.replace(kf, body=platform.mark_parallel_nests(kf.body, kf.params)))
    out = next(p.name for p in kf.params if p.get(k.BasePointer) == k.BasePointer(OUT))

    def build(variant: Variant) -> tuple:
        # as CUDA's (registry/cuda.py): the output's unit-stride axis on dimension 0, unit
        # strides as constants (runtime.cuda_variants; 64-bit indices: opencl_launch says why)
        plan = checked_plan(platform.plan(specialize(kf, variant), unit=(out, variant.unit_axis)))
        return plan, printer.program_source(plan)

    ndim = kernel.ndim
    units = {n for n, unit, t in zip(kernel.params, layout.unit_stride, types)
             if unit and t.ndim == ndim}
    own = Variant(ndim - 1, frozenset(units | ({OUT} if layout.out_unit_stride else set())))
    plan, source = build(own)
    exe = Executable(plan, source, kernel.name)
    exe.variants = Variants(own, build, OUT)
    standard = tuple(i for i, p in enumerate(kernel.params)
                     if p in kernel.standard and types[i].is_array)
    exe.point_info = (tuple(kernel.params), standard, typed.neighborhood.border)
    exe.standard = standard_arrays(kernel, types, typed.neighborhood.border, mode)
    return source, exe


def build_computation(defn, sched, src, fields):
    """(source, run) of a scheduled computation; ``run(values, temporaries, geometry)``
    copies the fields to the device, runs the plan and copies written fields back.
    Temporaries live on the device only."""
    from ..codegen import opencl as printer
    from ..codegen.kernel_text import kernel_ir_text
    from ..passes.lower_computation import AXES, domain_key, origin_key
    from ..passes.opencl_computation import OpenCLComputationLowering
    from ..passes.pipeline import dump
    from ..runtime import opencl as ocl
    from ..runtime.opencl_launch import Executable, bind

    require_dtypes(defn.name, [f.dtype for f in defn.fields] + [t for _, t in defn.temporaries]
                   + [s.dtype for s in defn.scalars])
    layout = {f.name: len(f.axes) + len(f.data_dims) - 1 for f in defn.fields}
    layout.update({t: 2 for t, _ in defn.temporaries})
    lowering = OpenCLComputationLowering(defn, sched, layout, src)
    kf = lowering.lower_all()
    kf = checked(simplify(checked(kf)))
    dump("kernel", defn.name, kernel_ir_text(kf))
    plan = checked_plan(platform.plan(kf))
    source = printer.program_source(plan)
    exe = Executable(plan, source, defn.name)
    field_names = {f.name for f in defn.fields}
    written = {n for ms in sched.multistages for n in ms.written} & field_names
    buffers = list(lowering.buffers)
    scalar_types = {s.name: s.dtype for s in defn.scalars}
    staging = ocl.Staging()

    def run(values, temps, geo) -> None:
        rt = ocl.device()
        views: dict[str, ocl.DeviceView] = {}
        hosts = {}
        for n in buffers:
            if n in field_names:
                views[n], hosts[n] = ocl.to_device(rt, values[n], staging=staging, slot=n)
            else:  # a temporary: device memory only, per thread
                t = temps[n]
                buf = staging.buffer(rt, ("temporary", n), t.nbytes)
                views[n] = ocl.DeviceView(buf, t.shape, ocl.element_strides(t))
        scalars: dict[ArgumentKey, object] = {}
        for n in buffers:
            for a in lowering.axes[n]:
                scalars[origin_key(n, a)] = geo.origins[n][AXES.index(a)]
        for s, t in scalar_types.items():
            scalars[s] = t.type(values[s])
        for a, v in zip(AXES, geo.domain):
            scalars[domain_key(a)] = v
        status = exe.run(bind(kf.params, views, scalars))
        for n in buffers:
            if n in written:
                ocl.from_device(rt, views[n], hosts[n], values[n])
        if status:
            from ..analysis.schedule import variable_k_reads
            from ..runtime.computation import k_offset_error

            raise k_offset_error(defn, variable_k_reads(defn))

    return source, run


def build_parloop(name: str, typed, specs, src, race: str):
    """(source, OpenCLParLoop) of a ParLoop of a Python kernel; ``race``: "color", "atomic"
    or "none" (no shared writes). The loop over the set is ``LoopLowering``'s, with every
    argument gathered into private arrays; "atomic" colours instead where a shared INC's
    element type has no atomic add here."""
    from ..codegen import opencl as printer
    from ..codegen.kernel_text import kernel_ir_text
    from ..ir.abi import Access, RaceMode
    from ..passes import lower_parloop as lpl
    from ..passes.pipeline import dump
    from ..runtime.opencl_launch import Executable, OpenCLParLoop

    require_dtypes(name, [s.dtype for s in specs])
    if race == RaceMode.ATOMIC and not all(platform.atomic_add_supported(s.dtype) for s in specs
                                           if s.writes_shared and s.mode is Access.INC):
        race = RaceMode.COLOUR
    kf = lpl.KernelLowering(typed, specs, src.line_text,
                            src.filename.rsplit("/", 1)[-1]).lower_kernel()
    kf = checked(simplify(checked(kf)))
    dump("kernel", name, kernel_ir_text(kf))
    loop = lpl.LoopLowering(lpl.loop_function_name(name), name, kf.name, specs,
                            race == RaceMode.ATOMIC, kf.uses_error_flag, private=True).lower()
    loop = checked(simplify(checked(loop)))
    dump("kernel", f"{name} loop", kernel_ir_text(loop))
    plan = checked_plan(platform.plan(loop))
    source = printer.program_source(plan, (kf,), offsets=False)
    return source, OpenCLParLoop(Executable(plan, source, name), race)
