"""The C99 + OpenMP platform: pragmas for parallel loops, reductions and atomics, libm per
dtype, the status as a local ``int`` the function returns."""

from __future__ import annotations

import dataclasses

import numpy as np

from ... import dtypes
from ...ir import kernel as k
from .base import Platform, status_constant

_HELPER_MATH = ("min", "max", "minimum", "maximum", "abs", "sign")
_TESTS = ("isnan", "isinf", "isfinite")
# an explicit team size (codegen/c.py's prelude says why)
_TEAM = " num_threads(sk_team_size())"


class CPlatform(Platform):
    name = "c"

    # ------------------------------------------------------------ threads

    def parallel_loop(self, loop: k.Loop, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        par = loop.parallel
        assert par is not None
        parts: list[str | k.Expr] = ["omp for" if par.shared else "omp parallel for",
                                     f" schedule({par.schedule})"]
        for r in par.reductions:
            parts += [f" reduction({r.op}: ", k.Sym(r.buffer.base, dtype=r.buffer.element_type),
                      f"[:{r.size}])"]
        if par.only_if is not None:
            parts += [" if(", par.only_if, ")"]
        if not par.shared:
            parts.append(_TEAM)
        plain = dataclasses.replace(loop, parallel=None, vectorize=False)
        return (k.Pragma(tuple(parts)), plain)

    def parallel_region(self, region: k.ParallelRegion) -> tuple[k.Stmt, ...]:
        return (k.Pragma(("omp parallel", _TEAM)), k.Block(region.body, loc=region.loc))

    def vector_loop(self, loop: k.Loop) -> tuple[k.Stmt, ...]:
        # the arrays are restrict-qualified, but GCC still versions loops whose stores may
        # alias loads through computed indices; ivdep drops that check
        return (k.Pragma(("GCC ivdep",)), dataclasses.replace(loop, vectorize=False))

    def atomic_update(self, s: k.AtomicUpdate) -> tuple[k.Stmt, ...]:
        # the statement's source comment goes above the pragma, which must precede the store
        if s.op is None:
            return (k.Pragma(("omp atomic write",), loc=s.loc, source=s.source),
                    k.Store(s.buffer, s.indices, s.value))
        old = k.Load(s.buffer, s.indices, dtype=s.buffer.element_type)
        value = k.Op(s.op, (old, s.value), dtype=s.buffer.element_type)
        return (k.Pragma(("omp atomic",), loc=s.loc, source=s.source),
                k.Store(s.buffer, s.indices, value))

    # ------------------------------------------------------------ the error channel

    def set_error(self, code: int, kf: k.KernelFunction, s: k.SetError) -> tuple[k.Stmt, ...]:
        assert kf.status is not None, f"{kf.name} sets an error but has no status symbol"
        return (k.Pragma(("omp atomic write",), loc=s.loc, source=s.source),
                k.SetSym(kf.status, status_constant(code)))

    def error_prologue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return () if kf.status is None else (k.Declare(kf.status, status_constant(0)),)

    def error_epilogue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        if kf.status is None:
            return ()
        return (k.Return(k.Sym(kf.status, dtype=kf.status.dtype)),)

    # ------------------------------------------------------------ math

    def math_call(self, call: k.MathCall) -> k.Expr:
        func, args, a = call.func, call.args, call.args[0].dtype
        if func in _HELPER_MATH:
            if func == "abs" and dtypes.is_float(a):
                return k.CCall(libm("fabs", a), args, dtype=call.dtype)
            if func == "abs" and dtypes.is_complex(a):
                name = "cabsf" if a == dtypes.COMPLEX64 else "cabs"
                return k.CCall(name, args, dtype=call.dtype)
            return k.Op(func, args, dtype=call.dtype)  # a runtime helper (sk_min_f64, ...)
        if func in _TESTS:
            if dtypes.is_intlike(a):
                return k.Constant(np.bool_(func == "isfinite"), dtype=dtypes.BOOL)
            if dtypes.is_complex(a):
                return k.Op(func, args, dtype=call.dtype)
            # the C macros return a non-zero int, not necessarily 1
            test = k.CCall(func, args, dtype=k.STATUS)
            return k.Op("!=", (test, status_constant(0)), dtype=dtypes.BOOL)
        return k.CCall(libm(func, a), args, dtype=call.dtype)


def libm(func: str, t: np.dtype) -> str:
    """The C function computing ``func`` on ``t``: ``sqrt``, ``sqrtf``, ``csqrt``, ..."""
    name = {"gamma": "tgamma"}.get(func, func)  # C's gamma() is lgamma on glibc
    if t == dtypes.FLOAT32:
        return name + "f"
    if t == dtypes.COMPLEX64:
        return "c" + name + "f"
    if t == dtypes.COMPLEX128:
        return "c" + name
    return name


C_PLATFORM = CPlatform()
