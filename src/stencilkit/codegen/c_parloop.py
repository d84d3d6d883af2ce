"""C code of a ParLoop: the kernel as an inline function, the loop over the set, the entry.

The loop function is plain C (what ``sk.export`` writes); its header comment documents the
calling convention. Per element it gathers indirect arguments into local blocks, calls the
kernel with one pointer per argument (row-major values), and scatters results back. Shared
targets are protected either by colouring (the caller runs the loop once per colour over a
permutation of the set) or by atomic updates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import definition as d
from ..ir import kernel as k
from ..passes.lower_point import PointLowering, function_name
from .c import _INDEX_HELPERS, _PRELUDE, CPrinter, helper_source, module_footer
from .cfamily import ctype


@dataclass(frozen=True)
class ArgSpec:
    """The structure of one argument, as far as code generation is concerned."""

    kind: str  # direct | entry | indirect | global | mat
    mode: str
    dtype: np.dtype
    dim: int
    local_shape: tuple[int, ...]
    arity: int = 0  # map arity (entry, indirect); rows x cols for mat
    entry: int = 0  # the map entry of an "entry" argument
    index: np.dtype = np.dtype(np.int32)  # the map's values: int64 for targets >= 2**31

    @property
    def local_size(self) -> int:
        return int(np.prod(self.local_shape))

    @property
    def writes_shared(self) -> bool:
        return self.kind in ("indirect", "entry", "mat") and self.mode in (
            "INC", "WRITE", "RW", "MIN", "MAX")


class KernelLowering(PointLowering):
    """Lowers a typed ParLoop kernel: each parameter is a row-major local array."""

    def __init__(self, kernel: d.PointKernel, specs: tuple[ArgSpec, ...], line_text,
                 filename: str) -> None:
        super().__init__(kernel, (), None, line_text, filename)  # type: ignore[arg-type]
        for p, t, spec in zip(kernel.params, kernel.param_types, specs):
            shape = spec.local_shape
            strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
            base = self.ctx.user_symbol(p, t, pointer=True, properties=frozenset(
                {k.BasePointer(p)} | ({k.ReadOnly()} if spec.mode == "READ" else set())))
            self.buffers[p] = k.Buffer(p, t, base, tuple(_c(n) for n in shape),
                                       tuple(_c(s) for s in strides))

    def expr(self, e: d.Expr) -> k.Expr:
        if isinstance(e, d.Index):
            return k.Load(self.buffers[e.array], self.indices(e.array, e.index), dtype=e.dtype)
        return super().expr(e)

    def indices(self, array: str, index: tuple[d.Expr, ...]) -> tuple[k.Expr, ...]:
        buf = self.buffers[array]
        out = []
        for x, n in zip(index, buf.shape):
            size = int(n.value)  # type: ignore[attr-defined]
            if isinstance(x, d.Const):
                v = int(x.value)
                out.append(_c(v + size if v < 0 else v))
            else:
                self.uses_error_flag = True
                out.append(k.Op("wrap_index", (self.expr(x), n), dtype=k.INDEX))
        return tuple(out)

    def stmts(self, body: tuple[d.Stmt, ...]) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        for s in body:
            if isinstance(s, d.Store):
                out.append(k.Store(self.buffers[s.array], self.indices(s.array, s.index),
                                   self.expr(s.value), loc=s.loc, source=self.comment(s)))
            else:
                out.extend(super().stmts((s,)))
        return tuple(out)

    def lower_kernel(self) -> k.KernelFunction:
        self.declare_locals()
        decls = tuple(k.Declare(s, None) for _, s in sorted(self.locals.items()))
        body = decls + self.stmts(self.kernel.body)
        params = tuple(b.base for b in self.buffers.values())
        return k.KernelFunction(function_name("kernel", self.kernel.name), params, body,
                                tuple(self.buffers.values()), self.kernel.name,
                                self.uses_error_flag)


def loop_function_name(kernel: str) -> str:
    """The C name of the loop over the set (internal: no other name starts like it)."""
    return f"sk_parloop_{k.user_stem(kernel.strip('<>'))}"


def _c(v: int) -> k.Constant:
    return k.Constant(np.int64(v), dtype=k.INDEX)


def kernel_function(kf: k.KernelFunction) -> tuple[str, CPrinter]:
    printer = CPrinter(kf)
    printer.work = "0"
    params = []
    for p in kf.params:
        const = "const " if p.has(k.ReadOnly) else ""
        params.append(f"{const}{ctype(p.dtype)} *restrict {p.name}")
    body = printer.stmts(kf.body, "    ")
    text = "\n".join([f"static inline int {kf.name}({', '.join(params)})", "{",
                      "    int sk_error = 0;", *body, "    return sk_error;", "}"])
    return text, printer


def loop_function(name: str, kernel_call: str, specs: tuple[ArgSpec, ...], atomic: bool,
                  kernel_returns_status: bool) -> str:
    """The loop over the blocks ``[blocks[2b], blocks[2b + 1])`` of elements, b < nblocks;
    blocks run in parallel, the elements of a block in order."""
    params = ["int64_t nblocks", "const int64_t *restrict blocks"]
    pre: list[str] = []
    body: list[str] = []
    post_body: list[str] = []
    after: list[str] = []
    reductions: list[str] = []
    call_args: list[str] = []
    for i, s in enumerate(specs):
        t = ctype(s.dtype)
        const = "const " if s.mode == "READ" else ""
        if s.kind == "direct" and s.mode in ("MIN", "MAX"):
            # the kernel sees the current value; what it leaves is reduced into the Dat
            params.append(f"{t} *restrict a{i}")
            body.append(f"{t} l{i}[{s.dim}];")
            body.append(f"for (int q = 0; q < {s.dim}; ++q) l{i}[q] = a{i}[e * {s.dim} + q];")
            cmp = "<" if s.mode == "MIN" else ">"
            post_body.append(f"for (int q = 0; q < {s.dim}; ++q) if (l{i}[q] {cmp} "
                             f"a{i}[e * {s.dim} + q]) a{i}[e * {s.dim} + q] = l{i}[q];")
        elif s.kind == "direct":
            params.append(f"{const}{t} *restrict a{i}")
            body.append(f"{const}{t} *l{i} = a{i} + e * {s.dim};")
        elif s.kind in ("indirect", "entry"):
            params += [f"{const}{t} *restrict a{i}", f"const {ctype(s.index)} *restrict m{i}"]
            n_ent = s.local_shape[0] if s.kind == "indirect" else 1
            first = 0 if s.kind == "indirect" else s.entry
            body.append(f"{t} l{i}[{s.local_size}];")
            target = f"(int64_t)m{i}[e * {s.arity} + {first} + q / {s.dim}] * {s.dim} + q % {s.dim}"
            if s.mode in ("READ", "RW", "MIN", "MAX"):
                body.append(f"for (int q = 0; q < {n_ent * s.dim}; ++q) l{i}[q] = a{i}[{target}];")
            else:
                body.append(f"for (int q = 0; q < {n_ent * s.dim}; ++q) l{i}[q] = 0;")
            if s.mode in ("MIN", "MAX"):  # race-free by colouring (no atomic min/max)
                cmp = "<" if s.mode == "MIN" else ">"
                post_body.append(f"for (int q = 0; q < {n_ent * s.dim}; ++q) if (l{i}[q] {cmp} "
                                 f"a{i}[{target}]) a{i}[{target}] = l{i}[q];")
            if s.mode in ("INC", "WRITE", "RW"):
                op = "+=" if s.mode == "INC" else "="
                pragma = ("#pragma omp atomic" if s.mode == "INC" else "#pragma omp atomic write")
                post_body.append(f"for (int q = 0; q < {n_ent * s.dim}; ++q) {{")
                if atomic:
                    post_body.append(f"    {pragma}")
                post_body.append(f"    a{i}[{target}] {op} l{i}[q];")
                post_body.append("}")
        elif s.kind == "global":
            params.append(f"{const}{t} *restrict a{i}")
            if s.mode == "READ":
                body.append(f"const {t} *l{i} = a{i};")
            else:
                pre.append(f"{t} r{i}[{s.dim}];")
                init = "0" if s.mode == "INC" else f"a{i}[q]"
                pre.append(f"for (int q = 0; q < {s.dim}; ++q) r{i}[q] = {init};")
                op = {"INC": "+", "MIN": "min", "MAX": "max"}[s.mode]
                reductions.append(f"reduction({op}: r{i}[:{s.dim}])")
                body.append(f"{t} l{i}[{s.dim}];")
                body.append(f"for (int q = 0; q < {s.dim}; ++q) l{i}[q] = {init};")
                if s.mode == "INC":
                    post_body.append(f"for (int q = 0; q < {s.dim}; ++q) r{i}[q] += l{i}[q];")
                    after.append(f"for (int q = 0; q < {s.dim}; ++q) a{i}[q] += r{i}[q];")
                else:
                    cmp = "<" if s.mode == "MIN" else ">"
                    post_body.append(f"for (int q = 0; q < {s.dim}; ++q) if (l{i}[q] {cmp} "
                                     f"r{i}[q]) r{i}[q] = l{i}[q];")
                    after.append(f"for (int q = 0; q < {s.dim}; ++q) a{i}[q] = r{i}[q];")
        elif s.kind == "mat":
            params += [f"{t} *restrict a{i}", f"const int64_t *restrict m{i}"]
            body.append(f"{t} l{i}[{s.local_size}];")
            body.append(f"for (int q = 0; q < {s.local_size}; ++q) l{i}[q] = 0;")
            op = "+=" if s.mode == "INC" else "="
            post_body.append(f"for (int q = 0; q < {s.local_size}; ++q) {{")
            if atomic:
                post_body.append("    #pragma omp atomic" if s.mode == "INC"
                                 else "    #pragma omp atomic write")
            post_body.append(f"    a{i}[m{i}[e * {s.local_size} + q]] {op} l{i}[q];")
            post_body.append("}")
        call_args.append(f"l{i}")
    call = f"{kernel_call}({', '.join(call_args)})"
    lines = [f"int {name}({', '.join(params)})", "{", "    int sk_error = 0;"]
    lines += ["    " + x for x in pre]
    red = " ".join(reductions)
    lines += [f"    #pragma omp parallel for schedule(static) {red} if(nblocks > 1)",
              "    for (int64_t b = 0; b < nblocks; ++b) {",
              "    for (int64_t e = blocks[2 * b]; e < blocks[2 * b + 1]; ++e) {"]
    lines += ["        " + x for x in body]
    if kernel_returns_status:
        lines += [f"        if ({call}) {{", "            #pragma omp atomic write",
                  "            sk_error = 2;", "        }"]
    else:
        lines.append(f"        {call};")
    lines += ["        " + x for x in post_body]
    lines += ["    }", "    }"]
    lines += ["    " + x for x in after]
    lines += ["    return sk_error;", "}"]
    return "\n".join(lines)


def loop_header(name: str, kernel_name: str, specs: tuple[ArgSpec, ...]) -> str:
    lines = [f"/* ParLoop of kernel '{kernel_name}'.", " *",
             f" * int {name}(nblocks, blocks, ...) runs, in parallel, the blocks of elements",
             " * [blocks[2b], blocks[2b + 1]) for b < nblocks, each block's elements in order",
             " * (blocks that write shared entries must not run together: call once per",
             " * colour). Returns 0, or 2 when the kernel indexed a local array out of range.",
             " * Arguments after the blocks, in order:"]
    for i, s in enumerate(specs):
        t = ctype(s.dtype)
        if s.kind == "direct":
            what = f"a{i}: {t}[set size * {s.dim}], the Dat's values ({s.mode})"
        elif s.kind == "indirect":
            what = (f"a{i}: {t}[target size * {s.dim}] ({s.mode}), m{i}: {s.index}[set size * "
                    f"{s.arity}] the map; the kernel sees a gathered ({s.arity}, {s.dim}) block")
        elif s.kind == "entry":
            what = (f"a{i}: {t}[target size * {s.dim}] ({s.mode}), m{i}: {s.index}[set size * "
                    f"{s.arity}] the map, of which entry {s.entry} is used")
        elif s.kind == "global":
            what = f"a{i}: {t}[{s.dim}], a Global ({s.mode})"
        else:
            what = (f"a{i}: {t}[nnz] CSR values ({s.mode}), m{i}: int64[set size * "
                    f"{s.local_size}] the position in the values of each local block entry")
        lines.append(f" *   {what}")
    lines.append(" */")
    return "\n".join(lines)


def source(name: str, kernel_name: str, specs: tuple[ArgSpec, ...], atomic: bool,
           kernel_text: str, kernel_call: str, helpers: set, returns_status: bool) -> str:
    parts = [_PRELUDE, "#define SK_SIGNED(T) ((T)-1 < (T)0)", _INDEX_HELPERS]
    for op, t in sorted(helpers, key=lambda h: (h[0], str(h[1]))):
        text = helper_source(op, t)
        if text:
            parts.append(text)
    parts += ["/* --- kernel --- */", kernel_text, "", "/* --- loop --- */",
              loop_header(name, kernel_name, specs),
              loop_function(name, kernel_call, specs, atomic, returns_status), ""]
    return "\n".join(parts)


def python_entry(name: str, specs: tuple[ArgSpec, ...], module: str) -> str:
    """CPython entry: call(blocks, data0, [map0], data1, ...), blocks an int64 (n, 2) array."""
    nbuf = sum(2 if s.kind in ("indirect", "entry", "mat") else 1 for s in specs) + 1
    lines = ["", "#define PY_SSIZE_T_CLEAN", "#include <Python.h>", "",
             "static PyObject *sk_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {",
             f"    Py_buffer v[{nbuf}];", "    int nv = 0;", "    PyObject *res = NULL;",
             f"    if (nargs != {nbuf}) {{ PyErr_SetString(PyExc_TypeError, \"wrong number "
             "of arguments\"); return NULL; }",
             "    if (PyObject_GetBuffer(args[0], &v[nv], PyBUF_C_CONTIGUOUS) != 0) goto done;",
             "    const int64_t *blocks = (const int64_t *)v[nv].buf;",
             "    int64_t nblocks = (int64_t)(v[nv++].len / (2 * sizeof(int64_t)));"]
    call = ["nblocks", "blocks"]
    pos = 1
    for i, s in enumerate(specs):
        flags = "PyBUF_C_CONTIGUOUS" if s.mode == "READ" else "PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE"
        lines += [f"    if (PyObject_GetBuffer(args[{pos}], &v[nv], {flags}) != 0) goto done;",
                  f"    void *p{i} = v[nv++].buf;"]
        call.append(f"({ctype(s.dtype)} *)p{i}")
        pos += 1
        if s.kind in ("indirect", "entry", "mat"):
            lines += [f"    if (PyObject_GetBuffer(args[{pos}], &v[nv], PyBUF_C_CONTIGUOUS) != 0) "
                      "goto done;", f"    void *q{i} = v[nv++].buf;"]
            index = "int64_t" if s.kind == "mat" else ctype(s.index)
            call.append(f"(const {index} *)q{i}")
            pos += 1
    lines += ["    int status;", "    Py_BEGIN_ALLOW_THREADS",
              f"    status = {name}({', '.join(call)});", "    Py_END_ALLOW_THREADS",
              "    res = PyLong_FromLong(status);",
              "done:", "    for (int q = 0; q < nv; ++q) PyBuffer_Release(&v[q]);",
              "    return res;", "}", module_footer(module)]
    return "\n".join(lines)
