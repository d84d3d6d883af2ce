"""The "cuda" backend: CUDA C++ compiled at run time by NVRTC, launched through CuPy.

Every kind is lowered to kernel IR as for the C backend, cut by the CUDA platform
(``passes/platforms/cuda.py``) into a launch plan (a thread per iteration of up to three
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

from .. import dtypes
from ..ir.verify import checked, checked_plan
from ..passes.simplify import simplify
from .base import KINDS, Backend, Capabilities, PerKind, Pieces

#: every type, complex ones as the prelude's structs
CUDA_DTYPES = dtypes.SUPPORTED


def require_complex_functions(kf, name: str) -> None:
    """A BackendError naming the statement, where a complex math function that "cuda" does
    not compute is called (before platform lowering, which would fail on it)."""
    from ..errors import BackendError
    from ..passes.platforms.cuda import COMPLEX_FUNCTIONS, unsupported_complex_call

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


def _filename(src) -> str:
    return src.filename.rsplit("/", 1)[-1]


class CudaBackend(Backend):
    def build_point(self, typed, layout, src, out_dtype, types, mode="constant"):
        from ..codegen.cuda import plan_source
        from ..ir import kernel as k
        from ..passes import pipeline
        from ..passes.lower_point import CVAL, FILL_BORDER, OUT
        from ..passes.parallel_nests import mark_parallel_nests
        from ..passes.platforms.cuda import CUDA_PLATFORM
        from ..passes.platforms.cuda_layout import Variant, specialize
        from ..runtime.cuda import CudaEntry, Variants
        from ..runtime.launch import standard_arrays

        kernel = typed.kernel
        kf = pipeline.lower(typed, layout, src.line_text, _filename(src), out_dtype, mode)
        kf = checked(simplify(kf))
        require_complex_functions(kf, kernel.name)
        # the loops a thread per point may run: marked parallel (the platform makes grid
        # dimensions of marked loops only)
        kf = checked(dataclasses.replace(kf, body=mark_parallel_nests(kf.body, kf.params)))
        out = next(p.name for p in kf.params if p.get(k.BasePointer) == k.BasePointer(OUT))

        def build(variant: Variant) -> tuple:
            plan = checked_plan(CUDA_PLATFORM.plan(specialize(kf, variant),
                                                   unit=(out, variant.unit_axis),
                                                   covering=variant.covering))
            return plan, plan_source(plan)

        # this specialization's own kernels: C order (its unit strides are the layout's,
        # already constants), 32-bit indices, a thread per point; the entry builds the
        # others per call (runtime.cuda_variants)
        ndim = typed.kernel.ndim
        units = {n for n, unit, t in zip(kernel.params, layout.unit_stride, types)
                 if unit and t.ndim == ndim}  # as runtime.cuda_variants.choose counts them
        own = Variant(ndim - 1,
                      frozenset(units | ({OUT} if layout.out_unit_stride else set())), True,
                      True)
        plan, source = build(own)
        names = (*kernel.params, OUT, FILL_BORDER, CVAL)
        standard = standard_arrays(kernel, types, typed.neighborhood.border, mode)
        return source, CudaEntry(plan, source, names, frozenset({OUT}), kernel.name, standard,
                                 Variants(own, build, OUT))

    def computation_key(self, fields, defn):
        from ..passes.lower_computation import layout_of

        return tuple(sorted(layout_of(fields, defn).items()))

    def build_computation(self, defn, sched, src, fields):
        from ..codegen.cuda import plan_source
        from ..codegen.kernel_text import kernel_ir_text
        from ..passes.lower_computation import AXES, domain_key, layout_of, origin_key
        from ..passes.lower_computation_gpu import GpuComputationLowering
        from ..passes.pipeline import dump
        from ..passes.platforms.cuda import CUDA_PLATFORM
        from ..runtime.computation import CompiledComputationCall
        from ..runtime.cuda import CudaEntry

        lowering = GpuComputationLowering(defn, sched, layout_of(fields, defn), src)
        kf = lowering.lower_all()
        kf = checked(simplify(checked(kf)))
        dump("kernel", defn.name, kernel_ir_text(kf))
        require_complex_functions(kf, defn.name)
        plan = checked_plan(CUDA_PLATFORM.plan(kf))
        source = plan_source(plan)
        buffers = tuple(lowering.buffers)
        names = [*buffers, *(origin_key(n, a) for n in buffers for a in lowering.axes[n]),
                 *(s.name for s in defn.scalars), *(domain_key(a) for a in AXES)]
        read_only = {f.name for f in defn.fields} - {n for ms in sched.multistages
                                                     for n in ms.written}
        entry = CudaEntry(plan, source, names, frozenset(buffers) - read_only, defn.name)
        axes = {n: tuple(lowering.axes[n]) for n in buffers}
        return source, CompiledComputationCall(entry, defn, buffers, axes)

    def build_parloop(self, name, typed, specs, src, code, atomic):
        from ..codegen.cuda import plan_source
        from ..codegen.kernel_text import kernel_ir_text
        from ..passes import lower_parloop as lpl
        from ..passes.pipeline import dump
        from ..passes.platforms.cuda import CUDA_PLATFORM
        from ..runtime.cuda import CudaParLoopEntry

        assert typed is not None, "C-string kernels are refused by capabilities.c_kernels"
        kf = lpl.KernelLowering(typed, specs, src.line_text, _filename(src)).lower_kernel()
        kf = checked(simplify(checked(kf)))
        dump("kernel", name, kernel_ir_text(kf))
        require_complex_functions(kf, name)
        # a __device__ function returning its status
        kernel = checked(CUDA_PLATFORM.lower(kf), platform_lowered=True)
        loop = lpl.LoopLowering(lpl.loop_function_name(name), name, kf.name, specs, atomic,
                                kf.uses_error_flag).lower()
        loop = checked(simplify(checked(loop)))
        dump("kernel", f"{name} loop", kernel_ir_text(loop))
        plan = checked_plan(CUDA_PLATFORM.plan(loop))
        source = plan_source(plan, (kernel,))
        return source, CudaParLoopEntry(plan, source, (), frozenset(), name)


BACKEND = CudaBackend(
    "cuda", "CUDA C++ compiled by NVRTC, on CuPy arrays (NumPy arrays are copied)",
    needs="cupy, an NVIDIA GPU", probe=probe,
    capabilities=Capabilities(
        kinds=frozenset(KINDS), dtypes=CUDA_DTYPES, device="gpu",
        compiled=True,
        inlines_temporaries=True,
        k_planes_storage=True,  # I or J contiguous: neighbouring columns coalesce
    ),
    pieces=Pieces(
        platform="stencilkit.passes.platforms.cuda:CudaPlatform",
        printer=PerKind(point="stencilkit.codegen.cuda:plan_source",
                        computation="stencilkit.codegen.cuda:plan_source",
                        parloop="stencilkit.codegen.cuda:plan_source"),
        toolchain="stencilkit.build.cuda:compile_ptx",
        launcher=PerKind(point="stencilkit.runtime.cuda:CudaPointCall",
                         computation="stencilkit.runtime.computation:CompiledComputationCall",
                         parloop="stencilkit.runtime.cuda_parloop:run_blocks"),
        array_module="cupy",
    ),
    gt4py_names=("cuda", "gt:gpu", "dace:gpu"),
)
