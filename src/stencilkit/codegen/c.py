"""The C99 + OpenMP backend printer: the kernel, its helpers, and the CPython entry point.

The kernel function is plain C with no Python dependency (it is what ``sk.export`` writes).
For in-process calls a small CPython extension function is printed after it: it takes the
arrays through the buffer protocol, re-checks every shape, stride and item size the kernel
relies on (so a wrong call can never read or write outside an array), releases the GIL and
calls the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template

import numpy as np

from .. import dtypes
from ..ir import abi
from ..ir import kernel as k
from .cfamily import CFamilyPrinter, ctype, type_suffix

_PRELUDE = """\
#include <stdint.h>
#include <stdbool.h>
#include <math.h>
#include <complex.h>
#ifndef CMPLX
#define CMPLX(x, y) __builtin_complex((double)(x), (double)(y))
#endif
#ifndef CMPLXF
#define CMPLXF(x, y) __builtin_complex((float)(x), (float)(y))
#endif
"""

_TEAM_SIZE = """\
#ifdef _OPENMP
#include <omp.h>
#include <stdlib.h>
/* The team of every parallel region: OMP_NUM_THREADS's first entry, else the CPUs this
 * process may run on (OpenMP's own default), read once; 1 inside a caller's parallel region.
 * Not omp_get_max_threads(): Numba's OpenMP threading layer calls
 * omp_set_num_threads(NUMBA_NUM_THREADS) in the libgomp it shares with us and enables
 * nesting, so after a Numba parallel call that would ignore OMP_NUM_THREADS and a call from
 * inside a parallel region would start a nested team. */
static int sk_team_threads;
/* sk.set_num_threads's process-wide count (runtime/threads.py), found by PyInit; 0: unset */
static int *sk_team_cell;
static inline int sk_team_size(void) {
    if (omp_in_parallel()) return 1;
    if (sk_team_cell != NULL) {
        int set = __atomic_load_n(sk_team_cell, __ATOMIC_RELAXED);
        if (set > 0) return set;
    }
    int n = __atomic_load_n(&sk_team_threads, __ATOMIC_RELAXED);
    if (n <= 0) {
        const char *env = getenv("OMP_NUM_THREADS");
        long v = env ? strtol(env, NULL, 10) : 0;
        n = v > 0 ? (int)v : omp_get_num_procs();
        __atomic_store_n(&sk_team_threads, n, __ATOMIC_RELAXED);
    }
    return n;
}
#endif
"""

# Non-temporal copy of a computed row chunk (platforms/c.py ``streamed_row``): GCC has no
# portable non-temporal store, and the vectorized loop cannot be made to use one, so the
# loop writes an L1-resident buffer and this copies it with streaming stores.
_STREAM = """\
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
/* Wide streaming stores through GCC's builtins, not <immintrin.h>: that header costs GCC
 * 0.16 s of every compile, a third of a small kernel's. Other compilers get the header. */
#if defined(__GNUC__) && !defined(__clang__) && (defined(__AVX512F__) || defined(__AVX__))
typedef long long sk_line_t __attribute__((vector_size(64), aligned(1)));  /* unaligned */
typedef long long sk_line_a __attribute__((vector_size(64)));  /* on a line boundary */
typedef long long sk_half_t __attribute__((vector_size(32), aligned(1)));
typedef long long sk_half_a __attribute__((vector_size(32)));
#ifdef __AVX512F__
#define SK_STREAM_LINE(d, s) __builtin_ia32_movntdq512((sk_line_a *)(d), *(const sk_line_t *)(s))
#else
#define SK_STREAM_LINE(d, s) do { \\
        __builtin_ia32_movntdq256((sk_half_a *)(d), *(const sk_half_t *)(s)); \\
        __builtin_ia32_movntdq256((sk_half_a *)((d) + 32), *(const sk_half_t *)((s) + 32)); \\
    } while (0)
#endif
#elif defined(__AVX512F__)
#include <immintrin.h>
#define SK_STREAM_LINE(d, s) _mm512_stream_si512((void *)(d), _mm512_loadu_si512((const void *)(s)))
#elif defined(__AVX__)
#include <immintrin.h>
#define SK_STREAM_LINE(d, s) do { \\
        _mm256_stream_si256((__m256i *)(d), _mm256_loadu_si256((const __m256i *)(s))); \\
        _mm256_stream_si256((__m256i *)((d) + 32), \\
                            _mm256_loadu_si256((const __m256i *)((s) + 32))); \\
    } while (0)
#elif defined(__SSE2__)
#define SK_STREAM_LINE(d, s) do { \\
        for (int sk_q = 0; sk_q < 64; sk_q += 16) \\
            _mm_stream_si128((__m128i *)((d) + sk_q), \\
                             _mm_loadu_si128((const __m128i *)((s) + sk_q))); \\
    } while (0)
#else
#define SK_STREAM_LINE(d, s) memcpy((d), (s), 64)
#endif
/* Whole 64-byte lines only (``dst`` on a line boundary, ``n`` a multiple of 64): a line
 * written partly by streaming stores and partly by plain ones leaves the write-combining
 * buffer early and costs a read-modify-write in memory (jacobi2d measured 1.4-1.8x slower
 * so), and the row's partial lines are the loop's own, with plain stores. One store per line
 * where the CPU has 64-byte vectors: a 16-byte ``movntdq`` per quarter line measured 1.07x
 * the plain loop on lap3d 256^3, a 64-byte one 1.13x (docs/performance.md). */
