"""The "c" backend: C99 + OpenMP built by the system compiler into a CPython extension.

Every kind is lowered to kernel IR, printed as C, wrapped in a generated CPython entry point
(``codegen.c.python_wrapper``: the argument checks run in C) and compiled by the toolchain
under the cache's lock; the launchers in ``runtime/`` call the entry point.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..ir import border_modes
from ..ir.abi import Role
from ..ir.verify import checked
from ..passes.simplify import simplify
from .base import KINDS, Backend, Capabilities, PerKind, Pieces

if TYPE_CHECKING:
    from ..build.verdicts import Verdict


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


class CBackend(Backend):
    def build_point(self, typed, layout, src, out_dtype, types, mode="constant"):
        from ..build import cache
        from ..build.extension import build_extension, current_toolchain, module_name
        from ..codegen import c as c_codegen
        from ..passes import pipeline
        from ..passes.lower_point import CVAL, FILL_BORDER

        kernel = typed.kernel
        platform = self.platform()
        layout = dataclasses.replace(layout, streaming_stores=platform.streaming_stores)
        kf = pipeline.lower(typed, layout, src.line_text, src.filename.rsplit("/", 1)[-1],
                            out_dtype, mode)
        kf = checked(simplify(kf))
        kf = checked(platform.lower(kf), platform_lowered=True)
        source, _ = c_codegen.kernel_source(kf)
        tc = current_toolchain()
        wrapper_args = []
        for i, (p, t) in enumerate(zip(kernel.params, types)):
            role = (Role.PRIMARY_INPUT if i == 0 else Role.RELATIVE_INPUT if p in kernel.relative
                    else Role.STANDARD_INPUT if p in kernel.standard or t.is_array
                    else Role.SCALAR)
            wrapper_args.append(c_codegen.WrapperArg(p, t.dtype, t.ndim, False,
                                                     layout.unit_stride[i], role))
        wrapper_args.append(c_codegen.WrapperArg("out", out_dtype, kernel.ndim, True,
                                                 layout.out_unit_stride, Role.OUTPUT))
        wrapper_args.append(c_codegen.WrapperArg(FILL_BORDER, dtypes.BOOL, 0,
                                                 role=Role.BORDER_FILL))
        wrapper_args.append(c_codegen.WrapperArg(CVAL, out_dtype, 0, role=Role.CVAL))
        # An empty standard_indexing array: the kernel's bounds check reports a read of it,
        # but the clamped element it reads instead does not exist either. Refuse before
        # running, unless no point that runs the body (the interior, or in the other modes
        # any) exists.
        # (only "constant" axes can leave no point to compute: the others compute them all)
        modes = border_modes.per_axis(mode, kernel.ndim)
        no_interior = " || ".join(["v0->len == 0", *(
            f"v0->shape[{dim}] <= {hi - lo}"
            for dim, (lo, hi) in enumerate(typed.neighborhood.border)
            if modes[dim] == "constant")])
        checks = tuple((f"v{i}->len != 0 || {no_interior}", f"standard_indexing array "
                        f"'{a.name}' is empty, so every read of it is out of range")
                       for i, a in enumerate(wrapper_args) if a.role is Role.STANDARD_INPUT
                       and a.ndim > 0 and a.name in kernel.standard)
        # NumPy's version: the entry is compiled against its headers (``codegen.c.sk_view``)
        k = cache.key("c-point", c_codegen.WRAPPER_VERSION, repr(pipeline.POINT_PIPELINE),
                      source, tc.identity, np.__version__,
                      repr(wrapper_args), repr(checks))
        module = module_name(k)
        full = source + c_codegen.python_wrapper(kf, tuple(wrapper_args), module, kernel.name,
                                                 checks, exact=True)
        return source, build_extension(k, full, kernel.name)

    def computation_key(self, fields, defn):
        from ..passes.lower_computation import layout_of

        return tuple(sorted(layout_of(fields, defn).items()))

    def build_computation(self, defn, sched, src, fields):
        from ..build import cache
        from ..build.extension import build_extension, current_toolchain, module_name
        from ..codegen import c as cgen
        from ..codegen.kernel_text import kernel_ir_text
        from ..passes.collapse_rows import collapse_contiguous_rows
        from ..passes.lower_computation import (
            AXES,
            ComputationLowering,
            domain_key,
            layout_of,
            origin_key,
        )
        from ..passes.pipeline import dump
        from ..runtime.computation import CompiledComputationCall

        layout = layout_of(fields, defn)
        # K contiguous: fields copied into level-major column buffers around each block of
        # columns, so that the block's recurrences run as vector operations (measured on
        # C-ordered arrays: 0.8x the time of the strided jammed loop)
        lowering = ComputationLowering(defn, sched, layout, src, stage_columns=True)
        kf = lowering.lower_all()
        if lowering.loop_order() == [0, 1, 2]:  # K contiguous: J and K loops may collapse
            kf = collapse_contiguous_rows(kf, lowering.counters[1], lowering.counters[2],
                                          lowering.domain[1], lowering.domain[2],
                                          lowering.full_k_bounds())
        kf = checked(simplify(checked(kf)))
        dump("kernel", defn.name, kernel_ir_text(kf))
        kf = checked(self.platform().lower(kf), platform_lowered=True)
        source, _ = cgen.kernel_source(kf)
        tc = current_toolchain()
        # Python-level arguments: fields, temporaries held in memory, origins, scalars, domain
        buffers = list(lowering.buffers)
        wargs: list[cgen.WrapperArg] = []
        # Fields only read may be read-only arrays; written fields and temporaries must be
        # writable
        read_only = {f.name for f in defn.fields} - {n for ms in sched.multistages
                                                     for n in ms.written}
        for name in buffers:
            buf = lowering.buffers[name]
            wargs.append(cgen.WrapperArg(name, buf.element_type, buf.ndim,
                                         name not in read_only, False, Role.FIELD))
        origin_names = [origin_key(n, a) for n in buffers for a in lowering.axes[n]]
        wargs += [cgen.WrapperArg(o, dtypes.INT64, 0, role=Role.ORIGIN) for o in origin_names]
        wargs += [cgen.WrapperArg(s.name, s.dtype, 0, role=Role.SCALAR) for s in defn.scalars]
        wargs += [cgen.WrapperArg(domain_key(a), dtypes.INT64, 0, role=Role.DOMAIN_EXTENT)
                  for a in AXES]
        index = {a.name: i for i, a in enumerate(wargs)}
        checks = []
        for name in buffers:
            buf_i = index[name]
            unit = layout.get(name)
            if unit is not None:
                checks.append((f"v{buf_i}->shape[{unit}] <= 1 || v{buf_i}->strides[{unit}] "
                               f"== {lowering.buffers[name].element_type.itemsize}",
                               f"'{name}' changed layout since the code was built"))
        # the wrapper's version and NumPy's: the entry is compiled against its headers
        k_ = cache.key("c-computation", cgen.WRAPPER_VERSION, source, tc.identity,
                       np.__version__, repr(wargs), repr(checks))
        full = source + cgen.python_wrapper(kf, tuple(wargs), module_name(k_), defn.name,
                                            tuple(checks))
        fn = build_extension(k_, full, defn.name)
        axes = {n: tuple(lowering.axes[n]) for n in buffers}
        return source, CompiledComputationCall(fn, defn, tuple(buffers), axes)

    def build_parloop(self, name, typed, specs, src, code, atomic):
        from ..build import cache
        from ..build.extension import build_extension, current_toolchain, module_name
        from ..codegen import c as cgen
        from ..codegen.kernel_text import kernel_ir_text
        from ..ir import kernel as k
        from ..passes import lower_parloop as lpl
        from ..passes.pipeline import dump

        platform = self.platform()
        loop_name = lpl.loop_function_name(name)
        if typed is not None:
            kf = lpl.KernelLowering(typed, specs, src.line_text,
                                    src.filename.rsplit("/", 1)[-1]).lower_kernel()
            kf = checked(simplify(checked(kf)))
            dump("kernel", name, kernel_ir_text(kf))
            kernel: k.KernelFunction | str = checked(platform.lower(kf), platform_lowered=True)
            status, call = kf.uses_error_flag, kf.name
        else:  # user-supplied C, called through the same convention
            kernel, status, call = code, False, name
        loop = lpl.LoopLowering(loop_name, name, call, specs, atomic, status).lower()
        loop = checked(simplify(checked(loop)))
        dump("kernel", f"{name} loop", kernel_ir_text(loop))
        loop = checked(platform.lower(loop), platform_lowered=True)
        source = cgen.translation_unit((("kernel", kernel), ("loop", loop)))
        dump("code", f"{name} [{self.name}]", source)
        k_ = cache.key("c-parloop", source, current_toolchain().identity)
        full = source + cgen.python_entry(loop, module_name(k_))
        fn = build_extension(k_, full, name)
        return source, fn


BACKEND = CBackend(
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
        platform="stencilkit.passes.platforms.c:CPlatform",
        printer=PerKind(point="stencilkit.codegen.c:CPrinter",
                        computation="stencilkit.codegen.c:CPrinter",
                        parloop="stencilkit.codegen.c:translation_unit"),
        toolchain="stencilkit.build.extension:build_extension",
        launcher=PerKind(point="stencilkit.runtime.launch:PointCall",
                         computation="stencilkit.runtime.computation:CompiledComputationCall",
                         parloop="stencilkit.runtime.parloop_blocks:run_blocks"),
        array_module="numpy",
    ),
    gt4py_names=("c", "gt:cpu_ifirst", "gt:cpu_kfirst", "gt:cpu", "dace:cpu"),
)
