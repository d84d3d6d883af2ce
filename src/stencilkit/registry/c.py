"""The "c" backend: C99 + OpenMP built by the system compiler into a CPython extension.

Every kind is lowered to kernel IR, printed as C, wrapped in a generated CPython entry point
(``codegen.c.python_wrapper``: the argument checks run in C) and compiled by the toolchain
under the cache's lock; the launchers in ``runtime/`` call the entry point. The functions
below are the stages the compile driver (``compile/driver.py``) runs, declared in
``BACKEND``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..ir import border_modes
from ..ir.abi import Role
from . import shared_stages
from .base import KINDS, Backend, Capabilities, KindStages, PerKind, Pieces, Stages
from .shared_stages import filename, lower

if TYPE_CHECKING:
    from ..build.verdicts import Verdict
    from ..compile.driver import Work
    from ..compile.requests import ComputationRequest, ParLoopRequest, PointRequest, Request
    from ..targets.c import CPlatform


def probe() -> str | None:
    """None when the configured C compiler builds and loads a one-line OpenMP library here
    (once per process and configuration; a success is remembered on disk), else why not."""
    return _verdict().reason


def detail() -> str | None:
    return _verdict().detail or None


def _verdict() -> Verdict:
    from ..config import current

    cfg = current()
    return _probe(cfg.cc, tuple(cfg.cflags), cfg.openmp)


@functools.cache
def _probe(cc: str | None, cflags: tuple[str, ...], openmp: bool) -> Verdict:
    from ..build import toolchain, verdicts

    if toolchain.find_compiler(cc) is None:
        return verdicts.Verdict("no C compiler found ($CC, gcc, clang, cc)")
    return verdicts.remembered("c", toolchain.probe_identity(cc, cflags, openmp),
                               lambda: toolchain.probe(cc, cflags, openmp))


def platform() -> CPlatform:
    """The C platform for the machine code is generated for and the variant being built:
    its short vector, OpenMP team and schedule (``targets.c.CKnobs``)."""
    from ..build import machine, tuning
    from ..targets.c import CKnobs, CPlatform

    variant = tuning.current_variant()
    profile = machine.current()
    return CPlatform(CKnobs(short_vector_bytes=profile.short_vector_bytes(),
                            whole_vector_bytes=profile.vector_bytes,
                            team_threads=variant.threads, schedule_chunk=variant.chunk))


# ------------------------------------------------------------------ stages (compile.driver)

def lower_point(req: PointRequest, work: Work) -> Work:
    """The point kernel's IR, with streaming stores where the platform has them: from the
    threshold and in the row chunks this machine's caches give (``build.machine``), or as
    the variant being measured or chosen says (``build.tuning``)."""
    from ..build import machine, tuning
    from ..lower.point import stream_min_bytes_override
    from ..lower.streamed_rows import fit_streamed_rows

    layout = dataclasses.replace(req.layout,
                                 streaming_stores=req.backend.platform().streaming_stores)
    kf = lower(req.typed, layout, req.src.line_text, filename(req.src), req.out_dtype,
               req.mode)
    profile = machine.current()
    explicit = stream_min_bytes_override() is not None
    kf = fit_streamed_rows(kf, min_bytes=None if explicit else profile.stream_min_bytes(),
                           chunk=profile.stream_chunk(),
                           streaming=tuning.current_variant().streaming)
    return work.but(kernels=(kf,))


def point_entry(req: PointRequest, work: Work) -> Work:
    """The arguments and checks of the CPython entry (``codegen.c.python_wrapper``): they
    run in C, before the kernel; they go into the binary, so into its back key."""
    from ..codegen import c as c_codegen
    from ..lower.point import CVAL, FILL_BORDER

    kernel, layout, types = req.typed.kernel, req.layout, req.types
    wrapper_args = []
    for i, (p, t) in enumerate(zip(kernel.params, types)):
        role = (Role.PRIMARY_INPUT if i == 0 else Role.RELATIVE_INPUT if p in kernel.relative
                else Role.STANDARD_INPUT if p in kernel.standard or t.is_array
                else Role.SCALAR)
        wrapper_args.append(c_codegen.WrapperArg(p, t.dtype, t.ndim, False,
                                                 layout.unit_stride[i], role))
    wrapper_args.append(c_codegen.WrapperArg("out", req.out_dtype, kernel.ndim, True,
                                             layout.out_unit_stride, Role.OUTPUT))
    wrapper_args.append(c_codegen.WrapperArg(FILL_BORDER, dtypes.BOOL, 0,
                                             role=Role.BORDER_FILL))
    wrapper_args.append(c_codegen.WrapperArg(CVAL, req.out_dtype, 0, role=Role.CVAL))
    # An empty standard_indexing array: the kernel's bounds check reports a read of it,
    # but the clamped element it reads instead does not exist either. Refuse before
    # running, unless no point that runs the body (the interior, or in the other modes
    # any) exists.
    # (only "constant" axes can leave no point to compute: the others compute them all)
    modes = border_modes.per_axis(req.mode, kernel.ndim)
    no_interior = " || ".join(["v0->len == 0", *(
        f"v0->shape[{dim}] <= {hi - lo}"
        for dim, (lo, hi) in enumerate(req.typed.neighborhood.border)
        if modes[dim] == "constant")])
    checks = tuple((f"v{i}->len != 0 || {no_interior}", f"standard_indexing array "
                    f"'{a.name}' is empty, so every read of it is out of range")
                   for i, a in enumerate(wrapper_args) if a.role is Role.STANDARD_INPUT
                   and a.ndim > 0 and a.name in kernel.standard)
    return _with_entry(work, tuple(wrapper_args), checks, exact=True)


def lower_computation(req: ComputationRequest, work: Work) -> Work:
    """K contiguous: fields copied into level-major column buffers around each block of
    columns, so that the block's recurrences run as vector operations (measured on
    C-ordered arrays: 0.8x the time of the strided jammed loop)."""
    from ..build import tuning
    from ..lower.computation import COLUMN_BLOCK, ComputationLowering, layout_of

    layout = layout_of(req.fields, req.defn)
    lowering = ComputationLowering(req.defn, req.sched, layout, req.src, stage_columns=True,
                                   column_block=tuning.current_variant().column_block
                                   or COLUMN_BLOCK, levels_outermost=True)
    return work.but(kernels=(lowering.lower_all(),),
                    facts={"lowering": lowering, "layout": layout})


def collapse_rows(req: ComputationRequest, work: Work) -> Work:
    """K contiguous: the J and K loops collapse where rows are contiguous."""
    from ..build import tuning
    from ..lower.collapse_rows import collapse_contiguous_rows

    lowering = work.facts["lowering"]
    if lowering.loop_order() != [0, 1, 2] or tuning.current_variant().collapse is False:
        return work
    kf = collapse_contiguous_rows(work.kernels[0], lowering.counters[1], lowering.counters[2],
                                  lowering.domain[1], lowering.domain[2],
                                  lowering.full_k_bounds())
    return work.but(kernels=(kf,))


def computation_entry(req: ComputationRequest, work: Work) -> Work:
    """The CPython entry's arguments: the launch description's (fields, temporaries held in
    memory, origins, scalars, domain; the written arrays must be writable, those only read
    may be read-only), in its order; and its checks of the layout the code was built for."""
    from ..codegen import c as cgen

    lowering, layout = work.facts["lowering"], work.facts["layout"]
    wargs = tuple(cgen.WrapperArg(p.key, p.dtype, p.ndim, p.access is not None
                                  and p.access.writes, False, p.role)
                  for p in work.described.arguments)
    checks = []
    for buf_i, a in enumerate(wargs):  # (a field the kernel never reads is not passed)
        name = a.name
        if a.ndim == 0 or not isinstance(name, str):
            continue
        unit = layout.get(name)
        if unit is not None:
            checks.append((f"v{buf_i}->shape[{unit}] <= 1 || v{buf_i}->strides[{unit}] "
                           f"== {lowering.buffers[name].element_type.itemsize}",
                           f"'{name}' changed layout since the code was built"))
    return _with_entry(work, wargs, tuple(checks), exact=False)


def _with_entry(work: Work, wargs: tuple, checks: tuple, exact: bool) -> Work:
    from ..codegen import c as cgen

    return work.but(key_inputs=(cgen.WRAPPER_VERSION, repr(wargs), repr(checks)),
                    facts={"entry": (wargs, checks, exact)})


def lower_parloop_kernel(req: ParLoopRequest, work: Work) -> Work:
    """The Python kernel lowered, or the user's C source as it is (called through the
    same convention)."""
    if req.typed is None:  # (printed as it is: not kernel IR)
        assert req.code is not None
        return work.but(facts={"c_kernel": req.code, "status": False, "call": req.name})
    work = shared_stages.lower_parloop_kernel(req, work)
    kf = work.kernels[0]
    return work.but(facts={"status": kf.uses_error_flag, "call": kf.name})


def lower_parloop_loop(req: ParLoopRequest, work: Work) -> Work:
    from ..lower import parloop as lpl

    loop = lpl.LoopLowering(lpl.loop_function_name(req.name), req.name, work.facts["call"],
                            req.specs, req.atomic, work.facts["status"]).lower()
    return work.but(kernels=(*work.kernels, loop))


def print_kernel(req: Request, work: Work) -> Work:
    from ..codegen import c as cgen

    source, _ = cgen.kernel_source(work.kernels[0])
    return work.but(source=source)


def print_parloop(req: ParLoopRequest, work: Work) -> Work:
    from ..codegen import c as cgen

    *kernel, loop = work.kernels
    code = kernel[0] if kernel else work.facts["c_kernel"]
    return work.but(source=cgen.translation_unit((("kernel", code), ("loop", loop))))


def identity(req: Request) -> tuple[str, ...]:
    """The configured compiler and flags (fast_math's among them), and NumPy's version: the
    entry is compiled against its headers (``codegen.c.sk_view``)."""
    from ..build.extension import current_toolchain

    return (current_toolchain().identity, np.__version__)


def compile_entry(req: Request, work: Work) -> Work:
    """The source with its CPython entry, compiled (once per back key) and loaded."""
    from ..build.extension import build_extension, module_name
    from ..codegen import c as cgen

    assert work.back_key is not None and work.source is not None
    module = module_name(work.back_key)
    kf = work.kernels[-1]
    if "entry" in work.facts:
        wargs, checks, exact = work.facts["entry"]
        entry = cgen.python_wrapper(kf, wargs, module, req.name, checks, exact=exact)
    else:  # a ParLoop: its loop is the entry
        entry = cgen.python_entry(kf, module)
    return work.but(entry=build_extension(work.back_key, work.source + entry, req.name))




def _ref(name: str) -> str:
    return f"{__name__}:{name}"


_PLATFORM = "stencilkit.registry.shared_stages:platform_each"
_SIMPLIFY = ("simplify", "stencilkit.registry.shared_stages:simplify_each")
_HOIST = ("hoist_rows", "stencilkit.registry.shared_stages:hoist_rows_each")
_KEY, _TOOLCHAIN = _ref("identity"), _ref("compile_entry")


BACKEND = Backend(
    "c", "C99 + OpenMP via the system compiler, loaded in-process", needs="gcc or clang",
    probe=probe, detail=detail,
    capabilities=Capabilities(
        kinds=frozenset(KINDS), dtypes=dtypes.SUPPORTED, device="cpu",
        compiled=True,
        inlines_temporaries=True,
        c_kernels=True,
        k_planes_storage=True,
        exports_c=True,
    ),
    pieces=Pieces(
        # OpenMP pragmas, libm per dtype, the status as a returned int
        platform=_ref("platform"),
        stages=Stages(
            point=KindStages(lower=_ref("lower_point"),
                             transforms=(_SIMPLIFY, _HOIST, ("entry_arguments", _ref("point_entry"))),
                             platform=_PLATFORM, print=_ref("print_kernel"), key=_KEY,
                             toolchain=_TOOLCHAIN),
            computation=KindStages(lower=_ref("lower_computation"),
                                   transforms=(("collapse_rows", _ref("collapse_rows")), _SIMPLIFY, _HOIST,
                                               ("entry_arguments", _ref("computation_entry"))),
                                   platform=_PLATFORM, print=_ref("print_kernel"), key=_KEY,
                                   toolchain=_TOOLCHAIN,
                                   launcher="stencilkit.registry.shared_stages:launch_computation",
                                   layout_key="stencilkit.registry.shared_stages:computation_layout"),
            parloop=KindStages(lower=_ref("lower_parloop_kernel"),
                               lower_loop=_ref("lower_parloop_loop"), transforms=(_SIMPLIFY, _HOIST),
                               platform=_PLATFORM,
                               print=_ref("print_parloop"), key=_KEY, toolchain=_TOOLCHAIN)),
        launcher=PerKind(point="stencilkit.runtime.launch:PointCall",
                         computation="stencilkit.runtime.computation:CompiledComputationCall",
                         parloop="stencilkit.runtime.parloop_blocks:run_blocks"),
        array_module="numpy",
        tuner=PerKind(point="stencilkit.registry.c_autotune:tune_point_call",
                      computation="stencilkit.registry.c_autotune:tune_computation_call"),
    ),
    gt4py_names=("c", "gt:cpu_ifirst", "gt:cpu_kfirst", "gt:cpu", "dace:cpu"),
)
