"""OpenCL C of a ParLoop: the kernel as a function on private arrays, and the loop kernel.

Each element gathers every argument into private arrays (OpenCL cannot pass pointers to
global memory where the kernel function expects private ones), calls the kernel function,
and scatters what it wrote. Work-items:
- ``color``: one work-item per block ``[blocks[2b], blocks[2b + 1])`` of a colour (blocks
  of one colour share no written target), its elements in order, like the C loop;
- ``atomic`` / ``none``: one work-item per element; increments through maps are atomic
  (compare-and-swap loops on the bits of floats, native atomics on 32/64-bit integers).
Globals reduced (INC, MIN, MAX) use a work-group reduction in local memory: each group
writes one partial result per component, which the host combines.

(Built as text for now; it moves onto the shared ParLoop kernel IR once that exists.)
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..ir import kernel as k
from ..passes.lower_parloop import ArgSpec
from ..passes.platforms.opencl import OPENCL_PLATFORM
from .opencl import STATUS, OpenCLPrinter, cl_type

WORK_GROUP = 64  # work-items per group for loops that reduce into Globals

_ATOMIC_PRELUDE = """\
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
static inline void sk_atomic_add_f64(__global double *p, double v) {
    union { ulong u; double d; } old, upd;
    do { old.d = *p; upd.d = old.d + v; }
    while (atom_cmpxchg((volatile __global ulong *)p, old.u, upd.u) != old.u);
}
static inline void sk_atomic_add_f32(__global float *p, float v) {
    union { uint u; float f; } old, upd;
    do { old.f = *p; upd.f = old.f + v; }
    while (atomic_cmpxchg((volatile __global uint *)p, old.u, upd.u) != old.u);
}
"""


def atomic_add_supported(t: np.dtype) -> bool:
    """Element types with an atomic add here (others are made race-free by colouring)."""
    return t.kind == "f" and t.itemsize in (4, 8) or t.kind in "iu" and t.itemsize in (4, 8)


def _atomic_add(t: np.dtype, target: str, value: str) -> str:
    if t == dtypes.FLOAT64:
        return f"sk_atomic_add_f64(&{target}, {value});"
    if t == dtypes.FLOAT32:
        return f"sk_atomic_add_f32(&{target}, {value});"
    fn = "atom_add" if t.itemsize == 8 else "atomic_add"
    return f"{fn}(&{target}, {value});"


def kernel_function(kf: k.KernelFunction, printer: OpenCLPrinter) -> str:
    params = []
    for p in kf.params:
        const = "const " if p.has(k.ReadOnly) else ""
        params.append(f"{const}{dtypes.c_name(p.dtype)} *restrict {p.name}")
    body = printer.stmts(OPENCL_PLATFORM.lower_body(kf.body, kf), "    ")
    printer.declared.clear()
    return "\n".join([f"static inline int {kf.name}({', '.join(params)})", "{",
                      "    int sk_error = 0;", *body, "    return sk_error;", "}"])


def loop_kernel(name: str, call: str, specs: tuple[ArgSpec, ...], race: str,
                returns_status: bool) -> str:
    """The ``__kernel`` running the elements (see the module's docstring)."""
    if race == "color":
        params = ["const long nblocks", "__global const long *restrict blocks"]
    else:
        params = ["const long nelems"]
    pre: list[str] = []
    body: list[str] = []
    post: list[str] = []
    after: list[str] = []
    args: list[str] = []
    for i, s in enumerate(specs):
        t, ct = s.dtype, cl_type(s.dtype)
        pt = dtypes.c_name(t)
        const = "const " if s.mode == "READ" else ""
        n = s.local_size
        if s.kind == "direct":
            params.append(f"__global {const}{ct} *restrict a{i}")
            body += [f"{pt} l{i}[{n}];",
                     f"for (int q = 0; q < {n}; ++q) l{i}[q] = a{i}[e * {n} + q];"]
            if s.mode in ("MIN", "MAX"):
                cmp = "<" if s.mode == "MIN" else ">"
                post.append(f"for (int q = 0; q < {n}; ++q) if (l{i}[q] {cmp} a{i}[e * {n} + q])"
                            f" a{i}[e * {n} + q] = l{i}[q];")
            elif s.mode != "READ":
                post.append(f"for (int q = 0; q < {n}; ++q) a{i}[e * {n} + q] = l{i}[q];")
        elif s.kind in ("indirect", "entry"):
            params += [f"__global {const}{ct} *restrict a{i}",
                       f"__global const {dtypes.c_name(s.index)} *restrict m{i}"]
            first = 0 if s.kind == "indirect" else s.entry
            target = (f"a{i}[(long)m{i}[e * {s.arity} + {first} + q / {s.dim}] * {s.dim} "
                      f"+ q % {s.dim}]")
            body.append(f"{pt} l{i}[{n}];")
            init = target if s.mode in ("READ", "RW", "MIN", "MAX") else "0"
            body.append(f"for (int q = 0; q < {n}; ++q) l{i}[q] = {init};")
            if s.mode in ("MIN", "MAX"):
                cmp = "<" if s.mode == "MIN" else ">"
                post.append(f"for (int q = 0; q < {n}; ++q) if (l{i}[q] {cmp} {target}) "
                            f"{target} = l{i}[q];")
            elif s.mode == "INC" and race == "atomic":
                post.append(f"for (int q = 0; q < {n}; ++q) {_atomic_add(t, target, f'l{i}[q]')}")
            elif s.mode == "INC":
                post.append(f"for (int q = 0; q < {n}; ++q) {target} += l{i}[q];")
            elif s.mode in ("WRITE", "RW"):
                post.append(f"for (int q = 0; q < {n}; ++q) {target} = l{i}[q];")
        elif s.kind == "global" and s.mode == "READ":
            params.append(f"__global const {ct} *restrict a{i}")
            body += [f"{pt} l{i}[{n}];", f"for (int q = 0; q < {n}; ++q) l{i}[q] = a{i}[q];"]
        elif s.kind == "global":
            # r: this work-item's running value; w: the group's scratch; p: the partials
            params += [f"__global const {ct} *restrict a{i}", f"__global {ct} *restrict p{i}",
                       f"__local {pt} *w{i}"]
            init = "0" if s.mode == "INC" else f"a{i}[q]"
            pre += [f"{pt} r{i}[{n}];", f"for (int q = 0; q < {n}; ++q) r{i}[q] = {init};"]
            body += [f"{pt} l{i}[{n}];", f"for (int q = 0; q < {n}; ++q) l{i}[q] = {init};"]
            if s.mode == "INC":
                post.append(f"for (int q = 0; q < {n}; ++q) r{i}[q] += l{i}[q];")
                combine = "w{i}[x] += w{i}[y];"
            else:
                cmp = "<" if s.mode == "MIN" else ">"
                post.append(f"for (int q = 0; q < {n}; ++q) if (l{i}[q] {cmp} r{i}[q]) "
                            f"r{i}[q] = l{i}[q];")
                combine = f"if (w{{i}}[y] {cmp} w{{i}}[x]) w{{i}}[x] = w{{i}}[y];"
            after += _group_reduction(i, n, combine.format(i=i))
        elif s.kind == "mat":
            params += [f"__global {ct} *restrict a{i}", f"__global const long *restrict m{i}"]
            body += [f"{pt} l{i}[{n}];", f"for (int q = 0; q < {n}; ++q) l{i}[q] = 0;"]
            target = f"a{i}[m{i}[e * {n} + q]]"
            if s.mode == "INC" and race == "atomic":
                post.append(f"for (int q = 0; q < {n}; ++q) {_atomic_add(t, target, f'l{i}[q]')}")
            else:
                op = "+=" if s.mode == "INC" else "="
                post.append(f"for (int q = 0; q < {n}; ++q) {target} {op} l{i}[q];")
        args.append(f"l{i}")
    params.append(f"__global int *{STATUS}")
    invoke = f"{call}({', '.join(args)})"
    element = [*body, f"if ({invoke}) sk_error = 2;" if returns_status else f"{invoke};", *post]
    lines = [f"__kernel void {name}({', '.join(params)})", "{", "    int sk_error = 0;",
             *("    " + x for x in pre)]
    if race == "color":
        lines += ["    const long b = (long)get_global_id(0);",
                  "    if (b < nblocks) {",
                  "    for (long e = blocks[2 * b]; e < blocks[2 * b + 1]; ++e) {",
                  *("        " + x for x in element), "    }", "    }"]
    else:
        lines += ["    const long e = (long)get_global_id(0);", "    if (e < nelems) {",
                  *("        " + x for x in element), "    }"]
    lines += [*("    " + x for x in after), f"    if (sk_error) *{STATUS} = sk_error;", "}"]
    return "\n".join(lines)


def _group_reduction(i: int, n: int, combine: str) -> list[str]:
    """Tree reduction of each component over the work-group in local memory; work-item 0
    writes the group's partial."""
    return [f"for (int q = 0; q < {n}; ++q) {{",
            f"    w{i}[get_local_id(0) * {n} + q] = r{i}[q];", "}",
            "barrier(CLK_LOCAL_MEM_FENCE);",
            "for (uint span = get_local_size(0) / 2; span > 0; span /= 2) {",
            "    if (get_local_id(0) < span) {",
            f"        for (int q = 0; q < {n}; ++q) {{",
            f"            uint x = get_local_id(0) * {n} + q, y = (get_local_id(0) + span) * {n} + q;",
            f"            {combine}", "        }", "    }",
            "    barrier(CLK_LOCAL_MEM_FENCE);", "}",
            "if (get_local_id(0) == 0) {",
            f"    for (int q = 0; q < {n}; ++q) p{i}[get_group_id(0) * {n} + q] = w{i}[q];",
            "}"]


def source(name: str, specs: tuple[ArgSpec, ...], race: str, kf: k.KernelFunction) -> str:
    printer = OpenCLPrinter()
    kernel_text = kernel_function(kf, printer)
    loop = loop_kernel(name, kf.name, specs, race, kf.uses_error_flag)
    parts = [printer.prelude()]
    if race == "atomic":
        parts.append(_ATOMIC_PRELUDE)
    parts += ["/* --- kernel --- */", kernel_text, "", "/* --- loop --- */", loop, ""]
    return "\n".join(parts)


