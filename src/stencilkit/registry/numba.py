"""The "numba" backend: generated Python loops compiled by Numba (``parallel=True``).

Point kernels: the kernel IR is printed as a Python module (``codegen/numba.py``: parallel
loops become ``numba.prange``, operations whose Python meaning differs go through helpers
twin to the C backend's), stored as a verified file in the cache and imported
(``build/numba_module.py``), so that Numba's ``cache=True`` keeps the machine code across
processes. The same module is what a call from inside jitted code inlines
(``numba_calls.py``), whatever the stencil's backend.

Computations and ParLoops: the shared lowerings' kernel IR, lowered by the Numba platform
(``targets/numba.py``: ``prange``, per-iteration partials for reductions, the status
as an array, flat local arrays) and printed by ``codegen.numba.NumbaModulePrinter`` into one
module per build (its ``parallel`` and ``serial`` dispatchers). ParLoops are built without
atomics, whatever ``race=`` says, and always run colour by colour
(``runtime.parloop_blocks.run_coloured``).
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING

from .. import dtypes
from ..build import (
    numba_module,  # its import installs the finder of generated modules
    verdicts,
)
from ..ir import kernel as k
from .base import KINDS, Backend, Capabilities, KindStages, PerKind, Pieces, Stages
from .shared_stages import filename, lower

if TYPE_CHECKING:
    from ..compile.driver import Work
    from ..compile.requests import ComputationRequest, ParLoopRequest, PointRequest, Request


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


# ------------------------------------------------------------------ stages (compile.driver)

def lower_point(req: PointRequest, work: Work) -> Work:
    """Numba indexes arrays itself: the layout (constant unit strides) does not matter."""
    from ..lower.point import Layout

    layout = Layout(tuple(True for _ in req.typed.kernel.params), True)
    return work.but(kernels=(lower(req.typed, layout, req.src.line_text, filename(req.src),
                                   req.out_dtype, req.mode),))


def print_point(req: PointRequest, work: Work) -> Work:
    """The module whose ``parallel``, ``serial`` and ``inline`` dispatchers run the kernel
    (the printer lowers the point kernels' few abstract nodes itself)."""
    from ..codegen import numba as numba_codegen

    # called as a C entry point: the caller's arguments, then the output, border-fill flag
    # and cval, as the launch description keys them
    params = work.described.entry_keys
    return work.but(source=numba_codegen.kernel_module(work.kernels[0], params))


def lower_computation(req: ComputationRequest, work: Work) -> Work:
    from ..lower.computation import ComputationLowering, layout_of

    lowering = ComputationLowering(req.defn, req.sched, layout_of(req.fields, req.defn),
                                   req.src)
    return work.but(kernels=(lowering.lower_all(),), facts={"lowering": lowering})


def print_computation(req: ComputationRequest, work: Work) -> Work:
    from ..codegen import numba as numba_codegen

    (kf,) = work.kernels
    # the jitted function takes the launch description's arguments, in its order
    arguments = tuple(p.key for p in work.described.arguments)
    return work.but(source=numba_codegen.lowered_module(((kf, arguments),), _header(kf)))


def lower_parloop_loop(req: ParLoopRequest, work: Work) -> Work:
    """No atomics here: every ParLoop writing shared entries runs colour by colour
    (runtime.parloop_blocks.run_coloured), whatever race= asks."""
    from ..lower import parloop as lpl

    kernel = work.kernels[0]
    loop = lpl.LoopLowering(lpl.loop_function_name(req.name), req.name, kernel.name,
                            req.specs, False, kernel.uses_error_flag).lower()
    return work.but(kernels=(kernel, loop))


def print_parloop(req: ParLoopRequest, work: Work) -> Work:
    from ..codegen import numba as numba_codegen
    from ..lower import parloop as lpl

    kernel, loop = work.kernels
    arguments: list[k.ArgumentKey] = [lpl.NBLOCKS, lpl.BLOCKS]
    for i, s in enumerate(req.specs):
        arguments.append(f"a{i}")
        if s.kind.shares_targets:
            arguments.append(f"m{i}")
    return work.but(source=numba_codegen.lowered_module(
        ((kernel, None), (loop, tuple(arguments))), _header(loop)))


def identity(req: Request) -> tuple[str, ...]:
    return numba_module.identity()


def load(req: Request, work: Work) -> Work:
    """The module stored in the cache under the back key and imported (Numba compiles its
    functions on their first call, ``cache=True``)."""
    assert work.back_key is not None and work.source is not None
    return work.but(entry=numba_module.load_module(work.back_key, work.source))


def launch_computation(req: ComputationRequest, work: Work) -> Work:
    from ..runtime.computation import NumbaComputationCall

    return work.but(entry=NumbaComputationCall(work.entry.parallel, req.defn, work.described))


def _header(kf) -> str:
    first = kf.doc.splitlines()[0] if kf.doc else kf.name
    return f"# Generated by stencilkit: {first}\n# Compiled by Numba; edits are overwritten."


def _ref(name: str) -> str:
    return f"{__name__}:{name}"


_SHARED = "stencilkit.registry.shared_stages"
_PLATFORM = f"{_SHARED}:platform_each"
_KEY, _TOOLCHAIN = _ref("identity"), _ref("load")


BACKEND = Backend(
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
        platform="stencilkit.targets.numba:NumbaPlatform",
        stages=Stages(
            point=KindStages(lower=_ref("lower_point"), print=_ref("print_point"), key=_KEY,
                             toolchain=_TOOLCHAIN),
            computation=KindStages(lower=_ref("lower_computation"), platform=_PLATFORM,
                                   print=_ref("print_computation"), key=_KEY,
                                   toolchain=_TOOLCHAIN,
                                   launcher=_ref("launch_computation"),
                                   layout_key="stencilkit.registry.shared_stages:computation_layout"),
            parloop=KindStages(lower=f"{_SHARED}:lower_parloop_kernel",
                               lower_loop=_ref("lower_parloop_loop"), platform=_PLATFORM,
                               print=_ref("print_parloop"), key=_KEY, toolchain=_TOOLCHAIN)),
        launcher=PerKind(point="stencilkit.runtime.launch:NumbaPointCall",
                         computation="stencilkit.runtime.computation:NumbaComputationCall",
                         parloop="stencilkit.runtime.parloop_blocks:run_coloured"),
        array_module="numpy",
    ),
    gt4py_names=("numba",),
)
