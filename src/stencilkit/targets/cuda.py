"""The CUDA platform: the hooks of the GPU planner (``platforms.gpu``) in CUDA C++.

A launch is a ``__global__`` function; dimension 0 of its grid is ``threadIdx.x``
(``grid_index``). A parallel loop's reductions are accumulated in thread-private copies,
combined across each warp by shuffles, and the warp's first lane adds the result to the
shared array with an atomic when the thread ends: one launch, no partials. Inside a launch
the error status is the thread's ``sk_error``, stored into the device status word with
``atomicExch`` when non-zero (``codegen.cuda``).
"""

from __future__ import annotations

import dataclasses

from .. import dtypes
from ..ir import kernel as k
from ..ir.core import Node, walk
from ..ir.plan import Dim, HostLoop, Launch, LaunchPlan, Scratch, Step  # noqa: F401 (tests)
from .c import _TESTS
from .gpu import GpuPlatform, Reduced, identity, privatized

#: thread-index expressions per grid dimension (dimension 0 is x, the fastest)
_AXES = ("x", "y", "z")
STATUS_POINTER = "sk_status"  # the device status word every launch takes last
#: a thread's index within its block, x fastest, and the threads of a block, in C type
#: ``ctype`` (the on-chip layout of ``targets.cuda_layout.on_chip``)
THREAD_IN_BLOCK = "({ctype})(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"
BLOCK_THREADS = "({ctype})(blockDim.x * blockDim.y * blockDim.z)"


class CudaPlatform(GpuPlatform):
    """What is left abstract inside one thread's body, as CUDA C++: math functions are
    CUDA's overloaded device functions (``sqrt`` of a float is ``sqrtf``); on complex
    numbers (``codegen.cuda.COMPLEX``) only ``abs``, ``exp``, ``sqrt`` and the NaN/infinity
    tests (``COMPLEX_FUNCTIONS``: the backend refuses the others before lowering)."""

    name = "cuda"

    def thread_index(self, dim: int, ctype: str) -> tuple[str, str | None]:
        return grid_index(dim, ctype)

    def reduce(self, body: tuple[k.Stmt, ...], reductions: tuple[k.Reduction, ...],
               launch: str) -> Reduced:
        """Each thread accumulates into a private copy (initialized to the identity) over
        all its points; then the warp combines its threads' copies by shuffles (every block
        of a launch with grid dimensions is whole warps: ``runtime.cuda.BLOCKS``) and its
        first lane alone adds the result to the shared array with an atomic (32 times fewer
        atomics on one address)."""
        renamed: dict[str, k.Buffer] = {}
        pre: list[k.Stmt] = []
        post: list[k.Stmt] = []
        for r in reductions:
            b = r.buffer
            sym = dataclasses.replace(b.base, name=b.base.name + "_private")
            priv = dataclasses.replace(b, base=sym)
            renamed[b.base.name] = priv
            pre.append(k.DeclareArray(priv, k.index_const(r.size)))
            for q in range(r.size):
                idx = (k.index_const(q),)
                pre.append(k.Store(priv, idx, identity(r.op, b.element_type)))
                value = k.Load(priv, idx, dtype=b.element_type)
                combine = k.Evaluate(atomic_call(
                    r.op, k.Address(b, idx, dtype=b.element_type), value))
                # every lane shuffles (all 32 must take part), only lane 0 stores
                post.append(k.Store(priv, idx, k.CCall(f"sk_warp_{_WARP_OPS[r.op]}", (value,),
                                                       dtype=b.element_type)))
                post.append(k.Branch(k.Op("==", (k.CCall("sk_lane", (), dtype=k.INDEX),
                                                 k.index_const(0)),
                                          dtype=dtypes.BOOL), (combine,)))
        return Reduced(tuple(pre), privatized(body, renamed), tuple(post))

    def atomic_update(self, s: k.AtomicUpdate) -> tuple[k.Stmt, ...]:
        if s.op is None:  # aligned stores of at most 8 bytes are indivisible on the GPU
            return (k.Store(s.buffer, s.indices, s.value, loc=s.loc, source=s.source),)
        call = atomic_call(s.op, k.Address(s.buffer, s.indices, dtype=s.buffer.element_type),
                           s.value)
        return (k.Evaluate(call, loc=s.loc, source=s.source),)

    def math_call(self, call: k.MathCall) -> k.Expr:
        if dtypes.is_complex(call.args[0].dtype):
            if call.func in ("abs", "exp", "sqrt"):
                return k.CCall(f"sk_c{call.func}", call.args, dtype=call.dtype)
            if call.func in _TESTS:
                return k.Op(call.func, call.args, dtype=call.dtype)
            raise NotImplementedError(f"CUDA: no complex {call.func}")
        return super().math_call(call)


CUDA_PLATFORM = CudaPlatform()
#: The math functions "cuda" computes on complex numbers (libdevice has no complex ones)
COMPLEX_FUNCTIONS = frozenset({"abs", "exp", "sqrt", *_TESTS})


def unsupported_complex_call(kf: k.KernelFunction) -> tuple[str, k.Stmt | None] | None:
    """(function, innermost statement holding it) of the first math call on a complex number
    that "cuda" does not compute (``COMPLEX_FUNCTIONS``), in a kernel function before
    platform lowering; None if there is none."""
    def refused(n: Node) -> str | None:
        if isinstance(n, k.MathCall) and n.func not in COMPLEX_FUNCTIONS and any(
                dtypes.is_complex(a.dtype) for a in n.args):
            return n.func
        if isinstance(n, k.Op) and n.op == "powi" and dtypes.is_complex(n.dtype):
            return "power"
        return None

    found = next((f for st in kf.body for n in walk(st) if (f := refused(n))), None)
    if found is None:
        return None
    holder: k.Stmt | None = None
    for st in kf.body:
        for n in walk(st):  # parents first: the last statement holding it is the innermost
            if isinstance(n, k.Stmt) and n.loc is not None and any(
                    refused(x) == found for x in walk(n)):
                holder = n
    return found, holder


# Atomic read-modify-write helpers of the prelude (codegen.cuda), by operator and type.
_ATOMIC_TYPES = {"float": "f32", "double": "f64", "int32_t": "int32", "uint32_t": "uint32",
                 "int64_t": "int64", "uint64_t": "uint64", "float _Complex": "c64",
                 "double _Complex": "c128"}


_WARP_OPS = {"+": "add", "min": "min", "max": "max"}


def atomic_call(op: str, address: k.Expr, value: k.Expr) -> k.CCall:
    t = address.dtype
    suffix = _ATOMIC_TYPES.get(dtypes.c_name(t))
    name = {"+": "add", "min": "min", "max": "max"}.get(op)
    if suffix is None or name is None:
        raise NotImplementedError(f"CUDA: no atomic {op!r} on {t}")
    return k.CCall(f"sk_atomic_{name}_{suffix}", (address, value), dtype=t)


def grid_index(dim: int, ctype: str = "int64_t") -> tuple[str, str]:
    """(first index of this thread, grid-stride) along grid dimension ``dim``, as CUDA C, of
    the counter's type ``ctype``. In 32 bits the products are the unsigned products of the
    built-ins, cast once: a 32-bit variant's grid covers fewer than 2**31 threads per axis."""
    a = _AXES[dim]
    if ctype != "int64_t":
        return (f"({ctype})(blockIdx.{a} * blockDim.{a} + threadIdx.{a})",
                f"({ctype})(gridDim.{a} * blockDim.{a})")
    return (f"(int64_t)blockIdx.{a} * blockDim.{a} + threadIdx.{a}",
            f"(int64_t)gridDim.{a} * blockDim.{a}")
