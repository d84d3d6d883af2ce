"""The "numpy" backend: vectorized NumPy printed from the definition IR; always available.

It has no platform and no kernel IR: its printers turn the typed definition (point kernel,
scheduled computation, ParLoop kernel) straight into whole-array NumPy statements, and the
toolchain is ``exec`` of the generated module (memory-cached). It is the reference the
other backends are tested against.
"""

from __future__ import annotations

from .. import dtypes
from .base import KINDS, Backend, Capabilities, PerKind, Pieces, always


class NumpyBackend(Backend):
    def build_point(self, typed, layout, src, out_dtype, types, mode="constant"):
        from ..build.extension import exec_generated
        from ..codegen import numpy as np_codegen

        kernel = typed.kernel
        fname = "sk_" + "".join(ch if ch.isalnum() else "_" for ch in kernel.name)
        source = np_codegen.kernel_source(kernel, typed.neighborhood.border, fname, mode)
        return source, exec_generated("numpy-point", source, fname, kernel.name)

    def build_computation(self, defn, sched, src, fields):
        from ..build.extension import exec_generated
        from ..codegen import numpy_computation
        from ..runtime.computation import NumpyComputationCall

        fname = "sk_" + defn.name
        source, printer = numpy_computation.computation_printer(defn, sched, fname)
        fn = exec_generated("numpy-computation", source, fname, defn.name)
        return source, NumpyComputationCall(fn, defn, tuple(printer.k_reads))

    def build_parloop(self, name, typed, specs, src, code, atomic):
        from ..build.extension import exec_generated
        from ..codegen import numpy_parloop
        from ..passes.pipeline import dump

        fname = f"sk_parloop_{name}"
        text = numpy_parloop.kernel_source(typed, fname)
        dump("code", f"{name} [{self.name}]", text)
        return text, exec_generated("numpy-parloop", text, fname, f"parloop {name}")


BACKEND = NumpyBackend(
    "numpy", "vectorized NumPy reference", needs="NumPy", probe=always,
    # no capability flag: arrays are indexed through NumPy (any alignment), temporaries stay
    # arrays (recomputing them would materialize every subexpression), C-string kernels and
    # exports need a C compiler
    capabilities=Capabilities(kinds=frozenset(KINDS), dtypes=dtypes.SUPPORTED, device="cpu"),
    pieces=Pieces(
        platform=None,  # printed from the definition IR: whole-array statements, no loops
        printer=PerKind(point="stencilkit.codegen.numpy:NumpyPrinter",
                        computation="stencilkit.codegen.numpy_computation:"
                                    "ComputationNumpyPrinter",
                        parloop="stencilkit.codegen.numpy_parloop:ParLoopNumpyPrinter"),
        toolchain="stencilkit.build.extension:exec_generated",
        launcher=PerKind(point="stencilkit.runtime.launch:NumpyPointCall",
                         computation="stencilkit.runtime.computation:NumpyComputationCall",
                         parloop="stencilkit.runtime.parloop_numpy:run_vectorized"),
        array_module="numpy",
    ),
    gt4py_names=("numpy", "debug"),
)
