"""The "numba" backend: generated Python loops compiled by Numba (``parallel=True``).

Point kernels: the kernel IR is printed as a Python module (``codegen/numba.py``: parallel
loops become ``numba.prange``, operations whose Python meaning differs go through helpers
twin to the C backend's), stored as a verified file in the cache and imported
(``build/numba_module.py``), so that Numba's ``cache=True`` keeps the machine code across
processes. The same module is what a call from inside jitted code inlines
(``numba_calls.py``), whatever the stencil's backend.

Computations and ParLoops: the shared lowerings' kernel IR, lowered by the Numba platform
(``passes/platforms/numba.py``: ``prange``, per-iteration partials for reductions, the status
as an array, flat local arrays) and printed by ``codegen.numba.NumbaModulePrinter`` into one
module per build (its ``parallel`` and ``serial`` dispatchers). ParLoops are built without
atomics, whatever ``race=`` says, and always run colour by colour
(``runtime.parloop_blocks.run_coloured``).
"""

from __future__ import annotations

import functools
import importlib.util

from .. import dtypes
from ..build import (
    numba_module,  # its import installs the finder of generated modules
    verdicts,
)
from ..ir.kernel import MathCall
from ..ir.verify import checked
from .base import KINDS, Backend, Capabilities, PerKind, Pieces


@functools.cache
def probe() -> str | None:
    """None when Numba compiles and runs a one-line function here, else why not. Found
    without importing Numba (most of a second) when a process with the same Numba, llvmlite
    and CPU already saw it work (``build/verdicts.py``)."""
    spec = importlib.util.find_spec("numba")
    if spec is None:
        return "numba is not installed (pip install numba)"
    llvmlite = importlib.util.find_spec("llvmlite")
    identity = (verdicts.file_identity(spec.origin),
                verdicts.file_identity(llvmlite.origin if llvmlite else None),
                verdicts.cpu_identity())
    return verdicts.remembered("numba", identity, _compile_one_line).reason


def _compile_one_line() -> verdicts.Verdict:
    try:
        import numba

        if numba.njit("int64(int64)")(lambda x: x + 1)(41) != 42:
            return verdicts.Verdict("a one-line function compiled by Numba gave a wrong result")
    except Exception as exc:  # llvmlite without its LLVM library, a broken install, ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return verdicts.Verdict(f"numba cannot compile a one-line function "
                                f"({type(exc).__name__}: {first})")
    return verdicts.Verdict(None)


#: what the Numba platform leaves to its printer (math functions, printed per dtype)
KEEPS = (MathCall,)


