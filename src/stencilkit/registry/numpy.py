"""The "numpy" backend: vectorized NumPy printed from the definition IR; always available.

It has no platform and no kernel IR: its printers turn the typed definition (point kernel,
scheduled computation, ParLoop kernel) straight into whole-array NumPy statements, and the
toolchain is ``exec`` of the generated module (memory-cached). It is the reference the
other backends are tested against. The stage functions below are what the compile driver
(``compile/driver.py``) runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import dtypes
from .base import KINDS, Backend, Capabilities, KindStages, PerKind, Pieces, Stages, always

if TYPE_CHECKING:
    from ..compile.driver import Work
    from ..compile.requests import ComputationRequest, ParLoopRequest, PointRequest, Request


def _fname(name: str) -> str:
    return "sk_" + "".join(ch if ch.isalnum() else "_" for ch in name)


def print_point(req: PointRequest, work: Work) -> Work:
    from ..codegen import numpy as np_codegen

    fname = _fname(req.name)
    source = np_codegen.kernel_source(req.typed.kernel, req.typed.neighborhood.border, fname,
                                      req.mode)
    return work.but(source=source, facts={"function": fname, "label": req.name})


def print_computation(req: ComputationRequest, work: Work) -> Work:
    from ..codegen import numpy_computation

    fname = "sk_" + req.name
    source, printer = numpy_computation.computation_printer(req.defn, req.sched, fname)
    return work.but(source=source, facts={"function": fname, "label": req.name,
                                          "k_reads": tuple(printer.k_reads)})


def print_parloop(req: ParLoopRequest, work: Work) -> Work:
    from ..codegen import numpy_parloop

    fname = f"sk_parloop_{req.name}"
    assert req.typed is not None, "C-string kernels are refused by capabilities.c_kernels"
    return work.but(source=numpy_parloop.kernel_source(req.typed, fname),
                    facts={"function": fname, "label": f"parloop {req.name}"})


def identity(req: Request) -> tuple[str, ...]:
    return ("exec",)  # the interpreter's; cache.key adds its ABI


def execute(req: Request, work: Work) -> Work:
    from ..build.extension import exec_generated

    assert work.back_key is not None and work.source is not None
    return work.but(entry=exec_generated(work.back_key, work.source, work.facts["function"],
                                         work.facts["label"]))


def launch_computation(req: ComputationRequest, work: Work) -> Work:
    from ..runtime.computation import NumpyComputationCall

    return work.but(entry=NumpyComputationCall(work.entry, req.defn, work.facts["k_reads"]))


def _stages(printer: str, launcher: str | None = None, lower: str | None = None
            ) -> KindStages:
    return KindStages(lower=lower, print=f"{__name__}:{printer}", key=f"{__name__}:identity",
                      toolchain=f"{__name__}:execute",
                      launcher=launcher and f"{__name__}:{launcher}")


BACKEND = Backend(
    "numpy", "vectorized NumPy reference", needs="NumPy", probe=always,
    # no capability flag: arrays are indexed through NumPy (any alignment), temporaries stay
    # arrays (recomputing them would materialize every subexpression), C-string kernels and
    # exports need a C compiler
    capabilities=Capabilities(kinds=frozenset(KINDS), dtypes=dtypes.SUPPORTED, device="cpu"),
    pieces=Pieces(
        platform=None,  # printed from the definition IR: whole-array statements, no loops
        # a point kernel is lowered for its launch description only (the entry takes the
        # caller's arguments as the C one does; the printer reads the definition)
        stages=Stages(point=_stages("print_point",
                                    lower="stencilkit.registry.shared_stages:lower_point"),
                      computation=_stages("print_computation", "launch_computation"),
                      parloop=_stages("print_parloop")),
        launcher=PerKind(point="stencilkit.runtime.launch:NumpyPointCall",
                         computation="stencilkit.runtime.computation:NumpyComputationCall",
                         parloop="stencilkit.runtime.parloop_numpy:run_vectorized"),
        array_module="numpy",
    ),
    gt4py_names=("numpy", "debug"),
)