static inline void sk_stream_copy(void *restrict dst_, const void *restrict src_, int64_t n) {
    char *dst = (char *)dst_;
    const char *src = (const char *)src_;
    for (; n >= 64; n -= 64, dst += 64, src += 64)
        SK_STREAM_LINE(dst, src);
}
/* The first index at or after ``start`` (``p`` = its address) on a 64-byte line boundary of
 * the output, at most ``stop``. Item sizes divide 64 and items are aligned (the entry
 * refuses others). */
static inline int64_t sk_stream_first(const void *p, int64_t start, int64_t stop,
                                      int64_t size) {
    int64_t first = start + (int64_t)(((64 - ((uintptr_t)p & 63)) & 63) / (uintptr_t)size);
    return first < stop ? first : stop;
}
/* The end of the whole lines from ``first`` (on a boundary) towards ``stop``. */
static inline int64_t sk_stream_last(int64_t first, int64_t stop, int64_t size) {
    int64_t per_line = 64 / size;
    return first + (stop - first) / per_line * per_line;
}
/* The end of the chunk starting at ``start``: chunks hold whole lines (``chunk`` items are
 * a multiple of 64 bytes for every item size). */
static inline int64_t sk_stream_chunk_end(int64_t start, int64_t stop, int64_t chunk) {
    return stop - start <= chunk ? stop : start + chunk;
}
static inline void sk_store_fence(void) {
#ifdef __SSE2__
    _mm_sfence();  /* streaming stores are weakly ordered: before the thread's barrier */
#endif
}
"""

# Helper bodies; $T is the C type, $S the type suffix.
_INT_HELPERS = {
    "floordiv": """static inline $T sk_floordiv_$S($T a, $T b) {
    if (b == 0) return 0;  /* NumPy's result; C would trap */
    if (SK_SIGNED($T) && b == ($T)-1) return ($T)(0 - (uint64_t)a);
    $T q = a / b;
    if (SK_SIGNED($T) && (a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}""",
    "mod": """static inline $T sk_mod_$S($T a, $T b) {
    if (b == 0) return 0;
    if (SK_SIGNED($T) && b == ($T)-1) return 0;
    $T r = a % b;
    if (SK_SIGNED($T) && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}""",
    "powi": """static inline $T sk_powi_$S($T a, int64_t n) {
    if (n < 0) {  /* Numba: integer results, 1 and -1 are the only non-zero ones */
        if (a == 1) return 1;
        if (SK_SIGNED($T) && a == ($T)-1) return (n & 1) ? a : 1;
        return 0;
    }
    uint64_t r = 1, x = (uint64_t)a;
    while (n) { if (n & 1) r *= x; x *= x; n >>= 1; }
    return ($T)r;
}""",
    "shl": """static inline $T sk_shl_$S($T a, int64_t n) {
    return (n < 0 || n >= 64) ? 0 : ($T)((uint64_t)a << n);
}""",
    "shr": """static inline $T sk_shr_$S($T a, int64_t n) {
    if (n < 0) return 0;
    if (n >= 64) return (SK_SIGNED($T) && a < 0) ? ($T)-1 : 0;
    return a >> n;
}""",
}
_FLOAT_HELPERS = {
    "floordiv": """static inline $T sk_floordiv_$S($T a, $T b) {
    if (b == 0) return a / b;  /* NumPy: inf or nan */
    $T mod = $fmod(a, b);
    $T div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    $T fl;
    if (div != 0) { fl = $floor(div); if (div - fl > ($T)0.5) fl += 1; }
    else fl = $copysign(($T)0, a / b);
    return fl;
}""",
    "mod": """static inline $T sk_mod_$S($T a, $T b) {
    if (b == 0) return $fmod(a, b);
    $T mod = $fmod(a, b);
    if (mod != 0) { if ((b < 0) != (mod < 0)) mod += b; }
    else mod = $copysign(($T)0, b);
    return mod;
}""",
    "powi": """static inline $T sk_powi_$S($T a, int64_t n) {
    /* Numba's integer-power loop, so that results are bit-identical */
    if (n > 65536 || n < -65536) return ($T)pow((double)a, (double)n);
    int invert = n < 0;
    uint64_t e = invert ? (uint64_t)(-n) : (uint64_t)n;
    $T r = 1;
    while (e) { if (e & 1) r *= a; e >>= 1; a *= a; }
    return invert ? ($T)1 / r : r;
}""",
}
_ANY_HELPERS = {
    "min": "static inline $T sk_min_$S($T a, $T b) { return (b < a) ? b : a; }",
    "max": "static inline $T sk_max_$S($T a, $T b) { return (b > a) ? b : a; }",
    "abs": "static inline $T sk_abs_$S($T a) { return (a < 0) ? ($T)(0 - a) : a; }",
    "sign": "static inline $T sk_sign_$S($T a) { return (a > 0) ? 1 : (a < 0) ? ($T)-1 : a; }",
}
_FLOAT_ONLY = {
    "minimum": "static inline $T sk_minimum_$S($T a, $T b) "
               "{ return (isnan(a) || a <= b) ? a : b; }",
    "maximum": "static inline $T sk_maximum_$S($T a, $T b) "
               "{ return (isnan(a) || a >= b) ? a : b; }",
}
_INT_ONLY = {
    "minimum": "static inline $T sk_minimum_$S($T a, $T b) { return (a <= b) ? a : b; }",
    "maximum": "static inline $T sk_maximum_$S($T a, $T b) { return (a >= b) ? a : b; }",
}
_COMPLEX_HELPERS = {
    "isnan": "static inline bool sk_isnan_$S($T a) { return isnan(creal(a)) || isnan(cimag(a)); }",
    "isinf": "static inline bool sk_isinf_$S($T a) { return isinf(creal(a)) || isinf(cimag(a)); }",
    "isfinite": "static inline bool sk_isfinite_$S($T a) "
                "{ return isfinite(creal(a)) && isfinite(cimag(a)); }",
}
def index_helpers(qualifier: str = "static inline", shared_status: bool = True) -> str:
    """The run-time index checks every C-family backend prints: they clamp and report instead
    of reading out of bounds. ``shared_status``: the status is shared by OpenMP threads (C),
    so it is written atomically; a GPU thread's status is its own variable."""
    store = "        #pragma omp atomic write\n" if shared_status else ""
    return (
        f"{qualifier} int64_t sk_checked_offset(int64_t x, int64_t lo, int64_t hi, int *err) {{\n"
        "    if (x < lo || x > hi) {  /* outside the declared neighbourhood */\n"
        f"{store}        *err = 1;\n"
        "        return 0;\n"
        "    }\n"
        "    return x;\n"
        "}\n"
        f"{qualifier} int64_t sk_wrap_index(int64_t x, int64_t n, int *err) {{\n"
        "    if (x < 0) x += n;\n"
        "    if (x < 0 || x >= n) {\n"
        f"{store}        *err = 2;\n"
        "        return 0;\n"
        "    }\n"
        "    return x;\n"
        "}\n")




# Float to integer as LLVM's fptosi lowers on x86-64 (what Numba gives): NaN and values
# outside the range give the "integer indefinite" value INT64_MIN (INT32_MIN for 32 bits);
# 8- and 16-bit results are the 32-bit conversion truncated.
_F2I = {
    8: """static inline int64_t sk_f2i_int64(double x) {
    return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN;
}""",
    4: """static inline int32_t sk_f2i_int32(double x) {
    return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN;
}""",
}


def _f2i_source(t: np.dtype) -> str:
    if t.itemsize >= 4:
        return _F2I[t.itemsize]
    return (f"static inline {ctype(t)} sk_f2i_{type_suffix(t)}(double x) {{\n"
            f"    return ({ctype(t)})(uint32_t)((x > -2147483649.0 && x < 2147483648.0) "
            f"? (int32_t)x : INT32_MIN);\n}}")


def helper_source(op: str, t: np.dtype) -> str:
    if op in ("checked_offset", "wrap_index"):
        return ""
    if op == "f2i":
        return _f2i_source(t)
    if dtypes.is_complex(t):
        table = _COMPLEX_HELPERS
    elif dtypes.is_float(t):
        table = {**_ANY_HELPERS, **_FLOAT_HELPERS, **_FLOAT_ONLY}
    else:
        table = {**_ANY_HELPERS, **_INT_HELPERS, **_INT_ONLY}
    single = t == dtypes.FLOAT32
    libm = {n: n + ("f" if single else "") for n in ("fmod", "floor", "copysign")}
    return Template(table[op]).substitute(T=ctype(t), S=type_suffix(t), **libm)


# Local arrays (column buffers) of at most this many bytes live on the stack; a larger or
# run-time-sized one gets that much stack and, when its size at run time exceeds it, the heap.
# A VLA sized by the number of K levels overflowed the (OpenMP worker's) stack and crashed
# the process for deep columns; 16 KiB per array keeps a thread's stack use small.
STACK_ARRAY_BYTES = 16384

_HEAP_ARRAY_HELPER = """
static inline void sk_free_local(void *p) { free(*(void **)p); }
"""


class CPrinter(CFamilyPrinter):
    """Prints a C-platform-lowered ``KernelFunction`` (``targets.c``)."""

    def __init__(self, kernel: k.KernelFunction) -> None:
        super().__init__(kernel.status.name if kernel.status is not None else "sk_error")
        self.kernel = kernel
        self.heap_arrays = False

    def stmts(self, body: tuple[k.Stmt, ...], indent: str) -> list[str]:
        for at, s in enumerate(body):
            if isinstance(s, k.DeclareArray) and not self._fits_stack(s):
                # the run of declarations from here: printed together, guarded by one test
                end = at
                while end < len(body) and isinstance(body[end], (k.DeclareArray, k.Declare)):
                    end += 1
                return (super().stmts(body[:at], indent)
                        + self._stack_or_heap(body[at:end], body[end:], indent))
        return super().stmts(body, indent)

    @staticmethod
    def _fits_stack(s: k.DeclareArray) -> bool:
        return isinstance(s.size, k.Constant) and \
            int(s.size.value) * s.buffer.element_type.itemsize <= STACK_ARRAY_BYTES

    def _stack_or_heap(self, decls: tuple[k.Stmt, ...], rest: tuple[k.Stmt, ...],
                       indent: str) -> list[str]:
        """Each local array of ``decls`` that may not fit the stack: STACK_ARRAY_BYTES on the
        stack, or heap memory when its size at run time needs more (freed when the block
        ends: GCC/Clang's cleanup attribute). ``rest`` runs only when every array exists;
        else the kernel returns STATUS_MEMORY."""
        self.heap_arrays = True
        out: list[str] = []
        names = []
        for s in decls:
            if not isinstance(s, k.DeclareArray) or self._fits_stack(s):
                out += super().stmts((s,), indent)
                continue
            self.declared.add(s.buffer.base.name)
            name, t = s.buffer.base.name, ctype(s.buffer.element_type)
            small = max(1, STACK_ARRAY_BYTES // s.buffer.element_type.itemsize)
            n = f"sk_{name}_size"
            names.append(name)
            out += [
                f"{indent}const int64_t {n} = {self.expr(s.size)};",
                # only as large as needed: a fixed STACK_ARRAY_BYTES each would put the
                # arrays of one block that far apart, on the same L1 sets (1.2x on a
                # tridiagonal solve's 7 column buffers)
                f"{indent}{t} sk_{name}_stack[{n} > 0 && {n} <= {small} ? {n} : 1];",
                f"{indent}{t} *sk_{name}_heap __attribute__((cleanup(sk_free_local))) = "
                f"{n} > {small} ? ({t} *)malloc((size_t){n} * sizeof({t})) : NULL;",
                f"{indent}{t} *{name} = {n} > {small} ? sk_{name}_heap : sk_{name}_stack;"]
        return out + [
            f"{indent}if ({' && '.join(f'{n} != NULL' for n in names)}) {{",
            *self.stmts(rest, indent + "    "),
            f"{indent}}} else {{",
            f"{indent}    #pragma omp atomic write",
            f"{indent}    {self.status} = {k.STATUS_MEMORY};",
            f"{indent}}}"]

    def function(self) -> str:
        return self.function_text(self.kernel)

    def prelude(self) -> str:
        parts = [_PRELUDE, "#define SK_SIGNED(T) ((T)-1 < (T)0)", index_helpers(), _TEAM_SIZE,
                 _STREAM]
        if self.heap_arrays:
            parts.append("#include <stdlib.h>" + _HEAP_ARRAY_HELPER)
        for op, t in sorted(self.helpers, key=lambda h: (h[0], str(h[1]))):
            src = helper_source(op, t)
            if src:
                parts.append(src)
        return "\n".join(parts)


def header_comment(kernel: k.KernelFunction) -> str:
    """The calling convention, parameter by parameter, as a C comment (a kernel whose
    ``doc`` has several lines documents itself: the comment is that text)."""
    if "\n" in kernel.doc:
        return "\n".join(["/* " + kernel.doc.splitlines()[0],
                          *[(" * " + line).rstrip() for line in kernel.doc.splitlines()[1:]],
                          " */"])
    lines = [f"/* {kernel.doc}", " *", " * Calling convention (all strides in elements):"]
    for p in abi.describe(kernel).parameters:
        lines.append(f" *   {p.name:<16} {abi.explain(p)}")
    lines += [" * Strides of the last dimension that are not parameters are 1.",
              " * Returns a status (3 only from the Python entry point):",
              *[f" *   {line}" for line in abi.status_lines()]]
    lines[-1] += " */"
    return "\n".join(lines)


def kernel_source(kernel: k.KernelFunction) -> tuple[str, CPrinter]:
    """The standalone C source of a C-platform-lowered kernel (no Python): the prelude with
    the helpers it uses, its documentation comment, the function."""
    printer = CPrinter(kernel)
    fn = printer.function()
    return "\n".join([printer.prelude(), header_comment(kernel), fn, ""]), printer


def translation_unit(sections: tuple[tuple[str, k.KernelFunction | str], ...]) -> str:
    """Several C-platform-lowered functions in one source, each under a section marker,
    after one prelude with every helper any of them uses. A section may be verbatim C text
    (a user-supplied kernel, ``sk.Kernel(code, name)``)."""
    helpers: set[tuple[str, np.dtype]] = set()
    body: list[str] = []
    for title, part in sections:
        body.append(f"/* --- {title} --- */")
        if isinstance(part, str):
            body += [part, ""]
            continue
        printer = CPrinter(part)
        fn = printer.function()
        helpers |= printer.helpers
        body += ([header_comment(part)] if part.doc and not part.internal else []) + [fn, ""]
    printer = CPrinter(k.KernelFunction("", (), (), ()))
    printer.helpers = helpers
    return "\n".join([printer.prelude(), *body])


# ---------------------------------------------------------------- CPython entry point


# The view of an array argument in an entry built by ``python_wrapper`` (point kernels and
# computations).
_ARRAY_VIEW = """\
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

/* A non-empty exact ndarray's fields are read directly: the buffer protocol costs about 50 ns
 * per array, a fifth of a small kernel's call. The array stays alive for the call (the caller
 * holds it), and NumPy refuses to resize an array that others reference. Anything else goes
 * through the buffer protocol: an empty array (whose strides NumPy 2 sets to 0 and the
 * protocol reports as contiguous), a read-only array asked for writing (the protocol raises
 * the error). PyBuffer_Release of a view without obj does nothing. */
static int sk_view(PyObject *obj, Py_buffer *v, int writable) {
    if (PyArray_CheckExact(obj) && PyArray_SIZE((PyArrayObject *)obj) > 0) {
        PyArrayObject *a = (PyArrayObject *)obj;
        if (!writable || PyArray_ISWRITEABLE(a)) {
            v->buf = PyArray_DATA(a);
            v->obj = NULL;
            v->itemsize = PyArray_ITEMSIZE(a);
            v->len = PyArray_NBYTES(a);
            v->readonly = !PyArray_ISWRITEABLE(a);
            v->ndim = PyArray_NDIM(a);
            v->format = NULL;
            v->shape = (Py_ssize_t *)PyArray_DIMS(a);
            v->strides = (Py_ssize_t *)PyArray_STRIDES(a);
            v->suboffsets = NULL;
            v->internal = NULL;
            return 0;
        }
    }
    return PyObject_GetBuffer(obj, v, writable ? PyBUF_STRIDES | PyBUF_WRITABLE : PyBUF_STRIDES);
}
"""

# Part of the cache key of the modules ``python_wrapper`` builds: bumped when the wrapper's
# functions change, so that a module built by an older version is never loaded.
WRAPPER_VERSION = "point-wrapper-8"  # 8: short calls keep the GIL (HOLD_GIL_BELOW)


@dataclass(frozen=True)
class WrapperArg:
    """One Python-level argument of the entry point."""

    name: k.ArgumentKey  # an array's or a scalar's name, or what a generated scalar is
    dtype: np.dtype
    ndim: int  # 0 for scalars
    writable: bool = False
    unit_stride: bool = False
    # PRIMARY_INPUT (the shape every other array is checked against), RELATIVE_INPUT,
    # STANDARD_INPUT, OUTPUT, SCALAR, FIELD
    role: abi.Role = abi.Role.RELATIVE_INPUT


def python_wrapper(kernel: k.KernelFunction, args: tuple[WrapperArg, ...], module: str,
                   stencil: str, checks: tuple[tuple[str, str], ...] = (),
                   exact: bool = False) -> str:
    """A CPython extension module with the METH_FASTCALL function ``call(*args)``.

    ``checks`` are extra (C condition that must hold, message) pairs; the condition may
    use ``vN`` (the buffer of argument N) and ``sN`` (the value of scalar argument N).
    ``exact`` adds ``call_exact(expected, *args)`` (see ``exact_entry``)."""
    n = len(args)
    lines = ["", "#define PY_SSIZE_T_CLEAN", "#include <Python.h>", "",
             "static PyObject *sk_fail(Py_buffer *views, int nviews, const char *msg) {",
             "    for (int v = 0; v < nviews; ++v) PyBuffer_Release(&views[v]);",
             "    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, msg);",
             "    return NULL;", "}", "",
             "static void sk_extent(const Py_buffer *v, char **lo, char **hi) {",
             "    char *a = (char *)v->buf, *b = (char *)v->buf;",
             "    for (int d = 0; d < v->ndim; ++d) {",
             "        if (v->shape[d] == 0) { *lo = *hi = a; return; }",
             "        Py_ssize_t span = (v->shape[d] - 1) * v->strides[d];",
             "        if (span < 0) a += span; else b += span;",
             "    }",
             "    *lo = a; *hi = b + v->itemsize;",
             "}", "",
             _ARRAY_VIEW,
             "static PyObject *sk_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {",
             f"    Py_buffer views[{max(1, n)}];", "    int nviews = 0;",
             f"    if (nargs != {n}) {{ PyErr_SetString(PyExc_TypeError, "
             f"\"{stencil}: expected {n} arguments\"); return NULL; }}"]
    first = next((i for i, a in enumerate(args) if a.role is abi.Role.PRIMARY_INPUT), 0)
    for i, a in enumerate(args):
        if a.ndim == 0:
            lines += _scalar_conversion(i, a)
            continue
        item = a.dtype.itemsize
        lines += [
            f"    Py_buffer *v{i} = &views[nviews];",
            f"    if (sk_view(args[{i}], v{i}, {int(a.writable)}) != 0) "
            f"return sk_fail(views, nviews, \"\");",
            "    ++nviews;",
            f"    if (v{i}->ndim != {a.ndim} || v{i}->itemsize != {item}) return sk_fail(views, "
            f"nviews, \"{stencil}: argument '{a.name}' must be a {a.ndim}-D array of "
            f"{a.dtype}\");",
            f"    if (((uintptr_t)v{i}->buf) % {item} != 0) return sk_fail(views, nviews, "
            f"\"{stencil}: argument '{a.name}' is not aligned to its item size\");",
            f"    for (int d = 0; d < {a.ndim}; ++d) if (v{i}->strides[d] % {item} != 0) "
            f"return sk_fail(views, nviews, \"{stencil}: strides of '{a.name}' are not "
            f"multiples of its item size\");",
        ]
        if a.unit_stride:
            lines.append(f"    if (v{i}->shape[{a.ndim - 1}] > 1 && v{i}->strides[{a.ndim - 1}] "
                         f"!= {item}) return sk_fail(views, nviews, \"{stencil}: '{a.name}' "
                         f"must have a unit last stride in this specialization\");")
    for cond, message in checks:
        lines.append(f"    if (!({cond})) return sk_fail(views, nviews, \"{stencil}: {message}\");")
    fview = f"v{first}"
    for i, a in enumerate(args):
        if a.role is abi.Role.RELATIVE_INPUT:
            lines.append(f"    for (int d = 0; d < {a.ndim}; ++d) if (v{i}->shape[d] < "
                         f"{fview}->shape[d]) return sk_fail(views, nviews, \"{stencil}: "
                         f"secondary array '{a.name}' is smaller than the first argument\");")
        if a.role is abi.Role.OUTPUT:
            lines.append(f"    for (int d = 0; d < {a.ndim}; ++d) if (v{i}->shape[d] != "
                         f"{fview}->shape[d]) return sk_fail(views, nviews, \"{stencil}: "
                         f"'out' must have the shape of the first argument\");")
    # An input whose memory range meets the output's: status 3, the caller copies and retries.
    arrays = [i for i, a in enumerate(args) if a.ndim > 0]
    out_i = next((i for i, a in enumerate(args) if a.role is abi.Role.OUTPUT), None)
    if out_i is not None:
        lines.append(f"    char *sk_lo[{len(args)}], *sk_hi[{len(args)}];")
        for i in arrays:
            lines.append(f"    sk_extent(v{i}, &sk_lo[{i}], &sk_hi[{i}]);")
    for i in arrays:
        if out_i is not None and i != out_i:
            lines.append(f"    if (sk_lo[{i}] < sk_hi[{out_i}] && sk_lo[{out_i}] < sk_hi[{i}]) {{ "
                         "for (int v = 0; v < nviews; ++v) PyBuffer_Release(&views[v]); "
                         f"return PyLong_FromLong({abi.STATUS_OVERLAP.code}); }}")
    by_buffer = {a.name: i for i, a in enumerate(args)}
    call_args = []
    for p in kernel.params:
        for prop in p.properties:
            match prop:
                case k.BasePointer(buffer=b):
                    call_args.append(f"({ctype(p.dtype)} *)v{by_buffer[b]}->buf")
                case k.ShapeOf(buffer=b, dim=dim):
                    call_args.append(f"(int64_t)v{by_buffer[b]}->shape[{dim}]")
                case k.StrideOf(buffer=b, dim=dim):
                    i = by_buffer[b]
                    call_args.append(f"(int64_t)(v{i}->strides[{dim}] / {args[i].dtype.itemsize})")
                case k.ScalarArgument(key=nm):
                    call_args.append(f"s{by_buffer[nm]}")
    lines += ["    int status;", *_call_holding_gil_if_short(
        f"status = {kernel.name}({', '.join(call_args)});", arrays[0] if arrays else None),
              "    for (int v = 0; v < nviews; ++v) PyBuffer_Release(&views[v]);",
              "    return PyLong_FromLong(status);", "}"]
    if exact:
        lines.append(exact_entry(args))
    lines.append(module_footer(module, exact, numpy=True))
    return "\n".join(lines)


#: calls whose first array has fewer elements than this keep the GIL while they run: they
#: take microseconds (a 16^3 Laplacian about 1.5), and releasing and taking it back cost 1-4%
#: of that (measured, interleaved, CPU time); NumPy keeps it below 500 elements. Another
#: Python thread waits at most such a call, far less than the interpreter's 5 ms switch
#: interval.
HOLD_GIL_BELOW = 1 << 13


def _call_holding_gil_if_short(call: str, first_array: int | None) -> list[str]:
    """The lines of ``call``: holding the GIL where the first array argument (the
    domain's, or a computation's field holding it) is short, releasing it otherwise."""
    if first_array is None:
        return ["    Py_BEGIN_ALLOW_THREADS", f"    {call}", "    Py_END_ALLOW_THREADS"]
    v = f"v{first_array}"
    return ["    Py_ssize_t sk_elements = 1;",
            f"    for (int d = 0; d < {v}->ndim; ++d) sk_elements *= {v}->shape[d];",
            f"    PyThreadState *sk_saved = sk_elements < {HOLD_GIL_BELOW} ? NULL "
            ": PyEval_SaveThread();",
            f"    {call}",
            "    if (sk_saved != NULL) PyEval_RestoreThread(sk_saved);"]


def exact_entry(args: tuple[WrapperArg, ...]) -> str:
    """``call_exact(expected, *args)``: ``call(*args)`` when every argument's type is exactly
    ``expected[2*i]`` and each array's dtype object is ``expected[2*i + 1]``; a TypeError
    otherwise, before anything runs.

    Why: the Python call path picks a specialization by a signature key (dtype, ndim, unit
    stride per array, the type per scalar) that costs more than a small kernel's run. With
    the types of the latest call checked here in a few pointer compares, the key is needed
    only when they differ; ``call`` itself checks ndim, strides, shapes and overlap as always.
    NumPy's dtype objects of the built-in types are singletons, so the identity compare is
    exact for them; any other dtype object only makes the caller take the keyed path."""
    n = len(args)
    lines = ["", "static PyObject *sk_dtype_name;", "",
             "static PyObject *sk_call_exact(PyObject *self, PyObject *const *args, "
             "Py_ssize_t nargs) {",
             f"    if (nargs != {n + 1} || !PyTuple_CheckExact(args[0]) || "
             f"PyTuple_GET_SIZE(args[0]) != {2 * n}) goto differ;",
             "    PyObject *const *x = args + 1;", "    PyObject *dt;", "    int same;"]
    for i, a in enumerate(args):
        lines.append(f"    if ((PyObject *)Py_TYPE(x[{i}]) != PyTuple_GET_ITEM(args[0], {2 * i})) "
                     "goto differ;")
        if a.ndim > 0:
            lines += [f"    if (PyArray_CheckExact(x[{i}])) {{",
                      f"        same = (PyObject *)PyArray_DESCR((PyArrayObject *)x[{i}]) == "
                      f"PyTuple_GET_ITEM(args[0], {2 * i + 1});",
                      "    } else {",
                      f"        dt = PyObject_GetAttr(x[{i}], sk_dtype_name);",
                      "        if (dt == NULL) return NULL;",
                      f"        same = dt == PyTuple_GET_ITEM(args[0], {2 * i + 1});",
                      "        Py_DECREF(dt);", "    }", "    if (!same) goto differ;"]
    lines += [f"    return sk_call(self, x, {n});", "differ:",
              "    PyErr_SetString(PyExc_TypeError, \"the argument types differ from this "
              "specialization's\");", "    return NULL;", "}"]
    lines.append(call_slot())
    return "\n".join(lines)


#: The most user arguments the call slot passes on (more: the Python ``__call__``).
SLOT_MAX_ARGS = 60


def call_slot() -> str:
    """``install_slot(cls)``: makes ``sk_tp_call`` the call slot of ``cls``
    (``PointStencil``, once per process: ``stencil.PointStencil._bind_exact``).

    Why: a Python-level ``__call__`` costs a frame, the binding of ``*args`` and ``out=`` and
    the attribute reads of the exact-type test, about 0.3 us, more than the whole C entry of a
    small kernel. ``sk_tp_call`` does the same as that method's first lines: with ``out=``
    and the argument types the instance's ``_sk_fast`` state names (``(call_exact,
    expected, has_cval, cval, after)``, set when a call binds the exact path: ``expected`` is
    ``call_exact``'s), it runs that specialization's ``call_exact`` (of whichever module);
    anything else, a refusal included, goes to the class's Python ``__call__``, and a nonzero
    status to ``after`` (``PointCall._after``), as the Python path does. The code is the same
    in every module, so the class keeps the first module's slot; ``__call__`` in the class
    dict stays the Python method (introspection, ``inspect.signature``); assigning another one
    resets the slot, so it wins."""
    return "\n".join([
        "", "static PyObject *sk_state_name, *sk_out_name, *sk_call_name;", "",
        "static PyObject *sk_tp_call(PyObject *self, PyObject *args, PyObject *kwargs) {",
        "    PyObject *res;",
        "    Py_ssize_t nargs = PyTuple_GET_SIZE(args);",
        "    /* the instance's own state, a new reference: another thread may rebind meanwhile */",
        "    PyObject *dict = PyObject_GenericGetDict(self, NULL);",
        "    if (dict == NULL) return NULL;",
        "    PyObject *state = PyDict_GetItemWithError(dict, sk_state_name);",
        "    Py_DECREF(dict);",
        "    if (state == NULL && PyErr_Occurred()) return NULL;",
        "    if (state == NULL) state = Py_None;",
        "    Py_INCREF(state);",
        "    if (PyTuple_CheckExact(state) && PyTuple_GET_SIZE(state) == 5 && kwargs != NULL",
        "            && PyCFunction_Check(PyTuple_GET_ITEM(state, 0))",
        "            && PyCFunction_GET_FLAGS(PyTuple_GET_ITEM(state, 0)) == METH_FASTCALL",
        "            && PyDict_GET_SIZE(kwargs) == 1 && PyTuple_CheckExact(PyTuple_GET_ITEM(state, 1))",
        "            && PyTuple_GET_SIZE(PyTuple_GET_ITEM(state, 1)) == 2 * (nargs + 3)",
        f"            && nargs <= {SLOT_MAX_ARGS}) {{",
        "        PyObject *out = PyDict_GetItemWithError(kwargs, sk_out_name);",
        "        if (out == NULL && PyErr_Occurred()) { Py_DECREF(state); return NULL; }",
        "        if (out != NULL && out != Py_None) {",
        f"            PyObject *x[{SLOT_MAX_ARGS + 4}];",
        "            x[0] = PyTuple_GET_ITEM(state, 1);",
        "            for (Py_ssize_t i = 0; i < nargs; ++i) x[i + 1] = PyTuple_GET_ITEM(args, i);",
        "            x[nargs + 1] = out;",
        "            x[nargs + 2] = PyTuple_GET_ITEM(state, 2);",
        "            x[nargs + 3] = PyTuple_GET_ITEM(state, 3);",
        "            /* call_exact of that specialization's module, called as C (its self unused) */",
        "            _PyCFunctionFast exact = (_PyCFunctionFast)(void (*)(void))"
        "PyCFunction_GET_FUNCTION(PyTuple_GET_ITEM(state, 0));",
        "            PyObject *status = exact(NULL, x, nargs + 4);",
        "            if (status == NULL) {",
        "                if (!PyErr_ExceptionMatches(PyExc_TypeError) && "
        "!PyErr_ExceptionMatches(PyExc_ValueError)",
        "                        && !PyErr_ExceptionMatches(PyExc_BufferError) && "
        "!PyErr_ExceptionMatches(PyExc_OverflowError)) { Py_DECREF(state); return NULL; }",
        "                PyErr_Clear();  /* other types, or a refusal: the Python path decides "
        "and reports */",
        "            } else {",
        "                long code = PyLong_AsLong(status);",
        "                if (code == 0) { res = out; Py_INCREF(out); }",
        "                else res = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(state, 4), "
        "status, args, out, NULL);",
        "                Py_DECREF(status);", "                Py_DECREF(state);",
        "                return res;", "            }",
        "        }", "    }",
        "    Py_DECREF(state);",
        "    /* the class's Python __call__, with self first */",
        "    PyObject *method = PyObject_GetAttr((PyObject *)Py_TYPE(self), sk_call_name);",
        "    if (method == NULL) return NULL;",
        "    PyObject *with_self = PyTuple_New(nargs + 1);",
        "    if (with_self == NULL) { Py_DECREF(method); return NULL; }",
        "    Py_INCREF(self);", "    PyTuple_SET_ITEM(with_self, 0, self);",
        "    for (Py_ssize_t i = 0; i < nargs; ++i) {",
        "        PyObject *a = PyTuple_GET_ITEM(args, i);",
        "        Py_INCREF(a);", "        PyTuple_SET_ITEM(with_self, i + 1, a);", "    }",
        "    res = PyObject_Call(method, with_self, kwargs);",
        "    Py_DECREF(with_self);", "    Py_DECREF(method);", "    return res;", "}", "",
        "static PyObject *sk_install_slot(PyObject *self, PyObject *cls) {",
        "    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {",
        "        PyErr_SetString(PyExc_TypeError, \"install_slot needs a class\");",
        "        return NULL;", "    }",
        "    ((PyTypeObject *)cls)->tp_call = sk_tp_call;",
        "    PyType_Modified((PyTypeObject *)cls);",
        "    Py_RETURN_NONE;", "}"])


def module_footer(module: str, exact: bool = False, numpy: bool = False) -> str:
    """The module definition around ``sk_call`` (METH_FASTCALL), and ``sk_call_exact``;
    ``numpy``: the module uses NumPy's C API (``sk_view``), imported when it loads."""
    methods = ["    {\"call\", (PyCFunction)(void (*)(void))sk_call, METH_FASTCALL, NULL},"]
    init = [f"PyMODINIT_FUNC PyInit_{module}(void) {{",
            "#ifdef _OPENMP",
            "    sk_team_cell = (int *)PyCapsule_Import(\"stencilkit.runtime.threads.TEAM_CELL\", 0);",
            "    if (sk_team_cell == NULL) PyErr_Clear();  /* then the module's own default */",
            "#endif"]
    if numpy:
        init.append("    import_array();  /* returns NULL with the error set if it fails */")
    if exact:
        methods.append("    {\"call_exact\", (PyCFunction)(void (*)(void))sk_call_exact, "
                       "METH_FASTCALL, NULL},")
        methods.append("    {\"install_slot\", (PyCFunction)sk_install_slot, METH_O, NULL},")
        init += [
            "    sk_dtype_name = PyUnicode_InternFromString(\"dtype\");",
            "    sk_state_name = PyUnicode_InternFromString(\"_sk_fast\");",
            "    sk_out_name = PyUnicode_InternFromString(\"out\");",
            "    sk_call_name = PyUnicode_InternFromString(\"__call__\");",
            "    if (!sk_dtype_name || !sk_state_name || !sk_out_name || !sk_call_name) "
            "return NULL;"]
    module_init = "\n".join([*init, "    return PyModule_Create(&sk_module);", "}"])
    return "\n".join([
        "", "static PyMethodDef sk_methods[] = {", *methods,
        "    {NULL, NULL, 0, NULL}", "};",
        f"static struct PyModuleDef sk_module = {{PyModuleDef_HEAD_INIT, \"{module}\", NULL, -1, "
        "sk_methods};", module_init, ""])


def _scalar_conversion(i: int, a: WrapperArg) -> list[str]:
    t = a.dtype
    c = ctype(t)
    if dtypes.is_complex(t):
        return [f"    Py_complex z{i} = PyComplex_AsCComplex(args[{i}]);",
                f"    {c} s{i} = {'CMPLXF' if t == dtypes.COMPLEX64 else 'CMPLX'}"
                f"(z{i}.real, z{i}.imag);",
                "    if (PyErr_Occurred()) return sk_fail(views, nviews, \"\");"]
    if dtypes.is_float(t):
        conv = f"({c})PyFloat_AsDouble(args[{i}])"
    elif t == dtypes.BOOL:
        conv = f"PyObject_IsTrue(args[{i}]) == 1"
    elif dtypes.is_unsigned(t):
        conv = f"({c})PyLong_AsUnsignedLongLongMask(args[{i}])"
    else:
        conv = f"({c})PyLong_AsLongLong(args[{i}])"
    return [f"    {c} s{i} = {conv};",
            "    if (PyErr_Occurred()) return sk_fail(views, nviews, \"\");"]


def python_entry(loop: k.KernelFunction, module: str) -> str:
    """CPython entry of a ParLoop's loop function (``lower.parloop``):
    ``call(blocks, array, ...)``, one C-contiguous array per pointer parameter after the
    blocks (an int64 (n, 2) array), writable unless the loop only reads it."""
    arrays = [p for p in loop.params if p.pointer]
    lines = ["", "#define PY_SSIZE_T_CLEAN", "#include <Python.h>", "",
             "static PyObject *sk_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {",
             f"    Py_buffer v[{len(arrays)}];", "    int nv = 0;", "    PyObject *res = NULL;",
             f"    if (nargs != {len(arrays)}) {{ PyErr_SetString(PyExc_TypeError, \"wrong "
             "number of arguments\"); return NULL; }"]
    call = []
    for i, p in enumerate(arrays):
        flags = "PyBUF_C_CONTIGUOUS" if p.has(k.ReadOnly) else \
            "PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE"
        lines += [f"    if (PyObject_GetBuffer(args[{i}], &v[nv], {flags}) != 0) goto done;",
                  f"    void *p{i} = v[nv++].buf;"]
        call.append(f"({'const ' if p.has(k.ReadOnly) else ''}{ctype(p.dtype)} *)p{i}")
    # the first pointer is the blocks: nblocks pairs
    lines.append("    int64_t nblocks = (int64_t)(v[0].len / (2 * sizeof(int64_t)));")
    args = ["nblocks" if not p.pointer else call.pop(0) for p in loop.params]
    lines += ["    int status;", "    Py_BEGIN_ALLOW_THREADS",
              f"    status = {loop.name}({', '.join(args)});", "    Py_END_ALLOW_THREADS",
              "    res = PyLong_FromLong(status);",
              "done:", "    for (int q = 0; q < nv; ++q) PyBuffer_Release(&v[q]);",
              "    return res;", "}", module_footer(module)]
    return "\n".join(lines)