class NumbaBackend(Backend):
    def point_module(self, typed, src, out_dtype, mode="constant"):
        """(source, module) of one typed point kernel: the module's ``parallel``,
        ``serial`` and ``inline`` dispatchers run it."""
        from ..codegen import numba as numba_codegen
        from ..passes import pipeline
        from ..passes.lower_point import CVAL, FILL_BORDER, OUT, Layout

        kernel = typed.kernel
        # Numba indexes arrays itself: the layout (constant unit strides) does not matter
        layout = Layout(tuple(True for _ in kernel.params), True)
        kf = pipeline.lower(typed, layout, src.line_text, src.filename.rsplit("/", 1)[-1],
                            out_dtype, mode)
        source = numba_codegen.kernel_module(kf, (*kernel.params, OUT, FILL_BORDER, CVAL))
        return source, numba_module.load_module("point", source)

    def build_point(self, typed, layout, src, out_dtype, types, mode="constant"):
        return self.point_module(typed, src, out_dtype, mode)

    def computation_key(self, fields, defn):
        from ..passes.lower_computation import layout_of

        # the loop over the unit-stride axis innermost, as on "c"
        return tuple(sorted(layout_of(fields, defn).items()))

    def build_computation(self, defn, sched, src, fields):
        from ..codegen import numba as numba_codegen
        from ..codegen.kernel_text import kernel_ir_text
        from ..passes.lower_computation import (
            AXES,
            ComputationLowering,
            domain_key,
            layout_of,
            origin_key,
        )
        from ..passes.pipeline import dump
        from ..runtime.computation import NumbaComputationCall

        lowering = ComputationLowering(defn, sched, layout_of(fields, defn), src)
        kf = lowering.lower_all()
        dump("kernel", defn.name, kernel_ir_text(checked(kf)))
        kf = checked(self.platform().lower(kf), platform_lowered=True, keeps=KEEPS)
        buffers = tuple(lowering.buffers)
        arguments = (*buffers, *(origin_key(n, a) for n in buffers for a in lowering.axes[n]),
                     *(s.name for s in defn.scalars), *(domain_key(a) for a in AXES))
        source = numba_codegen.lowered_module(((kf, arguments),), _header(kf))
        module = numba_module.load_module("computation", source)
        axes = {n: tuple(lowering.axes[n]) for n in buffers}
        dtypes_ = {n: b.element_type for n, b in lowering.buffers.items()}
        return source, NumbaComputationCall(module.parallel, defn, buffers, axes, dtypes_)

    def build_parloop(self, name, typed, specs, src, code, atomic):
        from ..codegen import numba as numba_codegen
        from ..codegen.kernel_text import kernel_ir_text
        from ..passes import lower_parloop as lpl
        from ..passes.pipeline import dump

        # no atomics here: every ParLoop writing shared entries runs colour by colour
        # (runtime.parloop_blocks.run_coloured), whatever race= asks
        platform = self.platform()
        kf = lpl.KernelLowering(typed, specs, src.line_text,
                                src.filename.rsplit("/", 1)[-1]).lower_kernel()
        dump("kernel", name, kernel_ir_text(checked(kf)))
        kernel = checked(platform.lower(kf), platform_lowered=True, keeps=KEEPS)
        loop = lpl.LoopLowering(lpl.loop_function_name(name), name, kf.name, specs, False,
                                kf.uses_error_flag).lower()
        dump("kernel", f"{name} loop", kernel_ir_text(checked(loop)))
        loop = checked(platform.lower(loop), platform_lowered=True, keeps=KEEPS)
        arguments = [lpl.NBLOCKS, lpl.BLOCKS]
        for i, s in enumerate(specs):
            arguments.append(f"a{i}")
            if s.kind.shares_targets:
                arguments.append(f"m{i}")
        source = numba_codegen.lowered_module(((kernel, None), (loop, tuple(arguments))),
                                              _header(loop))
        return source, numba_module.load_module("parloop", source)


def _header(kf) -> str:
    first = kf.doc.splitlines()[0] if kf.doc else kf.name
    return f"# Generated by stencilkit: {first}\n# Compiled by Numba; edits are overwritten."


BACKEND = NumbaBackend(
    name="numba",
    description="generated loops compiled by Numba (parallel=True)",
    needs="numba",
    probe=probe,
    capabilities=Capabilities(
        kinds=frozenset(KINDS),
        dtypes=dtypes.SUPPORTED,
        device="cpu",
        # temporaries read at zero offset recomputed in their readers: fewer passes over
        # memory and fewer prange loops (each a separate Numba compile of its own)
        inlines_temporaries=True,
    ),
    pieces=Pieces(
        # prange, per-iteration partials, the status as an array (point kernels: the
        # printer still lowers their few abstract nodes itself)
        platform="stencilkit.passes.platforms.numba:NumbaPlatform",
        printer=PerKind(point="stencilkit.codegen.numba:NumbaPrinter",
                        computation="stencilkit.codegen.numba:NumbaModulePrinter",
                        parloop="stencilkit.codegen.numba:NumbaModulePrinter"),
        toolchain="stencilkit.build.numba_module:load_module",
        launcher=PerKind(point="stencilkit.runtime.launch:NumbaPointCall",
                         computation="stencilkit.runtime.computation:NumbaComputationCall",
                         parloop="stencilkit.runtime.parloop_blocks:run_coloured"),
        array_module="numpy",
    ),
    gt4py_names=("numba",),
)
