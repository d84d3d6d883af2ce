"""The platform interface: lowering the abstract nodes of kernel IR to what a language has.

As pystencils separates platforms from printers: the lowerings in ``lower/`` say what is
meant (a parallel loop with a schedule and reductions, an atomic update, setting the error
status, ``sqrt`` of a float32), a platform rewrites that into the concrete nodes of one
language (``Pragma``, ``CCall``, ``Declare``/``Return`` of the status, ...), and a printer
prints the result without knowing what any of it meant.

Requires: a ``KernelFunction`` as a lowering produced it (abstract nodes allowed).
Ensures: no ``ParallelRegion``, ``AtomicUpdate``, ``SetError``, ``MathCall``,
``StreamedRow`` or ``StoreFence`` is left, and
every ``Loop`` has ``parallel=None`` and ``vectorize=False`` (their meaning is now in the
statements the hooks returned); the parameters are unchanged.

A platform is a subclass that implements the hooks below. The GPU platforms (CUDA, OpenCL)
share one subclass, ``gpu.GpuPlatform``, whose planner makes grid dimensions of the parallel
loops before these hooks run on each thread's body. What each backend's hooks do:

=================  ==========================  =========================  =======================
hook               C (OpenMP)                  CUDA / OpenCL (gpu.py)     Numba
=================  ==========================  =========================  =======================
parallel_loop      ``omp parallel for`` +      (a grid dimension, by the  ``prange``
                   schedule, reduction, if     planner); inside a
                                               thread: a serial loop
parallel_region    ``omp parallel`` + block    (one launch)               its body
vector_loop        ``GCC ivdep`` + clang's     the loop as is             the loop as is
                   ``assume_safety``
atomic_update      ``omp atomic`` + store      ``atomicAdd`` / a CAS      --
                                               loop helper
set_error          ``omp atomic write``        the thread's status,       a status array
                                               stored by the launch
error_prologue,    ``int sk_error = 0`` ...    (the printer's)            the status array,
error_epilogue     ``return sk_error``                                    returned
math_call          sqrt / sqrtf / csqrt,       overloaded names (sqrt),   ``math.sqrt``
                   runtime helpers             CUDA's complex helpers
streamed_row       row buffer + streaming      the loop as is             the loop as is
                   copy (``movntdq``) if large
store_fence        ``sk_store_fence()``        --                         --
=================  ==========================  =========================  =======================
"""

from __future__ import annotations

import dataclasses

from ..ir import kernel as k
from ..ir.core import Node, rewrite


class Platform:
    """Base class: walks the kernel, hands each abstract node to its hook. Hooks get nodes
    whose children are already lowered, and return kernel IR (statement hooks a tuple of
    statements, since one abstract statement may become several)."""

    name = "abstract"
    #: abstract nodes this platform leaves to its printer (the verifier allows them after
    #: the platform's lowering)
    keeps: tuple[type, ...] = ()
    # ``streamed_row`` bypasses the caches: point lowerings emit ``StreamedRow`` for it
    streaming_stores = False

    def lower(self, kf: k.KernelFunction) -> k.KernelFunction:
        """The platform-lowered kernel (a pass ``KernelFunction -> KernelFunction``)."""
        body = tuple(rewrite(s, self._expression) for s in kf.body)
        body = self.stmts(body, kf)
        body = self.error_prologue(kf) + body + self.error_epilogue(kf)
        return dataclasses.replace(kf, body=body)

    # ------------------------------------------------------------ the walk

    def _expression(self, node: Node) -> Node | None:
        if isinstance(node, k.MathCall):
            return self.math_call(node)
        return None

    def stmts(self, body: tuple[k.Stmt, ...], kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        for s in body:
            out.extend(self.stmt(s, kf))
        return tuple(out)

    def stmt(self, s: k.Stmt, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        match s:
            case k.Loop(body=body):
                loop = dataclasses.replace(s, body=self.stmts(body, kf))
                if loop.parallel is not None:
                    return self.parallel_loop(loop, kf)
                if loop.vectorize:
                    return self.vector_loop(loop)
                return (loop,)
            case k.Branch(then=then, orelse=orelse):
                return (dataclasses.replace(s, then=self.stmts(then, kf),
                                            orelse=self.stmts(orelse, kf)),)
            case k.WhileLoop(body=body) | k.Section(body=body) | k.Block(body=body):
                return (dataclasses.replace(s, body=self.stmts(body, kf)),)
            case k.ParallelRegion(body=body):
                return self.parallel_region(dataclasses.replace(s, body=self.stmts(body, kf)))
            case k.AtomicUpdate():
                return self.atomic_update(s)
            case k.SetError(code=code):
                return self.set_error(code, kf, s)
            case k.StreamedRow():
                return self.streamed_row(s, kf)
            case k.StoreFence():
                return self.store_fence()
        return (s,)

    # ------------------------------------------------------------ hooks

    def parallel_loop(self, loop: k.Loop, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        """``loop.parallel`` is set: the statements that run its iterations concurrently
        (with its reductions, its schedule, its ``only_if`` condition; a ``shared`` loop
        is inside a region lowered by ``parallel_region``)."""
        raise NotImplementedError

    def parallel_region(self, region: k.ParallelRegion) -> tuple[k.Stmt, ...]:
        """A team of threads each running the body (its shared loops are already lowered)."""
        raise NotImplementedError

    def vector_loop(self, loop: k.Loop) -> tuple[k.Stmt, ...]:
        """A serial loop whose iterations are independent. Default: the loop, unmarked."""
        return (dataclasses.replace(loop, vectorize=False),)

    def atomic_update(self, s: k.AtomicUpdate) -> tuple[k.Stmt, ...]:
        raise NotImplementedError

    def streamed_row(self, s: k.StreamedRow, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        """A row whose stores may bypass the caches (its loop not yet lowered). Default:
        the loop as is, plain stores."""
        return self.stmt(s.loop, kf)

    def store_fence(self) -> tuple[k.Stmt, ...]:
        """After a thread's non-temporal stores. Default: nothing (there are none)."""
        return ()

    def set_error(self, code: int, kf: k.KernelFunction, s: k.SetError) -> tuple[k.Stmt, ...]:
        """Record status ``code`` (from any thread) in ``kf.status``."""
        raise NotImplementedError

    def error_prologue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        """Statements before the body that create the error channel."""
        return ()

    def error_epilogue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        """Statements after the body that deliver the status."""
        return ()

    def math_call(self, call: k.MathCall) -> k.Expr:
        """The implementation of an IR math function for the operand type: a ``CCall`` of
        the language's function, an ``Op`` runtime helper, or a constant."""
        raise NotImplementedError


def status_constant(code: int) -> k.Expr:
    """A status code as the C family writes an ``int``."""
    return k.Literal(str(int(code)), dtype=k.STATUS)
